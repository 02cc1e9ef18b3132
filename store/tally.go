package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"

	"github.com/latchkit/latch/receipt"
)

// KeptTally is a count of the chain's call receipts (receipt.Tally) that a store keeps so that
// the next count of the whole chain reads only the receipts appended since: Stats counts the
// receipts from seq From through seq Through. It is a cache of a count, never evidence: it is
// not part of the chain, and a count that finds the chain no longer starts at From (it was
// pruned since) counts the chain again from its start.
type KeptTally struct {
	From, Through int64
	Stats         receipt.Stats
}

// TallyKeeper is a store that keeps a KeptTally (both stores, from the schema that added it).
type TallyKeeper interface {
	// KeptTally returns the tally kept, nil when there is none or the chain no longer starts
	// at its From, both read in one snapshot.
	KeptTally(ctx context.Context) (*KeptTally, error)
	// KeepTally keeps t in place of the tally kept, unless that one counts further (a count
	// that raced this one ended later). A read-only store returns ErrReadOnly.
	KeepTally(ctx context.Context, t *KeptTally) error
}

// CountChain counts every call receipt of st's chain: the tally k keeps of it and the receipts
// appended after that, or every receipt when k keeps none (or is nil). It returns the count as a
// tally to keep and how many receipts it read; it does not keep it (the caller decides, and a
// read-only store cannot).
func CountChain(ctx context.Context, st Store, k TallyKeeper) (*KeptTally, int, error) {
	var kept *KeptTally
	if k != nil {
		var err error
		if kept, err = k.KeptTally(ctx); err != nil {
			return nil, 0, fmt.Errorf("count receipts: kept tally: %w", err)
		}
	}
	out := &KeptTally{}
	if kept != nil {
		*out = *kept
	}
	read := 0
	tail := func(yield func(receipt.Sealed, error) bool) {
		for r, err := range st.Receipts(ctx, ReceiptFilter{AfterSeq: out.Through}) {
			if err == nil {
				read++
				if out.From == 0 {
					out.From = r.Seq
				}
				out.Through = r.Seq
			}
			if !yield(r, err) {
				return
			}
		}
	}
	more, err := receipt.Tally(iter.Seq2[receipt.Sealed, error](tail))
	if err != nil {
		return nil, 0, fmt.Errorf("count receipts: %w", err)
	}
	if kept != nil {
		more = kept.Stats.Add(more)
	}
	out.Stats = more
	return out, read, nil
}

// SchemaReporter is a store that says which schema it was opened at: At, and Latest, the one
// this binary writes. A read-only store may be older; opening it for writing would migrate it.
type SchemaReporter interface {
	Schema() (at, latest int)
}

// EncodeTally is how a store keeps t's counts: a JSON document, once t is checked to count
// receipts (From at least 1, Through not below it).
func EncodeTally(t *KeptTally) (string, error) {
	if t == nil || t.From < 1 || t.Through < t.From {
		return "", errors.New("keep tally: no tally of receipts")
	}
	doc, err := json.Marshal(t.Stats)
	if err != nil {
		return "", fmt.Errorf("keep tally: %w", err)
	}
	return string(doc), nil
}

// DecodeTally reads the counts a store kept (EncodeTally) into t, when the chain still starts
// at t.From (first is the chain's first seq, nil for an empty chain); it returns nil when it
// does not — a prune removed receipts the tally counted — so that the count starts over.
func DecodeTally(t *KeptTally, doc string, first *int64) (*KeptTally, error) {
	if first == nil || *first != t.From {
		return nil, nil
	}
	if err := json.Unmarshal([]byte(doc), &t.Stats); err != nil {
		return nil, fmt.Errorf("kept tally: %w", err)
	}
	return t, nil
}
