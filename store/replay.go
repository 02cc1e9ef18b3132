package store

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"

	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/receipt"
)

// State checked against the chain (docs/guarantees.md#state-checked-against-the-chain).
//
// Every change of an effect, an approval or a delegation appends a record that says what it left
// (store/evidence.go). Replaying the chain therefore implies what each table row must hold: the
// state the last record about it asserts. CheckState compares the two, row by row, and names each
// difference state_diverged, with the row and both values. Two changes are not chained, because
// a call's receipt follows them in the normal course and they only ever make a row more
// restrictive: a reservation (a key reserved, or a failed one renewed, executing until its
// outcome is recorded) and an approval spent by a call still running. The comparison allows
// exactly those: an executing row one attempt past what the chain implies, and a consumed
// approval the chain says is granted.
//
// The walk streams: a backend yields each table's rows merged with the records that name them,
// ordered by key (a record and its row adjacent), so memory holds one key at a time, however
// long the chain and however many rows. Delegations are compared in memory, as the authority
// check reads them.

// Evidence is one consistent snapshot of a store's chain and state, as a StateReader reads it.
type Evidence struct {
	// Head is the chain head, nil when its row is missing.
	Head *receipt.Head
	// Receipts yields every receipt in seq order, with its index columns.
	Receipts iter.Seq2[receipt.Sealed, error]
	// Effects yields, grouped by effect key, every record that names a key (Doc and Seq set)
	// and every effect row (Effect set), in any order within a key.
	Effects iter.Seq2[Keyed, error]
	// Approvals yields, grouped by approval id, every record that names an approval and every
	// approval row.
	Approvals iter.Seq2[Keyed, error]
	// Delegations returns every delegation row, revoked ones included.
	Delegations func() ([]*Delegation, error)
	// Start is where the chain starts since its last prune; nil when it was never pruned. The
	// records that prune carried are merged into Effects and Approvals (Doc and Seq set) like
	// the chain's own, and Carried yields all of them, by kind and key in byte order, to be
	// held to the hash the prune's record chains.
	Start   *ChainStart
	Carried iter.Seq2[Carried, error]
	// Holds returns every legal hold, released ones included; nil on a store without them.
	Holds func() ([]*Hold, error)
}

// Keyed is one item of a merged walk: a record that names Key (Doc and Seq), or the table's row
// of Key (Effect or Approval).
type Keyed struct {
	Key      string
	Seq      int64
	Doc      []byte
	Effect   *Effect
	Approval *Approval
}

// StateReader is implemented by stores that read their chain and their state in one snapshot
// (one read transaction), for VerifyChain to check the one against the other.
type StateReader interface {
	ReadEvidence(ctx context.Context, fn func(ev *Evidence) error) error
}

// verifyEvidence walks the chain of ev and checks the state against it.
func verifyEvidence(ev *Evidence) (receipt.Report, error) {
	var dels []receipt.Sealed // the delegation records, few: the authority check holds them all too
	var holds []receipt.Sealed
	var pruned []byte // the last prune's record
	var legacy bool   // the chain holds receipts written before records carried state
	rows := func(yield func(receipt.Sealed, error) bool) {
		first := true
		for r, err := range ev.Receipts {
			if err == nil {
				if first && bytes.Contains(r.Doc, []byte(`"schema":"`+receipt.SchemaV1+`"`)) {
					legacy = true
				}
				first = false
				if r.Index != nil && (r.Index.Result == receipt.Delegated || r.Index.Result == receipt.Revoked) {
					dels = append(dels, receipt.Sealed{Seq: r.Seq, Doc: bytes.Clone(r.Doc)})
				}
				if r.Index != nil && (r.Index.Result == receipt.Held || r.Index.Result == receipt.Released) {
					holds = append(holds, receipt.Sealed{Seq: r.Seq, Doc: bytes.Clone(r.Doc)})
				}
				if ev.Start != nil && r.Seq == ev.Start.RecordSeq {
					pruned = bytes.Clone(r.Doc)
				}
			}
			if !yield(r, err) {
				return
			}
		}
	}
	var rep receipt.Report
	var err error
	if ev.Head == nil {
		rep, err = verifyHeadless(rows, ev.Start.Start())
	} else {
		rep, err = receipt.VerifyFrom(rows, *ev.Head, ev.Start.Start())
	}
	if err != nil {
		return receipt.Report{}, err
	}
	c := stateCheck{legacy: legacy, rep: &rep, checked: &receipt.StateChecked{}}
	if ev.Start != nil {
		carriedDels, carriedHolds, err := c.carried(ev.Start, pruned, ev.Carried)
		if err != nil {
			return receipt.Report{}, err
		}
		dels = append(carriedDels, dels...)
		holds = append(carriedHolds, holds...)
	}
	if err := c.effects(ev.Effects); err != nil {
		return receipt.Report{}, err
	}
	if err := c.approvals(ev.Approvals); err != nil {
		return receipt.Report{}, err
	}
	if err := c.delegations(dels, ev.Delegations); err != nil {
		return receipt.Report{}, err
	}
	if err := c.holds(holds, ev.Holds); err != nil {
		return receipt.Report{}, err
	}
	rep.State = c.checked
	rep.OK = len(rep.Breaks) == 0
	return rep, nil
}

