package latch

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// DefaultSuspendRounds is how many times one execution may suspend unless Config.SuspendRounds
// says otherwise.
const DefaultSuspendRounds = store.DefaultSuspendRounds

// maxSuspendRequest bounds what an executor may ask for when it suspends, and maxResumeInput
// the input a resume hands it: both are held in memory and the request in the store.
const (
	maxSuspendRequest = 64 << 10
	maxResumeInput    = 1 << 20
)

// ErrSuspended is matched by the error of a call whose executor suspended (*SuspendedError):
// the call is not over, and its effect stays executing until it is resumed and ends, or its
// lease lapses into ambiguous.
var ErrSuspended = errors.New("latch: execution suspended")

// Suspend returns the error an executor returns to suspend its call mid-execution, asking for
// input from outside — a person's answer, an upstream's elicitation — described by request (any
// value that encodes as JSON, at most 64 KiB; nil asks for nothing in particular). The call's
// effect stays executing under the same attempt, its lease extended by Config.SuspendLease, and
// the caller gets a *SuspendedError carrying the one token that resumes it (Guard.Resume). An
// executor that suspends has acted as far as it says: on resume it runs again, with the same
// arguments and ResumedFrom(ctx) set, and continues from there.
//
// Only a call that holds an effect key can suspend, and not in observe mode: elsewhere, and
// past Config.SuspendRounds rounds, a suspension is recorded as an unknown outcome (ambiguous).
func Suspend(request any) error { return &suspendSignal{request: request} }

// suspendSignal is what Suspend returns: the executor's request to suspend.
type suspendSignal struct{ request any }

func (s *suspendSignal) Error() string { return "latch: the executor suspended" }

// Suspension is one round of a suspended execution, as its suspender is told it.
type Suspension struct {
	ActionID  string
	EffectKey string
	Attempt   int
	Round     int // 1, 2, … up to Config.SuspendRounds
	// Token resumes this round, once. latch keeps only its SHA-256: it is told here and never
	// again, so whoever must resume the call must be handed it.
	Token          string
	Request        json.RawMessage // what the executor asked for (JSON)
	LeaseExpiresAt time.Time       // the lease the suspension set: resume before it
}

// SuspendedError is the error of a call whose executor suspended: it carries the Suspension.
// It matches ErrSuspended.
type SuspendedError struct {
	Suspension
}

func (e *SuspendedError) Error() string {
	return fmt.Sprintf("latch: %s suspended (round %d) until %s: resume it with its token", safetext.Quote(e.ActionID),
		e.Round, e.LeaseExpiresAt.UTC().Format(receipt.TimeFormat))
}

// Is matches ErrSuspended.
func (e *SuspendedError) Is(target error) bool { return target == ErrSuspended }

// Resumption is what a resumed executor finds in its context (ResumedFrom): the round it
// suspended, what it asked for, and the input it was resumed with.
type Resumption struct {
	ActionID       string
	Round          int
	Request        json.RawMessage
	Input          map[string]json.RawMessage
	LeaseExpiresAt time.Time // the lease the resume set
}

type resumeCtx struct{}

// ResumedFrom returns, inside an executor run by Guard.Resume, the resumption it runs for; nil
// on the first run of a call.
func ResumedFrom(ctx context.Context) *Resumption {
	r, _ := ctx.Value(resumeCtx{}).(*Resumption)
	return r
}

// ResumeRequest resumes a suspended call.
type ResumeRequest struct {
	ActionID string
	Token    string // the suspension's token, exactly
	// Arguments are the call's arguments, again: they must be canonically the ones it was
	// suspended with (the same JSON up to key order and spacing).
	Arguments json.RawMessage
	// Input is what the suspension asked for, by name (JSON values, at most 1 MiB in all). The
	// store records its keys and a SHA-256 digest, never its values.
	Input map[string]json.RawMessage
}

