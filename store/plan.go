package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/receipt"
)

// EffectWrite is an effect record a plan writes: an insert (Prev nil) or a compare-and-set
// against Prev on (key, state, attempt, action id).
type EffectWrite struct {
	Prev *Effect
	Next Effect
}

// ApprovalWrite is an approval a plan writes, compare-and-set against PrevStatus.
type ApprovalWrite struct {
	PrevStatus ApprovalStatus
	Next       Approval
	// Answer is the answer the write records (PlanAnswer), inserted beside the approval row;
	// nil for every other write.
	Answer *Answer
	// Standing is the standing approval the grant creates (inserted); nil for none.
	Standing *Standing
}

// ReservePlan is everything one reservation writes. Result.Receipt is filled by the backend
// once it has sealed Receipt.
type ReservePlan struct {
	Result   ReserveResult
	Effect   *EffectWrite
	Approval *ApprovalWrite
	Events   []Event
	Receipt  *receipt.Receipt // nil when no receipt is written
	// RequestKey is the request key the reservation writes (PlanKeyedReserve); nil for none.
	RequestKey *RequestKeyWrite
	// Charges are the ledger rows the reservation inserts (PlanCharges); nil for none.
	Charges []ChargeRecord
	// Standing is the standing approval the reservation spends a use of; nil for none.
	Standing *StandingWrite
}

// CheckApproval decides whether approval a may be spent on the action with hash actionHash at
// now. It returns "" when it may, else the refusal reason (unknown, mismatch, consumed, denied,
// pending, expired). expire is set when the request must be written expired (docs/guarantees.md#approvals).
func CheckApproval(a *Approval, actionHash string, now time.Time) (reason string, expire bool) {
	switch {
	case a == nil:
		return "unknown", false
	case a.ActionHash != actionHash:
		return "mismatch", false
	case a.Status == Consumed:
		return "consumed", false
	case a.Status == Denied:
		return "denied", false
	case a.Status == Expired:
		return "expired", false
	case !now.Before(a.ExpiresAt):
		return "expired", true
	case a.Status == Pending:
		return "pending", false
	case a.Status == Granted:
		return "", false
	}
	return "unknown", false
}

// LeaseExpiredError is the error text of an effect whose holder's lease lapsed.
const LeaseExpiredError = "lease expired: the holder never finished"

// PlanReserve decides a reservation from the rows the backend read: the effect record under
// req.EffectKey (nil when none), the approval req.ApprovalID names (nil when none or unknown),
// and for each of req.Charges the amount its budget holds in its window (held, see
// PlanCharges; nil when there are no charges). It is the retry table, the approval checks and
// the budget checks of docs/guarantees.md, in one place for every backend. The checks run in
// that order: a presented approval, then the effect's state, then the charges, so that a
// duplicate is refused as a duplicate whatever its budget holds.
func PlanReserve(req *ReserveRequest, eff *Effect, apr *Approval, held []int64) *ReservePlan {
	return planReserve(req, eff, apr, nil, held)
}

// PlanReserveStanding is PlanReserve for a request that may present a standing approval: st is
// the standing approval req.ApprovalID names (nil when none or unknown), read under the write
// lock. Its use is checked first (CheckStandingUse) and spent only when the reservation holds.
func PlanReserveStanding(req *ReserveRequest, eff *Effect, apr *Approval, st *Standing, held []int64) *ReservePlan {
	return planReserve(req, eff, apr, st, held)
}