// stateCheck compares rows with the state the chain implies for them.
type stateCheck struct {
	legacy  bool
	rep     *receipt.Report
	checked *receipt.StateChecked
}

func (c *stateCheck) diverged(seq int64, subject, chain, table string) {
	c.rep.Breaks = append(c.rep.Breaks, receipt.Break{Kind: receipt.BreakStateDiverged, Seq: seq, Subject: subject,
		Chain: chain, Table: table, Detail: fmt.Sprintf("%s: the chain implies %s, the table holds %s", subject, chain, table)})
}

// group is what a merged walk gathered about one key: the latest state a record asserts (and its
// seq), whether schema v1 receipts name it, and the table's row.
type group[S any, R any] struct {
	key    string
	seq    int64
	state  *S
	v1     bool
	row    *R
	active bool
}

// walkGroups reads a merged walk one key at a time and calls check for each key.
func walkGroups[S any, R any](items iter.Seq2[Keyed, error], pick func(receipt.States) *S, row func(Keyed) *R,
	check func(g *group[S, R])) error {
	var g group[S, R]
	for it, err := range items {
		if err != nil {
			return fmt.Errorf("check state: %w", err)
		}
		if g.active && it.Key != g.key {
			check(&g)
			g = group[S, R]{}
		}
		g.key, g.active = it.Key, true
		if r := row(it); r != nil {
			g.row = r
			continue
		}
		st, err := receipt.ReadStates(it.Doc)
		if err != nil {
			continue // an unreadable document is reported by the walk (content_altered)
		}
		if st.Schema == receipt.SchemaV1 {
			g.v1 = true
			continue
		}
		if s := pick(st); s != nil && it.Seq > g.seq {
			g.seq, g.state = it.Seq, s
		}
	}
	if g.active {
		check(&g)
	}
	return nil
}

func (c *stateCheck) effects(items iter.Seq2[Keyed, error]) error {
	if items == nil {
		return nil
	}
	return walkGroups(items, func(s receipt.States) *receipt.EffectState { return s.Effect },
		func(k Keyed) *Effect { return k.Effect },
		func(g *group[receipt.EffectState, Effect]) {
			subject := "effect " + safetext.Quote(g.key)
			if g.row != nil {
				c.checked.Effects++
			}
			if g.state == nil && (g.v1 || c.legacy) {
				c.checked.Unchained++
				return
			}
			var table *receipt.EffectState
			if g.row != nil {
				table = EffectStateOf(g.row)
			}
			switch {
			case g.state == nil && table == nil:
			case table != nil && table.State == string(Executing) && table.Attempt == 1 && g.state == nil:
				// reserved, its outcome not yet recorded
			case table != nil && table.State == string(Executing) && g.state != nil && g.state.State == string(Failed) &&
				!g.state.Conflict && table.Attempt == g.state.Attempt+1:
				// a failed key renewed, its outcome not yet recorded
			case g.state != nil && table != nil && *g.state == *table:
			default:
				c.diverged(g.seq, subject, effectText(g.state), effectText(table))
			}
		})
}

