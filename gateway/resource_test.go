package gateway_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/auth"
	"github.com/latchkit/latch/internal/burst"
	"github.com/latchkit/latch/store"
)

// TestResourcesAfterBurst: the gateway, over HTTP, takes a burst of 200 requests, eight at a
// time — sessions opened, used once and closed; calls on one long session, with small and with
// half-megabyte arguments; requests abandoned in the middle of their body — and afterwards its
// goroutines are back to their baseline and its live heap has grown by a bounded amount. (Not
// parallel: it counts the process's goroutines.)
func TestResourcesAfterBurst(t *testing.T) {
	e := setupWith(t, testPolicy, latch.Principal{})
	ctx := t.Context()
	agent, _, err := auth.CreateToken(ctx, e.guard.Store().(store.TokenStore), &auth.NewToken{Kind: store.TokenAgent, Agent: "refund-bot"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e.gw.Handler(&auth.Authenticator{Tokens: e.guard.Store().(store.TokenStore)}))
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	connect := func() *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: srv.URL, MaxRetries: -1, HTTPClient: &http.Client{Transport: burst.Bearer{Token: agent, Transport: tr}}}, nil)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		return cs
	}
	long := connect()
	if _, err := refund(ctx, long, "warm", 1); err != nil { // the upstream is started and warm
		t.Fatal(err)
	}
	tr.CloseIdleConnections()
	base := burst.Take()
	addr := strings.TrimPrefix(srv.URL, "http://")
	memo := strings.Repeat("m", 512<<10)
	var mu sync.Mutex
	errs := map[string]int{}
	burst.Run(200, 8, func(i int) {
		var err error
		switch i % 4 {
		case 0:
			cs := connect()
			_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "payments.balance", Arguments: map[string]any{"account": "acct_1"}})
			_ = cs.Close()
		case 1:
			head := fmt.Sprintf("POST / HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n", addr, agent, 600<<10)
			err = burst.Abandon(addr, head, 100<<10)
		case 2:
			_, err = refund(ctx, long, fmt.Sprintf("ord_%d", i), 100)
		default:
			// Refused by the upstream's schema: an answer, which is all this asks; its error is
			// not counted.
			_, _ = long.CallTool(ctx, &mcp.CallToolParams{Name: "payments.balance", Arguments: map[string]any{"account": "acct_1", "memo": memo}})
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
	burst.Settled(t, "the gateway", base, burst.Bounds{})
}
