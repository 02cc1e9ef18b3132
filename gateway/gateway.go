package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Version is the implementation version the gateway announces to agents and upstreams: the
// release of latch it is part of.
const Version = latch.Version

// ErrNoUpstreams is returned by New when the policy has no gateway section or it names no
// upstream: a gateway with nothing behind it is a configuration mistake.
var ErrNoUpstreams = errors.New("gateway: the policy names no upstream (add a gateway section: docs/gateway.md)")

// Config configures a Gateway. Guard is required; its policy's gateway section names the
// upstreams.
type Config struct {
	// Guard runs every tool call: its policy decides, its store holds effects and receipts.
	Guard *latch.Guard
	// Principal is the agent of sessions that carry no credential of their own (stdio, or an
	// in-process transport). A zero Principal means such sessions are refused unauthenticated.
	Principal latch.Principal
	// Dir is the working directory of stdio upstreams; "" is the gateway's own.
	Dir string
	// Stderr receives the stderr of stdio upstreams; nil discards it.
	Stderr io.Writer
	// Logger receives the gateway's warnings; nil is slog.Default().
	Logger *slog.Logger
	// Now is the clock a granted approval's expiry is read by when a re-sent call is matched to
	// it, and a call's lease by when its deadline is set; nil is time.Now. Give it the guard's
	// clock.
	Now func() time.Time
	// CallTimeout bounds each tools/call sent upstream; zero is DefaultCallTimeout. A call that
	// holds an effect key is also bounded by its lease, less a margin to record its outcome, so
	// that the gateway reports it before the lease lapses. A call that reaches its deadline after
	// it was sent is ambiguous.
	CallTimeout time.Duration
	// MaxAnswer is the size in bytes of the largest message the gateway reads whole from an
	// upstream; zero is DefaultMaxAnswer. A larger tool result is never held in memory or
	// stored: the gateway reads past it, keeping its size and SHA-256, and the call is committed
	// with a marker in its place (docs/gateway.md#answers-too-large-to-keep).
	MaxAnswer int64
	// Alerts, when set, is handed each pin drift the gateway records (a pinned tool listed
	// otherwise than its pin: drift.go), once per drift across the processes sharing the store:
	// give it a *notify.Notifier to alert a person (`latch gateway --notify URL`).
	Alerts latch.Sink
	// ListDenied lists every upstream tool to every session. By default tools/list leaves out
	// the tools the policy denies to the session's principal whatever the arguments (list.go):
	// an agent is not invited to call what will be refused. Calls are decided the same either
	// way.
	ListDenied bool
	// Sweep, when positive, runs Guard.Sweep at that interval until Close: a lease that lapsed
	// (its holder crashed, or another process holds it and went silent) is written ambiguous and
	// an expired approval request expired, without waiting for a caller to meet them.
	Sweep time.Duration
	// ApprovalWait is the longest a tools/call that needs a person's approval is held open for
	// an agent whose MCP client declared elicitation: the client is shown the request, and the
	// call answers when an approver does, or when the request expires (elicit.go). Zero is
	// DefaultApprovalWait; negative never holds a call open (every agent is answered
	// approval_required and re-sends). Agents without elicitation are never held.
	ApprovalWait time.Duration
	// ProgressEvery is how often a held call sends a progress notification, when its request
	// carried a progress token, so that the agent's client knows the call is alive; zero is
	// DefaultProgressEvery.
	ProgressEvery time.Duration
	// ConsoleURL is the base URL of the latch serve console approvers answer in (such as
	// https://latch.example.com): the elicitation of a held call links the request's page. ""
	// links none.
	ConsoleURL string
}

// Defaults of Config.
const (
	DefaultCallTimeout       = 2 * time.Minute
	DefaultMaxAnswer   int64 = 1 << 20
)

// Gateway forwards the tool calls of MCP agents to upstream MCP servers through a latch Guard.
type Gateway struct {
	cfg       Config
	upstreams map[string]*upstream
	tools     []*Tool
	nonce     string        // marks the stand-ins of answers too large to keep (answer.go)
	stopSweep func()        // ends the sweeper; nil without one
	keyed     keyedRuns     // keyed calls in flight here (requestkey.go)
	swept     chan struct{} // closed when the sweeper has ended
	seen      observations  // the tools this process last listed, for the pins (pin.go)
	driftMu   sync.Mutex
	drifted   map[string]string // alias\x00tool → the drifted hash already warned of
	recordMu  sync.Mutex        // one recordPins at a time: its read-then-write (drift.go)
}

