// Package client calls a guard served by `latch serve` from Go, with the same shape and the same
// errors as the in-process API: moving a Go service from a local guard to a remote one is
// one line, latch.Protect(g, …) becoming client.Protect(c, …). The errors returned are the
// latch package's own types (*latch.EffectError, *latch.DeniedError, …), so the same
// errors.Is(err, latch.ErrDuplicateEffect) and errors.As branches hold.
//
// A protected call begins the action on the server (decide, approve, reserve), runs the
// function in this process with the canonical arguments the server hashed, and reports the
// outcome: a nil error is committed, an error wrapping latch.NotExecuted is not_executed (the
// key may be retried), anything else — including a panic and a lost reply — is unknown, and the
// effect stays ambiguous until someone resolves it. Routes and errors: docs/http.md.
//
// A begin is replayable. Protect sends every call's begin with a fresh request key (the
// Idempotency-Key header), and when the begin's answer is lost — the connection dropped, the
// server restarted — or the server is briefly unable to answer (429, 502, 503, 504), it asks
// again with the same key and is handed the same reservation, instead of being refused by its
// own attempt until the lease lapses into ambiguous. Client.Begin does the same when ctx carries
// a key (latch.WithRequestKey); a process that begins, dies, and is restarted can continue its
// reservation by beginning again with the key it persisted.
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/latchkit/latch"
)

// Client talks to one `latch serve` with one bearer token. It is safe for concurrent use.
type Client struct {
	base  string
	token string
	// HTTP is the client requests go through; http.DefaultClient when nil.
	HTTP *http.Client
}

// New returns a client of the server at baseURL (http://127.0.0.1:7420) authenticating with
// token (from `latch token create`).
func New(baseURL, token string) *Client {
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token}
}

// URL returns the server's base URL.
func (c *Client) URL() string { return c.base }

// Error is a problem document (RFC 9457) the server answered that has no latch error type of
// its own: a malformed request, a credential refused, a server failure.
type Error struct {
	Status  int
	Type    string // urn:latch:problem:REASON
	Reason  string
	Detail  string
	Field   string
	Problem json.RawMessage // the whole document
}

func (e *Error) Error() string {
	return fmt.Sprintf("latch serve: %d %s: %s", e.Status, e.Reason, e.Detail)
}

// problem is the members of a problem document the client reads.
type problem struct {
	Type       string          `json:"type"`
	Status     int             `json:"status"`
	Detail     string          `json:"detail"`
	Reason     string          `json:"reason"`
	Kind       string          `json:"kind"`
	Rule       string          `json:"rule"`
	Field      string          `json:"field"`
	Pointer    string          `json:"pointer"`
	Argument   string          `json:"argument"`
	ActionID   string          `json:"action_id"`
	ApprovalID string          `json:"approval_id"`
	ActionHash string          `json:"action_hash"`
	EffectKey  string          `json:"effect_key"`
	State      string          `json:"state"`
	Attempt    int             `json:"attempt"`
	Result     json.RawMessage `json:"result"`
	Dimension  string          `json:"dimension"`
	Budget     string          `json:"budget"`
	Metric     string          `json:"metric"`
	Window     string          `json:"window"`
	Approved   json.RawMessage `json:"approved_arguments"`
}

// errorOf turns a problem document into the latch error a local guard returns for the same
// refusal — the server's table of refusal kinds read backwards, through latch.Refusal.Err —
// or an *Error for a problem that is no refusal of the pipeline.
func errorOf(status int, raw []byte, action string) error {
	var p problem
	if err := json.Unmarshal(raw, &p); err != nil || p.Type == "" {
		return &Error{Status: status, Reason: "not_a_problem", Detail: strings.TrimSpace(string(raw)), Problem: raw}
	}
	kind := latch.RefusalKind(p.Kind)
	if kind == "" || kind == latch.KindInternal {
		return &Error{Status: status, Type: p.Type, Reason: p.Reason, Detail: p.Detail, Field: p.Field, Problem: raw}
	}
	r := &latch.Refusal{Kind: kind, Reason: latch.Reason(p.Reason), Rule: p.Rule,
		EffectKey: p.EffectKey, State: latch.State(p.State), Attempt: p.Attempt, Result: p.Result,
		ApprovalID: p.ApprovalID, ActionHash: p.ActionHash, ActionID: p.ActionID,
		Argument: p.Argument, Pointer: p.Pointer, Dimension: p.Dimension, Detail: p.Detail,
		Budget: p.Budget, Metric: p.Metric, Window: p.Window}
	err := r.Err()
	var de *latch.DeniedError
	if errors.As(err, &de) {
		de.Action = action
	}
	var me *latch.ApprovalMismatchError
	if errors.As(err, &me) && len(p.Approved) > 0 {
		me.Arguments = p.Approved // an approver edited the arguments: these are the ones to present
	}
	return err
}

