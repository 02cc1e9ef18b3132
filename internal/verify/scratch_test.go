package verify

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
	"github.com/latchkit/latch/store/postgres"
	"github.com/latchkit/latch/store/sqlite"
)

// postgresURL returns the test server's URL, or skips (fails under LATCH_REQUIRE_POSTGRES=1).
func postgresURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("LATCH_TEST_POSTGRES_URL")
	if u == "" {
		if os.Getenv("LATCH_REQUIRE_POSTGRES") == "1" {
			t.Fatal("LATCH_TEST_POSTGRES_URL is unset and LATCH_REQUIRE_POSTGRES=1: run ./scripts/test.sh, which starts a server")
		}
		t.Skip("LATCH_TEST_POSTGRES_URL is unset: skipping the Postgres tests (./scripts/test.sh starts a server)")
	}
	return u
}

// writeReceipts appends n receipts to a store directly.
func writeReceipts(t *testing.T, st store.Store, n int) {
	t.Helper()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for i := range n {
		rc := &receipt.Receipt{
			ReceiptID: newReceiptID(), ActionID: "act_00000000000000000000000000000000", Action: "a.b",
			Principal: receipt.Principal{Agent: "w"}, Environment: "production", Decision: "deny",
			DecisionReason: "unknown_action", Result: receipt.Denied, StartedAt: now, PolicyHash: "sha256:00", Mode: "enforce",
		}
		if _, err := st.Record(t.Context(), &store.RecordRequest{Now: now.Add(time.Duration(i) * time.Second), Receipt: rc}); err != nil {
			t.Fatalf("Record: %v", err)
		}
	}
}

// wantAltered verifies the chain of st and wants exactly content_altered at seq.
func wantAltered(t *testing.T, st store.Store, seq int64) {
	t.Helper()
	ctx := t.Context()
	head, err := st.Head(ctx)
	if err != nil {
		t.Fatalf("Head: %v", err)
	}
	rep, err := receipt.Verify(st.Receipts(ctx, store.ReceiptFilter{}), head)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if rep.OK || len(rep.Breaks) != 1 || rep.Breaks[0].Kind != receipt.BreakContentAltered || rep.Breaks[0].Seq != seq {
		t.Errorf("Verify after altering %d = %+v, want content_altered at %d alone", seq, rep, seq)
	}
}

func TestSQLiteScratch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	sc, err := newScratch(ctx, "sqlite:/operator/never/opened.db")
	if err != nil {
		t.Fatalf("newScratch: %v", err)
	}
	u, err := sc.location(ctx, "g11")
	if err != nil {
		t.Fatalf("location: %v", err)
	}
	if strings.Contains(u, "operator") {
		t.Errorf("scratch %s is beside the operator's store", u)
	}
	st, err := sqlite.Open(ctx, u, nil)
	if err != nil {
		t.Fatalf("open scratch: %v", err)
	}
	writeReceipts(t, st, 3)
	if err := sc.alterReceipt(ctx, u, 2, []byte(`{"altered":true}`)); err != nil {
		t.Fatalf("alterReceipt: %v", err)
	}
	wantAltered(t, st, 2)
	st.Close()
	if err := sc.alterReceipt(ctx, "sqlite:/elsewhere.db", 2, nil); err == nil {
		t.Error("alterReceipt outside the scratch directory succeeded")
	}
	dir := filepath.Dir(strings.TrimPrefix(u, "sqlite:"))
	if err := sc.close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("scratch directory %s still there: %v", dir, err)
	}
}

// TestPostgresScratch: private schemas are created on the operator's server, named
// latch_verify_<random>, altered behind latch's back for G11, and dropped; the operator's schema
// is left alone.
func TestPostgresScratch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	server := postgresURL(t)
	operator := server + "&schema=operator_latch"
	if !strings.Contains(server, "?") {
		operator = server + "?schema=operator_latch"
	}
	sc, err := newScratch(ctx, operator)
	if err != nil {
		t.Fatalf("newScratch: %v", err)
	}
	var urls []string
	for _, name := range []string{"g1", "g11"} {
		u, err := sc.location(ctx, name)
		if err != nil {
			t.Fatalf("location: %v", err)
		}
		if !strings.Contains(u, "schema=latch_verify_") || strings.Contains(u, "operator_latch") {
			t.Fatalf("scratch URL %s", u)
		}
		urls = append(urls, u)
	}
	st, err := postgres.Open(ctx, urls[1], nil)
	if err != nil {
		t.Fatalf("open scratch: %v", err)
	}
	writeReceipts(t, st, 3)
	if err := sc.alterReceipt(ctx, urls[1], 2, []byte(`{"altered":true}`)); err != nil {
		t.Fatalf("alterReceipt: %v", err)
	}
	wantAltered(t, st, 2)
	st.Close()

	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	schemas := func() []string {
		rows, err := conn.Query(ctx, "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE 'latch_verify_%' OR schema_name = 'operator_latch'")
		if err != nil {
			t.Fatalf("list schemas: %v", err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("list schemas: %v", err)
		}
		return names
	}
	mine := func(names []string) int {
		n := 0
		for _, s := range names {
			for _, u := range urls {
				if strings.Contains(u, "schema="+s) {
					n++
				}
			}
			if s == "operator_latch" {
				t.Errorf("the operator's schema was created")
			}
		}
		return n
	}
	if n := mine(schemas()); n != 2 {
		t.Errorf("%d scratch schemas exist, want 2", n)
	}
	if err := sc.close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	if n := mine(schemas()); n != 0 {
		t.Errorf("%d scratch schemas left after close", n)
	}
}

