// Package consoletest starts a real `latch serve` server — guard, store, HTTP on 127.0.0.1 —
// with its web console, for the tests of the console: the Go tests of server/console and the
// browser tests that drive it with chromium.
package consoletest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/latchkit/latch/auth"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/server"
	"github.com/latchkit/latch/server/console"
	"github.com/latchkit/latch/store"
)

// Policy is the policy of the test servers: refunds above 500.00 need an approval by one of
// the payments leads (listed, or accounts with the role); payouts need two, verified; a charge
// (of any invoice id an agent sends) and a merge run without one.
const Policy = `schema: latch.policy/v1
version: "2026-11-29"
approvers:
  roles:
    payments-leads: [dana]
    treasury: []
actions:
  billing.refund:
    effect: "refund:{order_id}"
    resource: "order:{order_id}"
    arguments:
      order_id: { type: string, max_length: 64, display: { label: Order } }
      amount:
        type: integer
        min: 1
        display: { label: Refund, money: { minor_units: 2, currency_arg: currency } }
      currency: { type: string, enum: [EUR, USD, JPY, KWD] }
    rules:
      - when: { amount_lte: 50000 }
        decision: allow
      - decision: approve
    approvers:
      roles: [payments-leads]
  payout.send:
    effect: "payout:{payout_id}"
    arguments:
      payout_id: { type: string }
      amount: { type: integer, min: 1, display: { label: Amount, money: { minor_units: 2, currency: EUR } } }
    decision: approve
    approvers:
      roles: [treasury]
      required: 2
      verified: true
  pay.charge:
    effect: "pay:{invoice}"
    arguments:
      invoice: { type: string }
    decision: allow
  git.merge:
    effect: "merge:{repo}:{number}"
    arguments:
      repo: { type: string }
      number: { type: integer, min: 1 }
    decision: allow
`

// Clock is real time shifted by an offset a test moves forward.
type Clock struct {
	mu  sync.Mutex
	off time.Duration
}

// Now is the shifted time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

// Add moves the clock forward by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}

// Options adjusts a test server.
type Options struct {
	Backend string // "sqlite" (default) or "postgres"
	// StoreURL, when set, is the store to serve instead of a fresh one: another Server's, for a
	// replica or a restart.
	StoreURL string
	Policy   string // default Policy
	Console  console.Config
	// Wrap, when set, is given the opened store and returns the one the guard uses (a test
	// that counts what the console reads wraps it).
	Wrap func(store.Store) store.Store
}

// Server is a running test server.
type Server struct {
	URL      string
	StoreURL string
	Guard    *latch.Guard
	Clock    *Clock
	// Agent is an agent token of billing-worker; Approver an approver token of "operator".
	Agent, Approver string

	stop func()
}

// Stop stops the server and closes its guard, as a restart or a replica's end would, before
// the test ends.
func (s *Server) Stop() { s.stop() }

// Start runs a server on 127.0.0.1 until the test ends.
func Start(t testing.TB, o *Options) *Server {
	t.Helper()
	if o == nil {
		o = &Options{}
	}
	backend, doc := o.Backend, o.Policy
	if backend == "" {
		backend = "sqlite"
	}
	if doc == "" {
		doc = Policy
	}
	p, err := policy.Parse("latch.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	clk := &Clock{}
	storeURL := o.StoreURL
	if storeURL == "" {
		storeURL = testdb.URL(t, backend, "latch_console")
	}
	cfg := &latch.Config{Policy: p, StoreURL: storeURL, Now: clk.Now}
	if o.Wrap != nil {
		st, err := latch.OpenStore(context.Background(), cfg.StoreURL, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Store, cfg.StoreURL = o.Wrap(st), ""
	}
	g, err := latch.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cc := o.Console
	s, err := server.New(g, &server.Config{Now: clk.Now, Console: &cc})
	if err != nil {
		g.Close()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
			g.Close()
		})
	}
	t.Cleanup(stop)
	out := &Server{URL: "http://" + ln.Addr().String(), StoreURL: storeURL, Guard: g, Clock: clk, stop: stop}
	out.Agent = out.token(t, &auth.NewToken{Kind: store.TokenAgent, Agent: "billing-worker"})
	out.Approver = out.ApproverToken(t, "operator")
	return out
}

