package latch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/codes"

	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

var errNoLease = errors.New("latch: no lease: ExtendLease is only valid inside an executor of a call with an effect key")

// recordTimeout bounds the writes that record an outcome after the caller's context ended:
// an outcome must be written even when the call was cancelled.
const recordTimeout = 30 * time.Second

// Execute runs fn as the call described by call, through the whole pipeline: principal,
// normalize, decide, approve, reserve, execute, record (docs/guarantees.md#the-pipeline-of-one-call). fn receives the arguments
// decoded from the canonical bytes that were hashed, never the caller's own. The returned
// receipt is the one written for the call (nil when none was: no principal, approval pending);
// its Value is what fn returned.
func (g *Guard) Execute(ctx context.Context, call *Call, fn Executor) (rc *Receipt, err error) {
	ctx, span := g.startSpan(ctx, SpanCall, AttrAction.String(call.Action))
	defer func() {
		endCallSpan(span, rc, err)
		if !errors.Is(err, ErrSuspended) { // not over: it ends when resumed
			g.obs.callEnded(call.Action, rc, err)
		}
	}()
	b, rc, err := g.begin(ctx, call, false)
	if b == nil {
		return rc, err
	}
	return g.finish(ctx, b.pr, b.rc, b.h, fn)
}

// begun is a call that may execute: decided, approved and reserved (or, in observe mode, decided
// and reserved as enforcement would have), with its draft receipt and what it holds.
type begun struct {
	pr *prepared
	rc *receipt.Receipt
	h  hold
}

