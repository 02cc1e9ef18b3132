package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/crypto/bcrypt"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/auth"
	"github.com/latchkit/latch/internal/cli"
	"github.com/latchkit/latch/internal/consoletest"
	"github.com/latchkit/latch/internal/storeraw"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/mcpop"
	"github.com/latchkit/latch/server"
	"github.com/latchkit/latch/store"
)

const surfacesPolicy = `schema: latch.policy/v1
actions:
  job.run:
    effect: "job:{id}"
    arguments:
      id: { type: string }
    decision: allow
  refund.issue:
    effect: "refund:{id}"
    arguments:
      id: { type: string }
    decision: approve
`

// surfaces is one store served on every surface an operator reads it through: the CLI, latch
// serve's API and console, and the operator MCP server.
type surfaces struct {
	t                    *testing.T
	g                    *latch.Guard
	policyPath, storeURL string
	url, approver        string
	console              *http.Client
	mcp                  *mcp.ClientSession
}

// cli runs latch with args against the store and returns its JSON lines.
func (s *surfaces) cli(args ...string) []map[string]any {
	s.t.Helper()
	var stdout, stderr bytes.Buffer
	if code := cli.Main(s.t.Context(), append([]string{"--policy", s.policyPath, "--store", s.storeURL}, args...), &stdout, &stderr, func(string) string { return "" }); code != 0 {
		s.t.Fatalf("latch %v = exit %d\n%s", args, code, stderr.String())
	}
	out := []map[string]any{}
	for line := range strings.Lines(stdout.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			s.t.Fatalf("latch %v: %v\n%s", args, err, line)
		}
		out = append(out, m)
	}
	return out
}

// http gets path with the approver's token and decodes the answer into into.
func (s *surfaces) http(path string, into any) {
	s.t.Helper()
	req, _ := http.NewRequestWithContext(s.t.Context(), "GET", s.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+s.approver)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || json.Unmarshal(b, into) != nil {
		s.t.Fatalf("GET %s = %d %s", path, resp.StatusCode, b)
	}
}