// Resume resumes a call whose executor suspended (Execute returned a *SuspendedError) and runs
// fn, its executor, again: with the same canonical arguments, under the same attempt and lease,
// ResumedFrom(ctx) telling it the round and its input. fn may end the call (its outcome is
// recorded with the call's one receipt, as Execute records it) or suspend again. The caller's
// principal must be the call's, r.Token the suspension's exact token (compared in constant
// time), the arguments the same, and the lease live; a suspension is resumed at most once.
// A refusal writes nothing and runs nothing, except that a lease which lapsed meanwhile is
// recorded ambiguous: then the refusal is an *EffectError ambiguous and fn never runs again.
// Other refusals are *OutcomeError (not_suspended, suspension_token, suspension_resumed,
// suspension_arguments, not_holder, no_such_action).
func (g *Guard) Resume(ctx context.Context, r *ResumeRequest, fn Executor) (rc *Receipt, err error) {
	b, res, err := g.resume(ctx, r)
	if err != nil {
		return nil, err
	}
	ctx, span := g.startSpan(ctx, SpanCall, AttrAction.String(b.pr.call.Action), AttrActionID.String(r.ActionID))
	defer func() {
		endCallSpan(span, rc, err)
		if rc != nil || !errors.Is(err, ErrSuspended) {
			g.obs.callEnded(b.pr.call.Action, rc, err)
		}
	}()
	draft := new(receipt.Receipt)
	*draft = *b.rc
	h := b.h
	h.once, h.lease = true, res.LeaseExpiresAt
	return g.run(ctx, b.pr, draft, h, fn, res)
}

// SuspendBegun suspends a call begun with Begin, for its executor that runs elsewhere (latch
// serve's POST /v1/actions/{id}/suspend): as an executor's Suspend, asking for request (JSON).
// Only the call's principal may, while its lease is live; the returned Suspension carries the
// token that resumes it (ResumeBegun). Past Config.SuspendRounds rounds the call is recorded
// ambiguous, with its receipt, and the error is an *AmbiguousError.
func (g *Guard) SuspendBegun(ctx context.Context, actionID string, request json.RawMessage) (*Suspension, error) {
	b, err := g.held(ctx, actionID)
	if err != nil {
		return nil, err
	}
	if b.h.key == "" {
		return nil, &OutcomeError{ActionID: actionID, Reason: string(ReasonNoLease), Detail: "a call without an effect key cannot suspend"}
	}
	if len(request) > 0 && !json.Valid(request) {
		return nil, &InvalidArgumentError{Reason: string(ReasonInvalidArgument), Pointer: "/request", Err: errors.New("the request is not JSON")}
	}
	var ask any
	if len(request) > 0 {
		ask = request
	}
	s, err := g.suspendRound(ctx, b.pr, b.rc, b.h, ask)
	var rounds *suspendRoundsError
	switch {
	case err == nil:
		return s, nil
	case errors.As(err, &rounds):
		defer g.begun.remove(actionID)
		draft := new(receipt.Receipt)
		*draft = *b.rc
		h := b.h
		h.once = true
		rc, err := g.record(ctx, b.pr, draft, h, nil, err, nil)
		g.obs.callEnded(b.pr.call.Action, rc, err)
		return nil, err
	}
	return nil, suspensionRefusal(b, err)
}

// ResumeBegun resumes a call begun with Begin that its executor suspended (SuspendBegun), as
// Resume does, for an executor that runs elsewhere: it runs nothing, and the executor carries on
// and reports its outcome with Finish (or suspends again). The refusals are Resume's.
func (g *Guard) ResumeBegun(ctx context.Context, r *ResumeRequest) (*Resumption, error) {
	_, res, err := g.resume(ctx, r)
	return res, err
}

