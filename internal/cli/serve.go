package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/latchkit/latch/auth"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/metrics"
	"github.com/latchkit/latch/notify"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/server"
	"github.com/latchkit/latch/server/console"
	"github.com/latchkit/latch/store"
)

func (a *app) serveCommand() *cobra.Command {
	var cfg server.Config
	var con console.Config
	var maxWait int
	var notifyURLs, hopVerifyKeys []string
	var notifyFormat, notifySecretFile string
	var jwt jwtFlags
	var pushSecretFile string
	var ckpt scheduledCheckpoints
	var proxies []string
	var sessionTTL string
	var otelEndpoint string
	var budgetRefresh time.Duration
	var budgetShare float64
	var requireApproved bool
	var sl slackFlags
	cmd := &cobra.Command{
		Use:   "serve [flags]",
		Short: "Serve the guard over HTTP, for executors in any language",
		Long: `Serve the guard's pipeline as an HTTP/JSON API (docs/http.md): a worker in any language
begins an action (POST /v1/actions: decide, approve, reserve), acts, and reports the outcome
(POST /v1/actions/{id}/outcome); approvers answer and resolve over the same API.

Callers authenticate with tokens from 'latch token create', or with JWTs the --jwt-* flags
verify: an agent's, or a person's when it carries the mark --jwt-approver-claim or
--jwt-approver-audience sets (an agent's credential never answers or resolves, a person's
never proposes). The web console is served
under / (docs/approvals.md): people log in with accounts from 'latch approver add', or
through a single-sign-on proxy whose address --trusted-proxy names. The server listens on
127.0.0.1:7420 by default and refuses a non-loopback address unless --tls-cert and
--tls-key are given, or --behind-proxy says a proxy terminates TLS. SIGTERM or SIGINT
stops it gracefully: requests in flight finish first.

SIGHUP reloads the policy file: an invalid file is logged and the policy in force stays. With
--require-approved-policy every call is refused policy_unapproved unless the policy in force
was approved (latch policy propose, then latch approve; docs/governance.md), and SIGHUP puts a
new file in force only once it is approved; calls already decided keep the policy they were
decided under.`,
		Example: "  latch token create --agent billing-worker\n  latch serve --listen 127.0.0.1:7420",
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := server.CheckAddr(cfg.Addr, cfg.TLSCert != "", cfg.BehindProxy); err != nil {
				return usagef("%s", err.Error())
			}
			if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
				return usagef("--tls-cert and --tls-key go together")
			}
			if pushSecretFile != "" {
				if jwt.issuer == "" {
					return usagef("--revocation-push-secret-file takes pushes to the JWTs' revocation feed: give --jwt-issuer too")
				}
				secret, err := readSecretFile("--revocation-push-secret-file", pushSecretFile)
				if err != nil {
					return err
				}
				jwt.revocations.push, cfg.RevocationSecret = true, secret
			}
			if err := jwt.check(); err != nil {
				return err
			}
			idp, err := jwt.provider(a.ctx, slog.New(slog.NewTextHandler(a.stderr, nil)))
			if err != nil {
				return usagef("%s", err.Error())
			}
			cfg.Identity, cfg.Revocations = idp, jwt.revocations.built
			cfg.MaxWait = time.Duration(maxWait) * time.Second
			switch {
			case cfg.TokenCache < 0:
				return usagef("--token-cache %v: want a duration, or 0 to read the store on every request", cfg.TokenCache)
			case cfg.MaxInFlight < 1:
				return usagef("--max-in-flight %d: want a positive number of bytes", cfg.MaxInFlight)
			case cfg.MaxCallerInFlight < 1:
				return usagef("--max-caller-in-flight %d: want a positive number of bytes", cfg.MaxCallerInFlight)
			case con.LoginConcurrency < 0:
				return usagef("--login-concurrency %d: want a positive number of password checks, or 0 for half the cores", con.LoginConcurrency)
			}
			for _, p := range proxies {
				pfx, err := parseProxy(p)
				if err != nil {
					return usagef("--trusted-proxy: %s", err.Error())
				}
				con.TrustedProxies = append(con.TrustedProxies, pfx)
			}
			if sessionTTL != "" {
				d, err := parseTTL(sessionTTL)
				if err != nil {
					return usagef("--session-ttl: %s", strings.TrimPrefix(err.Error(), "--expires "))
				}
				con.SessionTTL = d
			}
			cfg.Console = &con
			path, err := a.policyPath()
			if err != nil {
				return err
			}
			u, err := a.storeURL()
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(a.stderr, nil))
			spans, err := a.decideSpanExport(otelEndpoint)
			if err != nil {
				return err
			}
			var tp trace.TracerProvider // nil: no spans
			if spans != nil {
				sdk, shutdown, err := tracerProvider(a.ctx, spans, log)
				if err != nil {
					return err
				}
				defer shutdown() // after the guard's Close: the last spans are sent
				tp = sdk
				log.Info("latch serve: exporting spans over OTLP/HTTP", "to", spans.describe())
			}
			m, err := metrics.New(nil)
			if err != nil {
				return err
			}
			sinks := []latch.Sink{m}
			switch {
			case budgetRefresh < 0:
				return usagef("--budget-refresh %v: want a duration, or 0 for no refresh", budgetRefresh)
			case !(budgetShare >= 0 && budgetShare <= 1):
				return usagef("--notify-budget-share %v: want a share of the limit from 0 (no budget alerts) to 1", budgetShare)
			}
			if cfg.Slack, err = sl.config(a.getenv); err != nil {
				return err
			}
			var n *notify.Notifier
			if len(notifyURLs) > 0 {
				if n, err = a.notifier(notifyURLs, notifyFormat, notifySecretFile, budgetShare, cfg.Slack != nil, m, log); err != nil {
					return err
				}
				defer n.Close() // after the guard's Close has handed it what was queued
				sinks = append(sinks, n)
			} else if notifyFormat != notify.FormatJSON || notifySecretFile != "" || cmd.Flags().Changed("notify-budget-share") {
				return usagef("--notify-format, --notify-secret-file and --notify-budget-share go with --notify URL")
			}
			hopKeys, err := readHopVerifyKeys(hopVerifyKeys) // hop.go
			if err != nil {
				return err
			}
			g, err := latch.Open(a.ctx, &latch.Config{PolicyPath: path, StoreURL: u, Logger: log, Sinks: sinks, TracerProvider: tp,
				RequireApprovedPolicy: requireApproved, HopVerifyKeys: hopKeys})
			if err != nil {
				return err
			}
			defer g.Close()
			if n != nil {
				n.UseGuard(g) // the Slack message of a requested approval shows its arguments
			}
			cfg.Metrics = m
			if g.Policy().Mode == "observe" {
				fmt.Fprintln(a.stderr, observeBanner)
			}
			cfg.Logger = log
			if cfg.CheckpointKey, err = ckpt.publicKey(); err != nil {
				return err
			}
			s, err := server.New(g, &cfg)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(a.ctx, syscall.SIGTERM, os.Interrupt)
			defer stop()
			stopReload := reloadOnHangup(ctx, g, path, log)
			defer stopReload()
			if err := ckpt.start(ctx, g.Store(), log); err != nil {
				return err
			}
			if budgetRefresh > 0 {
				stopWatch := a.watchBudgets(ctx, g, budgetRefresh, m, n, log)
				defer stopWatch() // the watch ends before the notifier closes
			}
			return s.ListenAndServe(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Addr, "listen", server.DefaultAddr, "the `ADDR` to listen on")
	f.StringVar(&cfg.TLSCert, "tls-cert", "", "serve HTTPS with this certificate `FILE` (PEM)")
	f.StringVar(&cfg.TLSKey, "tls-key", "", "the private key `FILE` of --tls-cert (PEM)")
	f.BoolVar(&cfg.BehindProxy, "behind-proxy", false, "allow a non-loopback address without TLS: a proxy in front terminates TLS")
	f.Int64Var(&cfg.MaxBody, "max-body", server.DefaultMaxBody, "the largest request body, in `BYTES`")
	f.Int64Var(&cfg.MaxInFlight, "max-in-flight", server.DefaultMaxInFlight, "the request bodies answered at once on the begin and outcome routes, all callers together, in `BYTES` (past it: 429 too_many_in_flight)")
	f.Int64Var(&cfg.MaxCallerInFlight, "max-caller-in-flight", server.DefaultMaxCallerInFlight, "the same bound for one caller (one principal), in `BYTES`")
	f.DurationVar(&cfg.Sweep, "sweep", 30*time.Second, "write lapsed leases ambiguous and expired approvals expired every `DURATION` (0: never)")
	f.StringArrayVar(&hopVerifyKeys, "hop-verify-key", nil, "accept hop tokens signed by the Ed25519 key whose public half is in `FILE` (PEM, as latch checkpoint keygen writes it; repeatable while a key rotates; docs/agents.md#hop-tokens)")
	f.StringArrayVar(&notifyURLs, "notify", nil, "post a signed alert to `URL` when an approval is requested, an effect becomes ambiguous, a lease lapses, an outcome conflicts or a break-glass grant is opened (repeatable)")
	f.StringVar(&notifyFormat, "notify-format", notify.FormatJSON, "the alert body: json (signed) or slack")
	f.StringVar(&notifySecretFile, "notify-secret-file", "", "read the alerts' HMAC-SHA256 key from `FILE` (else $LATCH_NOTIFY_SECRET)")
	f.Float64Var(&budgetShare, "notify-budget-share", 0.8, "with --notify, alert once when a budget's consumption reaches this `SHARE` of its limit (0: no budget alerts)")
	f.DurationVar(&budgetRefresh, "budget-refresh", 30*time.Second, "read the budgets' consumption every `DURATION` for latch_budget_consumption_ratio and the budget alerts (0: never)")
	jwt.register(f, "callers'")
	f.StringVar(&pushSecretFile, "revocation-push-secret-file", "", "take revoked JWT credentials pushed to POST /v1/revocations by a sender presenting the secret in `FILE` as its bearer credential (with --jwt-issuer; docs/governance.md#revoked-credentials)")
	f.BoolVar(&cfg.NoConsole, "no-console", false, "serve the API only, without the web console under /")
	f.StringArrayVar(&proxies, "trusted-proxy", nil, "a single-sign-on proxy's `ADDR` or CIDR whose --proxy-header names the console user (repeatable)")
	f.StringVar(&con.ProxyHeader, "proxy-header", console.DefaultProxyHeader, "the `HEADER` a trusted proxy names the console user in")
	f.IntVar(&con.LoginConcurrency, "login-concurrency", 0, "check at most `N` console passwords at once (bcrypt, about a quarter of a second of a core each), so logins cannot starve the API; a login past it is answered 429 (default 0: half the cores)")
	f.StringVar(&sessionTTL, "session-ttl", "", "console sessions end this long after login (`DURATION`: 8h, 1d); default 8h, and after 30m idle")
	f.DurationVar(&cfg.TokenCache, "token-cache", 0, "trust a verified API token this long before reading the store again, so a revoked token is refused only within it (default 0: read the store on every request)")
	f.IntVar(&maxWait, "max-wait", int(server.DefaultMaxWait/time.Second), "the longest wait_seconds a caller may ask for, in `SECONDS`")
	f.StringVar(&otelEndpoint, "otel-endpoint", "", "export OpenTelemetry spans over OTLP/HTTP to the collector at `URL` (http://127.0.0.1:4318; else the OTEL_EXPORTER_OTLP_* variables)")
	f.BoolVar(&requireApproved, "require-approved-policy", false, "refuse every call (policy_unapproved) unless the policy in force was approved through latch policy propose; SIGHUP then loads an approved new file")
	sl.register(f)
	ckpt.flags(f)
	return cmd
}

