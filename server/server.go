package server

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/auth"
	"github.com/latchkit/latch/identity"
	"github.com/latchkit/latch/internal/httpstop"
	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/metrics"
	"github.com/latchkit/latch/server/console"
	"github.com/latchkit/latch/store"
)

// Defaults of Config.
const (
	DefaultAddr            = "127.0.0.1:7420"
	DefaultMaxBody         = 1 << 20 // 1 MiB
	DefaultReadTimeout     = 30 * time.Second
	DefaultIdleTimeout     = 120 * time.Second
	DefaultMaxWait         = 60 * time.Second
	DefaultShutdownTimeout = 30 * time.Second
)

// Config configures a Server. The zero value (or nil) is a server on 127.0.0.1:7420 with the
// defaults above.
type Config struct {
	Addr        string // listen address; default DefaultAddr
	TLSCert     string // certificate and key files: serve HTTPS
	TLSKey      string
	BehindProxy bool // a non-loopback address without TLS is allowed: a proxy terminates TLS

	MaxBody      int64         // largest request body, in bytes; default 1 MiB
	ReadTimeout  time.Duration // whole request, headers and body; default 30s
	WriteTimeout time.Duration // default MaxWait + 30s, so a waiting POST /v1/actions can answer
	IdleTimeout  time.Duration // keep-alive; default 120s
	// MaxWait bounds wait_seconds of POST /v1/actions; default 60s.
	MaxWait time.Duration
	// ShutdownTimeout bounds how long a shutdown waits for requests in flight; default 30s.
	ShutdownTimeout time.Duration
	// MaxInFlight bounds the request bodies being answered at once on POST /v1/actions and
	// POST /v1/actions/{id}/outcome, in bytes (a body is counted at its Content-Length, at
	// least 4 KiB, at most MaxBody); MaxCallerInFlight bounds those of one caller (one
	// principal). A request past either is refused at once with 429 too_many_in_flight.
	// Defaults DefaultMaxInFlight and DefaultMaxCallerInFlight.
	MaxInFlight       int64
	MaxCallerInFlight int64
	// Sweep, when positive, runs Guard.Sweep at that interval while the server serves: lapsed
	// leases are written ambiguous and expired approval requests expired, with their events
	// (and alerts). Zero sweeps nothing. Several servers may sweep one store.
	Sweep time.Duration

	// Identity, when set, verifies bearer credentials that are not latch API tokens (such as
	// JWTs, with the identity package). Give it to the server, not to the guard: the server
	// authenticates each request and passes the principal on. Each credential it verifies is an
	// agent's, unless Identity is an auth.PeopleProvider that names a person for it (identity.JWT
	// with approver marks): an agent's never answers or resolves, a person's never proposes.
	Identity latch.IdentityProvider
	// Revocations is the revocation feed Identity consults (identity.Config.Revocations), and
	// RevocationSecret the bearer secret POST /v1/revocations takes pushes to it with; with
	// either unset the route answers 404. The secret is its own: a feed's transmitter is neither
	// an agent nor a person.
	Revocations      *identity.RevocationFeed
	RevocationSecret []byte
	// Metrics is the metrics sink registered with the guard (latch.Config.Sinks), served at
	// /metrics. Nil serves a sink of the server's own, which can count only what it reads
	// from the store at scrape (effects by state, approvals by status).
	Metrics *metrics.Sink
	// Console configures the web console served under / (docs/approvals.md); nil is the
	// defaults. Its cookies are Secure whenever TLSCert or BehindProxy is set. NoConsole serves
	// the API alone.
	Console   *console.Config
	NoConsole bool
	Logger    *slog.Logger
	Now       func() time.Time // token expiry clock; default time.Now
	// TokenCache, when positive, is how long a verified API token is trusted before the store
	// is read again (auth.Authenticator.CacheTTL): a revoked token is then refused from at most this
	// long after its revocation. Zero (the default) or negative refuses a revoked token from the
	// next request: the store is read on every request, except that the two requests of a call
	// (POST /v1/actions and its outcome) with a token verified before have it read by the
	// transaction that writes for them (store.TokenCheck). An open event stream reads
	// past the cache: it checks its token again every second.
	TokenCache time.Duration
	// CheckpointKey is the public key of the store's signed checkpoints (latch checkpoint):
	// with it, GET /v1/receipts/verify and the console's Receipts page check every checkpoint
	// against the chain, as latch receipts --verify --checkpoints does; nil leaves them unchecked,
	// and the report's checkpoints is null.
	CheckpointKey ed25519.PublicKey
	// Slack, when set, takes the clicks on the Approve and Deny buttons of Slack approval
	// messages at POST /v1/slack/interactions (docs/approvals.md#slack); nil answers that route
	// 404.
	Slack *SlackConfig
}

// Server is the HTTP API of one guard. It is safe for concurrent use.
type Server struct {
	g      *latch.Guard
	cfg    Config
	tokens store.TokenStore
	auth   *auth.Authenticator
	op     *operator.Operator // the operator's questions, answered as on every surface
	con    *console.Console   // nil when NoConsole
	log    *slog.Logger
	h      http.Handler
	doc    []byte // the OpenAPI document
	// stopping is closed when a shutdown begins: event streams end so that it can finish.
	stopping chan struct{}
	stopOnce sync.Once
	// inflight counts the bodies being answered on the begin and outcome routes (inflight.go).
	inflight inFlight
	slack    *slackEndpoint // nil without Config.Slack
}

