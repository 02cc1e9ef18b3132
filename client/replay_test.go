package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/latchkit/latch/auth"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/client"
	"github.com/latchkit/latch/server"
	"github.com/latchkit/latch/store"
)

// dropper is a proxy in front of a server that forwards every request and, for the first `drop`
// begins, drops the answer: the server acted, the client sees the connection close.
type dropper struct {
	target string
	drop   atomic.Int32
	mu     sync.Mutex
	keys   []string // the Idempotency-Key of every begin forwarded
}

func (d *dropper) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	out, err := http.NewRequestWithContext(r.Context(), r.Method, d.target+r.URL.Path, r.Body)
	if err != nil {
		panic(err)
	}
	out.Header = r.Header.Clone()
	begin := r.Method == "POST" && r.URL.Path == "/v1/actions"
	if begin {
		d.mu.Lock()
		d.keys = append(d.keys, r.Header.Get("Idempotency-Key"))
		d.mu.Unlock()
	}
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if begin && d.drop.Add(-1) >= 0 {
		panic(http.ErrAbortHandler) // the answer is lost: the connection closes without it
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(body)
}

// behind returns a client like c that talks to the server through a dropper.
func behind(t *testing.T, c *client.Client, token string, drop int32) (*client.Client, *dropper) {
	t.Helper()
	d := &dropper{target: c.URL()}
	d.drop.Store(drop)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: d, ErrorLog: nil}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	pc := client.New("http://"+ln.Addr().String(), token)
	pc.HTTP = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	return pc, d
}

// TestProtectLostBeginAnswer: the answers to a protected call's first two begins are lost after
// the server reserved the key. Protect asks again with the same request key, continues the same
// reservation, runs the function once and records it committed — where a begin without a key
// would meet its own attempt, in_progress, until the lease lapsed into ambiguous.
func TestProtectLostBeginAnswer(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			direct, g, tok := serveToken(t, backend)
			c, d := behind(t, direct, tok, 2)
			var runs atomic.Int32
			charge := client.Protect(c, "billing.charge", func(ctx context.Context, ch Charge) (string, error) {
				runs.Add(1)
				return "ch_" + ch.InvoiceID, nil
			}, nil)
			out, err := charge(t.Context(), Charge{InvoiceID: "inv_1", Amount: 100})
			if err != nil || out != "ch_inv_1" || runs.Load() != 1 {
				t.Fatalf("protected call after two lost begin answers = %q, %v; ran %d times, want once", out, err, runs.Load())
			}
			if len(d.keys) != 3 || d.keys[0] == "" || d.keys[1] != d.keys[0] || d.keys[2] != d.keys[0] {
				t.Errorf("begins sent with keys %q, want three with one key", d.keys)
			}
			e, err := g.Store().Effect(t.Context(), "charge:inv_1")
			if err != nil || e.State != store.Committed || e.Attempt != 1 {
				t.Fatalf("effect after the call = %+v, %v; want committed at attempt 1", e, err)
			}
			evs, err := g.Store().Events(t.Context(), store.EventFilter{EffectKey: "charge:inv_1"})
			if err != nil {
				t.Fatal(err)
			}
			reserved := 0
			for _, ev := range evs {
				if ev.Kind == store.EventEffectReserved {
					reserved++
				}
			}
			if reserved != 1 {
				t.Errorf("%d reservations of the key, want 1", reserved)
			}

			// Without a key a lost answer is not asked again: it is the error.
			nc, nd := behind(t, direct, tok, 1)
			if _, err := nc.Begin(t.Context(), "billing.charge", json.RawMessage(`{"invoice_id":"inv_2","amount":100}`), "", 0); err == nil || len(nd.keys) != 1 {
				t.Errorf("a keyless begin whose answer was lost = %v after %d requests, want the error after 1", err, len(nd.keys))
			}

			// The key with another request is refused as the latch error.
			ctx := latch.WithRequestKey(t.Context(), "key-mismatch")
			if _, err := direct.Begin(ctx, "billing.charge", json.RawMessage(`{"invoice_id":"inv_3","amount":100}`), "", 0); err != nil {
				t.Fatal(err)
			}
			_, err = direct.Begin(ctx, "billing.charge", json.RawMessage(`{"invoice_id":"inv_4","amount":100}`), "", 0)
			var ke *latch.RequestKeyError
			if !errors.As(err, &ke) || ke.Reason != "request_key_other_action" || !errors.Is(err, latch.ErrRequestKeyMismatch) {
				t.Errorf("the key with other arguments: %v, want a *latch.RequestKeyError request_key_other_action", err)
			}
		})
	}
}

// serveToken is serve, also returning the agent token.
func serveToken(t *testing.T, backend string) (*client.Client, *latch.Guard, string) {
	t.Helper()
	g := openGuard(t, backend)
	s, err := server.New(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	tok, _, err := auth.CreateToken(t.Context(), g.Store().(store.TokenStore), &auth.NewToken{Kind: store.TokenAgent, Agent: "billing-worker"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return client.New("http://"+ln.Addr().String(), tok), g, tok
}
