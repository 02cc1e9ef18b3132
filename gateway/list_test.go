package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/auth"
	"github.com/latchkit/latch/gateway"
	"github.com/latchkit/latch/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// listPolicy grants refund-bot both payments tools (refunds delegable), viewer-bot balances
// only, and nobody-bot nothing.
const listPolicy = testPolicy + `authority:
  grants:
    - id: refunds
      subject: { agent: refund-bot }
      actions: [mcp.payments.refund]
      expires_at: "2098-01-01T00:00:00Z"
      delegable: true
    - id: balances
      subject: { agent: refund-bot }
      actions: [mcp.payments.balance]
    - id: viewing
      subject: { agent: viewer-bot }
      actions: ["mcp.payments.bal*"]
`

// listed returns the tool names cs is shown.
func listed(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// httpAgents serves e's gateway over streamable HTTP and returns a function that connects a
// go-sdk client with a new agent token of the named agent.
func httpAgents(t *testing.T, e *env, gw *gateway.Gateway) func(agent string) *mcp.ClientSession {
	t.Helper()
	ts := e.guard.Store().(store.TokenStore)
	srv := httptest.NewServer(gw.Handler(&auth.Authenticator{Tokens: ts}))
	t.Cleanup(srv.Close)
	return func(agent string) *mcp.ClientSession {
		t.Helper()
		tok, _, err := auth.CreateToken(t.Context(), ts, &auth.NewToken{Kind: store.TokenAgent, Agent: agent}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		tr := &mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1, HTTPClient: &http.Client{Transport: bearer{tok}}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: agent}, nil).Connect(t.Context(), tr, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
}

// Each principal's tools/list leaves out the tools it can never be allowed: viewer-bot is not
// shown refunds until a delegation names it, nobody-bot nothing, and only refund-bot, holding a
// delegable grant, the reserved hop tool; a hidden tool's call is still
// decided (refused) as before; Config.ListDenied shows every tool to everyone.
func TestListHidesDeniedTools(t *testing.T) {
	t.Parallel()
	e := setupWith(t, listPolicy, latch.Principal{})
	connect := httpAgents(t, e, e.gw)
	both := []string{"payments.balance", "payments.refund"}
	// refund-bot's grant is delegable: it is shown the reserved hop tool too, which the others,
	// holding nothing to hand on, are not.
	withHop := append([]string{"latch.hop"}, both...)
	refunder, viewer := connect("refund-bot"), connect("viewer-bot")
	if got := listed(t, refunder); !slices.Equal(got, withHop) {
		t.Errorf("refund-bot is shown %v, want %v", got, withHop)
	}
	if got := listed(t, viewer); !slices.Equal(got, []string{"payments.balance"}) {
		t.Errorf("viewer-bot is shown %v, want only payments.balance", got)
	}
	if got := listed(t, connect("nobody")); len(got) != 0 {
		t.Errorf("nobody (no grant) is shown %v, want nothing", got)
	}
	_, err := refund(t.Context(), viewer, "ord_1", 100)
	if code, r := refusalOf(t, err); code != gateway.CodeAuthority || r.Reason != "no_authority" {
		t.Errorf("viewer-bot calling the hidden refund = %d %+v, want no_authority", code, r)
	}
	// A delegation naming viewer-bot shows it refunds, on its next listing.
	d, err := e.guard.Delegate(t.Context(), "refunds", []byte("subject: {agent: viewer-bot}\nactions: [mcp.payments.refund]\nexpires_at: \"2097-01-01T00:00:00Z\"\n"),
		latch.Principal{Agent: "refund-bot"})
	if err != nil {
		t.Fatal(err)
	}
	if got := listed(t, viewer); !slices.Equal(got, both) {
		t.Errorf("viewer-bot with a delegation is shown %v, want %v", got, both)
	}
	if _, err := e.guard.Revoke(t.Context(), d.ID, "cli/alice"); err != nil {
		t.Fatal(err)
	}
	if got := listed(t, viewer); !slices.Equal(got, []string{"payments.balance"}) {
		t.Errorf("viewer-bot after the revocation is shown %v, want only payments.balance", got)
	}

	all, err := gateway.New(t.Context(), &gateway.Config{Guard: e.guard, ListDenied: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = all.Close() })
	if got := listed(t, httpAgents(t, e, all)("nobody")); !slices.Equal(got, withHop) {
		t.Errorf("with ListDenied nobody is shown %v, want %v", got, withHop)
	}
}

// Without an authority section, the policy alone hides: an action it does not list, or one it
// denies whatever the arguments; an action whose rules depend on the arguments is shown.
func TestListHidesPolicyDenied(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, balance string
		want          []string
	}{
		{"unlisted", "", []string{"payments.refund"}},
		{"bare deny", "  mcp.payments.balance:\n    decision: deny\n", []string{"payments.refund"}},
		{"every rule denies", "  mcp.payments.balance:\n    rules:\n      - when: { account_eq: x }\n        decision: deny\n", []string{"payments.refund"}},
		{"a rule allows", "  mcp.payments.balance:\n    rules:\n      - when: { account_eq: x }\n        decision: deny\n      - decision: approve\n",
			[]string{"payments.balance", "payments.refund"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc := strings.Replace(testPolicy, "  mcp.payments.balance:\n    decision: allow\n", tt.balance, 1)
			e := setupWith(t, doc, latch.Principal{Agent: "support-bot"})
			if got := listed(t, e.agent); !slices.Equal(got, tt.want) {
				t.Errorf("shown %v, want %v", got, tt.want)
			}
		})
	}
}
