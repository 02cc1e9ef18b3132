package latchhttp_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/latchhttp"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// committer is a remote that ignores idempotency keys: it counts every request to /charge it
// reads in full, and drops the connection without answering the first one — after it has
// "charged". Requests to /warm are answered, so that a client has a keep-alive connection to
// reuse: net/http re-sends a replayable request by itself only when a reused connection fails.
type committer struct {
	srv     *httptest.Server
	charges atomic.Int32
	bodies  chan string // every /charge body read, in order
}

func newCommitter(t *testing.T) *committer {
	t.Helper()
	c := &committer{bodies: make(chan string, 16)}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/warm":
			io.WriteString(w, "ok")
			return
		case "/moved":
			http.Redirect(w, r, "/charge", http.StatusTemporaryRedirect) // keep the method and body
			return
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read the request body: %v", err)
			return
		}
		c.bodies <- string(b)
		if c.charges.Add(1) > 1 {
			io.WriteString(w, `{"id":"ch_2"}`)
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		conn.Close() // charged, and the answer is lost
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// warm leaves one idle keep-alive connection to the remote in tr's pool.
func (c *committer) warm(t *testing.T, hc *http.Client) {
	t.Helper()
	resp, err := hc.Get(c.srv.URL + "/warm")
	if err != nil {
		t.Fatalf("GET /warm: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// reused returns req with a trace that records whether its first connection was a reused one,
// so that a test proves it exercised net/http's replay path and not a fresh connection.
func reused(req *http.Request, first *atomic.Int32) *http.Request {
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		v := int32(1)
		if info.Reused {
			v = 2
		}
		first.CompareAndSwap(0, v)
	}}
	return req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
}

// net/http re-sends, on a fresh connection, a request it deems replayable (a GET, or any request
// carrying Idempotency-Key or X-Idempotency-Key with a body it can rewind) when a reused
// connection fails before the answer. Against a remote that does not deduplicate that is a second
// charge inside one latch attempt. latchhttp must send each request once: a lost answer is
// unknown, never a silent resend.
func TestNeverSentTwice(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		method string
		body   string
		header string
	}{
		{"POST with a body and Idempotency-Key", http.MethodPost, `{"amount":100}`, "Idempotency-Key"},
		{"POST with a body and X-Idempotency-Key", http.MethodPost, `{"amount":100}`, "X-Idempotency-Key"},
		{"POST without a body and Idempotency-Key", http.MethodPost, "", "Idempotency-Key"},
		{"PUT with a body and Idempotency-Key", http.MethodPut, `{"amount":100}`, "Idempotency-Key"},
		{"GET", http.MethodGet, "", ""},
		{"DELETE with Idempotency-Key", http.MethodDelete, "", "Idempotency-Key"},
	}
	for _, tc := range cases {
		for _, via := range []string{"Client.Do", "Transport"} {
			t.Run(tc.name+"/"+via, func(t *testing.T) {
				t.Parallel()
				remote := newCommitter(t)
				tr := &http.Transport{}
				t.Cleanup(tr.CloseIdleConnections)
				hc := &http.Client{Transport: tr}
				do := func(req *http.Request) (*http.Response, error) {
					c, err := latchhttp.New(&latchhttp.Config{Client: hc})
					if err != nil {
						t.Fatal(err)
					}
					return c.Do(req)
				}
				if via == "Transport" {
					hc = &http.Client{Transport: &latchhttp.Transport{Base: tr}}
					do = hc.Do
				}
				remote.warm(t, hc)

				var body io.Reader
				if tc.body != "" {
					body = strings.NewReader(tc.body) // NewRequest makes it rewindable (GetBody)
				}
				req, err := http.NewRequestWithContext(t.Context(), tc.method, remote.srv.URL+"/charge", body)
				if err != nil {
					t.Fatal(err)
				}
				if tc.header != "" {
					req.Header.Set(tc.header, "8b0c3c4e-2f4b-8d3a-9f1e-0a1b2c3d4e5f")
				}
				var first atomic.Int32
				resp, err := do(reused(req, &first))
				if err == nil {
					resp.Body.Close()
				}
				if first.Load() != 2 {
					t.Fatalf("the request's first connection was not a reused one (%d): the test did not set up net/http's replay", first.Load())
				}
				if n := remote.charges.Load(); n != 1 {
					t.Errorf("the remote read the request %d times, want 1", n)
				}
				if got := <-remote.bodies; got != tc.body {
					t.Errorf("the remote read body %q, want %q", got, tc.body)
				}
				wantTransport(t, err, true) // the answer was lost: unknown
			})
		}
	}
}

// A 307 or 308 redirect is the remote saying "not here, send it there": the client still follows
// it with the body, once per hop.
func TestRedirectKeepsTheBody(t *testing.T) {
	t.Parallel()
	remote := newCommitter(t)
	remote.charges.Store(1) // answer at once
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := latchhttp.New(&latchhttp.Config{Client: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(post(t, t.Context(), remote.srv.URL+"/moved", `{"amount":100}`))
	if err != nil {
		t.Fatalf("Do(/moved) = %v, want the redirected answer", err)
	}
	resp.Body.Close()
	if got := <-remote.bodies; got != `{"amount":100}` {
		t.Errorf("the redirected hop carried body %q, want the request's", got)
	}
	if n := remote.charges.Load(); n != 2 {
		t.Errorf("the remote read %d requests at /charge, want 1", n-1)
	}
}

// retrying is a round tripper in the style of retry libraries: it buffers the body and sends the
// request again when the first try fails. latchhttp cannot stop it, but must not call the result
// a success: the remote may have acted twice.
type retrying struct{ base http.RoundTripper }

func (r retrying) RoundTrip(req *http.Request) (*http.Response, error) {
	var buf []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		buf = b
	}
	try := func() (*http.Response, error) {
		out := req.Clone(req.Context())
		out.Body = io.NopCloser(bytes.NewReader(buf))
		return r.base.RoundTrip(out)
	}
	resp, err := try()
	if err != nil {
		resp, err = try()
	}
	return resp, err
}

func TestRetryingTransportIsUnknown(t *testing.T) {
	t.Parallel()
	for _, via := range []string{"Client.Do", "Transport"} {
		t.Run(via, func(t *testing.T) {
			t.Parallel()
			remote := newCommitter(t)
			tr := &http.Transport{}
			t.Cleanup(tr.CloseIdleConnections)
			var rt http.RoundTripper = retrying{base: tr}
			if via == "Transport" {
				rt = &latchhttp.Transport{Base: rt}
			}
			c, err := latchhttp.New(&latchhttp.Config{Client: &http.Client{Transport: rt}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Do(post(t, t.Context(), remote.srv.URL+"/charge", `{"amount":100}`))
			if n := remote.charges.Load(); n != 2 {
				t.Fatalf("the remote read the request %d times; the test's retrying transport should have sent it twice", n)
			}
			te := wantTransport(t, err, true)
			if !errors.Is(err, latchhttp.ErrSentTwice) {
				t.Errorf("Do() = %v (%+v), want ErrSentTwice", err, te)
			}
		})
	}
}

// Through a guard, on SQLite and Postgres: a lost answer on a reused connection leaves one
// charge, the effect ambiguous after attempt 1, and the executor's error.
func TestLostAnswerOnReusedConnection(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			remote := newCommitter(t)
			tr := &http.Transport{}
			t.Cleanup(tr.CloseIdleConnections)
			c, err := latchhttp.New(&latchhttp.Config{Client: &http.Client{Transport: tr}})
			if err != nil {
				t.Fatal(err)
			}
			pol, err := policy.Parse("latch.yaml", []byte(shipPolicy))
			if err != nil {
				t.Fatal(err)
			}
			g, err := latch.Open(t.Context(), &latch.Config{Policy: pol, StoreURL: testdb.URL(t, backend, "latchhttp")})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })
			var first atomic.Int32
			ship := latch.Protect(g, "shipping.create", func(ctx context.Context, s shipment) (string, error) {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, remote.srv.URL+"/charge", strings.NewReader(`{"order":"`+s.OrderID+`"}`))
				if err != nil {
					return "", latch.NotExecuted(err)
				}
				req.Header.Set("Idempotency-Key", latch.IdempotencyToken(ctx))
				resp, err := c.Do(reused(req, &first))
				if err != nil {
					return "", err
				}
				defer resp.Body.Close()
				return "shp_" + s.OrderID, nil
			}, nil)
			remote.warm(t, &http.Client{Transport: tr})
			ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "shipping-worker"})

			_, err = ship(ctx, shipment{OrderID: "o_9"})
			if first.Load() != 2 {
				t.Fatalf("the request's first connection was not a reused one (%d): the test did not set up net/http's replay", first.Load())
			}
			if !errors.Is(err, latch.ErrAmbiguous) || errors.Is(err, latch.ErrNotExecuted) {
				t.Errorf("ship() = %v, want ErrAmbiguous", err)
			}
			e, err := g.Store().Effect(t.Context(), "ship:o_9")
			if err != nil {
				t.Fatal(err)
			}
			if e.State != store.Ambiguous || e.Attempt != 1 {
				t.Errorf("effect = %s after %d attempts, want ambiguous after 1", e.State, e.Attempt)
			}
			if n := remote.charges.Load(); n != 1 {
				t.Errorf("the remote charged %d times, want 1", n)
			}
		})
	}
}

