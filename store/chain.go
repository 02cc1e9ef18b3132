package store

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/latchkit/latch/receipt"
)

// ChainReader is implemented by stores that read the chain head and every receipt, with the
// columns each is indexed by (receipt.Sealed.Index), in one consistent snapshot: one read
// transaction that sees no append which committed after it began. A walk that reads the head
// and the receipts separately while workers append finds a head past the last receipt it read,
// and reports an intact chain as head_mismatch.
type ChainReader interface {
	// ReadChain calls fn with the head and every receipt in ascending seq order, both read in
	// one snapshot that lasts until fn returns; fn's error is returned. head is nil when the
	// chain head row is missing.
	ReadChain(ctx context.Context, fn func(head *receipt.Head, rows iter.Seq2[receipt.Sealed, error]) error) error
}

// ErrHeadMissing is matched by the error of Head when the store's chain head row is gone (it
// was deleted behind the store's back): the chain cannot be checked against a head, and no
// receipt can be appended until it is restored.
var ErrHeadMissing = errors.New("the chain head row is missing")

// BreakHeadMissing is the break VerifyChain reports when the chain head row is missing.
const BreakHeadMissing = "head_missing"

// VerifyChain walks the whole receipt chain of st against its head (receipt.Verify) and, on a
// StateReader, checks the stored state against the state the chain implies (state_diverged).
// On a StateReader or a ChainReader the head, the receipts and their index columns come from one snapshot, so that
// workers appending meanwhile cannot make an intact chain look broken, and an index column
// edited outside the hash is found. On another store the head is read before the receipts and
// the walk is repeated, a few times, until the head held still.
func VerifyChain(ctx context.Context, st Store) (receipt.Report, error) {
	if sr, ok := st.(StateReader); ok {
		var rep receipt.Report
		err := sr.ReadEvidence(ctx, func(ev *Evidence) error {
			var err error
			rep, err = verifyEvidence(ev)
			return err
		})
		if err != nil {
			return receipt.Report{}, fmt.Errorf("verify chain: %w", err)
		}
		return rep, nil
	}
	if cr, ok := st.(ChainReader); ok {
		var rep receipt.Report
		err := cr.ReadChain(ctx, func(head *receipt.Head, rows iter.Seq2[receipt.Sealed, error]) error {
			if head == nil {
				var err error
				rep, err = verifyHeadless(rows, nil)
				return err
			}
			var err error
			rep, err = receipt.Verify(rows, *head)
			return err
		})
		if err != nil {
			return receipt.Report{}, fmt.Errorf("verify chain: %w", err)
		}
		return rep, nil
	}
	var rep receipt.Report
	for try := 1; ; try++ {
		before, err := st.Head(ctx)
		if errors.Is(err, ErrHeadMissing) {
			return verifyHeadless(st.Receipts(ctx, ReceiptFilter{}), nil)
		}
		if err != nil {
			return receipt.Report{}, fmt.Errorf("verify chain: %w", err)
		}
		if rep, err = receipt.Verify(st.Receipts(ctx, ReceiptFilter{}), before); err != nil {
			return receipt.Report{}, fmt.Errorf("verify chain: %w", err)
		}
		after, err := st.Head(ctx)
		if err != nil {
			return receipt.Report{}, fmt.Errorf("verify chain: %w", err)
		}
		if before == after || try == 3 {
			return rep, nil
		}
	}
}

// verifyHeadless walks a chain whose head row is missing: every other break is named as usual,
// and the missing head is a break of its own instead of a comparison with nothing.
func verifyHeadless(rows iter.Seq2[receipt.Sealed, error], start *receipt.Start) (receipt.Report, error) {
	rep, err := receipt.VerifyFrom(rows, receipt.Head{}, start)
	if err != nil {
		return receipt.Report{}, fmt.Errorf("verify chain: %w", err)
	}
	breaks := rep.Breaks[:0]
	for _, b := range rep.Breaks {
		if b.Kind != receipt.BreakHeadMismatch {
			breaks = append(breaks, b)
		}
	}
	rep.Breaks = append(breaks, receipt.Break{Kind: BreakHeadMissing, Seq: 0,
		Detail: fmt.Sprintf("the chain head row is missing (%d receipts read): no receipt can be appended until it is restored", rep.Verified)})
	rep.OK = false
	return rep, nil
}
