package store

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/receipt"
)

// Events of suspended executions.
const (
	// EventExecutionSuspended: the executor of an executing effect suspended, waiting for input
	// from outside (a person's answer); the effect stays executing under the same attempt.
	EventExecutionSuspended = "execution_suspended"
	// EventExecutionResumed: a suspension was resumed with its token; the payload names the
	// keys of the input and its digest, never its values.
	EventExecutionResumed = "execution_resumed"
)

// DefaultSuspendRounds is how many times one execution may suspend when the caller sets no bound.
const DefaultSuspendRounds = 8

// ErrSuspensionRefused matches every *SuspensionError.
var ErrSuspensionRefused = errors.New("suspension refused")

// Reasons of a *SuspensionError.
const (
	// SuspendRounds: the execution suspended as many times as its bound allows; nothing written.
	SuspendRounds = "suspend_rounds"
	// SuspendOpen: the execution is suspended already and was not resumed; nothing written.
	SuspendOpen = "suspended"
	// NotSuspended: the action has no suspension to resume.
	NotSuspended = "not_suspended"
	// SuspensionToken: the token is not the open suspension's.
	SuspensionToken = "suspension_token"
	// SuspensionResumed: the token is the suspension's, which was resumed already.
	SuspensionResumed = "suspension_resumed"
	// SuspensionHolder: the resumer is not the principal that holds the execution.
	SuspensionHolder = "not_holder"
	// SuspensionArguments: the arguments differ, canonically, from the suspended call's.
	SuspensionArguments = "suspension_arguments"
	// SuspensionLeaseLost: the execution's lease lapsed (its record is written ambiguous, in
	// the same transaction, when it was still executing) or its attempt is not the holder's.
	SuspensionLeaseLost = "lease_lost"
)

// SuspensionError refuses a Suspend or a Resume. Effect is the record as the refusal found (or,
// for lease_lost, left) it. Only lease_lost may have written anything: the lapse of a lease that
// was still executing, committed before the refusal is returned.
type SuspensionError struct {
	ActionID string
	Reason   string
	Effect   *Effect
}

func (e *SuspensionError) Error() string {
	return fmt.Sprintf("suspension of %s refused: %s", safetext.Quote(e.ActionID), e.Reason)
}

// Is matches ErrSuspensionRefused.
func (e *SuspensionError) Is(target error) bool { return target == ErrSuspensionRefused }

// Suspension is one round of a suspended execution: the action's executor suspended, asking
// for Request, and the execution waits, executing under its lease, for one resume that presents
// the token whose SHA-256 is TokenHash. The token itself is never stored.
type Suspension struct {
	ActionID  string
	Round     int // 1, 2, … within the execution
	EffectKey string
	Attempt   int
	// TokenHash is the hex SHA-256 of the resume token; ArgumentsHash the hex SHA-256 of the
	// call's canonical arguments.
	TokenHash     string
	ArgumentsHash string
	Agent         string // the holder
	User          string
	Request       json.RawMessage // what the executor asked for (JSON; null when nothing)
	SuspendedAt   time.Time
	// LeaseExpiresAt is the lease the suspension set.
	LeaseExpiresAt time.Time
	ResumedAt      time.Time // zero while open
	// InputKeys and InputHash are what the resume recorded of its input: the keys, and the hex
	// SHA-256 of the input's canonical JSON.
	InputKeys []string
	InputHash string
}

// Open reports whether the suspension waits for its resume.
func (s *Suspension) Open() bool { return s != nil && s.ResumedAt.IsZero() }

// SuspendRequest asks a store to suspend the executing attempt (Key, ActionID, Attempt): the
// lease is extended to Until (never shortened), a Suspension of the next round is stored and
// execution_suspended written — unless the execution is suspended already or has made
// MaxRounds rounds.
type SuspendRequest struct {
	Now           time.Time
	Key           string
	ActionID      string
	Attempt       int
	TokenHash     string
	ArgumentsHash string
	Agent         string
	User          string
	Request       json.RawMessage
	Until         time.Time
	MaxRounds     int // DefaultSuspendRounds when ≤ 0
	// Call is what rebuilding the call from the store needs when its opening event does not
	// carry it; it joins the first round's event (as "call").
	Call json.RawMessage
}