// begin runs the pipeline up to the executor: principal, normalize, decide, approve, reserve.
// It returns the begun call, or nil and the refusal (with its receipt when one was written).
// remote marks a call whose executor runs elsewhere (Begin): its opening event carries what
// recording its outcome later needs.
func (g *Guard) begin(ctx context.Context, call *Call, remote bool) (_ *begun, _ *Receipt, err error) {
	started := g.cfg.Now()
	dctx, dspan := g.startSpan(ctx, SpanDecide, AttrAction.String(call.Action))
	var pr *prepared
	deciding := true
	endDecide := func(err error) {
		if !deciding {
			return
		}
		deciding = false
		if pr != nil && dspan.IsRecording() {
			dspan.SetAttributes(AttrDecision.String(string(pr.eval.Decision)), AttrReason.String(pr.eval.Reason))
		}
		endSpan(dspan, err)
	}
	defer func() { endDecide(err) }()
	p, err := g.principal(dctx)
	var expired *ExpiredCredentialError
	switch {
	case errors.As(err, &expired) && expired.Principal.Agent != "":
		p = expired.Principal
	case err != nil:
		return nil, nil, err
	case p.Agent == "":
		return nil, nil, &DeniedError{Action: call.Action, Reason: "no_principal"}
	}
	task, terr := callTask(ctx, call)
	if terr != nil {
		return nil, nil, terr // a task no receipt should show: refused before anything is written
	}
	actionID := newID("act_")
	pr, nerr := g.normalize(call, p, requestKeyFrom(ctx))
	pr.task = task
	dspan.SetAttributes(AttrActionID.String(actionID), AttrEffectKey.String(pr.key))
	if errors.Is(nerr, store.ErrInvalidInput) {
		return nil, nil, nerr // a NUL byte in a name or key: no store can keep its receipt either
	}
	pr.remote = remote
	pr.started = started
	if nerr != nil {
		pr.eval = policy.Evaluation{Decision: policy.Deny, Reason: nerr.(*InvalidArgumentError).Reason}
		rc, err := g.refuse(ctx, pr, actionID, started, nerr)
		return nil, rc, err
	}
	// An unapproved policy decides nothing, its mode included (docs/governance.md).
	if deny, err := g.unapproved(dctx, pr); err != nil {
		return nil, nil, err
	} else if deny {
		pr.eval = policy.Evaluation{Decision: policy.Deny, Reason: string(ReasonPolicyUnapproved)}
		rc, err := g.refuse(ctx, pr, actionID, started, &DeniedError{Action: call.Action, Reason: string(ReasonPolicyUnapproved)})
		return nil, rc, err
	}
	// A provider's principal was checked by the provider, with its leeway; one from the context
	// is checked here.
	if g.principalExpired(p, expired, started) {
		if pr.pol.Mode == policy.ModeObserve {
			// Observe mode records the refusal it would have made, and runs (docs/guarantees.md#observe-mode).
			g.decide(dctx, pr)
			pr.eval = policy.Evaluation{Decision: policy.Deny, Reason: "principal_expired", Trace: pr.eval.Trace}
			endDecide(nil)
			return g.observe(ctx, pr, actionID, started)
		}
		pr.eval = policy.Evaluation{Decision: policy.Deny, Reason: "principal_expired"}
		rc, err := g.refuse(ctx, pr, actionID, started, &DeniedError{Action: call.Action, Reason: "principal_expired"})
		return nil, rc, err
	}
	g.decide(dctx, pr)
	endDecide(nil)
	if pr.pol.Mode == policy.ModeObserve {
		if pr.eval.Decision != policy.Deny {
			if err := g.checkScope(ctx, pr); err != nil {
				pr.eval = scopeDenied(pr, err) // what enforcement would have refused (would_have)
			}
		}
		return g.observe(ctx, pr, actionID, started)
	}
	if pr.eval.Decision != policy.Deny {
		if err := g.budget(pr); err != nil {
			var be *BudgetError
			if !errors.As(err, &be) {
				return nil, nil, err // no ledger: nothing is decided, nothing written
			}
			pr.eval = policy.Evaluation{Decision: policy.Deny, Reason: be.Reason, Trace: pr.eval.Trace}
			rc, err := g.refuse(ctx, pr, actionID, started, err)
			return nil, rc, err
		}
	}
	approvalID := approvalFrom(ctx)
	switch pr.eval.Decision {
	case policy.Allow:
	case policy.Approve:
		if approvalID == "" {
			approvalID = g.keyedApproval(ctx, pr)
		}
		if approvalID == "" {
			approvalID = g.standingFor(ctx, pr)
		}
		if approvalID == "" {
			id, rc, err := g.approve(ctx, pr, actionID, started)
			if err != nil {
				return nil, rc, err
			}
			approvalID = id
		}
	default:
		rc, err := g.refuse(ctx, pr, actionID, started, pr.refusal())
		return nil, rc, err
	}
	// Allowed, or approved: the scope is checked now, before anything is reserved or spent
	// (docs/scopes.md).
	if err := g.checkScope(ctx, pr); err != nil {
		pr.eval = scopeDenied(pr, err)
		rc, err := g.refuse(ctx, pr, actionID, started, err)
		return nil, rc, err
	}
	// The state of the target, last, right before the reservation: an approval is spent only on
	// the state its approver saw (docs/governance.md#precondition-fingerprints).
	if err := g.recheckPrecondition(ctx, pr, approvalID); err != nil {
		pr.eval = preconditionDenied(pr, err)
		rc, err := g.refuse(ctx, pr, actionID, started, err)
		return nil, rc, err
	}
	return g.reserve(ctx, pr, actionID, approvalID, started)
}

// approve asks a human to approve the call: it stores an approval request (asking the
// reconcile hook first, as the reservation would) and returns an *ApprovalRequiredError, or, with
// Options.Wait, waits for the answer and returns the request's id. A request the reservation
// would refuse is not stored: the refusal's receipt and error are returned.
func (g *Guard) approve(ctx context.Context, pr *prepared, actionID string, started time.Time) (_ string, _ *Receipt, err error) {
	ctx, span := g.startSpan(ctx, SpanApprove, AttrAction.String(pr.call.Action), AttrActionID.String(actionID))
	defer func() { endSpan(span, err) }()
	// The state the approver will be asked about, read before the request is stored: a request
	// whose state cannot be read is not stored.
	if err := g.capturePrecondition(ctx, pr); err != nil {
		pr.eval = preconditionDenied(pr, err)
		rc, err := g.refuse(ctx, pr, actionID, started, err)
		return "", rc, err
	}
	var reconciled []store.Event
	if pr.key != "" && pr.opts.Reconcile != nil {
		if reconciled, err = g.reconcile(ctx, pr, actionID); err != nil {
			return "", nil, err
		}
	}
	a, rc, err := g.requestApproval(ctx, pr, actionID, started, reconciled)
	if err != nil {
		return "", rc, err
	}
	span.SetAttributes(AttrApprovalID.String(a.ID))
	if !pr.opts.Wait {
		return "", nil, &ApprovalRequiredError{ApprovalID: a.ID, ActionHash: pr.hash, EffectKey: pr.key, ExpiresAt: a.ExpiresAt}
	}
	if err := g.waitApproval(ctx, a, pr.hash, pr.key); err != nil {
		return "", nil, err
	}
	return a.ID, nil, nil
}

