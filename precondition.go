package latch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// PreconditionFunc is a precondition provider (docs/governance.md#precondition-fingerprints): it
// returns the current state of the call's target — an invoice's status and amount, a
// deployment's revision — as any value that encodes as JSON. The guard keeps only its
// fingerprint. A nil (or JSON null) state says the target has no state to read, which is a
// state of its own: a fingerprint captured on one side only refuses the call
// (precondition_missing).
//
// It is asked when an approval request is stored, and again when the approval is presented,
// right before the reservation (after the scope check): a state whose fingerprint differs from
// the captured one refuses the call precondition_changed, and the approval stays granted, to be
// spent once the state is back to what the approver saw. With RecheckAlways a call the policy
// allows asks it too. ctx carries the deadline of the precondition timeout; a provider that
// returns an error, panics, outlives the deadline or returns a state without a canonical JSON
// form refuses the call (precondition_unavailable). Nothing is reserved on any refusal. It may
// be called concurrently.
type PreconditionFunc func(ctx context.Context, req PreconditionRequest) (any, error)

// PreconditionRequest is what a precondition provider is asked about: the call's action, its
// canonical arguments, resource, environment and principal.
type PreconditionRequest struct {
	Action      string
	Arguments   json.RawMessage
	Resource    string
	Environment string
	Principal   Principal
}

// Recheck says when a call asks its precondition provider: RecheckOnApproval (the default) or
// RecheckAlways.
type Recheck = policy.Recheck

// Recheck values.
const (
	// RecheckOnApproval: the state is read when an approval request is stored and when the
	// approval is presented; calls the policy allows do not ask.
	RecheckOnApproval = policy.RecheckOnApproval
	// RecheckAlways: as RecheckOnApproval, and a call the policy allows reads the state right
	// before its reservation: it is refused precondition_unavailable when the state cannot be
	// read, and its fingerprint is recorded in the call's policy_evaluated event.
	RecheckAlways = policy.RecheckAlways
)

// DefaultPreconditionTimeout bounds a precondition provider's answer when neither the call nor
// the policy says.
const DefaultPreconditionTimeout = policy.DefaultScopeTimeout

// maxPreconditionAnswer bounds the answer of a precondition service, in bytes.
const maxPreconditionAnswer = 64 << 10

// preconditionSchema is the domain tag of a fingerprint: a state hashed for another purpose
// never compares equal to one.
const preconditionSchema = "latch.precondition/v1"

// ErrPrecondition is matched by a call refused on its precondition (*PreconditionError); it also
// matches ErrDenied.
var ErrPrecondition = errors.New("latch: precondition refused")

// PreconditionError refuses a call on the state of its target. Reason is precondition_changed
// (the state's fingerprint differs from the one captured with the approval request),
// precondition_missing (a fingerprint on one side only) or precondition_unavailable (the
// provider failed, took too long or returned a state with no canonical form; Err says how).
// Captured and Current are the fingerprints ("" for none), CapturedAt when the captured state
// was read. Nothing was reserved or spent, the presented approval stays as it was, and the
// refusal's receipt is written with the fingerprints only. It matches ErrPrecondition and
// ErrDenied.
type PreconditionError struct {
	Action     string
	ApprovalID string // the presented approval, if any
	Reason     string
	Captured   string
	CapturedAt time.Time
	Current    string
	Err        error  // precondition_unavailable: what went wrong
	Detail     string // when set, the message (a refusal rebuilt from its wire form)
}

func (e *PreconditionError) Error() string {
	if e.Detail != "" {
		return "latch: " + e.Detail
	}
	s := fmt.Sprintf("latch: %s denied: %s", safetext.Quote(e.Action), e.Reason)
	none := func(h string) string {
		if h == "" {
			return "none"
		}
		return h
	}
	switch Reason(e.Reason) {
	case ReasonPreconditionUnavailable:
		if e.Err != nil {
			s += ": " + validText(bare(e.Err))
		}
	case ReasonPreconditionChanged, ReasonPreconditionMissing:
		s += fmt.Sprintf(": the state of the target is %s, approval %s was requested on %s (read %s)",
			none(e.Current), safetext.Quote(e.ApprovalID), none(e.Captured), e.CapturedAt.UTC().Format(time.RFC3339))
	}
	if e.ApprovalID != "" {
		s += "; the approval was not spent"
	}
	return s
}

// Is matches ErrPrecondition and ErrDenied.
func (e *PreconditionError) Is(target error) bool {
	return target == ErrPrecondition || target == ErrDenied
}

// isPreconditionReason reports whether r is one of the precondition refusals.
func isPreconditionReason(r Reason) bool {
	return r == ReasonPreconditionChanged || r == ReasonPreconditionMissing || r == ReasonPreconditionUnavailable
}

