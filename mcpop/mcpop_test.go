package mcpop_test

import (
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
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/latchkit/latch"
	"github.com/latchkit/latch/identity"
	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/mcpop"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const testPolicy = `schema: latch.policy/v1
actions:
  refund.issue:
    effect: "refund:{order_id}"
    arguments:
      order_id: { type: string }
      amount: { type: integer, display: { money: { minor_units: 2, currency: EUR } }, editable: { decrease: true } }
    decision: approve
`

// setup opens a guard on a real SQLite store, asks for one approval as agent support-bot, and
// connects a client to an operator whose credential-less sessions answer as approver.
func setup(t *testing.T, approver string) (*latch.Guard, *mcp.ClientSession, string) {
	t.Helper()
	ctx := t.Context()
	pol, err := policy.Parse("latch.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(ctx, &latch.Config{Policy: pol, StoreURL: "sqlite:" + filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	_, err = g.Execute(latch.WithPrincipal(ctx, latch.Principal{Agent: "support-bot"}),
		&latch.Call{Action: "refund.issue", Arguments: json.RawMessage(`{"order_id":"o1","amount":250000}`)},
		func(ctx context.Context, _ json.RawMessage) (any, error) { return nil, nil })
	var ar *latch.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("Execute = %v, want approval required", err)
	}
	op, err := mcpop.New(&mcpop.Config{Guard: g, Approver: approver})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := op.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "operator"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return g, cs, ar.ApprovalID
}

func errText(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "; ")
}

// The read tools are marked read-only; the tools that answer or resolve are not.
func TestReadOnlyAnnotations(t *testing.T) {
	t.Parallel()
	_, cs, _ := setup(t, "")
	want := map[string]bool{"list_approvals": true, "show_approval": true, "list_effects": true, "inspect": true,
		"verify_receipts": true, "list_receipts": true, "stats": true, "coverage": true, "list_budgets": true, "inspect_grant": true, "inspect_hop": true,
		"approve": false, "deny": false, "resolve": false,
		"list_standing": true, "show_standing": true, "revoke_standing": false}
	seen := 0
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		ro, ok := want[tool.Name]
		if !ok {
			t.Errorf("unexpected tool %s", tool.Name)
			continue
		}
		seen++
		if got := tool.Annotations != nil && tool.Annotations.ReadOnlyHint; got != ro {
			t.Errorf("%s read-only = %v, want %v", tool.Name, got, ro)
		}
	}
	if seen != len(want) {
		t.Errorf("saw %d of the %d tools", seen, len(want))
	}
}

// The approver is the session's, never an argument: an "approver" argument is refused by the
// tool's input schema, a session with no identity cannot answer at all, and a stdio identity is
// recorded as the command line's is: method cli, not verified.
func TestApproverNeverFromArguments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, approver string
		wantErr        string // "" = the answer is recorded as the session's approver
	}{
		{"no identity", "", "unauthenticated"},
		{"stdio identity", "alice", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g, cs, id := setup(t, tt.approver)
			ctx := t.Context()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "approve", Arguments: map[string]any{"approval_id": id, "approver": "mallory"}})
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError || !strings.Contains(errText(res), "approver") {
				t.Errorf("approve with an approver argument = %v %q, want refused naming it", res.IsError, errText(res))
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "approve", Arguments: map[string]any{"approval_id": id}})
			if err != nil {
				t.Fatal(err)
			}
			a, err := g.Store().Approval(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantErr != "" {
				if !res.IsError || !strings.Contains(errText(res), tt.wantErr) || a.Status != store.Pending {
					t.Errorf("approve = %v %q, status %s; want refused %s and still pending", res.IsError, errText(res), a.Status, tt.wantErr)
				}
				return
			}
			if res.IsError || a.Status != store.Granted || a.Approver != tt.approver || len(a.Answers) != 1 ||
				a.Answers[0].Method != store.MethodCLI || a.Answers[0].Verified {
				t.Errorf("approve = %q; approval %s by %q answers %+v; want granted by %s, method cli, not verified", errText(res), a.Status, a.Approver, a.Answers, tt.approver)
			}
		})
	}
}

// list_approvals shows the arguments as hashed and as a person reads them (display hints).
func TestListApprovalsDisplay(t *testing.T) {
	t.Parallel()
	_, cs, id := setup(t, "")
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "list_approvals"})
	if err != nil || res.IsError {
		t.Fatalf("list_approvals: %v %s", err, errText(res))
	}
	b, _ := json.Marshal(res.StructuredContent)
	var out mcpop.Approvals
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Approvals) != 1 || out.Approvals[0].ApprovalID != id {
		t.Fatalf("approvals = %s, want %s", b, id)
	}
	if a := out.Approvals[0]; a.Required != 1 || a.Grants != 0 || len(a.Answers) != 0 {
		t.Errorf("a fresh request reads required %d, grants %d, %d answers; want 1, 0, none", a.Required, a.Grants, len(a.Answers))
	}
	var human string
	for _, d := range out.Approvals[0].Display {
		if d.Name == "amount" && d.Human != nil {
			human = *d.Human
		}
	}
	if !strings.Contains(human, "2,500.00") {
		t.Errorf("amount displayed as %q, want it in major units (2,500.00)", human)
	}
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// jwtOperator serves the operator of g over HTTP, verifying JWTs of a fresh key with the
// approver marks edit sets, and returns a client connector and the token minter.
func jwtOperator(t *testing.T, g *latch.Guard, edit func(*identity.Config)) (connect func(tok string) (*mcp.ClientSession, error), sign func(claims jwt.MapClaims) string) {
	t.Helper()
	_, connect, sign = jwtOperatorAt(t, g, edit)
	return connect, sign
}

// jwtOperatorAt is jwtOperator, also returning the server's URL.
func jwtOperatorAt(t *testing.T, g *latch.Guard, edit func(*identity.Config)) (url string, connect func(tok string) (*mcp.ClientSession, error), sign func(claims jwt.MapClaims) string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(pub)
	file := filepath.Join(t.TempDir(), "people.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := &identity.Config{Issuer: "https://sso.example", Audience: "latch-operator", KeyFiles: []string{file}}
	if edit != nil {
		edit(cfg)
	}
	v, err := identity.NewJWT(cfg)
	if err != nil {
		t.Fatal(err)
	}
	op, err := mcpop.New(&mcpop.Config{Guard: g})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(op.Handler(&auth.Authenticator{Tokens: g.Store().(store.TokenStore), Identity: v}))
	t.Cleanup(srv.Close)
	sign = func(c jwt.MapClaims) string {
		t.Helper()
		claims := jwt.MapClaims{"iss": "https://sso.example", "aud": "latch-operator", "exp": time.Now().Add(time.Hour).Unix()}
		for k, v := range c {
			claims[k] = v
		}
		tok, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims).SignedString(priv)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	connect = func(tok string) (*mcp.ClientSession, error) {
		tr := &mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1, HTTPClient: &http.Client{Transport: bearer{tok}}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "operator"}, nil).Connect(t.Context(), tr, nil)
		if err == nil {
			t.Cleanup(func() { _ = cs.Close() })
		}
		return cs, err
	}
	return srv.URL, connect, sign
}

var approverMark = func(c *identity.Config) { c.ApproverClaim, c.ApproverValue = "latch_role", "approver" }

// Over HTTP a JWT carrying the approver mark is a person's and names them (its sub): the answer
// is recorded as that person, verified, so its note carries no unverified mark.
func TestHTTPJWTApprover(t *testing.T) {
	t.Parallel()
	g, _, id := setup(t, "")
	connect, sign := jwtOperator(t, g, approverMark)
	cs, err := connect(sign(jwt.MapClaims{"sub": "dana", "latch_role": "approver"}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "approve", Arguments: map[string]any{"approval_id": id, "note": "ok"}})
	if err != nil || res.IsError {
		t.Fatalf("approve: %v %s", err, errText(res))
	}
	a, err := g.Store().Approval(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != store.Granted || a.Approver != "dana" || a.Note != "ok" || len(a.Answers) != 1 ||
		a.Answers[0].Method != store.MethodJWT || !a.Answers[0].Verified {
		t.Errorf("approval = %s by %q note %q answers %+v; want granted by dana, verified by JWT, note as written", a.Status, a.Approver, a.Note, a.Answers)
	}
}

// Over HTTP an agent's JWT — any JWT when no approver mark is configured, an unmarked one when
// one is — is refused before a session opens, so it can neither answer nor resolve, whatever
// its subject: the requesting agent's or anyone's. Nothing is written.
func TestHTTPAgentJWTRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		edit func(*identity.Config)
	}{{"no marks", nil}, {"claim mark", approverMark}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g, _, id := setup(t, "")
			connect, sign := jwtOperator(t, g, tc.edit)
			before := g.Store().(store.WriteCounter).WriteTransactions()
			for _, sub := range []string{"support-bot", "dana"} {
				cs, err := connect(sign(jwt.MapClaims{"sub": sub}))
				if err == nil {
					res, cerr := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "approve", Arguments: map[string]any{"approval_id": id}})
					t.Fatalf("an agent's JWT (%s) opened a session; approve = %v %v", sub, cerr, res)
				}
				if !strings.Contains(err.Error(), "Unauthorized") {
					t.Errorf("an agent's JWT (%s): %v, want Unauthorized", sub, err)
				}
			}
			if after := g.Store().(store.WriteCounter).WriteTransactions(); after != before {
				t.Errorf("refused sessions wrote %d transactions", after-before)
			}
		})
	}
}

// A person's JWT through mcp-operator is held to the resolve rules of every surface: a person
// who is the attempt's agent cannot resolve it, and the effect stays ambiguous.
func TestHTTPJWTSelfResolution(t *testing.T) {
	t.Parallel()
	g, _, _ := setup(t, "")
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "support-bot"})
	granted := func(id string) {
		t.Helper()
		if _, err := g.Approve(t.Context(), id, "ops"); err != nil {
			t.Fatal(err)
		}
	}
	call := &latch.Call{Action: "refund.issue", Arguments: json.RawMessage(`{"order_id":"o3","amount":100}`)}
	lost := func(context.Context, json.RawMessage) (any, error) { return nil, errors.New("connection reset") }
	_, err := g.Execute(ctx, call, lost)
	var ar *latch.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("Execute = %v, want approval required", err)
	}
	granted(ar.ApprovalID)
	if _, err := g.Execute(latch.WithApproval(ctx, ar.ApprovalID), call, lost); !errors.Is(err, latch.ErrAmbiguous) {
		t.Fatalf("Execute with the grant = %v, want ambiguous", err)
	}
	connect, sign := jwtOperator(t, g, approverMark)
	cs, err := connect(sign(jwt.MapClaims{"sub": "Support-Bot", "latch_role": "approver"}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "resolve", Arguments: map[string]any{"effect_key": "refund:o3", "to": "failed"}})
	if err != nil || !res.IsError || !strings.HasPrefix(errText(res), "self_resolution: ") {
		t.Fatalf("the agent's person resolves = %v %s, want self_resolution", err, errText(res))
	}
	if e, err := g.Store().Effect(t.Context(), "refund:o3"); err != nil || e.State != store.Ambiguous {
		t.Errorf("refund:o3 = %+v, %v; want still ambiguous", e, err)
	}
	other, err := connect(sign(jwt.MapClaims{"sub": "dana", "latch_role": "approver"}))
	if err != nil {
		t.Fatal(err)
	}
	res, err = other.CallTool(t.Context(), &mcp.CallToolParams{Name: "resolve", Arguments: map[string]any{"effect_key": "refund:o3", "to": "failed"}})
	if err != nil || res.IsError {
		t.Fatalf("dana resolves = %v %s", err, errText(res))
	}
}

// A request asked again after a denial says so: the person answering sees the earlier request
// and who denied it.
func TestAskedAgainAfterDenial(t *testing.T) {
	t.Parallel()
	g, cs, id := setup(t, "alice")
	ctx := t.Context()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "deny", Arguments: map[string]any{"approval_id": id}})
	if err != nil || res.IsError {
		t.Fatalf("deny: %v %s", err, errText(res))
	}
	_, err = g.Execute(latch.WithPrincipal(ctx, latch.Principal{Agent: "support-bot"}),
		&latch.Call{Action: "refund.issue", Arguments: json.RawMessage(`{"order_id":"o1","amount":250000}`)},
		func(ctx context.Context, _ json.RawMessage) (any, error) { return nil, nil })
	var ar *latch.ApprovalRequiredError
	if !errors.As(err, &ar) || ar.ApprovalID == id {
		t.Fatalf("asked again = %v, want a new approval request", err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "show_approval", Arguments: map[string]any{"approval_id": ar.ApprovalID}})
	if err != nil || res.IsError {
		t.Fatalf("show_approval: %v %s", err, errText(res))
	}
	b, _ := json.Marshal(res.StructuredContent)
	var a jsonview.Approval
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	if a.PreviousDenied == nil || *a.PreviousDenied != id || a.PreviousDeniedBy == nil || *a.PreviousDeniedBy != "alice" {
		t.Errorf("show_approval = %s, want previous_denied %s by alice", b, id)
	}
}

// A person's JWT that a revocation feed reports revoked — by subject, in CAEP events polled from
// a real HTTP feed on 127.0.0.1 — opens no session and answers nothing, before its exp; another
// person's JWT answers. When the feed goes stale past its bound, every JWT of the issuer is
// refused revocation_feed_stale. Nothing refused is written.
func TestHTTPJWTRevokedPerson(t *testing.T) {
	t.Parallel()
	g, _, id := setup(t, "")
	var down atomic.Bool
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte(`{"events": [{"events": {"` + identity.EventCredentialChange + `": {"change_type": "revoke",
			"subject": {"format": "iss_sub", "iss": "https://sso.example", "sub": "erin"}}}}]}`))
	}))
	t.Cleanup(src.Close)
	feed, err := identity.NewRevocationFeed(&identity.RevocationConfig{Source: src.URL, Poll: 20 * time.Millisecond, MaxStaleness: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	opURL, connect, sign := jwtOperatorAt(t, g, func(c *identity.Config) { approverMark(c); c.Revocations = feed })
	before := g.Store().(store.WriteCounter).WriteTransactions()
	erin := sign(jwt.MapClaims{"sub": "erin", "latch_role": "approver", "iat": time.Now().Unix()})
	if cs, err := connect(erin); err == nil {
		res, cerr := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "approve", Arguments: map[string]any{"approval_id": id}})
		t.Fatalf("a revoked person's JWT opened a session; approve = %v %v", cerr, res)
	} else if !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("a revoked person's JWT: %v, want Unauthorized", err)
	}
	if after := g.Store().(store.WriteCounter).WriteTransactions(); after != before {
		t.Errorf("the refused session wrote %d transactions", after-before)
	}
	if a, err := g.Store().Approval(t.Context(), id); err != nil || a.Status != store.Pending {
		t.Fatalf("approval after the revoked person's attempt = %v %v, want pending", a, err)
	}
	dana := sign(jwt.MapClaims{"sub": "dana", "latch_role": "approver"})
	cs, err := connect(dana)
	if err != nil {
		t.Fatalf("another person's JWT: %v", err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "list_approvals", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("list_approvals: %v %s", err, errText(res))
	}
	_ = cs.Close()
	down.Store(true)
	time.Sleep(700 * time.Millisecond) // past the 300ms bound since the last good read
	for tok, want := range map[string]string{erin: "credential_revoked", dana: "revocation_feed_stale"} {
		if _, err := connect(tok); err == nil {
			t.Errorf("a session opened, want %s", want)
		}
		// The client says Unauthorized; the answer itself names the reason.
		req, _ := http.NewRequestWithContext(t.Context(), "POST", opURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), want) {
			t.Errorf("a request = %d %q, want 401 naming %s", resp.StatusCode, body, want)
		}
	}
}

// The approve tool's set approves with an edit: a widening one is refused with its reason and
// writes nothing; a narrowing one binds the request to the edited arguments, and the answer
// shows what was requested and who changed what.
func TestApproveWithEdits(t *testing.T) {
	t.Parallel()
	g, cs, id := setup(t, "alice")
	ctx := t.Context()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "approve", Arguments: map[string]any{"approval_id": id, "set": map[string]any{"amount": 300000}}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.HasPrefix(errText(res), "edit_widens: ") || !strings.Contains(errText(res), "may only decrease") {
		t.Errorf("widening edit = %v %q, want refused edit_widens", res.IsError, errText(res))
	}
	if a, err := g.Store().Approval(ctx, id); err != nil || a.Status != store.Pending || len(a.Answers) != 0 {
		t.Fatalf("after the widening edit: %+v, %v; want pending, unanswered", a, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "approve", Arguments: map[string]any{"approval_id": id, "set": map[string]any{"amount": 200000}}})
	if err != nil || res.IsError {
		t.Fatalf("approve with an edit = %v %s", err, errText(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var v jsonview.Approval
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if v.Status != "granted" || string(v.Arguments) != `{"amount":200000,"order_id":"o1"}` || v.Edit == nil ||
		string(v.Edit.RequestedArguments) != `{"amount":250000,"order_id":"o1"}` || len(v.Edit.Edits) != 1 ||
		v.Edit.Edits[0].Approver != "alice" || string(v.Edit.Edits[0].Arguments["amount"].To) != "200000" {
		t.Errorf("approve answered %s", b)
	}
	ap, err := g.Approved(ctx, id)
	if err != nil || string(ap.Arguments) != `{"amount":200000,"order_id":"o1"}` {
		t.Errorf("Approved = %+v, %v", ap, err)
	}
}

// TestListEffectsLimit: list_effects takes the page size the HTTP list takes (operator.PageSize):
// a limit past the bound is refused naming it, and nothing is listed.
func TestListEffectsLimit(t *testing.T) {
	t.Parallel()
	_, cs, _ := setup(t, "alice")
	for _, limit := range []int{-1, operator.MaxPage + 1} {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "list_effects", Arguments: map[string]any{"state": "all", "limit": limit}})
		if err != nil {
			t.Fatal(err)
		}
		if !res.IsError || !strings.Contains(errText(res), "invalid_argument") || !strings.Contains(errText(res), fmt.Sprintf("limit %d", limit)) {
			t.Errorf("list_effects limit %d = %v %q, want invalid_argument naming the limit", limit, res.IsError, errText(res))
		}
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "list_effects", Arguments: map[string]any{"state": "all", "limit": 1}})
	if err != nil || res.IsError {
		t.Fatalf("list_effects limit 1 = %v, %q", err, errText(res))
	}
}
