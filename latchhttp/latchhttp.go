// Package latchhttp tells, for an outbound HTTP request made inside a latch executor, whether
// the remote may have acted.
//
// An executor that calls a remote over HTTP has three ways to end: the remote answered (and
// its status says what happened), the request never left (nothing happened: latch.NotExecuted,
// the effect may be retried), or the request left and no answer came back (nobody knows: the
// effect is ambiguous and retries are refused until someone finds out). Sorting transport errors
// into the last two by hand is where webhook receivers and workers go wrong; this package does
// it from what net/http itself reports about the exchange (net/http/httptrace), not from error
// strings:
//
//   - nothing of the request was handed to a connection — DNS, dial, TLS handshake, a proxy
//     refusal, a request body that failed before its first byte, a context that ended before a
//     connection was ready: the error is wrapped in latch.NotExecuted;
//   - the request was (or may have been) written and no response came — a reset, a hang until
//     the context's deadline, a connection closed mid-response: the error is left unknown, and
//     latch records the effect ambiguous;
//   - a response came: [Client.Do] maps its status through a [Rule]. The default, [DefaultRule],
//     treats 1xx–3xx as done, 4xx other than 408, 409, 425 and 429 as the remote refusing
//     (NotExecuted), and everything else — 5xx, timeouts, conflicts, rate limits — as unknown.
//     A refused or unknown status is a *[StatusError] carrying the status and a bounded excerpt
//     of the body.
//
// Use [Do] (or a [Client] with your own *http.Client and rule) inside the executor:
//
//	charge := latch.Protect(g, "billing.charge", func(ctx context.Context, c Charge) (Receipt, error) {
//		req, err := http.NewRequestWithContext(ctx, "POST", processorURL, body(c))
//		if err != nil {
//			return Receipt{}, latch.NotExecuted(err)
//		}
//		req.Header.Set("Idempotency-Key", latch.IdempotencyToken(ctx))
//		resp, err := latchhttp.Do(req) // NotExecuted, unknown, or a response that succeeded
//		if err != nil {
//			return Receipt{}, err
//		}
//		defer resp.Body.Close()
//		…
//	}, nil)
//
// or set a [Transport] as an *http.Client's transport, where only the transport errors are
// classified (a RoundTripper must not interpret statuses).
//
// The rule errs one way only: when it cannot tell whether a byte of a complete request reached
// the remote, the answer is unknown. docs/integrations/latchhttp.md lists every case.
package latchhttp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/latchkit/latch"
)

// DefaultMaxExcerpt is how many bytes of a refused or unknown response's body a StatusError
// keeps when Config.MaxExcerpt is zero.
const DefaultMaxExcerpt = 1024

// Rule says what a response means for the effect: latch.OutcomeCommitted (the call succeeded:
// Do returns the response), latch.OutcomeNotExecuted (the remote refused without acting: Do
// returns a *StatusError wrapped in latch.NotExecuted) or latch.OutcomeUnknown (Do returns a
// *StatusError, and latch records the effect ambiguous). A rule must not read the body.
type Rule func(resp *http.Response) latch.Outcome

// DefaultRule maps a status: below 400 committed; 4xx refused (not executed) except 408
// Request Timeout, 409 Conflict, 425 Too Early and 429 Too Many Requests, which say nothing
// certain about whether the remote acted; everything else (5xx, anything unusual) unknown.
func DefaultRule(resp *http.Response) latch.Outcome {
	code := resp.StatusCode
	switch {
	case code < 400:
		return latch.OutcomeCommitted
	case code == http.StatusRequestTimeout, code == http.StatusConflict, code == http.StatusTooEarly,
		code == http.StatusTooManyRequests:
		return latch.OutcomeUnknown
	case code < 500:
		return latch.OutcomeNotExecuted
	}
	return latch.OutcomeUnknown
}

// Config configures a Client. The zero value (or a nil *Config) means http.DefaultClient,
// DefaultRule and DefaultMaxExcerpt.
type Config struct {
	Client     *http.Client // nil: http.DefaultClient
	Rule       Rule         // nil: DefaultRule
	MaxExcerpt int          // bytes of a refused body kept in a StatusError; 0: DefaultMaxExcerpt
}

// Client sends requests and classifies how each ended. It is safe for concurrent use.
type Client struct {
	hc         *http.Client
	rule       Rule
	maxExcerpt int
}

