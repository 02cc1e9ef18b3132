package webhook_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/latchhttp"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
	"github.com/latchkit/latch/webhook"
)

const testPolicy = `schema: latch.policy/v1
actions:
  shipping.ship:
    decision: allow
  payouts.paid:
    effect: "payout:{payout_id}"
    decision: allow
`

func openGuard(t *testing.T, backend string) *latch.Guard {
	t.Helper()
	pol, err := policy.Parse("latch.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: pol, StoreURL: testdb.URL(t, backend, "webhook")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func stripeVerifier(t *testing.T) webhook.Verifier {
	t.Helper()
	v, err := webhook.Stripe(&webhook.StripeConfig{Secrets: []string{stripeSecret}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// receiver serves h on 127.0.0.1.
func receiver(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

type answer struct {
	status int
	header http.Header
	body   string
}

// problemOf decodes a refusal's JSON body.
func (a answer) problem(t *testing.T) map[string]string {
	t.Helper()
	var p map[string]string
	if err := json.Unmarshal([]byte(a.body), &p); err != nil {
		t.Fatalf("answer body %q is not a JSON problem: %v", a.body, err)
	}
	return p
}

// deliver posts a Stripe event as Stripe would, signed now.
func deliver(t *testing.T, ctx context.Context, url, id string) answer {
	t.Helper()
	body, h := stripeDelivery(id)
	return post(t, ctx, url, body, h)
}

func post(t *testing.T, ctx context.Context, url, body string, h http.Header) answer {
	t.Helper()
	a, err := tryPost(ctx, url, body, h)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// tryPost is post for goroutines other than the test's, which may not call t.Fatal.
func tryPost(ctx context.Context, url, body string, h http.Header) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("POST %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}, nil
}

// stripeDelivery is the body and headers Stripe sends for event id, signed now.
func stripeDelivery(id string) (string, http.Header) {
	body := fmt.Sprintf(`{"id":%q,"type":"checkout.session.completed","data":{"object":{"order":"o_%s"}}}`, id, id)
	return body, http.Header{"Stripe-Signature": {stripeHeader(stripeSecret, time.Now(), body)}}
}

func effectState(t *testing.T, g *latch.Guard, key string) store.State {
	t.Helper()
	e, err := g.Store().Effect(t.Context(), key)
	if err != nil {
		t.Fatalf("Effect(%s): %v", key, err)
	}
	return e.State
}

// hangingServer reads each request in full and never answers: a downstream whose reply is lost.
func hangingServer(t *testing.T) (url string, requests *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	requests = &atomic.Int32{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err == nil && func() error { _, err := io.Copy(io.Discard, req.Body); return err }() == nil {
					requests.Add(1)
				}
				<-done
			}()
		}
	}()
	t.Cleanup(func() { close(done); ln.Close(); wg.Wait() })
	return "http://" + ln.Addr().String() + "/v1/shipments", requests
}

func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "http://" + ln.Addr().String() + "/v1/shipments"
}

// shipFunc is a webhook effect that creates a shipment downstream at *target through
// latchhttp, as a real handler would; runs counts its calls.
func shipFunc(target *atomic.Pointer[string], runs *atomic.Int32) webhook.Func {
	return func(ctx context.Context, ev *webhook.Event) (any, error) {
		runs.Add(1)
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, *target.Load(), strings.NewReader(string(ev.Body)))
		if err != nil {
			return nil, latch.NotExecuted(err)
		}
		req.Header.Set("Idempotency-Key", latch.IdempotencyToken(ctx))
		resp, err := latchhttp.Do(req)
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
		return map[string]string{"shipment": "shp_" + ev.ID}, nil
	}
}

// The three promises of the integration, on a real SQLite file and on Postgres.
func TestDeliveries(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend+"/redelivery after commit does not run again", func(t *testing.T) {
			t.Parallel()
			g := openGuard(t, backend)
			var downstream atomic.Int32
			up := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { downstream.Add(1) }))
			var target atomic.Pointer[string]
			target.Store(&up)
			var runs atomic.Int32
			h, err := webhook.Handler(&webhook.Config{Guard: g, Action: "shipping.ship", Verifier: stripeVerifier(t)}, shipFunc(&target, &runs))
			if err != nil {
				t.Fatal(err)
			}
			url := receiver(t, h)

			first := deliver(t, t.Context(), url, "evt_1")
			second := deliver(t, t.Context(), url, "evt_1")
			if first.status != 200 || second.status != 200 {
				t.Fatalf("answers = %d %q, %d %q; want 200 twice", first.status, first.body, second.status, second.body)
			}
			if want := `{"shipment":"shp_evt_1"}`; first.body != want || second.body != want {
				t.Errorf("bodies = %q, %q; want the result %q twice", first.body, second.body, want)
			}
			if first.header.Get(webhook.HeaderReplayed) != "" || second.header.Get(webhook.HeaderReplayed) != "true" {
				t.Errorf("Latch-Replayed = %q then %q, want \"\" then true", first.header.Get(webhook.HeaderReplayed), second.header.Get(webhook.HeaderReplayed))
			}
			if k := second.header.Get(webhook.HeaderEffectKey); k != "stripe:evt_1" {
				t.Errorf("Latch-Effect-Key = %q, want stripe:evt_1", k)
			}
			if r, d := runs.Load(), downstream.Load(); r != 1 || d != 1 {
				t.Errorf("effect ran %d times, downstream saw %d; want 1 and 1", r, d)
			}
		})

		t.Run(backend+"/lost reply is ambiguous, redelivery refused without running", func(t *testing.T) {
			t.Parallel()
			g := openGuard(t, backend)
			lost, lostRequests := hangingServer(t)
			var target atomic.Pointer[string]
			target.Store(&lost)
			var runs atomic.Int32
			h, err := webhook.Handler(&webhook.Config{Guard: g, Action: "shipping.ship", Verifier: stripeVerifier(t)}, shipFunc(&target, &runs))
			if err != nil {
				t.Fatal(err)
			}
			url := receiver(t, h)

			first := deliver(t, t.Context(), url, "evt_2")
			if first.status != http.StatusServiceUnavailable {
				t.Fatalf("first delivery = %d %q, want 503", first.status, first.body)
			}
			if p := first.problem(t); p["error"] != "outcome_unknown" || p["effect_key"] != "stripe:evt_2" || !strings.Contains(p["detail"], "latch resolve stripe:evt_2") {
				t.Errorf("first answer = %v, want ambiguous naming stripe:evt_2 and how to resolve it", p)
			}
			if s := effectState(t, g, "stripe:evt_2"); s != store.Ambiguous {
				t.Fatalf("effect is %s, want ambiguous", s)
			}
			up := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				t.Error("the redelivery reached the downstream")
			}))
			target.Store(&up) // healthy again: still, nothing may run
			second := deliver(t, t.Context(), url, "evt_2")
			if second.status != http.StatusServiceUnavailable {
				t.Fatalf("redelivery = %d %q, want 503", second.status, second.body)
			}
			if p := second.problem(t); p["error"] != "ambiguous" || p["effect_key"] != "stripe:evt_2" {
				t.Errorf("redelivery answer = %v, want ambiguous naming stripe:evt_2", p)
			}
			if r, d := runs.Load(), lostRequests.Load(); r != 1 || d != 1 {
				t.Errorf("effect ran %d times, downstream saw %d requests; want 1 and 1", r, d)
			}

			// A person finds the shipment was made and resolves it: the next redelivery is
			// answered 200 without running.
			if _, err := g.ResolveEffect(t.Context(), &store.ResolveRequest{Now: time.Now(), Key: "stripe:evt_2", To: store.Committed,
				By: "cli:ops", Result: json.RawMessage(`{"shipment":"shp_found"}`)}); err != nil {
				t.Fatal(err)
			}
			third := deliver(t, t.Context(), url, "evt_2")
			if third.status != 200 || third.body != `{"shipment":"shp_found"}` || runs.Load() != 1 {
				t.Errorf("after resolution = %d %q (ran %d), want 200 with the resolved result, not run", third.status, third.body, runs.Load())
			}
		})

		t.Run(backend+"/not executed is retried and runs once", func(t *testing.T) {
			t.Parallel()
			g := openGuard(t, backend)
			down := closedURL(t)
			var downstream atomic.Int32
			up := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				downstream.Add(1)
				w.WriteHeader(http.StatusCreated)
			}))
			var target atomic.Pointer[string]
			target.Store(&down)
			var runs atomic.Int32
			h, err := webhook.Handler(&webhook.Config{Guard: g, Action: "shipping.ship", Verifier: stripeVerifier(t)}, shipFunc(&target, &runs))
			if err != nil {
				t.Fatal(err)
			}
			url := receiver(t, h)

			first := deliver(t, t.Context(), url, "evt_3")
			if first.status != http.StatusInternalServerError || first.problem(t)["error"] != "not_executed" {
				t.Fatalf("first delivery = %d %q, want 500 not_executed", first.status, first.body)
			}
			if s := effectState(t, g, "stripe:evt_3"); s != store.Failed {
				t.Fatalf("effect is %s, want failed", s)
			}
			target.Store(&up)
			second := deliver(t, t.Context(), url, "evt_3")
			third := deliver(t, t.Context(), url, "evt_3")
			if second.status != 200 || third.status != 200 || third.header.Get(webhook.HeaderReplayed) != "true" {
				t.Errorf("redeliveries = %d, %d (replayed %q); want 200 run, 200 replayed", second.status, third.status, third.header.Get(webhook.HeaderReplayed))
			}
			if r, d := runs.Load(), downstream.Load(); r != 2 || d != 1 {
				t.Errorf("effect ran %d times, downstream created %d; want 2 runs and 1 shipment", r, d)
			}
		})
	}
}

