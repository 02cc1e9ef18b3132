package store

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/latchkit/latch/receipt"
)

// ErrInvalidInput is matched by the error of a store method given a key, id or name that no
// backend can keep faithfully: one holding a NUL byte (PostgreSQL text cannot hold one, SQLite
// would keep it and compare it byte by byte), or one longer than MaxText. Every backend refuses
// it the same way, before reading or writing anything.
var ErrInvalidInput = errors.New("invalid input")

// InputError names the field of a request that was refused, and why.
type InputError struct {
	Field  string // e.g. "effect key", "approval id", "receipt action"
	Value  string // the value refused
	Reason string // e.g. "contains a NUL byte"
}

// Error formats the error with the value quoted, so that a hostile value cannot forge output,
// and clipped, so that a long one is not repeated whole.
func (e *InputError) Error() string {
	v := e.Value
	if len(v) > 64 {
		v = strings.ToValidUTF8(v[:64], "") + "..."
	}
	return "invalid " + e.Field + " " + strconv.QuoteToASCII(v) + ": " + e.Reason
}

// MaxText is the longest key, id or name a store keeps, in bytes. PostgreSQL cannot index a
// longer value reliably (a B-tree entry must fit in a third of a page), and SQLite would keep
// it: both refuse it alike, as ErrInvalidInput.
const MaxText = 1024

// Is matches ErrInvalidInput.
func (e *InputError) Is(target error) bool { return target == ErrInvalidInput }

// CheckText refuses a key, id or name holding a NUL byte or longer than MaxText bytes; field
// names it in the error.
func CheckText(field, value string) error {
	if len(value) > MaxText {
		return &InputError{Field: field, Value: value,
			Reason: "is " + strconv.Itoa(len(value)) + " bytes long, longer than the " + strconv.Itoa(MaxText) + " a store keeps"}
	}
	if strings.IndexByte(value, 0) >= 0 {
		return &InputError{Field: field, Value: value, Reason: "contains a NUL byte"}
	}
	return nil
}