// Tool is one upstream tool as the gateway lists it.
type Tool struct {
	Name       string // <alias>.<tool> as agents see it (the policy's gateway.separator in place of .)
	Action     string // mcp.<alias>.<tool>
	Upstream   string // the alias
	UpstreamAs string // the upstream's own name for it
	ErrorsMean string // policy.ErrorsMeanUnknown or policy.ErrorsMeanNotExecuted
	def        *mcp.Tool
}

// upstream is the connection to one upstream server. A connection that ends (a stdio upstream
// that exited, an HTTP upstream that went away) is redialled by the next call that needs it, at
// most once per redialEvery: a restarted upstream is reached again without restarting the
// gateway.
type upstream struct {
	alias    string
	dial     func(context.Context) (*mcp.ClientSession, error)
	mu       sync.Mutex
	session  *mcp.ClientSession
	closed   bool      // the session ended: nothing more can be sent on it
	shut     bool      // the gateway closed: never redial
	lastDial time.Time // when a redial was last tried
	// relisted lists the tools of a redialled session anew, so that the pins are checked
	// against the restarted upstream's definitions (pin.go).
	relisted func(context.Context, *mcp.ClientSession)
	// check refuses a call of a pinned tool whose definition no longer matches its pin: a
	// redial made just before sending it may have found a redefined tool.
	check func(*Tool) error
}

// redialEvery spaces the redials of an upstream that stays down, so that a burst of calls does
// not start a burst of processes.
const redialEvery = time.Second

// watch marks the upstream closed when cs ends, unless another session replaced it meanwhile,
// and releases it (a stdio upstream's process is reaped).
func (up *upstream) watch(cs *mcp.ClientSession) {
	_ = cs.Wait()
	up.drop(cs)
	_ = cs.Close()
}

// drop marks the upstream closed if cs is still its session: the next call redials.
func (up *upstream) drop(cs *mcp.ClientSession) {
	up.mu.Lock()
	if up.session == cs {
		up.closed = true
	}
	up.mu.Unlock()
}

// current returns the live session, redialling a closed one. An error means nothing was sent.
func (up *upstream) current(ctx context.Context, now time.Time) (*mcp.ClientSession, error) {
	up.mu.Lock()
	defer up.mu.Unlock()
	switch {
	case up.shut:
		return nil, fmt.Errorf("upstream %s: the gateway is closed", up.alias)
	case !up.closed:
		return up.session, nil
	case now.Sub(up.lastDial) < redialEvery:
		return nil, fmt.Errorf("upstream %s is disconnected (redialled less than %v ago)", up.alias, redialEvery)
	}
	up.lastDial = now
	cs, err := up.dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("upstream %s is disconnected, and redialling it failed: %w", up.alias, err)
	}
	up.session, up.closed = cs, false
	go up.watch(cs)
	if up.relisted != nil {
		up.relisted(ctx, cs)
	}
	return cs, nil
}

