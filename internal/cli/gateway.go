package cli

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/auth"
	"github.com/latchkit/latch/gateway"
	"github.com/latchkit/latch/identity"
	"github.com/latchkit/latch/internal/httpstop"
	"github.com/latchkit/latch/notify"
	"github.com/latchkit/latch/server"
	"github.com/latchkit/latch/store"
)

// DefaultGatewayAddr is where `latch gateway` listens unless --listen says otherwise: loopback,
// beside latch serve's 7420.
const DefaultGatewayAddr = "127.0.0.1:7421"

// gatewayFlags are the flags of `latch gateway`.
type gatewayFlags struct {
	stdio       bool
	agent, user string
	strict      bool
	callTimeout time.Duration
	maxAnswer   int64
	sweep       time.Duration
	// approvalWait bounds how long a call is held open for its approval (0: never);
	// consoleURL is the console its elicitation links.
	approvalWait time.Duration
	consoleURL   string
	listDenied   bool
	notify       []string
	notifyFmt    string
	notifyFile   string
	http         httpFlags
	jwt          jwtFlags
	hopKeys      []string // --hop-verify-key files (hop.go)
}

func (a *app) gatewayCommand() *cobra.Command {
	var gf gatewayFlags
	cmd := &cobra.Command{
		Use:   "gateway [flags]",
		Short: "Serve MCP tool calls from agents through the policy (docs/gateway.md)",
		Long: `Serve MCP to agents and forward their tool calls to the upstream MCP servers named in
the policy's gateway: section, each call through the pipeline as the action
mcp.<alias>.<tool>: the policy decides, approvals are bound to the exact arguments, effect
keys hold a consequence to at most once, and a lost reply is ambiguous (docs/gateway.md).

Over streamable HTTP (the default, on 127.0.0.1:7421, endpoint /mcp) every request carries
an agent token of 'latch token create --agent NAME', or a JWT the --jwt-* flags verify; the
call's principal is the credential's. A non-loopback address needs --tls-cert and --tls-key,
or --behind-proxy when a proxy terminates TLS.

With --stdio the gateway speaks MCP on its standard input and output, for agents that spawn
their tools; the principal is --agent (and --user): whoever starts the process speaks for it.

Command upstreams are started in the policy file's directory. At startup the gateway warns
about each tool that runs without an effect key, each policy action naming a tool no
upstream offers, a non-loopback address and observe mode; --strict refuses to start instead.

Each upstream call is bounded by --call-timeout and by its lease, and cancelled when the agent
goes away; such a call is ambiguous. An answer larger than --max-answer is not kept: the call is
committed with a marker of its size and hash. Every --sweep, lapsed leases are written
ambiguous. An approval-required call from an agent whose MCP client takes elicitation is
shown to the agent's user and, accepted, held open until an approver answers (in the console
--console-url links, with latch approve, or the operator MCP server), the request expires, or
--approval-wait passes; other agents are answered approval_required and re-send. SIGTERM or
SIGINT stops it: idle sessions are closed, calls in flight have 5 s to
finish, and any still running then are cancelled and recorded ambiguous.`,
		Example: `  latch token create --agent support-bot
  latch gateway --policy examples/gateway/latch.yaml
  latch gateway --stdio --agent support-bot --strict`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runGateway(cmd.Flags(), &gf)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&gf.stdio, "stdio", false, "speak MCP on standard input and output instead of HTTP")
	f.StringVar(&gf.agent, "agent", "", "with --stdio: the principal's agent `NAME` (required)")
	f.StringVar(&gf.user, "user", "", "with --stdio: the user the agent acts for (optional)")
	f.BoolVar(&gf.strict, "strict", false, "refuse to start when there is any startup warning")
	f.DurationVar(&gf.callTimeout, "call-timeout", gateway.DefaultCallTimeout, "bound each upstream tool call by `DURATION` (and always by its lease); a call that reaches it is ambiguous")
	f.Int64Var(&gf.maxAnswer, "max-answer", gateway.DefaultMaxAnswer, "the largest upstream answer kept and passed on, in `BYTES`; a larger one is committed with a marker in its place")
	f.DurationVar(&gf.sweep, "sweep", 30*time.Second, "write lapsed leases ambiguous and expired approvals expired every `DURATION` (0: never)")
	f.DurationVar(&gf.approvalWait, "approval-wait", gateway.DefaultApprovalWait, "hold an approval-required call open for an agent whose client takes elicitation at most `DURATION` (0: never hold one)")
	f.StringVar(&gf.consoleURL, "console-url", "", "the base `URL` of the latch serve console, linked from a held call's elicitation")
	f.StringArrayVar(&gf.hopKeys, "hop-verify-key", nil, "accept hop tokens in _meta latch/hop signed by the Ed25519 key whose public half is in `FILE` (PEM; repeatable while a key rotates)")
	f.BoolVar(&gf.listDenied, "list-denied", false, "list every upstream tool to every agent; by default tools/list leaves out the tools the policy denies to the agent whatever the arguments")
	f.StringArrayVar(&gf.notify, "notify", nil, "post a signed alert to `URL` when a pinned upstream tool drifts from its pin (once per drift), an approval is requested, an effect becomes ambiguous, a lease lapses or an outcome conflicts (repeatable)")
	f.StringVar(&gf.notifyFmt, "notify-format", notify.FormatJSON, "the alert body: json (signed) or slack")
	f.StringVar(&gf.notifyFile, "notify-secret-file", "", "read the alerts' HMAC-SHA256 key from `FILE` (else $LATCH_NOTIFY_SECRET)")
	gf.http.register(f, DefaultGatewayAddr)
	gf.jwt.register(f, "agents'")
	cmd.AddCommand(a.gatewayPinCommand())
	return cmd
}

