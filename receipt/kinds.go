package receipt

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
)

// Record kinds (docs/guarantees.md#record-kinds). A call's receipt is KindCall, or, when the
// call's outcome arrived after its lease lapsed or after a resolution, KindLateOutcome or
// KindOutcomeConflict: still that call's one receipt. The other kinds chain a state change that
// no call made: each is written in the transaction of the change it records.
const (
	KindCall            = "call"
	KindLateOutcome     = "late_outcome"     // a holder's outcome that settled its lapsed, ambiguous attempt
	KindOutcomeConflict = "outcome_conflict" // a holder's outcome that contradicts a resolution, which stands
	KindApprovalAnswer  = "approval_answer"  // a request granted or denied, by whom, with the note
	KindApprovalExpired = "approval_expired" // a request answered after it expired, written expired
	KindResolution      = "resolution"       // an effect resolved by a person or a reconcile hook
	KindLeaseLapsed     = "lease_lapsed"     // an executing effect whose lease lapsed, written ambiguous
	KindDelegation      = "delegation"       // a delegation created
	KindRevocation      = "revocation"       // a delegation revoked
	KindPrune           = "prune"            // receipts below a signed checkpoint removed (docs/retention.md)
	KindHold            = "hold"             // a legal hold placed on a range of seqs
	KindHoldReleased    = "hold_released"    // a legal hold released
)

// Results of the records that are not a call's receipt: the state their subject is left in.
const (
	Granted   = "granted"
	Expired   = "expired"
	Delegated = "delegated"
	Revoked   = "revoked"
	Pruned    = "pruned"
	Held      = "held"
	Released  = "released"
)

// KindOf returns the kind of a record whose kind field is k: a document without one (every
// receipt of schema v1) is a call's receipt.
func KindOf(k string) string {
	if k == "" {
		return KindCall
	}
	return k
}

// IsCall reports whether a record of kind k is the receipt of a call (a call, a late outcome or
// an outcome conflict), as opposed to a state change no call made.
func IsCall(k string) bool {
	switch KindOf(k) {
	case KindCall, KindLateOutcome, KindOutcomeConflict:
		return true
	}
	return false
}

// EffectState is an effect record as a chained record leaves it: its state, its attempt, the
// action id of the attempt that holds it, the hash of its stored result (canon.Sum of its bytes,
// "" when none), whether it carries an outcome conflict, and who resolved it.
type EffectState struct {
	State      string `json:"state"`
	Attempt    int    `json:"attempt"`
	Holder     string `json:"holder"`
	ResultHash string `json:"result_hash"`
	Conflict   bool   `json:"conflict"`
	ResolvedBy string `json:"resolved_by"`
}

// ApprovalState is an approval request as a chained record leaves it.
type ApprovalState struct {
	Status   string `json:"status"`
	Approver string `json:"approver"`
}

// DelegationState is a delegation as a chained record leaves it: created (RevokedBy empty) or
// revoked. GrantHash is canon.Sum of the grant document as stored.
type DelegationState struct {
	ID        string `json:"delegation_id"`
	Parent    string `json:"parent"`
	GrantHash string `json:"grant_hash"`
	CreatedBy string `json:"created_by"`
	RevokedBy string `json:"revoked_by"`
}

// PruneState is what a prune record says (docs/retention.md): the chain now starts at Start,
// the receipt that hashes to StartHash, which the checkpoint signed at CheckpointSignedAt with
// key CheckpointKey covers; Removed receipts below it were removed; Carried records of rows still
// kept, whose own records were removed, were carried beside the chain, and CarriedHash is the
// hash of them all (store.CarriedHash).
type PruneState struct {
	Start              int64  `json:"start"`
	StartHash          string `json:"start_hash"`
	CheckpointSignedAt string `json:"checkpoint_signed_at"`
	CheckpointKey      string `json:"checkpoint_key"`
	Removed            int64  `json:"removed"`
	Carried            int64  `json:"carried"`
	CarriedHash        string `json:"carried_hash"`
}

// HoldState is a legal hold as a hold or hold_released record leaves it: the range of seqs it
// keeps from any prune, and whether it was released. Its reason is the record's note.
type HoldState struct {
	ID       string `json:"hold_id"`
	From     int64  `json:"from"`
	To       int64  `json:"to"`
	Released bool   `json:"released"`
}

// NewID returns a fresh receipt id: rcp_ and 32 lowercase hex digits from a CSPRNG.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return "rcp_" + hex.EncodeToString(b[:])
}

