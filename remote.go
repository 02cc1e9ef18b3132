package latch

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/latchkit/latch/authority"
	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// ErrOutcomeRefused: an outcome (or a lease extension) for a begun call was refused and nothing
// was written: there is no such call, the caller is not its principal, or its outcome is already
// recorded. *OutcomeError carries the reason.
var ErrOutcomeRefused = errors.New("latch: outcome refused")

// OutcomeError refuses Finish or Extend. Reason is one of no_such_action (no call begun with
// Begin has that action id), not_holder (the caller is not the principal that began it),
// already_recorded (its outcome was recorded before, or is being recorded now) and no_lease (a
// lease extension for a call that holds no effect key).
type OutcomeError struct {
	ActionID string
	Reason   string
	Detail   string
}

func (e *OutcomeError) Error() string {
	s := fmt.Sprintf("latch: outcome of %s refused: %s", safetext.Quote(e.ActionID), e.Reason)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is matches ErrOutcomeRefused.
func (e *OutcomeError) Is(target error) bool { return target == ErrOutcomeRefused }

// Pending is a call begun with Begin whose executor runs elsewhere: decided, approved and, when
// it has an effect key, reserved. Its executor reports what happened with Finish.
type Pending struct {
	ActionID   string
	Action     string
	ActionHash string
	Arguments  json.RawMessage // canonical: what the executor must act on
	Resource   string
	Principal  Principal // Agent and User (and Issuer) of the call
	EffectKey  string    // "" when the call has no effect key
	Attempt    int       // 0 without an effect key
	// IdempotencyToken is the per-attempt token of IdempotencyToken, EffectToken the per-key
	// token of EffectToken; "" without an effect key.
	IdempotencyToken string
	EffectToken      string
	LeaseExpiresAt   time.Time // zero without an effect key
	ApprovalID       string    // the approval it spent, if any
	Decision         Decision
	Reason           string
	// WouldHave is set in observe mode: what enforcement would have done. The executor runs
	// whatever it says.
	WouldHave *receipt.WouldHave
	StartedAt time.Time
	// Replayed is set when ctx's request key (WithRequestKey) named a reservation that still
	// holds its effect: this Pending is that earlier Begin's call, whose executor may be running
	// now. A caller that runs the executor itself must not run it again for a replayed Pending.
	Replayed bool
}

// Begin runs the pipeline of a call up to its executor — principal, normalize, decide, approve,
// reserve — for an executor that runs elsewhere (another process, another language, behind
// `latch serve`). It refuses exactly as Execute refuses, with the same errors and receipts. On
// success the call holds its effect key under a lease; the executor acts and reports the outcome
// with Finish, from this process or any other serving the same store. An outcome that never
// comes leaves the lease to lapse into ambiguous, as a crashed in-process executor does.
//
// Options.Reconcile is honoured as in Execute; Options.Wait blocks until the approval request is
// answered or ctx ends. A call without an effect key costs one more write than under Execute:
// its opening events are written now so that Finish can find it.
func (g *Guard) Begin(ctx context.Context, call *Call) (_ *Pending, err error) {
	ctx, span := g.startSpan(ctx, SpanBegin, AttrAction.String(call.Action))
	defer func() { endSpan(span, err) }()
	if k := requestKeyFrom(ctx); k != "" {
		if err := store.CheckRequestKey(k); err != nil {
			return nil, fmt.Errorf("latch: begin %s: %w", safetext.Quote(call.Action), err)
		}
	}
	b, rc, err := g.begin(ctx, call, true)
	if rp := (*replayedError)(nil); errors.As(err, &rp) {
		return g.replay(ctx, span, rp)
	}
	if b == nil {
		endCallSpan(span, rc, err)
		g.obs.callEnded(call.Action, rc, err)
		return nil, err
	}
	span.SetAttributes(AttrActionID.String(b.rc.ActionID), AttrEffectKey.String(b.h.key), AttrAttempt.Int(b.h.attempt))
	if !b.h.written {
		ls, ok := g.store.(interface {
			LogEvents(context.Context, []store.Event) error
		})
		if !ok {
			return nil, fmt.Errorf("latch: begin %s: store %T cannot log events", call.Action, g.store)
		}
		evs := g.proposal(b.pr, b.rc.ActionID, g.cfg.Now())
		if err := ls.LogEvents(ctx, evs); err != nil {
			return nil, wrapOp("begin "+safetext.Quote(call.Action), err)
		}
		g.emit(ctx, nil, evs)
		b.h.written = true
	}
	g.begun.put(&remoteBegun{begun: b, ready: time.Now()})
	return b.pending(), nil
}

// WithRequestKey returns ctx carrying the caller's request key for Begin: a key the caller chose
// for this one request (a UUID, say: 1 to 255 of the bytes store.CheckRequestKey allows), sent
// again unchanged when it asks again because the answer was lost. Begin then stores the key with
// the reservation, and a Begin of the same call by the same principal with the same key is
// handed the same reservation — the same action id, attempt, tokens and lease — while that
// attempt holds the effect, instead of being refused in_progress by its own attempt. Once the
// attempt's outcome is recorded (or its lease lapsed), the key's call is decided as any
// duplicate of the effect is: refused committed or ambiguous, or a new attempt after a failure.
// The key belongs to the principal that first used it, for one call (action hash, effect key,
// approval): anything else under it is refused with a *RequestKeyError, and nothing is written.
// A call without an effect key reserves nothing, and its key is not kept; in observe mode
// nothing is refused, and the key is not kept either.
func WithRequestKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, requestKeyCtx{}, key)
}

