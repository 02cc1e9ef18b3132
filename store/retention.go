package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"time"

	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/receipt"
)

// Retention (docs/retention.md).
//
// A prune removes the receipts below a signed checkpoint and keeps that checkpoint's receipt as
// the chain's new start: the walk then begins there (receipt.VerifyFrom), held to the hash the
// checkpoint signed. What the removed records said about rows that are kept (an effect whose
// result duplicates are still answered from, a pending approval, a delegation, a hold) is
// carried beside the chain, one record per row, and the prune's own record chains the hash of
// them all: the state check goes on comparing every kept row with what the chain implies. A
// legal hold keeps a range of seqs from any prune.

// RetentionStore is implemented by stores that can prune their chain and keep legal holds.
type RetentionStore interface {
	// Prune removes, in one transaction, the receipts below the newest stored checkpoint req
	// selects and what no kept record needs any more (PruneRequest), carries what the removed
	// records said about kept rows, appends the prune's record and returns what it did. It
	// writes nothing and returns *HoldError when an active hold covers a removed seq,
	// ErrNoCheckpoint when no checkpoint qualifies, ErrNothingToPrune when the chain already
	// starts at or past it, and *PruneRefusedError when the chain below does not verify.
	Prune(ctx context.Context, req *PruneRequest) (*PruneResult, error)
	// PlaceHold stores a legal hold and its record in one transaction.
	PlaceHold(ctx context.Context, req *HoldRequest) (*Hold, error)
	// ReleaseHold releases an active hold and appends the release's record in one
	// transaction: ErrNotFound when there is no such hold, ErrHoldReleased when it was released.
	ReleaseHold(ctx context.Context, req *ReleaseRequest) (*Hold, error)
	// Holds returns every hold, released ones included, in the order they were placed.
	Holds(ctx context.Context) ([]*Hold, error)
	// ChainStart returns where the chain starts since its last prune; nil when it was never
	// pruned.
	ChainStart(ctx context.Context) (*ChainStart, error)
}

// Errors of retention.
var (
	// ErrNoRetention is returned by a store that cannot prune or hold (its schema predates
	// retention, opened read-only).
	ErrNoRetention = errors.New("the store keeps no retention records")
	// ErrNoCheckpoint refuses a prune with no signed checkpoint to prune below.
	ErrNoCheckpoint = errors.New("no signed checkpoint to prune below")
	// ErrNothingToPrune: the chain already starts at or past the checkpoint the prune selects.
	ErrNothingToPrune = errors.New("nothing to prune")
	// ErrHeld is matched by a *HoldError.
	ErrHeld = errors.New("a legal hold covers the range")
	// ErrHoldReleased refuses to release a hold twice.
	ErrHoldReleased = errors.New("the hold is already released")
	// ErrPruneRefused is matched by a *PruneRefusedError.
	ErrPruneRefused = errors.New("prune refused")
)

// HoldError refuses a prune that would remove a seq an active hold covers.
type HoldError struct {
	Hold *Hold
	// From and To are the seqs the prune would have removed.
	From, To int64
}

func (e *HoldError) Error() string {
	return fmt.Sprintf("prune refused: it would remove seq %d to %d, and hold %s (seq %d to %d, placed by %s on %s) keeps them: %s",
		e.From, e.To, e.Hold.ID, e.Hold.From, e.Hold.To, safetext.Quote(e.Hold.By), e.Hold.CreatedAt.UTC().Format(receipt.TimeFormat),
		safetext.Quote(e.Hold.Reason))
}

// Is matches ErrHeld.
func (e *HoldError) Is(target error) bool { return target == ErrHeld }

// PruneRefusedError refuses a prune whose chain does not verify below the checkpoint: removing
// it would remove the evidence of the break. Breaks are the breaks of that part of the chain.
type PruneRefusedError struct {
	Checkpoint *receipt.Checkpoint
	Breaks     []receipt.Break
}

