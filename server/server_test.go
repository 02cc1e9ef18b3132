package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/latchkit/latch/auth"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/server"
	"github.com/latchkit/latch/store"
)

const testPolicy = `
schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    arguments:
      invoice_id: { type: string, display: { label: Invoice } }
      amount: { type: integer, display: { money: { minor_units: 2, currency: EUR } } }
    rules:
      - when: { amount_lte: 50000 }
        decision: allow
      - decision: approve
  report.read:
    decision: allow
  payout.send:
    decision: deny
`

var backends = []string{"sqlite", "postgres"}

// clock is the servers' injectable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// storeURL returns a fresh store URL on backend: a SQLite file, or a new Postgres schema
// dropped after the test.
func storeURL(t *testing.T, backend string) string { return testdb.URL(t, backend, "latch_serve") }

// srv is a real latch server on 127.0.0.1 over a real store, with tokens for two agents and an
// approver.
type srv struct {
	t        *testing.T
	url      string
	g        *latch.Guard
	clock    *clock
	alice    string // agent billing-worker
	bob      string // agent other-worker
	approver string // approver carol
	cancel   context.CancelFunc
	done     chan error
	// closeGuard closes the guard once (a test may close it early).
	closeGuard func()
	storeURL   string // the guard's store
}

func start(t *testing.T, backend string, cfg *server.Config) *srv {
	t.Helper()
	return startWith(t, backend, testPolicy, cfg)
}

func startWith(t *testing.T, backend, policyDoc string, cfg *server.Config) *srv {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(policyDoc))
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	var sinks []latch.Sink
	if cfg != nil && cfg.Metrics != nil {
		sinks = append(sinks, cfg.Metrics) // the server serves the sink the guard counts into
	}
	u := storeURL(t, backend)
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: u, Now: c.Now, Sinks: sinks})
	if err != nil {
		t.Fatal(err)
	}
	var closeOnce sync.Once
	closeGuard := func() { closeOnce.Do(func() { g.Close() }) }
	t.Cleanup(closeGuard)
	var sc server.Config
	if cfg != nil {
		sc = *cfg
	}
	sc.Now = c.Now
	s, err := server.New(g, &sc)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := &srv{t: t, url: "http://" + ln.Addr().String(), g: g, clock: c, cancel: cancel, done: make(chan error, 1), closeGuard: closeGuard, storeURL: u}
	go func() { out.done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-out.done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	ts := g.Store().(store.TokenStore)
	mk := func(req *auth.NewToken) string {
		secret, _, err := auth.CreateToken(t.Context(), ts, req, c.Now())
		if err != nil {
			t.Fatal(err)
		}
		return secret
	}
	out.alice = mk(&auth.NewToken{Kind: store.TokenAgent, Agent: "billing-worker"})
	out.bob = mk(&auth.NewToken{Kind: store.TokenAgent, Agent: "other-worker"})
	out.approver = mk(&auth.NewToken{Kind: store.TokenApprover, Approver: "carol"})
	return out
}

// response is an answer read whole.
type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

func (s *srv) do(method, path, token string, body any) *response {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(s.t.Context(), method, s.url+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	out := &response{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out.body); err != nil {
			s.t.Fatalf("%s %s: answer is not a JSON object: %v\n%s", method, path, err, raw)
		}
	}
	return out
}

// wantProblem checks that r is a problem document with the status and type, and returns it.
func wantProblem(t *testing.T, what string, r *response, status int, reason string) map[string]any {
	t.Helper()
	if r.status != status || r.header.Get("Content-Type") != "application/problem+json" ||
		r.body["type"] != server.ProblemTypePrefix+reason || r.body["status"] != float64(status) || r.body["detail"] == "" {
		t.Errorf("%s: %d %s %s, want %d problem+json of type %s", what, r.status, r.header.Get("Content-Type"), r.raw, status, server.ProblemTypePrefix+reason)
	}
	return r.body
}

// footprint is what the store holds: write transactions, receipts and events.
type footprint struct{ writes, receipts, events int64 }