// tool calls an operator MCP tool and decodes its structured answer into into.
func (s *surfaces) tool(name string, args map[string]any, into any) {
	s.t.Helper()
	res, err := s.mcp.CallTool(s.t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil || res.IsError {
		s.t.Fatalf("%s(%v) = %v %+v", name, args, err, res)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, into); err != nil {
		s.t.Fatalf("%s: %v\n%s", name, err, b)
	}
}

var resolveForm = regexp.MustCompile(`action="/effects/([A-Za-z0-9_-]+)/resolve"`)

// consoleNeedsPerson is the set of effect keys the console's Needs attention page has a card
// for (each card's resolve form names its key, base64url).
func (s *surfaces) consoleNeedsPerson() []string {
	s.t.Helper()
	page := consoletest.Get(s.t, s.console, s.url+"/attention")
	if page.Status != 200 {
		s.t.Fatalf("GET /attention = %d\n%s", page.Status, page.Body)
	}
	keys := []string{}
	for _, m := range resolveForm.FindAllStringSubmatch(page.Body, -1) {
		k, err := base64.RawURLEncoding.DecodeString(m[1])
		if err != nil {
			s.t.Fatal(err)
		}
		keys = append(keys, string(k))
	}
	slices.Sort(keys)
	return keys
}

// startSurfaces opens a guard on backend with a lease of a second, serves it (API and console,
// with account ops logged in) and the operator MCP server, and returns them.
func startSurfaces(t *testing.T, backend string) *surfaces {
	t.Helper()
	dir := t.TempDir()
	s := &surfaces{t: t, policyPath: filepath.Join(dir, "latch.yaml"), storeURL: testdb.URL(t, backend, "latch_surfaces")}
	if err := os.WriteFile(s.policyPath, []byte(surfacesPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{PolicyPath: s.policyPath, StoreURL: s.storeURL, Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	s.g = g
	secret, _, err := auth.CreateToken(t.Context(), g.Store().(store.TokenStore), &auth.NewToken{Kind: store.TokenApprover, Approver: "carol"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s.approver = secret
	srv, err := server.New(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { stop(); <-done })
	s.url = "http://" + ln.Addr().String()
	h, _ := bcrypt.GenerateFromPassword([]byte("pw-ops-1234"), bcrypt.MinCost)
	if err := g.Store().(store.AccountStore).CreateAccount(t.Context(), &store.Account{Name: "ops", PasswordHash: string(h), CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	s.console = consoletest.Client(t, "")
	if p := consoletest.Login(t, s.console, s.url, "ops", "pw-ops-1234"); p.Status != http.StatusSeeOther {
		t.Fatalf("console login = %d\n%s", p.Status, p.Body)
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
	t.Cleanup(func() { _ = ss.Close() })
	s.mcp, err = mcp.NewClient(&mcp.Implementation{Name: "operator"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.mcp.Close() })
	return s
}

// seed writes what an operator reads: committed, failed and ambiguous effects, an attempt whose
// lease lapsed, one under a live lease, one resolved whose holder then reported the opposite
// (an outcome conflict), and an approval request. It returns the keys that need a person.
func seed(t *testing.T, g *latch.Guard) []string {
	t.Helper()
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "worker"})
	run := func(action, id string, exec func(context.Context, json.RawMessage) (any, error)) error {
		_, err := g.Execute(ctx, &latch.Call{Action: action, Arguments: json.RawMessage(`{"id":"` + id + `"}`)}, exec)
		return err
	}
	if err := run("job.run", "done", func(context.Context, json.RawMessage) (any, error) { return map[string]int{"n": 1}, nil }); err != nil {
		t.Fatal(err)
	}
	if err := run("job.run", "nope", func(context.Context, json.RawMessage) (any, error) { return nil, latch.NotExecuted(io.EOF) }); !errors.Is(err, latch.ErrNotExecuted) {
		t.Fatalf("not executed: %v", err)
	}
	if err := run("job.run", "lost", func(context.Context, json.RawMessage) (any, error) { return nil, io.ErrUnexpectedEOF }); !errors.Is(err, latch.ErrAmbiguous) {
		t.Fatalf("ambiguous: %v", err)
	}
	begin := func(id string) *latch.Pending {
		p, err := g.Begin(ctx, &latch.Call{Action: "job.run", Arguments: json.RawMessage(`{"id":"` + id + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	begin("hung")
	clash := begin("clash")
	time.Sleep(1100 * time.Millisecond) // hung's and clash's leases lapse
	if _, err := g.ResolveEffect(t.Context(), &store.ResolveRequest{Key: "job:clash", To: store.Committed, By: "cli:ops"}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Finish(ctx, clash.ActionID, latch.OutcomeNotExecuted, nil, "it did not run after all"); err == nil {
		t.Fatal("the holder's late outcome was taken, want it recorded as a conflict")
	}
	live := begin("live")
	if _, err := g.Extend(ctx, live.ActionID, time.Hour); err != nil {
		t.Fatal(err)
	}
	var ar *latch.ApprovalRequiredError
	if err := run("refund.issue", "r1", nil); !errors.As(err, &ar) {
		t.Fatalf("refund: %v, want an approval request", err)
	}
	if e, err := g.Store().Effect(t.Context(), "job:clash"); err != nil || e.Conflict == "" {
		t.Fatalf("job:clash = %+v, %v; want an outcome conflict", e, err)
	}
	return []string{"job:clash", "job:hung", "job:lost"}
}

func keysOf(list []map[string]any) []string {
	out := []string{}
	for _, m := range list {
		out = append(out, m["effect_key"].(string))
	}
	slices.Sort(out)
	return out
}

// TestNeedsPersonAgrees: on one store holding an ambiguous effect, a lapsed lease and an outcome
// conflict (beside committed, failed and live ones), the CLI, the HTTP API, the console's Needs
// attention page and the operator MCP server list the same effects as needing a person, and the
// same records; on SQLite and Postgres.
func TestNeedsPersonAgrees(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := startSurfaces(t, backend)
			want := seed(t, s.g)

			viaCLI := s.cli("effects", "--state", "needs_person", "--json")
			var viaHTTP struct{ Effects []map[string]any }
			s.http("/v1/effects?state=needs_person", &viaHTTP)
			var viaMCP, viaMCPDefault struct{ Effects []map[string]any }
			s.tool("list_effects", map[string]any{"state": "needs_person"}, &viaMCP)
			s.tool("list_effects", nil, &viaMCPDefault)
			for name, got := range map[string][]string{
				"latch effects --state needs_person": keysOf(viaCLI),
				"GET /v1/effects?state=needs_person": keysOf(viaHTTP.Effects),
				"MCP list_effects needs_person":      keysOf(viaMCP.Effects),
				"MCP list_effects (default)":         keysOf(viaMCPDefault.Effects),
				"console Needs attention":            s.consoleNeedsPerson(),
			} {
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("%s lists (-want +got):\n%s", name, d)
				}
			}
			if d := cmp.Diff(viaCLI, viaHTTP.Effects); d != "" {
				t.Errorf("needs_person records: CLI (-) vs HTTP (+):\n%s", d)
			}
			if d := cmp.Diff(viaCLI, viaMCP.Effects); d != "" {
				t.Errorf("needs_person records: CLI (-) vs MCP (+):\n%s", d)
			}
		})
	}
}

// TestOperatorListsAgree: the lists an operator reads — every effect, every approval request,
// the receipts (one of them tampered with, so that it no longer reads), and the events of one
// effect — are the same JSON, field for field and null for null, through the CLI, the HTTP API
// (its event stream too) and the operator MCP server.
func TestOperatorListsAgree(t *testing.T) {
	t.Parallel()
	s := startSurfaces(t, "sqlite")
	seed(t, s.g)

	// Effects, in every state; approvals in every status.
	effects := s.cli("effects", "--json")
	var httpEffects, mcpEffects struct{ Effects []map[string]any }
	s.http("/v1/effects?state=all", &httpEffects)
	s.tool("list_effects", map[string]any{"state": "all"}, &mcpEffects)
	if len(effects) != 6 {
		t.Fatalf("latch effects --json printed %d records, want 6", len(effects))
	}
	if d := cmp.Diff(effects, httpEffects.Effects); d != "" {
		t.Errorf("effects: CLI (-) vs HTTP (+):\n%s", d)
	}
	if d := cmp.Diff(effects, mcpEffects.Effects); d != "" {
		t.Errorf("effects: CLI (-) vs MCP (+):\n%s", d)
	}
	approvals := s.cli("approvals", "--json", "--status", "all")
	var httpApprovals, mcpApprovals struct{ Approvals []map[string]any }
	s.http("/v1/approvals?status=all", &httpApprovals)
	s.tool("list_approvals", map[string]any{"status": "all"}, &mcpApprovals)
	if len(approvals) != 1 {
		t.Fatalf("latch approvals --json printed %d requests, want 1", len(approvals))
	}
	if d := cmp.Diff(approvals, httpApprovals.Approvals); d != "" {
		t.Errorf("approvals: CLI (-) vs HTTP (+):\n%s", d)
	}
	if d := cmp.Diff(approvals, mcpApprovals.Approvals); d != "" {
		t.Errorf("approvals: CLI (-) vs MCP (+):\n%s", d)
	}

	// The events of the ambiguous effect: the stream, latch inspect --json and MCP inspect.
	inspected := s.cli("inspect", "job:lost", "--json")[0]
	var mcpInspected map[string]any
	s.tool("inspect", map[string]any{"id": "job:lost"}, &mcpInspected)
	if d := cmp.Diff(inspected, mcpInspected); d != "" {
		t.Errorf("inspect job:lost: CLI (-) vs MCP (+):\n%s", d)
	}
	events, _ := inspected["events"].([]any)
	if len(events) < 3 {
		t.Fatalf("inspect job:lost lists %d events, want its whole timeline", len(events))
	}
	streamed := s.stream(t)
	for _, e := range events {
		e := e.(map[string]any)
		if d := cmp.Diff(e, streamed[int64(e["id"].(float64))]); d != "" {
			t.Errorf("event %v: inspect (-) vs GET /v1/events (+):\n%s", e["id"], d)
		}
	}

	// Receipts, with one row edited behind latch's back so that it no longer reads.
	db, err := storeraw.Open(t.Context(), s.storeURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(t.Context(), storeraw.Stmt{SQL: "UPDATE {receipts} SET doc = ? WHERE seq = ?", Args: []any{storeraw.Doc(`{"seq":"two"}`), 2}}); err != nil {
		t.Fatal(err)
	}
	receipts := s.cli("receipts", "--json")
	var httpReceipts, mcpReceipts struct{ Receipts []map[string]any }
	s.http("/v1/receipts?limit=1000", &httpReceipts)
	s.tool("list_receipts", map[string]any{"limit": 1000}, &mcpReceipts)
	if d := cmp.Diff(receipts, httpReceipts.Receipts); d != "" {
		t.Errorf("receipts: CLI (-) vs HTTP (+):\n%s", d)
	}
	if d := cmp.Diff(receipts, mcpReceipts.Receipts); d != "" {
		t.Errorf("receipts: CLI (-) vs MCP (+):\n%s", d)
	}
	if len(receipts) < 5 || receipts[1]["unreadable"] == nil || receipts[0]["unreadable"] != nil {
		t.Errorf("receipts = %v, want the tampered seq 2 marked unreadable and the others not", receipts)
	}
}

// stream reads GET /v1/events from the first event until it has every event the store holds,
// and returns each by id.
func (s *surfaces) stream(t *testing.T) map[int64]map[string]any {
	t.Helper()
	all, err := s.g.Store().Events(t.Context(), store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+s.approver)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[int64]map[string]any{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() && len(out) < len(all) {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatalf("event data %q: %v", data, err)
		}
		out[int64(e["id"].(float64))] = e
	}
	if len(out) < len(all) {
		t.Fatalf("the stream sent %d of %d events: %v", len(out), len(all), sc.Err())
	}
	return out
}
