package store

import (
	"context"
	"fmt"
	"strconv"
)

// Filler is implemented by a store that can write many calls in one transaction. `latch bench
// --prefill` grows a store to millions of receipts with it, to measure how the cost of a call and
// of the operator's reads grows with the store.
//
// Fill makes the writes of each call in calls, in order, through the store's own write methods
// (CreateApproval, AnswerApproval, Reserve, Record, Resolve) run inside one write transaction:
// what it writes is exactly what those methods write one call at a time — effect and approval
// rows, events, receipts sealed onto the chain, the chain head — and it commits all of it or
// nothing. A write its method answers with an error (a refused answer, a resolution of an effect
// that is not ambiguous, a request that does not check) fails the whole fill, naming the call; a
// refusal a method writes as a result (a duplicate reservation's blocked receipt) is written.
// Requests that read or write rows beside the effect and the approval (RequestKey, Charges, a
// standing approval, Record's Once) are not filled: Fill refuses them, writing nothing.
type Filler interface {
	Fill(ctx context.Context, calls []FillCall) error
}

// FillCall is the writes of one call, each optional (nil: none), made in the order of its
// fields — the order the pipeline makes them in: an approval request, its answer, the
// reservation, the outcome, a person's resolution.
type FillCall struct {
	Approval *ApprovalRequest
	Answer   *AnswerRequest
	Reserve  *ReserveRequest
	Record   *RecordRequest
	Resolve  *ResolveRequest
}

// CheckFill refuses a call Fill does not write (see Filler); i is its index, for the message.
func (c *FillCall) CheckFill(i int) error {
	switch r := c.Reserve; {
	case r != nil && r.RequestKey != "":
		return &FillError{Call: i, Field: "Reserve.RequestKey"}
	case r != nil && len(r.Charges) > 0:
		return &FillError{Call: i, Field: "Reserve.Charges"}
	case r != nil && IsStandingID(r.ApprovalID):
		return &FillError{Call: i, Field: "Reserve.ApprovalID (a standing approval)"}
	case c.Record != nil && c.Record.Once:
		return &FillError{Call: i, Field: "Record.Once"}
	case c.Approval != nil && c.Approval.Probe != nil && len(c.Approval.Probe.Charges) > 0:
		return &FillError{Call: i, Field: "Approval.Probe.Charges"}
	}
	return nil
}

// FillError names a call Fill does not write and the field that makes it so.
type FillError struct {
	Call  int
	Field string
}

func (e *FillError) Error() string {
	return "fill: call " + strconv.Itoa(e.Call) + ": " + e.Field + " is not filled: make this call through its own write method"
}

// Write makes the call's writes through st's write methods, in order, stopping at the first
// error. A backend's Fill runs it with a context that puts every write into its one transaction.
func (c *FillCall) Write(ctx context.Context, st Store) error {
	if c.Approval != nil {
		if _, err := st.CreateApproval(ctx, c.Approval); err != nil {
			return err
		}
	}
	if c.Answer != nil {
		if _, err := st.AnswerApproval(ctx, c.Answer); err != nil {
			return err
		}
	}
	if c.Reserve != nil {
		if _, err := st.Reserve(ctx, c.Reserve); err != nil {
			return err
		}
	}
	if c.Record != nil {
		if _, err := st.Record(ctx, c.Record); err != nil {
			return err
		}
	}
	if c.Resolve != nil {
		if _, err := st.Resolve(ctx, c.Resolve); err != nil {
			return err
		}
	}
	return nil
}

// CheckFills checks every call of a fill (CheckFill) before any is written.
func CheckFills(calls []FillCall) error {
	for i := range calls {
		if err := calls[i].CheckFill(i); err != nil {
			return err
		}
	}
	return nil
}

// WriteFills makes the writes of calls in order (Write), naming the call that fails. A
// backend's Fill runs it with a context that puts every write into its one transaction.
func WriteFills(ctx context.Context, st Store, calls []FillCall) error {
	for i := range calls {
		if err := calls[i].Write(ctx, st); err != nil {
			return fmt.Errorf("call %d: %w", i, err)
		}
	}
	return nil
}