func (s *srv) footprint() footprint {
	s.t.Helper()
	ctx := s.t.Context()
	var f footprint
	f.writes = s.g.Store().(store.WriteCounter).WriteTransactions()
	for _, err := range s.g.Store().Receipts(ctx, store.ReceiptFilter{}) {
		if err != nil {
			s.t.Fatal(err)
		}
		f.receipts++
	}
	evs, err := s.g.Store().Events(ctx, store.EventFilter{})
	if err != nil {
		s.t.Fatal(err)
	}
	f.events = int64(len(evs))
	return f
}

func charge(invoice string, amount int) map[string]any {
	return map[string]any{"action": "billing.charge", "arguments": map[string]any{"invoice_id": invoice, "amount": amount}}
}

// TestActionsOutcome: a remote executor begins a charge, acts, reports it; the next attempt on
// the key meets the stored result, exactly as in process.
func TestActionsOutcome(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := start(t, backend, nil)
			r := s.do("POST", "/v1/actions", s.alice, charge("inv_1", 100))
			if r.status != 200 || r.body["status"] != "reserved" || r.body["effect_key"] != "charge:inv_1" || r.body["attempt"] != float64(1) ||
				r.body["idempotency_token"] == nil || r.body["effect_token"] == nil || r.body["lease_expires_at"] != "2026-11-29T10:05:00.000Z" {
				t.Fatalf("POST /v1/actions = %d %s", r.status, r.raw)
			}
			id := r.body["action_id"].(string)
			if g := s.do("GET", "/v1/actions/"+id, s.alice, nil); g.status != 200 || g.body["status"] != "reserved" || g.body["action_id"] != id {
				t.Errorf("GET /v1/actions/{id} = %d %s", g.status, g.raw)
			}
			if l := s.do("POST", "/v1/actions/"+id+"/lease", s.alice, map[string]any{"seconds": 600}); l.status != 200 || l.body["lease_expires_at"] != "2026-11-29T10:10:00.000Z" {
				t.Errorf("POST lease = %d %s", l.status, l.raw)
			}
			o := s.do("POST", "/v1/actions/"+id+"/outcome", s.alice, map[string]any{"outcome": "committed", "result": map[string]any{"charge": "ch_1"}})
			if o.status != 200 || o.body["status"] != "recorded" || o.body["result"] != "committed" || o.body["receipt_hash"] == nil {
				t.Fatalf("POST outcome = %d %s", o.status, o.raw)
			}
			rc := o.body["receipt"].(map[string]any)
			if rc["action_id"] != id || rc["result"] != "committed" || rc["effect_key"] != "charge:inv_1" || rc["principal"].(map[string]any)["agent"] != "billing-worker" {
				t.Errorf("receipt = %v", rc)
			}
			if g := s.do("GET", "/v1/actions/"+id, s.alice, nil); g.status != 200 || g.body["status"] != "recorded" || g.body["receipt"] == nil {
				t.Errorf("GET /v1/actions/{id} after the outcome = %d %s", g.status, g.raw)
			}
			again := s.do("POST", "/v1/actions", s.alice, charge("inv_1", 100))
			p := wantProblem(t, "second charge", again, 409, "committed")
			if p["reason"] != "committed" || p["effect_key"] != "charge:inv_1" || p["result"].(map[string]any)["charge"] != "ch_1" {
				t.Errorf("duplicate = %s, want the stored result", again.raw)
			}
			// No effect key: allowed, then recorded.
			a := s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "report.read", "arguments": map[string]any{}})
			if a.status != 200 || a.body["status"] != "allowed" || a.body["effect_key"] != nil {
				t.Fatalf("report.read = %d %s", a.status, a.raw)
			}
			if o := s.do("POST", "/v1/actions/"+a.body["action_id"].(string)+"/outcome", s.alice, map[string]any{"outcome": "committed"}); o.status != 200 {
				t.Errorf("report.read outcome = %d %s", o.status, o.raw)
			}
			// A denied action: the reason word, its kind, and the rule that denied as data.
			d := wantProblem(t, "payout", s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "payout.send"}), 403, "denied")
			if d["reason"] != "denied" || d["kind"] != "denied" || d["rule"] != "decision" {
				t.Errorf("payout reason, kind, rule = %v, %v, %v, want denied, denied, decision", d["reason"], d["kind"], d["rule"])
			}
			wantProblem(t, "unknown action", s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "nope"}), 403, "unknown_action")
			f := wantProblem(t, "float", s.do("POST", "/v1/actions", s.alice, `{"action":"billing.charge","arguments":{"invoice_id":"x","amount":0.5}}`), 422, "invalid_argument")
			if f["pointer"] != "/amount" {
				t.Errorf("float pointer = %v, want /amount", f["pointer"])
			}
		})
	}
}

