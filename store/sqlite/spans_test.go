package sqlite

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// TestReceiptWindows: a time window of receipts (latch stats --since) read through the spans of
// the chain is exactly the receipts that finished in it, whatever order the receipts finished
// in — receipts the migration summarized, receipts appended after it, the span a window starts
// in, the receipts after the last span — and every span the chain has completed is in
// receipt_spans with the earliest and latest finished_at of its receipts.
func TestReceiptWindows(t *testing.T) {
	t.Parallel()
	url := backend.New(t)
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// Finish times out of the chain's order: each call finishes within an hour of its place,
	// so windows cut through spans, and a span's earliest and latest are not its ends.
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
	db := rawDB(t, s.path)

	// The spans: one for each 512 receipts the chain has completed, none for the rest.
	var spans []string
	for _, r := range dump(t, db, `SELECT first_seq, last_seq, min_finished, max_finished FROM receipt_spans ORDER BY last_seq`) {
		spans = append(spans, fmt.Sprint(r...))
	}
	var want []string
	for last := int64(spanReceipts); last <= before+after; last += spanReceipts {
		r := dump(t, db, fmt.Sprintf(`SELECT %d, %d, MIN(finished_at), MAX(finished_at) FROM receipts WHERE seq BETWEEN %d AND %d`,
			last-spanReceipts+1, last, last-spanReceipts+1, last))
		want = append(want, fmt.Sprint(r[0]...))
	}
	if len(want) != 3 || !slices.Equal(spans, want) {
		t.Fatalf("receipt_spans =\n%s\nwant\n%s", strings.Join(spans, "\n"), strings.Join(want, "\n"))
	}

	// Windows from before the first receipt to after the last, through every span and the tail.
	first, last := base.Add(-time.Second), base.Add(time.Duration(before+after)*time.Second+2*time.Hour)
	for since := first; !since.After(last); since = since.Add(97 * time.Second) {
		var got []int64
		for r, err := range s.Receipts(t.Context(), store.ReceiptFilter{Since: since}) {
			if err != nil {
				t.Fatalf("Receipts(since %s): %v", since, err)
			}
			got = append(got, r.Seq)
		}
		exact := []int64{}
		for _, r := range dump(t, db, fmt.Sprintf(`SELECT seq FROM receipts WHERE finished_at >= %d ORDER BY seq`, since.UnixNano())) {
			exact = append(exact, r[0].(int64))
		}
		if !slices.Equal(append([]int64{}, got...), exact) {
			t.Fatalf("Receipts(since %s) = %d receipts, want the %d that finished since (%v… against %v…)",
				since, len(got), len(exact), got[:min(5, len(got))], exact[:min(5, len(exact))])
		}
	}
}
