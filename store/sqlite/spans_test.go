package sqlite

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
	"github.com/latchkit/latch/store/storetest"
)

// TestReceiptWindows: a time window of receipts (latch stats --since) read through the spans of
// the chain is exactly the receipts that finished in it, whatever order the receipts finished
// in — receipts the migration summarized, receipts appended after it, the span a window starts
// in, the receipts after the last span — and every span the chain has completed is in
// receipt_spans with the latest finished_at of its receipts.
func TestReceiptWindows(t *testing.T) {
	t.Parallel()
	url := backend.New(t)
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// Finish times out of the chain's order: each call finishes within an hour of its place,
	// so windows cut through spans, and a span's latest is not its last.
	rng := rand.New(rand.NewPCG(7, 26))
	finished := func(i int) time.Time {
		return base.Add(time.Duration(i)*time.Second + time.Duration(rng.IntN(3600))*time.Second)
	}
	const before, after = 700, 900 // calls at schema 25, then at the latest schema
	old := openAtVersion(t, url, receiptSpansVersion-1)
	for i := range before {
		protectedCall(t, old, i, finished(i))
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	s := open(t, url, nil) // migrated: the spans of the receipts already stored
	for i := before; i < before+after; i++ {
		protectedCall(t, s, i, finished(i))
	}
	// The spans: one for each 512 receipts the chain has completed, none for the rest; and
	// windows from before the first receipt to after the last, through every span and the tail.
	checkSpans(t, s, spanReceipts, before+after, 3)
	checkWindows(t, s, base.Add(-time.Second), base.Add(time.Duration(before+after)*time.Second+2*time.Hour))
}

// TestReceiptSpansPruned: a prune drops the spans whose receipts it removed, keeps the span it
// cut through, and the windows stay exact over what is left.
func TestReceiptSpansPruned(t *testing.T) {
	t.Parallel()
	s := open(t, backend.New(t), nil)
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const calls, kept = 1100, 700 // the checkpoint at receipt 700: span 1–512 goes, 513–1024 stays
	for i := range kept {
		protectedCall(t, s, i, base.Add(time.Duration(i)*time.Second))
	}
	key, _ := storetest.SigningKey(t)
	cp, err := store.SignCheckpoint(t.Context(), s, key, base.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for i := kept; i < calls; i++ {
		protectedCall(t, s, i, base.Add(time.Duration(i)*time.Second))
	}
	rs, err := store.Retention(s)
	if err != nil {
		t.Fatal(err)
	}
	before := spanRows(t, s)
	if _, err := rs.Prune(t.Context(), &store.PruneRequest{Now: base.Add(2 * time.Hour), By: "cli:ops", BeforeSeq: cp.Seq}); err != nil {
		t.Fatalf("Prune: %v", err)
	}
	// The span of seqs 1–512 went with its receipts; 513–1024, cut through, stays as written
	// (its latest receipt may be one the prune removed: a window then reads it for nothing).
	if after := spanRows(t, s); len(before) != 2 || !slices.Equal(after, before[1:]) {
		t.Fatalf("receipt_spans after the prune =\n%s\nwant the second of\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
	}
	checkWindows(t, s, base.Add(-time.Second), base.Add(calls*time.Second+time.Minute))
}

// spanRows lists receipt_spans, a row a line.
func spanRows(t *testing.T, s *Store) []string {
	t.Helper()
	var spans []string
	for _, r := range dump(t, rawDB(t, s.path), `SELECT first_seq, last_seq, max_finished FROM receipt_spans ORDER BY last_seq`) {
		spans = append(spans, fmt.Sprint(r...))
	}
	return spans
}

// checkSpans wants receipt_spans to hold exactly the n spans from the one ending at first
// through the last the chain up to head completes, each with the latest finished_at of its
// receipts.
func checkSpans(t *testing.T, s *Store, first, head int64, n int) {
	t.Helper()
	db := rawDB(t, s.path)
	spans := spanRows(t, s)
	var want []string
	for last := first; last <= head; last += spanReceipts {
		r := dump(t, db, fmt.Sprintf(`SELECT %d, %d, MAX(finished_at) FROM receipts WHERE seq BETWEEN %d AND %d`,
			last-spanReceipts+1, last, last-spanReceipts+1, last))
		want = append(want, fmt.Sprint(r[0]...))
	}
	if len(want) != n || !slices.Equal(spans, want) {
		t.Fatalf("receipt_spans =\n%s\nwant\n%s", strings.Join(spans, "\n"), strings.Join(want, "\n"))
	}
}

// checkWindows wants every window from first to last, in steps of 97 s, and every window that
// begins at the latest finished_at of a span (the bound a span is selected by), to hold exactly
// the receipts that a scan of the table finds finished in it.
func checkWindows(t *testing.T, s *Store, first, last time.Time) {
	t.Helper()
	db := rawDB(t, s.path)
	var windows []time.Time
	for since := first; !since.After(last); since = since.Add(97 * time.Second) {
		windows = append(windows, since)
	}
	for _, r := range dump(t, db, `SELECT max_finished FROM receipt_spans`) {
		windows = append(windows, time.Unix(0, r[0].(int64)).UTC())
	}
	for _, since := range windows {
		var got []int64
		for r, err := range s.Receipts(t.Context(), store.ReceiptFilter{Since: since}) {
			if err != nil {
				t.Fatalf("Receipts(since %s): %v", since, err)
			}
			got = append(got, r.Seq)
		}
		var exact []int64
		for _, r := range dump(t, db, fmt.Sprintf(`SELECT seq FROM receipts WHERE finished_at >= %d ORDER BY seq`, since.UnixNano())) {
			exact = append(exact, r[0].(int64))
		}
		if !slices.Equal(got, exact) {
			t.Fatalf("Receipts(since %s) = %d receipts, want the %d that finished since (%v… against %v…)",
				since, len(got), len(exact), got[:min(5, len(got))], exact[:min(5, len(exact))])
		}
	}
}