// New connects to every upstream of the policy's gateway section and lists their tools. It
// closes what it opened if any upstream cannot be reached.
func New(ctx context.Context, cfg *Config) (*Gateway, error) {
	if cfg == nil || cfg.Guard == nil {
		return nil, errors.New("gateway: new: Config.Guard is required")
	}
	g := &Gateway{cfg: *cfg, upstreams: map[string]*upstream{}}
	if g.cfg.Logger == nil {
		g.cfg.Logger = slog.Default()
	}
	if g.cfg.Now == nil {
		g.cfg.Now = time.Now
	}
	if g.cfg.Stderr == nil {
		g.cfg.Stderr = io.Discard
	}
	switch {
	case g.cfg.CallTimeout < 0:
		return nil, fmt.Errorf("gateway: new: Config.CallTimeout %v is negative", g.cfg.CallTimeout)
	case g.cfg.CallTimeout == 0:
		g.cfg.CallTimeout = DefaultCallTimeout
	}
	switch {
	case g.cfg.MaxAnswer < 0:
		return nil, fmt.Errorf("gateway: new: Config.MaxAnswer %d is negative", g.cfg.MaxAnswer)
	case g.cfg.MaxAnswer == 0:
		g.cfg.MaxAnswer = DefaultMaxAnswer
	case g.cfg.MaxAnswer < MinMaxAnswer:
		return nil, fmt.Errorf("gateway: new: Config.MaxAnswer %d is below %d bytes: no tool list would fit", g.cfg.MaxAnswer, MinMaxAnswer)
	}
	if g.cfg.Sweep < 0 {
		return nil, fmt.Errorf("gateway: new: Config.Sweep %v is negative", g.cfg.Sweep)
	}
	if g.cfg.ApprovalWait == 0 {
		g.cfg.ApprovalWait = DefaultApprovalWait
	}
	switch {
	case g.cfg.ProgressEvery < 0:
		return nil, fmt.Errorf("gateway: new: Config.ProgressEvery %v is negative", g.cfg.ProgressEvery)
	case g.cfg.ProgressEvery == 0:
		g.cfg.ProgressEvery = DefaultProgressEvery
	}
	if err := checkConsoleURL(g.cfg.ConsoleURL); err != nil {
		return nil, err
	}
	g.nonce = rand.Text()
	sec := cfg.Guard.Policy().Gateway
	if sec == nil || len(sec.Upstreams) == 0 {
		return nil, ErrNoUpstreams
	}
	aliases := make([]string, 0, len(sec.Upstreams))
	for a := range sec.Upstreams {
		aliases = append(aliases, a)
	}
	slices.Sort(aliases)
	for _, a := range aliases {
		if err := g.connect(ctx, sec.Upstreams[a]); err != nil {
			_ = g.Close()
			return nil, err
		}
	}
	g.startSweep()
	return g, nil
}

// startSweep runs the guard's Sweep every Config.Sweep until Close.
func (g *Gateway) startSweep() {
	if g.cfg.Sweep <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.stopSweep, g.swept = cancel, make(chan struct{})
	go func() {
		defer close(g.swept)
		t := time.NewTicker(g.cfg.Sweep)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rep, err := g.cfg.Guard.Sweep(ctx)
			if err != nil && ctx.Err() == nil {
				g.cfg.Logger.Error("latch gateway: sweep", "err", err)
			}
			if rep != nil && len(rep.Lapsed)+len(rep.Expired) > 0 {
				g.cfg.Logger.Warn("latch gateway: swept", "lapsed_leases", len(rep.Lapsed), "expired_approvals", len(rep.Expired))
			}
		}
	}()
}

func (g *Gateway) connect(ctx context.Context, u *policy.Upstream) error {
	up := &upstream{alias: u.Alias, dial: func(ctx context.Context) (*mcp.ClientSession, error) { return g.dial(ctx, u) },
		relisted: func(ctx context.Context, cs *mcp.ClientSession) { g.relist(ctx, u.Alias, cs) }, check: g.pinRefusal}
	cs, err := up.dial(ctx)
	if err != nil {
		return fmt.Errorf("gateway: connect upstream %s: %w", u.Alias, err)
	}
	up.session = cs
	g.upstreams[u.Alias] = up
	go up.watch(cs)
	defs, err := listTools(ctx, cs)
	if err != nil {
		return fmt.Errorf("gateway: list tools of upstream %s: %w", u.Alias, err)
	}
	g.seen.record(u.Alias, defs)
	g.notePinDrift(ctx, u.Alias, true)
	if err := g.checkPins(u); err != nil {
		return err
	}
	for _, def := range defs {
		t := &Tool{Name: u.Alias + g.sep() + def.Name, Action: "mcp." + u.Alias + "." + def.Name,
			Upstream: u.Alias, UpstreamAs: def.Name, ErrorsMean: policy.ErrorsMeanUnknown, def: def}
		if s := u.Tools[def.Name]; s != nil {
			t.ErrorsMean = s.ErrorsMean
		}
		for _, o := range g.tools {
			if o.Name == t.Name {
				return fmt.Errorf("gateway: tools %s of upstream %s and %s of upstream %s are both listed as %s: choose another gateway.separator or alias",
					o.UpstreamAs, o.Upstream, t.UpstreamAs, t.Upstream, t.Name)
			}
		}
		g.tools = append(g.tools, t)
	}
	return nil
}

