package latch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/latchkit/latch/authority"
	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/policy"
)

// ScopeFunc is a scope provider (docs/scopes.md): it returns the resources the call's principal
// is assigned — a tenant's customers, a team's repositories — and the guard refuses a call whose
// resource is not among them (out_of_scope). It is asked on a call the policy allows, and on a
// call presenting an approval, strictly before anything is reserved; never on a denied call, by
// Evaluate, or on a call that only stores an approval request (the scope is checked when the
// approval is presented). ctx carries the deadline of the scope timeout; a provider that
// returns an error, panics, outlives the deadline or returns an invalid scope refuses the call
// (scope_unavailable). It may be called concurrently.
type ScopeFunc func(ctx context.Context, req ScopeRequest) (Scope, error)

// ScopeRequest is what a scope provider is asked about: the call's action, resource,
// environment, principal and task ("" when the call names none; Options.Task, WithTask).
// Resource is never "": a call without a resource is out of scope without asking.
type ScopeRequest struct {
	Action      string
	Resource    string
	Environment string
	Principal   Principal
	Task        string
}

// Scope is a principal's assigned scope: resource patterns, ':'-separated in the grammar of
// grant resources (docs/authority.md#patterns). A call is in scope when one of them matches its
// resource. An empty scope is valid and holds nothing.
type Scope struct {
	Resources []string
}

// Bounds of a scope and of the scope service's answer. A provider that returns more (or a
// pattern longer) is out of order, and the call is refused scope_unavailable.
const (
	DefaultScopeTimeout = policy.DefaultScopeTimeout
	MaxScopeResources   = 4096
	MaxScopePattern     = 4096     // bytes
	maxScopeAnswer      = 64 << 10 // bytes of the scope service's answer
)

// ErrScope is matched by a call refused on its scope (*ScopeError); it also matches ErrDenied.
var ErrScope = errors.New("latch: scope refused")

// ScopeError refuses a call on its scope. Reason is out_of_scope (the call's resource, or its
// lack of one, is not in the principal's scope) or scope_unavailable (the provider failed, took
// too long or returned an invalid scope; Err says how). Either way nothing was reserved and
// nothing ran, and the refusal's receipt is written. It matches ErrScope and ErrDenied; a
// provider's error is described, not unwrapped, since it is not this call's refusal.
type ScopeError struct {
	Action   string
	Reason   string
	Resource string
	Err      error  // scope_unavailable: what went wrong
	Detail   string // when set, the message (a refusal rebuilt from its wire form)
}

func (e *ScopeError) Error() string {
	if e.Detail != "" {
		return "latch: " + e.Detail
	}
	s := fmt.Sprintf("latch: %s denied: %s", safetext.Quote(e.Action), e.Reason)
	switch {
	case e.Err != nil:
		s += ": " + validText(bare(e.Err))
	case e.Reason == string(ReasonOutOfScope) && e.Resource == "":
		s += ": the call has no resource"
	case e.Reason == string(ReasonOutOfScope):
		s += ": resource " + safetext.Quote(e.Resource) + " is not in the principal's scope"
	}
	return s
}

// Is matches ErrScope and ErrDenied.
func (e *ScopeError) Is(target error) bool { return target == ErrScope || target == ErrDenied }

// guardScope is the guard's scope provider from its policy's scopes section.
type guardScope struct {
	fn      ScopeFunc
	timeout time.Duration
	actions []string // action-name patterns; nil: every action
}

func (s *guardScope) applies(action string) bool {
	if s.actions == nil {
		return true
	}
	for _, p := range s.actions {
		if authority.Match(p, action, '.') {
			return true
		}
	}
	return false
}

// policyScope is the provider of a policy's scopes section: its static map, or its scope
// service.
func policyScope(s *policy.Scopes) (*guardScope, error) {
	gs := &guardScope{timeout: s.Timeout, actions: s.Actions}
	if s.URL == "" {
		gs.fn = func(_ context.Context, req ScopeRequest) (Scope, error) {
			l, _ := s.ScopeFor(req.Principal.Agent, req.Principal.User)
			return Scope{Resources: l}, nil
		}
		return gs, nil
	}
	fn, err := HTTPScope(s.URL)
	if err != nil {
		return nil, err
	}
	gs.fn = fn
	return gs, nil
}

// scopeFor returns the call's scope provider and how long it may take: Options.Scope, else
// Config.Scope, else the policy's scopes section when it applies to the action; nil when none
// applies.
func (g *Guard) scopeFor(pr *prepared) (ScopeFunc, time.Duration) {
	var fn ScopeFunc
	var timeout time.Duration
	sc := g.scope.Load()
	switch {
	case pr.opts.Scope != nil:
		fn, timeout = pr.opts.Scope, g.cfg.ScopeTimeout
	case g.cfg.Scope != nil:
		fn, timeout = g.cfg.Scope, g.cfg.ScopeTimeout
	case sc != nil && sc.applies(pr.call.Action):
		fn, timeout = sc.fn, sc.timeout
	default:
		return nil, 0
	}
	if pr.opts.ScopeTimeout > 0 {
		timeout = pr.opts.ScopeTimeout
	}
	if timeout <= 0 {
		timeout = DefaultScopeTimeout
	}
	return fn, timeout
}

