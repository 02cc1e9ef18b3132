package latch

import (
	"context"
	"sync"
	"time"
)

// Principal is who proposes a call: the agent (the worker, service or AI agent; required) and
// optionally the user it acts for. Issuer, Claims and ExpiresAt come from an identity provider;
// none of them enters the action hash, so an approval survives a token refresh.
type Principal struct {
	Agent     string
	User      string
	Issuer    string
	Claims    map[string]any
	ExpiresAt time.Time // zero: no expiry
}

// IdentityProvider establishes the principal of a call from its context (for example from a
// credential placed there by WithCredential). When a guard has one, its answer wins over
// WithPrincipal; its error refuses the call with ErrIdentity.
type IdentityProvider interface {
	Principal(ctx context.Context) (Principal, error)
}

type ctxKey int

const (
	principalKey ctxKey = iota
	approvalKey
	credentialKey
	execKey
	hopKey
)

// WithPrincipal returns a context carrying the principal for the calls made with it.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey, p)
}

// WithApproval returns a context presenting an approval id: the next call made with it spends
// that approval if, and only if, it was granted for exactly that action. The context an executor
// receives does not carry it: a protected call nested inside an approved call is decided on its
// own.
func WithApproval(ctx context.Context, approvalID string) context.Context {
	return context.WithValue(ctx, approvalKey, approvalID)
}

// WithCredential returns a context carrying a raw credential (such as a bearer JWT) for an
// IdentityProvider to verify.
func WithCredential(ctx context.Context, credential string) context.Context {
	return context.WithValue(ctx, credentialKey, credential)
}

// CredentialFrom returns the credential placed by WithCredential, or "".
func CredentialFrom(ctx context.Context) string {
	s, _ := ctx.Value(credentialKey).(string)
	return s
}

func principalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey).(Principal)
	return p, ok
}

// withoutApproval hides a presented approval from the calls made with the returned context.
// An approval is spent by the call it was presented to; a protected call nested inside that
// call's executor (or reconcile hook) is decided on its own, as if made alone, and must neither
// present it (and burn it on a mismatch) nor spend it.
func withoutApproval(ctx context.Context) context.Context {
	if approvalFrom(ctx) == "" {
		return ctx
	}
	return context.WithValue(ctx, approvalKey, "")
}

// executorContext is the context an executor runs with: the caller's, without its approval,
// knowing the attempt it runs.
func executorContext(ctx context.Context, exec *execution) context.Context {
	return context.WithValue(withoutApproval(ctx), execKey, exec)
}

func approvalFrom(ctx context.Context) string {
	s, _ := ctx.Value(approvalKey).(string)
	return s
}

// ApprovalFrom returns the approval id placed by WithApproval, or "": for clients that carry a
// call to a guard in another process (package client).
func ApprovalFrom(ctx context.Context) string { return approvalFrom(ctx) }

// execution is what an executor's context knows about the attempt it runs.
type execution struct {
	g           *Guard
	key         string
	actionID    string
	attempt     int
	token       string // IdempotencyToken: per attempt
	effectToken string // EffectToken: per effect key; derived from key when first asked for
	effectOnce  sync.Once
	// extend extends the lease of a call begun in another process (ExecutorContext).
	extend  func(ctx context.Context, d time.Duration) error
	leaseMu sync.Mutex
	lease   time.Time // when the lease on key lapses, by the guard's clock; zero without one
}

// ExecutorContext returns ctx as the executor of a call begun in another process sees it: there
// IdempotencyToken returns token, EffectToken returns effectToken, and ExtendLease calls extend
// (nil: the call holds no lease).
// It is for clients of a remote guard (package client), so that an executor written for
// Protect runs unchanged under them. Like an in-process executor's, the context does not carry
// the caller's approval: a protected call nested inside the executor is decided on its own.
func ExecutorContext(ctx context.Context, token, effectToken string, extend func(ctx context.Context, d time.Duration) error) context.Context {
	return context.WithValue(withoutApproval(ctx), execKey, &execution{token: token, effectToken: effectToken, extend: extend})
}

func executionFrom(ctx context.Context) *execution {
	e, _ := ctx.Value(execKey).(*execution)
	return e
}

// IdempotencyToken returns, inside an executor, a UUID-shaped token derived from the effect key
// and the attempt number: stable for one attempt, different for the next. It is a per-attempt
// token: a renewal after failed sends a new one, so a provider that honours idempotency keys
// treats the renewal as a new request — which is what a renewal is for when the earlier attempt
// really did not act. If the earlier attempt did act and was resolved failed by mistake, the
// provider cannot tell: use EffectToken when the provider must refuse the second charge even
// then. Sent as an HTTP Idempotency-Key header, it should go through package latchhttp: a bare
// net/http client re-sends a request carrying that header by itself when a reused connection
// drops before the answer, a second call inside one attempt. Outside an executor, or for a call
// with no effect key, it returns "".
func IdempotencyToken(ctx context.Context) string {
	if e := executionFrom(ctx); e != nil {
		return e.token
	}
	return ""
}

// EffectToken returns, inside an executor, a UUID-shaped token derived from the effect key
// alone: the same for every attempt of one effect. Passed as a provider's idempotency key, it
// makes the provider itself refuse (or replay) a second attempt of an effect that already
// happened there — even after a wrong `latch resolve --failed` or a reconcile answer that was
// wrong. The trade-off: a provider that remembers the key answers every renewal with its first
// answer for as long as it keeps keys (a declined card stays declined, a corrected amount is
// refused as a mismatch), so a renewal after a real failure only reaches the provider once it
// has forgotten the key. Use it where acting twice is the worse failure (money out); use
// IdempotencyToken where a renewal must reach the provider as a new request. docs/design.md
// compares the two. Outside an executor, or for a call with no effect key, it returns "".
func EffectToken(ctx context.Context) string {
	if e := executionFrom(ctx); e != nil {
		e.effectOnce.Do(func() { // most executors never ask: derived on demand, once
			if e.effectToken == "" && e.key != "" {
				e.effectToken = effectToken(e.key)
			}
		})
		return e.effectToken
	}
	return ""
}

// ExtendLease extends, inside an executor, the lease on the call's effect key to now+d. It fails
// with an error when the lease already lapsed or was lost: the executor should then stop acting.
func ExtendLease(ctx context.Context, d time.Duration) error {
	e := executionFrom(ctx)
	switch {
	case e != nil && e.extend != nil:
		return e.extend(ctx, d)
	case e == nil || e.key == "":
		return errNoLease
	}
	return e.g.extendLease(ctx, e, d)
}

// LeaseExpiry returns, inside an executor of a call that holds an effect key in this process,
// when its lease lapses by the guard's clock (Config.Now), as reserved or as last extended by
// ExtendLease: an executor that bounds its own work by it reports its outcome while the key is
// still its own, instead of leaving it to lapse into ambiguous. It returns false outside such an
// executor (no effect key, or a call begun in another process).
func LeaseExpiry(ctx context.Context) (time.Time, bool) {
	e := executionFrom(ctx)
	if e == nil {
		return time.Time{}, false
	}
	e.leaseMu.Lock()
	defer e.leaseMu.Unlock()
	return e.lease, !e.lease.IsZero()
}

// ExpiredCredentialError is what an IdentityProvider wraps in its error for a credential it
// verified but found expired. The pipeline refuses the call and records it as
// principal_expired, attributed to Principal.
type ExpiredCredentialError struct {
	Principal Principal
}

func (e *ExpiredCredentialError) Error() string {
	return "credential of " + e.Principal.Agent + " expired at " + e.Principal.ExpiresAt.UTC().Format(time.RFC3339)
}