// check refuses flag combinations that cannot mean anything.
func (gf *gatewayFlags) check(f *pflag.FlagSet) error {
	switch {
	case gf.callTimeout <= 0:
		return usagef("--call-timeout %v: want a positive duration", gf.callTimeout)
	case gf.maxAnswer < gateway.MinMaxAnswer:
		return usagef("--max-answer %d: want at least %d bytes", gf.maxAnswer, gateway.MinMaxAnswer)
	case gf.sweep < 0:
		return usagef("--sweep %v: want a duration, or 0 for never", gf.sweep)
	case gf.approvalWait < 0:
		return usagef("--approval-wait %v: want a duration, or 0 for never", gf.approvalWait)
	}
	if gf.stdio {
		for _, name := range []string{"listen", "tls-cert", "tls-key", "behind-proxy"} {
			if f.Changed(name) {
				return usagef("--%s is for HTTP; --stdio serves standard input and output", name)
			}
		}
		if gf.jwt.given() {
			return usagef("--jwt-* flags verify HTTP credentials; --stdio takes its principal from --agent")
		}
		if strings.TrimSpace(gf.agent) == "" {
			return usagef("--stdio needs --agent NAME: a stdio session carries no credential, so the principal is named when the gateway starts")
		}
		return nil
	}
	if f.Changed("agent") || f.Changed("user") {
		return usagef("--agent and --user go with --stdio; over HTTP the principal is each request's credential")
	}
	if err := gf.http.check(); err != nil {
		return err
	}
	return gf.jwt.check()
}

func (a *app) runGateway(f *pflag.FlagSet, gf *gatewayFlags) error {
	if err := gf.check(f); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(a.stderr, nil))
	hopKeys, err := readHopVerifyKeys(gf.hopKeys)
	if err != nil {
		return err
	}
	var sinks []latch.Sink
	var n *notify.Notifier
	if len(gf.notify) > 0 {
		var err error
		if n, err = a.notifier(gf.notify, gf.notifyFmt, gf.notifyFile, 0, false, nil, log); err != nil {
			return err
		}
		defer n.Close() // after the guard's Close has handed it what was queued
		sinks = append(sinks, n)
	} else if f.Changed("notify-format") || gf.notifyFile != "" {
		return usagef("--notify-format and --notify-secret-file go with --notify URL")
	}
	g, path, err := a.openServerWith(log, hopKeys, sinks...)
	if err != nil {
		return err
	}
	defer g.Close()
	var warnings []string
	if g.Policy().Mode == "observe" {
		fmt.Fprintln(a.stderr, observeBanner)
		warnings = append(warnings, "the policy is in observe mode: every tool call runs, and refusals are only recorded")
	}
	if !gf.stdio && !loopback(gf.http.listen) {
		warnings = append(warnings, fmt.Sprintf("listening on %s, beyond loopback: any host that reaches it can call tools with a valid credential", gf.http.listen))
	}
	cfg := &gateway.Config{Guard: g, Dir: filepath.Dir(path), Stderr: rawWriter(a.stderr), Logger: log, Now: a.now,
		CallTimeout: gf.callTimeout, MaxAnswer: gf.maxAnswer, Sweep: gf.sweep, ApprovalWait: gf.approvalWait, ConsoleURL: gf.consoleURL,
		ListDenied: gf.listDenied}
	if gf.approvalWait == 0 {
		cfg.ApprovalWait = -1 // the flag's 0 is never; the Config's 0 is the default
	}
	if gf.stdio {
		cfg.Principal = latch.Principal{Agent: gf.agent, User: gf.user, Issuer: "latch-gateway:stdio"}
	}
	if n != nil {
		cfg.Alerts = n
	}
	gw, err := gateway.New(a.ctx, cfg)
	if err != nil {
		return err
	}
	defer gw.Close()
	warnings = append(warnings, gw.Warnings()...)
	for _, w := range warnings {
		log.Warn("latch gateway: " + w)
	}
	if gf.strict && len(warnings) > 0 {
		return fmt.Errorf("--strict: refusing to start with %d warning(s); the first: %s", len(warnings), warnings[0])
	}
	ctx, stop := signal.NotifyContext(a.ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	if gf.stdio {
		log.Info("latch gateway serving MCP on stdio", "tools", len(gw.Tools()), "agent", gf.agent)
		return serveStdio(ctx, gw.Server(), a.stdin, rawWriter(a.stdout))
	}
	ts, ok := g.Store().(store.TokenStore)
	if !ok {
		return fmt.Errorf("store %T keeps no API tokens: the HTTP gateway authenticates agents with them", g.Store())
	}
	idp, err := gf.jwt.provider(ctx, log)
	if err != nil {
		return err
	}
	h := gw.Handler(&auth.Authenticator{Tokens: ts, Identity: idp, Now: a.now})
	return serveHTTP(ctx, log, "latch gateway", &gf.http, h,
		"tools", len(gw.Tools()))
}

