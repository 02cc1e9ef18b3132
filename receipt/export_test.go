package receipt

import (
	"fmt"
	"time"

	"github.com/latchkit/latch/canon"
)

// Document returns the receipt as the map canon.Marshal would hash: the plain reference that
// Seal's direct writer is held to, byte for byte (TestCanonicalMatchesMarshal).
func (r *Receipt) Document() (map[string]any, error) { return r.document() }

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func stamp(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(TimeFormat)
}

// document is the receipt as the value model canon hashes.
func (r *Receipt) document() (map[string]any, error) {
	var args any = map[string]any{}
	if len(r.Arguments) > 0 {
		v, err := canon.Parse(r.Arguments)
		if err != nil {
			return nil, fmt.Errorf("receipt arguments: %w", err)
		}
		args = v
	}
	var authority any
	if r.Authority != nil {
		authority = map[string]any{
			"grant_id":      nullable(r.Authority.GrantID),
			"delegation_id": nullable(r.Authority.DelegationID),
			"break_glass":   nullable(r.Authority.BreakGlass),
		}
	}
	var wouldHave any
	if r.WouldHave != nil {
		wouldHave = map[string]any{
			"decision": nullable(r.WouldHave.Decision),
			"reason":   nullable(r.WouldHave.Reason),
			"effect":   nullable(r.WouldHave.Effect),
		}
	}
	var attempt any
	if r.Attempt > 0 {
		attempt = int64(r.Attempt)
	}
	if !IsCall(r.Kind) {
		return r.changeDocument(), nil
	}
	doc := map[string]any{
		"schema":            Schema,
		"kind":              KindOf(r.Kind),
		"receipt_id":        r.ReceiptID,
		"seq":               r.Seq,
		"prev_hash":         r.PrevHash,
		"action_id":         r.ActionID,
		"action":            r.Action,
		"action_hash":       r.ActionHash,
		"arguments":         args,
		"resource":          nullable(r.Resource),
		"principal":         map[string]any{"agent": nullable(r.Principal.Agent), "user": nullable(r.Principal.User), "issuer": nullable(r.Principal.Issuer)},
		"environment":       r.Environment,
		"decision":          r.Decision,
		"decision_reason":   nullable(r.DecisionReason),
		"authority":         authority,
		"approval_id":       nullable(r.ApprovalID),
		"approver":          nullable(r.Approver),
		"effect_key":        nullable(r.EffectKey),
		"attempt":           attempt,
		"idempotency_token": nullable(r.IdempotencyToken),
		"result":            r.Result,
		"error":             nullable(r.Error),
		"started_at":        stamp(r.StartedAt),
		"finished_at":       stamp(r.FinishedAt),
		"policy_hash":       nullable(r.PolicyHash),
		"policy_version":    nullable(r.PolicyVersion),
		"mode":              r.Mode,
		"budget_charges":    charges(r.BudgetCharges),
		"task":              nullable(r.Task),
		"scope_hash":        nullable(r.ScopeHash),
		"approval_edit":     nil,
	}
	if e := r.ApprovalEdit; e != nil {
		req, err := canon.Parse(e.RequestedArguments)
		if err != nil {
			return nil, fmt.Errorf("receipt requested arguments: %w", err)
		}
		by := make([]any, len(e.EditedBy))
		for i, s := range e.EditedBy {
			by[i] = s
		}
		doc["approval_edit"] = map[string]any{"edited_by": by, "requested_action_hash": e.RequestedActionHash, "requested_arguments": req}
	}
	if wouldHave != nil {
		doc["would_have"] = wouldHave
	}
	r.addStates(doc)
	return doc, nil
}

// charges is budget_charges in the value model: nil when there are none.
func charges(cs []BudgetCharge) any {
	if len(cs) == 0 {
		return nil
	}
	l := make([]any, len(cs))
	for i, c := range cs {
		l[i] = map[string]any{"budget": c.Budget, "metric": c.Metric, "amount": c.Amount, "limit": c.Limit, "window": c.Window}
	}
	return l
}

// changeDocument is a state change's record: the envelope, its subject and the state it leaves.
func (r *Receipt) changeDocument() map[string]any {
	var attempt any
	if r.Attempt > 0 {
		attempt = int64(r.Attempt)
	}
	doc := map[string]any{
		"schema":      Schema,
		"kind":        r.Kind,
		"receipt_id":  r.ReceiptID,
		"seq":         r.Seq,
		"prev_hash":   r.PrevHash,
		"action":      nullable(r.Action),
		"approval_id": nullable(r.ApprovalID),
		"approver":    nullable(r.Approver),
		"effect_key":  nullable(r.EffectKey),
		"attempt":     attempt,
		"result":      r.Result,
		"error":       nullable(r.Error),
		"finished_at": stamp(r.FinishedAt),
	}
	r.addStates(doc)
	return doc
}

// addStates adds the optional fields of schema v2.
func (r *Receipt) addStates(doc map[string]any) {
	if e := r.Effect; e != nil {
		doc["effect"] = map[string]any{"state": e.State, "attempt": int64(e.Attempt), "holder": nullable(e.Holder),
			"result_hash": nullable(e.ResultHash), "conflict": e.Conflict, "resolved_by": nullable(e.ResolvedBy)}
	}
	if a := r.Approval; a != nil {
		doc["approval"] = map[string]any{"status": a.Status, "approver": nullable(a.Approver)}
	}
	if d := r.Delegation; d != nil {
		doc["delegation"] = map[string]any{"delegation_id": d.ID, "parent": nullable(d.Parent), "grant_hash": nullable(d.GrantHash),
			"created_by": nullable(d.CreatedBy), "revoked_by": nullable(d.RevokedBy)}
	}
	if p := r.Prune; p != nil {
		doc["prune"] = map[string]any{"start": p.Start, "start_hash": p.StartHash, "checkpoint_signed_at": nullable(p.CheckpointSignedAt),
			"checkpoint_key": nullable(p.CheckpointKey), "removed": p.Removed, "carried": p.Carried, "carried_hash": nullable(p.CarriedHash)}
	}
	if h := r.Hold; h != nil {
		doc["hold"] = map[string]any{"hold_id": h.ID, "from": h.From, "to": h.To, "released": h.Released}
	}
	if r.By != "" {
		doc["by"] = r.By
	}
	if r.Note != "" {
		doc["note"] = r.Note
	}
}