// principalExpired reports whether the call's principal has expired at now: an identity
// provider said so (expired), or a principal from the context carries an expiry that passed.
func (g *Guard) principalExpired(p Principal, expired *ExpiredCredentialError, now time.Time) bool {
	return expired != nil || g.cfg.Identity == nil && !p.ExpiresAt.IsZero() && !now.Before(p.ExpiresAt)
}

// refuse records a denied receipt and returns err.
func (g *Guard) refuse(ctx context.Context, pr *prepared, actionID string, started time.Time, err error) (*Receipt, error) {
	ctx, span := g.startSpan(ctx, SpanRecord, AttrAction.String(pr.call.Action), AttrActionID.String(actionID),
		AttrResult.String(receipt.Denied))
	now := g.cfg.Now()
	rc := g.draft(pr, actionID, started)
	rc.Decision = string(policy.Deny)
	rc.Result = receipt.Denied
	rc.Error = err.Error()
	t0 := time.Now()
	res, serr := g.store.Record(ctx, &store.RecordRequest{Now: now, Receipt: rc, Events: g.proposal(pr, actionID, now)})
	g.obs.storeTransaction("record", t0, serr)
	endSpan(span, serr)
	if serr != nil {
		return nil, fmt.Errorf("%w (and the refusal could not be recorded: %w)", err, serr)
	}
	out := newReceipt(res.Document, res.Receipt, nil)
	g.emit(ctx, out, res.Events)
	return out, err
}

// reserve reserves the effect key of a decided call and spends its approval.
func (g *Guard) reserve(ctx context.Context, pr *prepared, actionID, approvalID string, started time.Time) (_ *begun, _ *Receipt, err error) {
	span := noSpan
	if pr.key != "" || approvalID != "" {
		ctx, span = g.startSpan(ctx, SpanReserve, AttrAction.String(pr.call.Action), AttrActionID.String(actionID),
			AttrEffectKey.String(pr.key), AttrApprovalID.String(approvalID))
		defer func() { endSpan(span, err) }()
	}
	rc := g.draft(pr, actionID, started)
	rc.ApprovalID = approvalID
	h := hold{}
	if pr.key != "" || approvalID != "" {
		var reconciled []store.Event
		if pr.key != "" && pr.opts.Reconcile != nil {
			var err error
			if reconciled, err = g.reconcile(ctx, pr, actionID); err != nil {
				return nil, nil, err
			}
		}
		now := g.cfg.Now()
		req := &store.ReserveRequest{
			Now: now, ActionID: actionID, Action: pr.call.Action, ActionHash: pr.hash, EffectKey: pr.key,
			Arguments: pr.canonArgs, Lease: g.lease(pr), MaxAttempts: g.maxAttempts(pr), ApprovalID: approvalID,
			Receipt: rc, Events: append(g.proposal(pr, actionID, now), reconciled...), Charges: pr.charges,
			DenyAtExpiry: pr.pol.ApproversFor(pr.call.Action).DeniesAtExpiry(),
		}
		if store.IsStandingID(approvalID) {
			// A standing approval's use is checked against the whole action.
			req.Document, req.ResourceRendered = pr.doc, resourceRendered(pr)
		}
		if k := requestKeyFrom(ctx); k != "" && pr.remote && pr.key != "" {
			req.RequestKey, req.Agent, req.User = k, pr.principal.Agent, pr.principal.User // Begin's (remote.go)
			req.KeyNamesEffect = pr.keyNamed
		}
		t0 := time.Now()
		res, err := g.store.Reserve(ctx, req)
		g.obs.storeTransaction("reserve", t0, err)
		if err != nil {
			return nil, nil, wrapOp("reserve "+pr.key, err)
		}
		if res.Replayed {
			return nil, nil, &replayedError{actionID: res.Effect.ActionID, lease: res.Effect.LeaseExpiresAt}
		}
		if res.Effect != nil && res.Refusal == nil {
			span.SetAttributes(AttrAttempt.Int(res.Effect.Attempt))
		}
		g.emit(ctx, newReceipt(res.Document, derefSealed(res.Receipt), nil), res.Events)
		if res.Refusal != nil {
			return nil, newReceipt(res.Document, derefSealed(res.Receipt), nil), g.withEditedArguments(ctx, refusalError(pr.key, approvalID, res))
		}
		if res.Approval != nil {
			rc.Approver = safetext.Valid(res.Approval.Approver) // a receipt must hash, whatever an old row holds
			rc.Approval = store.ApprovalStateOf(res.Approval)   // spent: the call's receipt chains it
			// What the approvers changed of the call: the requested arguments and who edited.
			// The reservation holds, so a read that fails leaves the receipt without it rather
			// than the call without its outcome.
			if rc.ApprovalEdit, err = g.editOfReceipt(ctx, res.Approval); err != nil {
				g.log.Warn("latch: the approval's edits not read for the receipt", "approval", approvalID, "err", err)
				rc.ApprovalEdit, err = nil, nil
			}
		}
		if res.Standing != nil {
			rc.Approver = store.StandingApprover(res.Standing) // rc.ApprovalID names the standing approval
		}
		// Made, now that the reservation holds: a refused one charged nothing, and its receipt
		// (written by the store from the draft) says none.
		rc.BudgetCharges = receiptCharges(pr.charges)
		h.written = true
		if pr.key != "" {
			h.key, h.attempt, h.lease = pr.key, res.Effect.Attempt, res.Effect.LeaseExpiresAt
		}
	}
	return &begun{pr: pr, rc: rc, h: h}, nil, nil
}