func effectText(s *receipt.EffectState) string {
	if s == nil {
		return "no record"
	}
	t := s.State + " attempt " + strconv.Itoa(s.Attempt) + " holder " + orNone(s.Holder) + " result " + orNone(s.ResultHash)
	if s.ResolvedBy != "" {
		t += " resolved by " + safetext.Quote(s.ResolvedBy)
	}
	if s.Conflict {
		t += " with an outcome conflict"
	}
	return t
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func (c *stateCheck) approvals(items iter.Seq2[Keyed, error]) error {
	if items == nil {
		return nil
	}
	return walkGroups(items, func(s receipt.States) *receipt.ApprovalState { return s.Approval },
		func(k Keyed) *Approval { return k.Approval },
		func(g *group[receipt.ApprovalState, Approval]) {
			subject := "approval " + safetext.Quote(g.key)
			if g.row != nil {
				c.checked.Approvals++
			}
			if g.state == nil && (g.v1 || c.legacy) {
				c.checked.Unchained++
				return
			}
			var table *receipt.ApprovalState
			if g.row != nil {
				table = ApprovalStateOf(g.row)
			}
			switch {
			case g.state == nil && table == nil:
			case g.state == nil && table.Status == string(Pending) && table.Approver == "":
				// requested, not yet answered
			case g.state != nil && table != nil && *g.state == *table:
			case g.state != nil && table != nil && g.state.Status == string(Granted) && table.Status == string(Consumed) &&
				g.state.Approver == table.Approver:
				// spent by a call whose receipt is not yet written
			default:
				c.diverged(g.seq, subject, approvalText(g.state), approvalText(table))
			}
		})
}

func approvalText(s *receipt.ApprovalState) string {
	if s == nil {
		return "no record"
	}
	if s.Approver == "" {
		return s.Status
	}
	return s.Status + " by " + safetext.Quote(s.Approver)
}

func (c *stateCheck) delegations(records []receipt.Sealed, rows func() ([]*Delegation, error)) error {
	if rows == nil {
		return nil
	}
	list, err := rows()
	if err != nil {
		return fmt.Errorf("check state: %w", err)
	}
	implied, seqs := impliedStates(records, func(st receipt.States) (string, *receipt.DelegationState) {
		if st.Delegation == nil {
			return "", nil
		}
		return st.Delegation.ID, st.Delegation
	})
	for _, d := range list {
		c.checked.Delegations++
		want, ok := implied[d.ID]
		delete(implied, d.ID)
		subject := "delegation " + safetext.Quote(d.ID)
		if !ok && c.legacy {
			c.checked.Unchained++
			continue
		}
		table := DelegationStateOf(d)
		if !ok || *want != *table {
			c.diverged(seqs[d.ID], subject, delegationText(want), delegationText(table))
		}
	}
	unmatched(c, "delegation ", implied, seqs, delegationText)
	return nil
}

// impliedStates reads the state the records of a small table (delegations, holds) assert of its
// rows, by id: of names the row a record speaks of and its state, if any. The records are in seq
// order, so the last one of each row wins; seqs holds its seq.
func impliedStates[S any](records []receipt.Sealed, of func(receipt.States) (string, *S)) (implied map[string]*S, seqs map[string]int64) {
	implied, seqs = map[string]*S{}, map[string]int64{}
	for _, r := range records {
		st, err := receipt.ReadStates(r.Doc)
		if err != nil {
			continue
		}
		if id, s := of(st); s != nil {
			implied[id], seqs[id] = s, r.Seq
		}
	}
	return implied, seqs
}

// unmatched reports, in id order, each row the records imply (implied, left after the table's
// rows were taken out of it) that the table lacks.
func unmatched[S any](c *stateCheck, noun string, implied map[string]*S, seqs map[string]int64, text func(*S) string) {
	for _, id := range slices.Sorted(maps.Keys(implied)) {
		c.diverged(seqs[id], noun+safetext.Quote(id), text(implied[id]), text(nil))
	}
}

func delegationText(s *receipt.DelegationState) string {
	if s == nil {
		return "no record"
	}
	t := "created by " + safetext.Quote(s.CreatedBy) + " beneath " + safetext.Quote(s.Parent) + " grant " + s.GrantHash
	if s.RevokedBy != "" {
		return t + ", revoked by " + safetext.Quote(s.RevokedBy)
	}
	return t + ", not revoked"
}

// carried checks what the last prune carried against its record (pruned, the document at
// start.RecordSeq; nil when the chain lacks it) and returns the carried delegation and hold
// records, for the in-memory checks; the carried effect and approval records reach the walk
// through the merged iterators.
func (c *stateCheck) carried(start *ChainStart, pruned []byte, items iter.Seq2[Carried, error]) (dels, holds []receipt.Sealed, err error) {
	var h CarriedHasher
	if items != nil {
		for it, err := range items {
			if err != nil {
				return nil, nil, fmt.Errorf("check state: carried records: %w", err)
			}
			h.Add(it)
			switch it.Kind {
			case CarriedDelegation:
				dels = append(dels, receipt.Sealed{Seq: it.Seq, Doc: it.Doc})
			case CarriedHold:
				holds = append(holds, receipt.Sealed{Seq: it.Seq, Doc: it.Doc})
			}
		}
	}
	n, sum := h.Sum()
	brk := func(kind, detail string) {
		c.rep.Breaks = append(c.rep.Breaks, receipt.Break{Kind: kind, Seq: start.RecordSeq, Detail: detail})
	}
	var st receipt.States
	if pruned != nil {
		st, _ = receipt.ReadStates(pruned)
	}
	p := st.Prune
	switch {
	case p == nil:
		brk(receipt.BreakStartMismatch, fmt.Sprintf("the store says the chain starts at seq %d (%s), and the chain holds no prune record at seq %d",
			start.Seq, start.Reason(), start.RecordSeq))
	case p.Start != start.Seq || p.StartHash != start.Hash:
		brk(receipt.BreakStartMismatch, fmt.Sprintf("the prune record says the chain starts at seq %d %s, the store says seq %d %s",
			p.Start, p.StartHash, start.Seq, start.Hash))
	case p.Carried != n || p.CarriedHash != sum:
		brk(BreakCarriedAltered, fmt.Sprintf("the prune record carried %d records hashing to %s, the store holds %d hashing to %s: a carried record was edited, added or deleted",
			p.Carried, orNone(p.CarriedHash), n, orNone(sum)))
	}
	return dels, holds, nil
}

// BreakCarriedAltered: the records a prune carried past it (what removed records said of rows
// still kept) are not the ones its record chains.
const BreakCarriedAltered = "carried_altered"

func (c *stateCheck) holds(records []receipt.Sealed, rows func() ([]*Hold, error)) error {
	if rows == nil {
		return nil
	}
	list, err := rows()
	if err != nil {
		return fmt.Errorf("check state: %w", err)
	}
	implied, seqs := impliedStates(records, func(st receipt.States) (string, *receipt.HoldState) {
		if st.Hold == nil {
			return "", nil
		}
		return st.Hold.ID, st.Hold
	})
	text := func(s *receipt.HoldState) string {
		if s == nil {
			return "no record"
		}
		t := fmt.Sprintf("seq %d to %d", s.From, s.To)
		if s.Released {
			return t + ", released"
		}
		return t + ", active"
	}
	for _, h := range list {
		want, ok := implied[h.ID]
		delete(implied, h.ID)
		table := HoldStateOf(h)
		if !ok || *want != *table {
			c.diverged(seqs[h.ID], "hold "+safetext.Quote(h.ID), text(want), text(table))
		}
	}
	unmatched(c, "hold ", implied, seqs, text)
	return nil
}
