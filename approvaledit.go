package latch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Approved is what an approval request binds (docs/approvals.md#approve-with-edits): the
// arguments a call presents, with the request's id, to spend it. An approver who may edit the
// action's arguments can narrow them when granting; the request then binds the edited ones, and
// a call presenting the requested arguments is refused approval_mismatch.
type Approved struct {
	ApprovalID string
	Status     store.ApprovalStatus
	// ActionHash and Arguments are what the request binds now: a call spends it only with
	// exactly these arguments (canonical JSON).
	ActionHash string
	Arguments  json.RawMessage
	// RequestedHash and Requested are what the call asked for; equal to ActionHash and
	// Arguments when nobody edited them.
	RequestedHash string
	Requested     json.RawMessage
	// Edits are the approvers' edits, oldest first: who, how they were authenticated, when,
	// and each argument from the value it had to the value it took. Empty when none.
	Edits []store.EditRecord
}

// Edited reports whether an approver changed the request's arguments.
func (a *Approved) Edited() bool { return len(a.Edits) > 0 }

// Approved returns what the approval request id binds: its arguments as an approver may have
// edited them, beside the ones requested and who edited what. A caller whose call was approved
// with edits presents Arguments with the same approval (WithApproval). An unknown id is an
// error wrapping store.ErrNotFound. It reads the request and its events; it writes nothing.
func (g *Guard) Approved(ctx context.Context, id string) (*Approved, error) {
	a, err := g.store.Approval(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("latch: approval %s: %w", safetext.Quote(id), err)
	}
	edits, err := g.approvalEdits(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("latch: approval %s: %w", safetext.Quote(id), err)
	}
	return approvedOf(a, edits), nil
}

// ApprovedOf is what request a binds, given its edits (store.EditsOf of its events).
func approvedOf(a *store.Approval, edits []store.EditRecord) *Approved {
	args := argumentsOf(a.Action)
	out := &Approved{ApprovalID: a.ID, Status: a.Status, ActionHash: a.ActionHash, Arguments: args,
		RequestedHash: a.ActionHash, Requested: args, Edits: edits}
	if len(edits) > 0 {
		out.RequestedHash, out.Requested = edits[0].From, edits[0].Requested
	}
	return out
}

// argumentsOf is the arguments member of a canonical action document ({} when it has none).
func argumentsOf(doc json.RawMessage) json.RawMessage {
	var d struct {
		Arguments json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal(doc, &d) != nil || len(d.Arguments) == 0 {
		return json.RawMessage("{}")
	}
	if c, err := canon.Canonicalize(d.Arguments); err == nil {
		return c
	}
	return d.Arguments
}

// approvalEdits reads the edits of request id from its events.
func (g *Guard) approvalEdits(ctx context.Context, id string) ([]store.EditRecord, error) {
	evs, err := g.store.Events(ctx, store.EventFilter{ApprovalID: id})
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	return store.EditsOf(evs)
}

// editOfReceipt is the approval_edit of the receipt of a call that spent request a: nil when
// nobody edited it. The events of a request that is pending or granted are kept by a prune, so
// an edit is read back for as long as its approval can be spent.
func (g *Guard) editOfReceipt(ctx context.Context, a *store.Approval) (*receipt.ApprovalEdit, error) {
	edits, err := g.approvalEdits(ctx, a.ID)
	if err != nil || len(edits) == 0 {
		return nil, err
	}
	e := &receipt.ApprovalEdit{RequestedActionHash: edits[0].From,
		RequestedArguments: receiptArguments(g.Policy(), a.ActionName, edits[0].Requested)}
	for _, x := range edits {
		e.EditedBy = append(e.EditedBy, safetext.Valid(store.Approver{Name: x.By, Method: x.Method}.String()))
	}
	return e, nil
}

// withEditedArguments adds to an approval_mismatch refusal the arguments the approval binds,
// when an approver edited them, so the caller can present them. Any other error is returned as
// it was.
func (g *Guard) withEditedArguments(ctx context.Context, err error) error {
	var me *ApprovalMismatchError
	if !errors.As(err, &me) || me.Reason != "mismatch" || me.ApprovalID == "" {
		return err
	}
	ap, rerr := g.Approved(ctx, me.ApprovalID)
	if rerr != nil || !ap.Edited() {
		return err
	}
	me.Arguments = ap.Arguments
	me.Detail += "; an approver edited the arguments: present the approved ones with the same approval"
	return err
}
