package latch

import (
	"errors"
	"fmt"
	"time"
)

// Observer is told, as it happens, how each call ended, how long each store transaction of the
// pipeline took, and when a sink failed: what a metrics sink counts that receipts and events do
// not carry. A Sink given in Config.Sinks that also implements Observer is both (package
// metrics is one). Its methods are called synchronously on the call's goroutine: they must
// return at once, never block and never fail.
type Observer interface {
	// CallEnded is told the end of one call (Execute, a Protect function, Begin's refusal or
	// Finish): its action, its result — committed, failed, ambiguous, observed, denied,
	// blocked, approval_required, or error when the call could not be decided or recorded —
	// and, for denied and blocked, the refusal's reason word (ReasonOf).
	CallEnded(action, result, reason string)
	// StoreTransaction is told the duration of one write transaction of the pipeline: op is
	// reserve, record, create_approval, answer_approval, resolve, extend_lease, sweep_lease,
	// sweep_approval or claim_reconcile; err is what the store returned (nil, a refusal the store
	// decided, or a failure).
	StoreTransaction(op string, d time.Duration, err error)
	// SinkFailed is told that a sink refused a delivery (what: error), panicked (panic) or
	// fell so far behind that a delivery was dropped (dropped).
	SinkFailed(sink, what string)
}

// Results of a call as an Observer is told them, beside the receipt results.
const (
	ResultApprovalRequired = "approval_required"
	ResultError            = "error"
)

// ReasonOf is the reason word of a refusal (RefusalOf's Reason), as receipts, the CLI's JSON,
// the HTTP API, the gateway, webhooks, metrics and spans name it. It is "" for an error that is
// not a refusal: an error latch met, or this call's own unknown or failed outcome.
func ReasonOf(err error) string {
	r := RefusalOf(err)
	if r == nil || !r.Kind.IsRefusal() {
		return ""
	}
	return string(r.Reason)
}

// observers are the guard's Observers: the sinks that are also one.
type observers []Observer

func observersOf(sinks []Sink) observers {
	var obs observers
	for _, s := range sinks {
		if o, ok := s.(Observer); ok {
			obs = append(obs, o)
		}
	}
	return obs
}

// callEnded tells the observers how a call ended, from its receipt (nil when none was written)
// and its error.
func (obs observers) callEnded(action string, rc *Receipt, err error) {
	if len(obs) == 0 {
		return
	}
	var result, reason string
	switch {
	case rc != nil:
		result = rc.Result
		if result == "denied" || result == "blocked" {
			reason = ReasonOf(err)
		}
	case errors.Is(err, ErrApprovalRequired):
		result = ResultApprovalRequired
	case errors.Is(err, ErrDenied) || errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrIdentity):
		// Refused before anything was written: no principal, a name no store can keep.
		result, reason = "denied", ReasonOf(err)
	default:
		result = ResultError
	}
	for _, o := range obs {
		o.CallEnded(action, result, reason)
	}
}

// storeTransaction tells the observers how long a store write took.
func (obs observers) storeTransaction(op string, start time.Time, err error) {
	if len(obs) == 0 {
		return
	}
	d := time.Since(start)
	for _, o := range obs {
		o.StoreTransaction(op, d, err)
	}
}

// sinkFailed tells the observers a sink failed a delivery.
func (obs observers) sinkFailed(s Sink, what string) {
	name := fmt.Sprintf("%T", s)
	for _, o := range obs {
		o.SinkFailed(name, what)
	}
}