type requestKeyCtx struct{}

// RequestKeyFrom returns the request key WithRequestKey put in ctx, "" when none (the Go client
// sends it as the Idempotency-Key header of its begin).
func RequestKeyFrom(ctx context.Context) string { return requestKeyFrom(ctx) }

func requestKeyFrom(ctx context.Context) string {
	k, _ := ctx.Value(requestKeyCtx{}).(string)
	return k
}

// ErrRequestKeyMismatch is matched by the error of a Begin whose request key was used before by
// another principal or for another call (*RequestKeyError).
var ErrRequestKeyMismatch = store.ErrRequestKeyMismatch

// RequestKeyError refuses a Begin whose request key names another principal's call
// (request_key_other_principal) or another call (request_key_other_action,
// request_key_other_effect_key, request_key_other_approval). Nothing is
// written.
type RequestKeyError = store.RequestKeyError

// replayedError is how reserve tells Begin that the call's request key named a reservation that
// still holds its effect: nothing was written, and Begin answers with that reservation.
type replayedError struct {
	actionID string
	lease    time.Time
}

func (e *replayedError) Error() string { return "latch: replayed " + e.actionID }

// replay answers a Begin whose request key named the reservation of action id rp.actionID: the
// call as that Begin left it, with its lease as it now stands.
func (g *Guard) replay(ctx context.Context, span trace.Span, rp *replayedError) (*Pending, error) {
	b := g.begun.get(rp.actionID)
	if b == nil {
		var err error
		if b, err = g.loadBegun(ctx, rp.actionID); err != nil {
			return nil, err
		}
		g.begun.put(b)
	}
	span.SetAttributes(AttrActionID.String(rp.actionID), AttrEffectKey.String(b.h.key), AttrAttempt.Int(b.h.attempt))
	p := b.pending()
	p.LeaseExpiresAt = rp.lease
	p.Replayed = true
	return p, nil
}

// Bounds of the begun calls a guard keeps in memory for their outcome. A call's arguments may be
// as large as a request body (a megabyte behind latch serve's default), and an agent may begin
// many calls and report none: what is kept is bounded by bytes, in all and per principal, and a
// call past the bounds is rebuilt from the store when its outcome arrives, as after a restart.
const (
	begunCacheMax = 4096 // calls kept, all principals together
	// begunCacheBytes bounds the bytes kept, all principals together, and begunPrincipalBytes
	// what the calls of one principal may take of it: one agent that begins and never reports
	// evicts its own calls, not everyone's.
	begunCacheBytes     = 32 << 20
	begunPrincipalBytes = 4 << 20
	// begunEntryMax is the largest call kept: one with larger arguments is rebuilt from the
	// store when its outcome arrives rather than held for it.
	begunEntryMax = 64 << 10
	// begunOverhead is what a kept call costs beyond its arguments (its prepared call, draft
	// receipt, ids and map entry), counted so that many small calls are bounded too.
	begunOverhead = 2 << 10
)

