package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/latchhttp"
)

// G12 exercises a transport-level caller: latchhttp, the HTTP classifier an executor calls its
// remote through, against a real HTTP server on 127.0.0.1. Verify cannot see whether your
// executors use it (Config.LatchHTTP says so). Without it, a policy's gateway: section makes G12
// exercise the MCP gateway instead (gateway.go).

// naNoTransport is G12's N/A reason when no transport-level caller is configured.
const naNoTransport = "no transport-level caller is configured: pass --latchhttp (Config.LatchHTTP) when your executors call their remotes through latchhttp"

// remote is the HTTP server of G12: /drop reads a request and closes the connection without a
// response (the request was written; nobody knows what the remote did), /ok answers 200.
type remote struct {
	srv  *http.Server
	base string
	drop atomic.Int64 // requests /drop received
	ok   atomic.Int64 // requests /ok answered
}

func startRemote() (*remote, error) {
	rm := &remote{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /drop", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rm.drop.Add(1)
		hangUp(w)
	})
	mux.HandleFunc("POST /ok", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rm.ok.Add(1)
		w.WriteHeader(http.StatusOK)
	})
	var err error
	rm.srv, rm.base, err = serveLoopback(mux, "G12's server")
	return rm, err
}

// serveLoopback serves h on a new port of 127.0.0.1 and returns the server and its base URL
// (http://127.0.0.1:PORT); what names the server in an error.
func serveLoopback(h http.Handler, what string) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("verify: %s: %w", what, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, "http://" + ln.Addr().String(), nil
}

// hangUp closes the connection of a request the handler has read, without a response: the
// request was written, and nobody knows what the remote did.
func hangUp(w http.ResponseWriter) {
	if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = c.Close()
	}
}

func (rm *remote) close() { _ = rm.srv.Close() }

// deadURL is an address on 127.0.0.1 nothing listens on: a dial there is refused before a byte
// of the request is written.
func deadURL() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("verify: G12's closed port: %w", err)
	}
	u := "http://" + ln.Addr().String() + "/ok"
	return u, ln.Close()
}

// httpExecutor posts the call's arguments to url through latchhttp, as an executor calling its
// remote would. With faultTransportNotExecuted every transport error is wrapped in NotExecuted,
// as a hand-written classifier that took any connection error for "never sent" would.
func (r *runner) httpExecutor(client *http.Client, url string) executor {
	return func(ctx context.Context, args json.RawMessage) (any, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(args))
		if err != nil {
			return nil, latch.NotExecuted(err)
		}
		req.Header.Set("Idempotency-Key", latch.IdempotencyToken(ctx))
		hc, err := latchhttp.New(&latchhttp.Config{Client: client})
		if err != nil {
			return nil, latch.NotExecuted(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			var te *latchhttp.TransportError
			if r.faults[faultTransportNotExecuted] && errors.As(err, &te) && !errors.Is(err, latch.ErrNotExecuted) {
				return nil, latch.NotExecuted(err)
			}
			return nil, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return map[string]any{"status": resp.StatusCode}, nil
	}
}

// g12: an executor posts to a real server on 127.0.0.1 through latchhttp; the server reads the
// request and closes the connection without answering. The call must end ambiguous (the record
// too), and a retry must be refused ErrAmbiguousEffect without reaching the server. Control: on
// another key the executor posts to a closed port — nothing written — which is NotExecuted: the
// record is failed, and the retry reaches the server and commits.
func (r *runner) g12(ctx context.Context) (outcome, error) {
	if !r.cfg.LatchHTTP {
		if r.cfg.Policy.Gateway != nil {
			return r.g12Gateway(ctx)
		}
		return notApplicable(naNoTransport), nil
	}
	pk, why := r.renewable(2)
	if pk == nil {
		return notApplicable(why), nil
	}
	v, cv := pk.variants[0], pk.variants[1]
	e, err := r.newEnv(ctx, "g12", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	rm, err := startRemote()
	if err != nil {
		return outcome{}, err
	}
	defer rm.close()
	dead, err := deadURL()
	if err != nil {
		return outcome{}, err
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	_, werr := e.exec(ctx, pk, v, r.httpExecutor(client, rm.base+"/drop"))
	st1, err := e.effectState(ctx, v.Key)
	if err != nil {
		return outcome{}, err
	}
	okBefore := rm.ok.Load()
	_, rerr := e.exec(ctx, pk, v, r.httpExecutor(client, rm.base+"/ok"))
	reached := rm.ok.Load() - okBefore

	_, cerr1 := e.exec(ctx, pk, cv, r.httpExecutor(client, dead))
	cst1, err := e.effectState(ctx, cv.Key)
	if err != nil {
		return outcome{}, err
	}
	okBefore = rm.ok.Load()
	_, cerr2 := e.exec(ctx, pk, cv, r.httpExecutor(client, rm.base+"/ok"))
	creached := rm.ok.Load() - okBefore
	cst2, err := e.effectState(ctx, cv.Key)
	if err != nil {
		return outcome{}, err
	}

	detail := fmt.Sprintf("%s: request written, connection closed without a response (server received %d): %s (record %s); retry %s, reaching the server %d times; control %s: a closed port (nothing written): %s (record %s), retry %s (record %s), reaching the server %d times",
		v.Key, rm.drop.Load(), outcomeOf(werr), st1, outcomeOf(rerr), reached, cv.Key, outcomeOf(cerr1), cst1, outcomeOf(cerr2), cst2, creached)
	switch {
	case !errors.Is(cerr1, latch.ErrNotExecuted) || cst1 != "failed" || cerr2 != nil || creached != 1 || cst2 != "committed" || rm.drop.Load() != 1:
		return controlFailed(pk.Action, detail), nil
	case reached != 0:
		return fail(pk.Action, "the retry reached the remote after a byte of the request was written", detail), nil
	case !errors.Is(werr, latch.ErrAmbiguous) || st1 != "ambiguous":
		return fail(pk.Action, "a written request with no response was not recorded ambiguous", detail), nil
	case !errors.Is(rerr, latch.ErrAmbiguousEffect):
		return fail(pk.Action, "the retry was not refused as ambiguous", detail), nil
	}
	return pass(pk.Action, detail), nil
}
