package server_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/latchkit/latch/identity"
	"github.com/latchkit/latch/server"
)

// fence matches a fenced block of docs/http.md: its language and its text.
var fence = regexp.MustCompile("(?s)```([a-z]*)\n(.*?)```")

type block struct{ lang, text string }

func docBlocks(t *testing.T) []block {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "docs", "http.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []block
	for _, m := range fence.FindAllStringSubmatch(string(raw), -1) {
		out = append(out, block{m[1], m[2]})
	}
	return out
}

// need returns the path of a program the documented examples run. Under
// LATCH_REQUIRE_HTTP_EXAMPLES=1 (scripts/test.sh) a missing one fails the test.
func need(t *testing.T, prog string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		if os.Getenv("LATCH_REQUIRE_HTTP_EXAMPLES") == "1" {
			t.Fatalf("%s is not installed and LATCH_REQUIRE_HTTP_EXAMPLES=1", prog)
		}
		t.Skipf("%s is not installed", prog)
	}
	return p
}

// TestPythonExample runs the Python worker of docs/http.md, as written there, against a real
// server with the policy written there, on both stores, and checks it prints what the page says.
func TestPythonExample(t *testing.T) {
	t.Parallel()
	python := need(t, "python3")
	blocks := docBlocks(t)
	var policyDoc, program, want string
	for i, b := range blocks {
		if b.lang == "python" {
			program = b.text
			policyDoc = blocks[i-1].text
			want = blocks[i+1].text
			break
		}
	}
	if program == "" || !strings.Contains(policyDoc, "schema: latch.policy/v1") || !strings.Contains(want, "bank transfers") {
		t.Fatalf("docs/http.md: no python block with its policy before and its output after")
	}
	if strings.Contains(program, "import requests") {
		t.Fatal("the Python example must use the standard library only")
	}
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := startWith(t, backend, policyDoc, nil)
			file := filepath.Join(t.TempDir(), "worker.py")
			if err := os.WriteFile(file, []byte(program), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.CommandContext(t.Context(), python, file)
			cmd.Env = append(os.Environ(), "LATCH_URL="+s.url, "LATCH_TOKEN="+s.alice)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("python worker: %v\n%s", err, out)
			}
			if string(out) != want {
				t.Errorf("python worker printed:\n%s\ndocs/http.md says:\n%s", out, want)
			}
		})
	}
}

// TestCurlExamples runs every curl example of docs/http.md's routes, in the page's order,
// against a real server holding what they refer to, and checks that each answers JSON that is
// not a problem.
func TestCurlExamples(t *testing.T) {
	t.Parallel()
	sh := need(t, "sh")
	need(t, "curl")
	blocks := docBlocks(t)
	var policyDoc string
	var curls []string
	for i, b := range blocks {
		if b.lang == "python" {
			policyDoc = blocks[i-1].text
		}
		if b.lang == "sh" && strings.HasPrefix(b.text, "curl ") {
			curls = append(curls, b.text)
		}
	}
	if len(curls) < 11 {
		t.Fatalf("docs/http.md has %d curl examples under its routes, want at least 11", len(curls))
	}
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			feed, err := identity.NewRevocationFeed(nil) // the push example's
			if err != nil {
				t.Fatal(err)
			}
			s := startWith(t, backend, policyDoc, &server.Config{Revocations: feed, RevocationSecret: []byte("push-secret")})
			// What the examples refer to: a pending approval and an ambiguous effect.
			apr := s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "billing.charge", "arguments": map[string]any{"invoice_id": "inv_90", "amount": 90000}})
			amb := s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "billing.charge", "arguments": map[string]any{"invoice_id": "inv_87", "amount": 100}})
			if apr.status != 202 || amb.status != 200 {
				t.Fatalf("setup: %d %s / %d %s", apr.status, apr.raw, amb.status, amb.raw)
			}
			if r := s.do("POST", "/v1/actions/"+amb.body["action_id"].(string)+"/outcome", s.alice, map[string]any{"outcome": "unknown"}); r.status != 200 {
				t.Fatalf("setup outcome: %d %s", r.status, r.raw)
			}
			env := append(os.Environ(), "LATCH="+s.url, "TOKEN="+s.alice, "APPROVER="+s.approver, "APPROVAL_ID="+apr.body["approval_id"].(string), "PUSH_SECRET=push-secret")
			for i, c := range curls {
				cmd := exec.CommandContext(t.Context(), sh, "-c", c)
				cmd.Env = env
				out, err := cmd.Output()
				if strings.Contains(c, "/v1/events") {
					// A stream: curl stops it after --max-time (exit 28); what came is events.
					var ee *exec.ExitError
					if !errors.As(err, &ee) || ee.ExitCode() != 28 || !strings.Contains(string(out), "\nevent: action_proposed\ndata: {") {
						t.Errorf("curl example %d (events): %v\n%s\n%s", i+1, err, c, out)
					}
					continue
				}
				if err != nil {
					t.Fatalf("curl example %d: %v\n%s", i+1, err, c)
				}
				if strings.Contains(c, "/metrics") {
					// The Prometheus text format: the store's gauges are there in any server.
					if !strings.Contains(string(out), `latch_effects{state="committed"} `) || !strings.Contains(string(out), `latch_approvals{status="pending"} `) {
						t.Errorf("curl example %d (metrics) lacks the gauges of effects and approvals:\n%s\n%s", i+1, c, out)
					}
					continue
				}
				// One JSON object per curl command of the block.
				dec := json.NewDecoder(bytes.NewReader(out))
				for n := 0; n < strings.Count(c, "curl "); n++ {
					var v map[string]any
					if err := dec.Decode(&v); err != nil {
						t.Fatalf("curl example %d answered no JSON object: %v\n%s\n%s", i+1, err, c, out)
					}
					if typ, _ := v["type"].(string); strings.HasPrefix(typ, "urn:latch:problem:") {
						t.Errorf("curl example %d answered a problem:\n%s\n%s", i+1, c, out)
					}
					if tok, ok := v["token"].(string); ok && strings.HasPrefix(tok, "lrt_") {
						env = append(env, "RESUME_TOKEN="+tok) // the suspension's, for the resume example
					}
					if id, ok := v["action_id"].(string); ok && i == 0 {
						env = append(env, "ACTION_ID="+id) // the examples after it report on it
						if v["status"] != "reserved" {
							t.Errorf("first example: status %v, want reserved", v["status"])
						}
					}
				}
			}
		})
	}
}
