// Package webhook receives signed webhook deliveries and runs each event's effect at most once,
// through a latch guard.
//
// Webhook senders deliver at least once: a slow acknowledgement, a dropped connection, a
// deploy, and the same event comes again — possibly to another process behind the load
// balancer. A receiver that acts on every delivery acts twice. This package puts a latch guard
// between the delivery and the effect:
//
//	verifier, _ := webhook.Stripe(&webhook.StripeConfig{Secrets: []string{os.Getenv("STRIPE_WEBHOOK_SECRET")}})
//	h, err := webhook.Handler(&webhook.Config{Guard: g, Action: "payouts.paid", Verifier: verifier},
//		func(ctx context.Context, ev *webhook.Event) (any, error) {
//			return ship(ctx, ev.Body) // return latch.NotExecuted(err) when nothing happened
//		})
//	http.Handle("POST /webhooks/stripe", h)
//
// Each delivery is read (bounded by Config.MaxBody), its signature verified over the exact
// bytes (Stripe's Stripe-Signature with its timestamp tolerance, GitHub's X-Hub-Signature-256,
// or a generic HMAC scheme), and then run as the guard's action with the provider's event id as
// the argument event_id; the effect key is the policy's template for the action, or
// "<provider>:{event_id}". What the sender is answered:
//
//	200  the effect ran now and committed, or a redelivery of a committed event: the body is
//	     the stored result (Latch-Replayed: true on a redelivery); the function did not run again
//	409  another delivery of the event is running it now: redeliver later
//	503  the effect's outcome is unknown (ambiguous): this delivery lost its reply, or an earlier
//	     one did; every redelivery is refused, without running, until a person or a reconcile
//	     hook resolves it — the body names the effect key
//	500  not_executed: the function said nothing happened; a redelivery runs it again
//	401  signature missing or invalid, or a timestamp outside the tolerance; 413 body too
//	     large; 400 an event id or body that cannot be used; 405 not a POST; 403 the policy
//	     refused the action
//
// The effect runs with a context that is not cancelled when the sender hangs up (it keeps the
// request's values), bounded by Config.Timeout: a sender that gives up after ten seconds does
// not turn a shipment half made into an ambiguous one.
//
// Handler takes a function returning a result; Middleware wraps an http.Handler, whose 2xx
// response is the committed result replayed to redeliveries. docs/integrations/webhook.md
// shows both, and what happens on each failure.
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
)

// Defaults of Config.
const (
	DefaultMaxBody = 1 << 20          // 1 MiB
	DefaultTimeout = 60 * time.Second // how long one effect may run once a delivery is verified
)

// Event is a verified delivery.
type Event struct {
	Provider  string      // "stripe", "github", or the HMAC scheme's name
	ID        string      // the provider's event or delivery id: what a redelivery repeats
	Type      string      // the event type when the provider says it ("payout.paid", "push")
	Timestamp time.Time   // the signed timestamp; zero when the scheme signs none
	Body      []byte      // the exact bytes that were signed
	Header    http.Header // the delivery's headers
}

// Func is the effect of one event. It returns the result stored with the committed effect and
// answered, as JSON, to this delivery and every redelivery. It returns latch.NotExecuted(err)
// when it knows nothing happened (the sender may redeliver and it runs again); any other error,
// a panic or its context ending leaves the effect ambiguous.
type Func func(ctx context.Context, ev *Event) (any, error)

// Config configures a receiver. Guard, Action and Verifier are required.
type Config struct {
	Guard    *latch.Guard
	Action   string   // the policy action every delivery runs as; it must be in the policy
	Verifier Verifier // Stripe, GitHub or HMAC

	// Principal is who the deliveries act as; default agent "<provider>-webhook".
	Principal latch.Principal
	// Arguments, when set, gives the call's arguments, taken from the verified event, instead
	// of event_id and event_type: for policy rules (an amount) and effect templates
	// ("payout:{payout_id}", so that two events about one payout are one effect). event_id is
	// added when the effect key is the default "<provider>:{event_id}". It must be
	// deterministic: a redelivery must produce the same arguments. Two deliveries with one
	// effect key and different arguments are a key conflict (409). An error refuses the
	// delivery (400) before anything is written.
	Arguments func(ev *Event) (map[string]any, error)
	// Options are the call's options (Effect overrides the effect template, Lease, Reconcile).
	Options *latch.Options

	MaxBody int64         // bytes; default DefaultMaxBody
	Timeout time.Duration // bounds the pipeline and the effect of one delivery; default DefaultTimeout
	// RetryAfter is the Retry-After of a 409 (in progress); default 60 seconds.
	RetryAfter time.Duration
	Now        func() time.Time // the clock timestamps are checked against; default time.Now
	Logger     *slog.Logger     // refusals and unknown outcomes are logged here; default none
}

