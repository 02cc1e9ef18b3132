package server

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/latchkit/latch"
)

// ProblemTypePrefix begins the type of every problem document: the rest is the reason word
// (urn:latch:problem:invalid_token). Types are stable: a client may branch on them.
const ProblemTypePrefix = "urn:latch:problem:"

// Problem is an error answer (RFC 9457). Reason is the snake_case word the Go API uses for the
// same refusal; the other members are set when they apply.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Reason string `json:"reason"`
	// Kind is the class of a refusal of the pipeline (denied, committed, in_progress, …): what
	// the caller has to do about it. Absent on problems with the request or its credential.
	Kind string `json:"kind,omitempty"`
	// Rule is the policy rule that denied the call (rule[N], or decision for a bare
	// decision: deny); reason is denied.
	Rule string `json:"rule,omitempty"`

	// Where the request was wrong: the JSON member (field) or the JSON pointer into arguments.
	Field    string `json:"field,omitempty"`
	Pointer  string `json:"pointer,omitempty"`
	Argument string `json:"argument,omitempty"` // the argument at fault (missing_argument, invalid_arguments)

	ActionID   string          `json:"action_id,omitempty"`
	ApprovalID string          `json:"approval_id,omitempty"`
	ActionHash string          `json:"action_hash,omitempty"` // approval_required: the hash a person approves
	EffectKey  string          `json:"effect_key,omitempty"`
	State      string          `json:"state,omitempty"`
	Attempt    int             `json:"attempt,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"` // the stored result of a committed effect
	Dimension  string          `json:"dimension,omitempty"`
	// Budget, Metric and Window name the budget of a budget refusal (budget_exhausted,
	// budget_metric_missing, budget_metric_invalid, budget_needs_effect_key): its id, what it
	// meters, and its window in ISO 8601. What is left of it is never said.
	Budget string `json:"budget,omitempty"`
	Metric string `json:"metric,omitempty"`
	Window string `json:"window,omitempty"`
	// ApprovedArguments are, on approval_mismatch, the arguments the presented approval binds
	// because an approver edited them (docs/approvals.md#approve-with-edits): begin the call
	// with these and the same approval_id.
	ApprovedArguments json.RawMessage `json:"approved_arguments,omitempty"`
}

func (p *Problem) Error() string { return p.Reason + ": " + p.Detail }

// problem builds a problem whose type is the reason.
func problem(status int, reason, detail string) *Problem {
	return &Problem{Type: ProblemTypePrefix + reason, Title: http.StatusText(status), Status: status, Reason: reason, Detail: detail}
}

// writeProblem writes p as application/problem+json.
func writeProblem(w http.ResponseWriter, p *Problem) {
	if p.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="latch"`)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// refusalStatus is the HTTP status of each refusal kind: the HTTP API's one table of the
// refusal vocabulary (latch.RefusalOf). A problem's type is its reason word.
var refusalStatus = map[latch.RefusalKind]int{
	latch.KindDenied:           http.StatusForbidden,
	latch.KindInvalidArgument:  http.StatusUnprocessableEntity,
	latch.KindApprovalRequired: http.StatusForbidden,
	latch.KindApprovalRefused:  http.StatusForbidden,
	latch.KindCommitted:        http.StatusConflict,
	latch.KindInProgress:       http.StatusConflict,
	latch.KindAmbiguous:        http.StatusConflict,
	latch.KindOutcomeUnknown:   http.StatusConflict,
	latch.KindNotExecuted:      http.StatusConflict,
	latch.KindExhausted:        http.StatusConflict,
	latch.KindKeyConflict:      http.StatusConflict,
	latch.KindAuthority:        http.StatusForbidden,
	latch.KindIdentity:         http.StatusUnauthorized,
	latch.KindOutcomeRefused:   http.StatusConflict,
	latch.KindRequestKey:       http.StatusUnprocessableEntity,
	latch.KindInternal:         http.StatusInternalServerError,
}

// outcomeRefusedStatus refines KindOutcomeRefused by reason: the call does not exist, or it is
// not the caller's.
var outcomeRefusedStatus = map[latch.Reason]int{
	latch.ReasonNoSuchAction: http.StatusNotFound,
	latch.ReasonNotHolder:    http.StatusForbidden,
}

// problemOf maps an error of the latch API to its problem, through latch.RefusalOf. An error
// it does not know is a 500 that names nothing internal beyond the message.
func problemOf(err error) *Problem {
	var pr *Problem
	if errors.As(err, &pr) {
		return pr
	}
	r := latch.RefusalOf(err)
	status := refusalStatus[r.Kind]
	if s, ok := outcomeRefusedStatus[r.Reason]; ok && r.Kind == latch.KindOutcomeRefused {
		status = s
	}
	p := problem(status, string(r.Reason), r.Detail)
	p.Kind, p.Rule = string(r.Kind), r.Rule
	p.Argument, p.Pointer, p.Dimension = r.Argument, r.Pointer, r.Dimension
	p.ActionID, p.ApprovalID, p.ActionHash = r.ActionID, r.ApprovalID, r.ActionHash
	p.EffectKey, p.State, p.Attempt, p.Result = r.EffectKey, string(r.State), r.Attempt, r.Result
	p.Budget, p.Metric, p.Window = r.Budget, r.Metric, r.Window
	var me *latch.ApprovalMismatchError
	if errors.As(err, &me) {
		p.ApprovedArguments = me.Arguments
	}
	return p
}