func planReserve(req *ReserveRequest, eff *Effect, apr *Approval, st *Standing, held []int64) *ReservePlan {
	p := &ReservePlan{Events: append([]Event(nil), req.Events...)}
	standing := IsStandingID(req.ApprovalID)
	var amount int64
	p.Result.Effect = eff
	p.Result.Approval = apr
	ev := func(kind string, payload map[string]any) {
		p.Events = append(p.Events, NewEvent(kind, req.Now, req.ActionID, req.EffectKey, req.ApprovalID, payload))
	}
	refuse := func(r *Refusal) *ReservePlan {
		p.Result.Refusal = r
		if req.Receipt != nil {
			rc := *req.Receipt
			rc.Result = receipt.Blocked
			if r.Reason == ReasonBudgetExhausted {
				// A budget is part of the call's authority: its refusal is a denial, as an
				// authority refusal is, not a block by the effect's state.
				rc.Result, rc.Decision, rc.DecisionReason = receipt.Denied, "deny", ReasonBudgetExhausted
			}
			// A refused reservation charged nothing, whatever the draft said.
			rc.BudgetCharges = nil
			rc.Error = r.Text()
			if apr != nil && rc.Approver == "" {
				rc.Approver = safetext.Valid(apr.Approver)
			}
			if st != nil && rc.Approver == "" {
				rc.Approver = StandingApprover(st)
			}
			rc.FinishedAt = req.Now
			// The refusal's receipt chains what the refusal wrote: an approval found expired,
			// an effect whose lease lapsed.
			if p.Approval != nil {
				rc.Approval = ApprovalStateOf(&p.Approval.Next)
			}
			if p.Effect != nil {
				rc.Effect = EffectStateOf(&p.Effect.Next)
			}
			p.Receipt = &rc
			p.Result.Document = &rc
		} else if p.Effect != nil {
			// No receipt for the call (a request without a draft), but the lapse is a state
			// change: it is chained on its own.
			p.Receipt = LeaseLapsedRecord(&p.Effect.Next, req.Now)
		}
		return p
	}

	if standing {
		reason, detail, amt := CheckStandingUse(st, req)
		if reason != "" {
			return refuse(&Refusal{Approval: true, Reason: reason,
				Detail: fmt.Sprintf("standing approval %s refused: %s (%s)", safetext.Quote(req.ApprovalID), reason, detail)})
		}
		amount = amt
	} else if req.ApprovalID != "" {
		reason, expire := CheckApproval(apr, req.ActionHash, req.Now)
		if expire {
			w, e := PlanExpiry(apr, req.Now, req.DenyAtExpiry, ExpiredByReservation)
			p.Approval = w
			p.Result.Approval = &w.Next
			e.ActionID, e.EffectKey = req.ActionID, req.EffectKey
			p.Events = append(p.Events, e)
			if w.Next.Status == Denied {
				// Denied at expiry: the request reads denied from now on, and so does this refusal.
				reason = "denied"
				apr = &w.Next
			}
		}
		if reason != "" {
			return refuse(&Refusal{Approval: true, Reason: reason,
				Detail: fmt.Sprintf("approval %s refused: %s (%s)", safetext.Quote(req.ApprovalID), reason, approvalDetail(reason, apr, req))})
		}
	}

	if req.EffectKey != "" {
		if r, write := planEffect(req, eff); r != nil {
			if write != nil {
				p.Effect = write
				p.Result.Effect = &write.Next
				ev(EventExecutionAmbiguous, map[string]any{"cause": "lease_expired", "holder": eff.ActionID, "attempt": eff.Attempt})
			}
			ev(EventEffectRefused, map[string]any{"reason": r.Reason, "state": string(p.Result.Effect.State), "attempt": p.Result.Effect.Attempt})
			return refuse(r)
		}
		next := Effect{
			Key: req.EffectKey, State: Executing, Attempt: 1, ActionID: req.ActionID, Action: req.Action,
			ActionHash: req.ActionHash, LeaseExpiresAt: req.Now.Add(req.Lease), CreatedAt: req.Now, UpdatedAt: req.Now,
			Arguments: req.Arguments,
		}
		if eff != nil {
			next.Attempt = eff.Attempt + 1
			next.CreatedAt = eff.CreatedAt
		}
		if len(req.Charges) > 0 {
			r, rows := PlanCharges(req, held, next.Attempt)
			if r != nil {
				ev(EventEffectRefused, map[string]any{"reason": r.Reason, "budget": r.Charge.Budget, "metric": r.Charge.Metric,
					"window": FormatWindow(r.Charge.Window)})
				return refuse(r)
			}
			p.Charges = rows
		}
		p.Effect = &EffectWrite{Prev: eff, Next: next}
		p.Result.Effect = &p.Effect.Next
		ev(EventEffectReserved, map[string]any{"attempt": next.Attempt, "lease_expires_at": next.LeaseExpiresAt.UTC().Format(receipt.TimeFormat)})
	}

	if standing {
		next := *st
		next.Uses++
		next.Spent += amount
		next.LastUsedBy, next.LastUsedAt = req.ActionID, req.Now
		p.Standing = &StandingWrite{Prev: st, Next: next}
		p.Result.Standing = &next
		payload := map[string]any{"uses": int64(next.Uses), "of": int64(next.Terms.Uses), "from": st.From}
		if next.Terms.Total != nil {
			payload["spent"], payload["limit"] = next.Spent, next.Terms.Total.Limit
		}
		ev(EventStandingUsed, payload)
	} else if req.ApprovalID != "" {
		next := *apr
		next.Status = Consumed
		next.ConsumedBy = req.ActionID
		next.ConsumedAt = req.Now
		p.Approval = &ApprovalWrite{PrevStatus: apr.Status, Next: next}
		p.Result.Approval = &next
		ev(EventApprovalConsumed, nil)
	}
	p.Result.Reserved = true
	return p
}