func (e *PruneRefusedError) Error() string {
	b := e.Breaks[0]
	return fmt.Sprintf("prune refused: the chain below the checkpoint of seq %d does not verify (%d %s, first %s at seq %d: %s); a prune would remove the evidence: run latch receipts --verify",
		e.Checkpoint.Seq, len(e.Breaks), plural(len(e.Breaks), "break", "breaks"), b.Kind, b.Seq, b.Detail)
}

// Is matches ErrPruneRefused.
func (e *PruneRefusedError) Is(target error) bool { return target == ErrPruneRefused }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// PruneRequest asks a store to prune its chain. Exactly one of BeforeSeq and Before selects the
// checkpoint: the newest stored one at or below seq BeforeSeq, or the newest signed before
// Before (every receipt it covers existed then).
type PruneRequest struct {
	Now       time.Time
	By        string // who prunes, kept in the prune's record
	BeforeSeq int64
	Before    time.Time
	// KeepSettled is how long a committed or failed effect is kept after it settled, so that a
	// duplicate is still answered from it (the policy's retention.settled_effects); 0 keeps it
	// for ever. Executing and ambiguous effects, and a failed one with an outcome conflict, are
	// always kept.
	KeepSettled time.Duration
	// Check, when set, must accept a checkpoint for it to be pruned below (latch prune
	// --pubkey checks its signature): others are passed over.
	Check func(*receipt.Checkpoint) error
	// DryRun computes everything and writes nothing: the result says what a prune would do.
	DryRun bool
}

// Validate refuses a request that selects no checkpoint or two ways.
func (r *PruneRequest) Validate() error {
	switch {
	case r == nil:
		return errors.New("prune: no request")
	case (r.BeforeSeq > 0) == !r.Before.IsZero():
		return errors.New("prune: give exactly one of a seq and a time to prune before")
	case r.BeforeSeq < 0:
		return fmt.Errorf("prune: seq %d is negative", r.BeforeSeq)
	case r.KeepSettled < 0:
		return fmt.Errorf("prune: settled effects kept %s: want a positive duration or 0 (for ever)", r.KeepSettled)
	case r.Now.IsZero():
		return errors.New("prune: no time")
	}
	return CheckApprover(r.By)
}

// PruneResult is what a prune did (or, with DryRun, would do).
type PruneResult struct {
	Start ChainStart // where the chain now starts
	// What was removed.
	Receipts, Events, Effects, Approvals int64
	DryRun                               bool
}

// ChainStart is where a pruned chain starts, and why: the prune that removed the receipts below
// Seq, and the signed checkpoint of Seq it pruned below.
type ChainStart struct {
	Seq        int64
	Hash       string
	Checkpoint receipt.Checkpoint
	PrunedAt   time.Time
	By         string
	// RecordSeq is the seq of the prune's own record; Removed how many receipts it removed.
	RecordSeq int64
	Removed   int64
	// Carried is how many records of kept rows the prune carried, CarriedHash their hash
	// (CarriedHash), both also in the prune's record.
	Carried     int64
	CarriedHash string
}

// Reason says why the chain starts at c.Seq.
func (c *ChainStart) Reason() string {
	return fmt.Sprintf("pruned below the signed checkpoint of seq %d (signed at %s with key %s) on %s by %s",
		c.Seq, c.Checkpoint.SignedAt.UTC().Format(receipt.TimeFormat), c.Checkpoint.KeyID, c.PrunedAt.UTC().Format(receipt.TimeFormat),
		safetext.Quote(c.By))
}

// Start is c as a chain walk takes it; nil for a nil c.
func (c *ChainStart) Start() *receipt.Start {
	if c == nil {
		return nil
	}
	return &receipt.Start{Seq: c.Seq, Hash: c.Hash, Reason: c.Reason()}
}

