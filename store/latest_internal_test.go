package store

import (
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/latchkit/latch/receipt"
)

// TestLatestRuns: whatever the limit (every key in its own run, a few runs, all in memory),
// sorted yields each key once, in byte order, with the state of the highest seq that asserted
// one and whether a v1 record named it — what a map of every key would say —, runs past maxRuns
// are merged into one, and close leaves no temporary file behind.
func TestLatestRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type add struct {
		key   string
		seq   int64
		state *receipt.EffectState
		v1    bool
	}
	var adds []add
	for seq := int64(1); seq <= 2000; seq++ {
		a := add{key: fmt.Sprintf("charge:inv_%d", rng.IntN(300)), seq: seq, v1: rng.IntN(50) == 0}
		if rng.IntN(4) != 0 {
			a.state = &receipt.EffectState{State: []string{"committed", "failed", "ambiguous"}[rng.IntN(3)], Attempt: rng.IntN(3) + 1,
				Holder: fmt.Sprintf("act_%d", seq), ResultHash: fmt.Sprintf("%x", seq*7919), Conflict: rng.IntN(9) == 0,
				ResolvedBy: []string{"", "cli:ana", "reconcile:ledger é"}[rng.IntN(3)]}
		}
		adds = append(adds, a)
	}
	rng.Shuffle(len(adds), func(i, j int) { adds[i], adds[j] = adds[j], adds[i] }) // the carried records come after the chain's
	want := map[string]*latest[receipt.EffectState]{}
	for _, a := range adds {
		e := want[a.key]
		if e == nil {
			e = &latest[receipt.EffectState]{key: a.key}
			want[a.key] = e
		}
		e.merge(a.seq, a.state, a.v1)
	}
	for _, limit := range []int{1, 7, 64, 100000} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv("TMPDIR", dir)
			l := newLatestRuns(effectCodec, limit)
			for _, a := range adds {
				if err := l.add(a.key, a.seq, a.state, a.v1); err != nil {
					t.Fatal(err)
				}
			}
			if spilled := len(l.runs) > 0; spilled != (limit < 300) {
				t.Errorf("limit %d: %d runs written for 300 keys", limit, len(l.runs))
			}
			if len(l.runs) >= maxRuns {
				t.Errorf("limit %d: %d runs kept, want them merged below %d", limit, len(l.runs), maxRuns)
			}
			n, prev := 0, ""
			for e, err := range l.sorted() {
				if err != nil {
					t.Fatal(err)
				}
				if n > 0 && e.key <= prev {
					t.Fatalf("key %q after %q", e.key, prev)
				}
				w := want[e.key]
				switch {
				case w == nil:
					t.Fatalf("key %q was never added", e.key)
				case e.seq != w.seq || e.v1 != w.v1 || (e.state == nil) != (w.state == nil) || (e.state != nil && *e.state != *w.state):
					t.Errorf("key %q: seq %d v1 %v state %+v, want seq %d v1 %v state %+v", e.key, e.seq, e.v1, e.state, w.seq, w.v1, w.state)
				}
				n, prev = n+1, e.key
			}
			if n != len(want) {
				t.Errorf("%d keys yielded, want %d", n, len(want))
			}
			l.close()
			if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
				t.Errorf("close left %v", left)
			}
		})
	}
}

// TestLatestRunsTemporaryFileRefused: a run that cannot be written is an error, not a check that
// silently forgot keys.
func TestLatestRunsTemporaryFileRefused(t *testing.T) {
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	l := newLatestRuns(approvalCodec, 2)
	defer l.close()
	err := l.add("apr_1", 1, &receipt.ApprovalState{Status: "granted"}, false)
	if err == nil {
		err = l.add("apr_2", 2, nil, false)
	}
	if err == nil || !strings.Contains(err.Error(), "check state: a temporary run") {
		t.Fatalf("add past the limit with no temporary directory = %v, want an error naming the run", err)
	}
}

// TestAhead: ahead yields what its sequence yields, in order, an error after the items before
// it; and a consumer that stops early gets control back only once the sequence has stopped
// being read (the state check's transaction ends right after).
func TestAhead(t *testing.T) {
	count := func(n int, fail error) iter.Seq2[int, error] {
		return func(yield func(int, error) bool) {
			for i := range n {
				if !yield(i, nil) {
					return
				}
			}
			if fail != nil {
				yield(0, fail)
			}
		}
	}
	var got []int
	for v, err := range ahead(count(1000, nil)) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if len(got) != 1000 || got[0] != 0 || got[999] != 999 {
		t.Fatalf("ahead yielded %d items", len(got))
	}
	boom := errors.New("boom")
	n, last := 0, error(nil)
	for _, err := range ahead(count(300, boom)) {
		if err != nil {
			last = err
			break
		}
		n++
	}
	if n != 300 || last != boom {
		t.Fatalf("ahead: %d items then %v, want 300 then boom", n, last)
	}
	var reading atomic.Int32
	slow := func(yield func(int, error) bool) {
		reading.Store(1)
		defer reading.Store(0)
		for i := 0; ; i++ {
			if !yield(i, nil) {
				return
			}
		}
	}
	for v := range ahead(slow) {
		if v == 10 {
			break
		}
	}
	if reading.Load() != 0 {
		t.Fatal("ahead returned while its sequence was still being read")
	}
}