// planEffect applies the retry table to the existing record. It returns nil when the key may be
// reserved; else the refusal and, for a lapsed lease, the write that makes the record ambiguous.
// A refusal of a record that holds another action hash is a key_conflict: the same consequence,
// asked with other arguments.
func planEffect(req *ReserveRequest, eff *Effect) (*Refusal, *EffectWrite) {
	if eff == nil {
		return nil, nil
	}
	r, w := planState(req, eff)
	if r != nil && r.Reason != "attempts_exhausted" && keyConflict(req, eff) {
		r = &Refusal{Reason: "key_conflict", Detail: keyConflictDetail(req, eff, r)}
	}
	return r, w
}

// keyConflict reports whether a call asks for another consequence than the record's attempt
// under the same key: another action, or other arguments. Another principal (a second worker)
// with the same arguments asks for the same one. A record kept without its arguments (written
// before the store kept them) is compared by action hash.
func keyConflict(req *ReserveRequest, eff *Effect) bool {
	switch {
	case eff.Action != req.Action:
		return true
	case len(eff.Arguments) > 0 && len(req.Arguments) > 0:
		return !bytes.Equal(eff.Arguments, req.Arguments)
	}
	return eff.ActionHash != req.ActionHash
}

func planState(req *ReserveRequest, eff *Effect) (*Refusal, *EffectWrite) {
	detail := func(what string) string { return fmt.Sprintf("effect %s %s", safetext.Quote(req.EffectKey), what) }
	switch eff.State {
	case Committed:
		return &Refusal{Reason: "committed", Detail: detail(fmt.Sprintf("already committed (attempt %d)", eff.Attempt))}, nil
	case Ambiguous:
		return &Refusal{Reason: "ambiguous", Detail: detail("is ambiguous: resolve it before any retry")}, nil
	case Failed:
		if eff.Conflict != "" {
			return &Refusal{Reason: "outcome_conflict", Detail: detail("was resolved failed, but " + eff.Conflict + ": resolve it again before any retry")}, nil
		}
		if req.MaxAttempts > 0 && eff.Attempt >= req.MaxAttempts {
			return &Refusal{Reason: "attempts_exhausted", Detail: detail(fmt.Sprintf("failed %d of %d allowed attempts", eff.Attempt, req.MaxAttempts))}, nil
		}
		return nil, nil
	case Executing:
		if req.Now.Before(eff.LeaseExpiresAt) {
			return &Refusal{Reason: "in_progress", Detail: detail(fmt.Sprintf("is in progress (attempt %d, lease until %s)", eff.Attempt, eff.LeaseExpiresAt.UTC().Format(receipt.TimeFormat)))}, nil
		}
		return &Refusal{Reason: "ambiguous", Detail: detail("is ambiguous: " + LeaseExpiredError)}, &EffectWrite{Prev: eff, Next: lapse(eff, req.Now)}
	}
	return &Refusal{Reason: "ambiguous", Detail: detail(fmt.Sprintf("has unknown state %q", eff.State))}, nil
}

// lapse is the record of a holder whose lease lapsed, written ambiguous. It keeps the lapsed
// lease: the holder has not reported and may still be acting (HolderMayAct), until its own
// outcome arrives.
func lapse(eff *Effect, now time.Time) Effect {
	next := *eff
	next.State = Ambiguous
	next.Error = LeaseExpiredError
	next.UpdatedAt = now
	return next
}

