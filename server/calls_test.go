package server_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchkit/latch/auth"
	"github.com/latchkit/latch/server"
	"github.com/latchkit/latch/store"
)

// callConn is one POST /v1/calls over a real TCP connection, written by hand so that a test
// decides when each line goes, when the body ends and when the connection is cut: the request
// body is chunked, one chunk a line.
type callConn struct {
	t     *testing.T
	conn  net.Conn
	resp  *http.Response
	lines *bufio.Reader // the answer's body
}

// dialCall opens POST /v1/calls on s with token and sends the action line; key, when not "",
// is the Idempotency-Key. It reads the answer's head.
func dialCall(t *testing.T, s *srv, token, key string, action any) *callConn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	head := "POST /v1/calls HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token + "\r\nContent-Type: " + server.CallContentType + "\r\nTransfer-Encoding: chunked\r\n"
	if key != "" {
		head += server.IdempotencyKeyHeader + ": " + key + "\r\n"
	}
	if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
		t.Fatal(err)
	}
	c := &callConn{t: t, conn: conn}
	c.send(action)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("POST /v1/calls: reading the answer: %v", err)
	}
	c.resp, c.lines = resp, bufio.NewReader(resp.Body)
	return c
}

// send writes v as the next line of the body (a string as it stands).
func (c *callConn) send(v any) {
	c.t.Helper()
	b, ok := v.(string)
	if !ok {
		j, err := json.Marshal(v)
		if err != nil {
			c.t.Fatal(err)
		}
		b = string(j)
	}
	b += "\n"
	if _, err := fmt.Fprintf(c.conn, "%x\r\n%s\r\n", len(b), b); err != nil {
		c.t.Fatal(err)
	}
}

// end ends the body (the last chunk).
func (c *callConn) end() {
	c.t.Helper()
	if _, err := io.WriteString(c.conn, "0\r\n\r\n"); err != nil {
		c.t.Fatal(err)
	}
}

// line reads the next line of the answer as a JSON object; nil at the answer's end.
func (c *callConn) line() map[string]any {
	c.t.Helper()
	b, err := c.lines.ReadBytes('\n')
	if errors.Is(err, io.EOF) && len(b) == 0 {
		return nil
	}
	if err != nil {
		c.t.Fatalf("reading a line of the answer: %v (read %q)", err, b)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		c.t.Fatalf("a line of the answer is not a JSON object: %v\n%s", err, b)
	}
	return m
}

// begun reads the first line and checks it is a reservation; it returns the action id.
func (c *callConn) begun() string {
	c.t.Helper()
	if c.resp.StatusCode != 200 || c.resp.Header.Get("Content-Type") != server.CallContentType {
		b, _ := io.ReadAll(c.resp.Body)
		c.t.Fatalf("POST /v1/calls = %d %s %s, want 200 %s", c.resp.StatusCode, c.resp.Header.Get("Content-Type"), b, server.CallContentType)
	}
	l := c.line()
	id, _ := l["action_id"].(string)
	if l["status"] != "reserved" || id == "" {
		c.t.Fatalf("first line %v, want the reservation", l)
	}
	return id
}

// wantLineProblem checks that line l is a problem of status and reason about action id.
func wantLineProblem(t *testing.T, what string, l map[string]any, status int, reason, id string) {
	t.Helper()
	if l["type"] != server.ProblemTypePrefix+reason || l["status"] != float64(status) || l["action_id"] != id || l["detail"] == "" {
		t.Errorf("%s: second line %v, want a %d problem of type %s naming %s", what, l, status, server.ProblemTypePrefix+reason, id)
	}
}

// wantExecuting checks that the effect key is still executing, with no receipt of an outcome
// for the action id: nothing was recorded or guessed.
func wantExecuting(t *testing.T, s *srv, what, key, id string) {
	t.Helper()
	e, err := s.g.Store().Effect(t.Context(), key)
	if err != nil || e.State != store.Executing || e.ActionID != id {
		t.Errorf("%s: effect %s = %+v (%v), want executing under %s", what, key, e, err, id)
	}
	for rc, err := range s.g.Store().Receipts(t.Context(), store.ReceiptFilter{ActionID: id}) {
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("%s: a receipt was written for %s: %s", what, id, rc.Doc)
	}
}