// Hold is a legal hold: the receipts from From to To (inclusive) are kept from any prune until
// it is released. A released hold stays listed with who released it and why.
type Hold struct {
	ID            string
	From, To      int64
	Reason        string
	By            string
	CreatedAt     time.Time
	ReleasedAt    time.Time // zero: active
	ReleasedBy    string
	ReleaseReason string
}

// Active reports whether h still keeps its range.
func (h *Hold) Active() bool { return h.ReleasedAt.IsZero() }

// Covers reports whether h is active and covers a seq from from to to.
func (h *Hold) Covers(from, to int64) bool { return h.Active() && h.From <= to && from <= h.To }

// HoldRequest places a legal hold.
type HoldRequest struct {
	Now      time.Time
	ID       string // "" : the store makes one (hold_ and 32 hex digits)
	From, To int64
	Reason   string
	By       string
}

// Validate refuses a hold without a range or a reason.
func (r *HoldRequest) Validate() error {
	switch {
	case r.From < 1 || r.To < r.From:
		return fmt.Errorf("hold: seq %d to %d: want 1 <= from <= to", r.From, r.To)
	case r.Reason == "":
		return errors.New("hold: a reason is required")
	case r.Now.IsZero():
		return errors.New("hold: no time")
	}
	if err := CheckApprover(r.By); err != nil {
		return fmt.Errorf("hold: by: %w", err)
	}
	return checkTexts("hold reason", r.Reason, "hold id", r.ID)
}

// ReleaseRequest releases a legal hold.
type ReleaseRequest struct {
	Now    time.Time
	ID     string
	Reason string
	By     string
}

// Validate refuses a release without a hold id or a reason.
func (r *ReleaseRequest) Validate() error {
	switch {
	case r.ID == "":
		return errors.New("release hold: no hold id")
	case r.Reason == "":
		return errors.New("release hold: a reason is required")
	case r.Now.IsZero():
		return errors.New("release hold: no time")
	}
	if err := CheckApprover(r.By); err != nil {
		return fmt.Errorf("release hold: by: %w", err)
	}
	return checkTexts("release reason", r.Reason, "hold id", r.ID)
}

// Hold is the hold r places: its id, or a fresh one (NewHoldID) when r gives none.
func (r *HoldRequest) Hold() *Hold {
	h := &Hold{ID: r.ID, From: r.From, To: r.To, Reason: r.Reason, By: r.By, CreatedAt: r.Now}
	if h.ID == "" {
		h.ID = NewHoldID()
	}
	return h
}

// CheckHoldable refuses a hold whose whole range an earlier prune removed (start: where the chain
// starts, nil when it was never pruned).
func CheckHoldable(h *Hold, start *ChainStart) error {
	if start != nil && h.To < start.Seq {
		return fmt.Errorf("seq %d to %d was pruned already: the chain starts at seq %d", h.From, h.To, start.Seq)
	}
	return nil
}

// NewHoldID returns a fresh hold id: hold_ and 32 hex digits.
func NewHoldID() string { return "hold_" + receipt.NewID()[len("rcp_"):] }

// HoldRecord is the record of a hold placed (h as placed) or released (h as released).
func HoldRecord(h *Hold, now time.Time) *receipt.Receipt {
	if !h.Active() {
		rc := changeRecord(receipt.KindHoldReleased, receipt.Released, now)
		rc.By, rc.Note = safetext.Valid(h.ReleasedBy), h.ReleaseReason
		rc.Hold = HoldStateOf(h)
		return rc
	}
	rc := changeRecord(receipt.KindHold, receipt.Held, now)
	rc.By, rc.Note = safetext.Valid(h.By), h.Reason
	rc.Hold = HoldStateOf(h)
	return rc
}

// HoldStateOf is h as a chained record asserts it.
func HoldStateOf(h *Hold) *receipt.HoldState {
	return &receipt.HoldState{ID: h.ID, From: h.From, To: h.To, Released: !h.Active()}
}