func TestInProgress(t *testing.T) {
	t.Parallel()
	g := openGuard(t, "sqlite")
	started, release := make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	h, err := webhook.Handler(&webhook.Config{Guard: g, Action: "shipping.ship", Verifier: stripeVerifier(t), RetryAfter: 5 * time.Second},
		func(ctx context.Context, ev *webhook.Event) (any, error) {
			runs.Add(1)
			close(started)
			<-release
			return "shipped", nil
		})
	if err != nil {
		t.Fatal(err)
	}
	url := receiver(t, h)
	firstc, errc := make(chan answer, 1), make(chan error, 1)
	go func() {
		body, h := stripeDelivery("evt_4")
		a, err := tryPost(context.Background(), url, body, h)
		firstc <- a
		errc <- err
	}()
	<-started
	second := deliver(t, t.Context(), url, "evt_4")
	close(release)
	first := <-firstc
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if second.status != http.StatusConflict || second.problem(t)["error"] != "in_progress" || second.header.Get("Retry-After") != "5" {
		t.Errorf("concurrent delivery = %d %q (Retry-After %q), want 409 in_progress, Retry-After 5", second.status, second.body, second.header.Get("Retry-After"))
	}
	if first.status != 200 || first.body != `"shipped"` || runs.Load() != 1 {
		t.Errorf("first delivery = %d %q, ran %d; want 200 \"shipped\", 1 run", first.status, first.body, runs.Load())
	}
}