// serveStdio serves s on r and w until the peer closes its end or ctx ends.
func serveStdio(ctx context.Context, s *mcp.Server, r io.Reader, w io.Writer) error {
	err := s.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(r), Writer: nopWriteCloser{w}})
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return fmt.Errorf("serve stdio: %w", err)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// openServer opens the guard of a long-running MCP command on the policy and store the flags
// name (creating and migrating the store if needed), logging to log; it returns the policy's
// path with it.
func (a *app) openServer(log *slog.Logger, sinks ...latch.Sink) (*latch.Guard, string, error) {
	return a.openServerWith(log, nil, sinks...)
}

// openServerWith is openServer with the keys of the hop tokens the guard accepts.
func (a *app) openServerWith(log *slog.Logger, hopKeys []ed25519.PublicKey, sinks ...latch.Sink) (*latch.Guard, string, error) {
	path, err := a.policyPath()
	if err != nil {
		return nil, "", err
	}
	u, err := a.storeURL()
	if err != nil {
		return nil, "", err
	}
	g, err := latch.Open(a.ctx, &latch.Config{PolicyPath: path, StoreURL: u, Logger: log, Now: a.now, HopVerifyKeys: hopKeys, Sinks: sinks})
	return g, path, err
}

// httpFlags say where and how an MCP command serves HTTP.
type httpFlags struct {
	listen          string
	tlsCert, tlsKey string
	behindProxy     bool
}

// register defines --listen (defaulting to addr), --tls-cert, --tls-key and --behind-proxy.
func (hf *httpFlags) register(f *pflag.FlagSet, addr string) {
	f.StringVar(&hf.listen, "listen", addr, "the `ADDR` to serve streamable HTTP on")
	f.StringVar(&hf.tlsCert, "tls-cert", "", "serve HTTPS with this certificate `FILE` (PEM)")
	f.StringVar(&hf.tlsKey, "tls-key", "", "the private key `FILE` of --tls-cert (PEM)")
	f.BoolVar(&hf.behindProxy, "behind-proxy", false, "allow a non-loopback address without TLS: a proxy in front terminates TLS")
}

// check refuses a certificate without its key (or the reverse) and a non-loopback address
// without TLS or --behind-proxy.
func (hf *httpFlags) check() error {
	if (hf.tlsCert == "") != (hf.tlsKey == "") {
		return usagef("--tls-cert and --tls-key go together")
	}
	if err := server.CheckAddr(hf.listen, hf.tlsCert != "", hf.behindProxy); err != nil {
		return usagef("%s", err.Error())
	}
	return nil
}

// Shutdown bounds of serveHTTP: how long the calls in flight have to finish once the command is
// told to stop, and how long, once cut, they have to record how they ended.
const (
	shutdownDrain = 5 * time.Second
	shutdownCut   = 5 * time.Second
)

