package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/latchkit/latch/auth"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/identity"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/server"
	"github.com/latchkit/latch/store"
)

// observed records the (route pattern, status) pairs a handler answered.
type observed struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (o *observed) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: 200}
		h.ServeHTTP(rec, r)
		o.mu.Lock()
		defer o.mu.Unlock()
		o.seen[r.Pattern+" "+http.StatusText(rec.status)] = true
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) { s.status = code; s.ResponseWriter.WriteHeader(code) }

// Unwrap is for http.ResponseController: POST /v1/calls answers with its body still open.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// docRoutes are the routes docs/http.md documents, from its headings: ### `GET /v1/x`, `POST …`.
func docRoutes(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "docs", "http.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "### ") {
			continue
		}
		for _, m := range regexp.MustCompile("`(GET|POST) (/[^` ?\\[]*)").FindAllStringSubmatch(line, -1) {
			out[m[1]+" "+m[2]] = true
		}
	}
	return out
}

// TestOpenAPI: /v1/openapi.json is OpenAPI 3.1 and lists exactly the routes the server serves
// and docs/http.md documents; every status code it lists for an operation is one the live
// handler answers, observed here by driving each.
func TestOpenAPI(t *testing.T) {
	t.Parallel()
	g, err := latch.Open(t.Context(), &latch.Config{Policy: mustPolicy(t), StoreURL: storeURL(t, "sqlite")})
	if err != nil {
		t.Fatal(err)
	}
	var closeOnce sync.Once
	closeGuard := func() { closeOnce.Do(func() { g.Close() }) }
	t.Cleanup(closeGuard)
	// Two bodies of 4 KiB in flight are one agent's most: a third is 429.
	feed, err := identity.NewRevocationFeed(nil) // fed by pushes only
	if err != nil {
		t.Fatal(err)
	}
	srvr, err := server.New(g, &server.Config{MaxBody: 4096, MaxCallerInFlight: 8192, Revocations: feed, RevocationSecret: []byte("push-secret")})
	if err != nil {
		t.Fatal(err)
	}
	obs := &observed{seen: map[string]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: obs.wrap(srvr.Handler())}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Shutdown(context.Background()) })
	ts := g.Store().(store.TokenStore)
	mk := func(req *auth.NewToken) string {
		secret, _, err := auth.CreateToken(t.Context(), ts, req, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return secret
	}
	s := &srv{t: t, url: "http://" + ln.Addr().String(), g: g,
		alice: mk(&auth.NewToken{Kind: store.TokenAgent, Agent: "billing-worker"}), bob: mk(&auth.NewToken{Kind: store.TokenAgent, Agent: "other-worker"}),
		approver: mk(&auth.NewToken{Kind: store.TokenApprover, Approver: "carol"})}

	r := s.do("GET", "/v1/openapi.json", "", nil)
	if r.status != 200 || r.body["openapi"] != "3.1.0" {
		t.Fatalf("GET /v1/openapi.json = %d %.200s", r.status, r.raw)
	}
	documented := map[string][]string{} // "METHOD /path" → statuses
	for path, item := range r.body["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			for code := range op.(map[string]any)["responses"].(map[string]any) {
				documented[strings.ToUpper(method)+" "+path] = append(documented[strings.ToUpper(method)+" "+path], code)
			}
		}
	}
	inDocs := docRoutes(t)
	for route := range documented {
		if !inDocs[route] {
			t.Errorf("openapi.json lists %s, docs/http.md has no heading for it", route)
		}
	}
	for route := range inDocs {
		if documented[route] == nil {
			t.Errorf("docs/http.md documents %s, openapi.json does not list it", route)
		}
	}

	// Drive every operation to each status it documents.
	charge := func(inv string, amount int) map[string]any {
		return map[string]any{"action": "billing.charge", "arguments": map[string]any{"invoice_id": inv, "amount": amount}}
	}
	id := s.do("POST", "/v1/actions", s.alice, charge("inv_1", 100)).body["action_id"].(string)
	done := s.do("POST", "/v1/actions", s.alice, charge("inv_2", 100)).body["action_id"].(string)
	s.do("POST", "/v1/actions/"+done+"/outcome", s.alice, map[string]any{"outcome": "unknown"})
	noKey := s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "report.read"}).body["action_id"].(string)
	apr := s.do("POST", "/v1/actions", s.alice, charge("inv_9", 90000)).body["approval_id"].(string)
	apr2 := s.do("POST", "/v1/actions", s.alice, charge("inv_8", 90000)).body["approval_id"].(string)
	self := mk(&auth.NewToken{Kind: store.TokenApprover, Approver: "billing-worker"})
	unknown := "act_00000000000000000000000000000000"
	sus := s.do("POST", "/v1/actions", s.alice, charge("inv_5", 100)).body["action_id"].(string)
	suspended := s.do("POST", "/v1/actions/"+sus+"/suspend", s.alice, map[string]any{"request": map[string]any{"message": "confirm?"}})
	token, _ := suspended.body["token"].(string)
	if suspended.status != 200 || token == "" {
		t.Fatalf("POST /v1/actions/{id}/suspend = %d %.300s", suspended.status, suspended.raw)
	}
	susArgs := map[string]any{"amount": 100, "invoice_id": "inv_5"}
	for _, q := range []struct {
		method, path, token string
		body                any
	}{
		{"GET", "/healthz", "", nil},
		{"POST", "/v1/actions", s.alice, `{"action":"billing.charge","x":1}`},
		{"POST", "/v1/actions", "", nil},
		{"POST", "/v1/actions", s.alice, map[string]any{"action": "payout.send"}},
		{"POST", "/v1/actions", s.alice, charge("inv_1", 100)},
		{"POST", "/v1/actions", s.alice, `{"action":"billing.charge","arguments":{"invoice_id":"` + strings.Repeat("x", 5000) + `"}}`},
		{"POST", "/v1/actions", s.alice, []byte("form")},
		{"POST", "/v1/actions", s.alice, `{"action":"billing.charge","arguments":{"invoice_id":"x","amount":1.5}}`},
		{"GET", "/v1/actions/" + id, s.alice, nil},
		{"GET", "/v1/actions/" + id, "", nil},
		{"GET", "/v1/actions/" + id, s.bob, nil},
		{"GET", "/v1/actions/" + unknown, s.alice, nil},
		{"POST", "/v1/actions/" + id + "/lease", s.alice, map[string]any{"seconds": 60}},
		{"POST", "/v1/actions/" + id + "/lease", s.alice, map[string]any{"seconds": 0}},
		{"POST", "/v1/actions/" + id + "/lease", "", nil},
		{"POST", "/v1/actions/" + id + "/lease", s.bob, map[string]any{"seconds": 60}},
		{"POST", "/v1/actions/" + unknown + "/lease", s.alice, map[string]any{"seconds": 60}},
		{"POST", "/v1/actions/" + noKey + "/lease", s.alice, map[string]any{"seconds": 60}},
		{"POST", "/v1/actions/" + sus + "/suspend", s.alice, nil},
		{"POST", "/v1/actions/" + sus + "/suspend", s.alice, `{"request":1,"x":2}`},
		{"POST", "/v1/actions/" + sus + "/suspend", "", nil},
		{"POST", "/v1/actions/" + sus + "/suspend", s.bob, nil},
		{"POST", "/v1/actions/" + unknown + "/suspend", s.alice, nil},
		{"POST", "/v1/actions/" + sus + "/resume", s.alice, map[string]any{"arguments": susArgs}},
		{"POST", "/v1/actions/" + sus + "/resume", "", nil},
		{"POST", "/v1/actions/" + sus + "/resume", s.bob, map[string]any{"token": token, "arguments": susArgs}},
		{"POST", "/v1/actions/" + unknown + "/resume", s.alice, map[string]any{"token": token, "arguments": susArgs}},
		{"POST", "/v1/actions/" + sus + "/resume", s.alice, map[string]any{"token": token + "x", "arguments": susArgs}},
		{"POST", "/v1/actions/" + sus + "/resume", s.alice, `{"token":"` + token + `","arguments":{"amount":1.5,"invoice_id":"inv_5"}}`},
		{"POST", "/v1/actions/" + sus + "/resume", s.alice, map[string]any{"token": token, "arguments": susArgs, "input": map[string]any{"confirm": true}}},
		{"POST", "/v1/actions/" + id + "/outcome", s.alice, map[string]any{"outcome": "x"}},
		{"POST", "/v1/actions/" + id + "/outcome", "", nil},
		{"POST", "/v1/actions/" + id + "/outcome", s.bob, map[string]any{"outcome": "committed"}},
		{"POST", "/v1/actions/" + unknown + "/outcome", s.alice, map[string]any{"outcome": "committed"}},
		{"POST", "/v1/actions/" + id + "/outcome", s.alice, map[string]any{"outcome": "committed"}},
		{"POST", "/v1/actions/" + id + "/outcome", s.alice, map[string]any{"outcome": "committed"}},
		{"GET", "/v1/approvals", s.approver, nil},
		{"GET", "/v1/approvals?status=x", s.approver, nil},
		{"GET", "/v1/approvals", "", nil},
		{"GET", "/v1/approvals", s.alice, nil},
		{"GET", "/v1/approvals/" + apr, s.approver, nil},
		{"GET", "/v1/approvals/" + apr, "", nil},
		{"GET", "/v1/approvals/apr_x", s.approver, nil},
		{"POST", "/v1/approvals/" + apr + "/approve", "", nil},
		{"POST", "/v1/approvals/" + apr + "/approve", self, nil},
		{"POST", "/v1/approvals/apr_x/approve", s.approver, nil},
		{"POST", "/v1/approvals/" + apr + "/approve", s.approver, map[string]any{"notes": "typo"}},
		{"POST", "/v1/approvals/" + apr + "/approve", s.approver, map[string]any{"set": map[string]any{"amount": 1}}}, // 422: not editable
		{"POST", "/v1/approvals/" + apr + "/approve", s.approver, nil},
		{"POST", "/v1/approvals/" + apr + "/approve", s.approver, nil},
		{"POST", "/v1/approvals/" + apr2 + "/deny", "", nil},
		{"POST", "/v1/approvals/" + apr2 + "/deny", s.alice, nil},
		{"POST", "/v1/approvals/apr_x/deny", s.approver, nil},
		{"POST", "/v1/approvals/" + apr2 + "/deny", s.approver, map[string]any{"note": "bad\u0000"}},
		{"POST", "/v1/approvals/" + apr2 + "/deny", s.approver, nil},
		{"POST", "/v1/approvals/" + apr2 + "/deny", s.approver, nil},
		{"GET", "/v1/effects", s.approver, nil},
		{"GET", "/v1/effects?state=x", s.approver, nil},
		{"GET", "/v1/effects", "", nil},
		{"GET", "/v1/effects", s.alice, nil},
		{"GET", "/v1/effects/charge:inv_1", s.approver, nil},
		{"GET", "/v1/effects/charge:inv_1", "", nil},
		{"GET", "/v1/effects/charge:inv_1", s.alice, nil},
		{"GET", "/v1/effects/charge:none", s.approver, nil},
		{"POST", "/v1/effects/charge:inv_2/resolve", s.approver, map[string]any{"to": "x"}},
		{"POST", "/v1/effects/charge:inv_2/resolve", "", nil},
		{"POST", "/v1/effects/charge:inv_2/resolve", s.alice, map[string]any{"to": "failed"}},
		{"POST", "/v1/effects/charge:none/resolve", s.approver, map[string]any{"to": "failed"}},
		{"POST", "/v1/effects/charge:inv_2/resolve", s.approver, map[string]any{"to": "failed"}},
		{"POST", "/v1/effects/charge:inv_2/resolve", s.approver, map[string]any{"to": "failed"}},
		{"GET", "/v1/receipts", s.approver, nil},
		{"GET", "/v1/receipts?after=x", s.approver, nil},
		{"GET", "/v1/receipts", "", nil},
		{"GET", "/v1/receipts", s.alice, nil},
		{"GET", "/v1/stats?since=24h", s.approver, nil},
		{"GET", "/v1/stats?since=x", s.approver, nil},
		{"GET", "/v1/stats", "", nil},
		{"GET", "/v1/stats", s.alice, nil},
		{"GET", "/v1/coverage?since=24h", s.approver, nil},
		{"GET", "/v1/coverage?since=x", s.approver, nil},
		{"GET", "/v1/coverage", "", nil},
		{"GET", "/v1/coverage", s.alice, nil},
		{"GET", "/v1/events?after=x", s.approver, nil},
		{"GET", "/v1/events", "", nil},
		{"GET", "/v1/events", s.alice, nil},
		{"GET", "/v1/receipts/verify", s.approver, nil},
		{"GET", "/v1/receipts/verify", "", nil},
		{"GET", "/v1/receipts/verify", s.alice, nil},
		{"GET", "/v1/budgets", s.approver, nil},
		{"GET", "/v1/budgets", "", nil},
		{"GET", "/v1/budgets", s.alice, nil},
		{"POST", "/v1/break-glass", "", nil},
		{"POST", "/v1/break-glass", s.alice, map[string]any{"envelope": "incident", "reason": "x"}},
		{"POST", "/v1/break-glass", s.approver, map[string]any{"envelope": "incident", "reason": "x"}}, // no authority section: 404
		{"POST", "/v1/revocations", "push-secret", map[string]any{"events": []any{}}},
		{"POST", "/v1/revocations", "push-secret", `{"events": 3}`},
		{"POST", "/v1/revocations", s.approver, map[string]any{"events": []any{}}},
		{"POST", "/v1/revocations", "push-secret", `{"events": [], "pad": "` + strings.Repeat("x", 5000) + `"}`},
		{"POST", "/v1/slack/interactions", "", nil}, // no Slack: 404
		{"GET", "/readyz", "", nil},
	} {
		if b, ok := q.body.([]byte); ok { // a body that is not JSON, sent as a form
			req, _ := http.NewRequest(q.method, s.url+q.path, strings.NewReader(string(b)))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Authorization", "Bearer "+q.token)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
			continue
		}
		s.do(q.method, q.path, q.token, q.body)
	}
	// Break-glass openings need a policy with envelopes: a second server, observed alike.
	bg := breakGlassServer(t, obs)
	bg.do("POST", "/v1/break-glass", bg.approver, `{"envelope":"incident","reason":"x","ttl":1}`)
	bg.do("POST", "/v1/break-glass", bg.approver, map[string]any{"envelope": "incident", "reason": "x", "ttl_seconds": 7200})
	bg.do("POST", "/v1/break-glass", bg.approver, map[string]any{"envelope": "incident", "reason": "x", "ttl_seconds": 60})
	bg.do("POST", "/v1/revocations", "push-secret", map[string]any{"events": []any{}}) // no feed: 404
	// Slack's clicks need a server that takes them.
	driveSlack(t, obs)
	// Hops need a delegable grant the sending agent holds.
	hsv := observedServer(t, obs, hopPolicy)
	hop := map[string]any{"parent": "sender", "to": map[string]any{"agent": "billing-worker"}, "grant": "actions: [billing.charge]\nconstraints: {amount_lte: 50}\nexpires_at: 2098-01-01T00:00:00Z\n"}
	created := hsv.do("POST", "/v1/hops", hsv.bob, hop)
	hopID, _ := created.body["delegation_id"].(string)
	hsv.do("GET", "/v1/hops/"+hopID, hsv.approver, nil)
	hsv.do("GET", "/v1/hops/"+hopID, "", nil)
	hsv.do("GET", "/v1/hops/"+hopID, hsv.bob, nil)
	hsv.do("GET", "/v1/hops/dlg_nosuch", hsv.approver, nil)
	hsv.do("POST", "/v1/hops", "", hop)
	hsv.do("POST", "/v1/hops", hsv.approver, hop)
	hsv.do("POST", "/v1/hops", hsv.bob, map[string]any{"parent": "sender"})
	// Standing approvals need a policy that allows them.
	ssv := observedServer(t, obs, standingPolicy)
	sapr := ssv.do("POST", "/v1/actions", ssv.bob, refund("o-1", 100, "")).body["approval_id"].(string)
	sta := ssv.do("POST", "/v1/approvals/"+sapr+"/approve", ssv.approver, map[string]any{"standing": map[string]any{"uses": 1, "for": "1h"}}).
		header.Get(server.StandingIDHeader)
	for _, q := range []struct {
		method, path, token string
		body                any
	}{
		{"GET", "/v1/standing", ssv.approver, nil},
		{"GET", "/v1/standing?state=x", ssv.approver, nil},
		{"GET", "/v1/standing", "", nil},
		{"GET", "/v1/standing", ssv.bob, nil},
		{"GET", "/v1/standing/" + sta, ssv.approver, nil},
		{"GET", "/v1/standing/" + sta, "", nil},
		{"GET", "/v1/standing/sta_x", ssv.approver, nil},
		{"POST", "/v1/standing/" + sta + "/revoke", "", nil},
		{"POST", "/v1/standing/" + sta + "/revoke", ssv.bob, nil},
		{"POST", "/v1/standing/sta_x/revoke", ssv.approver, nil},
		{"POST", "/v1/standing/" + sta + "/revoke", ssv.approver, map[string]any{"note": "bad\u0000"}},
		{"POST", "/v1/standing/" + sta + "/revoke", ssv.approver, nil},
		{"POST", "/v1/standing/" + sta + "/revoke", ssv.approver, nil},
	} {
		ssv.do(q.method, q.path, q.token, q.body)
	}
	// POST /v1/calls, each line of its body sent at once (as curl sends a body).
	line := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b) + "\n"
	}
	for _, q := range []struct{ token, contentType, body string }{
		{s.alice, server.CallContentType, line(charge("inv_c1", 100)) + line(map[string]any{"outcome": "committed"})},
		{s.alice, server.CallContentType, line(charge("inv_c2", 90000))},
		{s.alice, server.CallContentType, "{\"action\":\n"},
		{"", server.CallContentType, line(charge("inv_c3", 100))},
		{s.alice, server.CallContentType, line(map[string]any{"action": "payout.send"})},
		{s.alice, server.CallContentType, line(charge("inv_c1", 100))},
		{s.alice, server.CallContentType, `{"action":"billing.charge","arguments":{"invoice_id":"` + strings.Repeat("x", 5000) + "\"}}\n"},
		{s.alice, "application/json", line(charge("inv_c4", 100))},
		{s.alice, server.CallContentType, `{"action":"billing.charge","arguments":{"invoice_id":"x","amount":1.5}}` + "\n"},
	} {
		req, _ := http.NewRequest("POST", s.url+"/v1/calls", strings.NewReader(q.body))
		req.Header.Set("Content-Type", q.contentType)
		if q.token != "" {
			req.Header.Set("Authorization", "Bearer "+q.token)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	// Two calls waiting for their outcomes hold an agent's most: a third is 429.
	c1, c2 := dialCall(t, s, s.alice, "", charge("inv_c5", 100)), dialCall(t, s, s.alice, "", charge("inv_c6", 100))
	c1.begun()
	c2.begun()
	if third := dialCall(t, s, s.alice, "", charge("inv_c7", 100)); third.resp.StatusCode != 429 {
		t.Errorf("a third call waiting = %d, want 429", third.resp.StatusCode)
	}
	c1.conn.Close()
	c2.conn.Close()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if r := s.do("POST", "/v1/actions", s.alice, `{}`); r.status != 429 {
			break // the cut calls' bytes are given back
		}
	}
	// Past an agent's bodies in flight: two held, the third refused (429) on either route.
	for _, path := range []string{"/v1/actions", "/v1/actions/" + id + "/outcome"} {
		h1, h2 := hold(t, s.url, path, s.alice, 4096), hold(t, s.url, path, s.alice, 4096)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if r := s.do("POST", path, s.alice, `{}`); r.status == 429 {
				break
			}
		}
		h1.release()
		h2.release()
	}
	// The begin's Idempotency-Key header is a documented parameter.
	var keyParam map[string]any
	for _, p := range r.body["paths"].(map[string]any)["/v1/actions"].(map[string]any)["post"].(map[string]any)["parameters"].([]any) {
		if p := p.(map[string]any); p["name"] == server.IdempotencyKeyHeader && p["in"] == "header" {
			keyParam = p
		}
	}
	if keyParam == nil || keyParam["schema"].(map[string]any)["maxLength"] != float64(store.MaxRequestKey) {
		t.Errorf("POST /v1/actions documents no Idempotency-Key header of at most %d bytes: %v", store.MaxRequestKey, keyParam)
	}
	// Metrics are the Prometheus text format, not JSON.
	if resp, err := http.Get(s.url + "/metrics"); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// A stream answers 200 and runs until the client goes.
	sctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	req, _ := http.NewRequestWithContext(sctx, "GET", s.url+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+s.approver)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	cancel()
	time.Sleep(100 * time.Millisecond) // the handler notices the client left
	closeGuard()
	s.do("GET", "/readyz", "", nil)

	obs.mu.Lock()
	defer obs.mu.Unlock()
	var missing []string
	for route, codes := range documented {
		for _, code := range codes {
			n := 0
			for _, c := range code {
				n = n*10 + int(c-'0')
			}
			if !obs.seen[route+" "+http.StatusText(n)] {
				missing = append(missing, route+" "+code)
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("openapi.json documents statuses no live handler answered here:\n%s", strings.Join(missing, "\n"))
	}
	var raw map[string]any
	if err := json.Unmarshal(r.raw, &raw); err != nil || raw["components"] == nil {
		t.Errorf("openapi.json has no components: %v", err)
	}
}

// freeForm are the members the OpenAPI document types as an object without naming its fields,
// on purpose: an action's arguments (the policy names them) and a receipt document
// (docs/guarantees.md#fields).
var freeForm = map[string]bool{"arguments": true, "receipt": true}

// TestOpenAPINamesEveryField: every object of the document names its fields, and every array
// its items, except the free-form members above. A member typed as a bare object hides its
// fields from every check that compares the document with the live answers.
func TestOpenAPINamesEveryField(t *testing.T) {
	t.Parallel()
	s := start(t, "sqlite", nil)
	doc := s.do("GET", "/v1/openapi.json", "", nil).body
	var walk func(path, name string, v any)
	walk = func(path, name string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		if _, isRef := m["$ref"]; isRef {
			return
		}
		typ := m["type"]
		if ts, ok := typ.([]any); ok && len(ts) > 0 {
			typ = ts[0] // ["object","null"]: a nullable object
		}
		switch typ {
		case "object":
			if m["properties"] == nil && m["additionalProperties"] == nil && !freeForm[name] {
				t.Errorf("%s: an object that names no fields", path)
			}
		case "array":
			if m["items"] == nil {
				t.Errorf("%s: an array whose items have no schema", path)
			}
		}
		if props, ok := m["properties"].(map[string]any); ok {
			for k, p := range props {
				walk(path+"/properties/"+k, k, p)
			}
		}
		if items, ok := m["items"]; ok {
			walk(path+"/items", name, items)
		}
	}
	for name, sc := range doc["components"].(map[string]any)["schemas"].(map[string]any) {
		walk("#/components/schemas/"+name, name, sc)
	}
}

// conforms checks the live answer v against schema (of the document's components): every member
// of an object is one the schema names, and every member the schema requires is there, all the
// way down.
func conforms(t *testing.T, components map[string]any, path string, schema, v any) {
	t.Helper()
	sc, _ := schema.(map[string]any)
	if ref, ok := sc["$ref"].(string); ok {
		sc, _ = components[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any)
	}
	switch v := v.(type) {
	case map[string]any:
		props, ok := sc["properties"].(map[string]any)
		if !ok {
			return // free-form
		}
		for k, x := range v {
			p, named := props[k]
			if !named {
				t.Errorf("%s: the answer has %q, the OpenAPI schema names %v", path, k, sortedNames(props))
				continue
			}
			conforms(t, components, path+"/"+k, p, x)
		}
		req, _ := sc["required"].([]any)
		for _, k := range req {
			if _, ok := v[k.(string)]; !ok {
				t.Errorf("%s: the answer lacks %q, which the OpenAPI schema requires", path, k)
			}
		}
	case []any:
		for i, x := range v {
			conforms(t, components, fmt.Sprintf("%s/%d", path, i), sc["items"], x)
		}
	}
}

func sortedNames(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestOpenAPIObservedBegin: an observe-mode begin answers would_have with the members the
// OpenAPI document names (decision, reason, effect), lower-case as in the receipt.
func TestOpenAPIObservedBegin(t *testing.T) {
	t.Parallel()
	s := startWith(t, "sqlite", "schema: latch.policy/v1\nmode: observe\nactions:\n  billing.charge:\n    effect: \"charge:{invoice_id}\"\n    decision: deny\n", nil)
	r := s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "billing.charge", "arguments": map[string]any{"invoice_id": "inv_1"}})
	if r.status != 200 || r.body["would_have"] == nil {
		t.Fatalf("observed begin = %d %s, want 200 with would_have", r.status, r.raw)
	}
	doc := s.do("GET", "/v1/openapi.json", "", nil).body
	components := doc["components"].(map[string]any)["schemas"].(map[string]any)
	conforms(t, components, "Action", components["Action"], r.body)
	wh := r.body["would_have"].(map[string]any)
	if wh["decision"] != "deny" || wh["effect"] != "reserved" {
		t.Errorf("would_have = %v, want decision deny, effect reserved", wh)
	}
}

// breakGlassServer serves breakGlassPolicy through obs, with an approver token for carol, who
// may open its envelope.
func breakGlassServer(t *testing.T, obs *observed) *srv {
	t.Helper()
	return observedServer(t, obs, breakGlassPolicy)
}

// observedServer is a server over its own SQLite store with policyDoc, its traffic observed by
// obs, with tokens for approver carol (approver) and agent other-worker (bob).
func observedServer(t *testing.T, obs *observed, policyDoc string) *srv {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(policyDoc))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: storeURL(t, "sqlite")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	srvr, err := server.New(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: obs.wrap(srvr.Handler())}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Shutdown(context.Background()) })
	secret, _, err := auth.CreateToken(t.Context(), g.Store().(store.TokenStore), &auth.NewToken{Kind: store.TokenApprover, Approver: "carol"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	bob, _, err := auth.CreateToken(t.Context(), g.Store().(store.TokenStore), &auth.NewToken{Kind: store.TokenAgent, Agent: "other-worker"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &srv{t: t, url: "http://" + ln.Addr().String(), g: g, approver: secret, bob: bob}
}