func keyConflictDetail(req *ReserveRequest, eff *Effect, r *Refusal) string {
	var why string
	switch {
	case eff.Action != req.Action:
		why = fmt.Sprintf("the recorded attempt is of action %s, this call is %s", eff.Action, req.Action)
	case len(eff.Arguments) > 0 && len(req.Arguments) > 0:
		why = "the arguments differ from those of the recorded attempt"
	default:
		why = "the action (arguments, resource, principal or environment) differs from the recorded attempt's"
	}
	return fmt.Sprintf("effect %s: key conflict: %s (recorded %s attempt %d, action hash %s; this call %s); the key is refused as it stands (%s)",
		safetext.Quote(req.EffectKey), why, eff.State, eff.Attempt, eff.ActionHash, req.ActionHash, r.Reason)
}

func approvalDetail(reason string, a *Approval, req *ReserveRequest) string {
	switch reason {
	case "unknown":
		return "no such approval"
	case "mismatch":
		return fmt.Sprintf("it was granted for %s, this action is %s", a.ActionHash, req.ActionHash)
	case "consumed":
		return "already used by " + safetext.Quote(a.ConsumedBy)
	case "denied":
		if a.DeniedAtExpiry() {
			return "denied at its expiry " + a.ExpiresAt.UTC().Format(receipt.TimeFormat) + ", unanswered (approvers.on_expiry: deny)"
		}
		return "denied by " + safetext.Quote(safetext.Valid(a.Approver))
	case "pending":
		return "not yet answered"
	case "expired":
		return "expired at " + a.ExpiresAt.UTC().Format(receipt.TimeFormat)
	}
	return reason
}

// RecordPlan is everything one Record writes. Result.Receipt is filled by the backend.
type RecordPlan struct {
	Result  RecordResult
	Effect  *EffectWrite
	Events  []Event
	Receipt *receipt.Receipt
}

// PlanRecord decides the end of a call from the effect record the backend read (nil when the
// request has no key or no record exists) (docs/guarantees.md#atomicity):
//
//   - the holder of an executing record writes its outcome;
//   - a holder whose lease lapsed, and whose record a contender made ambiguous, settles it with
//     its own outcome if nobody resolved it meanwhile (an unknown outcome leaves it ambiguous,
//     now as reported by its holder) — a late outcome;
//   - a holder whose attempt was resolved meanwhile (the record resolved, or renewed after a
//     resolution to failed) keeps the resolution; when it disagrees (committed against failed
//     or the reverse) the record is marked with the conflict and an outcome_conflict event is
//     written;
//   - any other Record writes no outcome: its receipt becomes ambiguous (Lost).
func PlanRecord(req *RecordRequest, eff *Effect) *RecordPlan {
	rc := *req.Receipt
	if rc.FinishedAt.IsZero() {
		rc.FinishedAt = req.Now
	}
	p := &RecordPlan{Events: append([]Event(nil), req.Events...), Receipt: &rc}
	p.Result.Document = &rc
	if req.EffectKey == "" {
		return p
	}
	p.Result.Effect = eff
	own := eff != nil && eff.ActionID == req.ActionID && eff.Attempt == req.Attempt
	switch {
	case own && eff.State == Executing:
		p.settle(req, eff, nil)
	case own && eff.State == Ambiguous && HolderMayAct(eff):
		p.Result.Late = true
		rc.Kind = receipt.KindLateOutcome
		p.settle(req, eff, map[string]any{"late": true, "cause": "lease_expired",
			"lease_expired_at": eff.LeaseExpiresAt.UTC().Format(receipt.TimeFormat)})
	case own && eff.ResolvedBy != "" && (eff.State == Committed || eff.State == Failed):
		rc.Kind = receipt.KindLateOutcome
		p.resolvedMeanwhile(req, eff, eff.State, eff.ResolvedBy)
	case eff != nil && eff.Attempt > req.Attempt && eff.ActionID != req.ActionID:
		// Only a failed attempt is renewed, and the holder did not record this one: someone
		// resolved it failed, and the key was renewed since.
		rc.Kind = receipt.KindLateOutcome
		p.resolvedMeanwhile(req, eff, Failed, "")
	default:
		p.Result.Lost = true
		rc.Result = receipt.Ambiguous
		rc.Error = lostDetail(req, eff, rc.Error)
		p.event(req, EventExecutionAmbiguous, map[string]any{"cause": "key_lost", "outcome": string(req.Outcome)})
	}
	if p.Effect != nil {
		// The receipt chains the record the outcome leaves (docs/guarantees.md#record-kinds).
		rc.Effect = EffectStateOf(&p.Effect.Next)
	}
	return p
}