// Executor is the function a dynamic call runs: it receives the canonical arguments.
type Executor = func(ctx context.Context, args json.RawMessage) (any, error)

// hold is what a call holds when its executor runs: the effect key and attempt (key "" when it
// holds none), and whether the call's opening events were already written.
type hold struct {
	key     string
	attempt int
	lease   time.Time // when the lease on key lapses
	token   string    // the attempt's IdempotencyToken, once derived ("" until then)
	written bool
	// once: the outcome is reported from elsewhere (Finish) and may arrive twice; the store
	// records it only if the call has no receipt yet (store.RecordRequest.Once).
	once bool
}

// observe runs a call in observe mode (docs/guarantees.md#observe-mode): the decision and the reservation are made and
// recorded as enforcement would make them, and the executor runs whatever they say.
func (g *Guard) observe(ctx context.Context, pr *prepared, actionID string, started time.Time) (*begun, *Receipt, error) {
	if err := g.observeBudgets(ctx, pr); err != nil {
		return nil, nil, wrapOp("observe "+pr.call.Action, err)
	}
	rc := g.draft(pr, actionID, started)
	rc.WouldHave = &receipt.WouldHave{Decision: string(pr.eval.Decision), Reason: pr.eval.Reason}
	h := hold{}
	if pr.key != "" {
		ctx, span := g.startSpan(ctx, SpanReserve, AttrAction.String(pr.call.Action), AttrActionID.String(actionID),
			AttrEffectKey.String(pr.key))
		now, t0 := g.cfg.Now(), time.Now()
		res, err := g.store.Reserve(ctx, &store.ReserveRequest{
			Now: now, ActionID: actionID, Action: pr.call.Action, ActionHash: pr.hash, EffectKey: pr.key,
			Arguments: pr.canonArgs, Lease: g.lease(pr), MaxAttempts: g.maxAttempts(pr), Events: g.proposal(pr, actionID, now),
		})
		g.obs.storeTransaction("reserve", t0, err)
		endSpan(span, err)
		if err != nil {
			return nil, nil, wrapOp("observe "+pr.call.Action, err)
		}
		g.emit(ctx, nil, res.Events)
		h.written = true
		if res.Refusal != nil {
			rc.WouldHave.Effect = res.Refusal.Reason
		} else {
			rc.WouldHave.Effect = "reserved"
			h.key, h.attempt, h.lease = pr.key, res.Effect.Attempt, res.Effect.LeaseExpiresAt
		}
	}
	return &begun{pr: pr, rc: rc, h: h}, nil, nil
}