// readSecretFile reads a secret from path, trimmed; an empty one is refused.
func readSecretFile(flag, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	secret := []byte(strings.TrimSpace(string(b)))
	if len(secret) == 0 {
		return nil, fmt.Errorf("%s %s is empty", flag, path)
	}
	return secret, nil
}

// reloadOnHangup reloads the policy file at path into g on each SIGHUP until ctx ends or the
// returned stop is called (which waits for it). A file that does not load, or that the guard
// refuses (not approved, under --require-approved-policy), is logged; the policy in force stays.
func reloadOnHangup(ctx context.Context, g *latch.Guard, path string, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-rctx.Done():
				return
			case <-hup:
			}
			p, err := policy.LoadContext(rctx, path)
			if err != nil {
				log.Error("latch serve: SIGHUP: policy not reloaded", "err", err)
				continue
			}
			if p.Hash == g.Policy().Hash {
				log.Info("latch serve: SIGHUP: the policy file is the policy in force", "policy_hash", p.Hash)
				continue
			}
			if err := g.SetPolicy(rctx, p); err != nil {
				log.Error("latch serve: SIGHUP: policy not put in force", "policy_hash", p.Hash, "reason", latch.ReasonOf(err), "err", err)
				continue
			}
			log.Info("latch serve: SIGHUP: policy reloaded", "policy_hash", p.Hash)
		}
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		<-done
	}
}