func (p *RecordPlan) event(req *RecordRequest, kind string, payload map[string]any) {
	p.Events = append(p.Events, NewEvent(kind, req.Now, req.ActionID, req.EffectKey, p.Receipt.ApprovalID, payload))
}

// settle writes the holder's outcome on its record; extra joins the event's payload.
func (p *RecordPlan) settle(req *RecordRequest, eff *Effect, extra map[string]any) {
	next := *eff
	next.State = req.Outcome
	next.Result = nil
	next.Error = req.Error
	next.LeaseExpiresAt = time.Time{}
	next.UpdatedAt = req.Now
	kind := EventExecutionAmbiguous
	switch req.Outcome {
	case Committed:
		next.Result = req.Result
		next.Error = ""
		kind = EventExecutionCommitted
	case Failed:
		kind = EventExecutionFailed
	case Ambiguous:
		if next.Error == "" {
			next.Error = "outcome unknown"
		}
	default:
		// An outcome that is not one of the three is not knowledge of what happened: unknown is
		// not failed, and it must never leave the record executing or in a state nothing reads.
		next.State = Ambiguous
	}
	p.Effect = &EffectWrite{Prev: eff, Next: next}
	p.Result.Effect = &p.Effect.Next
	payload := map[string]any{"attempt": eff.Attempt}
	if req.Error != "" {
		payload["error"] = req.Error
	}
	for k, v := range extra {
		payload[k] = v
	}
	p.event(req, kind, payload)
}

// resolvedMeanwhile records the outcome of a holder whose attempt was resolved to resolved (by
// by, "" when unknown) before it reported: the resolution stands.
func (p *RecordPlan) resolvedMeanwhile(req *RecordRequest, eff *Effect, resolved State, by string) {
	payload := map[string]any{"attempt": req.Attempt, "late": true, "resolved": string(resolved)}
	if by != "" {
		payload["resolved_by"] = by
	}
	if req.Error != "" {
		payload["error"] = req.Error
	}
	outcome := req.Outcome
	if outcome != Committed && outcome != Failed {
		outcome = Ambiguous
	}
	switch {
	case outcome == Ambiguous:
		// Not knowing contradicts nothing: the resolution says more than the holder does.
		p.event(req, EventExecutionAmbiguous, payload)
	case outcome == resolved:
		kind := EventExecutionFailed
		if outcome == Committed {
			kind = EventExecutionCommitted
			if len(eff.Result) == 0 && eff.Attempt == req.Attempt && len(req.Result) > 0 {
				// The resolution said committed without a result: the holder has it.
				next := *eff
				next.Result = req.Result
				next.UpdatedAt = req.Now
				p.Effect = &EffectWrite{Prev: eff, Next: next}
				p.Result.Effect = &p.Effect.Next
			}
		}
		p.event(req, kind, payload)
	default:
		who := "resolved " + string(resolved)
		if by != "" {
			who += " by " + by
		}
		conflict := fmt.Sprintf("its holder %s (attempt %d) reported %s after it was %s", req.ActionID, req.Attempt, outcome, who)
		next := *eff
		next.Conflict = conflict
		next.UpdatedAt = req.Now
		p.Effect = &EffectWrite{Prev: eff, Next: next}
		p.Result.Effect = &p.Effect.Next
		p.Result.Conflict = conflict
		p.Receipt.Kind = receipt.KindOutcomeConflict
		p.Receipt.Error = joinError("outcome_conflict: effect "+req.EffectKey+": "+conflict+"; the resolution stands", p.Receipt.Error)
		payload["outcome"] = string(outcome)
		p.event(req, EventOutcomeConflict, payload)
	}
}

func joinError(s, execErr string) string {
	if execErr == "" {
		return s
	}
	return s + "; executor: " + execErr
}

func lostDetail(req *RecordRequest, eff *Effect, execErr string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%soutcome %s not recorded: ", ErrorPrefix, req.Outcome)
	if eff == nil {
		b.WriteString("the effect record is gone")
	} else {
		fmt.Fprintf(&b, "effect %s is %s (attempt %d, holder %s)", safetext.Quote(eff.Key), eff.State, eff.Attempt, eff.ActionID)
	}
	if execErr != "" {
		b.WriteString("; executor: " + strings.TrimPrefix(execErr, ErrorPrefix))
	}
	return b.String()
}

