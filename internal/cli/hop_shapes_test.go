package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/auth"
	"github.com/latchkit/latch/internal/cli"
	"github.com/latchkit/latch/mcpop"
	"github.com/latchkit/latch/server"
	"github.com/latchkit/latch/store"
)

const hopShapesPolicy = `schema: latch.policy/v1
actions:
  payments.refund:
    effect: "refund:{id}"
    decision: allow
authority:
  grants:
    - id: planner-refunds
      subject: {agent: planner}
      actions: [payments.refund]
      constraints: {amount_lte: 1000}
      delegable: true
      expires_at: 2099-01-01T00:00:00Z
`

// TestHopShapesAgree: `latch inspect --hop ID --json` prints the object GET /v1/hops/{id} and
// the operator MCP server's inspect_hop answer, every field, its name and its null, for a hop
// with a committed and a refused call under it.
func TestHopShapesAgree(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	policyPath := filepath.Join(dir, "latch.yaml")
	if err := os.WriteFile(policyPath, []byte(hopShapesPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	storeURL := "sqlite:" + filepath.Join(dir, "state.db")
	g, err := latch.Open(t.Context(), &latch.Config{PolicyPath: policyPath, StoreURL: storeURL})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	hop, err := g.Hop(t.Context(), "planner-refunds", []byte("actions: [payments.refund]\nconstraints: {amount_lte: 500}\nexpires_at: 2098-01-01T00:00:00Z\n"),
		latch.Principal{Agent: "billing"}, latch.Principal{Agent: "planner"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing"})
	for i, amount := range []int{400, 800} {
		args, _ := json.Marshal(map[string]any{"id": i, "amount": amount})
		_, _ = g.Execute(ctx, &latch.Call{Action: "payments.refund", Arguments: args, Options: &latch.Options{Hop: hop.ID}},
			func(context.Context, json.RawMessage) (any, error) { return "ok", nil })
	}

	var stdout, stderr bytes.Buffer
	if code := cli.Main(t.Context(), []string{"--policy", policyPath, "--store", storeURL, "inspect", "--hop", hop.ID, "--json"}, &stdout, &stderr, func(string) string { return "" }); code != 0 {
		t.Fatalf("latch inspect --hop --json = exit %d\n%s", code, stderr.String())
	}
	var viaCLI map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &viaCLI); err != nil {
		t.Fatal(err)
	}
	if calls, _ := viaCLI["calls"].([]any); len(calls) != 2 {
		t.Fatalf("latch inspect --hop --json calls = %v, want 2", viaCLI["calls"])
	}

	ts := g.Store().(store.TokenStore)
	secret, _, err := auth.CreateToken(t.Context(), ts, &auth.NewToken{Kind: store.TokenApprover, Approver: "carol"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(g, &server.Config{NoConsole: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx, ln) }()
	defer func() { stop(); <-done }()
	req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/v1/hops/"+hop.ID, nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var viaHTTP map[string]any
	if resp.StatusCode != 200 || json.Unmarshal(body, &viaHTTP) != nil {
		t.Fatalf("GET /v1/hops/%s = %d %s", hop.ID, resp.StatusCode, body)
	}
	if d := cmp.Diff(viaCLI, viaHTTP); d != "" {
		t.Errorf("latch inspect --hop --json (-) vs GET /v1/hops/{id} (+):\n%s", d)
	}

	op, err := mcpop.New(&mcpop.Config{Guard: g})
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := op.Server().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "shapes"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "inspect_hop", Arguments: map[string]any{"hop": hop.ID}})
	if err != nil || res.IsError {
		t.Fatalf("inspect_hop = %+v, %v", res, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var viaMCP map[string]any
	if err := json.Unmarshal(b, &viaMCP); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(viaCLI, viaMCP); d != "" {
		t.Errorf("latch inspect --hop --json (-) vs MCP inspect_hop (+):\n%s", d)
	}
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "inspect_hop", Arguments: map[string]any{"hop": "dlg_nosuch"}})
	if err != nil || !res.IsError {
		t.Errorf("inspect_hop of an unknown hop = %+v, %v; want a tool error", res, err)
	}
}
