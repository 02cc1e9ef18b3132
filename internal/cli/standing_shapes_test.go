package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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

const standingShapesPolicy = `schema: latch.policy/v1
actions:
  refund.issue:
    effect: "refund:{id}"
    resource: "order:{id}"
    arguments:
      id: { type: string }
      amount: { type: integer, display: { money: { minor_units: 2, currency: EUR } } }
    decision: approve
    approvers:
      standing: { max_uses: 5, max_for: 2h }
`

// TestStandingShapesAgree: the standing approvals `latch approvals --standing --json` prints are
// the objects GET /v1/standing/{id} and the operator MCP server's show_standing answer — every
// field, its name and its null (one with a total and a use spent, one revoked) — and the
// OpenAPI document and the MCP output schemas name exactly those fields.
func TestStandingShapesAgree(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	policyPath := filepath.Join(dir, "latch.yaml")
	if err := os.WriteFile(policyPath, []byte(standingShapesPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	storeURL := "sqlite:" + filepath.Join(dir, "state.db")
	g, err := latch.Open(t.Context(), &latch.Config{PolicyPath: policyPath, StoreURL: storeURL})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "refunder", User: "u1"})
	call := func(ctx context.Context, id string, amount int) error {
		args, _ := json.Marshal(map[string]any{"id": id, "amount": amount})
		_, err := g.Execute(ctx, &latch.Call{Action: "refund.issue", Arguments: args},
			func(context.Context, json.RawMessage) (any, error) { return "ok", nil })
		return err
	}
	grant := func(id string, amount int, terms store.StandingTerms) string {
		var ar *latch.ApprovalRequiredError
		if err := call(ctx, id, amount); !errors.As(err, &ar) {
			t.Fatalf("call %s: %v", id, err)
		}
		req := &store.AnswerRequest{ID: ar.ApprovalID, Grant: true, Approver: "alice", Standing: &terms}
		if _, err := g.Answer(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		return req.StandingID
	}
	a := grant("o1", 500, store.StandingTerms{Uses: 3, For: store.Duration(time.Hour), Vary: []string{"id"},
		Max: map[string]int64{"amount": 1000}, Total: &store.StandingTotal{Argument: "amount", Limit: 2000}})
	b := grant("o2", 5000, store.StandingTerms{Uses: 1, For: store.Duration(time.Hour)}) // outside a's bounds: asked
	if err := call(latch.WithApproval(ctx, a), "o3", 500); err != nil {
		t.Fatal(err)
	}
	if _, err := g.RevokeStanding(t.Context(), &store.RevokeStandingRequest{ID: b, By: "alice", Note: "n"}); err != nil {
		t.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	if code := cli.Main(t.Context(), []string{"--policy", policyPath, "--store", storeURL, "approvals", "--standing", "--json"},
		&stdout, &stderr, func(string) string { return "" }); code != 0 {
		t.Fatalf("latch approvals --standing --json = exit %d\n%s", code, stderr.String())
	}
	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%v\n%s", err, line)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 {
		t.Fatalf("latch approvals --standing --json printed %d, want 2", len(lines))
	}

	secret, _, err := auth.CreateToken(t.Context(), g.Store().(store.TokenStore), &auth.NewToken{Kind: store.TokenApprover, Approver: "carol"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(g, &server.Config{NoConsole: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(sctx, ln) }()
	defer func() { stop(); <-done }()
	get := func(path string, into any) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+path, nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || json.Unmarshal(body, into) != nil {
			t.Fatalf("GET %s = %d %s", path, resp.StatusCode, body)
		}
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

	seen := map[string]bool{}
	for _, want := range lines {
		id := want["standing_id"].(string)
		var got map[string]any
		get("/v1/standing/"+id, &got)
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("standing %s: latch approvals --standing --json (-) vs GET /v1/standing/{id} (+):\n%s", id, d)
		}
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "show_standing", Arguments: map[string]any{"standing_id": id}})
		if err != nil || res.IsError {
			t.Fatalf("show_standing %s: %v %v", id, err, res)
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var viaMCP map[string]any
		_ = json.Unmarshal(raw, &viaMCP)
		if d := cmp.Diff(want, viaMCP); d != "" {
			t.Errorf("standing %s: latch approvals --standing --json (-) vs show_standing (+):\n%s", id, d)
		}
		seen[want["state"].(string)] = true
		if want["spent"] != nil {
			seen["spent"] = true
		}
	}
	if !seen["active"] || !seen["revoked"] || !seen["spent"] {
		t.Errorf("the standing approvals did not cover active with a total, and revoked: %v", seen)
	}

	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	get("/v1/openapi.json", &doc)
	want := sortedKeys(lines[0])
	if d := cmp.Diff(want, sortedKeys(doc.Components.Schemas["Standing"].Properties)); d != "" {
		t.Errorf("OpenAPI schema Standing fields (-CLI +OpenAPI):\n%s", d)
	}
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.Name != "show_standing" && tool.Name != "revoke_standing" && tool.Name != "list_standing" {
			continue
		}
		raw, _ := json.Marshal(tool.OutputSchema)
		var m struct {
			Properties map[string]struct {
				Items struct {
					Properties map[string]any `json:"properties"`
				} `json:"items"`
			} `json:"properties"`
		}
		_ = json.Unmarshal(raw, &m)
		var flat struct {
			Properties map[string]any `json:"properties"`
		}
		_ = json.Unmarshal(raw, &flat)
		got := sortedKeys(flat.Properties)
		if tool.Name == "list_standing" {
			got = sortedKeys(m.Properties["standing"].Items.Properties)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("MCP %s output fields (-CLI +MCP):\n%s", tool.Name, d)
		}
	}
}