// finish executes a call and records its outcome, its receipt and its events in one write.
func (g *Guard) finish(ctx context.Context, pr *prepared, rc *receipt.Receipt, h hold, fn Executor) (*Receipt, error) {
	return g.run(ctx, pr, rc, h, fn, nil)
}

// run runs a call's executor — its first run, or, with res, a resumed one — and records its
// outcome, or stores its suspension when it suspends (suspend.go).
func (g *Guard) run(ctx context.Context, pr *prepared, rc *receipt.Receipt, h hold, fn Executor, res *Resumption) (*Receipt, error) {
	exec := &execution{g: g, key: h.key, actionID: rc.ActionID, attempt: h.attempt, lease: h.lease}
	if h.key != "" {
		h.token = idempotencyToken(h.key, h.attempt)
		exec.token = h.token // EffectToken is derived from exec.key when asked for
	}
	ectx, span := g.startSpan(ctx, SpanExecute, AttrAction.String(pr.call.Action), AttrActionID.String(rc.ActionID),
		AttrEffectKey.String(h.key), AttrAttempt.Int(h.attempt))
	if res != nil {
		ectx = context.WithValue(ectx, resumeCtx{}, res)
	}
	value, panicked, execErr := g.invoke(ectx, exec, pr.canonArgs, fn)
	switch {
	case panicked != nil:
		span.SetStatus(codes.Error, "executor panicked")
	case execErr != nil && span.IsRecording():
		span.RecordError(execErr)
		span.SetStatus(codes.Error, execErr.Error())
	}
	span.End()
	if sig := (*suspendSignal)(nil); panicked == nil && errors.As(execErr, &sig) {
		return g.suspended(ctx, pr, rc, h, sig)
	}
	if res != nil {
		defer g.begun.remove(rc.ActionID) // the call's last leg: nothing resumes it again
	}
	return g.record(ctx, pr, rc, h, value, execErr, panicked)
}