// PlanAnswer decides an answer to an approval request whose a.Answers holds the answers given
// so far. The returned write is nil when nothing changes; an expired request is written expired
// even though the answer is refused. A grant that leaves fewer than req.Required distinct
// grants keeps the request pending and records the answer; a deny, or the last required grant,
// decides it (docs/approvals.md).
func PlanAnswer(req *AnswerRequest, a *Approval) (*ApprovalWrite, []Event, error) {
	if a == nil {
		return nil, nil, fmt.Errorf("approval %s: %w", safetext.Quote(req.ID), ErrNotFound)
	}
	refuse := func(reason string) error { return &AnswerError{ID: a.ID, Reason: reason, Approval: a} }
	if len(req.Set) > 0 && req.Edit == nil {
		// Arguments to set that nobody checked against the policy's editable arguments.
		return nil, nil, fmt.Errorf("approval %s: %w", safetext.Quote(req.ID),
			&InputError{Field: "set", Value: string(req.Set), Reason: "is not checked against the policy: answer through Guard.Answer"})
	}
	approver, err := NormalizeApprover(req.Approver)
	if err != nil {
		return nil, nil, refuse("invalid_approver")
	}
	if err := CheckNote(req.Note); err != nil {
		return nil, nil, refuse("invalid_note")
	}
	if a.Status != Pending {
		return nil, nil, refuse("already_" + string(a.Status))
	}
	if !req.Now.Before(a.ExpiresAt) {
		w, ev := PlanExpiry(a, req.Now, req.DenyAtExpiry, ExpiredByAnswer)
		return w, []Event{ev}, &AnswerError{ID: a.ID, Reason: "expired", Approval: &w.Next}
	}
	if SameName(approver, a.Agent) || (a.User != "" && SameName(approver, a.User)) {
		return nil, nil, refuse(ReasonSelfApproval)
	}
	return planAnswer(req, a, approver)
}

// PlanResolve decides the resolution of an effect (docs/guarantees.md#resolving-an-ambiguous-effect). An ambiguous record moves; so
// does an executing record whose lease has lapsed (it is written ambiguous and resolved in the
// one transaction, as a reservation would have found it), and a resolved record that carries a
// conflict, resolved again by a person. A reconcile hook (req.Hook) may not resolve a record
// failed while its holder may still act (ErrHolderMayAct), nor settle a conflict.
func PlanResolve(req *ResolveRequest, eff *Effect) (*EffectWrite, []Event, error) {
	if req.To != Committed && req.To != Failed {
		return nil, nil, fmt.Errorf("resolve %s: target state %q is not committed or failed", safetext.Quote(req.Key), req.To)
	}
	if len(req.Result) > 0 && (req.To != Committed || !json.Valid(req.Result)) {
		return nil, nil, fmt.Errorf("resolve %s: a result is JSON, and only for committed", safetext.Quote(req.Key))
	}
	if eff == nil {
		return nil, nil, fmt.Errorf("resolve %s: %w", safetext.Quote(req.Key), ErrNotFound)
	}
	lapsed := LeaseLapsed(eff, req.Now)
	conflict := eff.Conflict != "" && (eff.State == Committed || eff.State == Failed) && !req.Hook
	if eff.State != Ambiguous && !lapsed && !conflict {
		what := string(eff.State)
		if eff.State == Executing {
			what = "executing under a live lease"
		}
		return nil, nil, fmt.Errorf("resolve %s: state is %s: %w", safetext.Quote(req.Key), what, ErrNotAmbiguous)
	}
	if err := CheckResolveBinding(req, eff); err != nil {
		return nil, nil, err
	}
	if req.Hook && req.To == Failed && HolderMayAct(eff) {
		return nil, nil, fmt.Errorf("resolve %s failed: attempt %d's lease lapsed and its holder has not reported: %w", safetext.Quote(req.Key), eff.Attempt, ErrHolderMayAct)
	}
	by, err := NormalizeApprover(req.By)
	if err != nil {
		return nil, nil, fmt.Errorf("resolve %s: resolver: %w", safetext.Quote(req.Key), err)
	}
	if err := CheckNote(req.Note); err != nil {
		return nil, nil, fmt.Errorf("resolve %s: %w", safetext.Quote(req.Key), err)
	}
	events := append([]Event(nil), req.Events...)
	if lapsed {
		events = append(events, NewEvent(EventExecutionAmbiguous, req.Now, eff.ActionID, eff.Key, "",
			map[string]any{"cause": "lease_expired", "holder": eff.ActionID, "attempt": eff.Attempt}))
	}
	next := *eff
	next.State = req.To
	next.ResolvedBy = by
	next.Note = req.Note
	next.Conflict = ""
	next.LeaseExpiresAt = time.Time{}
	next.UpdatedAt = req.Now
	if lapsed {
		next.Error = LeaseExpiredError
	}
	if req.To == Committed && len(req.Result) > 0 {
		next.Result = req.Result
	}
	if req.To == Failed {
		next.Result = nil
	}
	payload := map[string]any{"to": string(req.To), "by": by, "attempt": eff.Attempt}
	if req.Note != "" {
		payload["note"] = req.Note
	}
	if eff.Conflict != "" {
		payload["conflict"] = eff.Conflict
	}
	events = append(events, NewEvent(EventEffectResolved, req.Now, eff.ActionID, eff.Key, "", payload))
	return &EffectWrite{Prev: eff, Next: next}, events, nil
}