// sep joins an alias and a tool's name in the names agents see.
func (g *Gateway) sep() string {
	if s := g.cfg.Guard.Policy().Gateway.Separator; s != "" {
		return s
	}
	return "."
}

// dial opens a session with upstream u: it starts a command upstream's process, or connects to
// an HTTP upstream's endpoint, and completes the MCP handshake.
func (g *Gateway) dial(ctx context.Context, u *policy.Upstream) (*mcp.ClientSession, error) {
	// Every answer is read through a filter that bounds it by Config.MaxAnswer (answer.go).
	var t mcp.Transport
	if u.URL != "" {
		var base http.RoundTripper = http.DefaultTransport
		if u.Pin != nil && len(u.Pin.TLSCertSHA256) > 0 {
			base = pinnedTLS(u.Pin.TLSCertSHA256)
		}
		hc := &http.Client{Transport: limitTransport{base: base, limit: g.cfg.MaxAnswer, nonce: g.nonce}}
		t = &mcp.StreamableClientTransport{Endpoint: u.URL, MaxRetries: -1, HTTPClient: hc, MaxEventSize: int(g.cfg.MaxAnswer + standInRoom)}
	} else {
		cmd := exec.Command(u.Command[0], u.Command[1:]...)
		cmd.Dir = g.cfg.Dir
		cmd.Stderr = g.cfg.Stderr
		cmd.Env = os.Environ()
		t = &commandTransport{cmd: cmd, limit: g.cfg.MaxAnswer, nonce: g.nonce}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "latch-gateway", Version: Version}, &mcp.ClientOptions{
		ToolListChangedHandler: func(_ context.Context, req *mcp.ToolListChangedRequest) { g.listChanged(u.Alias, req.Session) },
		// An upstream's input requests come back to the gateway as they are, to relay (relay.go).
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	return client.Connect(ctx, t, nil)
}

// Tools returns the upstream tools the gateway lists, in alias then upstream order.
func (g *Gateway) Tools() []*Tool { return slices.Clone(g.tools) }

// Close stops the sweeper and ends every upstream session (and stops stdio upstream processes).
func (g *Gateway) Close() error {
	if g.stopSweep != nil {
		g.stopSweep()
		<-g.swept
		g.stopSweep = nil
	}
	var errs []error
	for _, up := range g.upstreams {
		up.mu.Lock()
		up.shut = true
		cs := up.session
		up.mu.Unlock()
		if err := cs.Close(); err != nil {
			errs = append(errs, fmt.Errorf("gateway: close upstream %s: %w", up.alias, err))
		}
	}
	return errors.Join(errs...)
}

// Server returns an MCP server that lists the upstream tools and forwards their calls. Serve it
// over any transport: mcp.StdioTransport for agents that spawn their tools, or a streamable-HTTP
// handler (see Handler).
func (g *Gateway) Server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "latch-gateway", Version: Version}, nil)
	s.AddReceivingMiddleware(g.listMiddleware)
	for _, t := range g.tools {
		def := *t.def
		def.Name = t.Name
		s.AddTool(&def, g.handler(t))
	}
	g.addHopTool(s) // hoptool.go
	return s
}

// principalKey is the TokenInfo.Extra key of the principal a bearer token authenticated.
const principalKey = "latch.principal"

func (g *Gateway) principal(req *mcp.CallToolRequest) (latch.Principal, bool) {
	return g.principalOf(req.Extra)
}

// principalOf is the principal of the session a request came on: its bearer credential's over
// HTTP, else Config.Principal. false when there is none.
func (g *Gateway) principalOf(extra *mcp.RequestExtra) (latch.Principal, bool) {
	if extra != nil && extra.TokenInfo != nil {
		p, ok := extra.TokenInfo.Extra[principalKey].(latch.Principal)
		return p, ok && p.Agent != ""
	}
	return g.cfg.Principal, g.cfg.Principal.Agent != ""
}