// TestCallOneRequest: POST /v1/calls begins the call on its first line and records the outcome
// sent on the same open request: the lines are the documents POST /v1/actions and its outcome
// answer, the effect is committed with its result, and the receipt is the one a two-request
// call leaves. A refused begin and an approval required end the exchange with POST
// /v1/actions' own answers. On both stores.
func TestCallOneRequest(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := start(t, backend, nil)
			c := dialCall(t, s, s.alice, "", charge("inv_1", 100))
			id := c.begun()
			c.send(map[string]any{"outcome": "committed", "result": map[string]any{"charge": "ch_1"}})
			c.end()
			rec := c.line()
			if rec["status"] != "recorded" || rec["action_id"] != id || rec["result"] != "committed" || rec["receipt_hash"] == nil {
				t.Fatalf("second line %v, want the recorded outcome", rec)
			}
			if l := c.line(); l != nil {
				t.Errorf("a third line: %v", l)
			}
			e, err := s.g.Store().Effect(t.Context(), "charge:inv_1")
			if err != nil || e.State != store.Committed || string(e.Result) != `{"charge":"ch_1"}` {
				t.Errorf("effect = %+v (%v), want committed with the result", e, err)
			}
			got := s.do("GET", "/v1/actions/"+id, s.alice, nil)
			if got.status != 200 || got.body["status"] != "recorded" || got.body["receipt_hash"] != rec["receipt_hash"] {
				t.Errorf("GET /v1/actions/%s = %d %s, want recorded with the receipt of the second line", id, got.status, got.raw)
			}
			// The same effect again: refused as POST /v1/actions refuses it, and the exchange ends.
			again := dialCall(t, s, s.alice, "", charge("inv_1", 100))
			b, _ := io.ReadAll(again.resp.Body)
			if again.resp.StatusCode != 409 || again.resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(string(b), "urn:latch:problem:committed") {
				t.Errorf("the same effect again = %d %s, want 409 committed", again.resp.StatusCode, b)
			}
			big := dialCall(t, s, s.alice, "", charge("inv_2", 90000))
			b, _ = io.ReadAll(big.resp.Body)
			if big.resp.StatusCode != 202 || !strings.Contains(string(b), `"status":"approval_required"`) {
				t.Errorf("a call needing approval = %d %s, want 202 approval_required", big.resp.StatusCode, b)
			}
			// An action without an effect key is allowed, not reserved, and its outcome is
			// recorded all the same.
			un := dialCall(t, s, s.alice, "", map[string]any{"action": "report.read"})
			if l := un.line(); un.resp.StatusCode != 200 || l["status"] != "allowed" || l["effect_key"] != nil {
				t.Fatalf("an unkeyed call's first line = %d %v, want allowed", un.resp.StatusCode, l)
			}
			un.send(map[string]any{"outcome": "committed"})
			un.end()
			if l := un.line(); l["status"] != "recorded" || l["result"] != "committed" {
				t.Errorf("an unkeyed call's second line = %v, want recorded committed", l)
			}
			// A person's credential proposes nothing here either.
			bad := dialCall(t, s, s.approver, "", charge("inv_3", 100))
			if bad.resp.StatusCode != 403 {
				t.Errorf("an approver's call = %d, want 403", bad.resp.StatusCode)
			}
		})
	}
}

