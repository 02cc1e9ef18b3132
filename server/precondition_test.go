package server_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/store"
)

// TestPreconditionOverHTTP: an action whose policy names a precondition service, begun over
// HTTP. The request carries the state's fingerprint and its capture time in its JSON; the
// approval presented after the state changed is refused precondition_changed (403, nothing
// reserved, still granted); once the state is back it reserves. A service that fails refuses
// precondition_unavailable.
func TestPreconditionOverHTTP(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	answer, status := `{"status":"open"}`, http.StatusOK
	var asked []map[string]any
	state := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, m)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(state.Close)
	set := func(a string, s int) { mu.Lock(); answer, status = a, s; mu.Unlock() }
	doc := strings.Replace(testPolicy, `    effect: "charge:{invoice_id}"`,
		"    effect: \"charge:{invoice_id}\"\n    resource: \"invoice:{invoice_id}\"\n    precondition: { url: \""+state.URL+"/state\", timeout: 1s }", 1)
	open, _ := latch.PreconditionFingerprint(json.RawMessage(`{"status":"open"}`))
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			set(`{"status":"open"}`, http.StatusOK)
			s := startWith(t, backend, doc, nil)
			r := s.do("POST", "/v1/actions", s.alice, charge("inv_9", 90000))
			if r.status != 202 || r.body["status"] != "approval_required" {
				t.Fatalf("over the limit = %d %s", r.status, r.raw)
			}
			apr := r.body["approval_id"].(string)
			mu.Lock()
			last := asked[len(asked)-1]
			mu.Unlock()
			if last["action"] != "billing.charge" || last["resource"] != "invoice:inv_9" ||
				last["principal"].(map[string]any)["agent"] != "billing-worker" || last["arguments"].(map[string]any)["amount"] != float64(90000) {
				t.Errorf("the state service was sent %v", last)
			}
			g := s.do("GET", "/v1/approvals/"+apr, s.approver, nil)
			pc, _ := g.body["precondition"].(map[string]any)
			if g.status != 200 || pc == nil || pc["hash"] != open || pc["captured_at"] != "2026-11-29T10:00:00.000Z" {
				t.Fatalf("approval JSON = %d %s; want precondition %s captured at the request", g.status, g.raw, open)
			}
			if a := s.do("POST", "/v1/approvals/"+apr+"/approve", s.approver, nil); a.status != 200 || a.body["status"] != "granted" {
				t.Fatalf("approve = %d %s", a.status, a.raw)
			}
			body := map[string]any{"action": "billing.charge", "arguments": map[string]any{"invoice_id": "inv_9", "amount": 90000}, "approval_id": apr}

			set(`{"status":"paid"}`, http.StatusOK)
			p := wantProblem(t, "state changed", s.do("POST", "/v1/actions", s.alice, body), 403, "precondition_changed")
			if p["approval_id"] != apr {
				t.Errorf("problem names approval %v, want %s", p["approval_id"], apr)
			}
			if _, err := s.g.Store().Effect(t.Context(), "charge:inv_9"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("effect after precondition_changed: %v, want none", err)
			}
			if a := s.do("GET", "/v1/approvals/"+apr, s.approver, nil); a.body["status"] != "granted" {
				t.Errorf("approval after precondition_changed = %s, want granted", a.raw)
			}
			set(`oops`, http.StatusInternalServerError)
			wantProblem(t, "state service down", s.do("POST", "/v1/actions", s.alice, body), 403, "precondition_unavailable")

			set(`{ "status" : "open" }`, http.StatusOK)
			ok := s.do("POST", "/v1/actions", s.alice, body)
			if ok.status != 200 || ok.body["status"] != "reserved" || ok.body["approval_id"] != apr {
				t.Fatalf("state back = %d %s, want reserved", ok.status, ok.raw)
			}
			e := s.do("GET", "/v1/effects/"+url.PathEscape("charge:inv_9"), s.approver, nil)
			if e.status != 200 || e.body["state"] != "executing" {
				t.Errorf("effect = %d %s", e.status, e.raw)
			}
		})
	}
}