type receiver struct {
	cfg  Config
	opts latch.Options
	// defaultEffect: the effect key is "<provider>:{event_id}", set here because neither the
	// policy nor Options names one.
	defaultEffect bool
}

func newReceiver(cfg *Config) (*receiver, error) {
	if cfg == nil {
		return nil, errors.New("webhook: no config")
	}
	c := *cfg
	switch {
	case c.Guard == nil:
		return nil, errors.New("webhook: config: Guard is required")
	case c.Verifier == nil:
		return nil, errors.New("webhook: config: Verifier is required")
	case c.Action == "":
		return nil, errors.New("webhook: config: Action is required")
	case c.MaxBody < 0, c.Timeout < 0, c.RetryAfter < 0:
		return nil, errors.New("webhook: config: MaxBody, Timeout and RetryAfter must not be negative")
	}
	a := c.Guard.Policy().Actions[c.Action]
	if a == nil {
		return nil, fmt.Errorf("webhook: config: action %q is not in the policy: every delivery would be denied", c.Action)
	}
	if c.Arguments == nil {
		if err := checkDeclared(a); err != nil {
			return nil, err
		}
	}
	if c.MaxBody == 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = 60 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	provider := c.Verifier.Provider()
	if c.Principal.Agent == "" {
		c.Principal.Agent = provider + "-webhook"
	}
	rc := &receiver{cfg: c}
	if c.Options != nil {
		rc.opts = *c.Options
	}
	if rc.opts.Effect == "" && a.Effect == nil {
		esc := strings.NewReplacer("{", "{{", "}", "}}")
		rc.opts.Effect = esc.Replace(provider) + ":{event_id}"
		rc.defaultEffect = true
	}
	return rc, nil
}

// checkDeclared refuses, at start-up, an action whose argument declarations would refuse every
// delivery's default arguments (event_id and event_type, two strings).
func checkDeclared(a *policy.Action) error {
	passed := map[string]bool{"event_id": true, "event_type": true}
	declared := map[string]bool{}
	for _, d := range a.Arguments {
		declared[d.Name] = true
		switch {
		case passed[d.Name] && d.Type != "" && d.Type != policy.TypeString:
			return fmt.Errorf("webhook: config: action %q declares argument %q as %s; a delivery passes a string", a.Name, d.Name, d.Type)
		case !passed[d.Name] && !d.Optional:
			return fmt.Errorf("webhook: config: action %q requires argument %q, which a delivery does not pass: set Config.Arguments, or declare it optional", a.Name, d.Name)
		}
	}
	if a.RefuseAdditional {
		for _, n := range []string{"event_id", "event_type"} {
			if !declared[n] {
				return fmt.Errorf("webhook: config: action %q says additional: false and does not declare %q, which every delivery passes", a.Name, n)
			}
		}
	}
	return nil
}

// Handler returns an http.Handler that verifies each delivery and runs fn as its effect, at
// most once per event (see the package documentation for the answers).
func Handler(cfg *Config, fn Func) (http.Handler, error) {
	rc, err := newReceiver(cfg)
	if err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, errors.New("webhook: handler: nil function")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.serve(w, r, fn, answerJSON, replayJSON)
	}), nil
}

// Middleware returns middleware that runs next as the effect of each verified delivery, at most
// once per event. next receives the request with its body (the verified bytes) readable again,
// the event in its context (EventFrom), and a context that is not cancelled when the sender
// hangs up. What next answers decides the outcome: a 2xx response commits, and its status,
// Content-Type and body are stored and answered to every redelivery; NotExecuted(r, err) says
// nothing happened (500, a redelivery runs next again); any other status, or a panic, leaves
// the effect ambiguous (503).
func Middleware(cfg *Config) (func(http.Handler) http.Handler, error) {
	rc, err := newReceiver(cfg)
	if err != nil {
		return nil, err
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rc.serve(w, r, func(ctx context.Context, ev *Event) (any, error) {
				return runHandler(ctx, r, ev, next)
			}, answerRecorded, replayRecorded)
		})
	}, nil
}

type ctxKey int

const (
	eventKey ctxKey = iota
	markKey
)

// EventFrom returns the verified event a Middleware's handler runs for, or nil.
func EventFrom(ctx context.Context) *Event {
	ev, _ := ctx.Value(eventKey).(*Event)
	return ev
}