// serveHTTP serves h under /mcp until ctx ends, then shuts down: it stops accepting, ends the
// idle streams of connected clients (each MCP session keeps a GET open for the server's
// messages, which would otherwise hold the shutdown until its timeout), and gives the calls in
// flight shutdownDrain to finish. Calls still running then are cancelled: the gateway records
// each ambiguous, within shutdownCut. The address it listens on is logged (with --listen
// 127.0.0.1:0, the port the system chose).
func serveHTTP(ctx context.Context, log *slog.Logger, name string, hf *httpFlags, h http.Handler, attrs ...any) error {
	ln, err := net.Listen("tcp", hf.listen)
	if err != nil {
		return err
	}
	// Requests live on base, not on ctx: a signal must not cut the calls in flight at once.
	base, cut := context.WithCancel(context.WithoutCancel(ctx))
	defer cut()
	idle, endIdle := context.WithCancel(context.Background())
	defer endIdle()
	mux := http.NewServeMux()
	mux.Handle("/mcp", endStreams(idle, h))
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       server.DefaultIdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	hs.RegisterOnShutdown(endIdle)
	httpstop.Install(hs) // a client's unused connection does not hold the shutdown
	scheme := "http"
	if hf.tlsCert != "" {
		hs.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		scheme = "https"
	}
	errc := make(chan error, 1)
	go func() {
		if hf.tlsCert != "" {
			errc <- hs.ServeTLS(ln, hf.tlsCert, hf.tlsKey)
		} else {
			errc <- hs.Serve(ln)
		}
	}()
	log.Info(name+" listening", append([]any{"url", scheme + "://" + ln.Addr().String() + "/mcp"}, attrs...)...)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info(name+" stopping", "drain", shutdownDrain)
	err = shutdown(hs, shutdownDrain)
	if errors.Is(err, context.DeadlineExceeded) {
		log.Warn(name + ": calls still in flight after the drain are cancelled: each is recorded ambiguous")
		cut()
		if err = shutdown(hs, shutdownCut); err != nil {
			err = errors.Join(err, hs.Close())
		}
	}
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info(name + " stopped")
	return nil
}

// shutdown shuts hs down, waiting at most d for its requests to end.
func shutdown(hs *http.Server, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return hs.Shutdown(ctx)
}

// endStreams ends the GET requests of h — the streams an MCP session keeps open for the
// server's messages, on which no call is in flight — when stop ends.
func endStreams(stop context.Context, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			defer context.AfterFunc(stop, cancel)()
			r = r.WithContext(ctx)
		}
		h.ServeHTTP(w, r)
	})
}

// loopback reports whether addr's host is a loopback address or localhost.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// jwtFlags configure JWT verification of HTTP credentials (the identity package).
type jwtFlags struct {
	issuer, audience string
	keys             []string
	jwks             string
	agentClaim       string
	userClaim        string
	people           jwtPeople // the marks of a person's JWT (jwtpeople.go)
	revocations      jwtRevocations
}

func (j *jwtFlags) register(f *pflag.FlagSet, whose string) {
	f.StringVar(&j.issuer, "jwt-issuer", "", "also accept "+whose+" JWTs from this issuer (`ISS`, the exact iss claim)")
	f.StringVar(&j.audience, "jwt-audience", "", "the aud a JWT must carry (`AUD`; required with --jwt-issuer)")
	f.StringSliceVar(&j.keys, "jwt-key", nil, "a pinned public key `FILE` (PEM) JWTs are verified with; repeatable")
	f.StringVar(&j.jwks, "jwt-jwks", "", "the issuer's JWKS `URL` (https), instead of --jwt-key")
	f.StringVar(&j.agentClaim, "jwt-agent-claim", "", "the claim naming the agent (default sub)")
	f.StringVar(&j.userClaim, "jwt-user-claim", "", "the claim naming the user the agent acts for (optional)")
	j.people.register(f)
	j.revocations.register(f)
}

func (j *jwtFlags) given() bool {
	return j.issuer != "" || j.audience != "" || len(j.keys) > 0 || j.jwks != "" || j.agentClaim != "" || j.userClaim != "" || j.people.given() ||
		j.revocations.given()
}

func (j *jwtFlags) check() error {
	if !j.given() {
		return nil
	}
	switch {
	case j.issuer == "" || j.audience == "":
		return usagef("JWT verification needs both --jwt-issuer and --jwt-audience")
	case (len(j.keys) > 0) == (j.jwks != ""):
		return usagef("JWT verification needs exactly one key source: --jwt-key FILE or --jwt-jwks URL")
	}
	if err := j.revocations.check(); err != nil {
		return err
	}
	return j.people.check()
}

// provider is the JWT verifier the flags describe, nil when none is. With --jwt-revocations it
// reads the feed once before answering, and a feed that cannot be read stops the command.
func (j *jwtFlags) provider(ctx context.Context, log *slog.Logger) (latch.IdentityProvider, error) {
	if !j.given() {
		return nil, nil
	}
	cfg := &identity.Config{Issuer: j.issuer, Audience: j.audience, KeyFiles: j.keys,
		JWKSURL: j.jwks, AgentClaim: j.agentClaim, UserClaim: j.userClaim}
	j.people.apply(cfg)
	feed, err := j.revocations.feed(ctx, j.issuer, log)
	if err != nil {
		return nil, err
	}
	cfg.Revocations = feed
	v, err := identity.NewJWT(cfg)
	if err != nil {
		return nil, err
	}
	return v, nil
}
