package cli_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latchkit/latch/internal/testdb"
)

const proposeV1 = `schema: latch.policy/v1
approvers:
  roles:
    owners: [olga, omar]
  policy_change: {roles: [owners]}
actions:
  notes.write:
    decision: allow
`

const proposeV2 = proposeV1 + `  notes.delete:
    decision: allow
`

// TestServeRequireApprovedPolicy runs a real latch serve --require-approved-policy: calls are
// refused policy_unapproved until latch policy propose and latch approve (another process)
// approve the policy in force; the next call runs without a restart. A new file put in place and
// signalled with SIGHUP is not put in force until its proposal is granted; after that, SIGHUP
// switches the running server to it.
func TestServeRequireApprovedPolicy(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			bin, pol := latchDir(t, proposeV1)
			next := filepath.Join(filepath.Dir(pol), "next.yaml")
			if err := os.WriteFile(next, []byte(proposeV2), 0o600); err != nil {
				t.Fatal(err)
			}
			storeURL := testdb.URL(t, backend, "latch_cli_polapprove")
			token := createToken(t, bin, nil, pol, "--store", storeURL, "--agent", "writer")
			p := startServe(t, bin, nil, "--policy", pol, "--store", storeURL, "serve", "--sweep", "0", "--no-console", "--require-approved-policy")
			call := func(action string) (int, map[string]any) {
				t.Helper()
				raw, _ := json.Marshal(map[string]any{"action": action, "arguments": map[string]any{}})
				req, _ := http.NewRequestWithContext(t.Context(), "POST", p.base+"/v1/actions", bytes.NewReader(raw))
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				var out map[string]any
				if err := json.Unmarshal(b, &out); err != nil {
					t.Fatalf("POST %s: %d %s", action, resp.StatusCode, b)
				}
				return resp.StatusCode, out
			}
			propose := func(file string) string {
				t.Helper()
				out := runLatch(t, bin, nil, "--policy", pol, "--store", storeURL, "policy", "propose", file, "--as", "olga", "--json")
				var v struct {
					ApprovalID string `json:"approval_id"`
				}
				if err := json.Unmarshal(out, &v); err != nil || v.ApprovalID == "" {
					t.Fatalf("propose %s: %v %s", file, err, out)
				}
				return v.ApprovalID
			}
			hangup := func(want string) {
				t.Helper()
				if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
					t.Fatal(err)
				}
				for deadline := time.Now().Add(10 * time.Second); !strings.Contains(p.stderr.String(), want); time.Sleep(20 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("after SIGHUP, no %q in the log:\n%s", want, p.stderr.String())
					}
				}
			}

			if status, body := call("notes.write"); status != http.StatusForbidden || body["reason"] != "policy_unapproved" {
				t.Fatalf("before approval: %d %v", status, body)
			}
			id := propose(pol)
			// Not entitled: mallory is no owner. Then omar grants.
			cmd := runLatchErr(bin, "--policy", pol, "--store", storeURL, "approve", id, "--as", "mallory")
			if cmd == nil {
				t.Fatal("mallory approved a policy change")
			}
			if status, body := call("notes.write"); status != http.StatusForbidden || body["reason"] != "policy_unapproved" {
				t.Fatalf("refused answer: %d %v", status, body)
			}
			runLatch(t, bin, nil, "--policy", pol, "--store", storeURL, "approve", id, "--as", "omar")
			if status, body := call("notes.write"); status != http.StatusOK || body["decision"] != "allow" {
				t.Fatalf("after approval: %d %v", status, body)
			}

			// v2 proposed, then put in place before its approval: SIGHUP leaves v1 in force.
			id2 := propose(next)
			if err := os.WriteFile(pol, []byte(proposeV2), 0o600); err != nil {
				t.Fatal(err)
			}
			hangup("policy not put in force")
			if status, body := call("notes.delete"); status != http.StatusForbidden || body["reason"] != "unknown_action" {
				t.Fatalf("unapproved v2 in place: %d %v", status, body)
			}
			runLatch(t, bin, nil, "--policy", next, "--store", storeURL, "approve", id2, "--as", "omar")
			hangup("SIGHUP: policy reloaded")
			if status, body := call("notes.delete"); status != http.StatusOK || body["decision"] != "allow" {
				t.Fatalf("approved v2 after SIGHUP: %d %v\n%s", status, body, p.stderr.String())
			}
		})
	}
}

// runLatchErr runs bin args... and returns its error (nil when it exited 0).
func runLatchErr(bin string, args ...string) error {
	c := exec.Command(bin, args...)
	c.Env = cleanEnv()
	return c.Run()
}
