package console

import (
	"crypto/ed25519"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/store"
)

// Defaults of Config.
const (
	DefaultSessionTTL  = 8 * time.Hour
	DefaultIdleTimeout = 30 * time.Minute
	DefaultProxyHeader = "X-Forwarded-User"
)

// Methods by which a console user was authenticated, recorded with each answer.
const (
	MethodSession = store.MethodSession // a local approver account's password, then a session cookie
	MethodProxy   = store.MethodProxy   // the trusted proxy's header
)

// Config configures a Console. The zero value (or nil) is a console for local accounts only,
// with insecure cookies (for http://127.0.0.1).
type Config struct {
	// Secure marks the cookies Secure (and names the session cookie with the __Host- prefix):
	// set it whenever browsers reach the console over HTTPS, directly or through a proxy.
	Secure bool
	// SessionTTL bounds a session from login; IdleTimeout from its last request.
	SessionTTL  time.Duration
	IdleTimeout time.Duration
	// TrustedProxies are the addresses of the single-sign-on proxies whose ProxyHeader names the
	// person. A request that carries the header from any other address is refused. Empty: no
	// proxy mode, and the header is refused from everyone.
	TrustedProxies []netip.Prefix
	// ProxyHeader names the person in proxy mode; default X-Forwarded-User.
	ProxyHeader string
	// LoginConcurrency bounds the password checks (bcrypt, about a quarter of a second of one
	// core each) that run at once; a login beyond it is refused with 429 rather than queued, so
	// that logins cannot starve the API of CPU. Default DefaultLoginConcurrency().
	LoginConcurrency int
	Logger           *slog.Logger
	Now              func() time.Time
	// CheckpointKey is the public key of the store's signed checkpoints: with it, the Receipts
	// page checks every checkpoint against the chain; nil leaves them unchecked.
	CheckpointKey ed25519.PublicKey

	checkPassword func(hash, password string) error // CheckPassword; the package's tests count the calls
}

