package jsonview

import (
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// Delegation is a stored delegation or break-glass grant as an operator reads it: one line of
// `latch delegations --json`, the object `latch delegate --json` and `latch break-glass --json`
// print, and what POST /v1/break-glass answers.
type Delegation struct {
	DelegationID string         `json:"delegation_id"`
	Parent       string         `json:"parent"`
	Subject      Principal      `json:"subject"`
	Actions      []string       `json:"actions"`
	Resources    []string       `json:"resources"`
	Constraints  map[string]any `json:"constraints"`
	Environments []string       `json:"environments"`
	Tasks        []string       `json:"tasks"`
	Budgets      []GrantBudget  `json:"budgets"` // null when the grant declares none
	ExpiresAt    *string        `json:"expires_at"`
	Delegable    bool           `json:"delegable"`
	CreatedBy    string         `json:"created_by"`
	CreatedAt    *string        `json:"created_at"`
	Revoked      bool           `json:"revoked"`    // it, or one above it, was revoked: it grants nothing
	RevokedAt    *string        `json:"revoked_at"` // its own revocation
	RevokedBy    *string        `json:"revoked_by"`
	CutBy        *string        `json:"cut_by"` // the revoked delegation above it, when not revoked itself
	Grant        string         `json:"grant"`  // the grant document as stored
	Via          *string        `json:"via"`    // "break-glass" for a break-glass grant, "hop" for a hop, null for a delegation
	Reason       *string        `json:"reason"` // why a break-glass grant was opened
}

// NewDelegation renders a stored delegation, and returns the grant it parses to (nil when it
// no longer parses: it is shown with empty fields, and the authority axis denies every call
// while it is in the store). byID (nil allowed) is every delegation by id, to find a revoked
// ancestor.
func NewDelegation(d *store.Delegation, byID map[string]*store.Delegation) (Delegation, *policy.Grant) {
	j := Delegation{
		DelegationID: d.ID, Parent: d.Parent, Actions: []string{}, CreatedBy: d.CreatedBy,
		CreatedAt: Stamp(d.CreatedAt), RevokedAt: Stamp(d.RevokedAt), RevokedBy: Str(d.RevokedBy),
		Revoked: !d.RevokedAt.IsZero(), Grant: string(d.Grant), Via: Str(d.Via), Reason: Str(d.Reason),
	}
	g, err := policy.ParseGrant(d.ID, d.Grant)
	if err != nil {
		g = nil
	} else {
		j.Subject = Principal{Agent: Str(g.Subject.Agent), User: Str(g.Subject.User)}
		j.Actions = g.Actions
		j.Resources = g.Resources
		if len(g.Constraints) > 0 {
			j.Constraints = make(map[string]any, len(g.Constraints))
			for _, c := range g.Constraints {
				j.Constraints[c.Key] = c.Operand
			}
		}
		j.Environments = g.Environments
		j.Tasks = g.Tasks
		j.Budgets = GrantBudgets(g.Budgets)
		j.ExpiresAt = Stamp(g.ExpiresAt)
		j.Delegable = g.Delegable
	}
	if !j.Revoked && byID != nil {
		if cut := revokedAncestor(d, byID); cut != "" {
			j.Revoked, j.CutBy = true, &cut
		}
	}
	return j, g
}

// GrantBudget is one budget a grant declares, as a policy writes it: its window ISO 8601
// (PT24H, P30D).
type GrantBudget struct {
	Metric string `json:"metric"`
	Limit  int64  `json:"limit"`
	Window string `json:"window"`
}

// GrantBudgets renders a grant's budgets; nil when it declares none.
func GrantBudgets(bs []policy.Budget) []GrantBudget {
	if len(bs) == 0 {
		return nil
	}
	out := make([]GrantBudget, len(bs))
	for i, b := range bs {
		out[i] = GrantBudget{Metric: b.Metric, Limit: b.Limit, Window: policy.FormatISODuration(b.Window)}
	}
	return out
}

// revokedAncestor returns the id of the nearest revoked delegation above d, or "". A chain
// that loops stops the walk.
func revokedAncestor(d *store.Delegation, byID map[string]*store.Delegation) string {
	seen := map[string]bool{d.ID: true}
	for p := byID[d.Parent]; p != nil && !seen[p.ID]; p = byID[p.Parent] {
		if !p.RevokedAt.IsZero() {
			return p.ID
		}
		seen[p.ID] = true
	}
	return ""
}
