package latch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch"
)

// TestPolicyStaticScopes: a policy's static scopes give each principal its patterns — the
// "agent/user" entry before the "agent" one, nothing to a principal with no entry — and apply
// only to the actions the section lists. Config.Scope wins over the section, and the guard
// says so in its log.
func TestPolicyStaticScopes(t *testing.T) {
	t.Parallel()
	doc := scopePolicy + `scopes:
  actions: ["billing.*"]
  static:
    billing-worker: ["invoice:A-*"]
    billing-worker/alice: ["invoice:B-*"]
    idle-worker: []
`
	e := scopeEnvOn(t, "sqlite", doc, latch.Config{})
	var ran atomic.Int32
	exec := func(context.Context, json.RawMessage) (any, error) { ran.Add(1); return nil, nil }
	as := func(agent, user string) context.Context {
		return latch.WithPrincipal(t.Context(), latch.Principal{Agent: agent, User: user})
	}
	for _, tc := range []struct {
		agent, user, invoice string
		want                 string // "" runs, else the reason
	}{
		{"billing-worker", "", "A-1", ""},
		{"billing-worker", "", "B-1", "out_of_scope"},
		{"billing-worker", "bob", "A-2", ""},
		{"billing-worker", "alice", "B-2", ""},
		{"billing-worker", "alice", "A-3", "out_of_scope"},
		{"idle-worker", "", "A-4", "out_of_scope"},
		{"stranger", "", "A-5", "out_of_scope"},
	} {
		rc, err := e.g.Execute(as(tc.agent, tc.user), chargeCall(tc.invoice, 10), exec)
		if got := latch.ReasonOf(err); got != tc.want {
			t.Errorf("%s/%s charging %s = %v, want %q", tc.agent, tc.user, tc.invoice, err, tc.want)
			continue
		}
		if tc.want != "" {
			refusedOnScope(t, e, rc, err, "charge:"+tc.invoice, tc.want, rc.ScopeHash)
		}
	}
	if n := ran.Load(); n != 3 {
		t.Errorf("executor ran %d times, want 3", n)
	}
	// report.read is not among the section's actions: it runs without a resource.
	if _, err := e.g.Execute(as("stranger", ""), &latch.Call{Action: "report.read"}, exec); err != nil {
		t.Errorf("report.read, outside the section's actions: %v", err)
	}

	var logs bytes.Buffer
	all := &provider{fn: scopeOf("invoice:**")}
	e = scopeEnvOn(t, "sqlite", doc, latch.Config{Scope: all.scope, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if _, err := e.g.Execute(as("stranger", ""), chargeCall("Z-1", 10), exec); err != nil {
		t.Errorf("Config.Scope over the policy's section: %v", err)
	}
	if _, err := e.g.Execute(as("stranger", ""), &latch.Call{Action: "report.read"}, exec); latch.ReasonOf(err) != "out_of_scope" {
		t.Errorf("Config.Scope applies to every action: report.read = %v, want out_of_scope", err)
	}
	if !strings.Contains(logs.String(), "the policy's scopes section is not used") {
		t.Errorf("log = %s, want it to say the policy's scopes are not used", logs.String())
	}
}

// scopeService is a scope service behind a real HTTP server, answering as answer says and
// keeping the requests it was sent.
type scopeService struct {
	*httptest.Server
	mu       sync.Mutex
	answer   http.HandlerFunc
	requests []map[string]any
}

func newScopeService(t *testing.T) *scopeService {
	t.Helper()
	s := &scopeService{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req map[string]any
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.requests = append(s.requests, req)
		answer := s.answer
		s.mu.Unlock()
		answer(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *scopeService) set(h http.HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answer = h
}

func (s *scopeService) last() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[len(s.requests)-1]
}

func answerJSON(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}
}

// TestPolicyScopeService: a policy's scope service is asked over real HTTP with the call's
// action, resource, environment and principal, and its answer decides; a service that
// answers other than 2xx, too slowly, too much, or with anything but {"resources": [patterns]}
// refuses the call scope_unavailable before anything is reserved. It follows no redirect.
func TestPolicyScopeService(t *testing.T) {
	t.Parallel()
	svc := newScopeService(t)
	svc.set(answerJSON(`{"resources": ["invoice:A-*"], "ttl": 60}`))
	doc := scopePolicy + fmt.Sprintf("scopes:\n  url: %q\n  timeout: 300ms\n", svc.URL+"/v1/scope")
	e := scopeEnvOn(t, "sqlite", doc, latch.Config{})
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker", User: "alice"})
	var ran atomic.Int32
	exec := func(context.Context, json.RawMessage) (any, error) { ran.Add(1); return nil, nil }

	rc, err := e.g.Execute(ctx, chargeCall("A-1", 10), exec)
	if err != nil || rc.ScopeHash != mustHash(t, "invoice:A-*") {
		t.Fatalf("in scope = %+v, %v; want it run with the scope's hash", rc, err)
	}
	want := map[string]any{"action": "billing.charge", "resource": "invoice:A-1", "environment": "production",
		"principal": map[string]any{"agent": "billing-worker", "user": "alice"}, "task": nil}
	if got, _ := json.Marshal(svc.last()); string(got) != string(must(json.Marshal(want))) {
		t.Errorf("scope service was sent %s, want %s", got, must(json.Marshal(want)))
	}
	if _, err := e.g.Execute(agent(t.Context()), chargeCall("A-2", 10), exec); err != nil {
		t.Fatal(err)
	}
	if u := svc.last()["principal"].(map[string]any)["user"]; u != nil {
		t.Errorf("principal without a user sent user %v, want null", u)
	}
	if _, err := e.g.Execute(latch.WithTask(ctx, "ticket:4711"), chargeCall("A-3", 10), exec); err != nil {
		t.Fatal(err)
	}
	if task := svc.last()["task"]; task != "ticket:4711" {
		t.Errorf("call with a task sent task %v, want ticket:4711", task)
	}
	rc, err = e.g.Execute(ctx, chargeCall("B-1", 10), exec)
	refusedOnScope(t, e, rc, err, "charge:B-1", "out_of_scope", mustHash(t, "invoice:A-*"))

	target := newScopeService(t)
	target.set(answerJSON(`{"resources": ["invoice:**"]}`))
	big := `{"resources": [` + strings.Repeat(`"invoice:`+strings.Repeat("x", 1000)+`",`, 65) + `"invoice:*"]}`
	underLimit := `{"resources": [` + strings.Repeat(`"invoice:`+strings.Repeat("x", 1000)+`",`, 60) + `"invoice:*"]}`
	for i, tc := range []struct {
		name   string
		answer http.HandlerFunc
		says   string // "" runs
	}{
		{"just under 64 KiB", answerJSON(underLimit), ""},
		{"an empty scope", answerJSON(`{"resources": []}`), "out_of_scope"},
		{"500", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) }, "scope service answered 500 Internal Server Error"},
		{"404", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, "answered 404"},
		{"slow", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			answerJSON(`{"resources": ["invoice:**"]}`)(w, r)
		}, "did not answer within 300ms"},
		{"over 64 KiB", answerJSON(big), "larger than 64 KiB"},
		{"not JSON", answerJSON(`<html>scopes</html>`), "not JSON latch accepts"},
		{"truncated", answerJSON(`{"resources": ["invoice:*"`), "not JSON latch accepts"},
		{"a list", answerJSON(`["invoice:*"]`), "not a JSON object"},
		{"no resources", answerJSON(`{"scope": ["invoice:*"]}`), `no "resources" list`},
		{"resources null", answerJSON(`{"resources": null}`), `no "resources" list`},
		{"resources a string", answerJSON(`{"resources": "invoice:*"}`), `no "resources" list`},
		{"a number", answerJSON(`{"resources": ["invoice:*", 7]}`), "resources[1] is not a string"},
		{"duplicate member", answerJSON(`{"resources": [], "resources": ["invoice:*"]}`), "not JSON latch accepts"},
		{"bad pattern", answerJSON(`{"resources": ["invoice:**:x"]}`), "bad resource pattern (index 0)"},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
		}, "answered 307"},
	} {
		svc.set(tc.answer)
		before := ran.Load()
		invoice := fmt.Sprintf("A-9%d", i)
		rc, err := e.g.Execute(ctx, chargeCall(invoice, 10), exec)
		switch tc.says {
		case "":
			if err != nil || ran.Load() != before+1 {
				t.Errorf("%s: %v, want it run", tc.name, err)
			}
			continue
		case "out_of_scope":
			refusedOnScope(t, e, rc, err, "charge:"+invoice, "out_of_scope", mustHash(t))
		default:
			refusedOnScope(t, e, rc, err, "charge:"+invoice, "scope_unavailable", "")
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%s: error %q, want it to say %q", tc.name, err, tc.says)
			}
		}
		if ran.Load() != before {
			t.Errorf("%s: the executor ran", tc.name)
		}
		if strings.Contains(err.Error(), svc.URL) {
			t.Errorf("%s: error %q names the scope service's URL", tc.name, err)
		}
	}
	if n := len(target.requests); n != 0 {
		t.Errorf("the redirect was followed (%d requests)", n)
	}
	verifyChain(t, e.g)
}

// TestHTTPScopeURL: HTTPScope refuses, as the policy does, a URL a scope could be forged on.
func TestHTTPScopeURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"http://scopes.internal/x", "ftp://127.0.0.1/x", "https://u:p@s.example/x", "/scope", ""} {
		if _, err := latch.HTTPScope(u); err == nil {
			t.Errorf("HTTPScope(%q) succeeded", u)
		}
	}
	for _, u := range []string{"https://s.example/x", "http://127.0.0.1:8080/x", "http://localhost/x", "http://[::1]:9/x"} {
		if _, err := latch.HTTPScope(u); err != nil {
			t.Errorf("HTTPScope(%q) = %v", u, err)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
