package receipt

import (
	"encoding/json"
	"fmt"
	"iter"

	"github.com/latchkit/latch/canon"
)

// Break kinds, in the order a walk can find them.
const (
	BreakMissing        = "missing"         // a seq is absent from the chain
	BreakLinkBroken     = "link_broken"     // prev_hash differs from the predecessor's stored hash
	BreakContentAltered = "content_altered" // the document no longer hashes to its stored hash
	BreakHeadMismatch   = "head_mismatch"   // the head differs from the last receipt
)

// Break is one place where the chain does not hold.
type Break struct {
	Kind   string `json:"kind"`
	Seq    int64  `json:"seq"`
	Detail string `json:"detail"`
}

// Report is the result of Verify.
type Report struct {
	OK       bool    `json:"ok"`
	Verified int64   `json:"verified"`
	Breaks   []Break `json:"breaks"`
}

// linkFields are the two fields of a document the walk needs to read back.
type linkFields struct {
	Seq      int64  `json:"seq"`
	PrevHash string `json:"prev_hash"`
}

// Verify walks a chain in seq order and names every break by seq. rows must yield receipts in
// ascending seq order; it is consumed once, so memory stays flat however long the chain is. An
// error from rows stops the walk and is returned: a chain that could not be read is not verified.
func Verify(rows iter.Seq2[Sealed, error], head Head) (Report, error) {
	rep := Report{Breaks: []Break{}}
	var prev Sealed
	for row, err := range rows {
		if err != nil {
			return Report{}, fmt.Errorf("verify receipts: %w", err)
		}
		rep.Verified++
		want := prev.Seq + 1
		gap := row.Seq > want
		switch {
		case row.Seq < want:
			return Report{}, fmt.Errorf("verify receipts: rows out of order: seq %d after %d", row.Seq, prev.Seq)
		case gap:
			for s := want; s < row.Seq; s++ {
				rep.Breaks = append(rep.Breaks, Break{Kind: BreakMissing, Seq: s, Detail: fmt.Sprintf("receipt %d is absent", s)})
			}
		}
		var lf linkFields
		altered := ""
		if got := canon.Sum(row.Doc); got != row.Hash {
			altered = fmt.Sprintf("document hashes to %s, stored hash is %s", got, row.Hash)
		} else if err := json.Unmarshal(row.Doc, &lf); err != nil {
			altered = fmt.Sprintf("document unreadable: %v", err)
		} else if lf.Seq != row.Seq {
			altered = fmt.Sprintf("document says seq %d, stored at seq %d", lf.Seq, row.Seq)
		}
		if altered != "" {
			rep.Breaks = append(rep.Breaks, Break{Kind: BreakContentAltered, Seq: row.Seq, Detail: altered})
		} else if !gap {
			wantPrev := GenesisHash
			if prev.Seq > 0 {
				wantPrev = prev.Hash
			}
			if lf.PrevHash != wantPrev {
				rep.Breaks = append(rep.Breaks, Break{Kind: BreakLinkBroken, Seq: row.Seq,
					Detail: fmt.Sprintf("prev_hash %s, receipt %d is stored as %s", lf.PrevHash, row.Seq-1, wantPrev)})
			}
		}
		prev = row
	}
	if head.Seq != prev.Seq || (prev.Seq > 0 && head.Hash != prev.Hash) {
		rep.Breaks = append(rep.Breaks, Break{Kind: BreakHeadMismatch, Seq: head.Seq,
			Detail: fmt.Sprintf("head is seq %d %s, last receipt is seq %d %s", head.Seq, head.Hash, prev.Seq, prev.Hash)})
	}
	rep.OK = len(rep.Breaks) == 0
	return rep, nil
}
