package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/server"
	"github.com/latchkit/latch/store"
)

// doKeyed is s.do with an Idempotency-Key header (none when key is "").
func (s *srv) doKeyed(method, path, token, key string, body any) *response {
	s.t.Helper()
	j, err := json.Marshal(body)
	if err != nil {
		s.t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(s.t.Context(), method, s.url+path, bytes.NewReader(j))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	if key != "" {
		req.Header.Set(server.IdempotencyKeyHeader, key)
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
	if err := json.Unmarshal(raw, &out.body); err != nil {
		s.t.Fatalf("%s %s: answer is not a JSON object: %v\n%s", method, path, err, raw)
	}
	return out
}

// sameReservation fails unless got hands back the reservation want did.
func sameReservation(t *testing.T, what string, got, want *response) {
	t.Helper()
	if got.status != 200 {
		t.Fatalf("%s: %d %s, want 200 and the reservation", what, got.status, got.raw)
	}
	for _, k := range []string{"status", "action_id", "action_hash", "effect_key", "attempt", "idempotency_token", "effect_token", "lease_expires_at"} {
		if fmt.Sprint(got.body[k]) != fmt.Sprint(want.body[k]) {
			t.Errorf("%s: %s = %v, want %v (the first answer's)", what, k, got.body[k], want.body[k])
		}
	}
}

// TestBeginReplay: a begin whose answer was lost, sent again with the same Idempotency-Key by
// the same caller, is handed the same reservation (action id, attempt and its tokens, lease) and
// writes nothing; without the key it is 409 in_progress, as before. The same key with another
// body, or from another caller, is 422 of kind request_key_mismatch, its type naming the mismatch; a malformed key
// is 400. After the outcome, the key's begin is answered as any duplicate (409 committed with
// the result). A second server on the same store (a replica, or this one restarted) replays too.
func TestBeginReplay(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := start(t, backend, nil)
			const key = "0b6f0c52-3d0e-4a7e-9a53-27e1d2f3a001"
			first := s.doKeyed("POST", "/v1/actions", s.alice, key, charge("inv_1", 100))
			if first.status != 200 || first.body["status"] != "reserved" {
				t.Fatalf("keyed begin = %d %s", first.status, first.raw)
			}
			before := s.footprint()
			s.clock.Add(time.Minute)
			sameReservation(t, "replay", s.doKeyed("POST", "/v1/actions", s.alice, key, charge("inv_1", 100)), first)
			// Member order and spacing are not the request: the canonical arguments are.
			sameReservation(t, "replay spelled otherwise", s.doKeyed("POST", "/v1/actions", s.alice, key,
				json.RawMessage(`{"arguments": {"amount": 100, "invoice_id": "inv_1"}, "action": "billing.charge"}`)), first)
			if after := s.footprint(); after.receipts != before.receipts || after.events != before.events {
				t.Errorf("replays wrote: %+v, was %+v", after, before)
			}

			wantProblem(t, "without the key", s.do("POST", "/v1/actions", s.alice, charge("inv_1", 100)), 409, "in_progress")
			p := wantProblem(t, "another body", s.doKeyed("POST", "/v1/actions", s.alice, key, charge("inv_2", 100)), 422, "request_key_other_action")
			if p["kind"] != "request_key_mismatch" || p["field"] != "Idempotency-Key" || !strings.Contains(p["detail"].(string), "action hash") {
				t.Errorf("another body: %v, want reason request_key_other_action naming the action hash", p)
			}
			p = wantProblem(t, "another caller", s.doKeyed("POST", "/v1/actions", s.bob, key, charge("inv_1", 100)), 422, "request_key_other_principal")
			if p["kind"] != "request_key_mismatch" || !strings.Contains(p["detail"].(string), "another principal") {
				t.Errorf("another caller: %v, want reason request_key_other_principal", p)
			}
			for _, bad := range []string{"has space", strings.Repeat("k", 256), "ключ"} {
				p := wantProblem(t, "key "+bad, s.doKeyed("POST", "/v1/actions", s.alice, bad, charge("inv_3", 100)), 400, "invalid_idempotency_key")
				if p["field"] != "Idempotency-Key" {
					t.Errorf("key %q: field %v, want Idempotency-Key", bad, p["field"])
				}
			}
			if n := s.footprint(); n.receipts != before.receipts+1 { // the in_progress refusal's; the refused keys wrote nothing
				t.Errorf("after the refusals %d receipts, want %d (the in_progress refusal's only)", n.receipts, before.receipts+1)
			}

			// A second server over the same store replays the reservation.
			other, err := server.New(latchOpen(t, s), &server.Config{Now: s.clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			replica := &srv{t: t, url: serveOn(t, other), alice: s.alice, bob: s.bob, clock: s.clock}
			sameReservation(t, "replay at a second server", replica.doKeyed("POST", "/v1/actions", s.alice, key, charge("inv_1", 100)), first)

			id := first.body["action_id"].(string)
			if r := s.do("POST", "/v1/actions/"+id+"/outcome", s.alice, map[string]any{"outcome": "committed", "result": map[string]any{"charge": "ch_1"}}); r.status != 200 {
				t.Fatalf("outcome = %d %s", r.status, r.raw)
			}
			p = wantProblem(t, "the key after the outcome", s.doKeyed("POST", "/v1/actions", s.alice, key, charge("inv_1", 100)), 409, "committed")
			if res, _ := json.Marshal(p["result"]); string(res) != `{"charge":"ch_1"}` {
				t.Errorf("the key after the outcome: result %s, want the stored one", res)
			}
		})
	}
}

// latchOpen opens a second guard on s's store, with s's policy and clock.
func latchOpen(t *testing.T, s *srv) *latch.Guard {
	t.Helper()
	g, err := latch.Open(t.Context(), &latch.Config{Policy: s.g.Policy(), StoreURL: s.storeURL, Now: s.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// serveOn serves h on a fresh loopback port until the test ends and returns its base URL.
func serveOn(t *testing.T, h *server.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return "http://" + ln.Addr().String()
}

// TestOutcomeResultValidated: an outcome's result is held to what a resolution's is — latch's
// canonical JSON, no floats — and refused with the JSON pointer of the value, writing nothing;
// the call stays open and a valid outcome is then recorded.
func TestOutcomeResultValidated(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := start(t, backend, nil)
			id := s.do("POST", "/v1/actions", s.alice, charge("inv_1", 100)).body["action_id"].(string)
			before := s.footprint()
			for _, c := range []struct{ result, pointer string }{
				{`{"amount":12.5}`, "/amount"},
				{`{"lines":[{"qty":1},{"qty":1e3}]}`, "/lines/1/qty"},
				{`9007199254740993`, ""},
			} {
				r := s.do("POST", "/v1/actions/"+id+"/outcome", s.alice, `{"outcome":"committed","result":`+c.result+`}`)
				p := wantProblem(t, "result "+c.result, r, 400, "invalid_field")
				if p["field"] != "result" || fmt.Sprint(p["pointer"]) != fmt.Sprint(map[bool]any{true: nil, false: c.pointer}[c.pointer == ""]) {
					t.Errorf("result %s: field %v pointer %v, want result and %q", c.result, p["field"], p["pointer"], c.pointer)
				}
				// Resolve refuses the same result the same way: one rule.
				rr := s.do("POST", "/v1/effects/charge:none/resolve", s.approver, `{"to":"committed","result":`+c.result+`}`)
				rp := wantProblem(t, "resolve result "+c.result, rr, 400, "invalid_field")
				if rp["detail"] != p["detail"] || rp["pointer"] != p["pointer"] {
					t.Errorf("result %s: outcome refused %v / %v, resolve %v / %v: want one rule", c.result, p["detail"], p["pointer"], rp["detail"], rp["pointer"])
				}
			}
			// A member named twice is refused by the body's decoding, on both routes alike.
			dup := `{"a":1,"a":2}`
			p := wantProblem(t, "result "+dup, s.do("POST", "/v1/actions/"+id+"/outcome", s.alice, `{"outcome":"committed","result":`+dup+`}`), 400, "duplicate_member")
			rp := wantProblem(t, "resolve result "+dup, s.do("POST", "/v1/effects/charge:none/resolve", s.approver, `{"to":"committed","result":`+dup+`}`), 400, "duplicate_member")
			if p["pointer"] != "/result/a" || rp["pointer"] != "/result/a" {
				t.Errorf("result %s: pointers %v and %v, want /result/a on both", dup, p["pointer"], rp["pointer"])
			}
			if after := s.footprint(); after.receipts != before.receipts || after.events != before.events {
				t.Errorf("refused outcomes wrote: %+v, was %+v", after, before)
			}
			r := s.do("POST", "/v1/actions/"+id+"/outcome", s.alice, `{"outcome":"committed","result":{"amount":1250, "id":"ch_1"}}`)
			if r.status != 200 || r.body["result"] != "committed" {
				t.Fatalf("a valid outcome after the refusals = %d %s", r.status, r.raw)
			}
			e, err := s.g.Store().Effect(t.Context(), "charge:inv_1")
			if err != nil || string(e.Result) != `{"amount":1250,"id":"ch_1"}` {
				t.Errorf("stored result %s, %v; want the canonical form", e.Result, err)
			}
		})
	}
}

// held is a request whose headers and part of whose body were sent: the server is answering it
// (it reads the rest of the body) until release.
type held struct {
	conn              net.Conn
	base, path, token string
	n                 int
}

// hold sends POST path with a body of n bytes announced, and only its first byte.
func hold(t *testing.T, base, path, token string, n int) *held {
	t.Helper()
	h := &held{base: base, path: path, token: token, n: n}
	h.send(t)
	t.Cleanup(h.release)
	return h
}

func (h *held) send(t *testing.T) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(h.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", h.path, h.token, h.n)
	h.conn = c
}

func (h *held) release() { h.conn.Close() }

// answeredEarly reports whether the server answered the held request before its body was
// sent: refused 429, because a request sent after it was counted first.
func (h *held) answeredEarly() bool {
	_ = h.conn.SetReadDeadline(time.Now().Add(time.Millisecond))
	defer h.conn.SetReadDeadline(time.Time{})
	_, err := h.conn.Read(make([]byte, 1))
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// again sends the held request anew on a new connection.
func (h *held) again(t *testing.T) {
	t.Helper()
	h.release()
	h.send(t)
}

// answered sends the rest of a held request's body of n bytes (a begin of report.read, its
// arguments padded) and returns the status.
func (h *held) answered(t *testing.T, n int) int {
	t.Helper()
	body := `"action":"report.read","arguments":{"pad":"` + strings.Repeat("x", n-len(`{"action":"report.read","arguments":{"pad":""}}`)) + `"}}`
	if _, err := io.WriteString(h.conn, body); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(h.conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// padded is a body of n bytes that no route accepts (an unknown member): answered, it is a 400.
func padded(n int) string {
	return `{"pad":"` + strings.Repeat("x", n-len(`{"pad":""}`)) + `"}`
}

// TestInFlightPerCaller: one caller's bodies in flight on the begin and outcome routes are
// bounded — past MaxCallerInFlight its next request is refused at once with 429
// too_many_in_flight naming the bound, before its body is read — while another caller's
// requests are answered; the server-wide MaxInFlight refuses likewise. Once answered, the bytes
// are free again.
func TestInFlightPerCaller(t *testing.T) {
	t.Parallel()
	const body = 600 << 10
	s := start(t, "sqlite", &server.Config{MaxBody: 1 << 20, MaxCallerInFlight: 1 << 20, MaxInFlight: 2*body + 2<<10})
	// refused sends body to path as token until it is refused 429 (the held requests hs are
	// counted once the server has read their headers) and returns the problem. A request it
	// sent may be counted before a held one is, which is then refused itself: it is held anew.
	refused := func(what, token, path, body string, hs ...*held) map[string]any {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := s.do("POST", path, token, body)
			if r.status == 429 {
				if r.header.Get("Retry-After") == "" {
					t.Errorf("%s: 429 without Retry-After", what)
				}
				return wantProblem(t, what, r, 429, "too_many_in_flight")
			}
			if r.status != 400 || time.Now().After(deadline) {
				t.Fatalf("%s: %d %s, want 429 once the held request is counted", what, r.status, r.raw)
			}
			for _, h := range hs {
				if h.answeredEarly() {
					h.again(t)
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	a := hold(t, s.url, "/v1/actions", s.alice, body)
	// 600 KiB held, and 500 KiB more would pass alice's 1 MiB.
	p := refused("alice's begin past her bound", s.alice, "/v1/actions", padded(500<<10), a)
	if d := p["detail"].(string); !strings.Contains(d, "max_caller_in_flight") || !strings.Contains(d, fmt.Sprint(1<<20)) {
		t.Errorf("the 429 does not name the bound: %v", d)
	}
	refused("alice's outcome past her bound", s.alice, "/v1/actions/act_x/outcome", padded(500<<10), a)
	// A small request of hers still fits (counted at 4 KiB).
	if r := s.do("POST", "/v1/actions", s.alice, `{}`); r.status != 400 {
		t.Errorf("a small begin beside her held body = %d %s, want 400 (answered)", r.status, r.raw)
	}
	// Bob is unaffected: his begin is answered.
	if r := s.do("POST", "/v1/actions", s.bob, charge("inv_bob", 100)); r.status != 200 {
		t.Errorf("bob's begin while alice is at her bound = %d %s", r.status, r.raw)
	}
	// Bob holds 600 KiB too: the server's bound (1202 KiB) is then all but taken, and his next
	// request, though well within his own bound, is refused by it.
	b := hold(t, s.url, "/v1/actions", s.bob, body)
	p = refused("bob's begin past the server's bound", s.bob, "/v1/actions", `{}`, a, b)
	if d := p["detail"].(string); !strings.Contains(d, "max_in_flight") || !strings.Contains(d, fmt.Sprint(2*body+2<<10)) {
		t.Errorf("the 429 does not name the server's bound: %v", d)
	}
	// Answered, the held begins free their bytes.
	if st := a.answered(t, body); st != 200 {
		t.Fatalf("alice's held begin answered %d, want 200", st)
	}
	if st := b.answered(t, body); st != 200 {
		t.Fatalf("bob's held begin answered %d, want 200", st)
	}
	// (A held request's bytes are freed just after its answer is written: wait for that.)
	for _, tok := range []string{s.alice, s.bob} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := s.do("POST", "/v1/actions", tok, padded(900<<10))
			if r.status == 400 {
				break
			}
			if r.status != 429 || time.Now().After(deadline) {
				t.Fatalf("a 900 KiB request once the held ones were answered = %d %.200s, want 400 (answered)", r.status, r.raw)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestBeginMemoryBound: begun calls awaiting their outcome are not held in memory with their
// arguments. 48 begins of 1 MiB arguments, none reported, leave the heap less than 40 MiB larger
// (holding each with its arguments, as a server once did, took about 5 MiB a call); every one's
// outcome is then recorded, from the store.
func TestBeginMemoryBound(t *testing.T) {
	// Not parallel: it measures the process's heap.
	s := start(t, "sqlite", &server.Config{MaxBody: 2 << 20})
	const calls = 48
	pad := strings.Repeat("x", 1<<20)
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	// One call first, so that what the first call allocates once (statement caches, pools) is
	// not counted.
	s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "report.read", "arguments": map[string]any{"pad": pad}})
	base := heap()
	ids := make([]string, 0, calls)
	for i := range calls {
		r := s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "billing.charge",
			"arguments": map[string]any{"invoice_id": fmt.Sprintf("inv_%d", i), "amount": 100, "memo": pad}})
		if r.status != 200 {
			t.Fatalf("begin %d = %d %.300s", i, r.status, r.raw)
		}
		ids = append(ids, r.body["action_id"].(string))
	}
	grown := int64(heap()) - int64(base)
	t.Logf("%d begins of 1 MiB arguments, unreported: heap grew %.1f MiB", calls, float64(grown)/(1<<20))
	if grown > 40<<20 {
		t.Errorf("%d begun calls of 1 MiB arguments grew the heap by %.1f MiB, want under 40 MiB", calls, float64(grown)/(1<<20))
	}
	for _, id := range ids {
		r := s.do("POST", "/v1/actions/"+id+"/outcome", s.alice, map[string]any{"outcome": "committed"})
		if r.status != 200 || r.body["result"] != "committed" {
			t.Errorf("outcome of %s = %d %.300s", id, r.status, r.raw)
		}
	}
	effs, err := s.g.Store().Effects(t.Context(), store.EffectFilter{State: store.Committed})
	if err != nil || len(effs) != calls {
		t.Errorf("%d effects committed, %v; want %d", len(effs), err, calls)
	}
}
