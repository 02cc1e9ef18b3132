package mcpop_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchkit/latch/auth"
	"github.com/latchkit/latch/internal/burst"
	"github.com/latchkit/latch/mcpop"
	"github.com/latchkit/latch/store"
)

// TestResourcesAfterBurst: the operator MCP, over HTTP, takes a burst of 200 requests, eight at
// a time — sessions opened, used once and closed; reads on one long session, some with an id of
// half a megabyte; requests abandoned in the middle of their body — and afterwards its
// goroutines are back to their baseline and its live heap has grown by a bounded amount. (Not
// parallel: it counts the process's goroutines.)
func TestResourcesAfterBurst(t *testing.T) {
	g, _, approvalID := setup(t, "")
	ctx := t.Context()
	tok, _, err := auth.CreateToken(ctx, g.Store().(store.TokenStore), &auth.NewToken{Kind: store.TokenApprover, Approver: "carol"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	op, err := mcpop.New(&mcpop.Config{Guard: g})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(op.Handler(&auth.Authenticator{Tokens: g.Store().(store.TokenStore)}))
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	connect := func() *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "operator"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1, HTTPClient: &http.Client{Transport: burst.Bearer{Token: tok, Transport: tr}}}, nil)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		return cs
	}
	long := connect()
	call := func(cs *mcp.ClientSession, name string, args map[string]any) error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err == nil && res == nil {
			err = fmt.Errorf("%s: no result", name)
		}
		return err
	}
	if err := call(long, "list_approvals", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	tr.CloseIdleConnections()
	base := burst.Take()
	addr := strings.TrimPrefix(srv.URL, "http://")
	bigID := strings.Repeat("i", 512<<10)
	var mu sync.Mutex
	errs := map[string]int{}
	burst.Run(200, 8, func(i int) {
		var err error
		switch i % 4 {
		case 0:
			cs := connect()
			err = call(cs, "show_approval", map[string]any{"id": approvalID})
			_ = cs.Close()
		case 1:
			head := fmt.Sprintf("POST / HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n", addr, tok, 600<<10)
			err = burst.Abandon(addr, head, 100<<10)
		case 2:
			err = call(long, "list_effects", map[string]any{})
		default:
			err = call(long, "inspect", map[string]any{"id": bigID}) // nothing has that id: an answer saying so
		}
		if err != nil {
			mu.Lock()
			errs[err.Error()]++
			mu.Unlock()
		}
	})
	if len(errs) > 0 {
		t.Errorf("requests of the burst failed: %v", errs)
	}
	_ = long.Close()
	tr.CloseIdleConnections()
	burst.Settled(t, "the operator MCP", base, burst.Bounds{})
}