// CheckResolveBinding refuses a resolution of eff that was checked against another version of the
// record than eff: held by another attempt than req.Holder, or updated at another time than
// req.Updated (each when set). The error matches ErrNotAmbiguous: the record the person decided
// about no longer needs their resolution, whatever the one now stored needs.
func CheckResolveBinding(req *ResolveRequest, eff *Effect) error {
	switch {
	case req.Holder != "" && eff.ActionID != req.Holder:
		return fmt.Errorf("resolve %s: attempt %d (%s) holds the record now, not the attempt %s whose resolution was checked: %w",
			safetext.Quote(req.Key), eff.Attempt, safetext.Quote(eff.ActionID), safetext.Quote(req.Holder), ErrNotAmbiguous)
	case !req.Updated.IsZero() && !eff.UpdatedAt.Equal(req.Updated):
		return fmt.Errorf("resolve %s: the record was written at %s, after the version of %s whose resolution was checked: %w",
			safetext.Quote(req.Key), eff.UpdatedAt.UTC().Format(time.RFC3339Nano), req.Updated.UTC().Format(time.RFC3339Nano), ErrNotAmbiguous)
	}
	return nil
}

// CheckNote validates a note of a resolution or an approval answer: at most 2000 bytes of
// valid UTF-8, with no control characters but newlines and tabs.
func CheckNote(note string) error {
	if len(note) > 2000 {
		return fmt.Errorf("note is %d bytes long, at most 2000 are kept", len(note))
	}
	if !utf8.ValidString(note) {
		return fmt.Errorf("note %q is not valid UTF-8", note)
	}
	for _, r := range note {
		if r != '\n' && r != '\t' && (unicode.IsControl(r) || r == '\u2028' || r == '\u2029') {
			return fmt.Errorf("note %q contains a control character", note)
		}
	}
	return nil
}

// PlanExtend decides a lease extension: only the holder of a live lease may extend it.
func PlanExtend(req *ExtendRequest, eff *Effect) (*EffectWrite, error) {
	if eff == nil || eff.State != Executing || eff.ActionID != req.ActionID || eff.Attempt != req.Attempt || !req.Now.Before(eff.LeaseExpiresAt) {
		return nil, fmt.Errorf("extend lease on %s: %w", safetext.Quote(req.Key), ErrLeaseLost)
	}
	next := *eff
	if req.Until.After(next.LeaseExpiresAt) {
		next.LeaseExpiresAt = req.Until
	}
	next.UpdatedAt = req.Now
	return &EffectWrite{Prev: eff, Next: next}, nil
}

// NewEvent builds an event; payload, a map of strings and integers, is encoded as its JSON.
func NewEvent(kind string, now time.Time, actionID, key, approvalID string, payload map[string]any) Event {
	e := Event{Kind: kind, Time: now, ActionID: actionID, EffectKey: key, ApprovalID: approvalID}
	if payload != nil {
		// canon writes the usual payload (strings and integers) with a third of encoding/json's
		// allocations, which reflects over the map; anything it refuses (text that is not
		// UTF-8, which encoding/json repairs) falls back to encoding/json. The bytes are not
		// hashed: either encoding is the payload.
		var err error
		if e.Payload, err = canon.Marshal(payload); err != nil {
			e.Payload, _ = json.Marshal(payload) // maps of strings and ints always encode
		}
	}
	return e
}