// begunCache keeps the calls this process began with Begin until their outcome is recorded, so
// that Finish, Extend and Pending here need not rebuild them from the store's events. What it
// keeps is what Begin wrote, and that never changes once written; a call begun by another
// process, or before a restart, or evicted past the bounds above, is rebuilt from the store
// instead, and is the same call. The store stays the only judge of whether an outcome may be
// recorded.
//
// A kept call holds only what recording its outcome needs: its canonical arguments (which its
// receipt holds), not the request's copy of them, their decoded form or the action document.
type begunCache struct {
	mu    sync.Mutex
	m     map[string]*list.Element // action id → its element in all
	all   list.List                // of *begunEntry, oldest first
	per   map[string]*list.List    // principal → its entries, oldest first
	bytes int64                    // kept, all principals together
	owned map[string]int64         // kept, per principal
	// maxBytes and principalBytes override begunCacheBytes and begunPrincipalBytes when
	// positive (tests).
	maxBytes, principalBytes int64
}

// begunEntry is one kept call.
type begunEntry struct {
	b    *remoteBegun
	who  string        // the principal, as the cache counts it
	size int64         // its cost, as counted
	mine *list.Element // its element in per[who]
}

// remoteBegun is a call begun with Begin, as Finish, Extend and Pending find it.
type remoteBegun struct {
	*begun
	// ready is when Begin had written all it writes: the remote executor's start, as far as
	// the guard can tell (its latch.execute span begins there).
	ready time.Time
}

// slim returns b without what recording its outcome does not need: the call's arguments as the
// request carried them, decoded, and the action document (the canonical arguments stay).
func slim(b *remoteBegun) *remoteBegun {
	pr := *b.pr
	call := *pr.call
	call.Arguments, call.Options = nil, nil
	pr.call, pr.args, pr.doc = &call, nil, nil
	return &remoteBegun{begun: &begun{pr: &pr, rc: b.rc, h: b.h}, ready: b.ready}
}

// begunSize is what keeping b costs, as the cache counts it.
func begunSize(b *remoteBegun) int64 {
	return int64(len(b.pr.canonArgs)) + begunOverhead
}

func (c *begunCache) limits() (total, principal int64) {
	total, principal = begunCacheBytes, begunPrincipalBytes
	if c.maxBytes > 0 {
		total = c.maxBytes
	}
	if c.principalBytes > 0 {
		principal = c.principalBytes
	}
	return total, principal
}

// put keeps b, slimmed, unless it is larger than begunEntryMax; the oldest calls of its
// principal, then the oldest of all, make room.
func (c *begunCache) put(b *remoteBegun) {
	size := begunSize(b)
	total, principal := c.limits()
	if size > begunEntryMax || size > principal {
		return
	}
	e := &begunEntry{b: slim(b), who: b.pr.principal.Agent + "\x00" + b.pr.principal.User, size: size}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m, c.per, c.owned = make(map[string]*list.Element), make(map[string]*list.List), make(map[string]int64)
	}
	c.removeLocked(b.rc.ActionID)
	for c.owned[e.who]+size > principal {
		c.removeLocked(c.per[e.who].Front().Value.(*begunEntry).b.rc.ActionID)
	}
	for c.all.Len() > 0 && (c.bytes+size > total || c.all.Len() >= begunCacheMax) {
		c.removeLocked(c.all.Front().Value.(*begunEntry).b.rc.ActionID)
	}
	mine := c.per[e.who]
	if mine == nil {
		mine = list.New()
		c.per[e.who] = mine
	}
	e.mine = mine.PushBack(e)
	c.m[b.rc.ActionID] = c.all.PushBack(e)
	c.bytes += size
	c.owned[e.who] += size
}

func (c *begunCache) get(id string) *remoteBegun {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[id]; ok {
		return el.Value.(*begunEntry).b
	}
	return nil
}

func (c *begunCache) remove(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(id)
}