// Console is the web console of one guard. It is safe for concurrent use.
type Console struct {
	g        *latch.Guard
	op       *operator.Operator // the operator's questions, answered as on every surface
	accounts store.AccountStore
	cfg      Config
	log      *slog.Logger
	pages    map[string]*template.Template
	sessions *sessions
	names    *limiter // wrong passwords per account name
	addrs    *limiter // and per client address
	checks   gate     // the password checks running
	mux      *http.ServeMux
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New builds the console of guard g, whose store must keep approver accounts and console
// sessions (both built-in stores do).
func New(g *latch.Guard, cfg *Config) (*Console, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if g == nil {
		return nil, errors.New("console: no guard")
	}
	as, ok := g.Store().(store.AccountStore)
	if !ok {
		return nil, fmt.Errorf("console: store %T keeps no approver accounts", g.Store())
	}
	ss, ok := g.Store().(store.SessionStore)
	if !ok {
		return nil, fmt.Errorf("console: store %T keeps no console sessions", g.Store())
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.SessionTTL < 0 || c.IdleTimeout < 0 {
		return nil, errors.New("console: negative session lifetime")
	}
	if c.ProxyHeader == "" {
		c.ProxyHeader = DefaultProxyHeader
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	if c.LoginConcurrency == 0 {
		c.LoginConcurrency = DefaultLoginConcurrency()
	}
	if c.LoginConcurrency < 0 {
		return nil, errors.New("console: negative login concurrency")
	}
	if c.checkPassword == nil {
		c.checkPassword = CheckPassword
	}
	op, err := operator.New(&operator.Config{Store: g.Store(), Policy: g.Policy(), Now: c.Now, CheckpointKey: c.CheckpointKey})
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	cs := &Console{g: g, op: op, accounts: as, cfg: c, log: c.Logger, pages: pages,
		sessions: newSessions(ss, c.SessionTTL, c.IdleTimeout, c.Now, c.Logger), names: newLimiter(limitFree, c.Now), addrs: newLimiter(limitFreeAddr, c.Now),
		checks: make(gate, c.LoginConcurrency)}
	cs.mux = cs.routes()
	return cs, nil
}

// Routes lists the path patterns the console serves, for a server that mounts it beside its
// own routes.
func (cs *Console) Routes() []string {
	return []string{"/{$}", "/login", "/logout", "/approvals", "/approvals/{id}", "/approvals/{id}/answer",
		"/attention", "/effects/{ref}/resolve", "/receipts", "/receipts/{seq}", "/budgets", "/coverage", "/break-glass", "/break-glass/{id}/open", "/standing", "/standing/{id}/revoke", "/static/"}
}

// ServeHTTP serves the console's pages.
func (cs *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: under no-referrer a browser sends "Origin: null" with its own
	// forms, which sameOrigin must refuse.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if cs.cfg.Secure {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	cs.mux.ServeHTTP(w, r)
}

func (cs *Console) routes() *http.ServeMux {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix("/static/", http.FileServerFS(static))
	mux.Handle("GET /static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	}))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/approvals", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /login", cs.loginPage)
	mux.HandleFunc("POST /login", cs.login)
	mux.HandleFunc("POST /logout", cs.signedIn(cs.logout))
	mux.HandleFunc("GET /approvals", cs.signedIn(cs.approvalsPage))
	mux.HandleFunc("GET /approvals/{id}", cs.signedIn(cs.approvalPage))
	mux.HandleFunc("POST /approvals/{id}/answer", cs.signedIn(cs.answer))
	mux.HandleFunc("GET /attention", cs.signedIn(cs.attentionPage))
	mux.HandleFunc("POST /effects/{ref}/resolve", cs.signedIn(cs.resolve))
	mux.HandleFunc("GET /receipts", cs.signedIn(cs.receiptsPage))
	mux.HandleFunc("GET /receipts/{seq}", cs.signedIn(cs.receiptPage))
	mux.HandleFunc("GET /budgets", cs.signedIn(cs.budgetsPage))
	mux.HandleFunc("GET /coverage", cs.signedIn(cs.coveragePage))
	mux.HandleFunc("GET /break-glass", cs.signedIn(cs.breakGlassPage))
	mux.HandleFunc("POST /break-glass/{id}/open", cs.signedIn(cs.openBreakGlass))
	mux.HandleFunc("GET /standing", cs.signedIn(cs.standingPage))
	mux.HandleFunc("POST /standing/{id}/revoke", cs.signedIn(cs.revokeStanding))
	return mux
}

// viewer is the person a request is from.
type viewer struct {
	Name   string
	Method string // MethodSession or MethodProxy
	Roles  []string
	CSRF   string
	secret string
}

// sessionCookie is the name of the session cookie.
func (cs *Console) sessionCookie() string {
	if cs.cfg.Secure {
		return "__Host-latch_session"
	}
	return "latch_session"
}

func (cs *Console) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: cs.cfg.Secure, SameSite: http.SameSiteStrictMode})
}

// refusal is a request refused before any handler ran.
type refusal struct {
	status int
	msg    string
}

// who authenticates r: by the trusted proxy's header, or by a session cookie. A nil viewer
// and a nil refusal mean nobody is logged in.
func (cs *Console) who(w http.ResponseWriter, r *http.Request) (*viewer, *refusal) {
	ctx := r.Context()
	var secret string
	if ck, err := r.Cookie(cs.sessionCookie()); err == nil {
		secret = ck.Value
	}
	unavailable := func(err error) *refusal {
		return &refusal{http.StatusServiceUnavailable, "The store does not answer: " + err.Error()}
	}
	if hv, ok := r.Header[http.CanonicalHeaderKey(cs.cfg.ProxyHeader)]; ok {
		if !cs.fromProxy(r) {
			cs.log.Warn("latch console: proxy header from an untrusted address refused", "remote", r.RemoteAddr, "header", cs.cfg.ProxyHeader)
			return nil, &refusal{http.StatusForbidden, fmt.Sprintf("The %s header is accepted only from the configured proxy addresses; this request came from %s.", cs.cfg.ProxyHeader, remoteIP(r))}
		}
		name, err := store.NormalizeApprover(strings.Join(hv, ","))
		if err != nil || len(hv) != 1 {
			return nil, &refusal{http.StatusForbidden, "The proxy's " + cs.cfg.ProxyHeader + " header does not name one person."}
		}
		s, err := cs.sessions.get(ctx, secret, true)
		if err != nil {
			return nil, unavailable(err)
		}
		if s == nil || s.method != MethodProxy || s.name != name {
			if s != nil {
				if err := cs.sessions.end(ctx, secret); err != nil {
					return nil, unavailable(err)
				}
			}
			if secret, s, err = cs.sessions.create(ctx, name, MethodProxy); err != nil {
				return nil, unavailable(err)
			}
			cs.setCookie(w, cs.sessionCookie(), secret, 0)
		}
		v := cs.viewerOf(s, secret)
		if a, err := cs.accounts.Account(ctx, name); err == nil {
			v.Roles = a.Roles // a proxy's person may also have an account with roles
		}
		return v, nil
	}
	s, err := cs.sessions.get(ctx, secret, true)
	switch {
	case err != nil:
		return nil, unavailable(err)
	case s == nil:
		return nil, nil
	case s.method == MethodProxy:
		// The proxy authenticates every request: a proxy session used without it is void.
		if err := cs.sessions.end(ctx, secret); err != nil {
			return nil, unavailable(err)
		}
		return nil, nil
	}
	a, err := cs.accounts.Account(ctx, s.name)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			cs.sessions.endAll(ctx, s.name) // the account was removed
			return nil, nil
		}
		return nil, unavailable(err)
	}
	v := cs.viewerOf(s, secret)
	v.Roles = a.Roles // the one read of the account serves both
	return v, nil
}