type mark struct{ err error }

// NotExecuted, called by a Middleware's handler, says that nothing happened for this delivery:
// the effect is recorded failed, the sender is answered 500, and a redelivery runs the handler
// again. Whatever the handler writes is then discarded. Outside a Middleware it does nothing.
func NotExecuted(r *http.Request, err error) {
	if m, ok := r.Context().Value(markKey).(*mark); ok {
		if err == nil {
			err = errors.New("handler said not executed")
		}
		m.err = err
	}
}

// Response is a Middleware handler's committed answer, stored as the effect's result and
// answered again to every redelivery.
type Response struct {
	Status      int    `json:"status"`
	ContentType string `json:"content_type,omitempty"`
	Body        []byte `json:"body"`
}

// runHandler runs next as an effect and turns what it answered into an outcome.
func runHandler(ctx context.Context, r *http.Request, ev *Event, next http.Handler) (any, error) {
	m := &mark{}
	ctx = context.WithValue(context.WithValue(ctx, eventKey, ev), markKey, m)
	r2 := r.Clone(ctx)
	r2.Body = io.NopCloser(bytes.NewReader(ev.Body))
	r2.ContentLength = int64(len(ev.Body))
	rec := &recorder{header: http.Header{}}
	next.ServeHTTP(rec, r2)
	if m.err != nil {
		return nil, latch.NotExecuted(m.err)
	}
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rec.status < 200 || rec.status > 299 {
		return nil, fmt.Errorf("handler answered %d: %s", rec.status, excerpt(rec.body.Bytes()))
	}
	return &Response{Status: rec.status, ContentType: rec.header.Get("Content-Type"), Body: rec.body.Bytes()}, nil
}

// recorder keeps what a Middleware's handler answers.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (rec *recorder) Header() http.Header { return rec.header }

func (rec *recorder) WriteHeader(code int) {
	if rec.status == 0 {
		rec.status = code
	}
}

func (rec *recorder) Write(p []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return rec.body.Write(p)
}

func excerpt(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// serve runs one delivery: read, verify, execute, answer.
func (rc *receiver) serve(w http.ResponseWriter, r *http.Request, fn Func,
	answer func(http.ResponseWriter, any), replay func(http.ResponseWriter, json.RawMessage)) {
	ev, err := rc.receive(w, r)
	if err != nil {
		var re *RefusalError
		errors.As(err, &re)
		rc.cfg.Logger.Warn("webhook: delivery refused", "action", rc.cfg.Action, "reason", re.Reason, "detail", re.Detail)
		if re.Reason == ReasonMethod {
			w.Header().Set("Allow", http.MethodPost)
		}
		writeJSON(w, re.status(), problem{Error: re.Reason, Detail: re.Detail})
		return
	}
	args, err := rc.arguments(ev)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, problem{Error: "invalid_argument", Detail: err.Error()})
		return
	}
	// The sender hanging up must not cancel the effect: it runs to its end under its own
	// timeout, and its outcome is recorded whatever the connection does.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), rc.cfg.Timeout)
	defer cancel()
	ctx = latch.WithPrincipal(ctx, rc.cfg.Principal)
	opts := rc.opts
	call := &latch.Call{Action: rc.cfg.Action, Arguments: args, Options: &opts}
	rcpt, err := rc.execute(ctx, call, ev, fn)
	rc.respond(w, ev, rcpt, err, answer, replay)
}

// execute runs the call. A panic of fn has been recorded ambiguous by the guard when it reaches
// here; it is logged with its stack and answered like any unknown outcome (503), so that the
// sender learns the effect's key instead of seeing its connection dropped. http.ErrAbortHandler,
// a handler's deliberate abort, goes on aborting.
func (rc *receiver) execute(ctx context.Context, call *latch.Call, ev *Event, fn Func) (rcpt *latch.Receipt, err error) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		if p == http.ErrAbortHandler {
			panic(p)
		}
		rc.cfg.Logger.Error("webhook: effect panicked", "action", rc.cfg.Action, "event_id", ev.ID,
			"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		key := ""
		if e, eerr := rc.cfg.Guard.Evaluate(ctx, call); eerr == nil {
			key = e.EffectKey
		}
		rcpt, err = nil, &latch.AmbiguousError{Key: key, Err: fmt.Errorf("effect panicked: %v", p)}
	}()
	return rc.cfg.Guard.Execute(ctx, call, func(ctx context.Context, _ json.RawMessage) (any, error) {
		return fn(ctx, ev)
	})
}