// Making requests unreplayable leaves what the remote receives as it was: no chunked encoding
// for a request without a body, "Content-Length: 0" on a POST without one, and the idempotency
// key under its usual name (header names are case-insensitive).
func TestWireUnchanged(t *testing.T) {
	t.Parallel()
	type seen struct {
		te     []string
		length string
		key    string
		body   string
		proto  int
	}
	got := make(chan seen, 1)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{te: r.TransferEncoding, length: r.Header.Get("Content-Length"), key: r.Header.Get("Idempotency-Key"), body: string(b), proto: r.ProtoMajor}
	})
	h1 := httptest.NewServer(handler)
	t.Cleanup(h1.Close)
	h2 := httptest.NewUnstartedServer(handler)
	h2.EnableHTTP2 = true
	h2.StartTLS()
	t.Cleanup(h2.Close)
	cases := []struct {
		method, body, length string
	}{
		{http.MethodGet, "", ""},
		{http.MethodHead, "", ""},
		{http.MethodDelete, "", ""},
		{http.MethodPost, "", "0"},
		{http.MethodPut, "", "0"},
		{http.MethodPost, `{"amount":100}`, "14"},
	}
	for _, srv := range []*httptest.Server{h1, h2} {
		c, err := latchhttp.New(&latchhttp.Config{Client: srv.Client()})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range cases {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req, err := http.NewRequestWithContext(t.Context(), tc.method, srv.URL, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Idempotency-Key", "k_1")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", tc.method, srv.URL, err)
			}
			resp.Body.Close()
			s := <-got
			if s.proto == 2 {
				// HTTP/2 has no chunked encoding, and a body of unknown length carries no
				// content-length: what matters there is that nothing else changed.
				if s.te != nil || s.key != "k_1" || s.body != tc.body {
					t.Errorf("HTTP/2 %s: Transfer-Encoding %q, key %q, body %q; want none, k_1, %q", tc.method, s.te, s.key, s.body, tc.body)
				}
				continue
			}
			if s.te != nil || s.length != tc.length || s.key != "k_1" || s.body != tc.body {
				t.Errorf("%s: Transfer-Encoding %q, Content-Length %q, key %q, body %q; want none, %q, k_1, %q",
					tc.method, s.te, s.length, s.key, s.body, tc.length, tc.body)
			}
		}
	}
}
