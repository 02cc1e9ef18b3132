package cli_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestServeScopes runs `latch serve` as a real process on a policy whose scopes section names
// a scope service (a real HTTP server on loopback). A begin of a resource in the agent's scope
// is reserved; one outside it is refused 403 out_of_scope (kind denied), and while the service
// answers 500 one is refused 403 scope_unavailable; neither reserves anything, and both leave a
// denied receipt that names the scope's hash at most, never its patterns.
func TestServeScopes(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	var asked atomic.Int32
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		var req struct {
			Principal struct{ Agent string } `json:"principal"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || down.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		if req.Principal.Agent == "refunder" {
			io.WriteString(w, `{"resources": ["refund:EU-*"]}`)
			return
		}
		io.WriteString(w, `{"resources": []}`)
	}))
	t.Cleanup(svc.Close)
	latchBin, policy := latchDir(t, fmt.Sprintf(`schema: latch.policy/v1
actions:
  refund.issue:
    effect: "refund:{id}"
    resource: "refund:{id}"
    decision: allow
scopes:
  url: %q
  timeout: 500ms
`, svc.URL+"/scope"))
	token := createToken(t, latchBin, nil, policy, "--agent", "refunder")
	p := startServe(t, latchBin, nil, "--policy", policy, "serve")
	begin := func(id string) (int, map[string]any, http.Header) {
		t.Helper()
		req, _ := http.NewRequest("POST", p.base+"/v1/actions", strings.NewReader(`{"action":"refund.issue","arguments":{"id":"`+id+`"}}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("begin %s: %v", id, err)
		}
		return resp.StatusCode, body, resp.Header
	}

	if status, body, _ := begin("EU-1"); status/100 != 2 || body["effect_key"] != "refund:EU-1" {
		t.Fatalf("begin in scope = %d %v, want it reserved", status, body)
	}
	for _, tc := range []struct {
		id, reason string
		down       bool
	}{
		{"US-1", "out_of_scope", false},
		{"EU-2", "scope_unavailable", true},
	} {
		down.Store(tc.down)
		status, body, h := begin(tc.id)
		if status != http.StatusForbidden || body["type"] != "urn:latch:problem:"+tc.reason || body["reason"] != tc.reason ||
			body["kind"] != "denied" || !strings.HasPrefix(h.Get("Content-Type"), "application/problem+json") {
			t.Errorf("begin %s = %d %v (%s), want 403 %s kind denied as a problem", tc.id, status, body, h.Get("Content-Type"), tc.reason)
		}
	}
	if asked.Load() != 3 {
		t.Errorf("scope service asked %d times, want 3", asked.Load())
	}

	effects := string(runLatch(t, latchBin, nil, "--policy", policy, "effects", "--json"))
	if !strings.Contains(effects, `"refund:EU-1"`) || strings.Contains(effects, "US-1") || strings.Contains(effects, "EU-2") {
		t.Errorf("effects = %s, want refund:EU-1 alone (a refusal on scope reserves nothing)", effects)
	}
	var denied []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(runLatch(t, latchBin, nil, "--policy", policy, "receipts", "--json"))), "\n") {
		var row struct{ Receipt map[string]any }
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("receipt line %s: %v", line, err)
		}
		if row.Receipt["result"] == "denied" {
			denied = append(denied, row.Receipt)
		}
		if strings.Contains(line, "EU-*") {
			t.Errorf("a receipt holds the scope's patterns: %s", line)
		}
	}
	if len(denied) != 2 || denied[0]["decision_reason"] != "out_of_scope" || denied[1]["decision_reason"] != "scope_unavailable" {
		t.Fatalf("denied receipts = %v, want out_of_scope then scope_unavailable", denied)
	}
	if h, _ := denied[0]["scope_hash"].(string); !strings.HasPrefix(h, "sha256:") || denied[1]["scope_hash"] != nil {
		t.Errorf("scope_hash = %v, %v; want a hash for out_of_scope, null when no scope was had", denied[0]["scope_hash"], denied[1]["scope_hash"])
	}
	runLatch(t, latchBin, nil, "--policy", policy, "receipts", "--verify")
}