// TestCallWithGoClient: a call made with net/http's own client — the body a pipe written as the
// call goes, the answer read line by line — gets its reservation before its body ends, and its
// outcome recorded on the same request.
func TestCallWithGoClient(t *testing.T) {
	t.Parallel()
	s := start(t, "sqlite", nil)
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(t.Context(), "POST", s.url+"/v1/calls", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.alice)
	req.Header.Set("Content-Type", server.CallContentType)
	go func() {
		_, _ = io.WriteString(pw, `{"action":"billing.charge","arguments":{"invoice_id":"inv_go","amount":100}}`+"\n")
	}()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewReader(resp.Body)
	first, err := lines.ReadBytes('\n')
	if err != nil || resp.StatusCode != 200 || !strings.Contains(string(first), `"status":"reserved"`) {
		t.Fatalf("first line %d %q (%v), want the reservation", resp.StatusCode, first, err)
	}
	_, _ = io.WriteString(pw, `{"outcome":"committed"}`+"\n")
	pw.Close()
	second, err := lines.ReadBytes('\n')
	if err != nil || !strings.Contains(string(second), `"result":"committed"`) {
		t.Fatalf("second line %q (%v), want the recorded outcome", second, err)
	}
	if e, err := s.g.Store().Effect(t.Context(), "charge:inv_go"); err != nil || e.State != store.Committed {
		t.Errorf("effect = %+v (%v), want committed", e, err)
	}
}

// TestCallBrokenStream: an outcome that does not arrive on the stream is never guessed. The
// connection cut after the begin's line, the body ended without an outcome, the deadline
// passed, an outcome that is not one: each leaves the effect executing under its lease with
// nothing recorded (the server answers a problem line when it still can), and the caller's
// later POST /v1/actions/{id}/outcome records it. On both stores.
func TestCallBrokenStream(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := start(t, backend, &server.Config{ReadTimeout: 2 * time.Second})
			for _, tc := range []struct {
				name string
				// broken ends the exchange after the begin's line; it checks what the server
				// answered, if anything.
				broken func(t *testing.T, c *callConn, id string)
			}{
				{"connection cut", func(t *testing.T, c *callConn, id string) {
					c.conn.Close()
				}},
				{"cut inside the outcome line", func(t *testing.T, c *callConn, id string) {
					_, _ = io.WriteString(c.conn, "40\r\n{\"outcome\":\"comm")
					c.conn.Close()
				}},
				{"body ended", func(t *testing.T, c *callConn, id string) {
					c.end()
					wantLineProblem(t, "body ended", c.line(), 400, "outcome_missing", id)
				}},
				{"deadline", func(t *testing.T, c *callConn, id string) {
					wantLineProblem(t, "deadline", c.line(), 408, "outcome_timeout", id)
				}},
				{"not an outcome", func(t *testing.T, c *callConn, id string) {
					c.send(map[string]any{"outcome": "done"})
					c.end()
					l := c.line()
					wantLineProblem(t, "not an outcome", l, 400, "invalid_field", id)
					if l["field"] != "outcome" {
						t.Errorf("not an outcome: %v, want field outcome", l)
					}
				}},
				{"not JSON", func(t *testing.T, c *callConn, id string) {
					c.send(`{"outcome":`)
					wantLineProblem(t, "not JSON", c.line(), 400, "invalid_json", id)
				}},
				{"unknown member", func(t *testing.T, c *callConn, id string) {
					c.send(`{"outcome":"committed","resullt":1}`)
					wantLineProblem(t, "unknown member", c.line(), 400, "unknown_field", id)
				}},
				{"a line after the outcome", func(t *testing.T, c *callConn, id string) {
					c.send(map[string]any{"outcome": "committed"})
					c.send(map[string]any{"outcome": "unknown"})
					c.end()
					wantLineProblem(t, "a line after the outcome", c.line(), 400, "invalid_json", id)
				}},
				{"body not ended after the outcome", func(t *testing.T, c *callConn, id string) {
					c.send(map[string]any{"outcome": "committed"})
					wantLineProblem(t, "body not ended", c.line(), 408, "outcome_timeout", id)
				}},
			} {
				inv := "inv_" + strings.ReplaceAll(tc.name, " ", "_")
				c := dialCall(t, s, s.alice, "", charge(inv, 100))
				id := c.begun()
				tc.broken(t, c, id)
				// The server is done with the exchange once it answered or saw the cut; the cut
				// ones are waited for through the effect, which must stay executing meanwhile.
				time.Sleep(100 * time.Millisecond)
				wantExecuting(t, s, tc.name, "charge:"+inv, id)
				r := s.do("POST", "/v1/actions/"+id+"/outcome", s.alice, map[string]any{"outcome": "committed"})
				if r.status != 200 || r.body["result"] != "committed" {
					t.Errorf("%s: the outcome reported afterwards = %d %s, want committed", tc.name, r.status, r.raw)
				}
			}
		})
	}
}