func (c *begunCache) removeLocked(id string) {
	el, ok := c.m[id]
	if !ok {
		return
	}
	e := el.Value.(*begunEntry)
	delete(c.m, id)
	c.all.Remove(el)
	mine := c.per[e.who]
	mine.Remove(e.mine)
	if mine.Len() == 0 {
		delete(c.per, e.who)
		delete(c.owned, e.who)
	} else {
		c.owned[e.who] -= e.size
	}
	c.bytes -= e.size
}

// kept reports the calls kept and the bytes they are counted at.
func (c *begunCache) kept() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.all.Len(), c.bytes
}

func (b *begun) pending() *Pending {
	p := &Pending{
		ActionID: b.rc.ActionID, Action: b.pr.call.Action, ActionHash: b.pr.hash, Arguments: b.pr.canonArgs,
		Resource: b.pr.resource, Principal: Principal{Agent: b.pr.principal.Agent, User: b.pr.principal.User, Issuer: b.pr.principal.Issuer},
		ApprovalID: b.rc.ApprovalID, Decision: b.pr.eval.Decision, Reason: b.pr.eval.Reason, WouldHave: b.rc.WouldHave,
		StartedAt: b.pr.started,
	}
	if b.h.key != "" {
		p.EffectKey, p.Attempt, p.LeaseExpiresAt = b.h.key, b.h.attempt, b.h.lease
		p.IdempotencyToken = idempotencyToken(b.h.key, b.h.attempt)
		p.EffectToken = effectToken(b.h.key)
	}
	return p
}

// Finish records the outcome of a call begun with Begin, as Execute records an executor's:
// OutcomeCommitted with its result (JSON, stored and returned to later duplicates),
// OutcomeNotExecuted (recorded failed: the key may be retried) or OutcomeUnknown (recorded
// ambiguous: retries are refused until someone resolves it). errText is the executor's error,
// for the receipt. The caller's principal (from ctx, as for Execute) must be the one that began
// the call, and an outcome is recorded once: anything else is an *OutcomeError and writes
// nothing. The returned error is Execute's for the same ending (matching ErrNotExecuted or
// ErrAmbiguous), with the receipt written.
func (g *Guard) Finish(ctx context.Context, actionID string, outcome Outcome, result json.RawMessage, errText string) (rc *Receipt, err error) {
	ctx, span := g.startSpan(ctx, SpanFinish, AttrActionID.String(actionID))
	var action string
	defer func() {
		endCallSpan(span, rc, err)
		if action != "" && (rc != nil || !errors.Is(err, ErrOutcomeRefused)) {
			g.obs.callEnded(action, rc, err)
		}
	}()
	if outcome != OutcomeCommitted && outcome != OutcomeNotExecuted && outcome != OutcomeUnknown {
		return nil, fmt.Errorf("latch: finish %s: unknown outcome %d", safetext.Quote(actionID), outcome)
	}
	if len(result) > 0 && !json.Valid(result) {
		return nil, fmt.Errorf("latch: finish %s: result is not JSON", safetext.Quote(actionID))
	}
	if _, loaded := g.finishing.LoadOrStore(actionID, struct{}{}); loaded {
		return nil, &OutcomeError{ActionID: actionID, Reason: "already_recorded", Detail: "another request is recording it"}
	}
	defer g.finishing.Delete(actionID)
	b, err := g.held(ctx, actionID)
	if err != nil {
		return nil, err
	}
	// Whatever follows — recorded, found recorded already (by another process, or by the sweep
	// when the lease lapsed), or a failed read or write — the call is not kept in memory past it:
	// the store holds what it needs.
	defer g.begun.remove(actionID)
	action = b.pr.call.Action
	span.SetAttributes(AttrAction.String(action))
	var value any
	var execErr error
	switch outcome {
	case OutcomeCommitted:
		if len(result) > 0 {
			value = json.RawMessage(result)
		}
	case OutcomeNotExecuted:
		if errText == "" {
			errText = "the executor did not act"
		}
		execErr = NotExecuted(errors.New(errText))
	default:
		if errText == "" {
			errText = "the executor does not know whether it acted"
		}
		execErr = errors.New(errText)
	}
	g.executeSpan(ctx, b, execErr)
	// record completes the draft receipt: complete a copy, so that a Pending or Extend reading
	// the cached call meanwhile reads it unchanged.
	draft := new(receipt.Receipt)
	*draft = *b.rc
	if draft.WouldHave != nil {
		w := *draft.WouldHave
		draft.WouldHave = &w
	}
	// Recorded once: an outcome recorded already — by a request before this one, here or at
	// another process serving the store — refuses this one in the same transaction, and nothing
	// is written (already_recorded).
	h := b.h
	h.once = true
	return g.record(ctx, b.pr, draft, h, value, execErr, nil)
}