// TestBadInputWritesNothing: every kind of bad request is a problem document naming what was
// wrong, and the store is exactly as it was.
func TestBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := start(t, backend, nil)
			ts := s.g.Store().(store.TokenStore)
			expiring, _, err := auth.CreateToken(t.Context(), ts, &auth.NewToken{Kind: store.TokenAgent, Agent: "billing-worker", TTL: time.Hour}, s.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			revoked, tk, err := auth.CreateToken(t.Context(), ts, &auth.NewToken{Kind: store.TokenAgent, Agent: "billing-worker"}, s.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ts.RevokeToken(t.Context(), tk.ID, s.clock.Now()); err != nil {
				t.Fatal(err)
			}
			s.clock.Add(time.Hour) // the expiring token lapses exactly now

			r := s.do("POST", "/v1/actions", s.alice, charge("inv_1", 100))
			if r.status != 200 {
				t.Fatalf("POST /v1/actions = %d %s", r.status, r.raw)
			}
			id := r.body["action_id"].(string)
			// An outcome recorded once, so that replaying it is a case below.
			r2 := s.do("POST", "/v1/actions", s.alice, charge("inv_2", 100))
			done := r2.body["action_id"].(string)
			if o := s.do("POST", "/v1/actions/"+done+"/outcome", s.alice, map[string]any{"outcome": "committed"}); o.status != 200 {
				t.Fatalf("outcome = %d %s", o.status, o.raw)
			}

			big := `{"action":"billing.charge","arguments":{"invoice_id":"` + strings.Repeat("x", 2<<20) + `"}}`
			cases := []struct {
				name, method, path, token string
				body                      any
				status                    int
				reason, field             string
			}{
				{"oversized body", "POST", "/v1/actions", s.alice, big, 413, "body_too_large", ""},
				{"unknown field", "POST", "/v1/actions", s.alice, `{"action":"billing.charge","amount":5}`, 400, "unknown_field", "amount"},
				{"wrong type", "POST", "/v1/actions", s.alice, `{"action":5}`, 400, "wrong_type", "action"},
				{"wrong type wait", "POST", "/v1/actions", s.alice, `{"action":"report.read","wait_seconds":"5"}`, 400, "wrong_type", "wait_seconds"},
				{"not an object", "POST", "/v1/actions", s.alice, `[1]`, 400, "wrong_type", ""},
				{"not JSON", "POST", "/v1/actions", s.alice, `{"action":`, 400, "invalid_json", ""},
				{"trailing data", "POST", "/v1/actions", s.alice, `{"action":"report.read"} {}`, 400, "invalid_json", ""},
				{"empty body", "POST", "/v1/actions", s.alice, "", 400, "invalid_json", ""},
				{"missing action", "POST", "/v1/actions", s.alice, `{"arguments":{}}`, 400, "missing_field", "action"},
				{"wait too long", "POST", "/v1/actions", s.alice, `{"action":"report.read","wait_seconds":3600}`, 400, "invalid_field", "wait_seconds"},
				{"wait overflowing", "POST", "/v1/actions", s.alice, `{"action":"report.read","wait_seconds":18446744074}`, 400, "invalid_field", "wait_seconds"},
				{"no token", "POST", "/v1/actions", "", charge("inv_3", 1), 401, "unauthenticated", ""},
				{"forged token", "POST", "/v1/actions", "latch_" + strings.Repeat("A", 43), charge("inv_3", 1), 401, "invalid_token", ""},
				{"foreign credential", "POST", "/v1/actions", "eyJhbGciOiJub25lIn0.e30.", charge("inv_3", 1), 401, "invalid_token", ""},
				{"expired token", "POST", "/v1/actions", expiring, charge("inv_3", 1), 401, "token_expired", ""},
				{"revoked token", "POST", "/v1/actions", revoked, charge("inv_3", 1), 401, "token_revoked", ""},
				{"approver proposes", "POST", "/v1/actions", s.approver, charge("inv_3", 1), 403, "forbidden", ""},
				{"other agent's outcome", "POST", "/v1/actions/" + id + "/outcome", s.bob, map[string]any{"outcome": "committed"}, 403, "not_holder", ""},
				{"other agent's lease", "POST", "/v1/actions/" + id + "/lease", s.bob, map[string]any{"seconds": 60}, 403, "not_holder", ""},
				{"other agent reads", "GET", "/v1/actions/" + id, s.bob, nil, 403, "not_holder", ""},
				{"replayed outcome", "POST", "/v1/actions/" + done + "/outcome", s.alice, map[string]any{"outcome": "committed"}, 409, "already_recorded", ""},
				{"replayed other outcome", "POST", "/v1/actions/" + done + "/outcome", s.alice, map[string]any{"outcome": "unknown"}, 409, "already_recorded", ""},
				{"unknown action id", "POST", "/v1/actions/act_00000000000000000000000000000000/outcome", s.alice, map[string]any{"outcome": "committed"}, 404, "no_such_action", ""},
				{"bad outcome word", "POST", "/v1/actions/" + id + "/outcome", s.alice, map[string]any{"outcome": "failed"}, 400, "invalid_field", "outcome"},
				{"missing outcome", "POST", "/v1/actions/" + id + "/outcome", s.alice, map[string]any{}, 400, "missing_field", "outcome"},
				{"result without commit", "POST", "/v1/actions/" + id + "/outcome", s.alice, map[string]any{"outcome": "unknown", "result": 1}, 400, "invalid_field", "result"},
				{"outcome unknown field", "POST", "/v1/actions/" + id + "/outcome", s.alice, map[string]any{"outcome": "committed", "note": "x"}, 400, "unknown_field", "note"},
				{"outcome wrong type", "POST", "/v1/actions/" + id + "/outcome", s.alice, map[string]any{"outcome": true}, 400, "wrong_type", "outcome"},
				{"lease not positive", "POST", "/v1/actions/" + id + "/lease", s.alice, map[string]any{"seconds": 0}, 400, "invalid_field", "seconds"},
				{"lease past 7 days", "POST", "/v1/actions/" + id + "/lease", s.alice, map[string]any{"seconds": 604801}, 400, "invalid_field", "seconds"},
				{"lease overflowing", "POST", "/v1/actions/" + id + "/lease", s.alice, `{"seconds":18446744074}`, 400, "invalid_field", "seconds"},
				{"agent lists approvals", "GET", "/v1/approvals", s.alice, nil, 403, "forbidden", ""},
				{"agent resolves", "POST", "/v1/effects/charge:inv_1/resolve", s.alice, map[string]any{"to": "failed"}, 403, "forbidden", ""},
				{"resolve not ambiguous", "POST", "/v1/effects/charge:inv_1/resolve", s.approver, map[string]any{"to": "failed"}, 409, "not_ambiguous", ""},
				{"resolve bad target", "POST", "/v1/effects/charge:inv_1/resolve", s.approver, map[string]any{"to": "executing"}, 400, "invalid_field", "to"},
				{"approve unknown", "POST", "/v1/approvals/apr_00000000000000000000000000000000/approve", s.approver, nil, 404, "approval_not_found", ""},
				{"bad status filter", "GET", "/v1/approvals?status=maybe", s.approver, nil, 400, "invalid_query", "status"},
				{"bad limit", "GET", "/v1/receipts?limit=0", s.approver, nil, 400, "invalid_query", "limit"},
				{"wrong media type", "POST", "/v1/actions", s.alice, nil, 415, "unsupported_media_type", ""},
				{"unknown route", "GET", "/v1/nothing", s.alice, nil, 404, "not_found", ""},
				{"wrong method", "DELETE", "/v1/actions", s.alice, nil, 405, "method_not_allowed", ""},
			}
			before := s.footprint()
			for _, tc := range cases {
				var r *response
				if tc.name == "wrong media type" {
					req, _ := http.NewRequestWithContext(t.Context(), "POST", s.url+tc.path, strings.NewReader(`action=report.read`))
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
					req.Header.Set("Authorization", "Bearer "+tc.token)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					raw, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					r = &response{status: resp.StatusCode, header: resp.Header, raw: raw}
					_ = json.Unmarshal(raw, &r.body)
				} else {
					r = s.do(tc.method, tc.path, tc.token, tc.body)
				}
				p := wantProblem(t, tc.name, r, tc.status, tc.reason)
				if tc.field != "" && p["field"] != tc.field {
					t.Errorf("%s: field = %v, want %q", tc.name, p["field"], tc.field)
				}
				if tc.status == 401 && r.header.Get("WWW-Authenticate") == "" {
					t.Errorf("%s: 401 without WWW-Authenticate", tc.name)
				}
			}
			if after := s.footprint(); after != before {
				t.Errorf("bad input changed the store: %+v -> %+v", before, after)
			}
			if e, _ := s.g.Store().Effect(t.Context(), "charge:inv_1"); e.State != store.Executing {
				t.Errorf("effect after bad input = %s, want executing", e.State)
			}
			if e, _ := s.g.Store().Effect(t.Context(), "charge:inv_3"); e != nil {
				t.Errorf("a refused request reserved charge:inv_3: %+v", e)
			}
		})
	}
}

