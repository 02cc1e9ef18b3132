package latchhttp_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/latchhttp"
)

// rawServer is a TCP server on 127.0.0.1 that reads each request in full and then does what
// its test says: reset the connection, or hang until the test ends.
type rawServer struct {
	ln       net.Listener
	accepted atomic.Int32 // connections accepted
	requests atomic.Int32 // complete requests read
	done     chan struct{}
	wg       sync.WaitGroup
}

func newRawServer(t *testing.T, after func(c *net.TCPConn, done <-chan struct{})) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := &rawServer{ln: ln, done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				if readRequest(c) {
					s.requests.Add(1)
				}
				after(c.(*net.TCPConn), s.done)
			}()
		}
	}()
	t.Cleanup(func() {
		close(s.done)
		ln.Close()
		s.wg.Wait()
	})
	return s
}

func (s *rawServer) url() string { return "http://" + s.ln.Addr().String() + "/v1/charges" }

// readRequest reads one HTTP/1.1 request with a Content-Length body; it reports whether the
// request arrived complete.
func readRequest(c net.Conn) bool {
	br := bufio.NewReader(c)
	n := 0
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return false
		}
		if line == "\r\n" {
			break
		}
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "Content-Length") {
			n, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	_, err := io.CopyN(io.Discard, br, int64(n))
	return err == nil
}

func reset(c *net.TCPConn, _ <-chan struct{}) {
	_ = c.SetLinger(0) // close sends RST, not FIN
}

func hang(_ *net.TCPConn, done <-chan struct{}) { <-done }

// closedURL is a URL on 127.0.0.1 where nothing listens.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/v1/charges"
}

func post(t *testing.T, ctx context.Context, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatalf("NewRequest: %v", err)
	}
	return req
}

// wantTransport checks that err is a *TransportError with the given Sent, and that it is
// NotExecuted exactly when nothing was sent.
func wantTransport(t *testing.T, err error, sent bool) *latchhttp.TransportError {
	t.Helper()
	var te *latchhttp.TransportError
	if !errors.As(err, &te) {
		t.Fatalf("error = %v (%T), want a *TransportError", err, err)
	}
	if te.Sent != sent {
		t.Errorf("TransportError.Sent = %v, want %v (%v)", te.Sent, sent, err)
	}
	if got := errors.Is(err, latch.ErrNotExecuted); got != !sent {
		t.Errorf("errors.Is(%v, ErrNotExecuted) = %v, want %v", err, got, !sent)
	}
	return te
}

func TestRefusedIsNotExecuted(t *testing.T) {
	t.Parallel()
	_, err := latchhttp.Do(post(t, t.Context(), closedURL(t), `{"amount":100}`))
	wantTransport(t, err, false)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("errors.Is(%v, ECONNREFUSED) = false, want the dial error kept", err)
	}
}

func TestResetAfterWriteIsUnknown(t *testing.T) {
	t.Parallel()
	s := newRawServer(t, reset)
	_, err := latchhttp.Do(post(t, t.Context(), s.url(), `{"amount":100}`))
	wantTransport(t, err, true)
	if n := s.requests.Load(); n != 1 {
		t.Errorf("server read %d complete requests, want 1: the request was written", n)
	}
}

func TestHangIsUnknown(t *testing.T) {
	t.Parallel()
	s := newRawServer(t, hang)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err := latchhttp.Do(post(t, ctx, s.url(), `{"amount":100}`))
	wantTransport(t, err, true)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("errors.Is(%v, DeadlineExceeded) = false, want the context's error kept", err)
	}
	if n := s.requests.Load(); n != 1 {
		t.Errorf("server read %d complete requests, want 1", n)
	}
}

func TestContextEndedBeforeSendIsNotExecuted(t *testing.T) {
	t.Parallel()
	s := newRawServer(t, hang)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := latchhttp.Do(post(t, ctx, s.url(), `{}`))
	wantTransport(t, err, false)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("errors.Is(%v, Canceled) = false", err)
	}
	if n := s.requests.Load(); n != 0 {
		t.Errorf("server read %d requests, want 0", n)
	}
}

// failingBody yields good bytes, then fails.
type failingBody struct {
	good string
	err  error
}

func (b *failingBody) Read(p []byte) (int, error) {
	if b.good != "" {
		n := copy(p, b.good)
		b.good = b.good[n:]
		return n, nil
	}
	return 0, b.err
}

func TestRequestBody(t *testing.T) {
	t.Parallel()
	errDisk := errors.New("read /var/spool/charge.json: input/output error")
	cases := []struct {
		name string
		good string
		sent bool
	}{
		// Nothing read from the body: the request is never started.
		{"fails before its first byte", "", false},
		// Headers and the first bytes may be on the wire: a server may act on headers alone.
		{"fails after its first byte", `{"amount":`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newRawServer(t, hang)
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.url(), &failingBody{good: tc.good, err: errDisk})
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = 100
			_, err = latchhttp.Do(req)
			wantTransport(t, err, tc.sent)
			if !errors.Is(err, errDisk) {
				t.Errorf("errors.Is(%v, the body's error) = false", err)
			}
			if !tc.sent && s.accepted.Load() != 0 {
				t.Errorf("server accepted %d connections, want 0", s.accepted.Load())
			}
		})
	}
}