// notifier builds the alert notifier of --notify: the secret comes from a file, never the
// command line (which other users of the host can read), or from $LATCH_NOTIFY_SECRET.
func (a *app) notifier(urls []string, format, secretFile string, budgetShare float64, slackButtons bool, m *metrics.Sink, log *slog.Logger) (*notify.Notifier, error) {
	var secret []byte
	switch {
	case secretFile != "":
		b, err := os.ReadFile(secretFile)
		if err != nil {
			return nil, fmt.Errorf("--notify-secret-file: %w", err)
		}
		if secret = []byte(strings.TrimSpace(string(b))); len(secret) == 0 {
			return nil, fmt.Errorf("--notify-secret-file %s is empty", secretFile)
		}
	case a.getenv("LATCH_NOTIFY_SECRET") != "":
		secret = []byte(a.getenv("LATCH_NOTIFY_SECRET"))
	case format == notify.FormatJSON:
		return nil, usagef("--notify needs a secret to sign alerts: --notify-secret-file FILE or $LATCH_NOTIFY_SECRET")
	}
	cfg := &notify.Config{URLs: urls, Secret: secret, Format: format, Logger: log, BudgetShare: budgetShare,
		SlackButtons: slackButtons && format == notify.FormatSlack}
	if m != nil {
		cfg.Failures = m
	}
	n, err := notify.New(cfg)
	if err != nil {
		return nil, usagef("%s", strings.TrimPrefix(err.Error(), "notify: "))
	}
	return n, nil
}