// TestApprovalOverHTTP: a charge over the limit waits for a human; the approver answers over
// the API (not their own request), the agent presents the approval once.
func TestApprovalOverHTTP(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := start(t, backend, nil)
			r := s.do("POST", "/v1/actions", s.alice, charge("inv_9", 90000))
			if r.status != 202 || r.body["status"] != "approval_required" || r.body["approval"].(map[string]any)["arguments"].(map[string]any)["amount"] != float64(90000) {
				t.Fatalf("over the limit = %d %s", r.status, r.raw)
			}
			apr := r.body["approval_id"].(string)
			g := s.do("GET", "/v1/approvals/"+apr, s.alice, nil)
			if g.status != 200 || g.body["status"] != "pending" {
				t.Errorf("agent reads its request = %d %s", g.status, g.raw)
			}
			// The policy's display hints read the arguments for the human; the raw value stays.
			wantDisplay := []any{
				map[string]any{"name": "invoice_id", "label": "Invoice", "raw": `"inv_9"`, "human": nil},
				map[string]any{"name": "amount", "label": nil, "raw": "90000", "human": "€900.00 (90000 minor units)"},
			}
			if diff := cmp.Diff(wantDisplay, g.body["display"]); diff != "" {
				t.Errorf("approval display (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantDisplay, r.body["approval"].(map[string]any)["display"]); diff != "" {
				t.Errorf("approval_required display (-want +got):\n%s", diff)
			}
			wantProblem(t, "another agent reads it", s.do("GET", "/v1/approvals/"+apr, s.bob, nil), 404, "approval_not_found")
			wantProblem(t, "present before granted", s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "billing.charge",
				"arguments": map[string]any{"invoice_id": "inv_9", "amount": 90000}, "approval_id": apr}), 403, "approval_pending")
			// An approver whose name is the requesting agent cannot approve it.
			self, _, err := auth.CreateToken(t.Context(), s.g.Store().(store.TokenStore), &auth.NewToken{Kind: store.TokenApprover, Approver: "billing-worker"}, s.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			wantProblem(t, "self approval", s.do("POST", "/v1/approvals/"+apr+"/approve", self, nil), 403, "self_approval")
			if l := s.do("GET", "/v1/approvals?status=pending", s.approver, nil); l.status != 200 || len(l.body["approvals"].([]any)) != 1 {
				t.Errorf("pending list = %d %s", l.status, l.raw)
			}
			if a := s.do("POST", "/v1/approvals/"+apr+"/approve", s.approver, nil); a.status != 200 || a.body["status"] != "granted" || a.body["approver"] != "carol" {
				t.Fatalf("approve = %d %s", a.status, a.raw)
			}
			wantProblem(t, "second answer", s.do("POST", "/v1/approvals/"+apr+"/deny", s.approver, map[string]any{}), 409, "already_granted")
			wantProblem(t, "mutated action", s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "billing.charge",
				"arguments": map[string]any{"invoice_id": "inv_9", "amount": 95000}, "approval_id": apr}), 403, "approval_mismatch")
			body := map[string]any{"action": "billing.charge", "arguments": map[string]any{"invoice_id": "inv_9", "amount": 90000}, "approval_id": apr}
			ok := s.do("POST", "/v1/actions", s.alice, body)
			if ok.status != 200 || ok.body["status"] != "reserved" || ok.body["approval_id"] != apr {
				t.Fatalf("with the approval = %d %s", ok.status, ok.raw)
			}
			wantProblem(t, "replayed approval", s.do("POST", "/v1/actions", s.alice, body), 403, "approval_consumed")
			o := s.do("POST", "/v1/actions/"+ok.body["action_id"].(string)+"/outcome", s.alice, map[string]any{"outcome": "unknown", "error": "timeout"})
			if o.status != 200 || o.body["result"] != "ambiguous" {
				t.Fatalf("outcome unknown = %d %s", o.status, o.raw)
			}
			if e := s.do("GET", "/v1/effects?state=ambiguous", s.approver, nil); e.status != 200 || len(e.body["effects"].([]any)) != 1 {
				t.Errorf("ambiguous effects = %d %s", e.status, e.raw)
			}
			res := s.do("POST", "/v1/effects/"+url.PathEscape("charge:inv_9")+"/resolve", s.approver, map[string]any{"to": "committed"})
			if res.status != 200 || res.body["state"] != "committed" || res.body["resolved_by"] != "http:carol" {
				t.Errorf("resolve = %d %s", res.status, res.raw)
			}
			st := s.do("GET", "/v1/stats?since=1h", s.approver, nil)
			if st.status != 200 || st.body["receipts"] != float64(4) || st.body["since"] != "2026-11-29T09:00:00.000Z" {
				t.Errorf("stats = %d %s", st.status, st.raw)
			} else {
				want := map[string]float64{"billing.charge/ambiguous": 1, "billing.charge/blocked": 3}
				for _, c := range st.body["counts"].([]any) {
					m := c.(map[string]any)
					k := m["action"].(string) + "/" + m["result"].(string)
					if want[k] != m["count"] {
						t.Errorf("stats count %s = %v, want %v", k, m["count"], want[k])
					}
					delete(want, k)
				}
				if len(want) != 0 {
					t.Errorf("stats lacks %v: %s", want, st.raw)
				}
			}
			if v := s.do("GET", "/v1/receipts/verify", s.approver, nil); v.status != 200 || v.body["ok"] != true || v.body["start"] != nil {
				t.Errorf("verify = %d %s", v.status, v.raw)
			}
			rs := s.do("GET", "/v1/receipts?limit=1", s.approver, nil)
			if rs.status != 200 || len(rs.body["receipts"].([]any)) != 1 || rs.body["next_after"] != float64(1) {
				t.Errorf("receipts page = %d %s", rs.status, rs.raw)
			}
			// Pruned below a checkpoint of the head: the report says where the chain starts.
			priv, _, err := receipt.NewSigningKey()
			if err != nil {
				t.Fatal(err)
			}
			key, _ := receipt.ParseSigningKey(priv)
			cp, err := store.SignCheckpoint(t.Context(), s.g.Store(), key, s.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			ret, err := store.Retention(s.g.Store())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ret.Prune(t.Context(), &store.PruneRequest{Now: s.clock.Now(), By: "cli:ops", BeforeSeq: cp.Seq}); err != nil {
				t.Fatal(err)
			}
			v := s.do("GET", "/v1/receipts/verify", s.approver, nil)
			if start, _ := v.body["start"].(map[string]any); v.status != 200 || v.body["ok"] != true || start == nil ||
				start["seq"] != float64(cp.Seq) || !strings.Contains(start["reason"].(string), "pruned below the signed checkpoint") {
				t.Errorf("verify after a prune = %d %s", v.status, v.raw)
			}
		})
	}
}

