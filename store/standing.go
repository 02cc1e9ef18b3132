package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/internal/safetext"
)

// StandingPrefix starts the id of every standing approval. A call presents a standing approval
// where it presents an approval request's id (whose ids start "apr_"); the prefix is how a
// reservation tells the two apart.
const StandingPrefix = "sta_"

// IsStandingID reports whether id names a standing approval rather than an approval request.
func IsStandingID(id string) bool { return strings.HasPrefix(id, StandingPrefix) }

// StandingTerms are the bounds an approver states when granting a standing approval from a
// request (docs/approvals.md#standing-approvals). Every argument of the request must be passed
// again with the same value, except those named in Max (an integer up to the ceiling) and Vary
// (any value).
type StandingTerms struct {
	// Uses is how many calls the standing approval admits at most; at least 1.
	Uses int `json:"uses"`
	// For is how long it lasts from the grant that decides the request.
	For Duration `json:"for"`
	// Max maps a top-level integer argument to its ceiling: a call may pass any integer from 0
	// to the ceiling.
	Max map[string]int64 `json:"max,omitempty"`
	// Vary names top-level arguments a call may pass with any value.
	Vary []string `json:"vary,omitempty"`
	// Total, when set, caps the sum of one integer argument over every call admitted.
	Total *StandingTotal `json:"total,omitempty"`
}

// Bounds is the terms' argument bounds in one line, as every surface prints them: "amount ≤
// 500, order_id any, total amount ≤ 2000" ("" when every argument is the request's).
func (t StandingTerms) Bounds() string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(t.Max)) {
		parts = append(parts, fmt.Sprintf("%s ≤ %d", n, t.Max[n]))
	}
	for _, n := range t.Vary {
		parts = append(parts, n+" any")
	}
	if t.Total != nil {
		parts = append(parts, fmt.Sprintf("total %s ≤ %d", t.Total.Argument, t.Total.Limit))
	}
	return strings.Join(parts, ", ")
}

// StandingTotal caps the sum of Argument over the calls a standing approval admits.
type StandingTotal struct {
	Argument string `json:"argument"`
	Limit    int64  `json:"limit"`
}

// Duration is a time.Duration that reads and writes JSON as a Go duration string ("1h30m").
type Duration time.Duration

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string like \"1h\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Standing statuses: a standing approval is active until revoked; spent (all uses or the whole
// total) and expired are read from its counters and expiry (StandingState).
const (
	StandingActive    = "active"
	StandingRevoked   = "revoked"
	StandingExpired   = "expired"
	StandingExhausted = "exhausted"
)

// Standing is a standing approval: granted from one approval request, it admits further calls
// of the same action by the same principal, on the same resource and environment, whose
// arguments stay within Terms, at most Terms.Uses times and until ExpiresAt. Each use is spent
// in the transaction of the call's reservation, exactly as a single approval is.
//
// Backends keep it as this struct's JSON document.
type Standing struct {
	ID     string `json:"id"`
	Status string `json:"status"` // StandingActive or StandingRevoked as stored; see StandingState
	// From is the request it was granted from; ActionHash and Action that request's.
	From       string          `json:"from"`
	ActionHash string          `json:"action_hash"`
	Action     json.RawMessage `json:"action"` // the request's canonical action document: the baseline of Terms
	ActionName string          `json:"action_name"`
	Agent      string          `json:"agent"`
	User       string          `json:"user,omitempty"`
	Terms      StandingTerms   `json:"terms"`
	GrantedBy  []string        `json:"granted_by"` // the approvers whose grants decided the request, in answer order
	CreatedAt  time.Time       `json:"created_at"`
	ExpiresAt  time.Time       `json:"expires_at"`
	Uses       int             `json:"uses"`  // calls admitted so far
	Spent      int64           `json:"spent"` // the sum of Terms.Total.Argument over them; 0 without a total
	LastUsedBy string          `json:"last_used_by,omitempty"`
	LastUsedAt time.Time       `json:"last_used_at,omitzero"`
	RevokedBy  string          `json:"revoked_by,omitempty"`
	RevokedAt  time.Time       `json:"revoked_at,omitzero"`
	Note       string          `json:"note,omitempty"` // the revoker's note
}