// TestCallOutcomeChecks: the outcome on the stream is held to every check of POST
// /v1/actions/{id}/outcome: one recorded already (through the outcome route meanwhile) is 409
// already_recorded, and the credential is authenticated again — revoked since the begin, the
// outcome is refused 401 token_revoked and nothing is recorded. On both stores.
func TestCallOutcomeChecks(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s, _ := startCounting(t, backend)
			ts := s.g.Store().(store.TokenStore)
			secret, tk, err := auth.CreateToken(t.Context(), ts, &auth.NewToken{Kind: store.TokenAgent, Agent: "billing-worker"}, s.clock.Now())
			if err != nil {
				t.Fatal(err)
			}
			c := dialCall(t, s, secret, "", charge("inv_twice", 100))
			id := c.begun()
			if r := s.do("POST", "/v1/actions/"+id+"/outcome", secret, map[string]any{"outcome": "not_executed"}); r.status != 200 {
				t.Fatalf("outcome route = %d %s", r.status, r.raw)
			}
			c.send(map[string]any{"outcome": "committed"})
			c.end()
			wantLineProblem(t, "recorded already", c.line(), 409, "already_recorded", id)
			if e, err := s.g.Store().Effect(t.Context(), "charge:inv_twice"); err != nil || e.State != store.Failed {
				t.Errorf("effect = %+v (%v), want failed (the first outcome)", e, err)
			}

			// The server holds the token as verified (a call made with it before), then it is
			// revoked through another handle on the store, as another process would.
			c = dialCall(t, s, secret, "", charge("inv_revoked", 100))
			id = c.begun()
			other, err := openOther(t, s)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := other.(store.TokenStore).RevokeToken(t.Context(), tk.ID, s.clock.Now()); err != nil {
				t.Fatal(err)
			}
			c.send(map[string]any{"outcome": "committed"})
			c.end()
			wantLineProblem(t, "revoked since the begin", c.line(), 401, "token_revoked", id)
			wantExecuting(t, s, "revoked since the begin", "charge:inv_revoked", id)
		})
	}
}

// openOther opens another handle on s's store, closed with the test.
func openOther(t *testing.T, s *srv) (store.Store, error) {
	t.Helper()
	st, err := store.Open(t.Context(), s.storeURL, nil)
	if err == nil {
		t.Cleanup(func() { st.Close() })
	}
	return st, err
}

// failingWriter fails every write after the first n of a handler's answer, as a connection
// whose peer is gone does.
type failingWriter struct {
	http.ResponseWriter
	n int
}

func (w *failingWriter) Write(b []byte) (int, error) {
	if w.n == 0 {
		return 0, errors.New("write: broken pipe")
	}
	w.n--
	return w.ResponseWriter.Write(b)
}