// PreconditionFingerprint is the fingerprint a state is kept and compared by: "sha256:" and the
// hex SHA-256 of the canonical JSON {"schema":"latch.precondition/v1","state":…}. It is "" for
// a nil state (or one that encodes as null), and an error for a state with no canonical JSON
// form.
func PreconditionFingerprint(state any) (string, error) {
	if state == nil {
		return "", nil
	}
	raw, ok := state.(json.RawMessage)
	if !ok {
		b, err := json.Marshal(state)
		if err != nil {
			return "", fmt.Errorf("the state does not encode as JSON: %w", err)
		}
		raw = b
	}
	c, err := canon.Canonicalize(raw)
	if err != nil {
		return "", fmt.Errorf("the state has no canonical JSON form: %w", err)
	}
	if string(c) == "null" {
		return "", nil
	}
	doc, err := canon.Marshal(map[string]any{"schema": preconditionSchema, "state": json.RawMessage(c)})
	if err != nil {
		return "", fmt.Errorf("the state has no canonical JSON form: %w", err)
	}
	return canon.Sum(doc), nil
}

// preconditionFor returns the call's precondition provider, when it reads the state and how
// long it may take: Options.Precondition, else the action's precondition entry in the policy;
// nil when neither applies. A recheck or timeout the options leave zero is the policy's, else
// the default.
func (g *Guard) preconditionFor(pr *prepared) (PreconditionFunc, Recheck, time.Duration) {
	var entry *policy.Precondition
	if pr.action != nil {
		entry = pr.action.Precondition
	}
	fn := pr.opts.Precondition
	if fn == nil && entry != nil {
		url := entry.URL
		fn = func(ctx context.Context, req PreconditionRequest) (any, error) { return askStateService(ctx, url, req) }
	}
	if fn == nil {
		return nil, "", 0
	}
	recheck, timeout := pr.opts.Recheck, pr.opts.PreconditionTimeout
	if recheck == "" && entry != nil {
		recheck = entry.Recheck
	}
	if timeout <= 0 && entry != nil {
		timeout = entry.Timeout
	}
	if recheck == "" {
		recheck = RecheckOnApproval
	}
	if timeout <= 0 {
		timeout = DefaultPreconditionTimeout
	}
	return fn, recheck, timeout
}

// readPrecondition asks fn for the state of pr's target under a deadline of timeout, on its own
// goroutine (as a scope provider is asked: one that ignores its context or panics cannot hold
// or crash the call), and returns its fingerprint.
func readPrecondition(ctx context.Context, fn PreconditionFunc, pr *prepared, timeout time.Duration) (string, error) {
	req := PreconditionRequest{Action: pr.call.Action, Arguments: json.RawMessage(pr.canonArgs), Resource: pr.resource,
		Environment: pr.env, Principal: pr.principal}
	state, err := askBounded(ctx, "precondition provider", timeout, func(ctx context.Context) (any, error) { return fn(ctx, req) })
	if err != nil {
		return "", err
	}
	h, err := PreconditionFingerprint(state)
	if err != nil {
		return "", fmt.Errorf("the precondition provider returned a bad state: %w", err)
	}
	return h, nil
}

// capturePrecondition reads the state of pr's target for the approval request about to be
// stored, when a precondition provider applies; a failure is the call's refusal. It sets
// pr.precondition and pr.preconditionAt.
func (g *Guard) capturePrecondition(ctx context.Context, pr *prepared) error {
	fn, _, timeout := g.preconditionFor(pr)
	if fn == nil {
		return nil
	}
	at := g.cfg.Now()
	h, err := readPrecondition(ctx, fn, pr, timeout)
	if err != nil {
		return &PreconditionError{Action: pr.call.Action, Reason: string(ReasonPreconditionUnavailable), Err: err}
	}
	pr.precondition, pr.preconditionAt, pr.preconditionRead = h, at, true
	return nil
}