// TestWaitSeconds: a call that waits is answered with its reservation once a human grants it.
func TestWaitSeconds(t *testing.T) {
	t.Parallel()
	s := start(t, "sqlite", nil)
	got := make(chan *response, 1)
	go func() {
		got <- s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "billing.charge",
			"arguments": map[string]any{"invoice_id": "inv_w", "amount": 90000}, "wait_seconds": 20})
	}()
	var apr string
	for deadline := time.Now().Add(10 * time.Second); apr == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		list, err := s.g.Store().Approvals(t.Context(), store.ApprovalFilter{Status: store.Pending})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) == 1 {
			apr = list[0].ID
		}
	}
	if apr == "" {
		t.Fatal("no approval request appeared")
	}
	if a := s.do("POST", "/v1/approvals/"+apr+"/approve", s.approver, nil); a.status != 200 {
		t.Fatalf("approve = %d %s", a.status, a.raw)
	}
	r := <-got
	if r.status != 200 || r.body["status"] != "reserved" || r.body["approval_id"] != apr {
		t.Fatalf("waiting POST = %d %s", r.status, r.raw)
	}
}

// TestGracefulShutdown: ending the server's context lets a request in flight finish and answer;
// then Serve returns and the port no longer accepts. A connection that never sent a request (an
// HTTP client's spare) does not hold the shutdown: net/http alone waits five seconds on one.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	s := start(t, "sqlite", nil)
	got := make(chan *response, 1)
	go func() {
		got <- s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "billing.charge",
			"arguments": map[string]any{"invoice_id": "inv_s", "amount": 90000}, "wait_seconds": 2})
	}()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if list, _ := s.g.Store().Approvals(t.Context(), store.ApprovalFilter{}); len(list) == 1 {
			break
		}
	}
	spare, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer spare.Close()
	s.cancel()
	r := <-got
	if r.status != 202 || r.body["status"] != "approval_required" {
		t.Errorf("request in flight at shutdown = %d %s, want its 202 answer", r.status, r.raw)
	}
	answered := time.Now()
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("Serve after shutdown: %v", err)
		}
		if d := time.Since(answered); d > 2*time.Second {
			t.Errorf("Serve returned %v after the last request was answered, want under 2s: the spare connection held it", d)
		}
		s.done <- nil // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if _, err := http.Get(s.url + "/healthz"); err == nil {
		t.Error("the server still accepts connections after shutdown")
	}
}