// TestPostgresRun runs the catalogue against a Postgres store URL (this test binary links the
// Postgres store in, as the latch command does).
func TestPostgresRun(t *testing.T) {
	t.Parallel()
	server := postgresURL(t)
	p := parsePolicyForRun(t)
	// G11, G28, G29, G30, G31, G32 and L4 edit the scratch schema behind latch's back.
	only := []string{"G3", "G11", "G28", "G29", "G30", "G31", "G32", "L4"}
	rep, err := Run(t.Context(), &Config{Policy: p, StoreURL: server, Only: only})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var b bytes.Buffer
	rep.WriteText(&b)
	if rep.Backend != "postgres" || rep.Passed != len(only) {
		t.Errorf("Run on postgres:\n%s", b.String())
	}
	// The retention guarantees' flow faults edit a Postgres scratch store too.
	rep, err = Run(t.Context(), &Config{Policy: p, StoreURL: server, Only: []string{"G29", "G30", "G32"},
		faults: []string{faultPrunePastCheckpoint, faultHoldIgnored, faultPruneReseals}})
	if err != nil {
		t.Fatalf("Run with the retention faults: %v", err)
	}
	b.Reset()
	rep.WriteText(&b)
	if rep.Failed != 3 {
		t.Errorf("Run on postgres with the retention faults, want G29, G30, G32 to fail:\n%s", b.String())
	}
	for _, r := range rep.Results {
		if r.Reason == controlFailedReason {
			t.Errorf("%s on postgres with the retention faults failed its control, want the guarantee itself to fail: %s", r.ID, r.Detail)
		}
	}
	// And L4 able to fail there: the edit is seen, and a verifier blind to state misses it.
	rep, err = Run(t.Context(), &Config{Policy: p, StoreURL: server, Only: []string{"L4"}, faults: []string{faultStateBlind}})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rep.Failed != 1 || rep.Results[0].Reason == controlFailedReason {
		t.Errorf("L4 with %s on postgres: %+v", faultStateBlind, rep.Results)
	}
}

// TestPostgresEnvelope runs G22–G24 (and G31, whose older calls lose their ledger rows) on the
// envelope policy against a Postgres store URL: G22's racers reserve in the same private schema
// as the scenario, and the ledger holds and releases there; each envelope fault makes its
// guarantee fail on Postgres too.
func TestPostgresEnvelope(t *testing.T) {
	t.Parallel()
	server := postgresURL(t)
	p, err := policy.Load(filepath.Join("testdata", "envelope.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	only := []string{"G22", "G23", "G24", "G31"} // G31 removes ledger rows of its older calls there too
	rep, err := Run(t.Context(), &Config{Policy: p, StoreURL: server, Only: only})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var b bytes.Buffer
	rep.WriteText(&b)
	if rep.Backend != "postgres" || rep.Passed != len(only) {
		t.Errorf("Run on postgres:\n%s", b.String())
	}
	if d := rep.Results[3].Detail; rep.Results[3].ID != "G31" || strings.Contains(d, "; 0 ledger rows") || !strings.Contains(d, "ledger rows of their calls removed") {
		t.Errorf("G31 on postgres removed no ledger rows: %s", d)
	}
	only = only[:3]
	rep, err = Run(t.Context(), &Config{Policy: p, StoreURL: server, Only: only,
		faults: []string{faultBudgetUnchecked, faultScopeFailsOpen, faultTasksIgnored}})
	if err != nil {
		t.Fatalf("Run with the envelope faults: %v", err)
	}
	b.Reset()
	rep.WriteText(&b)
	if rep.Failed != len(only) {
		t.Errorf("Run on postgres with the envelope faults, want G22, G23, G24 to fail:\n%s", b.String())
	}
	for _, r := range rep.Results {
		if r.Reason == controlFailedReason {
			t.Errorf("%s on postgres with the envelope faults failed its control: %s", r.ID, r.Detail)
		}
	}
}

func parsePolicyForRun(t *testing.T) *policy.Policy {
	t.Helper()
	return parsePolicy(t, "schema: latch.policy/v1\nactions:\n  a.b:\n    effect: \"a:{id}\"\n    decision: allow\n")
}

// TestNotApplicableBeforeScratch: List judges applicability by stopping each scenario at its
// first scratch environment, so Run refuses an N/A found after one (it would be listed
// applicable) and keeps one found before it.
func TestNotApplicableBeforeScratch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	sc, err := newScratch(ctx, "")
	if err != nil {
		t.Fatalf("newScratch: %v", err)
	}
	defer sc.close(context.WithoutCancel(ctx))
	r, err := newRunner(&Config{Policy: parsePolicyForRun(t), Now: time.Now()}, faultSet{}, sc)
	if err != nil {
		t.Fatalf("newRunner: %v", err)
	}
	defer r.close()
	early := guarantee{"X1", "decides first", func(r *runner, ctx context.Context) (outcome, error) {
		return notApplicable("nothing to exercise"), nil
	}}
	late := guarantee{"X2", "decides late", func(r *runner, ctx context.Context) (outcome, error) {
		e, err := r.newEnv(ctx, "x2", r.sp)
		if err != nil {
			return outcome{}, err
		}
		defer e.close()
		return notApplicable("found while running"), nil
	}}
	if o, err := r.verdict(ctx, early); err != nil || o.status != NotApplicable {
		t.Errorf("N/A before any scratch store: %+v, %v; want the N/A", o, err)
	}
	if o, err := r.verdict(ctx, late); err == nil || !strings.Contains(err.Error(), "verify X2: found N/A (found while running) after opening a scratch store") {
		t.Errorf("N/A after a scratch store: %+v, %v; want an error naming X2", o, err)
	}
	// List sees the late one as applicable, which is why Run refuses it.
	r.dry = true
	if _, err := late.run(r, ctx); !errors.Is(err, errDry) {
		t.Errorf("dry run of X2 = %v, want errDry", err)
	}
}