// resume spends the suspension r names and returns the call and the resumption.
func (g *Guard) resume(ctx context.Context, r *ResumeRequest) (*remoteBegun, *Resumption, error) {
	if r == nil {
		return nil, nil, errors.New("latch: resume: nil request")
	}
	b, err := g.held(ctx, r.ActionID)
	if err != nil {
		return nil, nil, err
	}
	if b.h.key == "" {
		return nil, nil, &OutcomeError{ActionID: r.ActionID, Reason: string(ReasonNotSuspended)}
	}
	argsHash, err := argumentsHash(r.Arguments)
	if err != nil {
		return nil, nil, err
	}
	keys, inputHash, err := inputDigest(r.Input)
	if err != nil {
		return nil, nil, err
	}
	sus, ok := g.store.(store.Suspender)
	if !ok {
		return nil, nil, fmt.Errorf("latch: resume %s: store %T keeps no suspensions", safetext.Quote(r.ActionID), g.store)
	}
	now := g.cfg.Now()
	t0 := time.Now()
	res, err := sus.Resume(ctx, &store.ResumeRequest{Now: now, ActionID: r.ActionID, Token: r.Token, ArgumentsHash: argsHash,
		Agent: b.pr.principal.Agent, User: b.pr.principal.User, InputKeys: keys, InputHash: inputHash, Until: now.Add(g.lease(b.pr))})
	g.obs.storeTransaction("resume", t0, err)
	if err != nil {
		if errors.Is(err, store.ErrSuspensionRefused) {
			var se *store.SuspensionError
			if errors.As(err, &se) && se.Reason == store.SuspensionLeaseLost {
				g.begun.remove(r.ActionID) // the call is over: its record says ambiguous
			}
		}
		return nil, nil, suspensionRefusal(b, err)
	}
	g.emit(ctx, nil, res.Events)
	input := r.Input
	if input == nil {
		input = map[string]json.RawMessage{}
	}
	return b, &Resumption{ActionID: r.ActionID, Round: res.Suspension.Round, Request: res.Suspension.Request, Input: input,
		LeaseExpiresAt: res.Effect.LeaseExpiresAt}, nil
}

// suspensionRefusal is the caller's error for a store's refusal of a suspension or a resume.
func suspensionRefusal(b *remoteBegun, err error) error {
	var se *store.SuspensionError
	if !errors.As(err, &se) {
		return wrapOp("suspension of "+safetext.Quote(b.rc.ActionID), err)
	}
	switch se.Reason {
	case store.SuspensionLeaseLost:
		if se.Effect != nil && se.Effect.State == store.Ambiguous {
			return &EffectError{Key: b.h.key, State: StateAmbiguous, Reason: string(ReasonAmbiguous), Attempt: b.h.attempt,
				Detail: "the lease of " + safetext.Quote(b.h.key) + " lapsed while its execution was suspended: its outcome is unknown"}
		}
		return &OutcomeError{ActionID: se.ActionID, Reason: string(ReasonLeaseLost)}
	case store.SuspendOpen:
		return &OutcomeError{ActionID: se.ActionID, Reason: string(ReasonSuspensionOpen),
			Detail: "the call is suspended already: resume it first"}
	case store.SuspensionHolder:
		return &OutcomeError{ActionID: se.ActionID, Reason: string(ReasonNotHolder)}
	case store.NotSuspended, store.SuspensionToken, store.SuspensionResumed, store.SuspensionArguments:
		return &OutcomeError{ActionID: se.ActionID, Reason: se.Reason}
	}
	return &OutcomeError{ActionID: se.ActionID, Reason: string(ReasonOutcomeRefused), Detail: se.Reason}
}

// suspendRoundsError is why a call that suspended once too often is recorded ambiguous.
type suspendRoundsError struct{ max int }

func (e *suspendRoundsError) Error() string {
	return fmt.Sprintf("the executor suspended more than %d times: its outcome is unknown", e.max)
}