func (g *Gateway) handler(t *Tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		p, ok := g.principal(req)
		if !ok {
			return nil, wireError(CodeUnauthenticated, Refusal{Reason: "unauthenticated", Action: t.Action,
				Detail: "the session carries no principal: send Authorization: Bearer TOKEN over HTTP, or start a stdio gateway with --agent NAME"})
		}
		args := json.RawMessage(req.Params.Arguments)
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage("{}")
		}
		task, err := taskOf(req)
		if err != nil {
			return nil, wireError(refusal(t.Action, nil, err))
		}
		key, err := requestKeyOf(req)
		if err != nil {
			return nil, wireError(refusal(t.Action, nil, err))
		}
		hop, err := hopOf(req) // hoptool.go
		if err != nil {
			return nil, wireError(refusal(t.Action, nil, err))
		}
		ctx, stop := withRequest(ctx, req)
		defer stop()
		ctx = latch.WithHop(latch.WithTask(latch.WithPrincipal(ctx, p), task), hop)
		if key != "" {
			// Before the request or its grant is looked for: an effect template may render the key.
			ctx = latch.WithRequestKey(ctx, key)
		}
		if relayed(req) { // the agent's answer to an upstream's question relayed to it (relay.go)
			if err := g.pinRefusal(t); err != nil {
				return nil, wireError(refusal(t.Action, nil, err))
			}
			return g.resumeRelayed(ctx, g.upstreams[t.Upstream], t, args, req)
		}
		// A call sent again with its user's answer to the elicitation of its approval request
		// waits for the request (elicit.go); any other call is decided, and a call refused
		// approval_required is answered with that elicitation when the agent's client takes one.
		held, err := g.heldRequest(ctx, req, t, args)
		if err != nil {
			return nil, wireError(CodeInternal, Refusal{Reason: "internal", Action: t.Action, Detail: err.Error()})
		}
		if held != nil {
			return g.holdOpen(ctx, req, t, held, func(ctx context.Context) (*mcp.CallToolResult, error) {
				return g.attempt(ctx, req, t, args, key)
			})
		}
		res, err := g.attempt(ctx, req, t, args, key)
		if ask, ok := g.askToWait(ctx, req, err); ok {
			return ask, nil
		}
		return res, err
	}
}

// attempt decides and runs one tool call: the pins, then the call itself, keyed or not. A call
// that needs approval and re-sends the exact action a person granted runs on that grant: the
// guard finds it by the action's hash, so the agent needs no argument of latch's own.
func (g *Gateway) attempt(ctx context.Context, req *mcp.CallToolRequest, t *Tool, args json.RawMessage, key string) (*mcp.CallToolResult, error) {
	up := g.upstreams[t.Upstream]
	if err := g.pinRefusal(t); err != nil {
		return nil, wireError(refusal(t.Action, nil, err))
	}
	if key != "" {
		return g.keyedCall(latch.WithRequestKey(ctx, key), t, args)
	}
	var result *mcp.CallToolResult
	var big *answerInfo // set when the answer was too large to keep
	rc, err := g.cfg.Guard.Execute(ctx, &latch.Call{Action: t.Action, Arguments: args},
		func(ctx context.Context, a json.RawMessage) (any, error) {
			ctx, cancel, err := g.deadline(ctx)
			if err != nil {
				return nil, err
			}
			defer cancel()
			r, err := up.call(withRelay(ctx, req.Session), t, a, time.Now())
			if err != nil {
				return nil, err
			}
			if a, ok := g.tooLarge(r); ok {
				g.cfg.Logger.Warn("latch gateway: an answer too large to keep: the call is committed with a marker in its place",
					"action", t.Action, "bytes", a.Bytes, "limit", a.Limit, "sha256", a.SHA256)
				big, result = &a, answerMarker(a)
				return result, nil
			}
			result = r
			return r, nil
		})
	if ir := relayAnswer(err); ir != nil {
		return ir, nil // the upstream asks the agent: the call is suspended (relay.go)
	}
	if err != nil {
		return nil, wireError(refusal(t.Action, rc, err))
	}
	if big != nil {
		return nil, wireError(tooLargeRefusal(t.Action, rc, result, *big))
	}
	return result, nil
}