// States is what a record asserts about the state it leaves: read by a replay of the chain,
// which needs nothing else of a document.
type States struct {
	Schema     string           `json:"schema"`
	Kind       string           `json:"kind"`
	Result     string           `json:"result"`
	Effect     *EffectState     `json:"effect"`
	Approval   *ApprovalState   `json:"approval"`
	Delegation *DelegationState `json:"delegation"`
	Hold       *HoldState       `json:"hold"`
	Prune      *PruneState      `json:"prune"`
}

// ReadStates reads the states a document asserts. A document of schema v1 asserts none (its
// Kind is KindCall).
func ReadStates(doc []byte) (States, error) {
	var s States
	if readStatesScan(doc, &s) {
		s.Kind = KindOf(s.Kind)
		return s, nil
	}
	s = States{}
	if err := json.Unmarshal(doc, &s); err != nil {
		return States{}, fmt.Errorf("read record: %w", err)
	}
	s.Kind = KindOf(s.Kind)
	return s, nil
}

// statesKeys are the members of States, in the order readStatesScan reads them.
var statesKeys = []string{"schema", "kind", "result", "effect", "approval", "delegation", "hold", "prune"}

// readStatesScan reads the members of States with one scan of doc (scanTop), decoding only the
// state objects themselves: a replay reads every record, whose arguments and other members it
// does not need. It answers only what json.Unmarshal of the whole document would: false (with
// s half read) leaves the document to it, on anything scanTop declines, a string member of
// another shape than plain, or a state object that does not decode.
func readStatesScan(doc []byte, s *States) bool {
	var raw [8][]byte
	if !scanTop(doc, statesKeys, raw[:]) {
		return false
	}
	for i, p := range []*string{&s.Schema, &s.Kind, &s.Result} {
		if !plainMember(raw[i], p) {
			return false
		}
	}
	if v := raw[3]; v != nil && string(v) != "null" {
		if s.Effect = readEffectScan(v); s.Effect == nil && json.Unmarshal(v, &s.Effect) != nil {
			return false
		}
	}
	if v := raw[4]; v != nil && string(v) != "null" {
		if s.Approval = readApprovalScan(v); s.Approval == nil && json.Unmarshal(v, &s.Approval) != nil {
			return false
		}
	}
	for i, p := range []any{&s.Delegation, &s.Hold, &s.Prune} {
		if v := raw[5+i]; v != nil && string(v) != "null" {
			if json.Unmarshal(v, p) != nil {
				return false
			}
		}
	}
	return true
}

// effectKeys and approvalKeys are the members of EffectState and ApprovalState.
var (
	effectKeys   = []string{"state", "attempt", "holder", "result_hash", "conflict", "resolved_by"}
	approvalKeys = []string{"status", "approver"}
)

// readEffectScan reads an effect object (v, not null) as json.Unmarshal would, with one scan and
// no reflection — a replay reads one from nearly every record: strings plain (plainString), the
// attempt a plain integer, conflict true or false. It returns nil, leaving v to json.Unmarshal,
// for anything else.
func readEffectScan(v []byte) *EffectState {
	var raw [6][]byte
	if !scanTop(v, effectKeys, raw[:]) {
		return nil
	}
	e := &EffectState{}
	for i, p := range []*string{&e.State, nil, &e.Holder, &e.ResultHash, nil, &e.ResolvedBy} {
		if p == nil {
			continue
		}
		if !plainMember(raw[i], p) {
			return nil
		}
	}
	if a := raw[1]; a != nil && string(a) != "null" {
		n, ok := plainInt(a)
		if !ok {
			return nil
		}
		e.Attempt = n
	}
	switch string(raw[4]) {
	case "", "null", "false":
	case "true":
		e.Conflict = true
	default:
		return nil
	}
	return e
}

// readApprovalScan is readEffectScan for an approval object.
func readApprovalScan(v []byte) *ApprovalState {
	var raw [2][]byte
	if !scanTop(v, approvalKeys, raw[:]) {
		return nil
	}
	a := &ApprovalState{}
	if !plainMember(raw[0], &a.Status) || !plainMember(raw[1], &a.Approver) {
		return nil
	}
	return a
}

// plainMember reads a string member's raw value into p: absent or null leaves it, a plain string
// (plainString) sets it; anything else is false.
func plainMember(v []byte, p *string) bool {
	if v == nil || string(v) == "null" {
		return true
	}
	str, ok := plainString(v)
	if ok {
		*p = str
	}
	return ok
}

// plainInt reads a JSON number that is a non-negative integer without fraction or exponent and
// fits an int (linkScanner.uint, as the walk reads seq), as json.Unmarshal reads it into an int;
// anything else is false.
func plainInt(v []byte) (int, bool) {
	sc := linkScanner{b: v}
	n, ok := sc.uint()
	if !ok || sc.i != len(v) || n > math.MaxInt {
		return 0, false
	}
	return int(n), true
}