// receive reads and verifies a delivery.
func (rc *receiver) receive(w http.ResponseWriter, r *http.Request) (*Event, error) {
	if r.Method != http.MethodPost {
		return nil, refuse(ReasonMethod, "%s: a delivery is a POST", r.Method)
	}
	if r.ContentLength > rc.cfg.MaxBody {
		return nil, refuse(ReasonBodyTooLarge, "the body is %d bytes; at most %d are accepted", r.ContentLength, rc.cfg.MaxBody)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, rc.cfg.MaxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, refuse(ReasonBodyTooLarge, "the body is larger than %d bytes", rc.cfg.MaxBody)
	case err != nil:
		return nil, refuse(ReasonBody, "read the body: %v", err)
	}
	ev, err := rc.cfg.Verifier.Verify(r.Header, body, rc.cfg.Now())
	if err != nil {
		var re *RefusalError
		if !errors.As(err, &re) {
			return nil, refuse(ReasonSignatureInvalid, "%v", err) // a verifier's own error refuses too
		}
		return nil, err
	}
	ev.Body, ev.Header = body, r.Header
	if ev.Provider == "" {
		ev.Provider = rc.cfg.Verifier.Provider()
	}
	return ev, nil
}

// arguments are the call's arguments: event_id and event_type; or, with an Arguments hook,
// the hook's, plus event_id when the effect key is the default "<provider>:{event_id}".
func (rc *receiver) arguments(ev *Event) (json.RawMessage, error) {
	args := map[string]any{"event_id": ev.ID, "event_type": ev.Type}
	if rc.cfg.Arguments != nil {
		extra, err := rc.cfg.Arguments(ev)
		if err != nil {
			return nil, fmt.Errorf("arguments of event %s: %w", ev.ID, err)
		}
		args = map[string]any{}
		for k, v := range extra {
			args[k] = v
		}
		if rc.defaultEffect {
			if id, ok := args["event_id"]; ok && id != ev.ID {
				return nil, fmt.Errorf("arguments of event %s: the hook set event_id to %v", ev.ID, id)
			}
			args["event_id"] = ev.ID
		}
	}
	b, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("arguments of event %s: %w", ev.ID, err)
	}
	return b, nil
}

// problem is the JSON body of every answer that is not a result.
type problem struct {
	Error      string `json:"error"` // the reason word (latch.RefusalOf)
	Kind       string `json:"kind"`  // the refusal kind
	EffectKey  string `json:"effect_key,omitempty"`
	State      string `json:"state,omitempty"`
	ApprovalID string `json:"approval_id,omitempty"`
	// Rule is the policy rule that denied the delivery (reason denied); Dimension is what did
	// not hold of an authority refusal (constraints.amount_lte, hop, tasks, …).
	Rule      string `json:"rule,omitempty"`
	Dimension string `json:"dimension,omitempty"`
	// Budget, Metric and Window name the budget of a budget refusal: its id, what it meters,
	// its window in ISO 8601.
	Budget string `json:"budget,omitempty"`
	Metric string `json:"metric,omitempty"`
	Window string `json:"window,omitempty"`
	Detail string `json:"detail"`
}

// Answer headers.
const (
	HeaderEffectKey = "Latch-Effect-Key" // the effect a delivery ran or was refused on
	HeaderState     = "Latch-Effect-State"
	HeaderReplayed  = "Latch-Replayed" // "true": a redelivery answered from the stored result
)

// refusalStatus is the answer status of each refusal kind: the webhook receiver's one table of
// the refusal vocabulary (latch.RefusalOf). A sender retries on 5xx and on 409 after
// Retry-After, and gives up on the other 4xx: an ambiguous effect answers 503 so the sender
// keeps the event until a person has resolved it, and a redelivery then meets the resolution.
var refusalStatus = map[latch.RefusalKind]int{
	latch.KindDenied:           http.StatusForbidden,
	latch.KindInvalidArgument:  http.StatusBadRequest,
	latch.KindApprovalRequired: http.StatusForbidden,
	latch.KindApprovalRefused:  http.StatusForbidden,
	latch.KindInProgress:       http.StatusConflict,
	latch.KindAmbiguous:        http.StatusServiceUnavailable,
	latch.KindOutcomeUnknown:   http.StatusServiceUnavailable,
	latch.KindNotExecuted:      http.StatusInternalServerError,
	latch.KindExhausted:        http.StatusInternalServerError,
	latch.KindKeyConflict:      http.StatusConflict,
	latch.KindAuthority:        http.StatusForbidden,
	latch.KindIdentity:         http.StatusForbidden,
	latch.KindOutcomeRefused:   http.StatusInternalServerError,
	latch.KindRequestKey:       http.StatusInternalServerError,
	latch.KindInternal:         http.StatusInternalServerError,
}