// executeSpan is the latch.execute span of a call whose executor ran elsewhere: from when Begin
// had written all it writes to now, when the outcome arrives — the executor's run as the guard
// sees it — failed as an in-process executor's span is when the outcome is not committed.
func (g *Guard) executeSpan(ctx context.Context, b *remoteBegun, execErr error) {
	t := g.spanTracer()
	if t == nil || b.ready.IsZero() {
		return
	}
	_, span := t.Start(ctx, SpanExecute, trace.WithTimestamp(b.ready), trace.WithAttributes(
		AttrAction.String(b.pr.call.Action), AttrActionID.String(b.rc.ActionID), AttrEffectKey.String(b.h.key),
		AttrExecutor.String("remote")))
	if execErr != nil {
		span.SetStatus(codes.Error, execErr.Error())
	}
	span.End()
}

// Extend extends the lease of a call begun with Begin to now+d, as ExtendLease does inside an
// executor, and returns the new expiry. Only the principal that began the call may extend it.
func (g *Guard) Extend(ctx context.Context, actionID string, d time.Duration) (time.Time, error) {
	b, err := g.held(ctx, actionID)
	if err != nil {
		return time.Time{}, err
	}
	if b.h.key == "" {
		return time.Time{}, &OutcomeError{ActionID: actionID, Reason: "no_lease", Detail: "the call holds no effect key"}
	}
	if err := checkExtension(b.h.key, d); err != nil {
		return time.Time{}, err
	}
	now := g.cfg.Now()
	t0 := time.Now()
	e, err := g.store.ExtendLease(ctx, &store.ExtendRequest{Now: now, Key: b.h.key, ActionID: actionID, Attempt: b.h.attempt, Until: now.Add(d)})
	g.obs.storeTransaction("extend_lease", t0, err)
	if err != nil {
		return time.Time{}, wrapOp("", err)
	}
	return e.LeaseExpiresAt, nil
}

// Pending returns the call begun with Begin under actionID, as it now stands (its lease read
// from the effect record). It is an *OutcomeError (no_such_action, not_holder) when there is
// none or the caller's principal did not begin it.
func (g *Guard) Pending(ctx context.Context, actionID string) (*Pending, error) {
	b, err := g.held(ctx, actionID)
	if err != nil {
		return nil, err
	}
	p := b.pending()
	if p.EffectKey != "" {
		if e, err := g.store.Effect(ctx, p.EffectKey); err == nil && e.ActionID == actionID && e.Attempt == p.Attempt {
			p.LeaseExpiresAt = e.LeaseExpiresAt
		}
	}
	return p, nil
}

// held loads a call begun with Begin and checks that the caller's principal began it.
func (g *Guard) held(ctx context.Context, actionID string) (*remoteBegun, error) {
	p, err := g.principal(ctx)
	var expired *ExpiredCredentialError
	switch {
	case errors.As(err, &expired):
		return nil, &DeniedError{Action: "finish", Reason: "principal_expired"}
	case err != nil:
		return nil, err
	case p.Agent == "":
		return nil, &DeniedError{Action: "finish", Reason: "no_principal"}
	}
	b := g.begun.get(actionID)
	if b == nil {
		if b, err = g.loadBegun(ctx, actionID); err != nil {
			return nil, err
		}
	}
	if b.pr.principal.Agent != p.Agent || b.pr.principal.User != p.User {
		return nil, &OutcomeError{ActionID: actionID, Reason: "not_holder", Detail: "the call was begun by another principal"}
	}
	return b, nil
}

