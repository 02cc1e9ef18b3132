package jsonview

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// Standing is a standing approval as an operator reads it (docs/approvals.md#standing-approvals).
// State is what it is now (active, exhausted, expired, revoked); Arguments are those of the
// request it was granted from, which every call must pass again except as Terms allow.
type Standing struct {
	StandingID string          `json:"standing_id"`
	State      string          `json:"state"`
	From       string          `json:"from"`
	Action     string          `json:"action"`
	ActionHash string          `json:"action_hash"`
	Arguments  json.RawMessage `json:"arguments"`
	Display    []Display       `json:"display"`
	Principal  Principal       `json:"principal"`
	Resource   *string         `json:"resource"`
	Terms      StandingTerms   `json:"terms"`
	Uses       int             `json:"uses"`
	Spent      *int64          `json:"spent"` // null without a total
	GrantedBy  []string        `json:"granted_by"`
	CreatedAt  *string         `json:"created_at"`
	ExpiresAt  *string         `json:"expires_at"`
	LastUsedBy *string         `json:"last_used_by"`
	LastUsedAt *string         `json:"last_used_at"`
	RevokedBy  *string         `json:"revoked_by"`
	RevokedAt  *string         `json:"revoked_at"`
	Note       *string         `json:"note"`
}

// StandingTerms are the bounds of a standing approval: Max maps an integer argument to its
// ceiling, Vary lists arguments that may take any value, Total caps the sum of one argument.
type StandingTerms struct {
	Uses  int                  `json:"uses"`
	For   string               `json:"for"`
	Max   map[string]int64     `json:"max"`
	Vary  []string             `json:"vary"`
	Total *store.StandingTotal `json:"total"`
}

// NewStanding is s as an operator reads it at now, its arguments read through pol's display
// hints (pol may be nil).
func NewStanding(s *store.Standing, pol *policy.Policy, now time.Time) Standing {
	d := ActionOf(&store.Approval{Action: s.Action, ActionName: s.ActionName, Agent: s.Agent, User: s.User})
	args := d.Arguments
	if len(args) == 0 {
		args = json.RawMessage("null")
	}
	out := Standing{
		StandingID: s.ID, State: store.StandingState(s, now), From: s.From, Action: d.Name, ActionHash: s.ActionHash,
		Arguments: pol.RedactJSON(d.Name, args), Display: Displayed(pol, d.Name, args), Principal: d.Principal, Resource: d.Resource,
		Terms: StandingTerms{Uses: s.Terms.Uses, For: time.Duration(s.Terms.For).String(), Max: s.Terms.Max,
			Vary: s.Terms.Vary, Total: s.Terms.Total},
		Uses: s.Uses, GrantedBy: s.GrantedBy, CreatedAt: Stamp(s.CreatedAt), ExpiresAt: Stamp(s.ExpiresAt),
		LastUsedBy: Str(s.LastUsedBy), LastUsedAt: Stamp(s.LastUsedAt), RevokedBy: Str(s.RevokedBy),
		RevokedAt: Stamp(s.RevokedAt), Note: Str(s.Note),
	}
	if out.Terms.Max == nil {
		out.Terms.Max = map[string]int64{}
	}
	if out.Terms.Vary == nil {
		out.Terms.Vary = []string{}
	}
	if out.GrantedBy == nil {
		out.GrantedBy = []string{}
	}
	if s.Terms.Total != nil {
		spent := s.Spent
		out.Spent = &spent
	}
	return out
}

// StandingStatus is the one HTTP status of a refused standing grant or revocation: the
// policy's bounds and entitlement are 403, terms that cannot apply 400, the rest 409.
func StandingStatus(reason string) int {
	switch reason {
	case store.ReasonStandingNotAllowed, store.ReasonStandingTooWide, store.ReasonNotEntitled:
		return http.StatusForbidden
	case store.ReasonInvalidStanding, "invalid_note", "invalid_approver":
		return http.StatusBadRequest
	}
	return http.StatusConflict
}
