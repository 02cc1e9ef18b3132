package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/latchkit/latch/auth"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/cli"
	"github.com/latchkit/latch/mcpop"
	"github.com/latchkit/latch/server"
	"github.com/latchkit/latch/store"
)

// shapesPolicy has a display hint, an approval and an effect per call.
const shapesPolicy = `schema: latch.policy/v1
actions:
  refund.issue:
    effect: "refund:{id}"
    resource: "order:{id}"
    arguments:
      id: { type: string }
      amount: { type: integer, min: 1, display: { money: { minor_units: 2, currency: EUR } } }
    rules:
      - when: { amount_lte: 1000 }
        decision: allow
      - decision: approve
`

// TestOperatorJSONShapesAgree: the same approval request and the same effect records read
// through `latch approvals --json` / `latch effects --json` and through latch serve's
// /v1/approvals/{id} and /v1/effects/{key} are the same JSON objects — every field, its name and
// its null — and so are the receipts, the chain's verification and the stats; the OpenAPI
// document names exactly those fields, and the operator MCP server's published output schemas
// name them too. A field renamed, added or omitted on one side only fails here (the lists and
// the event stream: TestOperatorListsAgree).
func TestOperatorJSONShapesAgree(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	policyPath := filepath.Join(dir, "latch.yaml")
	if err := os.WriteFile(policyPath, []byte(shapesPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	storeURL := "sqlite:" + filepath.Join(dir, "state.db")
	g, err := latch.Open(t.Context(), &latch.Config{PolicyPath: policyPath, StoreURL: storeURL, Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "refunder", User: "u1"})
	call := func(id string, amount int, run func(context.Context, json.RawMessage) (any, error)) error {
		args, _ := json.Marshal(map[string]any{"id": id, "amount": amount})
		_, err := g.Execute(ctx, &latch.Call{Action: "refund.issue", Arguments: args}, run)
		return err
	}
	// committed with a result; not executed (failed, no result); ambiguous; a lease that lapsed
	// (made ambiguous by the next contender); a request waiting for approval with one denial
	// before it.
	if err := call("o1", 500, func(context.Context, json.RawMessage) (any, error) { return map[string]string{"refund": "re_1"}, nil }); err != nil {
		t.Fatal(err)
	}
	_ = call("o2", 500, func(context.Context, json.RawMessage) (any, error) { return nil, latch.NotExecuted(io.EOF) })
	_ = call("o3", 500, func(context.Context, json.RawMessage) (any, error) { return nil, io.ErrUnexpectedEOF })
	p, err := g.Begin(ctx, &latch.Call{Action: "refund.issue", Arguments: json.RawMessage(`{"id":"o4","amount":500}`)})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // o4's lease lapses
	_ = call("o4", 500, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
	_ = p
	_ = call("o5", 250000, nil)
	asked, err := g.Store().Approvals(t.Context(), store.ApprovalFilter{Status: store.Pending})
	if err != nil || len(asked) != 1 {
		t.Fatalf("approvals: %v %d", err, len(asked))
	}
	if _, err := g.Deny(t.Context(), asked[0].ID, "alice"); err != nil {
		t.Fatal(err)
	}
	_ = call("o5", 250000, nil) // asked again after the denial
	asked, err = g.Store().Approvals(t.Context(), store.ApprovalFilter{Status: store.Pending})
	if err != nil || len(asked) != 1 {
		t.Fatalf("approvals: %v %d", err, len(asked))
	}

	// The CLI's lines, by key.
	cliLines := func(args ...string) []map[string]any {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := cli.Main(t.Context(), append([]string{"--policy", policyPath, "--store", storeURL}, args...), &stdout, &stderr, func(string) string { return "" }); code != 0 {
			t.Fatalf("latch %v = exit %d\n%s", args, code, stderr.String())
		}
		var out []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("latch %v: %v\n%s", args, err, line)
			}
			out = append(out, m)
		}
		return out
	}
	effects := cliLines("effects", "--json")
	approvals := cliLines("approvals", "--json")

	ts := g.Store().(store.TokenStore)
	secret, _, err := auth.CreateToken(t.Context(), ts, &auth.NewToken{Kind: store.TokenApprover, Approver: "carol"}, time.Now())
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
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || json.Unmarshal(b, into) != nil {
			t.Fatalf("GET %s = %d %s", path, resp.StatusCode, b)
		}
	}

	keys := map[string][]string{} // schema → the fields the CLI printed
	if len(effects) != 4 {
		t.Fatalf("latch effects --json printed %d effects, want 4", len(effects))
	}
	seen := map[string]bool{}
	for _, want := range effects {
		var got map[string]any
		get("/v1/effects/"+want["effect_key"].(string), &got)
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("effect %s: latch effects --json (-) vs GET /v1/effects/{key} (+):\n%s", want["effect_key"], d)
		}
		seen[want["state"].(string)] = true
		if want["lease_lapsed"] == true {
			seen["lapsed"] = true
		}
		keys["Effect"] = sortedKeys(want)
	}
	if !seen["committed"] || !seen["failed"] || !seen["ambiguous"] || !seen["lapsed"] {
		t.Errorf("the effects did not cover committed, failed, ambiguous and a lapsed lease: %v", seen)
	}
	if len(approvals) != 2 {
		t.Fatalf("latch approvals --json printed %d requests, want 2", len(approvals))
	}
	for _, want := range approvals {
		var got map[string]any
		get("/v1/approvals/"+want["approval_id"].(string), &got)
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("approval %s: latch approvals --json (-) vs GET /v1/approvals/{id} (+):\n%s", want["approval_id"], d)
		}
		if d, _ := want["display"].([]any); len(d) != 1 {
			t.Errorf("approval %s: display = %v, want the amount read through its money hint", want["approval_id"], want["display"])
		}
		keys["Approval"] = sortedKeys(want)
	}

	// A receipt line, the chain's verification and the stats: the CLI's and the API's.
	receipts := cliLines("receipts", "--json")
	var page struct{ Receipts []map[string]any }
	get("/v1/receipts?limit=1000", &page)
	if d := cmp.Diff(receipts, page.Receipts); d != "" {
		t.Errorf("latch receipts --json (-) vs GET /v1/receipts (+):\n%s", d)
	}
	keys["Receipt"] = sortedKeys(receipts[0])
	report := cliLines("receipts", "--verify", "--json")[0]
	var httpReport map[string]any
	get("/v1/receipts/verify", &httpReport)
	if d := cmp.Diff(report, httpReport); d != "" {
		t.Errorf("latch receipts --verify --json (-) vs GET /v1/receipts/verify (+):\n%s", d)
	}
	keys["Report"] = sortedKeys(report)
	stats := cliLines("stats", "--json")[0]
	var httpStats map[string]any
	get("/v1/stats", &httpStats)
	delete(stats, "until") // now, read twice
	delete(httpStats, "until")
	if d := cmp.Diff(stats, httpStats); d != "" {
		t.Errorf("latch stats --json (-) vs GET /v1/stats (+):\n%s", d)
	}
	keys["Stats"] = append(sortedKeys(stats), "until")
	slices.Sort(keys["Stats"])
	coverage := cliLines("coverage", "--json")[0]
	var httpCoverage map[string]any
	get("/v1/coverage", &httpCoverage)
	delete(coverage, "until") // now, read twice
	delete(httpCoverage, "until")
	if d := cmp.Diff(coverage, httpCoverage); d != "" {
		t.Errorf("latch coverage --json (-) vs GET /v1/coverage (+):\n%s", d)
	}
	keys["Coverage"] = append(sortedKeys(coverage), "until")
	slices.Sort(keys["Coverage"])
	if c, _ := coverage["calls"].(float64); c < 5 {
		t.Errorf("latch coverage --json counted %v calls, want the calls made above", coverage["calls"])
	}
	covActions, _ := coverage["actions"].([]any)
	covAction, _ := covActions[0].(map[string]any)
	keys["CoverageAction"] = sortedKeys(covAction)
	covRules, _ := covAction["rules"].([]any)
	keys["CoverageRule"] = sortedKeys(covRules[0].(map[string]any))

	// The OpenAPI document names the same fields.
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	get("/v1/openapi.json", &doc)
	for name, want := range keys {
		if d := cmp.Diff(want, sortedKeys(doc.Components.Schemas[name].Properties)); d != "" {
			t.Errorf("OpenAPI schema %s fields (-CLI +OpenAPI):\n%s", name, d)
		}
	}

	// The operator MCP server publishes output schemas with the same fields.
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
	published := map[string]map[string]any{} // tool → its output schema
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(tool.OutputSchema)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		published[tool.Name] = m
	}
	props := func(schema map[string]any, path ...string) []string {
		for _, p := range path {
			schema, _ = schema["properties"].(map[string]any)[p].(map[string]any)
			if items, ok := schema["items"].(map[string]any); ok {
				schema = items
			}
		}
		m, _ := schema["properties"].(map[string]any)
		return sortedKeys(m)
	}
	for _, c := range []struct {
		tool, schema string
		path         []string
	}{
		{"list_effects", "Effect", []string{"effects"}}, {"resolve", "Effect", nil},
		{"list_approvals", "Approval", []string{"approvals"}}, {"show_approval", "Approval", nil}, {"approve", "Approval", nil},
		{"list_receipts", "Receipt", []string{"receipts"}}, {"verify_receipts", "Report", nil}, {"stats", "Stats", nil},
		{"coverage", "Coverage", nil}, {"coverage", "CoverageRule", []string{"never_fired"}},
		{"inspect", "Effect", []string{"effect"}}, {"inspect", "Approval", []string{"approval"}}, {"inspect", "Receipt", []string{"receipts"}},
	} {
		want := sortedKeys(doc.Components.Schemas[c.schema].Properties)
		if len(want) < 3 {
			t.Fatalf("OpenAPI schema %s names %v", c.schema, want)
		}
		if d := cmp.Diff(want, props(published[c.tool], c.path...)); d != "" {
			t.Errorf("MCP %s output %v fields vs OpenAPI %s (-OpenAPI +MCP):\n%s", c.tool, c.path, c.schema, d)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// budgetShapesPolicy budgets a grant and the action per agent.
const budgetShapesPolicy = `schema: latch.policy/v1
actions:
  refund.issue:
    effect: "refund:{id}"
    arguments:
      id: { type: string }
      amount: { type: integer, min: 1 }
    decision: allow
    budgets:
      - {metric: amount, limit: 100000, window: P1D, per: principal}
authority:
  grants:
    - id: refunds
      subject: {agent: refunder}
      actions: [refund.*]
      budgets:
        - {metric: count, limit: 10, window: PT1H}
`

// TestBudgetShapesAgree: the budgets `latch budgets --json` prints are the objects GET
// /v1/budgets and the operator MCP server's list_budgets answer — every field, its name and its
// null — with the charges a real guard made (committed, ambiguous); the OpenAPI document and the
// MCP output schema name exactly those fields, and `latch inspect --grant --json` is what
// inspect_grant answers.
func TestBudgetShapesAgree(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	policyPath := filepath.Join(dir, "latch.yaml")
	if err := os.WriteFile(policyPath, []byte(budgetShapesPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	storeURL := "sqlite:" + filepath.Join(dir, "state.db")
	g, err := latch.Open(t.Context(), &latch.Config{PolicyPath: policyPath, StoreURL: storeURL})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "refunder", User: "u1"})
	for i, fail := range []error{nil, io.ErrUnexpectedEOF, nil} {
		args, _ := json.Marshal(map[string]any{"id": fmt.Sprint("o", i), "amount": 100 * (i + 1)})
		_, err := g.Execute(ctx, &latch.Call{Action: "refund.issue", Arguments: args}, func(context.Context, json.RawMessage) (any, error) { return nil, fail })
		if (err != nil) != (fail != nil) {
			t.Fatalf("call %d = %v", i, err)
		}
	}
	cliOut := func(args ...string) []map[string]any {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := cli.Main(t.Context(), append([]string{"--policy", policyPath, "--store", storeURL}, args...), &stdout, &stderr, func(string) string { return "" }); code != 0 {
			t.Fatalf("latch %v = exit %d\n%s", args, code, stderr.String())
		}
		var out []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("latch %v: %v\n%s", args, err, line)
			}
			out = append(out, m)
		}
		return out
	}
	budgets := cliOut("budgets", "--json")
	if len(budgets) != 2 || budgets[0]["consumed"] != float64(3) || budgets[1]["consumed"] != float64(600) {
		t.Fatalf("latch budgets --json = %v, want the grant's count 3 and the principal's amount 600", budgets)
	}
	if held := budgets[0]["held"].([]any); len(held) != 3 || held[1].(map[string]any)["state"] != "ambiguous" {
		t.Fatalf("held = %v, want three, the second ambiguous", held)
	}
	grant := cliOut("inspect", "--grant", "refunds", "--json")[0]

	ts := g.Store().(store.TokenStore)
	secret, _, err := auth.CreateToken(t.Context(), ts, &auth.NewToken{Kind: store.TokenApprover, Approver: "carol"}, time.Now())
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
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || json.Unmarshal(b, into) != nil {
			t.Fatalf("GET %s = %d %s", path, resp.StatusCode, b)
		}
	}
	var page struct{ Budgets []map[string]any }
	get("/v1/budgets", &page)
	if d := cmp.Diff(budgets, page.Budgets); d != "" {
		t.Errorf("latch budgets --json (-) vs GET /v1/budgets (+):\n%s", d)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	get("/v1/openapi.json", &doc)
	if d := cmp.Diff(sortedKeys(budgets[0]), sortedKeys(doc.Components.Schemas["Budget"].Properties)); d != "" {
		t.Errorf("OpenAPI schema Budget fields (-CLI +OpenAPI):\n%s", d)
	}
	held := budgets[0]["held"].([]any)[0].(map[string]any)
	heldSchema, _ := doc.Components.Schemas["Budget"].Properties["held"].(map[string]any)["items"].(map[string]any)["properties"].(map[string]any)
	if d := cmp.Diff(sortedKeys(held), sortedKeys(heldSchema)); d != "" {
		t.Errorf("OpenAPI schema Budget.held fields (-CLI +OpenAPI):\n%s", d)
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
	call := func(tool string, args any) map[string]any {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s = %+v, %v", tool, res, err)
		}
		b, _ := json.Marshal(res.StructuredContent)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	var viaMCP []map[string]any
	for _, b := range call("list_budgets", map[string]any{})["budgets"].([]any) {
		viaMCP = append(viaMCP, b.(map[string]any))
	}
	if d := cmp.Diff(budgets, viaMCP); d != "" {
		t.Errorf("latch budgets --json (-) vs MCP list_budgets (+):\n%s", d)
	}
	if d := cmp.Diff(grant, call("inspect_grant", map[string]any{"grant_id": "refunds"})); d != "" {
		t.Errorf("latch inspect --grant --json (-) vs MCP inspect_grant (+):\n%s", d)
	}
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if tool.Name != "list_budgets" {
			continue
		}
		b, _ := json.Marshal(tool.OutputSchema)
		var schema struct {
			Properties struct {
				Budgets struct {
					Items struct {
						Properties map[string]any `json:"properties"`
					} `json:"items"`
				} `json:"budgets"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(b, &schema); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(sortedKeys(budgets[0]), sortedKeys(schema.Properties.Budgets.Items.Properties)); d != "" {
			t.Errorf("MCP list_budgets output schema fields (-CLI +MCP):\n%s", d)
		}
	}
}