// requestKey is the TokenInfo.Extra key of the context of the HTTP request that carried a call:
// it ends when the agent disconnects, which the MCP session, which outlives the request, does
// not tell the handler.
const requestKey = "latch.request"

// withRequest returns ctx, cancelled also when the HTTP request that carried the call ends (the
// agent disconnected), and the function that releases the link. Over stdio and in-process
// transports the SDK cancels ctx itself when the agent cancels the call or its connection ends.
func withRequest(ctx context.Context, req *mcp.CallToolRequest) (context.Context, func()) {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return ctx, func() {}
	}
	rctx, ok := req.Extra.TokenInfo.Extra[requestKey].(context.Context)
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(rctx, func() { cancel(errAgentGone) })
	return ctx, func() { stop(); cancel(nil) }
}

// errAgentGone is why a call's context ends when the agent's HTTP request does.
var errAgentGone = errors.New("the agent disconnected")

// deadline bounds an upstream call by Config.CallTimeout and, when the call holds an effect
// key, by its lease less a margin to record the outcome in. A lease already spent refuses the
// call before anything is sent.
func (g *Gateway) deadline(ctx context.Context) (context.Context, context.CancelFunc, error) {
	d := g.cfg.CallTimeout
	if until, ok := latch.LeaseExpiry(ctx); ok {
		left := until.Sub(g.cfg.Now())
		left -= min(left/10, leaseMargin)
		if left <= 0 {
			return nil, nil, latch.NotExecuted(fmt.Errorf("the lease on the effect key lapsed before the call was sent"))
		}
		d = min(d, left)
	}
	ctx, cancel := context.WithTimeoutCause(ctx, d, fmt.Errorf("no answer within %v, the call's deadline", d))
	return ctx, cancel, nil
}

// leaseMargin is the most of a lease kept back from the upstream call to record its outcome in.
const leaseMargin = 5 * time.Second

// call sends one tools/call to the upstream and says what its failure means for the outcome.
func (up *upstream) call(ctx context.Context, t *Tool, args json.RawMessage, now time.Time) (*mcp.CallToolResult, error) {
	cs, err := up.current(ctx, now)
	if err != nil {
		// Nothing was sent: the connection had ended and could not be made again.
		return nil, latch.NotExecuted(err)
	}
	if up.check != nil {
		if err := up.check(t); err != nil {
			// The redial above found the tool redefined: nothing is sent.
			return nil, latch.NotExecuted(err)
		}
	}
	params := &mcp.CallToolParams{Name: t.UpstreamAs, Arguments: args}
	retryParams(ctx, params)
	r, err := cs.CallTool(ctx, params)
	if errors.Is(err, mcp.ErrConnectionClosed) {
		// The connection broke: the next call redials rather than find it broken too. This is
		// done before the answer goes back, so an agent that retries at once reaches a new one.
		up.drop(cs)
	}
	if err != nil && ctx.Err() != nil {
		// The deadline passed, or the agent cancelled or went away, after the request was sent.
		return nil, fmt.Errorf("upstream %s: tools/call %s: %w: %w", up.alias, t.UpstreamAs, context.Cause(ctx), err)
	}
	if err != nil {
		// The request may have reached the upstream: the outcome is unknown.
		return nil, fmt.Errorf("upstream %s: tools/call %s: %w", up.alias, t.UpstreamAs, err)
	}
	if r.NeedsInput() {
		return nil, relayInput(ctx, r) // a suspension round, or an unknown outcome (relay.go)
	}
	if r.IsError {
		terr := fmt.Errorf("upstream %s: tool %s returned an error: %s", up.alias, t.UpstreamAs, text(r))
		if t.ErrorsMean == policy.ErrorsMeanNotExecuted {
			return nil, latch.NotExecuted(terr)
		}
		return nil, terr
	}
	return r, nil
}

// text is the text content of a result, for error messages.
func text(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	if len(parts) == 0 {
		return "(no text)"
	}
	return strings.Join(parts, "; ")
}