// watchBudgets reads the budgets' consumption every interval until ctx ends or the returned
// stop is called (which waits for it): the gauge latch_budget_consumption_ratio, and the
// notifier's threshold alerts when n is not nil.
func (a *app) watchBudgets(ctx context.Context, g *latch.Guard, every time.Duration, m *metrics.Sink, n *notify.Notifier, log *slog.Logger) (stop func()) {
	o := a.operatorOf(g.Store(), g.Policy(), nil)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.WatchBudgets(wctx, every, func(list []jsonview.Budget, err error) {
			if err != nil {
				log.Error("latch serve: read budgets", "err", err)
				return
			}
			levels := make([]metrics.BudgetLevel, len(list))
			alerts := make([]notify.BudgetLevel, len(list))
			for i, b := range list {
				name := b.Budget
				if b.Action != nil {
					name = *b.Action // the action's, never the principal's: bounded labels
				}
				levels[i] = metrics.BudgetLevel{Kind: b.Kind, Budget: name, Metric: b.Metric, Ratio: b.Ratio}
				alerts[i] = notify.BudgetLevel{Budget: b.Budget, Kind: b.Kind, Metric: b.Metric, Consumed: b.Consumed, Limit: b.Limit,
					Window: b.Window, Ratio: b.Ratio}
			}
			m.SetBudgets(levels)
			if n != nil {
				n.Budgets(alerts)
			}
		})
	}()
	return func() { cancel(); <-done }
}