// recheckPrecondition is the last check before a reservation. For a call presenting an
// approval it reads the state again and compares its fingerprint with the one captured with the
// request; an approval the reservation would refuse anyway (unknown, for another action, not
// granted, expired) is left to it, and the provider is not asked. For a call the policy allows
// under RecheckAlways it reads the state and records its fingerprint. It returns the refusal, a
// *PreconditionError, or nil.
func (g *Guard) recheckPrecondition(ctx context.Context, pr *prepared, approvalID string) error {
	fn, recheck, timeout := g.preconditionFor(pr)
	if approvalID == "" {
		if fn == nil || recheck != RecheckAlways || pr.eval.Decision != policy.Allow {
			return nil
		}
		h, err := readPrecondition(ctx, fn, pr, timeout)
		if err != nil {
			return &PreconditionError{Action: pr.call.Action, Reason: string(ReasonPreconditionUnavailable), Err: err}
		}
		pr.precondition, pr.preconditionRead = h, true
		return nil
	}
	if store.IsStandingID(approvalID) {
		if fn == nil {
			return nil
		}
		// A standing approval is bound to no state of the target: nobody saw the state this
		// call would act on.
		return &PreconditionError{Action: pr.call.Action, ApprovalID: approvalID, Reason: string(ReasonPreconditionMissing),
			Detail: fmt.Sprintf("%s denied: %s: standing approval %s is bound to no state of the target, and this call's action reads one",
				safetext.Quote(pr.call.Action), ReasonPreconditionMissing, safetext.Quote(approvalID))}
	}
	a, err := g.store.Approval(ctx, approvalID)
	if err != nil || a.Status != store.Granted || a.ActionHash != pr.hash || !g.cfg.Now().Before(a.ExpiresAt) {
		return nil // the reservation refuses it, with its own reason
	}
	pr.captured, pr.capturedAt = a.PreconditionHash, a.PreconditionAt
	refuse := func(reason Reason, err error) error {
		return &PreconditionError{Action: pr.call.Action, ApprovalID: approvalID, Reason: string(reason),
			Captured: a.PreconditionHash, CapturedAt: a.PreconditionAt, Current: pr.precondition, Err: err}
	}
	if fn != nil {
		h, err := readPrecondition(ctx, fn, pr, timeout)
		if err != nil {
			return refuse(ReasonPreconditionUnavailable, err)
		}
		pr.precondition, pr.preconditionRead = h, true
	}
	switch {
	case pr.precondition == a.PreconditionHash:
		return nil
	case pr.precondition == "" || a.PreconditionHash == "":
		return refuse(ReasonPreconditionMissing, nil)
	}
	return refuse(ReasonPreconditionChanged, nil)
}

// preconditionDenied is the evaluation a call refused on its precondition is recorded with.
func preconditionDenied(pr *prepared, err error) policy.Evaluation {
	reason := string(ReasonPreconditionUnavailable)
	var pe *PreconditionError
	if errors.As(err, &pe) {
		reason = pe.Reason
	}
	return policy.Evaluation{Decision: policy.Deny, Reason: reason, Trace: pr.eval.Trace, Arguments: pr.eval.Arguments}
}

// stateServiceRequest is the body a precondition service is sent.
type stateServiceRequest struct {
	Action      string          `json:"action"`
	Arguments   json.RawMessage `json:"arguments"`
	Resource    *string         `json:"resource"`
	Environment string          `json:"environment"`
	Principal   struct {
		Agent string  `json:"agent"`
		User  *string `json:"user"`
	} `json:"principal"`
}

// HTTPPrecondition returns the precondition provider that asks the service at url (https, or
// http to a loopback address), as an action's `precondition: {url: …}` does: it POSTs
//
//	{"action": …, "arguments": {…}, "resource": … or null, "environment": …,
//	 "principal": {"agent": …, "user": … or null}}
//
// and takes a 2xx answer of at most 64 KiB, strict JSON, as the state (null: no state). Any
// other status, a larger answer or one that is not JSON latch accepts is an error, and the call
// is refused precondition_unavailable. It follows no redirect.
func HTTPPrecondition(url string) (PreconditionFunc, error) {
	if err := policy.CheckScopeURL(url); err != nil {
		return nil, fmt.Errorf("latch: precondition service %s: %w", safetext.Quote(url), err)
	}
	return func(ctx context.Context, req PreconditionRequest) (any, error) {
		return askStateService(ctx, url, req)
	}, nil
}

// askStateService is one question to a precondition service. Its errors do not name the URL:
// they reach the refused call's receipt and the agent.
func askStateService(ctx context.Context, url string, req PreconditionRequest) (any, error) {
	body := stateServiceRequest{Action: req.Action, Arguments: req.Arguments, Environment: req.Environment}
	if len(body.Arguments) == 0 {
		body.Arguments = json.RawMessage("{}")
	}
	if req.Resource != "" {
		body.Resource = &req.Resource
	}
	body.Principal.Agent = req.Principal.Agent
	if req.Principal.User != "" {
		body.Principal.User = &req.Principal.User
	}
	raw, err := postService(ctx, "precondition service", url, body, maxPreconditionAnswer)
	if err != nil {
		return nil, err
	}
	if _, err := canon.Parse(raw); err != nil {
		return nil, fmt.Errorf("precondition service answer is not JSON latch accepts: %w", err)
	}
	return json.RawMessage(raw), nil
}