func (w *failingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestCallAnswerWriteFails: when the server cannot write the begin's line, the reservation
// stands (executing, under its lease) and no outcome is waited for or guessed; the caller that
// retries the begin with its Idempotency-Key is handed the same reservation and reports it.
// When the server cannot write the outcome's line, the outcome is recorded all the same, and
// GET /v1/actions/{id} shows it. On both stores.
func TestCallAnswerWriteFails(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := start(t, backend, nil)
			h, err := server.New(s.g, &server.Config{Now: s.clock.Now, NoConsole: true})
			if err != nil {
				t.Fatal(err)
			}
			writes := make(chan int, 1)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h.Handler().ServeHTTP(&failingWriter{ResponseWriter: w, n: <-writes}, r)
			})}
			go hs.Serve(ln)
			t.Cleanup(func() { hs.Close() })
			failing := &srv{t: t, url: "http://" + ln.Addr().String(), g: s.g}

			// The begin's line is lost.
			writes <- 0
			c := dialCall(t, failing, s.alice, "key-1", charge("inv_lost", 100))
			if l := c.line(); l != nil {
				t.Fatalf("the server wrote %v, which this test's writer fails", l)
			}
			e, err := s.g.Store().Effect(t.Context(), "charge:inv_lost")
			if err != nil || e.State != store.Executing {
				t.Fatalf("effect = %+v (%v), want executing", e, err)
			}
			wantExecuting(t, s, "begin's line lost", "charge:inv_lost", e.ActionID)
			again := s.doKeyed("POST", "/v1/actions", s.alice, "key-1", charge("inv_lost", 100))
			if again.status != 200 || again.body["action_id"] != e.ActionID {
				t.Fatalf("the begin retried with its key = %d %s, want the reservation of %s", again.status, again.raw, e.ActionID)
			}
			if r := s.do("POST", "/v1/actions/"+e.ActionID+"/outcome", s.alice, map[string]any{"outcome": "committed"}); r.status != 200 || r.body["result"] != "committed" {
				t.Errorf("the outcome reported afterwards = %d %s", r.status, r.raw)
			}

			// The outcome's line is lost.
			writes <- 1
			c = dialCall(t, failing, s.alice, "", charge("inv_lost2", 100))
			id := c.begun()
			c.send(map[string]any{"outcome": "committed"})
			c.end()
			if l := c.line(); l != nil {
				t.Fatalf("the server wrote %v, which this test's writer fails", l)
			}
			got := s.do("GET", "/v1/actions/"+id, s.alice, nil)
			if got.status != 200 || got.body["status"] != "recorded" {
				t.Errorf("GET /v1/actions/%s = %d %s, want recorded", id, got.status, got.raw)
			}
			if e, err := s.g.Store().Effect(t.Context(), "charge:inv_lost2"); err != nil || e.State != store.Committed {
				t.Errorf("effect = %+v (%v), want committed", e, err)
			}
		})
	}
}

// TestCallLinesBounded: each line is held to MaxBody as a body is, and what an exchange holds
// counts against the caller's in-flight bound as it reads: a first line past MaxBody is 413
// and reserves nothing; a second line past it is a 413 problem line and records nothing.
func TestCallLinesBounded(t *testing.T) {
	t.Parallel()
	s := start(t, "sqlite", &server.Config{MaxBody: 8192})
	pad := strings.Repeat("x", 9000)
	c := dialCall(t, s, s.alice, "", map[string]any{"action": "billing.charge", "arguments": map[string]any{"invoice_id": "inv_big", "amount": 1, "pad": pad}})
	b, _ := io.ReadAll(c.resp.Body)
	if c.resp.StatusCode != 413 || !strings.Contains(string(b), "body_too_large") {
		t.Errorf("a first line of 9 KB = %d %s, want 413 body_too_large", c.resp.StatusCode, b)
	}
	if _, err := s.g.Store().Effect(t.Context(), "charge:inv_big"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("effect read %v, want none", err)
	}
	c = dialCall(t, s, s.alice, "", charge("inv_ok", 100))
	id := c.begun()
	c.send(map[string]any{"outcome": "committed", "result": map[string]any{"pad": pad}})
	wantLineProblem(t, "an outcome of 9 KB", c.line(), 413, "body_too_large", id)
	wantExecuting(t, s, "an outcome of 9 KB", "charge:inv_ok", id)
}

// TestCallOutcomeWithinLease: the outcome must arrive while the lease holds the effect, even
// when the server's read timeout is longer: past the lease the exchange ends with
// outcome_timeout, nothing recorded, the effect still executing (until a sweep or the next
// begin finds its lease lapsed).
func TestCallOutcomeWithinLease(t *testing.T) {
	t.Parallel()
	s := startWith(t, "sqlite", "schema: latch.policy/v1\nactions:\n  billing.charge:\n    effect: \"charge:{invoice_id}\"\n    lease: 1s\n    decision: allow\n",
		&server.Config{ReadTimeout: time.Minute})
	c := dialCall(t, s, s.alice, "", charge("inv_short", 100))
	_ = c.conn.SetDeadline(time.Now().Add(10 * time.Second))
	id := c.begun()
	began := time.Now()
	wantLineProblem(t, "past the lease", c.line(), 408, "outcome_timeout", id)
	if waited := time.Since(began); waited > 5*time.Second {
		t.Errorf("the outcome was waited for %v, past the lease of 1s", waited)
	}
	wantExecuting(t, s, "past the lease", "charge:inv_short", id)
}