// remoteCall is what the opening event (action_proposed) of a call begun with Begin carries
// beyond every proposal's fields, so that any process serving the store can record its outcome:
// the receipt's fields that no other event holds.
type remoteCall struct {
	Arguments     json.RawMessage `json:"arguments"`
	Issuer        string          `json:"issuer,omitempty"`
	StartedAt     time.Time       `json:"started_at"`
	PolicyVersion string          `json:"policy_version,omitempty"`
	Mode          string          `json:"mode"`
	Task          string          `json:"task,omitempty"`
	ScopeHash     string          `json:"scope_hash,omitempty"`
	// BudgetCharges are the charges the call's reservation makes: its receipt records them
	// once the reservation holds.
	BudgetCharges []receipt.BudgetCharge `json:"budget_charges,omitempty"`
}

func (g *Guard) remoteRecord(pr *prepared) remoteCall {
	mode := string(pr.pol.Mode)
	if mode == "" {
		mode = string(policy.ModeEnforce)
	}
	return remoteCall{Arguments: pr.canonArgs, Issuer: pr.principal.Issuer, StartedAt: pr.started,
		PolicyVersion: pr.pol.Version, Mode: mode, Task: pr.task, ScopeHash: pr.scopeHash, BudgetCharges: receiptCharges(pr.charges)}
}

// proposedPayload is the payload of action_proposed.
type proposedPayload struct {
	Action      string      `json:"action"`
	ActionHash  string      `json:"action_hash"`
	Agent       string      `json:"agent"`
	User        string      `json:"user"`
	Environment string      `json:"environment"`
	Resource    string      `json:"resource"`
	Remote      *remoteCall `json:"remote"`
}