// New returns a Client. It refuses a negative MaxExcerpt.
func New(cfg *Config) (*Client, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.MaxExcerpt < 0 {
		return nil, fmt.Errorf("latchhttp: new client: MaxExcerpt %d is negative", c.MaxExcerpt)
	}
	if c.MaxExcerpt == 0 {
		c.MaxExcerpt = DefaultMaxExcerpt
	}
	if c.Client == nil {
		c.Client = http.DefaultClient
	}
	if c.Rule == nil {
		c.Rule = DefaultRule
	}
	return &Client{hc: c.Client, rule: c.Rule, maxExcerpt: c.MaxExcerpt}, nil
}

var defaultClient, _ = New(nil)

// Do sends req with http.DefaultClient and DefaultRule; see Client.Do.
func Do(req *http.Request) (*http.Response, error) { return defaultClient.Do(req) }

// Do sends req (through the client's redirects) and returns the response when the rule says it
// succeeded; the caller closes its body. Otherwise it returns an error for the executor to
// return as it is:
//
//   - wrapped in latch.NotExecuted, around a *TransportError with Sent false, when nothing of
//     the request was handed to a connection;
//   - a *TransportError with Sent true when the request was or may have been written and no
//     response came: unknown;
//   - a *StatusError (wrapped in latch.NotExecuted when the rule says so) when a response came
//     that the rule does not call a success. Its body is read up to the excerpt and closed.
//
// A failure after any hop of a redirect chain reached a server is unknown: that server
// answered, so it saw the request.
func (c *Client) Do(req *http.Request) (*http.Response, error) {
	ex := &exchange{trusted: trustsTrace(c.hc.Transport)}
	out, err := ex.prepare(req)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(out)
	if err != nil {
		return nil, ex.classify(req, err)
	}
	switch o := c.rule(resp); o {
	case latch.OutcomeCommitted:
		return resp, nil
	case latch.OutcomeNotExecuted:
		return nil, latch.NotExecuted(c.statusError(req, resp))
	default:
		return nil, c.statusError(req, resp)
	}
}

// statusError reads a bounded excerpt of resp's body, closes it, and describes the response.
func (c *Client) statusError(req *http.Request, resp *http.Response) *StatusError {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, int64(c.maxExcerpt)+1))
	e := &StatusError{Method: req.Method, URL: redactURL(req), StatusCode: resp.StatusCode, Status: resp.Status}
	if len(b) > c.maxExcerpt {
		b, e.Truncated = b[:c.maxExcerpt], true
	}
	e.Excerpt = printable(b)
	return e
}

// StatusError is a response the rule did not call a success. Excerpt is at most MaxExcerpt
// bytes of its body, with invalid UTF-8 and control characters made harmless for a log line.
type StatusError struct {
	Method     string
	URL        string // scheme, host and path: the query and any user info are left out
	StatusCode int
	Status     string // "409 Conflict"
	Excerpt    string
	Truncated  bool // the body was longer than the excerpt
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("%s %s: %s", e.Method, e.URL, e.Status)
	if e.Excerpt != "" {
		s += ": " + e.Excerpt
		if e.Truncated {
			s += "…"
		}
	}
	return s
}

// TransportError is an exchange that ended without a response. Sent says whether the request
// was, or may have been, handed to a connection: false means the remote cannot have seen it
// (and Do wraps the error in latch.NotExecuted); true means the remote may have acted.
type TransportError struct {
	Method string
	URL    string // scheme, host and path: the query and any user info are left out
	Sent   bool
	Err    error
}

func (e *TransportError) Error() string {
	cause := e.Err
	if ue, ok := cause.(*url.Error); ok {
		cause = ue.Err // it repeats the method and URL
	}
	if e.Sent {
		return fmt.Sprintf("%s %s: sent, no response: %v", e.Method, e.URL, cause)
	}
	return fmt.Sprintf("%s %s: not sent: %v", e.Method, e.URL, cause)
}

// Unwrap returns the transport's error.
func (e *TransportError) Unwrap() error { return e.Err }