// The sender giving up does not cancel the effect: it finishes and commits.
func TestSenderHangsUp(t *testing.T) {
	t.Parallel()
	g := openGuard(t, "sqlite")
	started := make(chan struct{})
	reqCtx := make(chan context.Context, 1) // the request's own context, as net/http gives it
	ctxErr := make(chan error, 1)
	h, err := webhook.Handler(&webhook.Config{Guard: g, Action: "shipping.ship", Verifier: stripeVerifier(t)},
		func(ctx context.Context, ev *webhook.Event) (any, error) {
			close(started)
			rctx := <-reqCtx
			select {
			case <-rctx.Done(): // the server saw the sender hang up
			case <-time.After(10 * time.Second):
				ctxErr <- errors.New("the server never saw the sender hang up")
				return nil, latch.NotExecuted(errors.New("test setup"))
			}
			ctxErr <- ctx.Err()
			return "shipped", ctx.Err()
		})
	if err != nil {
		t.Fatal(err)
	}
	url := receiver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqCtx <- r.Context()
		h.ServeHTTP(w, r)
	}))
	ctx, cancel := context.WithCancel(t.Context())
	body := `{"id":"evt_5","type":"checkout.session.completed"}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Stripe-Signature", stripeHeader(stripeSecret, time.Now(), body))
	sent := make(chan error, 1)
	go func() {
		_, err := http.DefaultClient.Do(req)
		sent <- err
	}()
	<-started
	cancel() // the sender hangs up while the effect runs
	if err := <-sent; !errors.Is(err, context.Canceled) {
		t.Fatalf("sender = %v, want it to have given up", err)
	}
	if err := <-ctxErr; err != nil {
		t.Fatalf("the effect's context: %v; want it alive after the sender hung up", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for effectStateOrNone(t, g, "stripe:evt_5") != store.Committed {
		if time.Now().After(deadline) {
			t.Fatalf("effect is %s, want committed", effectStateOrNone(t, g, "stripe:evt_5"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if a := deliver(t, t.Context(), url, "evt_5"); a.status != 200 || a.body != `"shipped"` {
		t.Errorf("redelivery = %d %q, want 200 \"shipped\"", a.status, a.body)
	}
}

func effectStateOrNone(t *testing.T, g *latch.Guard, key string) store.State {
	t.Helper()
	e, err := g.Store().Effect(t.Context(), key)
	if errors.Is(err, store.ErrNotFound) {
		return "none"
	}
	if err != nil {
		t.Fatal(err)
	}
	return e.State
}

// The effect's own timeout bounds it: an effect still running then is ambiguous.
func TestTimeoutBoundsTheEffect(t *testing.T) {
	t.Parallel()
	g := openGuard(t, "sqlite")
	h, err := webhook.Handler(&webhook.Config{Guard: g, Action: "shipping.ship", Verifier: stripeVerifier(t), Timeout: time.Second},
		func(ctx context.Context, ev *webhook.Event) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
	if err != nil {
		t.Fatal(err)
	}
	a := deliver(t, t.Context(), receiver(t, h), "evt_6")
	if a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, "deadline exceeded") {
		t.Errorf("answer = %d %q, want 503 naming the deadline", a.status, a.body)
	}
	if s := effectState(t, g, "stripe:evt_6"); s != store.Ambiguous {
		t.Errorf("effect is %s, want ambiguous", s)
	}
}

// A reconcile hook settles an ambiguous event at its next redelivery: it asks the downstream,
// and the redelivery is answered from what the hook found, without running the effect again.
func TestReconcileOnRedelivery(t *testing.T) {
	t.Parallel()
	g := openGuard(t, "sqlite")
	var runs, asked atomic.Int32
	shipped := map[string]string{} // the downstream's own record, keyed by event
	var mu sync.Mutex
	h, err := webhook.Handler(&webhook.Config{Guard: g, Action: "shipping.ship", Verifier: stripeVerifier(t),
		Options: &latch.Options{Reconcile: func(ctx context.Context, a *latch.Attempt) (latch.Outcome, any, error) {
			asked.Add(1)
			var args struct {
				EventID string `json:"event_id"`
			}
			if err := json.Unmarshal(a.Arguments, &args); err != nil {
				return latch.OutcomeUnknown, nil, err
			}
			mu.Lock()
			defer mu.Unlock()
			if id, ok := shipped[args.EventID]; ok {
				return latch.OutcomeCommitted, map[string]string{"shipment": id}, nil
			}
			return latch.OutcomeNotExecuted, nil, nil
		}}},
		func(ctx context.Context, ev *webhook.Event) (any, error) {
			runs.Add(1)
			mu.Lock()
			shipped[ev.ID] = "shp_" + ev.ID // it shipped...
			mu.Unlock()
			return nil, errors.New("read tcp: connection reset by peer") // ...and the answer was lost
		})
	if err != nil {
		t.Fatal(err)
	}
	url := receiver(t, h)
	if a := deliver(t, t.Context(), url, "evt_13"); a.status != 503 {
		t.Fatalf("first delivery = %d %q, want 503", a.status, a.body)
	}
	a := deliver(t, t.Context(), url, "evt_13")
	if a.status != 200 || a.body != `{"shipment":"shp_evt_13"}` || a.header.Get(webhook.HeaderReplayed) != "true" {
		t.Errorf("redelivery = %d %q (replayed %q), want 200 with what the hook found", a.status, a.body, a.header.Get(webhook.HeaderReplayed))
	}
	if runs.Load() != 1 || asked.Load() != 1 {
		t.Errorf("effect ran %d times, hook asked %d times; want 1 and 1", runs.Load(), asked.Load())
	}
}

// A panicking effect is recorded ambiguous and answered 503 naming it; the redelivery does not run.
func TestPanic(t *testing.T) {
	t.Parallel()
	g := openGuard(t, "sqlite")
	var runs atomic.Int32
	h, err := webhook.Handler(&webhook.Config{Guard: g, Action: "shipping.ship", Verifier: stripeVerifier(t)},
		func(ctx context.Context, ev *webhook.Event) (any, error) {
			runs.Add(1)
			panic("nil map in the shipping client")
		})
	if err != nil {
		t.Fatal(err)
	}
	url := receiver(t, h)
	// The first delivery's own outcome is unknown; the second meets that ambiguous attempt.
	for i, want := range []string{"outcome_unknown", "ambiguous"} {
		a := deliver(t, t.Context(), url, "evt_12")
		if p := a.problem(t); a.status != 503 || p["error"] != want || p["effect_key"] != "stripe:evt_12" {
			t.Errorf("delivery %d = %d %q, want 503 %s naming stripe:evt_12", i+1, a.status, a.body, want)
		}
	}
	if runs.Load() != 1 || effectState(t, g, "stripe:evt_12") != store.Ambiguous {
		t.Errorf("ran %d times, effect %s; want 1 run, ambiguous", runs.Load(), effectState(t, g, "stripe:evt_12"))
	}
}

// Refused deliveries run nothing and write nothing.
func TestRefusals(t *testing.T) {
	t.Parallel()
	g := openGuard(t, "sqlite")
	var runs atomic.Int32
	h, err := webhook.Handler(&webhook.Config{Guard: g, Action: "shipping.ship", Verifier: stripeVerifier(t), MaxBody: 1024},
		func(ctx context.Context, ev *webhook.Event) (any, error) { runs.Add(1); return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	url := receiver(t, h)
	body := `{"id":"evt_7","type":"x"}`
	big := `{"id":"evt_8","pad":"` + strings.Repeat("x", 2000) + `"}`
	signed := func(b string, at time.Time) http.Header {
		return http.Header{"Stripe-Signature": {stripeHeader(stripeSecret, at, b)}}
	}
	cases := []struct {
		name   string
		method string
		body   string
		header http.Header
		chunk  bool // send without a Content-Length
		status int
		reason string
	}{
		{"GET", http.MethodGet, "", nil, false, 405, "method_not_allowed"},
		{"no signature", "POST", body, nil, false, 401, "signature_missing"},
		{"bad signature", "POST", body, http.Header{"Stripe-Signature": {stripeHeader("whsec_wrong", time.Now(), body)}}, false, 401, "signature_invalid"},
		{"stale timestamp", "POST", body, signed(body, time.Now().Add(-time.Hour)), false, 401, "timestamp_outside_tolerance"},
		{"too large", "POST", big, signed(big, time.Now()), false, 413, "body_too_large"},
		{"too large, no length", "POST", big, signed(big, time.Now()), true, 413, "body_too_large"},
		{"no event id", "POST", `{"type":"x"}`, signed(`{"type":"x"}`, time.Now()), false, 400, "event_id_invalid"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r io.Reader = strings.NewReader(tc.body)
			if tc.chunk {
				r = io.MultiReader(r) // hides the length: sent chunked
			}
			req, _ := http.NewRequestWithContext(t.Context(), tc.method, url, r)
			for k, v := range tc.header {
				req.Header[k] = v
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var p map[string]string
			_ = json.Unmarshal(b, &p)
			if resp.StatusCode != tc.status || p["error"] != tc.reason || p["detail"] == "" {
				t.Errorf("%s = %d %s, want %d %s with a detail", tc.name, resp.StatusCode, b, tc.status, tc.reason)
			}
		})
	}
	if runs.Load() != 0 {
		t.Errorf("effect ran %d times, want 0", runs.Load())
	}
	head, err := g.Store().Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if head.Seq != 0 {
		t.Errorf("%d receipts written, want none: a refused delivery writes nothing", head.Seq)
	}
}

// Arguments key the effect by a field of the signed body: two events about one payout are one effect.
func TestArgumentsKeyTheEffect(t *testing.T) {
	t.Parallel()
	g := openGuard(t, "sqlite")
	var runs atomic.Int32
	h, err := webhook.Handler(&webhook.Config{Guard: g, Action: "payouts.paid", Verifier: stripeVerifier(t),
		Arguments: func(ev *webhook.Event) (map[string]any, error) {
			var body struct {
				Data struct {
					Object struct {
						ID     string `json:"id"`
						Amount int64  `json:"amount"`
					} `json:"object"`
				} `json:"data"`
			}
			if err := json.Unmarshal(ev.Body, &body); err != nil || body.Data.Object.ID == "" {
				return nil, errors.New("no data.object.id")
			}
			return map[string]any{"payout_id": body.Data.Object.ID, "amount": body.Data.Object.Amount}, nil
		}},
		func(ctx context.Context, ev *webhook.Event) (any, error) { runs.Add(1); return ev.ID, nil })
	if err != nil {
		t.Fatal(err)
	}
	url := receiver(t, h)
	send := func(id string, amount int) answer {
		body := fmt.Sprintf(`{"id":%q,"type":"payout.paid","data":{"object":{"id":"po_9","amount":%d}}}`, id, amount)
		return post(t, t.Context(), url, body, http.Header{"Stripe-Signature": {stripeHeader(stripeSecret, time.Now(), body)}})
	}
	a, b := send("evt_a", 500), send("evt_b", 500)
	if a.status != 200 || b.status != 200 || b.body != `"evt_a"` || b.header.Get(webhook.HeaderEffectKey) != "payout:po_9" || runs.Load() != 1 {
		t.Errorf("answers = %d %q, %d %q (key %q), ran %d; want the second replaying evt_a's result on payout:po_9, 1 run",
			a.status, a.body, b.status, b.body, b.header.Get(webhook.HeaderEffectKey), runs.Load())
	}
	// The same payout with another amount is not the same action: a key conflict, not run.
	if c := send("evt_c", 900); c.status != http.StatusConflict || c.problem(t)["error"] != "key_conflict" || runs.Load() != 1 {
		t.Errorf("another amount on payout:po_9 = %d %q, ran %d; want 409 key_conflict, not run", c.status, c.body, runs.Load())
	}
	bad := `{"id":"evt_c","type":"payout.paid"}`
	if c := post(t, t.Context(), url, bad, http.Header{"Stripe-Signature": {stripeHeader(stripeSecret, time.Now(), bad)}}); c.status != 400 {
		t.Errorf("an event the hook cannot read = %d %q, want 400", c.status, c.body)
	}
}

func TestMiddleware(t *testing.T) {
	t.Parallel()
	g := openGuard(t, "sqlite")
	mw, err := webhook.Middleware(&webhook.Config{Guard: g, Action: "shipping.ship", Verifier: stripeVerifier(t)})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	fail := atomic.Bool{}
	fail.Store(true)
	url := receiver(t, mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		ev := webhook.EventFrom(r.Context())
		b, _ := io.ReadAll(r.Body)
		if ev == nil || string(b) != string(ev.Body) {
			t.Errorf("handler sees event %v and body %q", ev, b)
		}
		if fail.Load() {
			webhook.NotExecuted(r, errors.New("warehouse closed"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"shipment":"shp_10"}`)
	})))
	first := deliver(t, t.Context(), url, "evt_10")
	if first.status != 500 || !strings.Contains(first.body, "warehouse closed") {
		t.Errorf("first = %d %q, want 500 not_executed naming the cause", first.status, first.body)
	}
	fail.Store(false)
	second := deliver(t, t.Context(), url, "evt_10")
	third := deliver(t, t.Context(), url, "evt_10")
	for i, a := range []answer{second, third} {
		if a.status != 201 || a.body != `{"shipment":"shp_10"}` || a.header.Get("Content-Type") != "application/json" {
			t.Errorf("delivery %d = %d %q (%s), want the handler's 201 JSON", i+2, a.status, a.body, a.header.Get("Content-Type"))
		}
	}
	if third.header.Get(webhook.HeaderReplayed) != "true" || runs.Load() != 2 {
		t.Errorf("third replayed %q, handler ran %d times; want replayed, 2 runs", third.header.Get(webhook.HeaderReplayed), runs.Load())
	}

	// A handler answering 5xx after acting may have acted: ambiguous.
	url2 := receiver(t, mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "downstream timeout", http.StatusBadGateway)
	})))
	if a := deliver(t, t.Context(), url2, "evt_11"); a.status != 503 || !strings.Contains(a.body, "502") {
		t.Errorf("handler 502 = %d %q, want 503 ambiguous naming the 502", a.status, a.body)
	}
}