// TestHealth: /healthz answers without a credential; /readyz reads the store.
func TestHealth(t *testing.T) {
	t.Parallel()
	s := start(t, "sqlite", nil)
	if r := s.do("GET", "/healthz", "", nil); r.status != 200 || r.body["status"] != "ok" {
		t.Errorf("healthz = %d %s", r.status, r.raw)
	}
	if r := s.do("GET", "/readyz", "", nil); r.status != 200 || r.body["status"] != "ready" {
		t.Errorf("readyz = %d %s", r.status, r.raw)
	}
	s.closeGuard()
	wantProblem(t, "readyz with the store closed", s.do("GET", "/readyz", "", nil), 503, "store_unavailable")
}

func TestCheckAddr(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr         string
		tls, proxied bool
		ok           bool
	}{
		{"127.0.0.1:7420", false, false, true},
		{"[::1]:7420", false, false, true},
		{"localhost:7420", false, false, true},
		{"0.0.0.0:7420", false, false, false},
		{":7420", false, false, false},
		{"10.0.0.5:7420", false, false, false},
		{"0.0.0.0:7420", true, false, true},
		{"0.0.0.0:7420", false, true, true},
		{"nonsense", false, false, false},
	} {
		err := server.CheckAddr(tc.addr, tc.tls, tc.proxied)
		if (err == nil) != tc.ok {
			t.Errorf("CheckAddr(%q, tls=%v, proxy=%v) = %v, want ok=%v", tc.addr, tc.tls, tc.proxied, err, tc.ok)
		}
	}
	// ListenAndServe refuses before listening.
	g, err := latch.Open(t.Context(), &latch.Config{Policy: mustPolicy(t), StoreURL: "sqlite:" + t.TempDir() + "/s.db"})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	s, err := server.New(g, &server.Config{Addr: "0.0.0.0:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ListenAndServe(t.Context()); err == nil || !strings.Contains(err.Error(), "not loopback") {
		t.Errorf("ListenAndServe on 0.0.0.0 in the clear = %v, want a refusal", err)
	}
	if _, err := server.New(g, &server.Config{TLSCert: "cert.pem"}); err == nil {
		t.Error("New with a certificate and no key succeeded")
	}
}

func mustPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRevokedTokenRefusedWithinCache: a token the server verified is trusted from memory for
// at most Config.TokenCache; then the store is read again and its revocation refuses it. With
// the cache off — the default — the next request is refused.
func TestRevokedTokenRefusedWithinCache(t *testing.T) {
	t.Parallel()
	const ttl = 300 * time.Millisecond
	for _, tc := range []struct {
		name  string
		cache time.Duration
	}{{"cached", ttl}, {"default", 0}, {"uncached", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := start(t, "sqlite", &server.Config{TokenCache: tc.cache})
			ts := s.g.Store().(store.TokenStore)
			secret, tk, err := auth.CreateToken(t.Context(), ts, &auth.NewToken{Kind: store.TokenAgent, Agent: "billing-worker"}, s.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			if r := s.do("GET", "/v1/approvals/apr_00000000000000000000000000000000", secret, nil); r.status != 404 {
				t.Fatalf("before revocation: %d %s, want 404 approval_not_found (authenticated)", r.status, r.raw)
			}
			revokedAt := time.Now()
			if _, err := ts.RevokeToken(t.Context(), tk.ID, s.clock.Now()); err != nil {
				t.Fatal(err)
			}
			if tc.cache > 0 {
				// Within the bound the cached record may still answer; past it, never.
				time.Sleep(time.Until(revokedAt.Add(tc.cache + 10*time.Millisecond)))
			}
			wantProblem(t, "after revocation", s.do("GET", "/v1/approvals/apr_00000000000000000000000000000000", secret, nil), 401, "token_revoked")
		})
	}
}