// record writes what an execution ended in — its value, its error, or a panic, which continues
// once the outcome is written — with its receipt and events, in one write (docs/guarantees.md#the-pipeline-of-one-call).
func (g *Guard) record(ctx context.Context, pr *prepared, rc *receipt.Receipt, h hold, value any, execErr error, panicked any) (*Receipt, error) {
	if h.key != "" {
		rc.Attempt = h.attempt
		if h.token == "" {
			h.token = idempotencyToken(h.key, h.attempt)
		}
		rc.IdempotencyToken = h.token
	}
	outcome := store.Committed
	var result json.RawMessage
	var retErr error
	switch {
	case panicked != nil:
		outcome = store.Ambiguous
		execErr = fmt.Errorf("executor panicked: %s", validText(fmt.Sprint(panicked)))
	case execErr == nil:
		if b, err := json.Marshal(value); err == nil {
			result = b
		} else {
			g.log.Warn("latch: result not stored: it does not encode as JSON", "action", pr.call.Action, "effect_key", pr.key, "err", err)
		}
	case errors.Is(execErr, ErrNotExecuted):
		outcome = store.Failed
		retErr = execErr
	default:
		outcome = store.Ambiguous
		retErr = &AmbiguousError{Key: pr.key, Err: execErr}
	}
	rc.Result = string(outcome)
	if rc.WouldHave != nil {
		rc.Result = receipt.Observed
	}
	// The receipt says what the caller is told (a panic, which is not returned, as if it were).
	// The text is the executor's: it may hold any bytes, and a receipt holds valid UTF-8 only;
	// made valid (validText), it can always be recorded.
	switch {
	case retErr != nil:
		rc.Error = validText(retErr.Error())
	case execErr != nil:
		rc.Error = validText((&AmbiguousError{Key: pr.key, Err: execErr}).Error())
	}

	// The outcome is written even if the caller's context is cancelled: an unrecorded outcome
	// would leave a lease to lapse into ambiguous, which is safe but costs a human.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	wctx, span := g.startSpan(wctx, SpanRecord, AttrAction.String(pr.call.Action), AttrActionID.String(rc.ActionID),
		AttrEffectKey.String(h.key), AttrResult.String(rc.Result))
	now := g.cfg.Now()
	req := &store.RecordRequest{Now: now, Receipt: rc, EffectKey: h.key, ActionID: rc.ActionID, Attempt: h.attempt,
		Outcome: outcome, Result: result, Once: h.once}
	if execErr != nil {
		req.Error = validText(execErr.Error()) // the effect record keeps the executor's own words, made valid
	}
	if !h.written {
		req.Events = g.proposal(pr, rc.ActionID, now) // nothing was written for this call yet
	}
	t0 := time.Now()
	res, err := g.store.Record(wctx, req)
	g.obs.storeTransaction("record", t0, err)
	if err == nil && span.IsRecording() && res.Document != nil {
		span.SetAttributes(AttrResult.String(res.Document.Result))
	}
	endSpan(span, err)
	if h.once && errors.Is(err, store.ErrRecorded) {
		return nil, &OutcomeError{ActionID: rc.ActionID, Reason: "already_recorded"}
	}
	if err != nil {
		err = wrapOp(fmt.Sprintf("record outcome %s of %s", outcome, pr.call.Action), err)
		switch {
		case panicked != nil:
			g.log.Error(err.Error())
			panic(panicked)
		case outcome == store.Failed:
			return nil, fmt.Errorf("%w (and the outcome could not be recorded: %s)", retErr, bare(err))
		}
		// The outcome is unknown to the store: the key stays held until its lease lapses into
		// ambiguous. Nothing was recorded, and the error says so.
		return nil, &AmbiguousError{Key: pr.key, Err: execErr, Unrecorded: err}
	}
	out := newReceipt(res.Document, res.Receipt, value)
	g.emit(wctx, out, res.Events)
	if panicked != nil {
		panic(panicked)
	}
	switch {
	case res.Lost:
		e := &EffectError{Key: pr.key, State: StateAmbiguous, Reason: "key_lost", Attempt: h.attempt,
			Detail: bare(errors.New(res.Document.Error))}
		if res.Effect != nil {
			e.State = res.Effect.State
		}
		return out, e
	case res.Conflict != "":
		e := &EffectError{Key: pr.key, State: res.Effect.State, Reason: "outcome_conflict", Attempt: h.attempt,
			Detail: bare(errors.New(res.Document.Error))}
		if retErr != nil {
			return out, errors.Join(retErr, e)
		}
		return out, e
	}
	return out, retErr
}

// invoke runs the executor, turning a panic into a value so the outcome can be recorded first:
// what the executor returned, or what it panicked with.
func (g *Guard) invoke(ctx context.Context, exec *execution, args []byte, fn Executor) (value any, panicked any, err error) {
	defer func() {
		if r := recover(); r != nil {
			panicked = r
		}
	}()
	value, err = fn(executorContext(ctx, exec), json.RawMessage(args))
	return value, nil, err
}

func (g *Guard) lease(pr *prepared) time.Duration {
	if pr.opts.Lease > 0 {
		return pr.opts.Lease
	}
	if pr.action != nil && pr.action.Lease > 0 {
		return pr.action.Lease
	}
	return g.cfg.Lease
}

func (g *Guard) maxAttempts(pr *prepared) int {
	if pr.action != nil {
		return pr.action.MaxAttempts
	}
	return 0
}

func derefSealed(s *receipt.Sealed) receipt.Sealed {
	if s == nil {
		return receipt.Sealed{}
	}
	return *s
}

// refusalError turns a store refusal into the caller's error; its message is the refused call's
// receipt error.
func refusalError(key, approvalID string, res *store.ReserveResult) error {
	r := res.Refusal
	if r.Approval {
		return &ApprovalMismatchError{ApprovalID: approvalID, Reason: r.Reason, Detail: r.Detail}
	}
	if r.Reason == string(ReasonBudgetExhausted) {
		e := &BudgetError{Reason: r.Reason, Detail: r.Detail}
		if c := r.Charge; c != nil {
			e.Budget, e.Metric, e.Window = c.Budget, c.Metric, c.Window
		}
		return e
	}
	e := &EffectError{Key: key, Reason: r.Reason, Detail: r.Detail}
	if res.Effect != nil {
		e.State = res.Effect.State
		e.Attempt = res.Effect.Attempt
		if res.Effect.State == store.Committed {
			e.Result = res.Effect.Result
		}
	}
	return e
}