func TestTLSHandshakeFailureIsNotExecuted(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake failure is expected
	srv.StartTLS()
	t.Cleanup(srv.Close)
	// http.DefaultClient does not trust the test server's certificate.
	_, err := latchhttp.Do(post(t, t.Context(), srv.URL, `{}`))
	te := wantTransport(t, err, false)
	if !strings.Contains(te.Error(), "certificate") {
		t.Errorf("error = %v, want the certificate error", err)
	}
	if hits.Load() != 0 {
		t.Errorf("handler ran %d times, want 0", hits.Load())
	}
}

func TestDNSFailureIsNotExecuted(t *testing.T) {
	t.Parallel()
	dead := closedURL(t)
	deadAddr := strings.TrimSuffix(strings.TrimPrefix(dead, "http://"), "/v1/charges")
	// A resolver whose DNS server (on 127.0.0.1) refuses: the lookup fails as a real one does.
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", deadAddr)
	}}
	tr := &http.Transport{DialContext: (&net.Dialer{Resolver: resolver}).DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := latchhttp.New(&latchhttp.Config{Client: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Do(post(t, t.Context(), "http://payments.example.invalid/v1/charges", `{}`))
	wantTransport(t, err, false)
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) {
		t.Errorf("error = %v, want a *net.DNSError inside", err)
	}
}

func TestStatusRule(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":"status %d"}`, code)
	}))
	t.Cleanup(srv.Close)
	cases := []struct {
		code int
		want latch.Outcome
	}{
		{200, latch.OutcomeCommitted},
		{201, latch.OutcomeCommitted},
		{204, latch.OutcomeCommitted},
		{304, latch.OutcomeCommitted},
		{400, latch.OutcomeNotExecuted},
		{401, latch.OutcomeNotExecuted},
		{403, latch.OutcomeNotExecuted},
		{404, latch.OutcomeNotExecuted},
		{422, latch.OutcomeNotExecuted},
		{408, latch.OutcomeUnknown},
		{409, latch.OutcomeUnknown},
		{425, latch.OutcomeUnknown},
		{429, latch.OutcomeUnknown},
		{500, latch.OutcomeUnknown},
		{502, latch.OutcomeUnknown},
		{503, latch.OutcomeUnknown},
		{504, latch.OutcomeUnknown},
	}
	for _, tc := range cases {
		t.Run(strconv.Itoa(tc.code), func(t *testing.T) {
			t.Parallel()
			resp, err := latchhttp.Do(post(t, t.Context(), srv.URL+"/"+strconv.Itoa(tc.code), `{}`))
			if tc.want == latch.OutcomeCommitted {
				if err != nil {
					t.Fatalf("Do() = %v, want the response", err)
				}
				resp.Body.Close()
				if resp.StatusCode != tc.code {
					t.Errorf("status = %d, want %d", resp.StatusCode, tc.code)
				}
				return
			}
			var se *latchhttp.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("Do() = %v, want a *StatusError", err)
			}
			if se.StatusCode != tc.code {
				t.Errorf("StatusError.StatusCode = %d, want %d", se.StatusCode, tc.code)
			}
			if want := fmt.Sprintf(`{"error":"status %d"}`, tc.code); se.Excerpt != want {
				t.Errorf("StatusError.Excerpt = %q, want %q", se.Excerpt, want)
			}
			if got := errors.Is(err, latch.ErrNotExecuted); got != (tc.want == latch.OutcomeNotExecuted) {
				t.Errorf("errors.Is(%v, ErrNotExecuted) = %v, want %v", err, got, !got)
			}
			if !strings.Contains(err.Error(), strconv.Itoa(tc.code)) {
				t.Errorf("error %q does not name the status", err)
			}
		})
	}
}