// TestExpiredTokenRefusedWhileCached: the token cache trusts a verified token's record, never
// its expiry — an expired token is refused at once, however long the cache (docs/http.md#tokens).
func TestExpiredTokenRefusedWhileCached(t *testing.T) {
	t.Parallel()
	s := start(t, "sqlite", &server.Config{TokenCache: time.Hour})
	secret, _, err := auth.CreateToken(t.Context(), s.g.Store().(store.TokenStore), &auth.NewToken{Kind: store.TokenAgent, Agent: "billing-worker", TTL: time.Minute}, s.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if r := s.do("GET", "/v1/approvals/apr_00000000000000000000000000000000", secret, nil); r.status != 404 {
		t.Fatalf("before expiry: %d %s, want 404 approval_not_found (authenticated, and now cached)", r.status, r.raw)
	}
	s.clock.Add(2 * time.Minute)
	wantProblem(t, "after expiry", s.do("GET", "/v1/approvals/apr_00000000000000000000000000000000", secret, nil), 401, "token_expired")
}

// TestConsoleMounted: the console is served under / beside the API unless NoConsole, and its
// cookies are Secure when the server is behind a TLS-terminating proxy (docs/approvals.md).
func TestConsoleMounted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		cfg    server.Config
		status int
		secure bool
	}{
		{"default", server.Config{}, http.StatusOK, false},
		{"behind proxy", server.Config{BehindProxy: true}, http.StatusOK, true},
		{"no console", server.Config{NoConsole: true}, http.StatusNotFound, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := start(t, "sqlite", &tc.cfg)
			resp, err := http.Get(s.url + "/login")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("GET /login = %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status != http.StatusOK {
				return
			}
			ck := resp.Header.Get("Set-Cookie")
			if !strings.HasPrefix(ck, "latch_login=") || strings.Contains(ck, "; Secure") != tc.secure {
				t.Errorf("the login form's cookie is %q, want Secure %t", ck, tc.secure)
			}
		})
	}
}