// checkTexts checks field/value pairs in order and returns the first refusal.
func checkTexts(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := CheckText(pairs[i], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// CheckEvents checks the ids of events to be written.
func CheckEvents(events []Event) error {
	for i := range events {
		e := &events[i]
		if err := checkTexts("event kind", e.Kind, "event action id", e.ActionID,
			"event effect key", e.EffectKey, "event approval id", e.ApprovalID); err != nil {
			return err
		}
	}
	return nil
}

// CheckReceipt checks the fields of a receipt that a backend keeps in columns of their own or
// that name who acted.
func CheckReceipt(r *receipt.Receipt) error {
	if r == nil {
		return nil
	}
	return checkTexts("receipt id", r.ReceiptID, "receipt action id", r.ActionID, "action name", r.Action,
		"receipt effect key", r.EffectKey, "receipt approval id", r.ApprovalID, "receipt result", r.Result,
		"agent", r.Principal.Agent, "user", r.Principal.User, "resource", r.Resource, "environment", r.Environment,
		"approver", r.Approver)
}

// Check refuses a reservation whose keys, ids or names cannot be kept (ErrInvalidInput).
func (r *ReserveRequest) Check() error {
	if r == nil {
		return nil
	}
	if err := checkTexts("action id", r.ActionID, "action name", r.Action, "action hash", r.ActionHash,
		"effect key", r.EffectKey, "approval id", r.ApprovalID, "agent", r.Agent, "user", r.User); err != nil {
		return err
	}
	if r.RequestKey != "" {
		if err := CheckRequestKey(r.RequestKey); err != nil {
			return err
		}
		if r.EffectKey == "" || r.Agent == "" {
			return fmt.Errorf("%w: a reservation with a request key needs an effect key and an agent", ErrInvalidInput)
		}
	}
	if err := checkCharges(r.EffectKey, r.Charges); err != nil {
		return err
	}
	if IsStandingID(r.ApprovalID) && len(r.Document) == 0 {
		return fmt.Errorf("%w: a reservation presenting standing approval %s needs the call's action document", ErrInvalidInput, r.ApprovalID)
	}
	if err := CheckReceipt(r.Receipt); err != nil {
		return err
	}
	return CheckEvents(r.Events)
}

// Check refuses a record whose keys, ids or names cannot be kept (ErrInvalidInput). The
// executor's error text is not refused here: an outcome must be recorded whatever it says.
func (r *RecordRequest) Check() error {
	if r == nil {
		return nil
	}
	if err := checkTexts("effect key", r.EffectKey, "action id", r.ActionID); err != nil {
		return err
	}
	if err := CheckReceipt(r.Receipt); err != nil {
		return err
	}
	if r.Once && (r.Receipt == nil || r.Receipt.ActionID == "") {
		return fmt.Errorf("%w: a record made once needs its receipt's action id", ErrInvalidInput)
	}
	return CheckEvents(r.Events)
}

// Check refuses an answer whose id or approver cannot be kept (ErrInvalidInput).
func (r *AnswerRequest) Check() error {
	if r == nil {
		return nil
	}
	if err := checkTexts("approval id", r.ID, "approver", r.Approver, "standing id", r.StandingID); err != nil {
		return err
	}
	if r.Standing != nil && !r.Grant {
		return fmt.Errorf("%w: answer %s: a deny cannot grant a standing approval", ErrInvalidInput, r.ID)
	}
	return r.checkMethod()
}

// Check refuses a resolution whose key or name cannot be kept (ErrInvalidInput).
func (r *ResolveRequest) Check() error {
	if r == nil {
		return nil
	}
	if err := checkTexts("effect key", r.Key, "resolved by", r.By); err != nil {
		return err
	}
	return CheckEvents(r.Events)
}

// Check refuses an extension whose key or id cannot be kept (ErrInvalidInput).
func (r *ExtendRequest) Check() error {
	if r == nil {
		return nil
	}
	return checkTexts("effect key", r.Key, "action id", r.ActionID)
}

// Check refuses a revocation whose id or name cannot be kept (ErrInvalidInput).
func (r *RevokeRequest) Check() error {
	if r == nil {
		return nil
	}
	if err := checkTexts("delegation id", r.ID, "revoked by", r.By); err != nil {
		return err
	}
	return CheckEvents(r.Events)
}

// CheckNewApproval refuses an approval request whose ids or names cannot be kept (ErrInvalidInput).
func CheckNewApproval(a *Approval, events []Event) error {
	if err := checkTexts("approval id", a.ID, "action hash", a.ActionHash, "action name", a.ActionName,
		"agent", a.Agent, "user", a.User, "policy hash", a.PolicyHash); err != nil {
		return err
	}
	return CheckEvents(events)
}

// CheckDelegation refuses a delegation whose ids or names cannot be kept (ErrInvalidInput).
func CheckDelegation(d *Delegation, events []Event) error {
	if err := checkTexts("delegation id", d.ID, "delegation parent", d.Parent, "created by", d.CreatedBy,
		"delegation via", d.Via, "delegation reason", d.Reason); err != nil {
		return err
	}
	return CheckEvents(events)
}

// Check refuses filters whose ids cannot name anything stored (ErrInvalidInput).
func (f ReceiptFilter) Check() error {
	return checkTexts("action id", f.ActionID, "effect key", f.EffectKey, "approval id", f.ApprovalID)
}

// Check refuses filters whose ids cannot name anything stored (ErrInvalidInput).
func (f EventFilter) Check() error {
	if f.AfterID < 0 || f.Limit < 0 {
		return fmt.Errorf("%w: event filter: negative after id or limit", ErrInvalidInput)
	}
	return checkTexts("action id", f.ActionID, "effect key", f.EffectKey, "approval id", f.ApprovalID)
}