func TestCustomRule(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	t.Cleanup(srv.Close)
	// A provider that documents 429 as "refused before doing anything".
	c, err := latchhttp.New(&latchhttp.Config{Rule: func(resp *http.Response) latch.Outcome {
		if resp.StatusCode == http.StatusTooManyRequests {
			return latch.OutcomeNotExecuted
		}
		return latchhttp.DefaultRule(resp)
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Do(post(t, t.Context(), srv.URL, `{}`))
	if !errors.Is(err, latch.ErrNotExecuted) {
		t.Errorf("Do() = %v, want NotExecuted by the custom rule", err)
	}
}

func TestExcerptIsBoundedAndPrintable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, "line one\nline\x1b[31mtwo\u202e")
		io.WriteString(w, strings.Repeat("x", 10000))
	}))
	t.Cleanup(srv.Close)
	c, err := latchhttp.New(&latchhttp.Config{MaxExcerpt: 32})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Do(post(t, t.Context(), srv.URL+"/v1?api_key=sk_live_secret", `{}`))
	var se *latchhttp.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("Do() = %v, want a *StatusError", err)
	}
	if len(se.Excerpt) > 32+2*3 || !se.Truncated { // two replaced characters may grow by 2 bytes each
		t.Errorf("Excerpt = %q (%d bytes), Truncated = %v; want at most the first 32 bytes, truncated", se.Excerpt, len(se.Excerpt), se.Truncated)
	}
	if strings.ContainsAny(se.Excerpt, "\n\x1b\u202e") {
		t.Errorf("Excerpt = %q holds a line break, an escape or a bidi override", se.Excerpt)
	}
	if strings.Contains(err.Error(), "sk_live_secret") {
		t.Errorf("error %q carries the query string", err)
	}
	if _, err := latchhttp.New(&latchhttp.Config{MaxExcerpt: -1}); err == nil {
		t.Error("New(MaxExcerpt: -1) = nil error, want a refusal")
	}
}

// A redirect means a server saw the request: a failure on the next hop is unknown.
func TestRedirectThenRefusedIsUnknown(t *testing.T) {
	t.Parallel()
	dead := closedURL(t)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, dead, http.StatusSeeOther)
	}))
	t.Cleanup(srv.Close)

	_, err := latchhttp.Do(post(t, t.Context(), srv.URL, `{}`))
	wantTransport(t, err, true)

	hc := &http.Client{Transport: &latchhttp.Transport{}}
	_, err = hc.Do(post(t, t.Context(), srv.URL, `{}`))
	wantTransport(t, err, true)
	if hits.Load() != 2 {
		t.Errorf("server answered %d times, want 2", hits.Load())
	}
}

func TestTransport(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	hc := &http.Client{Transport: &latchhttp.Transport{}}

	// Statuses pass through: a RoundTripper does not interpret them.
	resp, err := hc.Do(post(t, t.Context(), srv.URL, `{}`))
	if err != nil {
		t.Fatalf("Do() = %v, want the 500 response", err)
	}
	resp.Body.Close()

	// Errors are classified, through the client's *url.Error.
	_, err = hc.Do(post(t, t.Context(), closedURL(t), `{}`))
	wantTransport(t, err, false)

	s := newRawServer(t, reset)
	_, err = hc.Do(post(t, t.Context(), s.url(), `{}`))
	wantTransport(t, err, true)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A round tripper that is not net/http's and reports nothing through the trace hooks cannot
// prove that nothing was sent: its errors are unknown.
func TestSilentRoundTripperIsUnknown(t *testing.T) {
	t.Parallel()
	silent := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return nil, errors.New("quic: stream reset")
	})
	c, err := latchhttp.New(&latchhttp.Config{Client: &http.Client{Transport: silent}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Do(post(t, t.Context(), "http://127.0.0.1:1/", `{}`))
	wantTransport(t, err, true)

	_, err = (&latchhttp.Transport{Base: silent}).RoundTrip(post(t, t.Context(), "http://127.0.0.1:1/", `{}`))
	wantTransport(t, err, true)
}

// Over HTTP/2 the same hooks report the exchange: a stream reset or a hang after the request is
// unknown, an answer is mapped by the rule.
func TestHTTP2(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	done := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		requests.Add(1)
		switch r.URL.Path {
		case "/reset":
			panic(http.ErrAbortHandler) // the server resets the stream
		case "/hang":
			<-done
		case "/refuse":
			w.WriteHeader(http.StatusUnprocessableEntity)
			io.WriteString(w, `{"error":"invalid_address"}`)
		}
	}))
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(func() { close(done); srv.Close() })
	c, err := latchhttp.New(&latchhttp.Config{Client: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}

	resp, err := c.Do(post(t, t.Context(), srv.URL+"/ok", `{}`))
	if err != nil {
		t.Fatalf("Do(/ok) = %v", err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("answered over %s, want HTTP/2", resp.Proto)
	}

	_, err = c.Do(post(t, t.Context(), srv.URL+"/refuse", `{}`))
	var se *latchhttp.StatusError
	if !errors.As(err, &se) || se.StatusCode != 422 || se.Excerpt != `{"error":"invalid_address"}` || !errors.Is(err, latch.ErrNotExecuted) {
		t.Errorf("Do(/refuse) = %v, want NotExecuted 422 with the body", err)
	}

	_, err = c.Do(post(t, t.Context(), srv.URL+"/reset", `{"amount":100}`))
	wantTransport(t, err, true)

	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err = c.Do(post(t, ctx, srv.URL+"/hang", `{"amount":100}`))
	wantTransport(t, err, true)

	if n := requests.Load(); n != 4 {
		t.Errorf("server read %d requests, want 4", n)
	}
}