// checkScope asks the call's scope provider, when one applies, and refuses the call with a
// *ScopeError when its resource is not in the scope or the scope cannot be had. It sets
// pr.scopeHash when a scope was had.
func (g *Guard) checkScope(ctx context.Context, pr *prepared) error {
	fn, timeout := g.scopeFor(pr)
	if fn == nil {
		return nil
	}
	refuse := func(reason Reason, err error) error {
		return &ScopeError{Action: pr.call.Action, Reason: string(reason), Resource: pr.resource, Err: err}
	}
	if pr.resource == "" {
		return refuse(ReasonOutOfScope, nil) // nothing can match it: the provider is not asked
	}
	sc, err := askScope(ctx, fn, ScopeRequest{Action: pr.call.Action, Resource: pr.resource, Environment: pr.env,
		Principal: pr.principal, Task: pr.task}, timeout)
	if err != nil {
		return refuse(ReasonScopeUnavailable, err)
	}
	patterns, hash, err := sc.canonical()
	if err != nil {
		return refuse(ReasonScopeUnavailable, err)
	}
	pr.scopeHash = hash
	for _, p := range patterns {
		if authority.Match(p, pr.resource, ':') {
			return nil
		}
	}
	return refuse(ReasonOutOfScope, nil)
}

// scopeDenied is the evaluation a call refused on its scope is recorded with.
func scopeDenied(pr *prepared, err error) policy.Evaluation {
	var se *ScopeError
	reason := string(ReasonScopeUnavailable)
	if errors.As(err, &se) {
		reason = se.Reason
	}
	return policy.Evaluation{Decision: policy.Deny, Reason: reason, Trace: pr.eval.Trace, Arguments: pr.eval.Arguments}
}

// askScope runs fn under a deadline of timeout (askBounded). The provider does not see an
// approval the call presents: a protected call it makes is decided on its own.
func askScope(ctx context.Context, fn ScopeFunc, req ScopeRequest, timeout time.Duration) (Scope, error) {
	return askBounded(ctx, "scope provider", timeout, func(ctx context.Context) (Scope, error) { return fn(ctx, req) })
}

// askBounded asks a provider the call depends on (a scope, a precondition) for its answer under
// a deadline of timeout, on its own goroutine, so that a provider that ignores its context or
// panics cannot hold or crash the call. A provider that never returns keeps its goroutine; the
// call does not wait for it. It never sees the approval the call presents. Errors name what
// was asked (what) and never carry the provider's answer.
func askBounded[T any](ctx context.Context, what string, timeout time.Duration, ask func(context.Context) (T, error)) (T, error) {
	var zero T
	ctx, cancel := context.WithTimeout(withoutApproval(ctx), timeout)
	defer cancel()
	type answer struct {
		v   T
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				ch <- answer{err: fmt.Errorf("the %s panicked: %s", what, validText(fmt.Sprint(r)))}
			}
		}()
		v, err := ask(ctx)
		ch <- answer{v, err}
	}()
	select {
	case a := <-ch:
		if a.err != nil {
			return zero, fmt.Errorf("the %s failed: %w", what, a.err)
		}
		return a.v, nil
	case <-ctx.Done():
		if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			return zero, fmt.Errorf("the %s did not answer within %s", what, timeout)
		}
		return zero, fmt.Errorf("the call ended before the %s answered: %w", what, context.Cause(ctx))
	}
}

// canonical checks s and returns its patterns, sorted and without repeats, and its hash: the
// SHA-256 of the canonical JSON {"schema":"latch.scope/v1","resources":[…]}, whatever order
// or repeats the provider gave. A pattern is named by its index only: the scope's content is
// not written anywhere.
func (s Scope) canonical() ([]string, string, error) {
	if n := len(s.Resources); n > MaxScopeResources {
		return nil, "", fmt.Errorf("the scope provider returned %d resource patterns (at most %d)", n, MaxScopeResources)
	}
	patterns := slices.Clone(s.Resources)
	for i, p := range patterns {
		if len(p) > MaxScopePattern {
			return nil, "", fmt.Errorf("the scope provider returned resource pattern %d of %d bytes (at most %d)", i, len(p), MaxScopePattern)
		}
		if policy.CheckPattern(p, ':') != nil {
			// Why it is bad would quote the pattern, and a scope's content is written nowhere.
			return nil, "", fmt.Errorf("the scope provider returned a bad resource pattern (index %d)", i)
		}
	}
	slices.Sort(patterns)
	patterns = slices.Compact(patterns)
	l := make([]any, len(patterns))
	for i, p := range patterns {
		l[i] = p
	}
	b, err := canon.Marshal(map[string]any{"schema": "latch.scope/v1", "resources": l})
	if err != nil {
		return nil, "", fmt.Errorf("the scope provider returned a scope that has no canonical form: %w", err)
	}
	return patterns, canon.Sum(b), nil
}

