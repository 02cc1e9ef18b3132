package store

import (
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/latchkit/latch/receipt"
)

// TestLatestRuns: whatever the limit (every key in its own run, a few runs, all in memory),
// sorted yields each key once, in byte order, with the state of the highest seq that asserted
// one and whether a v1 record named it — what a map of every key would say —, maxRuns runs of a
// level are merged into one of the next, and close leaves no temporary file behind.
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
		e.merge(a.seq, a.state, a.v1, a.seq)
	}
	for _, limit := range []int{1, 7, 64, 100000} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			dir := t.TempDir()
			t.Setenv("TMPDIR", dir)
			l := newLatestRuns(effectCodec, limit, "statecheck", "check state")
			for _, a := range adds {
				if err := l.add(a.key, a.seq, a.state, a.v1); err != nil {
					t.Fatal(err)
				}
			}
			if spilled := len(l.runs) > 0; spilled != (limit < 300) {
				t.Errorf("limit %d: %d runs written for 300 keys", limit, len(l.runs))
			}
			if held, _ := filepath.Glob(filepath.Join(dir, "latch-statecheck-*")); len(held) != len(l.runs) {
				t.Errorf("limit %d: %d runs, %d latch-statecheck-* files in TMPDIR", limit, len(l.runs), len(held))
			}
			perLevel := map[int]int{}
			for _, lv := range l.levels {
				perLevel[lv]++
			}
			for lv, n := range perLevel {
				if n >= maxRuns {
					t.Errorf("limit %d: %d runs kept at level %d, want them merged below %d", limit, n, lv, maxRuns)
				}
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
				case e.seq != w.seq || e.v1 != w.v1 || e.v1seq != w.v1seq || (e.state == nil) != (w.state == nil) || (e.state != nil && *e.state != *w.state):
					t.Errorf("key %q: seq %d v1 %v (%d) state %+v, want seq %d v1 %v (%d) state %+v", e.key, e.seq, e.v1, e.v1seq, e.state, w.seq, w.v1, w.v1seq, w.state)
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

// TestLatestRunsWriteEachKeyOnceALevel: a key is written to runs once a level, so the runs of a
// chain cost some log(keys) writes a key, not a number that grows with the chain: 3 * 64 * 64
// keys, one a run, are written at levels 0, 1 and 2 and nowhere else. Merging every run into the
// one before (the runs' first design) wrote them some 100 times each.
func TestLatestRunsWriteEachKeyOnceALevel(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	const keys = 3 * maxRuns * maxRuns
	l := newLatestRuns(effectCodec, 1, "statecheck", "check state")
	defer l.close()
	for i := range keys {
		if err := l.add(fmt.Sprintf("charge:inv_%06d", (i*7919)%keys), int64(i+1), &receipt.EffectState{State: "committed", Attempt: 1}, false); err != nil {
			t.Fatal(err)
		}
	}
	if want := int64(3 * keys); l.written != want {
		t.Errorf("%d keys were written %d times to runs, want %d (once at each of 3 levels)", keys, l.written, want)
	}
	if !slices.Equal(l.levels, []int{2, 2, 2}) {
		t.Errorf("runs at levels %v, want three of level 2", l.levels)
	}
	n := 0
	for _, err := range l.sorted() {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != keys {
		t.Errorf("%d keys yielded, want %d", n, keys)
	}
}

// TestLatestRunsTemporaryFileRefused: a run that cannot be written is an error, not a check that
// silently forgot keys.
func TestLatestRunsTemporaryFileRefused(t *testing.T) {
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	l := newLatestRuns(approvalCodec, 2, "statecheck", "check state")
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

// TestCarrierInRuns: a Carrier that writes its rows to runs (a limit of 3 rows in memory)
// carries what the record-by-record rule says — the last record of a row that asserts a state,
// else the last v1 record naming it — for rows carried by an earlier prune and rows of removed
// records alike, in kind and key order, and Close leaves no temporary file.
func TestCarrierInRuns(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	defer func(n int) { runLimit = n }(runLimit)
	runLimit = 3

	rng := rand.New(rand.NewPCG(7, 11))
	kinds := []string{CarriedEffect, CarriedApproval, CarriedDelegation, CarriedHold}
	var adds []Carried
	for seq := int64(1); seq <= 400; seq++ {
		it := Carried{Kind: kinds[rng.IntN(len(kinds))], Key: fmt.Sprintf("k%d", rng.IntN(40)), Seq: seq, Doc: v1Doc}
		if rng.IntN(3) != 0 {
			it.Doc = fmt.Appendf(nil, `{%q:{"n":%d}}`, it.Kind, seq)
		}
		adds = append(adds, it)
	}
	// The rule as it is applied record by record, in seq order.
	want := map[[2]string]Carried{}
	for _, it := range adds {
		k := [2]string{it.Kind, it.Key}
		if old, ok := want[k]; ok && isV1(it.Doc) && !isV1(old.Doc) {
			continue
		}
		want[k] = it
	}
	c := NewCarrier()
	for _, it := range adds {
		if err := c.Carry(it); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.runs.runs) == 0 {
		t.Fatalf("no run written with a limit of 3 for %d rows", len(want))
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "latch-prune-*")); len(m) == 0 {
		t.Errorf("no latch-prune-* file in TMPDIR while runs are held")
	}
	var prev [2]string
	n := 0
	for it, err := range c.Sorted() {
		if err != nil {
			t.Fatal(err)
		}
		k := [2]string{it.Kind, it.Key}
		if n > 0 && (k[0] < prev[0] || k[0] == prev[0] && k[1] <= prev[1]) {
			t.Fatalf("%v after %v: not in kind and key order", k, prev)
		}
		if w := want[k]; w.Seq != it.Seq || string(w.Doc) != string(it.Doc) {
			t.Errorf("%v: carried seq %d %s, want seq %d %s", k, it.Seq, it.Doc, w.Seq, w.Doc)
		}
		prev, n = k, n+1
	}
	if n != len(want) {
		t.Errorf("%d rows carried, want %d", n, len(want))
	}
	c.Close()
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 0 {
		t.Errorf("files left after Close: %v", m)
	}
}
