package latch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// benchPolicy decides the typical call of the benchmarks: five arguments, three rules, an
// effect and a resource template, as a billing worker would run it.
const benchPolicy = `
schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    resource: "invoice:{invoice_id}"
    rules:
      - when: { amount_gte: 0, amount_lte: 50000, currency_in: [EUR, USD, GBP] }
        decision: allow
      - when: { amount_lte: 500000, customer_prefix: "cus_" }
        decision: approve
      - decision: deny
`

// benchArgs is a typical argument object: five fields, keys out of canonical order.
var benchArgs = json.RawMessage(`{"invoice_id":"inv_88","amount":24900,"currency":"EUR","customer":"cus_1","capture":true}`)

func benchGuard(b *testing.B, url string) *latch.Guard {
	b.Helper()
	p, err := policy.Parse("latch.yaml", []byte(benchPolicy))
	if err != nil {
		b.Fatal(err)
	}
	if url == "" {
		url = "sqlite:" + filepath.Join(b.TempDir(), "state.db")
	}
	g, err := latch.Open(context.Background(), &latch.Config{Policy: p, StoreURL: url})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	return g
}

// BenchmarkEvaluate is the pure share of one protected call, through the path the pipeline takes:
// canonicalize the arguments, render the resource and the effect key, build and hash the action
// document, evaluate the policy. Evaluate writes nothing, so the store is never touched.
// Target (issue 7): under 5 µs and under 30 allocations per call.
func BenchmarkEvaluate(b *testing.B) {
	g := benchGuard(b, "")
	ctx := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "billing-worker"})
	call := &latch.Call{Action: "billing.charge", Arguments: benchArgs}
	b.ReportAllocs()
	for b.Loop() {
		ev, err := g.Evaluate(ctx, call)
		if err != nil || ev.Decision != policy.Allow {
			b.Fatalf("Evaluate = %+v, %v", ev, err)
		}
	}
}

// benchReceipt is a receipt as a committed call of BenchmarkEvaluate's shape leaves it.
func benchReceipt(i int) *receipt.Receipt {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond)
	return &receipt.Receipt{
		ReceiptID: fmt.Sprintf("rcp_%032x", i), ActionID: fmt.Sprintf("act_%032x", i), Action: "billing.charge",
		ActionHash: "sha256:" + strings.Repeat("ab", 32),
		Arguments:  json.RawMessage(fmt.Sprintf(`{"amount":24900,"capture":true,"currency":"EUR","customer":"cus_1","invoice_id":"inv_%d"}`, i)),
		Resource:   fmt.Sprintf("invoice:inv_%d", i), Principal: receipt.Principal{Agent: "billing-worker"},
		Environment: "production", Decision: "allow", DecisionReason: "rule[0]", EffectKey: fmt.Sprintf("charge:inv_%d", i),
		Attempt: 1, IdempotencyToken: "0f8e3c2a-1b4d-8e6f-9a0b-1c2d3e4f5a6b", Result: receipt.Committed,
		StartedAt: t0, FinishedAt: t0.Add(3 * time.Millisecond), PolicyHash: "sha256:" + strings.Repeat("cd", 32), Mode: "enforce",
	}
}

// BenchmarkSeal is the receipt share of recording a call: build the document, canonicalize it,
// hash it.
func BenchmarkSeal(b *testing.B) {
	r := benchReceipt(1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := receipt.Seal(r, 1, receipt.GenesisHash); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyChain verifies a chain of committed calls read back from a SQLite store, as
// `latch receipts --verify` does. Target (issue 7): ≥ 200,000 receipts/s.
func BenchmarkVerifyChain(b *testing.B) {
	const n = 20000
	g := benchGuard(b, "")
	ctx := context.Background()
	// The chain is written through the store's own Record, so that the rows are exactly what a
	// worker leaves behind.
	for i := 1; i <= n; i++ {
		rc := benchReceipt(i)
		if _, err := g.Store().Record(ctx, &store.RecordRequest{Now: rc.FinishedAt, Receipt: rc}); err != nil {
			b.Fatal(err)
		}
	}
	head, err := g.Store().Head(ctx)
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, rows func() iter.Seq2[receipt.Sealed, error]) {
		b.ReportAllocs()
		for b.Loop() {
			rep, err := receipt.Verify(rows(), head)
			if err != nil || !rep.OK || rep.Verified != n {
				b.Fatalf("Verify = %+v, %v", rep, err)
			}
		}
		per := b.Elapsed().Seconds() / float64(b.N*n)
		b.ReportMetric(per*1e9, "ns/receipt")
		b.ReportMetric(1/per, "receipts/s")
	}
	b.Run("sqlite", func(b *testing.B) {
		run(b, func() iter.Seq2[receipt.Sealed, error] { return g.Store().Receipts(ctx, store.ReceiptFilter{}) })
	})
	// memory isolates Verify from the reads: the same rows, already in memory.
	var rows []receipt.Sealed
	for r, err := range g.Store().Receipts(ctx, store.ReceiptFilter{}) {
		if err != nil {
			b.Fatal(err)
		}
		rows = append(rows, r)
	}
	b.Run("memory", func(b *testing.B) {
		run(b, func() iter.Seq2[receipt.Sealed, error] {
			return func(yield func(receipt.Sealed, error) bool) {
				for _, r := range rows {
					if !yield(r, nil) {
						return
					}
				}
			}
		})
	})
}

// BenchmarkExecute is one protected call through the whole pipeline on SQLite with
// synchronous=normal: normalize, decide, reserve, execute a trivial function, record. Every
// iteration uses a distinct effect key.
func BenchmarkExecute(b *testing.B) {
	g := benchGuard(b, "sqlite:"+filepath.Join(b.TempDir(), "state.db")+"?synchronous=normal")
	ctx := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "billing-worker"})
	fn := func(context.Context, json.RawMessage) (any, error) { return nil, nil }
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		call := &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(fmt.Sprintf(`{"invoice_id":"inv_%d","amount":24900,"currency":"EUR","customer":"cus_1","capture":true}`, i))}
		if _, err := g.Execute(ctx, call, fn); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExecuteParallel is BenchmarkExecute from 8 goroutines at once: the store commits the
// writes of the calls in flight together (group commit).
func BenchmarkExecuteParallel(b *testing.B) {
	g := benchGuard(b, "sqlite:"+filepath.Join(b.TempDir(), "state.db")+"?synchronous=normal")
	ctx := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "billing-worker"})
	fn := func(context.Context, json.RawMessage) (any, error) { return nil, nil }
	var n atomic.Int64
	b.SetParallelism(8 / runtime.GOMAXPROCS(0))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			call := &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(fmt.Sprintf(`{"invoice_id":"inv_%d","amount":24900,"currency":"EUR","customer":"cus_1","capture":true}`, i))}
			if _, err := g.Execute(ctx, call, fn); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
