package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/latchkit/latch/internal/safetext"
)

// How an approver was authenticated (Approver.Method; docs/approvals.md#verified-answers).
const (
	// MethodCLI: named by someone with access to the store — `latch approve --as NAME`, or a
	// program calling Guard.Approve. Never verified.
	MethodCLI = "cli"
	// MethodToken: an approver token of `latch serve` (latch token create --approver NAME).
	MethodToken = "token"
	// MethodJWT: a JWT verified by the identity package.
	MethodJWT = "jwt"
	// MethodSession: a login session of the console.
	MethodSession = "session"
	// MethodProxy: a header set by a trusted authenticating proxy, accepted only from its address.
	MethodProxy = "proxy"
	// MethodSlack: a button of a Slack message, on a request whose signature the interactivity
	// endpoint of `latch serve` verified, by the approver its Slack user is mapped to.
	MethodSlack = "slack"
	// MethodPassword: a local approver account's password, checked by a CLI command that only
	// a verified person may run (latch break-glass). Not a way of answering approvals, so not
	// one of Methods.
	MethodPassword = "password"
)

// Methods are the authentication methods, in the order messages list them.
var Methods = []string{MethodCLI, MethodToken, MethodJWT, MethodSession, MethodProxy, MethodSlack}

// Approver is a person answering an approval request, and how latch knows who they are.
type Approver struct {
	Name string // NormalizeApprover'd
	// Method is how the approver was authenticated: one of Methods.
	Method string
	// Verified is set when latch itself authenticated the approver (a session, a token, a JWT,
	// a trusted proxy); a name given on the command line is not.
	Verified bool
}

// String is the approver as evidence shows it: method:name (cli:alice, session:bob).
func (a Approver) String() string {
	m := a.Method
	if m == "" {
		m = MethodCLI
	}
	return m + ":" + a.Name
}

// Answer is one person's answer to an approval request, as stored.
type Answer struct {
	Approver
	Grant bool
	Note  string
	At    time.Time
	// Required is how many distinct grants the request needed when this answer was given.
	Required int
	// Standing is the terms of the standing approval this grant asked for; nil for a plain grant.
	Standing *StandingTerms
}

// Answer reasons besides those of AnswerError's own list.
const (
	// ReasonNotEntitled: the approver is not a member of a role the action's approvers name.
	ReasonNotEntitled = "approver_not_entitled"
	// ReasonNotVerified: the action's approvers require verified answers and this one is not.
	ReasonNotVerified = "approver_not_verified"
	// ReasonAlreadyAnswered: this person has already answered the request (under any spelling,
	// method, session or token).
	ReasonAlreadyAnswered = "already_answered"
	// ReasonSelfApproval: the approver is the requesting agent or user.
	ReasonSelfApproval = "self_approval"
	// ReasonSelfResolution: the resolver is the agent or user of the attempt that holds the
	// effect record.
	ReasonSelfResolution = "self_resolution"
)

// ResolveError is returned when a person may not resolve an effect. Reason is self_resolution
// (they are the agent or the user of the attempt that holds it), approver_not_entitled (the
// action's approvers name roles and they are a member of none) or holder_unknown (the events
// naming the attempt's principal are gone, so who made it cannot be checked). Nothing is
// written.
type ResolveError struct {
	Key     string
	Reason  string
	Attempt int // the attempt that holds the record
}

func (e *ResolveError) Error() string {
	why := ""
	switch e.Reason {
	case ReasonSelfResolution:
		why = " (the resolver is the attempt's agent or user: nobody resolves their own attempt)"
	case ReasonNotEntitled:
		why = " (the action's approvers name roles the resolver is not a member of)"
	case ReasonHolderUnknown:
		why = " (the events naming the attempt's principal are gone: who made it cannot be checked)"
	}
	return fmt.Sprintf("resolve %s: attempt %d: %s%s", safetext.Quote(e.Key), e.Attempt, e.Reason, why)
}

// Is matches ErrResolveRefused.
func (e *ResolveError) Is(target error) bool { return target == ErrResolveRefused }

// ReasonHolderUnknown: the principal of the attempt holding an effect record cannot be read.
const ReasonHolderUnknown = "holder_unknown"

// Grants counts the distinct people whose grants in answers count: each person once, however
// many answers they gave; when verifiedOnly, only verified answers.
func Grants(answers []Answer, verifiedOnly bool) int {
	seen := map[string]bool{}
	for _, a := range answers {
		if !a.Grant || verifiedOnly && !a.Verified {
			continue
		}
		seen[nameKey(a.Name)] = true
	}
	return len(seen)
}