func (cs *Console) viewerOf(s *session, secret string) *viewer {
	return &viewer{Name: s.name, Method: s.method, CSRF: s.csrf, secret: secret}
}

// fromProxy reports whether r came from a trusted proxy address.
func (cs *Console) fromProxy(r *http.Request) bool {
	ip := remoteIP(r)
	if !ip.IsValid() {
		return false
	}
	for _, p := range cs.cfg.TrustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

func remoteIP(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, _ := netip.ParseAddr(host)
	return ip.Unmap()
}

// Approver returns the name of the person r is logged in as, for the routes of the HTTP API
// that a logged-in console may read (the event stream). It reads the session from the store each
// time, so a session ended anywhere — a logout on another replica, the account removed — is
// refused at once; it never creates a session, nor counts as a request that keeps one alive.
func (cs *Console) Approver(r *http.Request) (string, bool) {
	ck, err := r.Cookie(cs.sessionCookie())
	if err != nil {
		return "", false
	}
	hv, proxied := r.Header[http.CanonicalHeaderKey(cs.cfg.ProxyHeader)]
	if proxied && !cs.fromProxy(r) {
		return "", false
	}
	s, err := cs.sessions.get(r.Context(), ck.Value, false)
	if err != nil || s == nil {
		return "", false
	}
	if proxied {
		name, err := store.NormalizeApprover(strings.Join(hv, ","))
		if err != nil || len(hv) != 1 || s.method != MethodProxy || s.name != name {
			return "", false
		}
		return s.name, true
	}
	if s.method != MethodSession {
		return "", false
	}
	if _, err := cs.accounts.Account(r.Context(), s.name); err != nil {
		return "", false
	}
	return s.name, true
}

// signedIn runs h for a logged-in person; a POST also needs the session's CSRF token and a
// same-origin Origin (when the browser sends one). Anyone else is sent to the login page (a
// GET) or refused (a POST), and nothing is written.
func (cs *Console) signedIn(h func(http.ResponseWriter, *http.Request, *viewer)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		v, ref := cs.who(w, r)
		if ref != nil {
			cs.fail(w, r, nil, ref.status, ref.msg)
			return
		}
		if v == nil {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(cs.safeNext(r.URL.RequestURI())), http.StatusSeeOther)
				return
			}
			cs.fail(w, r, nil, http.StatusUnauthorized, "You are not logged in, or your session expired: log in again. Nothing was changed.")
			return
		}
		if r.Method == http.MethodPost {
			if err := r.ParseForm(); err != nil {
				cs.fail(w, r, v, http.StatusBadRequest, "The form could not be read: "+err.Error())
				return
			}
			if !sameOrigin(r) || !sameToken(r.PostForm.Get("csrf"), v.CSRF) {
				cs.log.Warn("latch console: form without a valid CSRF token refused", "user", v.Name, "path", r.URL.Path)
				cs.fail(w, r, v, http.StatusForbidden, "The form's security token is missing or wrong (was it sent from another site, or from a page older than your session?). Nothing was changed: reload the page and try again.")
				return
			}
		}
		h(w, r, v)
	}
}