// syncBuffer is a log destination safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestCallConnectionReused: calls made one after another by net/http's client share one
// connection, those whose outcome is recorded and those whose outcome is refused (its line sent
// before the body's end is read, the server then reads the body to its end), and nothing
// panics in net/http doing so.
func TestCallConnectionReused(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	s := start(t, "sqlite", &server.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	reused := 0
	const calls = 20
	for i := range calls {
		pr, pw := io.Pipe()
		ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) {
			if ci.Reused {
				reused++
			}
		}})
		req, err := http.NewRequestWithContext(ctx, "POST", s.url+"/v1/calls", pr)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+s.alice)
		req.Header.Set("Content-Type", server.CallContentType)
		go func() {
			_, _ = fmt.Fprintf(pw, `{"action":"billing.charge","arguments":{"invoice_id":"inv_r%d","amount":100}}`+"\n", i)
		}()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewReader(resp.Body)
		if l, err := lines.ReadBytes('\n'); err != nil || !strings.Contains(string(l), `"reserved"`) {
			t.Fatalf("call %d: first line %q (%v)", i, l, err)
		}
		outcome, want := `{"outcome":"committed"}`, `"result":"committed"`
		if i%2 == 1 {
			outcome, want = `{"outcome":"committed","x":1}`, `urn:latch:problem:unknown_field`
		}
		ended := make(chan struct{})
		go func() {
			_, _ = io.WriteString(pw, outcome+"\n")
			if i%2 == 1 {
				<-ended // a refused outcome is answered at once: the body ends after its answer
			}
			pw.Close()
		}()
		l, err := lines.ReadBytes('\n')
		close(ended)
		if err != nil || !strings.Contains(string(l), want) {
			t.Fatalf("call %d: second line %q (%v), want %s", i, l, err, want)
		}
		if rest, err := io.ReadAll(resp.Body); err != nil || len(rest) > 0 {
			t.Fatalf("call %d: after the second line %q (%v)", i, rest, err)
		}
		resp.Body.Close()
	}
	if reused < calls-1 {
		t.Errorf("%d of %d calls reused a connection, want all but the first", reused, calls)
	}
	if l := logs.String(); strings.Contains(l, "panic") {
		t.Errorf("the server logged a panic:\n%s", l)
	}
}

// TestCallHTTP2: over HTTP/2 (TLS, net/http's client) the exchange is the same: the first line
// arrives while the body is open, the outcome is recorded on the same stream.
func TestCallHTTP2(t *testing.T) {
	t.Parallel()
	s := start(t, "sqlite", nil)
	h, err := server.New(s.g, &server.Config{Now: s.clock.Now, NoConsole: true})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(h.Handler())
	ts.EnableHTTP2 = true
	ts.StartTLS()
	defer ts.Close()
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(t.Context(), "POST", ts.URL+"/v1/calls", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.alice)
	req.Header.Set("Content-Type", server.CallContentType)
	go func() {
		_, _ = io.WriteString(pw, `{"action":"billing.charge","arguments":{"invoice_id":"inv_h2","amount":100}}`+"\n")
	}()
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("answered over %s, want HTTP/2", resp.Proto)
	}
	lines := bufio.NewReader(resp.Body)
	if l, err := lines.ReadBytes('\n'); err != nil || resp.StatusCode != 200 || !strings.Contains(string(l), `"status":"reserved"`) {
		t.Fatalf("first line %d %q (%v), want the reservation", resp.StatusCode, l, err)
	}
	go func() {
		_, _ = io.WriteString(pw, `{"outcome":"committed"}`+"\n")
		pw.Close()
	}()
	if l, err := lines.ReadBytes('\n'); err != nil || !strings.Contains(string(l), `"result":"committed"`) {
		t.Fatalf("second line %q (%v), want the recorded outcome", l, err)
	}
	if e, err := s.g.Store().Effect(t.Context(), "charge:inv_h2"); err != nil || e.State != store.Committed {
		t.Errorf("effect = %+v (%v), want committed", e, err)
	}
}
