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
//
// # One send per call
//
// latchhttp never sends a request body — or a request — twice within one call. net/http does,
// on its own: when a reused keep-alive connection fails before the answer, it sends the request
// again on a fresh connection if it takes the request for a replayable one — a GET, HEAD,
// OPTIONS or TRACE, or any request carrying an Idempotency-Key or X-Idempotency-Key header whose
// body it can rewind (http.NewRequest makes strings, bytes and buffers rewindable). Against a
// remote that does not deduplicate that header, the request above would charge twice inside one
// latch attempt, and the attempt would be recorded committed. [Do], [Client.Do] and [Transport]
// hand the transport a request it cannot replay, so a lost answer is unknown (the effect is
// ambiguous), never a silent second send; a redirect the remote asks for (307, 308) is still
// followed with the body. A round tripper that keeps its own copy of the body and retries
// cannot be stopped from outside; when the trace shows it sending again, the call fails with
// [ErrSentTwice], unknown. Code that calls an *http.Client itself gets the same guarantee by
// installing a [Transport] in it; without one, net/http may send an idempotency-keyed request
// twice.
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
	// The caller's client, with every hop sent through once: the client still follows a
	// 307 or 308 with the body (the remote asked for it), the transport never resends one.
	hc := *c.hc
	hc.Transport = once{c.hc.Transport}
	resp, err := hc.Do(out)
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
// Like Client.Do, it hands Base a request Base cannot send twice (see the package
// documentation), and fails with ErrSentTwice when it sees Base send one again anyway.
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
	resp, err := sendOnce(base, out)
	if err != nil {
		return nil, ex.classify(req, err)
	}
	return resp, nil
}

// ErrSentTwice is the cause of a *TransportError (Sent true) when a round tripper under
// latchhttp sent one request more than once — a retrying transport that buffered the body. The
// remote may have acted once or twice, so the outcome is unknown even if the last try was
// answered. latchhttp stops net/http's own transports from resending; it can only detect, never
// stop, a round tripper that keeps its own copy of the body.
var ErrSentTwice = errors.New("latchhttp: the request was sent more than once")

// once is the round tripper Client.Do puts under the caller's client for each hop.
type once struct{ base http.RoundTripper }

func (o once) RoundTrip(req *http.Request) (*http.Response, error) { return sendOnce(o.base, req) }

// sendOnce sends req through rt as a request that net/http's transports (HTTP/1 and HTTP/2)
// will not send again by themselves, and turns a second send it sees anyway into ErrSentTwice.
//
// net/http resends a request on a fresh connection when a reused keep-alive connection fails
// before the answer and it deems the request replayable: no body, or a body it can rewind
// (Request.GetBody, which http.NewRequest sets for in-memory bodies), together with a method
// that is safe to repeat (GET, HEAD, OPTIONS, TRACE) or an Idempotency-Key or
// X-Idempotency-Key header. Against a remote that does not deduplicate, that is a second
// charge inside one latch attempt, and latch would record it committed. The remedy is to make
// the request not replayable, whatever its method and headers: see unreplayable.
func sendOnce(rt http.RoundTripper, req *http.Request) (*http.Response, error) {
	if rt == nil {
		rt = http.DefaultTransport
	}
	sends := &sends{}
	out := unreplayable(req.WithContext(httptrace.WithClientTrace(req.Context(), sends.trace())))
	resp, err := rt.RoundTrip(out)
	switch {
	case !sends.again.Load() || errors.Is(err, ErrSentTwice):
		return resp, err
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrSentTwice, err)
	}
	resp.Body.Close()
	return nil, fmt.Errorf("%w: the last try was answered %s", ErrSentTwice, resp.Status)
}

// unreplayable returns req (a copy the caller owns) changed so that net/http's transports
// cannot send it twice:
//
//   - a request with a body loses GetBody: a transport cannot rewind a body it has read, so it
//     retries only when it read none of it (nothing was sent);
//   - a request without a body whose method is usually sent without one (GET, HEAD, DELETE,
//     OPTIONS, …) gets an empty body that cannot be rewound either. On HTTP/1 net/http finds it
//     empty before writing, so the request goes out as it would have;
//   - a request without a body and another method (a POST with no body) keeps it that way, so
//     it still carries "Content-Length: 0"; its Idempotency-Key and X-Idempotency-Key headers,
//     which alone make such a request replayable, move to lower-case header names. Header names
//     are case-insensitive on the wire; net/http looks the replay markers up by their exact
//     canonical names.
func unreplayable(req *http.Request) *http.Request {
	if req.Body != nil && req.Body != http.NoBody {
		req.GetBody = nil
		return req
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodDelete,
		"PROPFIND", "SEARCH":
		req.Body, req.GetBody = emptyBody{}, nil
		return req
	}
	req.Header = unmarked(req.Header)
	return req
}

// replayMarkers are the headers that make net/http take a request for one it may repeat.
var replayMarkers = [...]string{"Idempotency-Key", "X-Idempotency-Key"}

// unmarked returns h with the replay markers under lower-case names; h itself is not changed.
func unmarked(h http.Header) http.Header {
	var out http.Header
	for _, k := range replayMarkers {
		v, ok := h[k]
		if !ok {
			continue
		}
		if out == nil {
			out = h.Clone()
		}
		delete(out, k)
		lower := strings.ToLower(k)
		out[lower] = append(out[lower], v...)
	}
	if out == nil {
		return h
	}
	return out
}

// emptyBody is a request body with nothing in it that is not http.NoBody, so that a transport
// cannot take the request for one without a body, which it could repeat.
type emptyBody struct{}

func (emptyBody) Read([]byte) (int, error) { return 0, io.EOF }
func (emptyBody) Close() error             { return nil }

// sends watches one hop through the trace hooks: a connection asked for after the request was
// written is the request being sent again.
type sends struct {
	wrote atomic.Bool
	again atomic.Bool
}

func (s *sends) trace() *httptrace.ClientTrace {
	wrote := func() { s.wrote.Store(true) }
	return &httptrace.ClientTrace{
		GetConn: func(string) {
			if s.wrote.Load() {
				s.again.Store(true)
			}
		},
		WroteHeaderField: func(string, []string) { wrote() },
		WroteHeaders:     wrote,
		WroteRequest:     func(httptrace.WroteRequestInfo) { wrote() },
	}
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