// Transport is an http.RoundTripper that classifies the errors of Base as Client.Do does: an
// error of a request that was never handed to a connection is wrapped in latch.NotExecuted
// (around a *TransportError), any other is a *TransportError with Sent true. Responses pass
// through untouched, whatever their status: a RoundTripper does not interpret them (use
// Client.Do or Do for that).
//
// A redirected request (one the http.Client made after a redirect response) never fails as
// NotExecuted: the server that redirected saw the original request. When the client's
// Timeout fires, net/http replaces the error with its own and the classification is lost: the
// failure then reads as unknown, the safe side. Prefer a context deadline, or Client.Do.
type Transport struct {
	Base http.RoundTripper // nil: http.DefaultTransport
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	ex := &exchange{trusted: trustsTrace(base), redirected: req.Response != nil}
	out, err := ex.prepare(req)
	if err != nil {
		return nil, err
	}
	resp, err := base.RoundTrip(out)
	if err != nil {
		return nil, ex.classify(req, err)
	}
	return resp, nil
}

// exchange follows one request through net/http's trace hooks.
type exchange struct {
	// trusted: the round tripper is net/http's own, which reports every request it writes.
	trusted bool
	// redirected: the request follows a redirect response, so a server saw the exchange.
	redirected bool
	// asked: the round tripper asked for a connection (GetConn), so it reports through the
	// trace hooks even if it is not known to be net/http's.
	asked atomic.Bool
	// wrote: a hook that fires before any byte of a complete request can reach the connection
	// (the first header field written into the connection's buffer, the headers, the request).
	wrote atomic.Bool
}

// prepare returns req with the trace installed and its body's first bytes read ahead: a body
// that fails before its first byte fails here, before anything is sent. The body is closed on
// that failure, as a RoundTripper must.
func (ex *exchange) prepare(req *http.Request) (*http.Request, error) {
	wrote := func() { ex.wrote.Store(true) }
	trace := &httptrace.ClientTrace{
		GetConn:          func(string) { ex.asked.Store(true) },
		WroteHeaderField: func(string, []string) { wrote() },
		WroteHeaders:     wrote,
		WroteRequest:     func(httptrace.WroteRequestInfo) { wrote() },
	}
	out := req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	if req.Body == nil || req.Body == http.NoBody {
		return out, nil
	}
	head, err := readAhead(req.Body)
	if err != nil {
		req.Body.Close()
		return nil, latch.NotExecuted(&TransportError{Method: req.Method, URL: redactURL(req),
			Err: fmt.Errorf("read request body: %w", err)})
	}
	out.Body = &aheadBody{Reader: io.MultiReader(bytes.NewReader(head), req.Body), body: req.Body}
	return out, nil
}

// classify turns the round tripper's error into NotExecuted or unknown.
func (ex *exchange) classify(req *http.Request, err error) error {
	sent := ex.redirected || ex.wrote.Load() || !ex.trusted && !ex.asked.Load()
	te := &TransportError{Method: req.Method, URL: redactURL(req), Sent: sent, Err: err}
	if sent {
		return te
	}
	return latch.NotExecuted(te)
}

// trustsTrace reports whether rt is net/http's own transport, which calls the trace hooks for
// every request it writes. Another round tripper's silence proves nothing, unless it at least
// asked for a connection.
func trustsTrace(rt http.RoundTripper) bool {
	if rt == nil {
		rt = http.DefaultTransport
	}
	switch t := rt.(type) {
	case *http.Transport:
		return true
	case *Transport:
		return trustsTrace(t.Base)
	}
	return false
}

// readAhead reads from body until it yields its first bytes, reports its end, or fails.
func readAhead(body io.Reader) ([]byte, error) {
	buf := make([]byte, 512)
	for range 100 { // a reader returning 0, nil forever is broken; don't spin on it
		n, err := body.Read(buf)
		switch {
		case n > 0:
			return buf[:n], nil
		case errors.Is(err, io.EOF):
			return nil, nil
		case err != nil:
			return nil, err
		}
	}
	return nil, io.ErrNoProgress
}

// aheadBody is a request body whose first bytes were read ahead.
type aheadBody struct {
	io.Reader
	body io.Closer
}

func (b *aheadBody) Close() error { return b.body.Close() }

// redactURL is the request's URL without user info or query, which may hold secrets.
func redactURL(req *http.Request) string {
	if req.URL == nil {
		return ""
	}
	u := *req.URL
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

// printable makes a response excerpt safe for a one-line error message: line breaks and tabs
// become spaces; invalid UTF-8, other control and format (bidi) characters become U+FFFD, so a
// body cannot steer a terminal or a log reader.
func printable(b []byte) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			return ' '
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			return utf8.RuneError
		}
		return r
	}, string(b))
}