// ScopeHash is the hash a receipt records for a scope (Receipt.ScopeHash): "sha256:" and the
// hex SHA-256 of the canonical JSON {"schema":"latch.scope/v1","resources":[…]} of its patterns,
// sorted and without repeats. It is an error for a scope a provider could not return (a bad
// pattern, too many).
func ScopeHash(s Scope) (string, error) {
	_, h, err := s.canonical()
	return h, err
}

// serviceClient asks scope and precondition services. It follows no redirect: the policy checked
// where the answer comes from (https, or http to loopback), and a redirect would take it
// elsewhere.
var serviceClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// postService POSTs body as JSON to the service (what names it in errors) at url and returns
// a 2xx answer of at most limit bytes. Its errors do not name the URL: they reach the refused
// call's receipt and the agent.
func postService(ctx context.Context, what, url string, body any, limit int) ([]byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("%s request: %w", what, err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s request: %w", what, err)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "application/json")
	resp, err := serviceClient.Do(hr)
	if err != nil {
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) && ue.Unwrap() != nil {
			err = ue.Unwrap() // the cause, without the URL
		}
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, int64(limit)))
		return nil, fmt.Errorf("%s answered %s", what, resp.Status)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%s answer: %w", what, err)
	}
	if len(raw) > limit {
		return nil, fmt.Errorf("%s answer is larger than %d KiB", what, limit>>10)
	}
	return raw, nil
}

// HTTPScope returns the scope provider that asks the scope service at url (https, or http to a
// loopback address; policy.CheckScopeURL), as the policy's `scopes: {url: …}` does: it POSTs
//
//	{"action": …, "resource": …, "environment": …, "principal": {"agent": …, "user": … or null},
//	 "task": … or null}
//
// and reads {"resources": [patterns]} from a 2xx answer of at most 64 KiB. Any other status, a
// larger answer, or an answer that is not such an object (strict JSON: no duplicate keys) is an
// error, and the call is refused scope_unavailable. It follows no redirect. The deadline is the
// call's scope timeout.
func HTTPScope(url string) (ScopeFunc, error) {
	if err := policy.CheckScopeURL(url); err != nil {
		return nil, fmt.Errorf("latch: scope service %s: %w", safetext.Quote(url), err)
	}
	return func(ctx context.Context, req ScopeRequest) (Scope, error) {
		return askScopeService(ctx, url, req)
	}, nil
}

// scopeServiceRequest is the body HTTPScope sends.
type scopeServiceRequest struct {
	Action      string `json:"action"`
	Resource    string `json:"resource"`
	Environment string `json:"environment"`
	Principal   struct {
		Agent string  `json:"agent"`
		User  *string `json:"user"`
	} `json:"principal"`
	Task *string `json:"task"`
}

// askScopeService is one question to a scope service. Its errors do not name the URL: they
// reach the refused call's receipt and the agent.
func askScopeService(ctx context.Context, url string, req ScopeRequest) (Scope, error) {
	var body scopeServiceRequest
	body.Action, body.Resource, body.Environment = req.Action, req.Resource, req.Environment
	body.Principal.Agent = req.Principal.Agent
	if req.Principal.User != "" {
		body.Principal.User = &req.Principal.User
	}
	if req.Task != "" {
		body.Task = &req.Task
	}
	raw, err := postService(ctx, "scope service", url, body, maxScopeAnswer)
	if err != nil {
		return Scope{}, err
	}
	return parseScopeAnswer(raw)
}

// parseScopeAnswer reads {"resources": [strings]}; other members are ignored.
func parseScopeAnswer(raw []byte) (Scope, error) {
	v, err := canon.Parse(raw)
	if err != nil {
		return Scope{}, fmt.Errorf("scope service answer is not JSON latch accepts: %w", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return Scope{}, errors.New(`scope service answer is not a JSON object (expected {"resources": [...]})`)
	}
	list, ok := obj["resources"].([]any)
	if !ok {
		return Scope{}, errors.New(`scope service answer has no "resources" list (expected {"resources": [...]})`)
	}
	sc := Scope{Resources: make([]string, len(list))}
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			return Scope{}, fmt.Errorf("scope service answer: resources[%d] is not a string", i)
		}
		sc.Resources[i] = s
	}
	return sc, nil
}