// RoleLookup is implemented by a store that knows roles of approvers beyond the policy's lists
// (the local approver accounts of the console, created with `latch approver add NAME --role R`).
// A role counts only when the policy defines it and the action's approvers name it
// (docs/approvals.md#who-may-approve).
type RoleLookup interface {
	// ApproverRoles returns the roles the store gives the approver named name, compared as
	// SameName compares names; none (and no error) when it knows no such approver.
	ApproverRoles(ctx context.Context, name string) ([]string, error)
}

// checkMethod refuses a method that is not one of Methods, and a verified CLI answer.
func (r *AnswerRequest) checkMethod() error {
	switch r.Method {
	case "", MethodCLI:
		if r.Verified {
			return &InputError{Field: "method", Value: r.Method, Reason: "is cli, which is never verified"}
		}
	case MethodToken, MethodJWT, MethodSession, MethodProxy, MethodSlack:
	default:
		return &InputError{Field: "method", Value: r.Method, Reason: "is not one of " + strings.Join(Methods, ", ")}
	}
	if r.Required < 0 {
		return &InputError{Field: "required", Value: fmt.Sprint(r.Required), Reason: "is negative"}
	}
	return nil
}

// planAnswer decides one answer to a pending, unexpired request by approver, which is neither
// the requester nor someone who has answered already: it records the answer and decides the
// request when a deny or the last required grant arrives.
func planAnswer(req *AnswerRequest, a *Approval, approver string) (*ApprovalWrite, []Event, error) {
	refuse := func(reason string) error { return &AnswerError{ID: a.ID, Reason: reason, Approval: a} }
	if req.RequireVerified && !req.Verified {
		return nil, nil, refuse(ReasonNotVerified)
	}
	key := nameKey(approver)
	for _, prev := range a.Answers {
		if nameKey(prev.Name) == key {
			return nil, nil, refuse(ReasonAlreadyAnswered)
		}
	}
	if err := checkStandingAnswer(req, a); err != nil {
		return nil, nil, err
	}
	method := req.Method
	if method == "" {
		method = MethodCLI
	}
	required := max(req.Required, 1)
	ans := Answer{Approver: Approver{Name: approver, Method: method, Verified: req.Verified}, Grant: req.Grant,
		Note: req.Note, At: req.Now, Required: required}
	if req.Grant {
		ans.Standing = req.Standing
	}
	next := *a
	var edit map[string]any
	if req.Edit != nil {
		var reason string
		var err error
		if edit, reason, err = planEdit(req, a, &next); err != nil {
			return nil, nil, err
		} else if reason != "" {
			return nil, nil, refuse(reason)
		}
	}
	next.Answers = append(append([]Answer(nil), a.Answers...), ans)
	next.Required = required
	grants := Grants(next.Answers, req.RequireVerified)
	kind := EventApprovalAnswered
	switch {
	case !req.Grant:
		next.Status, kind = Denied, EventApprovalDenied
	case grants >= required:
		next.Status, kind = Granted, EventApprovalGranted
	}
	if next.Status != Pending {
		next.Approver = approver
		next.AnsweredAt = req.Now
		next.Note = req.Note
	}
	// The payload of a one-grant answer from the CLI is what it was before methods and M-of-N
	// existed; the rest is said only when it says something.
	payload := map[string]any{"approver": approver}
	if req.Note != "" {
		payload["note"] = req.Note
	}
	if method != MethodCLI {
		payload["method"], payload["verified"] = method, req.Verified
	}
	if required > 1 {
		payload["grants"], payload["required"] = int64(grants), int64(required)
	}
	if edit != nil {
		payload["edit"] = edit // who edited what: the request's own events keep it (EditsOf)
	}
	events := []Event{NewEvent(kind, req.Now, "", "", a.ID, payload)}
	w := &ApprovalWrite{PrevStatus: Pending, Next: next, Answer: &ans}
	if st := planStandingGrant(req, &next); st != nil {
		w.Standing = st
		events = append(events, NewEvent(EventStandingGranted, req.Now, "", "", a.ID, map[string]any{
			"standing": st.ID, "uses": int64(st.Terms.Uses), "expires_at": st.ExpiresAt.UTC().Format(time.RFC3339Nano),
			"granted_by": st.GrantedBy}))
	}
	return w, events, nil
}

// Progress says how far a request is: "1 of 2" grants, or its status once decided.
func Progress(a *Approval, required int) string {
	required = max(required, a.Required, 1)
	if a.Status == Pending {
		return fmt.Sprintf("%d of %d", Grants(a.Answers, false), required)
	}
	return string(a.Status)
}