// ResumeRequest asks a store to resume the open suspension of ActionID, presenting Token: the
// token, the holder (Agent, User) and the arguments must be the suspension's, and the lease live.
// The suspension is then spent, the lease extended to Until (never shortened) and
// execution_resumed written with InputKeys and InputHash.
type ResumeRequest struct {
	Now           time.Time
	ActionID      string
	Token         string
	ArgumentsHash string
	Agent         string
	User          string
	InputKeys     []string
	InputHash     string
	Until         time.Time
}

// SuspendResult is what a Suspend or a Resume wrote.
type SuspendResult struct {
	Suspension *Suspension
	Effect     *Effect
	Events     []Event
}

// Suspender is implemented by stores that keep suspended executions; both built-in stores do.
// Each method is one transaction.
type Suspender interface {
	Suspend(ctx context.Context, req *SuspendRequest) (*SuspendResult, error)
	Resume(ctx context.Context, req *ResumeRequest) (*SuspendResult, error)
	// Suspensions returns the rounds of actionID, oldest first (none: an empty list).
	Suspensions(ctx context.Context, actionID string) ([]*Suspension, error)
}

// SuspendPlan is what one Suspend or Resume writes: the effect, a new round (Insert) or the
// spent one (Spend, a compare-and-set on its being open), the events, and for a lapse the
// record of it. Refusal, when set, is returned after the plan is committed.
type SuspendPlan struct {
	Effect  *EffectWrite
	Insert  *Suspension
	Spend   *Suspension
	Events  []Event
	Record  *receipt.Receipt
	Refusal error
	Result  SuspendResult
}

// TokenHash returns the hex SHA-256 of a resume token, as a Suspension keeps it.
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Check refuses a suspension whose texts cannot be kept (ErrInvalidInput).
func (r *SuspendRequest) Check() error {
	if r == nil {
		return errors.New("nil request")
	}
	if len(r.Request) > 0 && !json.Valid(r.Request) {
		return &InputError{Field: "request", Reason: "is not JSON"}
	}
	return checkTexts("effect key", r.Key, "action id", r.ActionID, "agent", r.Agent, "user", r.User,
		"token hash", r.TokenHash, "arguments hash", r.ArgumentsHash)
}

// Check refuses a resume whose texts cannot be kept (ErrInvalidInput).
func (r *ResumeRequest) Check() error {
	if r == nil {
		return errors.New("nil request")
	}
	for _, k := range r.InputKeys {
		if err := CheckText("input key", k); err != nil {
			return err
		}
	}
	return checkTexts("action id", r.ActionID, "agent", r.Agent, "user", r.User, "arguments hash", r.ArgumentsHash,
		"input hash", r.InputHash)
}

// PlanSuspend decides a SuspendRequest from the effect record and the action's last round (nil
// when none) the backend read.
func PlanSuspend(req *SuspendRequest, eff *Effect, last *Suspension) *SuspendPlan {
	p := &SuspendPlan{}
	refuse := func(reason string) *SuspendPlan {
		p.Refusal = &SuspensionError{ActionID: req.ActionID, Reason: reason, Effect: eff}
		return p
	}
	if eff == nil || eff.State != Executing || eff.ActionID != req.ActionID || eff.Attempt != req.Attempt ||
		!req.Now.Before(eff.LeaseExpiresAt) {
		return refuse(SuspensionLeaseLost) // nothing written: the holder's own outcome says what happened
	}
	max := req.MaxRounds
	if max <= 0 {
		max = DefaultSuspendRounds
	}
	round := 1
	if last != nil && last.Attempt == req.Attempt {
		if last.Open() {
			return refuse(SuspendOpen)
		}
		round = last.Round + 1
	}
	if round > max {
		return refuse(SuspendRounds)
	}
	next := *eff
	if req.Until.After(next.LeaseExpiresAt) {
		next.LeaseExpiresAt = req.Until
	}
	next.UpdatedAt = req.Now
	p.Effect = &EffectWrite{Prev: eff, Next: next}
	request := req.Request
	if len(request) == 0 {
		request = json.RawMessage("null")
	}
	p.Insert = &Suspension{ActionID: req.ActionID, Round: round, EffectKey: req.Key, Attempt: req.Attempt,
		TokenHash: req.TokenHash, ArgumentsHash: req.ArgumentsHash, Agent: req.Agent, User: req.User, Request: request,
		SuspendedAt: req.Now, LeaseExpiresAt: next.LeaseExpiresAt}
	payload := map[string]any{"round": round, "max_rounds": max, "attempt": req.Attempt,
		"lease_expires_at": next.LeaseExpiresAt.UTC().Format(receipt.TimeFormat)}
	ev := NewEvent(EventExecutionSuspended, req.Now, req.ActionID, req.Key, "", payload)
	if round == 1 && len(req.Call) > 0 {
		ev.Payload = withCall(ev.Payload, req.Call)
	}
	p.Events = []Event{ev}
	p.Result = SuspendResult{Suspension: p.Insert, Effect: &p.Effect.Next}
	return p
}

