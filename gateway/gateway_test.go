package gateway_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"github.com/latchkit/latch/auth"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/latchkit/latch"
	"github.com/latchkit/latch/gateway"
	"github.com/latchkit/latch/identity"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// paymentsBin is the example payments upstream, built once for the package's tests.
var paymentsBin string

func TestMain(m *testing.M) {
	runUpstream() // when started as a test upstream, serves it and exits
	runPinnedUpstream()
	dir, err := os.MkdirTemp("", "latch-gateway-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	paymentsBin = filepath.Join(dir, "payments")
	// go test puts its own GOROOT/bin first in $PATH, so "go" is the toolchain running the test.
	cmd := exec.Command("go", "build", "-o", paymentsBin, "../examples/gateway/payments")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build payments: %v\n%s", err, out)
		os.Exit(1)
	}
	// Sessions, upstream watchers and their processes all end with their test.
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}))
}

const testPolicy = `schema: latch.policy/v1
gateway:
  upstreams:
    payments:
      command: [%q, -ledger, %q]
      tools:
        balance: { errors_mean: not_executed }
actions:
  mcp.payments.refund:
    effect: "refund:{order_id}"
    arguments:
      order_id: { type: string }
      amount: { type: integer }
    decision: allow
  mcp.payments.balance:
    decision: allow
`

type env struct {
	guard  *latch.Guard
	gw     *gateway.Gateway
	agent  *mcp.ClientSession
	ledger string
}

// setup starts the payments upstream as a real process behind a gateway on a real SQLite store,
// and connects a go-sdk client to the gateway as agent "support-bot".
func setup(t *testing.T) *env {
	t.Helper()
	return setupWith(t, testPolicy, latch.Principal{Agent: "support-bot"})
}

// setupWith is setup with a policy (a format with the upstream program and ledger as %q verbs)
// and the gateway's principal for credential-less sessions.
func setupWith(t *testing.T, policyFormat string, p latch.Principal) *env {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger")
	pol, err := policy.Parse("latch.yaml", fmt.Appendf(nil, policyFormat, paymentsBin, ledger))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(ctx, &latch.Config{Policy: pol, StoreURL: "sqlite:" + filepath.Join(dir, "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	gw, err := gateway.New(ctx, &gateway.Config{Guard: g, Principal: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Close() })
	st, ct := mcp.NewInMemoryTransports()
	srv := gw.Server()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return &env{guard: g, gw: gw, agent: cs, ledger: ledger}
}

func (e *env) ledgerLines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(e.ledger)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return completeLines(b)
}

// completeLines returns the complete lines of a ledger. The upstream creates the file and then
// writes its line, so a reader can find it empty or holding part of a line: those are not
// refunds yet. (Splitting the whole text once read an empty file as one empty line, and the
// killed-upstream test then took the pid from a line with no fields.)
func completeLines(b []byte) []string {
	var out []string
	for {
		line, rest, ok := bytes.Cut(b, []byte("\n"))
		if !ok {
			return out
		}
		out = append(out, string(line))
		b = rest
	}
}

func TestCompleteLinesIgnorePartialWrites(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"4242 refund", 0},
		{"4242 refund ord_1 5\n", 1},
		{"4242 refund ord_1 5\n4242 ref", 1},
		{"4242 refund ord_1 5\n4242 refund ord_2 6\n", 2},
	}
	for _, tt := range tests {
		if got := completeLines([]byte(tt.in)); len(got) != tt.want {
			t.Errorf("completeLines(%q) = %q, want %d lines", tt.in, got, tt.want)
		}
	}
}

// refusalOf returns the JSON-RPC code and data of a gateway error.
func refusalOf(t *testing.T, err error) (int64, gateway.Refusal) {
	t.Helper()
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		t.Fatalf("error %v (%T) is not a JSON-RPC error", err, err)
	}
	var r gateway.Refusal
	if err := json.Unmarshal(we.Data, &r); err != nil {
		t.Fatalf("error data %s: %v", we.Data, err)
	}
	return we.Code, r
}