// sameOrigin refuses a POST whose Origin header names another origin. Browsers send Origin on
// every POST; a request without one (a script) still needs the CSRF token.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	if o == "null" {
		return false
	}
	_, host, ok := strings.Cut(o, "://")
	return ok && strings.EqualFold(host, r.Host)
}

// home is where a person lands after login when no page of the console was asked for.
const home = "/approvals"

// safeNext returns p when it is a page of the console to return to after login, and home
// otherwise. p must be a path on this origin as every browser reads it: printable ASCII only (a
// browser drops tabs and line breaks from a URL, so "/\t/evil" would read as "//evil", another
// site), no backslash (read as a slash), no scheme or host, not starting with "//", already
// clean (no dot segments, no doubled or escaped slashes) — and one that the console serves to a
// GET, so that nothing outside the console is reached through it.
func (cs *Console) safeNext(p string) string {
	if p == "" || len(p) > 2048 || p[0] != '/' || strings.HasPrefix(p, "//") {
		return home
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c >= 0x7f || c == '\\' {
			return home
		}
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || u.Fragment != "" ||
		u.RawPath != "" || path.Clean(u.Path) != u.Path {
		return home
	}
	if _, pattern := cs.mux.Handler(&http.Request{Method: http.MethodGet, URL: &url.URL{Path: u.Path}}); !strings.HasPrefix(pattern, "GET /") ||
		pattern == "GET /static/" || pattern == "GET /login" {
		return home
	}
	return p
}

// loginData is the login page.
type loginData struct {
	base
	Next   string
	Name   string
	Token  string
	Error  string
	Proxy  bool
	Header string
}

const loginCookie = "latch_login"

// loginPage is GET /login.
func (cs *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if v, _ := cs.who(w, r); v != nil {
		http.Redirect(w, r, cs.safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	cs.renderLogin(w, r, http.StatusOK, r.URL.Query().Get("next"), "", "")
}

func (cs *Console) renderLogin(w http.ResponseWriter, r *http.Request, status int, next, name, msg string) {
	tok := randomToken()
	cs.setCookie(w, loginCookie, tok, 600)
	cs.render(w, status, "login", &loginData{base: base{Title: "Log in"}, Next: cs.safeNext(next), Name: name, Token: tok,
		Error: msg, Proxy: len(cs.cfg.TrustedProxies) > 0, Header: cs.cfg.ProxyHeader})
}

// login is POST /login: a local account's name and password. Wrong passwords are counted per
// account and per client address, and too many lock both for a while.
func (cs *Console) login(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if err := r.ParseForm(); err != nil {
		cs.renderLogin(w, r, http.StatusBadRequest, "", "", "The form could not be read.")
		return
	}
	next, name, password := r.PostForm.Get("next"), r.PostForm.Get("name"), r.PostForm.Get("password")
	ck, err := r.Cookie(loginCookie)
	if err != nil || !sameOrigin(r) || !sameToken(r.PostForm.Get("csrf"), ck.Value) {
		cs.renderLogin(w, r, http.StatusForbidden, next, name, "The login form's security token is missing or wrong: try again from this page.")
		return
	}
	n, nerr := store.NormalizeApprover(name)
	addr, key := remoteIP(r).String(), store.NameKey(n)
	// The attempt is counted against the name and the address before its password is checked:
	// guesses sent at once cannot all be checked before the first failure counts.
	if d := cs.reserve(key, addr); d > 0 {
		cs.log.Warn("latch console: login refused while locked", "name", n, "remote", r.RemoteAddr)
		w.Header().Set("Retry-After", fmt.Sprint(int(d.Seconds())+1))
		msg := fmt.Sprintf("Too many wrong passwords: try again in %s.", d.Round(time.Second))
		if d <= limitBusy {
			msg = "Too many login attempts at once for this name or address: try again in a moment."
		}
		cs.renderLogin(w, r, http.StatusTooManyRequests, next, name, msg)
		return
	}
	acct, err := cs.checkLogin(r, n, nerr == nil, password)
	wrong := acct == nil && err == nil
	cs.names.end(wrong, key)
	cs.addrs.end(wrong, addr)
	switch {
	case errors.Is(err, errBusy):
		w.Header().Set("Retry-After", "1")
		cs.renderLogin(w, r, http.StatusTooManyRequests, next, name, "Too many logins at once: try again in a moment.")
		return
	case err != nil:
		cs.renderLogin(w, r, http.StatusServiceUnavailable, next, name, "The store does not answer; try again.")
		return
	case wrong:
		cs.log.Info("latch console: wrong name or password", "name", n, "remote", r.RemoteAddr)
		cs.renderLogin(w, r, http.StatusUnauthorized, next, name, "Wrong name or password.")
		return
	}
	cs.names.clear(store.NameKey(acct.Name))
	secret, _, err := cs.sessions.create(r.Context(), acct.Name, MethodSession)
	if err != nil {
		cs.renderLogin(w, r, http.StatusServiceUnavailable, next, name, "The session could not be stored; try again.")
		return
	}
	cs.setCookie(w, cs.sessionCookie(), secret, 0)
	cs.setCookie(w, loginCookie, "", -1)
	cs.log.Info("latch console: logged in", "name", acct.Name, "remote", r.RemoteAddr)
	http.Redirect(w, r, cs.safeNext(next), http.StatusSeeOther)
}

// errBusy refuses a login while LoginConcurrency password checks are running.
var errBusy = errors.New("too many logins at once")

// reserve begins a login attempt against the account name key and the client address addr, or
// against neither: 0 when the password may be checked (end both after), else how long to wait.
func (cs *Console) reserve(key, addr string) time.Duration {
	if d := cs.names.begin(key); d > 0 {
		return d
	}
	if d := cs.addrs.begin(addr); d > 0 {
		cs.names.end(false, key)
		return d
	}
	return 0
}

// checkLogin checks the password of the account named n (a valid name when valid) inside the
// gate, and returns the account when the password is right; nil and no error when it is wrong
// or there is no such account; errBusy, without a check, when the gate is full; another error
// when the store does not answer. A name with no account is checked against a dummy hash, so
// that it takes as long to refuse as a wrong password.
func (cs *Console) checkLogin(r *http.Request, n string, valid bool, password string) (*store.Account, error) {
	if !cs.checks.enter() {
		return nil, errBusy
	}
	defer cs.checks.leave()
	var acct *store.Account
	if valid {
		a, err := cs.accounts.Account(r.Context(), n)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return nil, err
		default:
			acct = a
		}
	}
	if acct == nil {
		_ = cs.cfg.checkPassword(string(dummyHash()), password) // as slow as a real check
		return nil, nil
	}
	err := cs.cfg.checkPassword(acct.PasswordHash, password)
	switch {
	case err == nil:
		return acct, nil
	case !errors.Is(err, ErrWrongPassword):
		cs.log.Error("latch console: unreadable password hash", "name", acct.Name, "err", err)
	}
	return nil, nil
}

// logout is POST /logout.
func (cs *Console) logout(w http.ResponseWriter, r *http.Request, v *viewer) {
	if err := cs.sessions.end(r.Context(), v.secret); err != nil {
		cs.fail(w, r, v, http.StatusServiceUnavailable, "You are not logged out: the store does not answer ("+err.Error()+"). Try again.")
		return
	}
	cs.setCookie(w, cs.sessionCookie(), "", -1)
	if v.Method == MethodProxy {
		cs.render(w, http.StatusOK, "message", &messageData{base: base{Title: "Logged out"},
			Message: "You are logged out of latch. Your single sign-on session may still be open."})
		return
	}
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