// withCall adds "call": call to a JSON object payload.
func withCall(payload, call json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(payload, &m) != nil {
		return payload
	}
	m["call"] = call
	b, err := json.Marshal(m)
	if err != nil {
		return payload
	}
	return b
}

// PlanResume decides a ResumeRequest from the action's last round (nil when none) and the record
// of its effect key (nil when none) the backend read. The token is compared first, in constant
// time, so that nothing else about the suspension is told to someone who does not hold it.
func PlanResume(req *ResumeRequest, last *Suspension, eff *Effect) *SuspendPlan {
	p := &SuspendPlan{}
	refuse := func(reason string) *SuspendPlan {
		p.Refusal = &SuspensionError{ActionID: req.ActionID, Reason: reason, Effect: eff}
		return p
	}
	if last == nil {
		return refuse(NotSuspended)
	}
	want, err := hex.DecodeString(last.TokenHash)
	got := sha256.Sum256([]byte(req.Token))
	if err != nil || len(want) != len(got) || subtle.ConstantTimeCompare(want, got[:]) != 1 {
		return refuse(SuspensionToken)
	}
	switch {
	case !last.Open():
		return refuse(SuspensionResumed)
	case last.Agent != req.Agent || last.User != req.User:
		return refuse(SuspensionHolder)
	case subtle.ConstantTimeCompare([]byte(last.ArgumentsHash), []byte(req.ArgumentsHash)) != 1:
		return refuse(SuspensionArguments)
	}
	if eff == nil || eff.ActionID != req.ActionID || eff.Attempt != last.Attempt || eff.State != Executing {
		return refuse(SuspensionLeaseLost)
	}
	if !req.Now.Before(eff.LeaseExpiresAt) {
		// The lease lapsed while the execution waited: its outcome is unknown, and the record
		// says so now, committed before the refusal, as a contender's reservation would write it.
		next := lapse(eff, req.Now)
		p.Effect = &EffectWrite{Prev: eff, Next: next}
		p.Events = []Event{NewEvent(EventExecutionAmbiguous, req.Now, eff.ActionID, eff.Key, "",
			map[string]any{"cause": "lease_expired", "holder": eff.ActionID, "attempt": eff.Attempt, "by": "resume",
				"round": last.Round})}
		p.Record = LeaseLapsedRecord(&next, req.Now)
		p.Refusal = &SuspensionError{ActionID: req.ActionID, Reason: SuspensionLeaseLost, Effect: &p.Effect.Next}
		return p
	}
	next := *eff
	if req.Until.After(next.LeaseExpiresAt) {
		next.LeaseExpiresAt = req.Until
	}
	next.UpdatedAt = req.Now
	p.Effect = &EffectWrite{Prev: eff, Next: next}
	spent := *last
	spent.ResumedAt = req.Now
	spent.InputKeys = append([]string{}, req.InputKeys...)
	spent.InputHash = req.InputHash
	p.Spend = &spent
	keys := make([]any, len(req.InputKeys))
	for i, k := range req.InputKeys {
		keys[i] = k
	}
	p.Events = []Event{NewEvent(EventExecutionResumed, req.Now, req.ActionID, eff.Key, "",
		map[string]any{"round": last.Round, "attempt": eff.Attempt, "input_keys": keys, "input_sha256": req.InputHash,
			"lease_expires_at": next.LeaseExpiresAt.UTC().Format(receipt.TimeFormat)})}
	p.Result = SuspendResult{Suspension: p.Spend, Effect: &p.Effect.Next}
	return p
}