// PruneRecord is the record a prune appends: where the chain now starts and what it carried.
func PruneRecord(c *ChainStart) *receipt.Receipt {
	rc := changeRecord(receipt.KindPrune, receipt.Pruned, c.PrunedAt)
	rc.By = safetext.Valid(c.By)
	rc.Prune = &receipt.PruneState{Start: c.Seq, StartHash: c.Hash, CheckpointSignedAt: c.Checkpoint.SignedAt.UTC().Format(receipt.TimeFormat),
		CheckpointKey: c.Checkpoint.KeyID, Removed: c.Removed, Carried: c.Carried, CarriedHash: c.CarriedHash}
	return rc
}

// SelectCheckpoint returns the checkpoint a prune removes the receipts below: the newest of cps
// that req selects, that names the store storeID and that req.Check accepts. It returns
// ErrNoCheckpoint when none qualifies and ErrNothingToPrune when the chain already starts at or
// past the one selected (start: where it starts now, 1 when never pruned).
func SelectCheckpoint(req *PruneRequest, cps []*receipt.Checkpoint, start int64, storeID string) (*receipt.Checkpoint, error) {
	var best *receipt.Checkpoint
	var passed []string
	for _, c := range cps {
		switch {
		case req.BeforeSeq > 0 && c.Seq > req.BeforeSeq:
			continue
		case !req.Before.IsZero() && !c.SignedAt.Before(req.Before):
			continue
		case c.StoreID != storeID:
			passed = append(passed, fmt.Sprintf("seq %d: it names store %s, this store is %s", c.Seq, c.StoreID, storeID))
			continue
		}
		if req.Check != nil {
			if err := req.Check(c); err != nil {
				passed = append(passed, fmt.Sprintf("seq %d: %v", c.Seq, err))
				continue
			}
		}
		if best == nil || c.Seq > best.Seq || c.Seq == best.Seq && c.SignedAt.After(best.SignedAt) {
			best = c
		}
	}
	what := "at or below seq " + strconv.FormatInt(req.BeforeSeq, 10)
	if !req.Before.IsZero() {
		what = "signed before " + req.Before.UTC().Format(receipt.TimeFormat)
	}
	switch {
	case best == nil && len(passed) > 0:
		return nil, fmt.Errorf("%w %s that names this store and that the public key accepts (passed over: %s)", ErrNoCheckpoint, what, joinSemi(passed))
	case best == nil:
		return nil, fmt.Errorf("%w %s: sign one first (latch checkpoint --key FILE)", ErrNoCheckpoint, what)
	case best.Seq <= start:
		return nil, fmt.Errorf("%w: the chain already starts at seq %d, and the newest checkpoint %s is seq %d", ErrNothingToPrune, start, what, best.Seq)
	}
	return best, nil
}

func joinSemi(s []string) string {
	var b bytes.Buffer
	for i, x := range s {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(x)
	}
	return b.String()
}

// PlanPrune decides, from what the store holds, what a prune removes: the receipts from seq from
// (where the chain starts now: prev's seq, 1 when never pruned) to below cp, the checkpoint
// SelectCheckpoint selects among cps. It refuses, as those do, when no checkpoint qualifies,
// when there is nothing to prune, and when an active hold covers a seq it would remove.
func PlanPrune(req *PruneRequest, prev *ChainStart, cps []*receipt.Checkpoint, storeID string, holds []*Hold) (from int64, cp *receipt.Checkpoint, err error) {
	from = 1
	if prev != nil {
		from = prev.Seq
	}
	if cp, err = SelectCheckpoint(req, cps, from, storeID); err != nil {
		return 0, nil, fmt.Errorf("prune: %w", err)
	}
	if err := CheckHolds(holds, from, cp.Seq-1); err != nil {
		return 0, nil, err
	}
	return from, cp, nil
}

// PrunedStart is where the chain starts after a prune below cp that removed removed receipts
// and carried what kept hashed (in kind and key order): the prune's record asserts it
// (PruneRecord).
func PrunedStart(req *PruneRequest, cp *receipt.Checkpoint, removed int64, kept *CarriedHasher) ChainStart {
	cs := ChainStart{Seq: cp.Seq, Hash: cp.Hash, Checkpoint: *cp, PrunedAt: req.Now, By: req.By, Removed: removed}
	cs.Carried, cs.CarriedHash = kept.Sum()
	return cs
}