// loadBegun rebuilds a begun call from the events its Begin wrote: the same prepared call and
// draft receipt that Execute holds in memory while its executor runs.
func (g *Guard) loadBegun(ctx context.Context, actionID string) (*remoteBegun, error) {
	none := &OutcomeError{ActionID: actionID, Reason: "no_such_action"}
	if actionID == "" {
		return nil, none
	}
	evs, err := g.store.Events(ctx, store.EventFilter{ActionID: actionID})
	if err != nil {
		return nil, wrapOp("read action "+safetext.Quote(actionID), err)
	}
	var (
		pp       *proposedPayload
		pr       = &prepared{remote: true}
		h        = hold{written: true}
		apr      string
		reserved bool
		refused  string
		policyH  string
		ready    time.Time // the last of the events Begin wrote
		// suspendedCall is the call as its first suspension recorded it, for a call whose
		// opening event does not carry it (one run by Execute).
		suspendedCall *remoteCall
	)
	for _, e := range evs {
		if e.ActionID != actionID {
			continue
		}
		switch e.Kind {
		case store.EventActionProposed, store.EventPolicyEvaluated, store.EventAuthorityResolved, store.EventEffectReserved,
			store.EventEffectRefused, store.EventApprovalConsumed:
			if e.Time.After(ready) {
				ready = e.Time
			}
		}
		switch e.Kind {
		case store.EventActionProposed:
			if pp != nil {
				continue
			}
			var v proposedPayload
			if json.Unmarshal(e.Payload, &v) != nil {
				continue
			}
			pp = &v
			h.key = e.EffectKey
		case store.EventExecutionSuspended:
			// A call run by Execute whose executor suspended: its first round carries what its
			// opening event does not (suspend.go).
			var v struct {
				Call *remoteCall `json:"call"`
			}
			if suspendedCall == nil && json.Unmarshal(e.Payload, &v) == nil && v.Call != nil {
				suspendedCall = v.Call
			}
		case store.EventPolicyEvaluated:
			var raw map[string]string
			if json.Unmarshal(e.Payload, &raw) == nil {
				pr.eval = policy.Evaluation{Decision: policy.Decision(raw["decision"]), Reason: raw["reason"]}
				policyH = raw["policy_hash"]
			}
		case store.EventAuthorityResolved:
			var raw map[string]string
			if json.Unmarshal(e.Payload, &raw) == nil {
				pr.auth = &authority.Decision{Allowed: true, GrantID: raw["grant_id"], DelegationID: raw["delegation_id"],
					BreakGlass: raw["break_glass"]}
			}
		case store.EventEffectReserved:
			var v struct {
				Attempt        int       `json:"attempt"`
				LeaseExpiresAt time.Time `json:"lease_expires_at"`
			}
			if json.Unmarshal(e.Payload, &v) == nil {
				h.attempt, h.lease, reserved = v.Attempt, v.LeaseExpiresAt, true
			}
		case store.EventEffectRefused:
			var v struct{ Reason string }
			if json.Unmarshal(e.Payload, &v) == nil {
				refused = v.Reason
			}
		case store.EventApprovalConsumed:
			apr = e.ApprovalID
		}
	}
	if pp != nil && pp.Remote == nil {
		pp.Remote = suspendedCall
	}
	if pp == nil || pp.Remote == nil {
		return nil, none
	}
	rm := pp.Remote
	pr.call = &Call{Action: pp.Action, Arguments: rm.Arguments, Resource: pp.Resource, Environment: pp.Environment}
	pr.principal = Principal{Agent: pp.Agent, User: pp.User, Issuer: rm.Issuer}
	pr.pol = g.current() // the receipt's policy fields are the recorded ones, set below
	pr.action = pr.pol.Actions[pp.Action]
	pr.canonArgs, pr.resource, pr.env, pr.hash, pr.key = rm.Arguments, pp.Resource, pp.Environment, pp.ActionHash, h.key
	pr.started, pr.task, pr.scopeHash = rm.StartedAt, rm.Task, rm.ScopeHash
	rc := g.draft(pr, actionID, rm.StartedAt)
	rc.PolicyHash, rc.PolicyVersion, rc.Mode = policyH, rm.PolicyVersion, rm.Mode
	rc.ApprovalID = apr
	if apr != "" {
		if a, err := g.store.Approval(ctx, apr); err == nil {
			rc.Approver = safetext.Valid(a.Approver)
			rc.Approval = store.ApprovalStateOf(a) // spent by this call: its receipt chains it, as Execute's does
		}
	}
	if rm.Mode == string(policy.ModeObserve) {
		rc.WouldHave = &receipt.WouldHave{Decision: string(pr.eval.Decision), Reason: pr.eval.Reason}
		if h.key != "" {
			rc.WouldHave.Effect = "reserved"
			if !reserved {
				rc.WouldHave.Effect = refused
			}
		}
	}
	if !reserved {
		h.key = "" // observe mode, reservation refused: the executor runs holding nothing
	} else if rm.Mode != string(policy.ModeObserve) {
		rc.BudgetCharges = rm.BudgetCharges // made with the reservation, as Begin's draft says
	}
	return &remoteBegun{begun: &begun{pr: pr, rc: rc, h: h}, ready: ready}, nil
}

// keyedApproval is the approval that the live reservation named by the call's request key
// spent, when the key is this principal's and names this action: a begin that waited for its
// approval (Options.Wait, wait_seconds over HTTP) and lost its answer is then replayed, as a retry
// that presented the approval is, and no second request is asked for. It is asked only where the
// policy says approve and no approval was presented, so an allowed call reads nothing more. The
// reservation decides the rest as for any replay. "" when there is none (a key that names no
// approval, another principal's or another action's key, an attempt that has ended, a read that
// fails): the call then asks for an approval as any other.
func (g *Guard) keyedApproval(ctx context.Context, pr *prepared) string {
	k := requestKeyFrom(ctx)
	kr, ok := g.store.(store.RequestKeyReader)
	if k == "" || !pr.remote || pr.key == "" || !ok {
		return ""
	}
	rk, err := kr.RequestKey(ctx, k)
	if err != nil || rk.ApprovalID == "" || rk.Agent != pr.principal.Agent || rk.User != pr.principal.User ||
		rk.ActionHash != pr.hash || rk.EffectKey != pr.key {
		return ""
	}
	eff, err := g.store.Effect(ctx, rk.EffectKey)
	if err != nil || eff.State != store.Executing || eff.ActionID != rk.ActionID || !g.cfg.Now().Before(eff.LeaseExpiresAt) {
		return ""
	}
	return rk.ApprovalID
}