func refund(ctx context.Context, cs *mcp.ClientSession, order string, amount int) (*mcp.CallToolResult, error) {
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: "payments.refund",
		Arguments: map[string]any{"order_id": order, "amount": amount}})
}

func TestListsUpstreamTools(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var names []string
	for tool, err := range e.agent.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	if got, want := strings.Join(names, ","), "payments.balance,payments.refund"; got != want {
		t.Errorf("tools = %s, want %s", got, want)
	}
}

// gateway.separator names the tools for agents whose tool names may not hold a dot; the action
// stays mcp.<alias>.<tool>.
func TestSeparator(t *testing.T) {
	t.Parallel()
	e := setupWith(t, strings.Replace(testPolicy, "gateway:\n", "gateway:\n  separator: __\n", 1), latch.Principal{Agent: "support-bot"})
	var names []string
	for tool, err := range e.agent.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	if got := strings.Join(names, ","); got != "payments__balance,payments__refund" {
		t.Errorf("tools = %s, want payments__balance,payments__refund", got)
	}
	if _, err := e.agent.CallTool(t.Context(), &mcp.CallToolParams{Name: "payments__refund",
		Arguments: map[string]any{"order_id": "ord_s", "amount": 100}}); err != nil {
		t.Fatalf("payments__refund: %v", err)
	}
	eff, err := e.guard.Store().Effect(t.Context(), "refund:ord_s")
	if err != nil || eff.Action != "mcp.payments.refund" || eff.State != store.Committed {
		t.Errorf("effect = %+v, %v; want mcp.payments.refund committed", eff, err)
	}
}