func (a *app) tokenCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke the API tokens of latch serve",
		Long: `API tokens authenticate callers of 'latch serve'. An agent token's calls are that
principal's (--agent, optional --user); an approver token answers approvals and resolves
effects as its name (--approver). The secret is printed once: the store keeps only its
SHA-256.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("say what to do: create, list or revoke")
		},
	}
	cmd.AddCommand(a.tokenCreateCommand(), a.tokenListCommand(), a.tokenRevokeCommand())
	for _, c := range cmd.Commands() {
		c.SilenceErrors, c.SilenceUsage = true, true
	}
	return cmd
}

// tokenJSON is a token as `latch token list --json` and `create --json` print it.
type tokenJSON struct {
	Token     string  `json:"token,omitempty"` // the secret: only when created
	ID        string  `json:"id"`
	Kind      string  `json:"kind"`
	Agent     *string `json:"agent"`
	User      *string `json:"user"`
	Approver  *string `json:"approver"`
	CreatedAt *string `json:"created_at"`
	ExpiresAt *string `json:"expires_at"`
	RevokedAt *string `json:"revoked_at"`
}

func newTokenJSON(t *store.Token) tokenJSON {
	return tokenJSON{ID: t.ID, Kind: t.Kind, Agent: jstr(t.Agent), User: jstr(t.User), Approver: jstr(t.Approver),
		CreatedAt: jstamp(t.CreatedAt), ExpiresAt: jstamp(t.ExpiresAt), RevokedAt: jstamp(t.RevokedAt)}
}

// parseTTL reads a duration with a day unit as well: 30d, 12h, 90m.
func parseTTL(s string) (time.Duration, error) {
	d, ok := policy.ParseDays(s)
	if !ok || d <= 0 {
		return 0, fmt.Errorf("--expires %q: want a positive number of days (30d) or a duration (12h)", s)
	}
	return d, nil
}

// openTokens opens the store for writing tokens, creating and migrating it if needed: the
// first token is usually created before the first `latch serve`.
func (a *app) openTokens(write bool) (store.Store, store.TokenStore, error) {
	return openStoreAs[store.TokenStore](a, write, "tokens")
}

// openStoreAs opens the store — for writing, creating and migrating it if needed; else
// read-only — and returns it with its T side (the tokens or accounts it keeps, named what).
func openStoreAs[T any](a *app, write bool, what string) (store.Store, T, error) {
	var st store.Store
	var zero T
	var err error
	if write {
		var u string
		if u, err = a.storeURL(); err != nil {
			return nil, zero, err
		}
		if st, err = latch.OpenStore(a.ctx, u, nil); err != nil {
			return nil, zero, errors.New(reason(err))
		}
	} else if st, err = a.openRead(); err != nil {
		return nil, zero, err
	}
	t, ok := st.(T)
	if !ok {
		st.Close()
		return nil, zero, fmt.Errorf("store %T keeps no %s", st, what)
	}
	return st, t, nil
}

func (a *app) tokenCreateCommand() *cobra.Command {
	var agent, user, approver, expires string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "create --agent NAME [--user U] | --approver NAME [--expires 30d] [--json]",
		Short: "Create a token and print its secret, once",
		Example: `  latch token create --agent billing-worker --expires 30d
  latch token create --approver alice`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := &auth.NewToken{Kind: store.TokenAgent, Agent: agent, User: user}
			switch {
			case agent != "" && approver != "":
				return usagef("a token is for an agent or an approver, not both")
			case approver != "":
				if user != "" {
					return usagef("--user goes with --agent")
				}
				req = &auth.NewToken{Kind: store.TokenApprover, Approver: approver}
			case agent == "":
				return usagef("say whose token it is: --agent NAME or --approver NAME")
			}
			if expires != "" {
				d, err := parseTTL(expires)
				if err != nil {
					return usagef("%s", err.Error())
				}
				req.TTL = d
			}
			st, ts, err := a.openTokens(true)
			if err != nil {
				return err
			}
			defer st.Close()
			secret, tk, err := auth.CreateToken(a.ctx, ts, req, a.now())
			if err != nil {
				return err
			}
			if asJSON {
				j := newTokenJSON(tk)
				j.Token = secret
				return jsonLine(a.stdout, j)
			}
			fmt.Fprintln(a.stdout, secret)
			who := "agent " + tk.Agent
			if tk.User != "" {
				who += "/" + tk.User
			}
			if tk.Kind == store.TokenApprover {
				who = "approver " + tk.Approver
			}
			exp := "never expires"
			if !tk.ExpiresAt.IsZero() {
				exp = "expires " + stamp(tk.ExpiresAt)
			}
			fmt.Fprintf(a.stderr, "created %s for %s (%s); the secret above is shown once: only its SHA-256 is stored\n", tk.ID, who, exp)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&agent, "agent", "", "the agent whose calls the token makes")
	f.StringVar(&user, "user", "", "the user the agent acts for (optional)")
	f.StringVar(&approver, "approver", "", "an approver token: answers approvals and resolves effects as `NAME`")
	f.StringVar(&expires, "expires", "", "expire after `DURATION` (30d, 12h); default never")
	f.BoolVar(&asJSON, "json", false, `print {"token": …, "id": …, …} as one JSON object`)
	return cmd
}

func (a *app) tokenListCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List tokens (never their secrets)",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, ts, err := a.openTokens(false)
			if err != nil {
				return err
			}
			defer st.Close()
			list, err := ts.Tokens(a.ctx)
			if err != nil {
				return err
			}
			if asJSON {
				for _, tk := range list {
					if err := jsonLine(a.stdout, newTokenJSON(tk)); err != nil {
						return err
					}
				}
				return nil
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tKIND\tFOR\tCREATED\tEXPIRES\tREVOKED")
			for _, tk := range list {
				who := principal(tk.Agent, tk.User)
				if tk.Kind == store.TokenApprover {
					who = cell(tk.Approver)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", tk.ID, tk.Kind, who, stamp(tk.CreatedAt), stamp(tk.ExpiresAt), stamp(tk.RevokedAt))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON Lines")
	return cmd
}

func (a *app) tokenRevokeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token: servers refuse it from their next request (or within their --token-cache)",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, pos []string) error {
			// Read-only first: revoking in a store that does not exist refuses instead of creating it.
			st, _, err := a.openTokens(false)
			if err != nil {
				return err
			}
			st.Close()
			st, ts, err := a.openTokens(true)
			if err != nil {
				return err
			}
			defer st.Close()
			tk, err := ts.RevokeToken(a.ctx, pos[0], a.now())
			switch {
			case errors.Is(err, store.ErrNotFound):
				return fmt.Errorf("no token %s in this store", pos[0])
			case errors.Is(err, store.ErrRevoked):
				return fmt.Errorf("token %s is already revoked", pos[0])
			case err != nil:
				return err
			}
			fmt.Fprintf(a.stdout, "revoked %s at %s\n", tk.ID, stamp(tk.RevokedAt))
			return nil
		},
	}
}

// parseProxy reads an address or a CIDR prefix.
func parseProxy(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not an address or a CIDR prefix", s)
		}
		return p.Masked(), nil
	}
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an address or a CIDR prefix", s)
	}
	ip = ip.Unmap()
	return netip.PrefixFrom(ip, ip.BitLen()), nil
}
