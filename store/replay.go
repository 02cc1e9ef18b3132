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
// The check streams: reading the chain once, in seq order, it gathers the last state the
// records assert of each effect and approval (latestRuns: sorted runs written to temporary files
// past a bound, so memory holds a bounded number of keys however long the chain), then merges
// them, key by key in byte order, with each table's rows, which a backend yields in the same
// order. Delegations and holds, few, are compared in memory, as the authority check reads them.

// Evidence is one consistent snapshot of a store's chain and state, as a StateReader reads it.
type Evidence struct {
	// Head is the chain head, nil when its row is missing.
	Head *receipt.Head
	// Receipts yields every receipt in seq order, with its index columns.
	Receipts iter.Seq2[receipt.Sealed, error]
	// Effects yields every effect row, ordered by key in byte order; Approvals every approval
	// row, ordered by id in byte order. The records that name them are read from Receipts (by
	// their effect_key and approval_id index columns) and from Carried.
	Effects   iter.Seq2[*Effect, error]
	Approvals iter.Seq2[*Approval, error]
	// Charges yields every budget ledger row ordered by effect key in byte order, then attempt
	// (then budget and metric); nil on a store without a ledger.
	Charges iter.Seq2[*ChargeRecord, error]
	// Delegations returns every delegation row, revoked ones included.
	Delegations func() ([]*Delegation, error)
	// Start is where the chain starts since its last prune; nil when it was never pruned.
	// Carried yields the records that prune carried, by kind and key in byte order: they stand
	// for the removed records in the state check, and are held to the hash the prune's record
	// chains.
	Start   *ChainStart
	Carried iter.Seq2[Carried, error]
	// Holds returns every legal hold, released ones included; nil on a store without them.
	Holds func() ([]*Hold, error)
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
	effects := newLatestRuns(effectCodec, runLimit, "statecheck", "check state")
	defer effects.close()
	approvals := newLatestRuns(approvalCodec, runLimit, "statecheck", "check state")
	defer approvals.close()
	charges := newLatestRuns(chargeCodec, runLimit, "statecheck", "check state")
	defer charges.close()
	// The records that name an effect or an approval are read for their states off the walk's
	// path, by a goroutine of their own, in chunks: the walk reads the chain from the store
	// while it checks the hashes, and this is a third thing to do meanwhile.
	notes := make(chan []receipt.Sealed, 4)
	noted := make(chan error, 1)
	go func() {
		var err error
		for chunk := range notes {
			for _, r := range chunk {
				if err == nil {
					err = note(effects, approvals, charges, r.Index.EffectKey, r.Index.ActionID, r.Index.ApprovalID, r.Seq, r.Doc)
				}
			}
		}
		noted <- err
	}()
	var chunk []receipt.Sealed
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
				if r.Index != nil && (r.Index.EffectKey != "" || r.Index.ApprovalID != "") {
					if chunk = append(chunk, r); len(chunk) == 256 {
						notes <- chunk
						chunk = make([]receipt.Sealed, 0, 256)
					}
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
	if len(chunk) > 0 {
		notes <- chunk
	}
	close(notes)
	if nerr := <-noted; err == nil {
		err = nerr
	}
	if err != nil {
		return receipt.Report{}, err
	}
	c := stateCheck{legacy: legacy, rep: &rep, checked: &receipt.StateChecked{}}
	if ev.Start != nil {
		carriedDels, carriedHolds, err := c.carried(ev.Start, pruned, ev.Carried, effects, approvals, charges)
		if err != nil {
			return receipt.Report{}, err
		}
		dels = append(carriedDels, dels...)
		holds = append(carriedHolds, holds...)
	}
	if err := c.effects(effects, ev.Effects, charges, ev.Charges); err != nil {
		return receipt.Report{}, err
	}
	if err := c.approvals(approvals, ev.Approvals); err != nil {
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

// note adds a record that names an effect key or an approval id (either may be empty) to what
// the check gathers of it: the state it asserts, whether it is of schema v1, and for a call's
// receipt what its attempt charged (noteCharges; actionID is the record's, "" when unknown). A
// document that cannot be read asserts nothing (the walk reports it, content_altered) but still
// names its key.
func note(effects *latestRuns[receipt.EffectState], approvals *latestRuns[receipt.ApprovalState], charges *latestRuns[chargeNote],
	key, actionID, approvalID string, seq int64, doc []byte) error {
	if key == "" && approvalID == "" {
		return nil
	}
	st, err := receipt.ReadStates(doc)
	v1 := err == nil && st.Schema == receipt.SchemaV1
	if err != nil || v1 {
		st = receipt.States{}
	}
	if key != "" {
		if err := effects.add(key, seq, st.Effect, v1); err != nil {
			return err
		}
		if err := noteCharges(charges, key, actionID, seq, doc, st); err != nil {
			return err
		}
	}
	if approvalID != "" {
		return approvals.add(approvalID, seq, st.Approval, v1)
	}
	return nil
}

// group is what the check knows of one key: what its records said (the latest state asserted,
// and its seq; whether schema v1 records name it) and the table's row.
type group[S any, R any] struct {
	latest[S]
	row *R
}

// walkGroups merges what the records said of each key (in byte order) with the table's rows
// (rows, in the same order; key names a row) and calls check for each key either side has.
// The table is read, and the runs decoded, each by a goroutine of its own (ahead), while this
// one merges and compares.
func walkGroups[S any, R any](records *latestRuns[S], rows iter.Seq2[*R, error], key func(*R) string,
	check func(g *group[S, R])) error {
	next, stop := iter.Pull2(ahead(records.sorted()))
	defer stop()
	pending, err, more := next()
	var last string
	for r, rerr := range ahead(rows) {
		if rerr != nil {
			return fmt.Errorf("check state: %w", rerr)
		}
		k := key(r)
		if last != "" && k <= last {
			return fmt.Errorf("check state: the store yielded row %s after %s: not in byte order", safetext.Quote(k), safetext.Quote(last))
		}
		last = k
		for ; more && err == nil && pending.key < k; pending, err, more = next() {
			check(&group[S, R]{latest: *pending})
		}
		if err != nil {
			return err
		}
		g := group[S, R]{latest: latest[S]{key: k}, row: r}
		if more && pending.key == k {
			g.latest = *pending
			pending, err, more = next()
		}
		check(&g)
	}
	for ; more && err == nil; pending, err, more = next() {
		check(&group[S, R]{latest: *pending})
	}
	return err
}

// ahead yields what seq yields, running seq in a goroutine of its own that reads up to a few
// batches ahead. When the consumer stops early, ahead returns only once that goroutine has
// ended, so nothing reads seq's source (a transaction, a file) after it.
func ahead[T any](seq iter.Seq2[T, error]) iter.Seq2[T, error] {
	const size = 256
	type batch struct {
		items []T
		err   error
	}
	return func(yield func(T, error) bool) {
		ch := make(chan batch, 4)
		done := make(chan struct{})
		defer func() {
			close(done)
			for range ch {
			}
		}()
		go func() {
			defer close(ch)
			send := func(b batch) bool {
				select {
				case ch <- b:
					return true
				case <-done:
					return false
				}
			}
			b := make([]T, 0, size)
			for v, err := range seq {
				if err != nil {
					send(batch{items: b, err: err})
					return
				}
				if b = append(b, v); len(b) == size {
					if !send(batch{items: b}) {
						return
					}
					b = make([]T, 0, size)
				}
			}
			if len(b) > 0 {
				send(batch{items: b})
			}
		}()
		for b := range ch {
			for _, v := range b.items {
				if !yield(v, nil) {
					return
				}
			}
			if b.err != nil {
				var zero T
				yield(zero, b.err)
				return
			}
		}
	}
}

// effects checks the effect rows against the chain and, when the store keeps a budget ledger
// (ledger not nil), each effect's ledger rows with it (ledgercheck.go).
func (c *stateCheck) effects(records *latestRuns[receipt.EffectState], rows iter.Seq2[*Effect, error],
	notes *latestRuns[chargeNote], ledger iter.Seq2[*ChargeRecord, error]) error {
	if rows == nil {
		return nil
	}
	var l *ledgerCheck
	if ledger != nil {
		l = newLedgerCheck(c, notes, ledger)
	}
	err := walkGroups(records, rows, func(e *Effect) string { return e.Key },
		func(g *group[receipt.EffectState, Effect]) {
			subject := "effect " + safetext.Quote(g.key)
			if l != nil {
				l.effect(g.key, g.state, g.row)
			}
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
	if l != nil {
		if lerr := l.finish(); err == nil {
			err = lerr
		}
	}
	return err
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

func (c *stateCheck) approvals(records *latestRuns[receipt.ApprovalState], rows iter.Seq2[*Approval, error]) error {
	if rows == nil {
		return nil
	}
	return walkGroups(records, rows, func(a *Approval) string { return a.ID },
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
// records, for the in-memory checks; the carried effect and approval records join what the chain's
// own records said of their rows.
func (c *stateCheck) carried(start *ChainStart, pruned []byte, items iter.Seq2[Carried, error],
	effects *latestRuns[receipt.EffectState], approvals *latestRuns[receipt.ApprovalState], charges *latestRuns[chargeNote]) (dels, holds []receipt.Sealed, err error) {
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
			case CarriedEffect:
				err = note(effects, approvals, charges, it.Key, "", "", it.Seq, it.Doc)
			case CarriedApproval:
				err = note(effects, approvals, charges, "", "", it.Key, it.Seq, it.Doc)
			}
			if err != nil {
				return nil, nil, err
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