// StandingState is s's status at now: revoked, expired, exhausted (every use, or the whole
// total, spent) or active.
func StandingState(s *Standing, now time.Time) string {
	switch {
	case s.Status == StandingRevoked:
		return StandingRevoked
	case !now.Before(s.ExpiresAt):
		return StandingExpired
	case s.Uses >= s.Terms.Uses || s.Terms.Total != nil && s.Spent >= s.Terms.Total.Limit:
		return StandingExhausted
	}
	return StandingActive
}

// StandingWrite is a standing approval a plan writes: an insert (Prev nil) or an update
// compare-and-set against Prev's uses and status.
type StandingWrite struct {
	Prev *Standing
	Next Standing
}

// StandingFilter selects standing approvals. Zero value selects all.
type StandingFilter struct {
	// State selects those in one StandingState at Now ("" for all).
	State string
	Now   time.Time
}

// Match reports whether s passes f.
func (f StandingFilter) Match(s *Standing) bool {
	return f.State == "" || StandingState(s, f.Now) == f.State
}

// RevokeStandingRequest ends a standing approval before its expiry.
type RevokeStandingRequest struct {
	Now  time.Time
	ID   string
	By   string
	Note string
}

// StandingStore is implemented by stores that keep standing approvals (both backends). A
// standing approval is created by the grant that decides its request (AnswerRequest.Standing)
// and spent by Reserve when a call presents its id.
type StandingStore interface {
	// Standing returns one standing approval; an error matching ErrNotFound when none has id.
	Standing(ctx context.Context, id string) (*Standing, error)
	// Standings lists standing approvals, newest first.
	Standings(ctx context.Context, f StandingFilter) ([]*Standing, error)
	// RevokeStanding revokes an active standing approval in one transaction, with its event.
	// Revoking one already revoked is refused (*StandingError, revoked).
	RevokeStanding(ctx context.Context, req *RevokeStandingRequest) (*Standing, error)
}

// Event kinds of standing approvals.
const (
	EventStandingGranted = "standing_granted"
	EventStandingUsed    = "standing_used"
	EventStandingRevoked = "standing_revoked"
)

// StandingError refuses a grant or a revocation of a standing approval. Reason is one of
// standing_not_allowed (the action's approvers have no standing entry), standing_too_wide
// (more uses or a longer time than the policy allows), invalid_standing (terms that cannot
// apply to the request), standing_terms_differ (an earlier grant of the request stated other
// terms, or none), revoked (already revoked). Nothing is written.
type StandingError struct {
	ID     string
	Reason string
	Detail string
}

func (e *StandingError) Error() string {
	return "standing approval " + safetext.Quote(e.ID) + ": " + e.Reason + ": " + e.Detail
}

// Is matches ErrAnswerRefused: a refused standing grant is a refused answer.
func (e *StandingError) Is(target error) bool { return target == ErrAnswerRefused }

// Standing reasons of StandingError.
const (
	ReasonStandingNotAllowed  = "standing_not_allowed"
	ReasonStandingTooWide     = "standing_too_wide"
	ReasonInvalidStanding     = "invalid_standing"
	ReasonStandingTermsDiffer = "standing_terms_differ"
)

// CheckStandingTerms refuses terms that cannot apply to the request whose canonical action
// document is doc: no uses or no duration, an argument named in Max, Vary or Total that the
// request does not pass, a Max or Total argument that is not an integer, a name in both Max
// and Vary. It returns the terms in canonical order (Vary sorted).
func CheckStandingTerms(t StandingTerms, doc json.RawMessage) (StandingTerms, error) {
	args, err := docArguments(doc)
	if err != nil {
		return t, err
	}
	switch {
	case t.Uses < 1:
		return t, errors.New("uses is less than 1 (expected how many calls it admits)")
	case t.For <= 0:
		return t, errors.New("for is not a positive duration")
	}
	for name, ceiling := range t.Max {
		if _, ok := intArgument(args, name); !ok {
			return t, fmt.Errorf("max names argument %s, which the request does not pass as an integer", safetext.Quote(name))
		}
		if ceiling < 0 {
			return t, fmt.Errorf("max of %s is %d (expected at least 0)", safetext.Quote(name), ceiling)
		}
	}
	vary := slices.Clone(t.Vary)
	slices.Sort(vary)
	vary = slices.Compact(vary)
	for _, name := range vary {
		if _, ok := args[name]; !ok {
			return t, fmt.Errorf("vary names argument %s, which the request does not pass", safetext.Quote(name))
		}
		if _, ok := t.Max[name]; ok {
			return t, fmt.Errorf("argument %s is in both max and vary", safetext.Quote(name))
		}
	}
	t.Vary = vary
	if tt := t.Total; tt != nil {
		if _, ok := intArgument(args, tt.Argument); !ok {
			return t, fmt.Errorf("total names argument %s, which the request does not pass as an integer", safetext.Quote(tt.Argument))
		}
		if tt.Limit < 1 {
			return t, fmt.Errorf("total limit is %d (expected at least 1)", tt.Limit)
		}
	}
	return t, nil
}

