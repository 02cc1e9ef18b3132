package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/metrics"
	"github.com/latchkit/latch/notify"
	"github.com/latchkit/latch/policy"
)

const testPolicy = `
schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    lease: 1s
    rules:
      - when: { amount_lte: 50000 }
        decision: allow
      - decision: approve
`

var secret = []byte("s3cret-for-tests")

// receiver is a real HTTP server on 127.0.0.1 that verifies each alert's signature.
type receiver struct {
	mu      sync.Mutex
	alerts  []notify.Alert
	bad     []error
	headers []http.Header
	url     string
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		err := notify.Verify(secret, req.Header.Get(notify.HeaderTimestamp), req.Header.Get(notify.HeaderSignature), body, time.Now(), 5*time.Minute)
		var a notify.Alert
		if err == nil {
			err = json.Unmarshal(body, &a)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil {
			r.bad = append(r.bad, err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		r.alerts = append(r.alerts, a)
		r.headers = append(r.headers, req.Header.Clone())
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func (r *receiver) wait(t *testing.T, n int) []notify.Alert {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		got := append([]notify.Alert(nil), r.alerts...)
		bad := append([]error(nil), r.bad...)
		r.mu.Unlock()
		if len(bad) > 0 {
			t.Fatalf("receiver refused alerts: %v", bad)
		}
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("receiver got %d alerts, want %d: %+v", len(got), n, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func open(t *testing.T, sinks ...latch.Sink) *latch.Guard {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: "sqlite:" + filepath.Join(t.TempDir(), "state.db"), Sinks: sinks})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func newNotifier(t *testing.T, cfg notify.Config) *notify.Notifier {
	t.Helper()
	n, err := notify.New(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func call(g *latch.Guard, invoice string, amount int, fn latch.Executor) error {
	ctx := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "billing-worker"})
	args, _ := json.Marshal(map[string]any{"invoice_id": invoice, "amount": amount})
	_, err := g.Execute(ctx, &latch.Call{Action: "billing.charge", Arguments: args}, fn)
	return err
}

// TestAlerts: an approval request, an unknown outcome and a lapsed lease each reach a real
// receiver as one signed alert of their kind; allowed and committed calls alert nobody.
func TestAlerts(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	n := newNotifier(t, notify.Config{URLs: []string{r.url}, Secret: secret})
	g := open(t, n)
	ok := func(context.Context, json.RawMessage) (any, error) { return "ch", nil }
	if err := call(g, "inv_1", 100, ok); err != nil {
		t.Fatal(err)
	}
	if err := call(g, "inv_2", 90000, ok); !errors.Is(err, latch.ErrApprovalRequired) {
		t.Fatalf("big charge = %v", err)
	}
	if err := call(g, "inv_3", 100, func(context.Context, json.RawMessage) (any, error) { return nil, errors.New("read timed out") }); !errors.Is(err, latch.ErrAmbiguous) {
		t.Fatalf("lost reply = %v", err)
	}
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker"})
	if _, err := g.Begin(ctx, &latch.Call{Action: "billing.charge", Arguments: []byte(`{"invoice_id":"inv_4","amount":100}`)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // the lease lapses; the holder never reports
	if rep, err := g.Sweep(t.Context()); err != nil || len(rep.Lapsed) != 1 {
		t.Fatalf("Sweep() = %+v, %v", rep, err)
	}
	r.wait(t, 3)
	time.Sleep(100 * time.Millisecond) // room for a fourth, duplicate alert to arrive
	got := r.wait(t, 3)
	if len(got) != 3 {
		t.Fatalf("got %d alerts, want 3: %+v", len(got), got)
	}
	want := []struct{ kind, key string }{
		{notify.KindApprovalRequested, "charge:inv_2"},
		{notify.KindEffectAmbiguous, "charge:inv_3"},
		{notify.KindLeaseLapsed, "charge:inv_4"},
	}
	for i, w := range want {
		a := got[i]
		if a.Alert != w.kind || a.EffectKey != w.key || a.Action != "billing.charge" || a.EventID == 0 || a.Text == "" {
			t.Errorf("alert %d = %+v, want %s on %s", i, a, w.kind, w.key)
		}
		if h := r.headers[i]; h.Get(notify.HeaderAlert) != w.kind || h.Get(notify.HeaderDelivery) == "" {
			t.Errorf("alert %d headers = %v", i, h)
		}
	}
	if got[0].ApprovalID == "" {
		t.Errorf("approval alert has no approval id: %+v", got[0])
	}
}

// TestVerify: a signature binds the body and the timestamp; a stale timestamp is refused.
func TestVerify(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"alert":"lease_lapsed"}`)
	sig := notify.Sign(secret, now.Unix(), body)
	ts := "1800000000"
	for _, c := range []struct {
		name    string
		secret  []byte
		ts, sig string
		body    []byte
		at      time.Time
		want    error
	}{
		{"valid", secret, ts, sig, body, now, nil},
		{"altered body", secret, ts, sig, []byte(`{"alert":"approval_requested"}`), now, notify.ErrBadSignature},
		{"other secret", []byte("other"), ts, sig, body, now, notify.ErrBadSignature},
		{"moved timestamp", secret, "1800000001", sig, body, now, notify.ErrBadSignature},
		{"replayed later", secret, ts, sig, body, now.Add(6 * time.Minute), notify.ErrStale},
		{"not a number", secret, "x", sig, body, now, notify.ErrBadSignature},
	} {
		err := notify.Verify(c.secret, c.ts, c.sig, c.body, c.at, 5*time.Minute)
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: Verify = %v, want %v", c.name, err, c.want)
		}
	}
}

// TestFailingReceiver: a receiver answering 500 gets each alert Attempts times, with backoff,
// then the alert is given up and counted; calls are not held up.
func TestFailingReceiver(t *testing.T) {
	t.Parallel()
	var posts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		posts.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	m, err := metrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	n := newNotifier(t, notify.Config{URLs: []string{srv.URL}, Secret: secret, Attempts: 3, Backoff: 10 * time.Millisecond, Failures: m})
	g := open(t, n, m)
	if err := call(g, "inv_9", 90000, nil); !errors.Is(err, latch.ErrApprovalRequired) {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for failures(t, m, "failed") < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := failures(t, m, "failed"); got != 1 {
		t.Errorf("alerts given up = %v, want 1", got)
	}
	if got := posts.Load(); got != 3 {
		t.Errorf("receiver got %d posts, want 3 (the attempts)", got)
	}
}

// TestSlowReceiver: a receiver that never answers holds no call up: calls finish while it
// hangs, its queue fills, and what does not fit is dropped and counted.
func TestSlowReceiver(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-release:
		case <-req.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	m, err := metrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	n := newNotifier(t, notify.Config{URLs: []string{srv.URL}, Secret: secret, QueueSize: 2, Timeout: time.Minute, Failures: m})
	g := open(t, n, m)
	const calls = 20
	done := make(chan error, 1)
	go func() {
		for i := range calls {
			if err := call(g, "big_"+string(rune('a'+i)), 90000, nil); !errors.Is(err, latch.ErrApprovalRequired) {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("calls are held up by a receiver that never answers")
	}
	// One alert in flight, two queued: the rest are dropped.
	deadline := time.Now().Add(10 * time.Second)
	for failures(t, m, "dropped") < calls-3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := failures(t, m, "dropped"); got != calls-3 {
		t.Errorf("alerts dropped = %v, want %d", got, calls-3)
	}
}

func failures(t *testing.T, m *metrics.Sink, kind string) float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "latch_notify_failures_total" {
			continue
		}
		for _, mt := range f.GetMetric() {
			if mt.GetLabel()[0].GetValue() == kind {
				return mt.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestSlackFormat: the slack body is {"text": …}.
func TestSlackFormat(t *testing.T) {
	t.Parallel()
	got := make(chan map[string]any, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var v map[string]any
		_ = json.NewDecoder(req.Body).Decode(&v)
		got <- v
	}))
	defer srv.Close()
	n := newNotifier(t, notify.Config{URLs: []string{srv.URL}, Format: notify.FormatSlack})
	g := open(t, n)
	if err := call(g, "inv_5", 90000, nil); !errors.Is(err, latch.ErrApprovalRequired) {
		t.Fatal(err)
	}
	select {
	case v := <-got:
		text, _ := v["text"].(string)
		if want := "latch: Approval requested for `billing.charge` (`"; len(v) != 1 || !strings.HasPrefix(text, want) {
			t.Errorf("slack body = %v", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no slack post")
	}
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range []notify.Config{
		{},
		{URLs: []string{"http://127.0.0.1:1/x"}}, // json without a secret
		{URLs: []string{"ftp://example.com"}, Secret: secret},                       // not http
		{URLs: []string{"http://127.0.0.1:1/x"}, Secret: secret, Format: "teams"},   // unknown format
		{URLs: []string{"http://127.0.0.1:1/x"}, Secret: secret, BudgetShare: 1.5},  // more than the limit
		{URLs: []string{"http://127.0.0.1:1/x"}, Secret: secret, BudgetShare: -0.1}, // negative
	} {
		if n, err := notify.New(&c); err == nil {
			n.Close()
			t.Errorf("New(%+v) = nil error", c)
		}
	}
}

// TestSlackEscapesAgentText: an effect key is rendered from the agent's arguments. In a Slack
// alert it must show as typed — never mention @channel, ping a user, disguise a link, format the
// message or carry hidden characters — and in the JSON document's text it is marked.
func TestSlackEscapesAgentText(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, invoice, slack, json string
	}{
		{"channel mention", "<!channel>", "`charge:&lt;!channel&gt;`", "charge:<!channel>"},
		{"user mention", "<@U123>", "`charge:&lt;@U123&gt;`", "charge:<@U123>"},
		{"disguised link", "<https://evil.example|pay:inv88>", "`charge:&lt;https://evil.example|pay:inv88&gt;`", "charge:<https://evil.example|pay:inv88>"},
		{"ampersand", "a&amp;b", "`charge:a&amp;amp;b`", "charge:a&amp;b"},
		{"bold and italic", "*bold*_it_~s~", "`charge:*bold*_it_~s~`", "charge:*bold*_it_~s~"},
		{"backticks", "`x` *y*", "`\"charge:\\x60x\\x60 *y*\"`", "\"charge:`x` *y*\""},
		{"bidi override", "inv\u202e88", "`\"charge:inv\\u202e88\"`", "\"charge:inv\\u202e88\""},
		{"zero width", "inv\u200b88", "`\"charge:inv\\u200b88\"`", "\"charge:inv\\u200b88\""},
		{"escape sequence", "inv\x1b[31m88", "`\"charge:inv\\x1b[31m88\"`", "\"charge:inv\\x1b[31m88\""},
		{"line break and quote", "x\n> *all*", "`\"charge:x\\n&gt; *all*\"`", "\"charge:x\\n> *all*\""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			slack := make(chan string, 4)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				var v map[string]string
				_ = json.NewDecoder(req.Body).Decode(&v)
				slack <- v["text"]
			}))
			t.Cleanup(srv.Close)
			r := newReceiver(t)
			n := newNotifier(t, notify.Config{URLs: []string{srv.URL}, Format: notify.FormatSlack})
			j := newNotifier(t, notify.Config{URLs: []string{r.url}, Secret: secret})
			g := open(t, n, j)
			lost := func(context.Context, json.RawMessage) (any, error) { return nil, errors.New("read timed out") }
			if err := call(g, tc.invoice, 100, lost); !errors.Is(err, latch.ErrAmbiguous) {
				t.Fatalf("call(%q) = %v, want ErrAmbiguous", tc.invoice, err)
			}
			var text string
			select {
			case text = <-slack:
			case <-time.After(10 * time.Second):
				t.Fatal("no slack post")
			}
			want := "latch: Outcome unknown: effect " + tc.slack + " of `billing.charge` is ambiguous; retries are refused until someone runs latch resolve"
			if text != want {
				t.Errorf("slack text =\n%q\nwant\n%q", text, want)
			}
			a := r.wait(t, 1)[0]
			if want := "Outcome unknown: effect " + tc.json + " of billing.charge is ambiguous; retries are refused until someone runs latch resolve"; a.Text != want {
				t.Errorf("json text =\n%q\nwant\n%q", a.Text, want)
			}
			if a.EffectKey != "charge:"+tc.invoice {
				t.Errorf("json effect_key = %q, want the key as it is", a.EffectKey)
			}
		})
	}
}