// do sends one request and decodes a 2xx JSON answer into out; any other answer is an error.
func (c *Client) do(ctx context.Context, method, path string, body, out any, action string) (int, error) {
	return c.doKeyed(ctx, method, path, "", body, out, action)
}

// lostAnswer is a request whose answer never arrived: the server may have acted on it.
type lostAnswer struct{ err error }

func (e *lostAnswer) Error() string { return e.err.Error() }
func (e *lostAnswer) Unwrap() error { return e.err }

// doKeyed is do with an Idempotency-Key header (none when key is ""). A request that got no
// answer is a *lostAnswer.
func (c *Client) doKeyed(ctx context.Context, method, path, key string, body, out any, action string) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	// The caller's span, if ctx carries one, becomes the parent of the server's spans (W3C
	// traceparent, which latch serve reads).
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, &lostAnswer{err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, &lostAnswer{err}
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, errorOf(resp.StatusCode, raw, action)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("latch serve: answer of %s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

// Begun is the server's answer to a begun action (POST /v1/actions).
type Begun struct {
	Status           string          `json:"status"` // reserved or allowed
	ActionID         string          `json:"action_id"`
	Action           string          `json:"action"`
	ActionHash       string          `json:"action_hash"`
	Arguments        json.RawMessage `json:"arguments"`
	EffectKey        string          `json:"effect_key"`
	Attempt          int             `json:"attempt"`
	IdempotencyToken string          `json:"idempotency_token"`
	EffectToken      string          `json:"effect_token"`
	LeaseExpiresAt   time.Time       `json:"lease_expires_at"`
	ApprovalID       string          `json:"approval_id"`
}

// approvalAnswer is the 202 answer.
type approvalAnswer struct {
	Status     string    `json:"status"`
	ApprovalID string    `json:"approval_id"`
	ActionHash string    `json:"action_hash"`
	EffectKey  *string   `json:"effect_key"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// beginTries bounds the requests of one keyed begin; beginBackoff is the first pause between
// them, doubled after each.
const (
	beginTries   = 6
	beginBackoff = 100 * time.Millisecond
)

// Begin begins an action on the server: decided, approved and, with an effect key, reserved.
// approvalID "" presents none; wait > 0 waits that long for a human's answer when approval is
// required. A refusal is the latch error a local guard returns; approval required is a
// *latch.ApprovalRequiredError.
//
// When ctx carries a request key (latch.WithRequestKey), it is sent as the Idempotency-Key
// header, and a begin whose answer is lost, or that the server could not answer for now (429,
// 502, 503, 504), is sent again with it, up to six times in about three seconds while ctx
// lasts: the server hands back the same reservation. The same key from another principal or
// with other arguments is a *latch.RequestKeyError. Without a key, a lost answer is returned as
// it is: asking again could only meet the first attempt (in_progress).
//
// When ctx carries a task (latch.WithTask), it is sent as the call's task; when it presents a
// hop (latch.WithHop), the hop is sent and the call is decided by the hop's chain alone.
func (c *Client) Begin(ctx context.Context, action string, args json.RawMessage, approvalID string, wait time.Duration) (*Begun, error) {
	body := map[string]any{"action": action, "arguments": args}
	if task := latch.TaskFrom(ctx); task != "" {
		body["task"] = task
	}
	if hop := latch.HopFrom(ctx); hop != "" {
		body["hop"] = hop
	}
	if approvalID != "" {
		body["approval_id"] = approvalID
	}
	if wait > 0 {
		body["wait_seconds"] = int((wait + time.Second - 1) / time.Second)
	}
	key := latch.RequestKeyFrom(ctx)
	var raw json.RawMessage
	var status int
	var err error
	pause := beginBackoff
	for try := 1; ; try++ {
		status, err = c.doKeyed(ctx, "POST", "/v1/actions", key, body, &raw, action)
		if err == nil || key == "" || try == beginTries || !retryable(err) {
			break
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, errors.Join(err, ctx.Err())
		case <-t.C:
		}
		pause *= 2
	}
	if err != nil {
		return nil, err
	}
	if status == http.StatusAccepted {
		var a approvalAnswer
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, fmt.Errorf("latch serve: approval answer: %w", err)
		}
		var key string
		if a.EffectKey != nil {
			key = *a.EffectKey
		}
		return nil, &latch.ApprovalRequiredError{ApprovalID: a.ApprovalID, ActionHash: a.ActionHash, EffectKey: key, ExpiresAt: a.ExpiresAt}
	}
	var b Begun
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, fmt.Errorf("latch serve: begin answer: %w", err)
	}
	return &b, nil
}

// retryable reports a begin worth asking again with its key: its answer was lost, or the server
// could not answer it for now.
func retryable(err error) bool {
	var la *lostAnswer
	var e *Error
	switch {
	case errors.As(err, &la):
		return true
	case errors.As(err, &e):
		switch e.Status {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
	}
	return false
}

// NewRequestKey returns a fresh random request key for latch.WithRequestKey: 32 hex digits.
func NewRequestKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// Recorded is the server's answer to an outcome (POST /v1/actions/{id}/outcome).
type Recorded struct {
	ActionID    string          `json:"action_id"`
	Result      string          `json:"result"` // the receipt's result
	Error       string          `json:"error"`
	Receipt     json.RawMessage `json:"receipt"`
	ReceiptHash string          `json:"receipt_hash"`
}

// Finish reports the outcome of a begun action: outcome is committed, not_executed or unknown.
func (c *Client) Finish(ctx context.Context, actionID, outcome string, result json.RawMessage, errText string) (*Recorded, error) {
	body := map[string]any{"outcome": outcome}
	if len(result) > 0 {
		body["result"] = result
	}
	if errText != "" {
		body["error"] = errText
	}
	var r Recorded
	if _, err := c.do(ctx, "POST", "/v1/actions/"+url.PathEscape(actionID)+"/outcome", body, &r, ""); err != nil {
		return nil, err
	}
	return &r, nil
}

// Extend extends the lease of a begun action to now+d and returns the new expiry.
func (c *Client) Extend(ctx context.Context, actionID string, d time.Duration) (time.Time, error) {
	secs := int((d + time.Second - 1) / time.Second)
	var out struct {
		LeaseExpiresAt time.Time `json:"lease_expires_at"`
	}
	if _, err := c.do(ctx, "POST", "/v1/actions/"+url.PathEscape(actionID)+"/lease", map[string]any{"seconds": secs}, &out, ""); err != nil {
		return time.Time{}, err
	}
	return out.LeaseExpiresAt, nil
}

// Suspend suspends a begun action mid-execution (POST /v1/actions/{id}/suspend), asking for
// request (JSON; nil for nothing in particular), as Guard.SuspendBegun does: the answer carries
// the one token that resumes it, told only here. Refusals are the errors a local guard returns.
func (c *Client) Suspend(ctx context.Context, actionID string, request json.RawMessage) (*latch.Suspension, error) {
	body := map[string]any{}
	if len(request) > 0 {
		body["request"] = request
	}
	var out struct {
		ActionID       string          `json:"action_id"`
		EffectKey      string          `json:"effect_key"`
		Attempt        int             `json:"attempt"`
		Round          int             `json:"round"`
		Token          string          `json:"token"`
		Request        json.RawMessage `json:"request"`
		LeaseExpiresAt time.Time       `json:"lease_expires_at"`
	}
	if _, err := c.do(ctx, "POST", "/v1/actions/"+url.PathEscape(actionID)+"/suspend", body, &out, ""); err != nil {
		return nil, err
	}
	return &latch.Suspension{ActionID: out.ActionID, EffectKey: out.EffectKey, Attempt: out.Attempt, Round: out.Round,
		Token: out.Token, Request: out.Request, LeaseExpiresAt: out.LeaseExpiresAt}, nil
}

// Resume resumes a suspended action (POST /v1/actions/{id}/resume), as Guard.ResumeBegun does:
// r.Token exactly, r.Arguments canonically the action's, r.Input what was asked for. The
// executor then carries on and reports with Finish. Refusals are the errors a local guard
// returns (a lapsed lease: an *latch.EffectError ambiguous).
func (c *Client) Resume(ctx context.Context, r *latch.ResumeRequest) (*latch.Resumption, error) {
	body := map[string]any{"token": r.Token, "arguments": r.Arguments}
	if r.Input != nil {
		body["input"] = r.Input
	}
	var out struct {
		ActionID       string          `json:"action_id"`
		Round          int             `json:"round"`
		Request        json.RawMessage `json:"request"`
		LeaseExpiresAt time.Time       `json:"lease_expires_at"`
	}
	if _, err := c.do(ctx, "POST", "/v1/actions/"+url.PathEscape(r.ActionID)+"/resume", body, &out, ""); err != nil {
		return nil, err
	}
	return &latch.Resumption{ActionID: out.ActionID, Round: out.Round, Request: out.Request, Input: r.Input,
		LeaseExpiresAt: out.LeaseExpiresAt}, nil
}

// waitFor is how long a protected call with Options.Wait waits on the server per request.
const waitFor = 60 * time.Second

// Protect wraps fn as latch.Protect does, with the guard on the server: the same arguments
// (encoded to a JSON object), the same canonical value handed to fn, the same errors. Inside fn,
// latch.IdempotencyToken and latch.ExtendLease work as in process. Options.Wait waits for a
// human's answer (in rounds of up to 60 s, until ctx ends); Options.Task, or ctx's task
// (latch.WithTask), is sent as the call's task (latch.TaskOf: equal when both are set), and
// Options.Hop, or ctx's hop (latch.WithHop), as the hop the call acts under; Effect,
// Resource, Lease and Reconcile belong to the server's policy and are refused here.
//
// Each call begins with a request key — ctx's (latch.WithRequestKey), else a fresh one — so a
// begin whose answer is lost is asked again and continues the same reservation (see Begin).
func Protect[A, R any](c *Client, action string, fn func(context.Context, A) (R, error), opts *latch.Options) func(context.Context, A) (R, error) {
	return func(ctx context.Context, args A) (out R, err error) {
		if opts != nil && (opts.Effect != "" || opts.Resource != "" || opts.Lease != 0 || opts.Reconcile != nil) {
			return out, fmt.Errorf("latch: %s: Options.Effect, Resource, Lease and Reconcile are the server's policy and cannot be set by a client", action)
		}
		task, err := latch.TaskOf(ctx, opts)
		if err != nil {
			return out, err
		}
		ctx = latch.WithTask(ctx, task)
		hop, err := latch.HopOf(ctx, opts)
		if err != nil {
			return out, err
		}
		if hop != "" {
			ctx = latch.WithHop(ctx, hop)
		}
		raw, err := json.Marshal(args)
		if err != nil {
			return out, &latch.InvalidArgumentError{Reason: "invalid_argument", Err: fmt.Errorf("encode arguments of %s: %w", action, err)}
		}
		approvalID := latch.ApprovalFrom(ctx)
		if latch.RequestKeyFrom(ctx) == "" {
			ctx = latch.WithRequestKey(ctx, NewRequestKey())
		}
		var b *Begun
		for {
			wait := time.Duration(0)
			if opts != nil && opts.Wait {
				wait = waitFor
			}
			b, err = c.Begin(ctx, action, raw, approvalID, wait)
			var ar *latch.ApprovalRequiredError
			if errors.As(err, &ar) && opts != nil && opts.Wait && ctx.Err() == nil {
				continue // nobody answered in this round: the server returns the same request
			}
			if err != nil {
				return out, err
			}
			break
		}
		var fresh A
		if err := json.Unmarshal(b.Arguments, &fresh); err != nil {
			_, ferr := c.Finish(context.WithoutCancel(ctx), b.ActionID, "not_executed", nil, "decode arguments: "+err.Error())
			return out, errors.Join(latch.NotExecuted(fmt.Errorf("decode arguments of %s: %w", action, err)), ferr)
		}
		ectx := latch.ExecutorContext(ctx, b.IdempotencyToken, b.EffectToken, nil)
		if b.EffectKey != "" {
			ectx = latch.ExecutorContext(ctx, b.IdempotencyToken, b.EffectToken, func(ctx context.Context, d time.Duration) error {
				_, err := c.Extend(ctx, b.ActionID, d)
				return err
			})
		}
		return run(ctx, c, b, func() (R, error) { return fn(ectx, fresh) })
	}
}

// run runs the executor and reports its outcome; a panic is reported unknown, then continues.
func run[R any](ctx context.Context, c *Client, b *Begun, exec func() (R, error)) (out R, err error) {
	// The outcome is reported even if ctx ended: an unreported outcome lapses into ambiguous.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	panicked := true
	defer func() {
		if panicked {
			r := recover()
			_, _ = c.Finish(rctx, b.ActionID, "unknown", nil, fmt.Sprintf("executor panicked: %v", r))
			panic(r)
		}
	}()
	out, execErr := exec()
	panicked = false

	outcome, errText := "committed", ""
	var result json.RawMessage
	switch {
	case execErr == nil:
		if j, err := json.Marshal(out); err == nil {
			result = j
		}
	case errors.Is(execErr, latch.ErrNotExecuted):
		outcome, errText = "not_executed", execErr.Error()
	default:
		outcome, errText = "unknown", execErr.Error()
	}
	rec, ferr := c.Finish(rctx, b.ActionID, outcome, result, errText)
	switch {
	case ferr != nil && execErr != nil && outcome == "not_executed":
		return out, errors.Join(execErr, ferr)
	case ferr != nil:
		// The outcome is not recorded: the lease will lapse into ambiguous.
		cause := execErr
		if cause == nil {
			cause = ferr
		} else {
			cause = errors.Join(execErr, ferr)
		}
		return out, &latch.AmbiguousError{Key: b.EffectKey, Err: cause}
	case rec.Result == "ambiguous" && outcome != "unknown":
		// The holder lost its key before reporting: the outcome was not recorded.
		return out, &latch.EffectError{Key: b.EffectKey, State: latch.StateAmbiguous, Reason: "key_lost", Attempt: b.Attempt}
	case outcome == "unknown":
		return out, &latch.AmbiguousError{Key: b.EffectKey, Err: execErr}
	}
	return out, execErr
}