// sameTerms reports whether two grants stated the same terms (nil: a plain grant).
func sameTerms(a, b *StandingTerms) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// docArguments returns the top-level arguments of a canonical action document, each as its
// canonical JSON.
func docArguments(doc json.RawMessage) (map[string]json.RawMessage, error) {
	var d struct {
		Arguments map[string]json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("read action document: %w", err)
	}
	if d.Arguments == nil {
		d.Arguments = map[string]json.RawMessage{}
	}
	return d.Arguments, nil
}

// intArgument reads args[name] as an integer (no fraction, within int64).
func intArgument(args map[string]json.RawMessage, name string) (int64, bool) {
	raw, ok := args[name]
	if !ok {
		return 0, false
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// CheckStandingUse decides whether standing approval s may admit the call req at req.Now. It
// returns "" and the amount the call spends of s's total when it may, else the reason (the
// approval refusal reasons unknown, mismatch, expired, plus revoked and exhausted) and why.
func CheckStandingUse(s *Standing, req *ReserveRequest) (reason, detail string, amount int64) {
	if s == nil {
		return "unknown", "no such standing approval", 0
	}
	// A call it was never for is told so first, as CheckApproval tells a mismatch first.
	if why := outOfBounds(s, req); why != "" {
		return "mismatch", why, 0
	}
	switch StandingState(s, req.Now) {
	case StandingRevoked:
		return "revoked", "revoked by " + safetext.Quote(safetext.Valid(s.RevokedBy)), 0
	case StandingExpired:
		return "expired", "expired at " + s.ExpiresAt.UTC().Format(time.RFC3339Nano), 0
	case StandingExhausted:
		return "exhausted", fmt.Sprintf("all %d uses spent", s.Terms.Uses), 0
	}
	if tt := s.Terms.Total; tt != nil {
		args, _ := docArguments(req.Document) // read by outOfBounds
		amount, _ = intArgument(args, tt.Argument)
		if s.Spent+amount > tt.Limit {
			return "exhausted", fmt.Sprintf("%s %d would bring the total to %d, over its limit %d",
				safetext.Quote(tt.Argument), amount, s.Spent+amount, tt.Limit), 0
		}
	}
	return "", "", amount
}

// outOfBounds says how the call's action document leaves s's bounds ("" when it does not):
// another action, principal, resource or environment, or an argument outside Terms.
func outOfBounds(s *Standing, req *ReserveRequest) string {
	var base, call map[string]json.RawMessage
	if json.Unmarshal(s.Action, &base) != nil {
		return "the standing approval's action cannot be read"
	}
	if len(req.Document) == 0 || json.Unmarshal(req.Document, &call) != nil {
		return "the call's action document cannot be read"
	}
	for _, field := range []string{"schema", "name", "principal", "resource", "environment"} {
		if field == "resource" && req.ResourceRendered {
			continue // it follows the arguments, checked below
		}
		if !bytes.Equal(canonOf(base[field]), canonOf(call[field])) {
			return fmt.Sprintf("its %s is not the standing approval's", field)
		}
	}
	if req.Action != s.ActionName {
		return "its action is not the standing approval's"
	}
	bargs, _ := docArguments(s.Action)
	cargs, err := docArguments(req.Document)
	if err != nil {
		return "the call's arguments cannot be read"
	}
	names := make([]string, 0, len(bargs)+len(cargs))
	for k := range bargs {
		names = append(names, k)
	}
	for k := range cargs {
		if _, ok := bargs[k]; !ok {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		if slices.Contains(s.Terms.Vary, name) {
			if _, ok := cargs[name]; !ok {
				return fmt.Sprintf("argument %s is not passed", safetext.Quote(name))
			}
			continue
		}
		if ceiling, ok := s.Terms.Max[name]; ok {
			v, ok := intArgument(cargs, name)
			switch {
			case !ok:
				return fmt.Sprintf("argument %s is not an integer", safetext.Quote(name))
			case v < 0 || v > ceiling:
				return fmt.Sprintf("argument %s is %d, outside 0 to %d", safetext.Quote(name), v, ceiling)
			}
			continue
		}
		if !bytes.Equal(canonOf(bargs[name]), canonOf(cargs[name])) {
			return fmt.Sprintf("argument %s differs from the request's", safetext.Quote(name))
		}
	}
	return ""
}

// canonOf is raw in canonical form; nil for nothing, null or what does not parse.
func canonOf(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return nil
	}
	_, b, err := canon.ParseCanonical(raw)
	if err != nil || string(b) == "null" {
		return nil
	}
	return b
}

// planStandingGrant is the standing approval the grant that decided request next creates: the
// terms every counted grant stated. It returns nil when the deciding grant stated none.
func planStandingGrant(req *AnswerRequest, next *Approval) *Standing {
	if req.Standing == nil || next.Status != Granted {
		return nil
	}
	s := &Standing{ID: req.StandingID, Status: StandingActive, From: next.ID, ActionHash: next.ActionHash,
		Action: next.Action, ActionName: next.ActionName, Agent: next.Agent, User: next.User, Terms: *req.Standing,
		CreatedAt: req.Now, ExpiresAt: req.Now.Add(time.Duration(req.Standing.For))}
	for _, a := range next.Answers {
		if a.Grant {
			s.GrantedBy = append(s.GrantedBy, a.Name)
		}
	}
	return s
}

// checkStandingAnswer refuses a grant whose terms differ from an earlier grant's of the same
// request: every grant that counts towards a standing approval agreed to its terms. A plain
// grant after standing ones narrows the request to a single approval, and is accepted.
func checkStandingAnswer(req *AnswerRequest, a *Approval) error {
	if req.Standing == nil || !req.Grant {
		return nil
	}
	if req.StandingID == "" || !IsStandingID(req.StandingID) {
		return &StandingError{ID: a.ID, Reason: ReasonInvalidStanding, Detail: "a standing grant needs a standing id (" + StandingPrefix + "…)"}
	}
	for _, prev := range a.Answers {
		if prev.Grant && !sameTerms(prev.Standing, req.Standing) {
			return &StandingError{ID: a.ID, Reason: ReasonStandingTermsDiffer,
				Detail: fmt.Sprintf("%s granted the request with other standing terms, or none", safetext.Quote(prev.Name))}
		}
	}
	return nil
}

// PlanRevokeStanding decides a revocation of s.
func PlanRevokeStanding(req *RevokeStandingRequest, s *Standing) (*StandingWrite, []Event, error) {
	if s == nil {
		return nil, nil, fmt.Errorf("standing approval %s: %w", safetext.Quote(req.ID), ErrNotFound)
	}
	by, err := NormalizeApprover(req.By)
	if err != nil {
		return nil, nil, &StandingError{ID: s.ID, Reason: "invalid_approver", Detail: err.Error()}
	}
	if err := CheckNote(req.Note); err != nil {
		return nil, nil, &StandingError{ID: s.ID, Reason: "invalid_note", Detail: err.Error()}
	}
	if s.Status == StandingRevoked {
		return nil, nil, &StandingError{ID: s.ID, Reason: StandingRevoked, Detail: "already revoked by " + safetext.Quote(s.RevokedBy)}
	}
	next := *s
	next.Status, next.RevokedBy, next.RevokedAt, next.Note = StandingRevoked, by, req.Now, req.Note
	payload := map[string]any{"by": by, "standing": s.ID, "uses": int64(s.Uses)}
	if req.Note != "" {
		payload["note"] = req.Note
	}
	ev := NewEvent(EventStandingRevoked, req.Now, "", "", s.From, payload)
	return &StandingWrite{Prev: s, Next: next}, []Event{ev}, nil
}

// StandingApprover is who granted s, as a receipt's approver names them: the approvers of its
// grants, comma-separated.
func StandingApprover(s *Standing) string {
	return safetext.Valid(strings.Join(s.GrantedBy, ", "))
}
