package cli_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestServeTaskBoundGrant runs `latch serve` as a real process over a policy whose grant is bound
// to tasks: a begin with its task is 200 and commits, its receipt (`latch receipts --json`)
// records the task; a begin with another task, or none, is 403 no_authority of kind authority on
// dimension tasks.
func TestServeTaskBoundGrant(t *testing.T) {
	t.Parallel()
	bin, policy := latchDir(t, `schema: latch.policy/v1
actions:
  refund.issue:
    effect: "refund:{id}"
    decision: allow
authority:
  grants:
    - id: tickets
      subject: { agent: refunder }
      actions: [refund.issue]
      tasks: ["ticket:FIN-*"]
`)
	token := createToken(t, bin, nil, policy, "--agent", "refunder")
	p := startServe(t, bin, nil, "--policy", policy, "serve")
	post := func(path, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("POST", p.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var out map[string]any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("POST %s: %v: %s", path, err, raw)
		}
		return resp.StatusCode, out
	}

	status, begun := post("/v1/actions", `{"action":"refund.issue","arguments":{"id":"r1"},"task":"ticket:FIN-7"}`)
	if status != 200 || begun["status"] != "reserved" {
		t.Fatalf("begin with task ticket:FIN-7 = %d %v, want 200 reserved", status, begun)
	}
	status, rec := post("/v1/actions/"+begun["action_id"].(string)+"/outcome", `{"outcome":"committed"}`)
	if status != 200 || rec["result"] != "committed" {
		t.Fatalf("outcome = %d %v, want 200 committed", status, rec)
	}
	for _, body := range []string{
		`{"action":"refund.issue","arguments":{"id":"r2"},"task":"ticket:OPS-7"}`,
		`{"action":"refund.issue","arguments":{"id":"r2"}}`,
	} {
		status, pr := post("/v1/actions", body)
		if status != 403 || pr["type"] != "urn:latch:problem:no_authority" || pr["kind"] != "authority" ||
			pr["reason"] != "no_authority" || pr["dimension"] != "tasks" {
			t.Errorf("begin %s = %d %v, want 403 no_authority, kind authority, dimension tasks", body, status, pr)
		}
	}

	var tasks []string
	for _, line := range strings.Split(strings.TrimSpace(string(runLatch(t, bin, nil, "--policy", policy, "receipts", "--json"))), "\n") {
		var r struct {
			Receipt struct {
				Result string  `json:"result"`
				Task   *string `json:"task"`
			} `json:"receipt"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("receipts --json line %q: %v", line, err)
		}
		task := "(none)"
		if r.Receipt.Task != nil {
			task = *r.Receipt.Task
		}
		tasks = append(tasks, r.Receipt.Result+" "+task)
	}
	if got, want := strings.Join(tasks, ", "), "committed ticket:FIN-7, denied ticket:OPS-7, denied (none)"; got != want {
		t.Errorf("receipts = %s, want %s", got, want)
	}
}