// reconcile asks the call's reconcile hook about the earlier attempt of its effect key, when
// that attempt's outcome is unknown (its record ambiguous, or executing under a lapsed lease),
// before the call reserves; it reads first, and the reservation still decides atomically. When
// the hook knows, the record is resolved (one write); a hook may say not executed only about an
// attempt whose holder can no longer act (store.HolderMayAct), so a lapsed lease is never turned
// into a retry. It returns the events the reservation writes when nothing was resolved.
func (g *Guard) reconcile(ctx context.Context, pr *prepared, actionID string) ([]store.Event, error) {
	eff, err := g.store.Effect(ctx, pr.key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, wrapOp("reconcile "+pr.key, err)
	}
	now := g.cfg.Now()
	if eff.State != store.Ambiguous && !store.LeaseLapsed(eff, now) {
		return nil, nil
	}
	at := attemptOf(eff)
	if len(at.Arguments) == 0 && eff.ActionHash == pr.hash {
		at.Arguments = pr.canonArgs // a record written before the store kept arguments: the same action's
	}
	outcome, value, hookErr := callHook(ctx, pr.opts.Reconcile, at)
	payload := map[string]any{"answer": outcome.String(), "attempt": eff.Attempt}
	if hookErr != nil {
		payload["error"] = validText(hookErr.Error())
	}
	started := func() store.Event {
		return store.NewEvent(store.EventReconcileStarted, now, actionID, pr.key, "", payload)
	}
	if outcome == OutcomeUnknown {
		return []store.Event{started()}, nil
	}
	to, result := g.hookResolution(outcome, value, pr.key)
	resolved := store.NewEvent(store.EventReconcileResolved, now, actionID, pr.key, "", map[string]any{"to": string(to)})
	_, err = g.ResolveEffect(ctx, &store.ResolveRequest{Now: now, Key: pr.key, To: to, By: "reconcile:" + pr.call.Action,
		Result: result, Hook: true, Events: []store.Event{started(), resolved}})
	switch {
	case err == nil:
		return nil, nil
	case errors.Is(err, store.ErrHolderMayAct):
		// The holder may still act: its not-executed is true only until it does.
		payload["applied"] = false
		payload["refused"] = "holder_may_act"
		return []store.Event{started()}, nil
	case errors.Is(err, store.ErrNotAmbiguous), errors.Is(err, store.ErrNotFound):
		// Someone else resolved it first; the reservation reads what they decided.
		payload["applied"] = false
		return []store.Event{started()}, nil
	}
	return nil, wrapOp("reconcile "+pr.key, err)
}

// extendLease serves ExtendLease.
func (g *Guard) extendLease(ctx context.Context, e *execution, d time.Duration) error {
	if err := checkExtension(e.key, d); err != nil {
		return err
	}
	now := g.cfg.Now()
	t0 := time.Now()
	_, err := g.store.ExtendLease(ctx, &store.ExtendRequest{Now: now, Key: e.key, ActionID: e.actionID, Attempt: e.attempt, Until: now.Add(d)})
	g.obs.storeTransaction("extend_lease", t0, err)
	if err != nil {
		return wrapOp("", err)
	}
	e.leaseMu.Lock()
	e.lease = now.Add(d)
	e.leaseMu.Unlock()
	return nil
}

// checkExtension refuses a lease extension of d on key that is not positive or reaches further
// than the longest lease a policy may give (policy.MaxLease, from now): a lease is how long a
// silent holder keeps everyone else waiting before its key turns ambiguous and someone is told.
func checkExtension(key string, d time.Duration) error {
	switch {
	case d <= 0:
		return fmt.Errorf("latch: extend lease on %s: duration %v is not positive", key, d)
	case d > policy.MaxLease:
		return fmt.Errorf("latch: extend lease on %s: duration %v is longer than the longest lease, %v: extend it again as the work goes on", key, d, policy.MaxLease)
	}
	return nil
}

// validText returns s if it is valid UTF-8, else s with every byte that is not written as the
// escape \xNN: a receipt and an event hold valid UTF-8 only, and an executor's error text or
// panic value may hold anything. The outcome is recorded whatever the text.
func validText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			fmt.Fprintf(&b, `\x%02x`, s[i])
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