// CheckHolds returns a *HoldError for the first active hold that covers a seq from from to to.
func CheckHolds(holds []*Hold, from, to int64) error {
	for _, h := range holds {
		if h.Covers(from, to) {
			return &HoldError{Hold: h, From: from, To: to}
		}
	}
	return nil
}

// Kinds of carried records: the table whose row a carried record speaks for.
const (
	CarriedEffect     = "effect"
	CarriedApproval   = "approval"
	CarriedDelegation = "delegation"
	CarriedHold       = "hold"
)

// Carried is what the last removed record about a kept row said of it, carried past a prune:
// Kind names the table, Key the row, Seq the record it came from and Doc the state it asserts,
// as a JSON object with one member named Kind ({"effect":{…}}), or {"schema":"latch.receipt/v1"}
// when the row's removed records were all written before records carried state.
type Carried struct {
	Kind string
	Key  string
	Seq  int64
	Doc  []byte
}

// Carrier gathers, from the records a prune removes and the records carried by the prune before
// it, the last state each row was left in: the state of the last record that asserts one, or,
// for a row that only records of schema v1 name, the last of those. It holds a bounded number of
// rows in memory and writes the rest, sorted, to temporary files (as the state check does:
// latestRuns), so that a prune's memory does not grow with the rows it carries. Close removes
// the files.
type Carrier struct {
	runs *latestRuns[[]byte]
}

// NewCarrier returns an empty Carrier.
func NewCarrier() *Carrier {
	return &Carrier{runs: newLatestRuns(docCodec, runLimit, "prune", "prune")}
}

// docCodec writes a carried document to a run.
var docCodec = stateCodec[[]byte]{
	put: func(b []byte, s *[]byte) []byte {
		b = binary.AppendUvarint(b, uint64(len(*s)))
		return append(b, *s...)
	},
	get: func(r *runReader) (*[]byte, error) {
		doc := []byte(r.str())
		return &doc, r.err
	},
}

// Carry adds a record carried by an earlier prune.
func (c *Carrier) Carry(it Carried) error { return c.put(it) }

// put notes it; the kind and the key, joined by a NUL (which neither holds), sort as the pair.
func (c *Carrier) put(it Carried) error {
	key := it.Kind + "\x00" + it.Key
	if isV1(it.Doc) {
		return c.runs.add(key, it.Seq, nil, true)
	}
	doc := it.Doc
	return c.runs.add(key, it.Seq, &doc, false)
}

// Close removes the Carrier's temporary files.
func (c *Carrier) Close() { c.runs.close() }

var v1Doc = []byte(`{"schema":"` + receipt.SchemaV1 + `"}`)

func isV1(doc []byte) bool { return bytes.Equal(doc, v1Doc) }

