package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

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

	// Where the request was wrong: the JSON member (field) or the JSON pointer into arguments.
	Field   string `json:"field,omitempty"`
	Pointer string `json:"pointer,omitempty"`

	ActionID   string          `json:"action_id,omitempty"`
	ApprovalID string          `json:"approval_id,omitempty"`
	EffectKey  string          `json:"effect_key,omitempty"`
	State      string          `json:"state,omitempty"`
	Attempt    int             `json:"attempt,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"` // the stored result of a committed effect
	Dimension  string          `json:"dimension,omitempty"`
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

// problemOf maps an error of the latch API to its problem. An error it does not know is a 500
// that names nothing internal beyond the message.
func problemOf(err error) *Problem {
	var (
		pr *Problem
		de *latch.DeniedError
		ae *latch.AuthorityError
		me *latch.ApprovalMismatchError
		ee *latch.EffectError
		ie *latch.InvalidArgumentError
		oe *latch.OutcomeError
	)
	msg := strings.TrimPrefix(err.Error(), "latch: ")
	switch {
	case errors.As(err, &pr):
		return pr
	case errors.As(err, &oe):
		status := map[string]int{"no_such_action": http.StatusNotFound, "not_holder": http.StatusForbidden}[oe.Reason]
		if status == 0 {
			status = http.StatusConflict
		}
		p := problem(status, oe.Reason, msg)
		p.ActionID = oe.ActionID
		return p
	case errors.As(err, &de):
		reason := de.Reason
		if strings.HasPrefix(reason, "rule[") || reason == "decision" {
			// The rule that denied is data, not a type: the type stays one word.
			p := problem(http.StatusForbidden, "denied", msg)
			p.Reason = de.Reason
			return p
		}
		if de.Argument != "" {
			// missing_argument, invalid_arguments: denied by the policy, and the pointer says
			// which value of the request to fix.
			p := problem(http.StatusUnprocessableEntity, reason, msg)
			p.Pointer = de.Pointer
			return p
		}
		return problem(http.StatusForbidden, reason, msg)
	case errors.As(err, &ae):
		p := problem(http.StatusForbidden, ae.Reason, msg)
		p.Dimension = ae.Dimension
		return p
	case errors.As(err, &me):
		p := problem(http.StatusForbidden, "approval_"+me.Reason, msg)
		p.Reason, p.ApprovalID = me.Reason, me.ApprovalID
		return p
	case errors.As(err, &ee):
		p := problem(http.StatusConflict, ee.Reason, msg)
		p.EffectKey, p.State, p.Attempt, p.Result = ee.Key, string(ee.State), ee.Attempt, ee.Result
		p.Reason = ee.Reason
		return p
	case errors.As(err, &ie):
		p := problem(http.StatusUnprocessableEntity, ie.Reason, msg)
		p.Pointer = ie.Pointer
		return p
	case errors.Is(err, latch.ErrIdentity):
		return problem(http.StatusUnauthorized, "invalid_token", msg)
	}
	return problem(http.StatusInternalServerError, "internal", msg)
}