func TestAllowedCallPasses(t *testing.T) {
	t.Parallel()
	e := setup(t)
	res, err := refund(t.Context(), e.agent, "ord_1", 500)
	if err != nil {
		t.Fatalf("refund: %v", err)
	}
	var got struct {
		RefundID string `json:"refund_id"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &got); err != nil || got.RefundID != "re_1" {
		t.Errorf("refund result = %s, want refund_id re_1", b)
	}
	if lines := e.ledgerLines(t); len(lines) != 1 {
		t.Errorf("ledger = %q, want one refund", lines)
	}
	eff, err := e.guard.Store().Effect(t.Context(), "refund:ord_1")
	if err != nil {
		t.Fatal(err)
	}
	if eff.State != store.Committed {
		t.Errorf("effect state = %s, want committed", eff.State)
	}
}

func TestUnlistedToolDenied(t *testing.T) {
	t.Parallel()
	// The policy lists only refund and balance; an upstream tool outside it is denied.
	p, err := policy.Parse("latch.yaml", fmt.Appendf(nil, strings.Replace(testPolicy, "  mcp.payments.balance:\n    decision: allow\n", "", 1), paymentsBin, filepath.Join(t.TempDir(), "ledger")))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: "sqlite:" + filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	gw, err := gateway.New(t.Context(), &gateway.Config{Guard: g, Principal: latch.Principal{Agent: "support-bot"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Close() })
	st, ct := mcp.NewInMemoryTransports()
	if _, err := gw.Server().Connect(t.Context(), st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	_, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "payments.balance", Arguments: map[string]any{"account": "a"}})
	code, r := refusalOf(t, err)
	if code != gateway.CodeDenied || r.Reason != "unknown_action" || r.Action != "mcp.payments.balance" {
		t.Errorf("balance = %d %+v, want %d unknown_action", code, r, gateway.CodeDenied)
	}
}

func TestDuplicateRefusedWithStoredResult(t *testing.T) {
	t.Parallel()
	e := setup(t)
	first, err := refund(t.Context(), e.agent, "ord_2", 700)
	if err != nil {
		t.Fatal(err)
	}
	_, err = refund(t.Context(), e.agent, "ord_2", 700)
	code, r := refusalOf(t, err)
	if code != gateway.CodeDuplicate || r.Reason != "committed" || r.EffectKey != "refund:ord_2" || r.EffectState != "committed" {
		t.Fatalf("second refund = %d %+v, want %d duplicate_effect of refund:ord_2", code, r, gateway.CodeDuplicate)
	}
	// The refusal's receipt is named by its receipt id and its action id, each in its own field
	// (receipt_id once carried the action id).
	if !strings.HasPrefix(r.ReceiptID, "rcp_") || !strings.HasPrefix(r.ActionID, "act_") {
		t.Errorf("second refund receipt_id %q, action_id %q; want rcp_… and act_…", r.ReceiptID, r.ActionID)
	}
	var stored mcp.CallToolResult
	if err := json.Unmarshal(r.Result, &stored); err != nil {
		t.Fatalf("stored result %s: %v", r.Result, err)
	}
	want, _ := json.Marshal(first.StructuredContent)
	got, _ := json.Marshal(stored.StructuredContent)
	if !bytes.Equal(got, want) {
		t.Errorf("stored result = %s, want the first call's %s", got, want)
	}
	if lines := e.ledgerLines(t); len(lines) != 1 {
		t.Errorf("ledger = %q, want exactly one refund", lines)
	}
}

func TestUpstreamKilledMidCallIsAmbiguous(t *testing.T) {
	t.Parallel()
	e := setup(t)
	type reply struct {
		err error
	}
	done := make(chan reply, 1)
	go func() {
		_, err := refund(t.Context(), e.agent, "hang-ord_3", 900)
		done <- reply{err}
	}()
	// The upstream records the refund, then never answers; kill it then.
	var pid int
	for deadline := time.Now().Add(30 * time.Second); pid == 0; {
		if lines := e.ledgerLines(t); len(lines) == 1 {
			pid, _ = strconv.Atoi(strings.Fields(lines[0])[0])
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the upstream never started the refund")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill upstream %d: %v", pid, err)
	}
	var rep reply
	select {
	case rep = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the call did not return after the upstream died")
	}
	code, r := refusalOf(t, rep.err)
	if code != gateway.CodeAmbiguous || r.Reason != "outcome_unknown" || r.EffectKey != "refund:hang-ord_3" {
		t.Fatalf("killed refund = %d %+v, want %d ambiguous", code, r, gateway.CodeAmbiguous)
	}
	eff, err := e.guard.Store().Effect(t.Context(), "refund:hang-ord_3")
	if err != nil {
		t.Fatal(err)
	}
	if eff.State != store.Ambiguous {
		t.Errorf("effect state = %s, want ambiguous", eff.State)
	}
	// The re-sent call is refused by the effect's state, and nothing is sent.
	_, err = refund(t.Context(), e.agent, "hang-ord_3", 900)
	code, r = refusalOf(t, err)
	if code != gateway.CodeEffectAmbiguous || r.Reason != "ambiguous" || r.EffectState != "ambiguous" {
		t.Errorf("re-sent refund = %d %+v, want %d ambiguous", code, r, gateway.CodeEffectAmbiguous)
	}
	if lines := e.ledgerLines(t); len(lines) != 1 {
		t.Errorf("ledger = %q, want the one refund the killed upstream made", lines)
	}
	// Another refund reaches the upstream again: the gateway starts it anew (it answered every
	// later call not_executed before it redialled).
	if _, err := refund(t.Context(), e.agent, "ord_3b", 100); err != nil {
		t.Fatalf("refund after the upstream died: %v", err)
	}
	lines := e.ledgerLines(t)
	if len(lines) != 2 || strings.Fields(lines[1])[0] == strconv.Itoa(pid) {
		t.Errorf("ledger = %q, want a second refund by a new upstream process (not %d)", lines, pid)
	}
}

// An isError result may come after the tool acted: ambiguous, unless the policy says the tool's
// errors mean it did not act.
func TestErrorResultOutcomes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		errorsMean string
		code       int64
		reason     string
		state      store.State
	}{
		{"default", "", gateway.CodeAmbiguous, "outcome_unknown", store.Ambiguous},
		{"unknown", "unknown", gateway.CodeAmbiguous, "outcome_unknown", store.Ambiguous},
		{"not_executed", "not_executed", gateway.CodeNotExecuted, "not_executed", store.Failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pol := testPolicy
			if tt.errorsMean != "" {
				pol = strings.Replace(pol, "        balance:", "        refund: { errors_mean: "+tt.errorsMean+" }\n        balance:", 1)
			}
			e := setupWith(t, pol, latch.Principal{Agent: "support-bot"})
			_, err := refund(t.Context(), e.agent, "ord_4", 0) // the upstream answers isError
			code, r := refusalOf(t, err)
			if code != tt.code || r.Reason != tt.reason || !strings.Contains(r.Detail, "amount must be positive") {
				t.Errorf("refund = %d %+v, want %d %s with the tool's message", code, r, tt.code, tt.reason)
			}
			eff, err := e.guard.Store().Effect(t.Context(), "refund:ord_4")
			if err != nil {
				t.Fatal(err)
			}
			if eff.State != tt.state {
				t.Errorf("effect state = %s, want %s", eff.State, tt.state)
			}
		})
	}
}

func TestNoPrincipalRefused(t *testing.T) {
	t.Parallel()
	e := setupWith(t, testPolicy, latch.Principal{})
	_, err := refund(t.Context(), e.agent, "ord_5", 100)
	code, r := refusalOf(t, err)
	if code != gateway.CodeUnauthenticated || r.Reason != "unauthenticated" {
		t.Errorf("refund = %d %+v, want %d unauthenticated", code, r, gateway.CodeUnauthenticated)
	}
	if lines := e.ledgerLines(t); len(lines) != 0 {
		t.Errorf("ledger = %q, want nothing sent", lines)
	}
}

// A refused call leaves its answer to a human in the data: the approval id and its expiry.
func TestApprovalRequiredData(t *testing.T) {
	t.Parallel()
	pol := strings.Replace(testPolicy, "    decision: allow\n  mcp.payments.balance:", "    decision: approve\n  mcp.payments.balance:", 1)
	e := setupWith(t, pol, latch.Principal{Agent: "support-bot"})
	_, err := refund(t.Context(), e.agent, "ord_6", 100)
	code, r := refusalOf(t, err)
	if code != gateway.CodeApprovalRequired || r.Reason != "approval_required" || !strings.HasPrefix(r.ApprovalID, "apr_") ||
		r.ExpiresAt == nil || !r.ExpiresAt.After(time.Now()) || r.ActionHash == "" {
		t.Errorf("refund = %d %+v, want %d approval_required with an id, a future expiry and the action hash", code, r, gateway.CodeApprovalRequired)
	}
	if lines := e.ledgerLines(t); len(lines) != 0 {
		t.Errorf("ledger = %q, want nothing sent", lines)
	}
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// Over HTTP the principal is the bearer token's, and a session without a valid agent token
// never reaches a tool.
func TestHTTPBearerToken(t *testing.T) {
	t.Parallel()
	e := setupWith(t, testPolicy, latch.Principal{}) // no fallback principal
	ts, ok := e.guard.Store().(store.TokenStore)
	if !ok {
		t.Fatal("the SQLite store is not a TokenStore")
	}
	ctx := t.Context()
	agent, _, err := auth.CreateToken(ctx, ts, &auth.NewToken{Kind: store.TokenAgent, Agent: "refund-bot"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	approver, _, err := auth.CreateToken(ctx, ts, &auth.NewToken{Kind: store.TokenApprover, Approver: "alice"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e.gw.Handler(&auth.Authenticator{Tokens: ts}))
	t.Cleanup(srv.Close)
	connect := func(token string) (*mcp.ClientSession, error) {
		tr := &mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1, HTTPClient: &http.Client{Transport: bearer{token}}}
		return mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, tr, nil)
	}
	for _, bad := range []string{"", "latch_unknown", approver, "not-a-latch-token"} {
		if cs, err := connect(bad); err == nil {
			_ = cs.Close()
			t.Errorf("connect with token %q succeeded, want refused", bad)
		}
	}
	cs, err := connect(agent)
	if err != nil {
		t.Fatalf("connect with an agent token: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if _, err := refund(ctx, cs, "ord_7", 100); err != nil {
		t.Fatalf("refund over HTTP: %v", err)
	}
	var found bool
	for s, err := range e.guard.Store().Receipts(ctx, store.ReceiptFilter{EffectKey: "refund:ord_7"}) {
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Principal struct{ Agent, Issuer string }
			Result    string
		}
		if err := json.Unmarshal(s.Doc, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Principal.Agent != "refund-bot" || !strings.HasPrefix(doc.Principal.Issuer, "latch-token:tok_") {
			t.Errorf("receipt principal = %+v, want refund-bot issued by its token", doc.Principal)
		}
		found = true
	}
	if !found {
		t.Error("no receipt for refund:ord_7")
	}
}

// A call refused approval_required proceeds once a person grants the request: the agent re-sends
// the same call, the gateway finds the grant by the action's hash, and the tool runs once. A
// re-send with other arguments is another action and matches nothing.
func TestApprovalMatchedOnResend(t *testing.T) {
	t.Parallel()
	pol := strings.Replace(testPolicy, "    decision: allow\n  mcp.payments.balance:", "    decision: approve\n  mcp.payments.balance:", 1)
	e := setupWith(t, pol, latch.Principal{Agent: "support-bot"})
	ctx := t.Context()
	_, err := refund(ctx, e.agent, "ord_8", 2500)
	code, r := refusalOf(t, err)
	if code != gateway.CodeApprovalRequired {
		t.Fatalf("first refund = %d %+v, want %d approval_required", code, r, gateway.CodeApprovalRequired)
	}
	if _, err := e.guard.Approve(ctx, r.ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	// Other arguments: another action hash, so the grant does not apply and a new request is made.
	_, err = refund(ctx, e.agent, "ord_8", 9999)
	code, r2 := refusalOf(t, err)
	if code != gateway.CodeApprovalRequired || r2.ApprovalID == r.ApprovalID || r2.ActionHash == r.ActionHash {
		t.Fatalf("refund with another amount = %d %+v, want a new approval_required (not %s)", code, r2, r.ApprovalID)
	}
	if lines := e.ledgerLines(t); len(lines) != 0 {
		t.Fatalf("ledger = %q, want nothing run before the granted call is re-sent", lines)
	}
	if _, err := refund(ctx, e.agent, "ord_8", 2500); err != nil {
		t.Fatalf("re-sent granted refund: %v", err)
	}
	a, err := e.guard.Store().Approval(ctx, r.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != store.Consumed {
		t.Errorf("approval %s = %s, want consumed", a.ID, a.Status)
	}
	// Sent a third time: the grant is spent and the effect committed, so nothing runs again.
	_, err = refund(ctx, e.agent, "ord_8", 2500)
	if code, r3 := refusalOf(t, err); code != gateway.CodeDuplicate && code != gateway.CodeApprovalRequired {
		t.Errorf("third refund = %d %+v, want a refusal", code, r3)
	}
	if lines := e.ledgerLines(t); len(lines) != 1 {
		t.Errorf("ledger = %q, want exactly one refund", lines)
	}
}

// Warnings name each listed tool that runs without an effect key and each policy action naming a
// tool its upstream does not offer.
func TestWarnings(t *testing.T) {
	t.Parallel()
	pol := testPolicy + "  mcp.payments.refnd:\n    effect: \"r:{order_id}\"\n    decision: allow\n"
	e := setupWith(t, pol, latch.Principal{Agent: "support-bot"})
	got := strings.Join(e.gw.Warnings(), "\n")
	for _, want := range []string{
		"tool payments.balance runs without an effect key",
		`policy action mcp.payments.refnd names tool "refnd", which upstream payments does not offer`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Warnings() = %q, want one saying %q", got, want)
		}
	}
	if strings.Contains(got, "payments.refund ") {
		t.Errorf("Warnings() = %q names the keyed refund tool", got)
	}
}

// jwtIssuer is an Ed25519 key pair whose public half is pinned in a PEM file, and a verifier of
// the identity package that trusts it.
type jwtIssuer struct {
	key      ed25519.PrivateKey
	keyFile  string
	verifier *identity.JWT
}

func newJWTIssuer(t *testing.T) *jwtIssuer {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "issuer.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := identity.NewJWT(&identity.Config{Issuer: "https://id.example", Audience: "latch-gateway", KeyFiles: []string{file}, UserClaim: "act_for"})
	if err != nil {
		t.Fatal(err)
	}
	return &jwtIssuer{key: priv, keyFile: file, verifier: v}
}

func (j *jwtIssuer) token(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	base := jwt.MapClaims{"iss": "https://id.example", "aud": "latch-gateway", "sub": "refund-agent", "act_for": "carol",
		"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
	for k, v := range claims {
		base[k] = v
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, base).SignedString(j.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Over HTTP a verified JWT is a credential too: the session's principal is its claims', and an
// expired token or one from another audience never reaches a tool.
func TestHTTPJWTSession(t *testing.T) {
	t.Parallel()
	e := setupWith(t, testPolicy, latch.Principal{})
	ts := e.guard.Store().(store.TokenStore)
	iss := newJWTIssuer(t)
	srv := httptest.NewServer(e.gw.Handler(&auth.Authenticator{Tokens: ts, Identity: iss.verifier}))
	t.Cleanup(srv.Close)
	ctx := t.Context()
	connect := func(token string) (*mcp.ClientSession, error) {
		tr := &mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1, HTTPClient: &http.Client{Transport: bearer{token}}}
		return mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, tr, nil)
	}
	for name, bad := range map[string]string{
		"expired":        iss.token(t, jwt.MapClaims{"exp": time.Now().Add(-time.Hour).Unix()}),
		"other audience": iss.token(t, jwt.MapClaims{"aud": "someone-else"}),
		"unsigned":       "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.",
	} {
		if cs, err := connect(bad); err == nil {
			_ = cs.Close()
			t.Errorf("connect with a JWT that is %s succeeded, want refused", name)
		}
	}
	cs, err := connect(iss.token(t, nil))
	if err != nil {
		t.Fatalf("connect with a valid JWT: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if _, err := refund(ctx, cs, "ord_jwt", 100); err != nil {
		t.Fatalf("refund with a JWT: %v", err)
	}
	for s, err := range e.guard.Store().Receipts(ctx, store.ReceiptFilter{EffectKey: "refund:ord_jwt"}) {
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Principal struct{ Agent, User, Issuer string }
		}
		if err := json.Unmarshal(s.Doc, &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Principal.Agent != "refund-agent" || doc.Principal.User != "carol" || doc.Principal.Issuer != "https://id.example" {
			t.Errorf("receipt principal = %+v, want refund-agent for carol from https://id.example", doc.Principal)
		}
		return
	}
	t.Error("no receipt for refund:ord_jwt")
}

// The example configuration is the one docs/gateway.md shows, and it starts with no warning, so
// `latch gateway --strict` runs it.
func TestExampleConfiguration(t *testing.T) {
	t.Parallel()
	example, err := os.ReadFile("../examples/gateway/latch.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/gateway.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "```yaml\n")
	block, _, _ = strings.Cut(block, "```")
	if !ok || !strings.Contains(string(example), block) {
		t.Fatalf("the first yaml block of docs/gateway.md is not examples/gateway/latch.yaml:\n%s", block)
	}
	// The example runs its upstream with go run; the test runs the same program, built.
	src := strings.Replace(string(example), "command: [go, run, ./payments]", "command: [%q, -ledger, %q]", 1)
	e := setupWith(t, src, latch.Principal{Agent: "support-bot"})
	if w := e.gw.Warnings(); len(w) != 0 {
		t.Errorf("Warnings() = %q, want none", w)
	}
}

// A JWT revoked while its session is open — by jti in a real revocation file — is refused at
// the session's next request, before its exp, and its tool call never runs; the refusal names
// credential_revoked. A new session with it is refused too; another JWT of the agent still works.
func TestHTTPJWTRevoked(t *testing.T) {
	t.Parallel()
	e := setupWith(t, testPolicy, latch.Principal{})
	ts := e.guard.Store().(store.TokenStore)
	iss := newJWTIssuer(t)
	list := filepath.Join(t.TempDir(), "revoked.txt")
	if err := os.WriteFile(list, []byte("iss https://id.example\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	feed, err := identity.NewRevocationFeed(&identity.RevocationConfig{Source: list, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	v, err := identity.NewJWT(&identity.Config{Issuer: "https://id.example", Audience: "latch-gateway", KeyFiles: []string{iss.keyFile},
		UserClaim: "act_for", Revocations: feed})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e.gw.Handler(&auth.Authenticator{Tokens: ts, Identity: v}))
	t.Cleanup(srv.Close)
	ctx := t.Context()
	connect := func(token string) (*mcp.ClientSession, error) {
		tr := &mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1, HTTPClient: &http.Client{Transport: bearer{token}}}
		return mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx, tr, nil)
	}
	revoked, kept := iss.token(t, jwt.MapClaims{"jti": "g1"}), iss.token(t, jwt.MapClaims{"jti": "g2"})
	cs, err := connect(revoked)
	if err != nil {
		t.Fatalf("connect before the revocation: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if _, err := refund(ctx, cs, "ord_r1", 100); err != nil {
		t.Fatalf("refund before the revocation: %v", err)
	}
	if err := os.WriteFile(list, []byte("iss https://id.example\njti g1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // past the feed's poll interval
	_, err = refund(ctx, cs, "ord_r2", 100)
	if err == nil {
		t.Fatal("refund with the revoked JWT on its open session succeeded, want refused")
	}
	if cs2, err := connect(revoked); err == nil {
		_ = cs2.Close()
		t.Error("a new session with the revoked JWT succeeded, want refused")
	}
	// What the middleware answers, read directly: 401, naming the reason.
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Authorization", "Bearer "+revoked)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "credential_revoked") {
		t.Errorf("a request with the revoked JWT = %d %q, want 401 naming credential_revoked", resp.StatusCode, body)
	}
	for _, line := range e.ledgerLines(t) {
		if strings.Contains(line, "ord_r2") {
			t.Errorf("the refused refund ran: %q", line)
		}
	}
	cs3, err := connect(kept)
	if err != nil {
		t.Fatalf("connect with another JWT of the agent: %v", err)
	}
	t.Cleanup(func() { _ = cs3.Close() })
	if _, err := refund(ctx, cs3, "ord_r3", 100); err != nil {
		t.Errorf("refund with an unrevoked JWT: %v", err)
	}
	// The revoked session cannot be ended by its client (its DELETE is refused 401 like any
	// request it makes, and the client gives the session up): taken off the list, it can.
	if err := os.WriteFile(list, []byte("iss https://id.example\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	del, _ := http.NewRequestWithContext(ctx, "DELETE", srv.URL, nil)
	del.Header.Set("Authorization", "Bearer "+revoked)
	del.Header.Set("Mcp-Session-Id", cs.ID())
	if resp, err := http.DefaultClient.Do(del); err != nil || resp.StatusCode >= 300 {
		t.Errorf("end the session once its JWT is no longer revoked: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}