// suspendRound suspends the executing call: a new token, the round stored with the lease
// extended. The error is the store's refusal, or why the call cannot suspend at all (recorded
// ambiguous by the caller).
func (g *Guard) suspendRound(ctx context.Context, pr *prepared, rc *receipt.Receipt, h hold, request any) (*Suspension, error) {
	switch {
	case h.key == "":
		return nil, errors.New("the executor suspended, but a call without an effect key cannot: its outcome is unknown")
	case rc.WouldHave != nil:
		return nil, errors.New("the executor suspended, but a call in observe mode cannot: its outcome is unknown")
	}
	ask, err := json.Marshal(request)
	switch {
	case err != nil:
		return nil, fmt.Errorf("the executor suspended with a request that does not encode as JSON: %w", err)
	case len(ask) > maxSuspendRequest:
		return nil, fmt.Errorf("the executor suspended with a request of %d bytes, more than %d", len(ask), maxSuspendRequest)
	}
	sus, ok := g.store.(store.Suspender)
	if !ok {
		return nil, fmt.Errorf("the executor suspended, but store %T keeps no suspensions", g.store)
	}
	var call json.RawMessage
	if !pr.remote {
		// Its opening event does not carry what rebuilding the call needs: the first round's does.
		if call, err = json.Marshal(g.remoteRecord(pr)); err != nil {
			return nil, fmt.Errorf("suspend: %w", err)
		}
	}
	token := newResumeToken()
	max := g.suspendRounds()
	now := g.cfg.Now()
	t0 := time.Now()
	res, err := sus.Suspend(ctx, &store.SuspendRequest{Now: now, Key: h.key, ActionID: rc.ActionID, Attempt: h.attempt,
		TokenHash: store.TokenHash(token), ArgumentsHash: sum256(pr.canonArgs), Agent: pr.principal.Agent,
		User: pr.principal.User, Request: ask, Until: now.Add(g.cfg.SuspendLease), MaxRounds: max, Call: call})
	g.obs.storeTransaction("suspend", t0, err)
	var se *store.SuspensionError
	switch {
	case errors.As(err, &se) && se.Reason == store.SuspendRounds:
		return nil, &suspendRoundsError{max: max}
	case err != nil:
		return nil, err
	}
	g.emit(ctx, nil, res.Events)
	return &Suspension{ActionID: rc.ActionID, EffectKey: h.key, Attempt: h.attempt, Round: res.Suspension.Round, Token: token,
		Request: res.Suspension.Request, LeaseExpiresAt: res.Effect.LeaseExpiresAt}, nil
}

// suspended handles an executor's Suspend: the round is stored and the call kept for its
// resume, and the caller told (a *SuspendedError). A suspension that cannot be made is the
// executor's outcome, unknown: it is recorded ambiguous.
func (g *Guard) suspended(ctx context.Context, pr *prepared, rc *receipt.Receipt, h hold, sig *suspendSignal) (*Receipt, error) {
	s, err := g.suspendRound(ctx, pr, rc, h, sig.request)
	if err != nil {
		var se *store.SuspensionError
		if errors.As(err, &se) {
			err = fmt.Errorf("the executor suspended, and the suspension was refused: %w", err)
		}
		g.begun.remove(rc.ActionID)
		return g.record(ctx, pr, rc, h, nil, err, nil)
	}
	g.begun.put(&remoteBegun{begun: &begun{pr: pr, rc: rc, h: h}, ready: time.Now()})
	return nil, &SuspendedError{Suspension: *s}
}

func (g *Guard) suspendRounds() int {
	if g.cfg.SuspendRounds > 0 {
		return g.cfg.SuspendRounds
	}
	return DefaultSuspendRounds
}

// newResumeToken returns a resume token: 256 random bits.
func newResumeToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	return "lrt_" + base64.RawURLEncoding.EncodeToString(b[:])
}

func sum256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// argumentsHash is the hex SHA-256 of the canonical form of args ({} when empty).
func argumentsHash(args json.RawMessage) (string, error) {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	c, err := canon.Canonicalize(args)
	if err != nil {
		return "", &InvalidArgumentError{Reason: string(ReasonInvalidArgument), Pointer: "/arguments", Err: err}
	}
	return sum256(c), nil
}

// inputDigest returns the sorted keys of a resume's input and the hex SHA-256 of its canonical
// JSON, refusing input that is not JSON or too large.
func inputDigest(in map[string]json.RawMessage) ([]string, string, error) {
	keys := make([]string, 0, len(in))
	for k := range in {
		if err := store.CheckText("input key", k); err != nil {
			return nil, "", &InvalidArgumentError{Reason: string(ReasonInvalidArgument), Pointer: "/input", Err: err}
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b, err := json.Marshal(in)
	if err != nil {
		return nil, "", &InvalidArgumentError{Reason: string(ReasonInvalidArgument), Pointer: "/input", Err: err}
	}
	if len(b) > maxResumeInput {
		return nil, "", &InvalidArgumentError{Reason: string(ReasonInvalidArgument), Pointer: "/input",
			Err: fmt.Errorf("the input is %d bytes, more than %d", len(b), maxResumeInput)}
	}
	if in == nil {
		b = []byte("{}")
	}
	c, err := canon.Canonicalize(b)
	if err != nil {
		return nil, "", &InvalidArgumentError{Reason: string(ReasonInvalidArgument), Pointer: "/input", Err: err}
	}
	return keys, sum256(c), nil
}