// Add reads one removed record (a document of the chain and its seq); an error is the
// Carrier's own (a temporary file it could not write).
func (c *Carrier) Add(seq int64, doc []byte) error {
	st, err := receipt.ReadStates(doc)
	if err != nil {
		return nil // an unreadable record fails the walk before the prune: it is never carried
	}
	var ids struct {
		EffectKey  string `json:"effect_key"`
		ApprovalID string `json:"approval_id"`
	}
	var errs []error
	if st.Schema == receipt.SchemaV1 {
		if json.Unmarshal(doc, &ids) == nil {
			if ids.EffectKey != "" {
				errs = append(errs, c.put(Carried{Kind: CarriedEffect, Key: ids.EffectKey, Seq: seq, Doc: v1Doc}))
			}
			if ids.ApprovalID != "" {
				errs = append(errs, c.put(Carried{Kind: CarriedApproval, Key: ids.ApprovalID, Seq: seq, Doc: v1Doc}))
			}
		}
		return errors.Join(errs...)
	}
	one := func(kind, key string, v any) {
		b, err := json.Marshal(map[string]any{kind: v})
		if err == nil && key != "" {
			errs = append(errs, c.put(Carried{Kind: kind, Key: key, Seq: seq, Doc: b}))
		}
	}
	if st.Effect != nil || st.Approval != nil {
		if json.Unmarshal(doc, &ids) != nil {
			return nil
		}
	}
	if st.Effect != nil {
		one(CarriedEffect, ids.EffectKey, st.Effect)
	}
	if st.Approval != nil {
		one(CarriedApproval, ids.ApprovalID, st.Approval)
	}
	if st.Delegation != nil {
		one(CarriedDelegation, st.Delegation.ID, st.Delegation)
	}
	if st.Hold != nil {
		one(CarriedHold, st.Hold.ID, st.Hold)
	}
	return errors.Join(errs...)
}

// Sorted yields what was gathered, one record a row, by kind and key (byte order). It is called
// once, after the last Carry and Add.
func (c *Carrier) Sorted() iter.Seq2[Carried, error] {
	return func(yield func(Carried, error) bool) {
		for e, err := range c.runs.sorted() {
			if err != nil {
				yield(Carried{}, err)
				return
			}
			kind, key, _ := strings.Cut(e.key, "\x00")
			it := Carried{Kind: kind, Key: key, Seq: e.v1seq, Doc: v1Doc}
			if e.state != nil {
				it.Seq, it.Doc = e.seq, *e.state
			}
			if !yield(it, nil) {
				return
			}
		}
	}
}

// CarriedHasher hashes carried records in kind and key order, as a prune's record asserts them.
type CarriedHasher struct {
	h [sha256.Size]byte
	n int64
	b []byte
}

// Add hashes one record.
func (h *CarriedHasher) Add(it Carried) {
	line, _ := json.Marshal([]any{it.Kind, it.Key, it.Seq, string(it.Doc)})
	h.b = append(h.b[:0], h.h[:]...)
	h.b = append(h.b, line...)
	h.h = sha256.Sum256(h.b)
	h.n++
}

// Sum returns the count and the hash of the records added ("" for none).
func (h *CarriedHasher) Sum() (int64, string) {
	if h.n == 0 {
		return 0, ""
	}
	return h.n, "sha256:" + hex.EncodeToString(h.h[:])
}

// VerifyBelow walks the part of the chain a prune would remove and the receipt it keeps (rows:
// from start, the chain's current start or nil, up to and including cp's seq) and returns a
// *PruneRefusedError if any of it does not hold, or the receipt at cp.Seq is not the one cp
// signed. Each row is also handed to carry, which gathers what it says of kept rows.
func VerifyBelow(rows iter.Seq2[receipt.Sealed, error], start *receipt.Start, cp *receipt.Checkpoint, carry *Carrier) error {
	var carryErr error
	fed := func(yield func(receipt.Sealed, error) bool) {
		for r, err := range rows {
			if err == nil && r.Seq < cp.Seq {
				if carryErr = carry.Add(r.Seq, r.Doc); carryErr != nil {
					return
				}
			}
			if !yield(r, err) {
				return
			}
		}
	}
	rep, err := receipt.VerifyFrom(fed, receipt.Head{Seq: cp.Seq, Hash: cp.Hash}, start)
	if carryErr != nil {
		return fmt.Errorf("prune: %w", carryErr)
	}
	if err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	if !rep.OK {
		return &PruneRefusedError{Checkpoint: cp, Breaks: rep.Breaks}
	}
	return nil
}

// Retention returns st's RetentionStore, or ErrNoRetention.
func Retention(st Store) (RetentionStore, error) {
	rs, ok := st.(RetentionStore)
	if !ok {
		return nil, fmt.Errorf("%T: %w", st, ErrNoRetention)
	}
	return rs, nil
}