func (s *Server) token(t testing.TB, req *auth.NewToken) string {
	t.Helper()
	secret, _, err := auth.CreateToken(context.Background(), s.Guard.Store().(store.TokenStore), req, s.Clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// ApproverToken creates an approver token of name, as `latch token create --approver` does,
// and returns its secret.
func (s *Server) ApproverToken(t testing.TB, name string) string {
	t.Helper()
	return s.token(t, &auth.NewToken{Kind: store.TokenApprover, Approver: name})
}

// Written is what the store holds that an answer or a resolution would change: the number of
// events and of receipts. A refused form must leave both as they were.
func (s *Server) Written(t testing.TB) (events, receipts int) {
	t.Helper()
	evs, err := s.Guard.Store().Events(context.Background(), store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range s.Guard.Store().Receipts(context.Background(), store.ReceiptFilter{}) {
		if err != nil {
			t.Fatal(err)
		}
		receipts++
	}
	return len(evs), receipts
}

// Ambiguous runs git.merge of pull request number in repository latch as billing-worker, with
// an executor that fails with msg — a lost reply — so that effect merge:latch:NUMBER is left
// ambiguous; it returns the effect key.
func (s *Server) Ambiguous(t testing.TB, number int, msg string) string {
	t.Helper()
	_, err := s.Guard.Execute(latch.WithPrincipal(context.Background(), latch.Principal{Agent: "billing-worker"}),
		&latch.Call{Action: "git.merge", Arguments: json.RawMessage(fmt.Sprintf(`{"repo":"latch","number":%d}`, number))},
		func(context.Context, json.RawMessage) (any, error) { return nil, errors.New(msg) })
	if !errors.Is(err, latch.ErrAmbiguous) {
		t.Fatalf("Execute(git.merge %d) = %v, want ambiguous", number, err)
	}
	return fmt.Sprintf("merge:latch:%d", number)
}

// AmbiguousCharge runs pay.charge of invoice as billing-worker with an executor whose reply is
// lost, so that effect pay:INVOICE is left ambiguous; it returns the effect key. The invoice id is
// whatever the agent sent: a test gives hostile ones.
func (s *Server) AmbiguousCharge(t testing.TB, invoice string) string {
	t.Helper()
	args, err := json.Marshal(map[string]string{"invoice": invoice})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Guard.Execute(latch.WithPrincipal(context.Background(), latch.Principal{Agent: "billing-worker"}),
		&latch.Call{Action: "pay.charge", Arguments: args},
		func(context.Context, json.RawMessage) (any, error) {
			return nil, errors.New("read tcp: connection reset by peer")
		})
	if !errors.Is(err, latch.ErrAmbiguous) {
		t.Fatalf("Execute(pay.charge %q) = %v, want ambiguous", invoice, err)
	}
	return "pay:" + invoice
}

// AddAccount creates a local approver account as `latch approver add` does, but with bcrypt's
// lowest cost: the race detector makes the default cost take seconds.
func (s *Server) AddAccount(t testing.TB, name, password string, roles ...string) {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	a := &store.Account{Name: name, PasswordHash: string(h), Roles: store.SortRoles(roles), CreatedAt: s.Clock.Now().UTC()}
	if err := s.Guard.Store().(store.AccountStore).CreateAccount(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

// Client is a browser-like HTTP client (a cookie jar, no redirects followed) bound to a local
// address: a Server's trusted proxy is told apart from others by its address on the loopback.
func Client(t testing.TB, local string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	d := &net.Dialer{Timeout: 5 * time.Second}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	return &http.Client{Jar: jar, Timeout: 30 * time.Second,
		Transport:     &http.Transport{DialContext: d.DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// CSRF returns the CSRF token of the first form of an HTML page.
func CSRF(page string) string {
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return m[1]
}

// ResolveForm returns the action and the seen value of the resolve form on key's card of the
// Needs attention page, as a browser would submit them ("" when the page shows no such card).
// The form names its effect by the key's base64url bytes, never by the key itself.
func ResolveForm(page, key string) (action, seen string) {
	action = "/effects/" + base64.RawURLEncoding.EncodeToString([]byte(key)) + "/resolve"
	i := strings.Index(page, `action="`+action+`"`)
	if i < 0 {
		return "", ""
	}
	form, _, _ := strings.Cut(page[i:], "</form>")
	m := seenField.FindStringSubmatch(form)
	if m == nil {
		return "", ""
	}
	return action, m[1]
}

var seenField = regexp.MustCompile(`name="seen" value="([^"]*)"`)

// Page is a response read whole.
type Page struct {
	Status   int
	Header   http.Header
	Body     string
	Location string // of a redirect
}

// Login logs c in through the login form and returns the answer to the form's POST.
func Login(t testing.TB, c *http.Client, base, name, password string) *Page {
	t.Helper()
	page := Get(t, c, base+"/login")
	return Post(t, c, base+"/login", url.Values{"csrf": {CSRF(page.Body)}, "name": {name}, "password": {password}, "next": {"/approvals"}})
}

// Get fetches u.
func Get(t testing.TB, c *http.Client, u string) *Page {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Do(t, c, req)
}

// Post sends a form to u.
func Post(t testing.TB, c *http.Client, u string, form url.Values) *Page {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return Do(t, c, req)
}

// Do sends req and reads the whole answer.
func Do(t testing.TB, c *http.Client, req *http.Request) *Page {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &Page{Status: resp.StatusCode, Header: resp.Header, Body: string(b), Location: resp.Header.Get("Location")}
}

// Prefix is the one-address prefix of ip, for Console.TrustedProxies.
func Prefix(ip string) netip.Prefix {
	a := netip.MustParseAddr(ip)
	return netip.PrefixFrom(a, a.BitLen())
}