// New builds the server of guard g. The guard's store must keep API tokens (both built-in
// stores do), and the guard must have no IdentityProvider of its own (see Config.Identity).
func New(g *latch.Guard, cfg *Config) (*Server, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.MaxBody == 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.MaxWait == 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = c.MaxWait + 30*time.Second
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxCallerInFlight == 0 {
		c.MaxCallerInFlight = DefaultMaxCallerInFlight
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxBody < 0 || c.Sweep < 0 || c.ReadTimeout < 0 || c.WriteTimeout < 0 || c.IdleTimeout < 0 || c.MaxWait < 0 ||
		c.MaxInFlight < 0 || c.MaxCallerInFlight < 0 {
		return nil, errors.New("server: negative limit or timeout")
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return nil, errors.New("server: TLS needs both a certificate and a key")
	}
	if g == nil {
		return nil, errors.New("server: no guard")
	}
	ts, ok := g.Store().(store.TokenStore)
	if !ok {
		return nil, fmt.Errorf("server: store %T keeps no API tokens", g.Store())
	}
	if c.Metrics == nil {
		m, err := metrics.New(nil)
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		c.Metrics = m
	}
	c.Metrics.UseStore(g.Store())
	c.Metrics.UsePolicy(g.Policy()) // action labels: only the names it lists (/metrics is open)
	op, err := operator.New(&operator.Config{Store: g.Store(), Policy: g.Policy(), Now: c.Now, CheckpointKey: c.CheckpointKey})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s := &Server{g: g, cfg: c, tokens: ts, op: op, auth: &auth.Authenticator{Tokens: ts, Identity: c.Identity, Now: c.Now, CacheTTL: c.TokenCache}, log: c.Logger, stopping: make(chan struct{})}
	if c.Slack != nil {
		if s.slack, err = newSlackEndpoint(c.Slack, c.Logger); err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
	}
	if !c.NoConsole {
		var cc console.Config
		if c.Console != nil {
			cc = *c.Console
		}
		cc.Secure = cc.Secure || c.TLSCert != "" || c.BehindProxy
		if cc.Logger == nil {
			cc.Logger = c.Logger
		}
		if cc.Now == nil {
			cc.Now = c.Now
		}
		if cc.CheckpointKey == nil {
			cc.CheckpointKey = c.CheckpointKey
		}
		con, err := console.New(g, &cc)
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		s.con = con
	}
	s.h = s.routes()
	s.doc = s.openAPI()
	return s, nil
}

// Handler returns the server's HTTP handler, for embedding in another server.
func (s *Server) Handler() http.Handler { return s.h }

// CheckAddr refuses to listen on a non-loopback address in the clear: tokens and approvals are
// bearer credentials. TLS, or an explicit statement that a proxy terminates TLS, allows it.
func CheckAddr(addr string, tls, behindProxy bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if tls || behindProxy || isLoopback(host) {
		return nil
	}
	return fmt.Errorf("listen address %q is not loopback: bearer tokens would cross the network in the clear; give --tls-cert and --tls-key, or --behind-proxy when a proxy terminates TLS", addr)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// ListenAndServe listens on Config.Addr (refusing a non-loopback address in the clear, see
// CheckAddr) and serves until ctx ends; then it shuts down gracefully.
func (s *Server) ListenAndServe(ctx context.Context) error {
	tlsOn := s.cfg.TLSCert != ""
	if err := CheckAddr(s.cfg.Addr, tlsOn, s.cfg.BehindProxy); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends, then shuts down gracefully: it stops accepting, lets the
// requests in flight finish (each of which writes all it writes in its own transactions, so
// nothing is left half-written), and returns. A request still running after ShutdownTimeout is
// cut off; its writes are still each atomic.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.h,
		ReadTimeout:       s.cfg.ReadTimeout,
		ReadHeaderTimeout: min(s.cfg.ReadTimeout, 10*time.Second),
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	if s.cfg.TLSCert != "" {
		hs.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	httpstop.Install(hs) // a client's unused connection does not hold the shutdown
	errc := make(chan error, 1)
	go func() {
		if s.cfg.TLSCert != "" {
			errc <- hs.ServeTLS(ln, s.cfg.TLSCert, s.cfg.TLSKey)
		} else {
			errc <- hs.Serve(ln)
		}
	}()
	s.log.Info("latch serve listening", "addr", ln.Addr().String(), "tls", s.cfg.TLSCert != "")
	sweepDone := make(chan struct{})
	sctxSweep, stopSweep := context.WithCancel(ctx)
	go s.sweep(sctxSweep, sweepDone)
	defer func() { stopSweep(); <-sweepDone }()
	select {
	case err := <-errc:
		return fmt.Errorf("server: %w", err)
	case <-ctx.Done():
	}
	s.stopOnce.Do(func() { close(s.stopping) })
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	err := hs.Shutdown(sctx)
	s.slack.wait() // the outcomes of the last clicks are posted (each post is bounded by its client's timeout)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("server: shutdown: %w", err)
	}
	s.log.Info("latch serve stopped")
	return nil
}

// sweep runs the guard's Sweep every Config.Sweep until ctx ends.
func (s *Server) sweep(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	if s.cfg.Sweep <= 0 {
		return
	}
	t := time.NewTicker(s.cfg.Sweep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rep, err := s.g.Sweep(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Error("latch serve: sweep", "err", err)
		}
		if rep != nil && len(rep.Lapsed)+len(rep.Expired) > 0 {
			s.log.Info("latch serve: swept", "lapsed_leases", len(rep.Lapsed), "expired_approvals", len(rep.Expired))
		}
	}
}