// respond answers a delivery from what the guard returned.
func (rc *receiver) respond(w http.ResponseWriter, ev *Event, rcpt *latch.Receipt, err error,
	answer func(http.ResponseWriter, any), replay func(http.ResponseWriter, json.RawMessage)) {
	h := w.Header()
	log := rc.cfg.Logger.With("action", rc.cfg.Action, "event_id", ev.ID)
	if err == nil {
		if rcpt.EffectKey != "" {
			h.Set(HeaderEffectKey, rcpt.EffectKey)
		}
		h.Set(HeaderState, string(latch.StateCommitted))
		answer(w, rcpt.Value)
		return
	}
	r := latch.RefusalOf(err)
	key := r.EffectKey // RefusalOf reads the outermost refusal: this delivery's own effect
	if key == "" && rcpt != nil {
		key = rcpt.EffectKey
	}
	if key != "" {
		h.Set(HeaderEffectKey, key)
	}
	state := string(r.State)
	switch r.Kind {
	case latch.KindOutcomeUnknown:
		state = string(latch.StateAmbiguous)
	case latch.KindNotExecuted:
		state = string(latch.StateFailed)
	}
	if state != "" && key != "" {
		h.Set(HeaderState, state)
	}
	p := problem{Error: string(r.Reason), Kind: string(r.Kind), EffectKey: key, State: state, ApprovalID: r.ApprovalID,
		Rule: r.Rule, Dimension: r.Dimension,
		Budget: r.Budget, Metric: r.Metric, Window: r.Window, Detail: err.Error()}
	switch r.Kind {
	case latch.KindCommitted:
		h.Set(HeaderReplayed, "true")
		replay(w, r.Result)
		return
	case latch.KindInProgress:
		h.Set("Retry-After", strconv.Itoa(int(rc.cfg.RetryAfter.Round(time.Second)/time.Second)))
	case latch.KindKeyConflict:
		log.Warn("webhook: key conflict", "effect_key", key, "err", err)
	case latch.KindAmbiguous, latch.KindOutcomeUnknown:
		p.Detail = fmt.Sprintf("%s; every redelivery is refused without running until it is resolved: latch resolve %s --committed or --failed", err.Error(), key)
		log.Warn("webhook: effect outcome unknown", "effect_key", key, "reason", r.Reason, "err", err)
	case latch.KindNotExecuted:
		p.Detail = err.Error() + "; a redelivery runs it again"
	case latch.KindApprovalRequired:
		p.Detail = "the policy sends this action to a person; a redelivery cannot present an approval: " + err.Error()
	case latch.KindInternal:
		// Nothing ran (the store could not reserve, or the timeout ended the call first): a
		// redelivery meets whatever the store holds.
		log.Error("webhook: delivery failed", "err", err)
	}
	status, ok := refusalStatus[r.Kind]
	if !ok {
		status = http.StatusInternalServerError // a kind this table lacks: TestRefusalWire fails on it
	}
	writeJSON(w, status, p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{"error":"internal","detail":"the answer did not encode"}`)
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// answerJSON answers a Handler's committed result: its JSON encoding, as stored.
func answerJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte("null") // latch stored no result either
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// replayJSON answers a Handler's redelivery of a committed event with the stored result.
func replayJSON(w http.ResponseWriter, result json.RawMessage) {
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(result)
}

// answerRecorded answers what a Middleware's handler answered.
func answerRecorded(w http.ResponseWriter, v any) {
	resp, ok := v.(*Response)
	if !ok {
		answerJSON(w, v)
		return
	}
	if resp.ContentType != "" {
		w.Header().Set("Content-Type", resp.ContentType)
	}
	w.WriteHeader(resp.Status)
	w.Write(resp.Body)
}

// replayRecorded answers a Middleware's redelivery of a committed event with the stored answer.
// A result that is not a stored answer (a person resolved the effect committed with a result
// of their own, or none) is answered 200 as JSON.
func replayRecorded(w http.ResponseWriter, result json.RawMessage) {
	var resp Response
	if err := json.Unmarshal(result, &resp); err != nil || resp.Status < 200 || resp.Status > 299 {
		replayJSON(w, result)
		return
	}
	answerRecorded(w, &resp)
}