func TestGitHubDelivery(t *testing.T) {
	t.Parallel()
	g := openGuard(t, "sqlite")
	v, err := webhook.GitHub(&webhook.GitHubConfig{Secrets: []string{"gh-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	h, err := webhook.Handler(&webhook.Config{Guard: g, Action: "shipping.ship", Verifier: v},
		func(ctx context.Context, ev *webhook.Event) (any, error) { runs.Add(1); return ev.Type, nil })
	if err != nil {
		t.Fatal(err)
	}
	url := receiver(t, h)
	body := `{"action":"closed","number":42}`
	hdr := http.Header{"X-Hub-Signature-256": {"sha256=" + hmacHex("gh-secret", body)},
		"X-Github-Delivery": {"72d3162e-cc78-11e3-81ab-4c9367dc0958"}, "X-Github-Event": {"pull_request"}}
	a, b := post(t, t.Context(), url, body, hdr), post(t, t.Context(), url, body, hdr)
	if a.status != 200 || b.status != 200 || b.body != `"pull_request"` || runs.Load() != 1 ||
		b.header.Get(webhook.HeaderEffectKey) != "github:72d3162e-cc78-11e3-81ab-4c9367dc0958" {
		t.Errorf("answers = %d, %d %q (key %q), ran %d; want one run and a replay", a.status, b.status, b.body, b.header.Get(webhook.HeaderEffectKey), runs.Load())
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	pol, err := policy.Parse("latch.yaml", []byte(`schema: latch.policy/v1
actions:
  needs.amount:
    arguments:
      event_id: { type: string }
      amount: { type: integer }
    decision: allow
  closed.set:
    arguments:
      event_id: { type: string }
      additional: false
    decision: allow
  id.as.integer:
    arguments:
      event_id: { type: integer }
    decision: allow
  fits:
    arguments:
      event_id: { type: string }
      event_type: { type: string }
      note: { type: string, optional: true }
      additional: false
    decision: allow
`))
	if err != nil {
		t.Fatal(err)
	}
	g2, err := latch.Open(t.Context(), &latch.Config{Policy: pol, StoreURL: testdb.URL(t, "sqlite", "webhook")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g2.Close() })
	g := openGuard(t, "sqlite")
	v := stripeVerifier(t)
	fn := func(context.Context, *webhook.Event) (any, error) { return nil, nil }
	for _, c := range []*webhook.Config{
		nil,
		{Action: "shipping.ship", Verifier: v},
		{Guard: g, Verifier: v},
		{Guard: g, Action: "shipping.ship"},
		{Guard: g, Action: "not.listed", Verifier: v},
		{Guard: g, Action: "shipping.ship", Verifier: v, MaxBody: -1},
		// Declarations that would refuse every delivery's event_id and event_type.
		{Guard: g2, Action: "needs.amount", Verifier: v},
		{Guard: g2, Action: "closed.set", Verifier: v},
		{Guard: g2, Action: "id.as.integer", Verifier: v},
	} {
		if _, err := webhook.Handler(c, fn); err == nil {
			t.Errorf("Handler(%+v) = nil error, want a refusal", c)
		}
	}
	for _, c := range []*webhook.Config{
		{Guard: g2, Action: "fits", Verifier: v},
		// A hook gives the arguments: the declarations are its business.
		{Guard: g2, Action: "needs.amount", Verifier: v, Arguments: func(*webhook.Event) (map[string]any, error) { return nil, nil }},
	} {
		if _, err := webhook.Handler(c, fn); err != nil {
			t.Errorf("Handler(%s) = %v, want it accepted", c.Action, err)
		}
	}
}
