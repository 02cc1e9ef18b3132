package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/auth"
	"github.com/latchkit/latch/notify"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/server"
	"github.com/latchkit/latch/store"
)

// fakeSlack is Slack as latch meets it, on 127.0.0.1: it takes the messages the notifier
// posts to an incoming webhook and the outcomes latch posts to a response_url, and it sends
// interactivity requests signed as Slack documents (v0 HMAC-SHA256 of "v0:ts:body" keyed with
// the app's signing secret, in X-Slack-Signature with X-Slack-Request-Timestamp).
type fakeSlack struct {
	t      *testing.T
	srv    *httptest.Server
	secret []byte

	mu        sync.Mutex
	webhook   []map[string]any // bodies posted to the incoming webhook
	responses []map[string]any // bodies posted to a response_url
	n         int
}

func newFakeSlack(t *testing.T, secret string) *fakeSlack {
	t.Helper()
	f := &fakeSlack{t: t, secret: []byte(secret)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Errorf("fake Slack: %s %s: body is not JSON: %v\n%s", r.Method, r.URL.Path, err, raw)
			w.WriteHeader(400)
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case strings.HasPrefix(r.URL.Path, "/services/"):
			f.webhook = append(f.webhook, m)
		case strings.HasPrefix(r.URL.Path, "/actions/"):
			f.responses = append(f.responses, m)
		default:
			t.Errorf("fake Slack: post to %s", r.URL.Path)
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeSlack) webhookURL() string { return f.srv.URL + "/services/T0FAKE/B0FAKE/xyzzy" }

// responsePrefix is what latch is told a response_url starts with.
func (f *fakeSlack) responsePrefix() string { return f.srv.URL + "/actions/" }

// click is the interactivity request of user (of team) clicking actionID on the message of
// request id, signed at ts with secret.
func (f *fakeSlack) click(user, team, actionID, id string, ts time.Time, secret []byte) *http.Request {
	f.mu.Lock()
	f.n++
	n := f.n
	f.mu.Unlock()
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "api_app_id": "A0FAKE", "trigger_id": "1.2.3." + strconv.Itoa(n),
		"user":         map[string]any{"id": user, "username": "someone", "team_id": team},
		"team":         map[string]any{"id": team, "domain": "example"},
		"container":    map[string]any{"type": "message", "message_ts": "1700000000.000100", "channel_id": "C0FAKE"},
		"response_url": f.srv.URL + "/actions/" + team + "/" + strconv.Itoa(n) + "/token",
		"actions": []any{map[string]any{"type": "button", "action_id": actionID, "block_id": "latch_answer",
			"value": id, "action_ts": strconv.FormatInt(ts.Unix(), 10) + ".000001"}},
	})
	body := "payload=" + url.QueryEscape(string(payload))
	req, _ := http.NewRequest("POST", "/v1/slack/interactions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set(server.SlackHeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(server.SlackHeaderSignature, server.SlackSign(secret, ts.Unix(), []byte(body)))
	return req
}

// send sends req (a click) to the latch server at base, again as often as it is called.
func (f *fakeSlack) send(base string, req *http.Request) *response {
	f.t.Helper()
	body, _ := io.ReadAll(req.Body)
	req.Body = io.NopCloser(bytes.NewReader(body))
	u, _ := url.Parse(base + req.URL.Path)
	out := req.Clone(f.t.Context())
	out.URL, out.Host, out.RequestURI = u, u.Host, ""
	out.Body, out.GetBody, out.ContentLength = io.NopCloser(bytes.NewReader(body)), nil, int64(len(body))
	resp, err := http.DefaultClient.Do(out)
	if err != nil {
		f.t.Fatalf("click: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := &response{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &r.body)
	}
	return r
}

// waitFor waits until n posts of a kind arrived, and returns them.
func (f *fakeSlack) waitFor(what string, n int) []map[string]any {
	f.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		f.mu.Lock()
		list := f.webhook
		if what == "responses" {
			list = f.responses
		}
		got := append([]map[string]any(nil), list...)
		f.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("fake Slack: %d %s, want %d", len(got), what, n)
		}
	}
}

// slackServer is a latch server with the Slack endpoint on, whose guard's notifier posts
// approval messages with buttons to fake's webhook.
func slackServer(t *testing.T, backend, policyDoc string, fake *fakeSlack, sc *server.SlackConfig, log *slog.Logger) *srv {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(policyDoc))
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}
	n, err := notify.New(&notify.Config{URLs: []string{fake.webhookURL()}, Format: notify.FormatSlack, SlackButtons: true, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("close the notifier: %v", err)
		}
	})
	u := storeURL(t, backend)
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: u, Now: c.Now, Sinks: []latch.Sink{n}})
	if err != nil {
		t.Fatal(err)
	}
	n.UseGuard(g)
	var closeOnce sync.Once
	closeGuard := func() { closeOnce.Do(func() { g.Close() }) }
	t.Cleanup(closeGuard)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s, err := server.New(g, &server.Config{Now: c.Now, Slack: sc, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := &srv{t: t, url: "http://" + ln.Addr().String(), g: g, clock: c, cancel: cancel, done: make(chan error, 1), closeGuard: closeGuard, storeURL: u}
	go func() { out.done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-out.done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	mk := func(req *auth.NewToken) string {
		secret, _, err := auth.CreateToken(t.Context(), g.Store().(store.TokenStore), req, c.Now())
		if err != nil {
			t.Fatal(err)
		}
		return secret
	}
	out.alice = mk(&auth.NewToken{Kind: store.TokenAgent, Agent: "billing-worker"})
	out.approver = mk(&auth.NewToken{Kind: store.TokenApprover, Approver: "carol"})
	return out
}

const slackSecret = "8f742231b10e8888abcd99yyyzzz85a5"

// mrkdwn is every mrkdwn and plain text of a Slack message, in order: what a person reads.
func mrkdwn(m map[string]any) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if t, ok := x["text"].(string); ok {
				out = append(out, t)
			}
			for k, v := range x {
				if k != "text" || !isString(v) {
					walk(v)
				}
			}
		case []any:
			for _, v := range x {
				walk(v)
			}
		}
	}
	walk(m)
	return out
}

func isString(v any) bool { _, ok := v.(string); return ok }

// buttons are the action_id → value of a message's buttons.
func buttons(m map[string]any) map[string]string {
	out := map[string]string{}
	blocks, _ := m["blocks"].([]any)
	for _, b := range blocks {
		b := b.(map[string]any)
		if b["type"] != "actions" {
			continue
		}
		for _, e := range b["elements"].([]any) {
			e := e.(map[string]any)
			out[e["action_id"].(string)] = e["value"].(string)
		}
	}
	return out
}

// TestSlackApproveEndToEnd: a request over the limit is posted to Slack as a Block Kit message
// with Approve and Deny buttons and its arguments in their display form, an agent's text
// escaped so it cannot mention or link; a mapped Slack user's signed click grants it through
// the same answer path as every surface (a verified answer recorded as that approver); the
// message is replaced by the outcome without buttons; and the agent's call then runs once.
func TestSlackApproveEndToEnd(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			fake := newFakeSlack(t, slackSecret)
			s := slackServer(t, backend, testPolicy, fake, &server.SlackConfig{SigningSecret: []byte(slackSecret),
				Users: map[string]string{"U0ALICE": "alice"}, ResponseURLs: []string{fake.responsePrefix()}}, nil)
			hostile := "<!channel> *pay* <https://evil.example|inv> `x` &amp;"
			args := map[string]any{"invoice_id": hostile, "amount": 90000}
			r := s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "billing.charge", "arguments": args})
			if r.status != 202 {
				t.Fatalf("charge over the limit = %d %s", r.status, r.raw)
			}
			apr := r.body["approval_id"].(string)

			msg := fake.waitFor("webhook", 1)[0]
			if got := buttons(msg); got[notify.SlackActionApprove] != apr || got[notify.SlackActionDeny] != apr || len(got) != 2 {
				t.Errorf("buttons = %v, want approve and deny of %s", got, apr)
			}
			texts := mrkdwn(msg)
			all := strings.Join(texts, "\n")
			wantArgs := "*Arguments*\n• Invoice (`invoice_id`): `\"&lt;!channel&gt; *pay* &lt;https://evil.example|inv&gt; \\x60x\\x60 &amp;amp;\"`\n" +
				"• `amount`: `€900.00 (90000 minor units)`"
			found := false
			for _, x := range texts {
				found = found || x == wantArgs
			}
			if !found {
				t.Errorf("the message shows no argument section\n%s\nin\n%s", wantArgs, all)
			}
			for _, bad := range []string{"<!channel>", "<https://", "|inv>", "`x`"} {
				if strings.Contains(all, bad) {
					t.Errorf("the message shows %q unescaped:\n%s", bad, all)
				}
			}

			c := fake.send(s.url, fake.click("U0ALICE", "T0FAKE", notify.SlackActionApprove, apr, s.clock.Now(), []byte(slackSecret)))
			if c.status != 200 {
				t.Fatalf("signed click = %d %s", c.status, c.raw)
			}
			out := fake.waitFor("responses", 1)[0]
			if out["replace_original"] != true || len(buttons(out)) != 0 || !strings.Contains(strings.Join(mrkdwn(out), "\n"), "*Approved*: granted by `slack:alice`") {
				t.Errorf("the outcome posted = %v, want the message replaced, approved by alice, without buttons", out)
			}
			a, err := s.g.Store().Approval(t.Context(), apr)
			if err != nil {
				t.Fatal(err)
			}
			if a.Status != store.Granted || len(a.Answers) != 1 || a.Answers[0].Name != "alice" || a.Answers[0].Method != store.MethodSlack ||
				!a.Answers[0].Verified || a.Answers[0].Note != "via Slack as U0ALICE" {
				t.Fatalf("after the click: %s %+v, want granted by alice (slack, verified, the Slack user in the note)", a.Status, a.Answers)
			}
			ok := s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "billing.charge", "arguments": args, "approval_id": apr})
			if ok.status != 200 || ok.body["status"] != "reserved" {
				t.Fatalf("with the approval = %d %s", ok.status, ok.raw)
			}
			if o := s.do("POST", "/v1/actions/"+ok.body["action_id"].(string)+"/outcome", s.alice, map[string]any{"outcome": "committed"}); o.status != 200 || o.body["result"] != "committed" {
				t.Fatalf("outcome = %d %s", o.status, o.raw)
			}
			wantProblem(t, "the approval presented again", s.do("POST", "/v1/actions", s.alice,
				map[string]any{"action": "billing.charge", "arguments": args, "approval_id": apr}), 403, "approval_consumed")
		})
	}
}

// TestSlackRefusals: a click is taken only when signed with the signing secret over its exact
// body, within five minutes of now, once; and it answers only as a mapped Slack user, of the
// configured workspace, under the same rules as every surface (here: self-approval). Each
// refusal writes no answer; the signing secret is never logged.
func TestSlackRefusals(t *testing.T) {
	t.Parallel()
	fake := newFakeSlack(t, slackSecret)
	var logs bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := slackServer(t, "sqlite", testPolicy, fake, &server.SlackConfig{SigningSecret: []byte(slackSecret), Team: "T0FAKE",
		Users:        map[string]string{"U0ALICE": "alice", "U0AGENT": "Billing-Worker"},
		ResponseURLs: []string{fake.responsePrefix()}}, log)
	r := s.do("POST", "/v1/actions", s.alice, charge("inv_1", 90000))
	if r.status != 202 {
		t.Fatalf("charge = %d %s", r.status, r.raw)
	}
	apr := r.body["approval_id"].(string)
	now := s.clock.Now()
	unanswered := func(what string) {
		t.Helper()
		a, err := s.g.Store().Approval(t.Context(), apr)
		if err != nil || a.Status != store.Pending || len(a.Answers) != 0 {
			t.Fatalf("after %s: %v %+v, want pending with no answer", what, err, a)
		}
	}
	click := func(user string, at time.Time) *http.Request {
		return fake.click(user, "T0FAKE", notify.SlackActionApprove, apr, at, []byte(slackSecret))
	}

	wantProblem(t, "signed with another secret", fake.send(s.url, fake.click("U0ALICE", "T0FAKE", notify.SlackActionApprove, apr, now, []byte("not-the-secret"))), 401, "slack_signature_invalid")
	tampered := click("U0ALICE", now)
	body, _ := io.ReadAll(tampered.Body)
	tampered.Body = io.NopCloser(strings.NewReader(strings.Replace(string(body), "latch_approve", "latch_deny__", 1)))
	wantProblem(t, "a body other than the one signed", fake.send(s.url, tampered), 401, "slack_signature_invalid")
	unsigned := click("U0ALICE", now)
	unsigned.Header.Del(server.SlackHeaderSignature)
	wantProblem(t, "no signature", fake.send(s.url, unsigned), 401, "slack_signature_invalid")
	wantProblem(t, "signed six minutes ago", fake.send(s.url, click("U0ALICE", now.Add(-6*time.Minute))), 401, "slack_timestamp_stale")
	wantProblem(t, "signed six minutes ahead", fake.send(s.url, click("U0ALICE", now.Add(6*time.Minute))), 401, "slack_timestamp_stale")
	unanswered("the unsigned and stale clicks")

	if c := fake.send(s.url, click("U0MALLORY", now)); c.status != 200 {
		t.Fatalf("an unmapped user's click = %d %s, want 200 and the refusal on response_url", c.status, c.raw)
	}
	refusal := fake.waitFor("responses", 1)[0]
	if refusal["response_type"] != "ephemeral" || refusal["replace_original"] != nil ||
		!strings.Contains(refusal["text"].(string), "(slack_user_unmapped)") || !strings.Contains(refusal["text"].(string), "`U0MALLORY`") {
		t.Errorf("to the unmapped user = %v, want an ephemeral refusal naming slack_user_unmapped and the user", refusal)
	}
	unanswered("an unmapped user's click")

	other := fake.click("U0ALICE", "T0OTHER", notify.SlackActionApprove, apr, now, []byte(slackSecret))
	if c := fake.send(s.url, other); c.status != 200 {
		t.Fatalf("another workspace's click = %d %s", c.status, c.raw)
	}
	if m := fake.waitFor("responses", 2)[1]; !strings.Contains(m["text"].(string), "(slack_team_mismatch)") {
		t.Errorf("to another workspace's user = %v, want slack_team_mismatch", m)
	}
	unanswered("another workspace's click")

	self := click("U0AGENT", now)
	if c := fake.send(s.url, self); c.status != 200 {
		t.Fatalf("the requester's click = %d %s", c.status, c.raw)
	}
	if m := fake.waitFor("responses", 3)[2]; m["response_type"] != "ephemeral" || !strings.Contains(m["text"].(string), "(self_approval)") {
		t.Errorf("to the requester mapped from Slack = %v, want self_approval", m)
	}
	unanswered("the requester's click")
	wantProblem(t, "the same signed request again", fake.send(s.url, self), 401, "slack_replayed")

	outside := fake.click("U0ALICE", "T0FAKE", notify.SlackActionApprove, apr, now, []byte(slackSecret))
	ob, _ := io.ReadAll(outside.Body)
	evil := strings.Replace(string(ob), url.QueryEscape(fake.srv.URL+"/actions/"), url.QueryEscape("https://evil.example/actions/"), 1)
	outside.Body = io.NopCloser(strings.NewReader(evil))
	outside.Header.Set(server.SlackHeaderSignature, server.SlackSign([]byte(slackSecret), now.Unix(), []byte(evil)))
	wantProblem(t, "a response_url outside the prefix", fake.send(s.url, outside), 400, "slack_payload_invalid")
	unanswered("a click whose response_url is elsewhere")

	if c := fake.send(s.url, click("U0ALICE", now)); c.status != 200 {
		t.Fatalf("alice's click = %d %s", c.status, c.raw)
	}
	if m := fake.waitFor("responses", 4)[3]; m["replace_original"] != true {
		t.Errorf("after alice's click = %v, want the message replaced", m)
	}
	if a, _ := s.g.Store().Approval(t.Context(), apr); a.Status != store.Granted {
		t.Errorf("after alice's click: %s, want granted", a.Status)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if strings.Contains(logs.String(), slackSecret) {
		t.Errorf("the log shows the signing secret:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "slack_replayed") {
		t.Errorf("the log does not say a replay was refused:\n%s", logs.String())
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestSlackMofN: a Slack grant counts as one verified person under the action's roles: after it
// the request is 1 of 2 and its message keeps its buttons; a user mapped to someone outside the
// roles is refused approver_not_entitled; the second grant, over the API, grants it.
func TestSlackMofN(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			fake := newFakeSlack(t, slackSecret)
			s := slackServer(t, backend, approversPolicy, fake, &server.SlackConfig{SigningSecret: []byte(slackSecret),
				Users: map[string]string{"U0DAVE": "dave", "U0ERIN": "erin"}, ResponseURLs: []string{fake.responsePrefix()}}, nil)
			r := s.do("POST", "/v1/actions", s.alice, charge("inv_1", 100))
			if r.status != 202 {
				t.Fatalf("charge = %d %s", r.status, r.raw)
			}
			apr := r.body["approval_id"].(string)
			now := s.clock.Now()
			fake.send(s.url, fake.click("U0ERIN", "T0FAKE", notify.SlackActionApprove, apr, now, []byte(slackSecret)))
			if m := fake.waitFor("responses", 1)[0]; !strings.Contains(m["text"].(string), "(approver_not_entitled)") {
				t.Errorf("to erin = %v, want approver_not_entitled", m)
			}
			fake.send(s.url, fake.click("U0DAVE", "T0FAKE", notify.SlackActionApprove, apr, now, []byte(slackSecret)))
			m := fake.waitFor("responses", 2)[1]
			if m["replace_original"] != true || buttons(m)[notify.SlackActionApprove] != apr ||
				!strings.Contains(strings.Join(mrkdwn(m), "\n"), "*Pending*: 1 of 2 grants: granted by `slack:dave`") {
				t.Errorf("after dave's grant = %v, want 1 of 2 with the buttons kept", m)
			}
			if a := s.do("POST", "/v1/approvals/"+apr+"/approve", s.approver, nil); a.status != 200 || a.body["status"] != "granted" {
				t.Fatalf("carol's grant over the API = %d %s", a.status, a.raw)
			}
			fake.send(s.url, fake.click("U0DAVE", "T0FAKE", notify.SlackActionDeny, apr, now.Add(time.Second), []byte(slackSecret)))
			late := fake.waitFor("responses", 4)
			if !strings.Contains(late[2]["text"].(string), "(already_granted)") || late[3]["replace_original"] != true || len(buttons(late[3])) != 0 {
				t.Errorf("a click on a decided request = %v, want already_granted, then the message without buttons", late[2:])
			}
		})
	}
}

// TestSlackReplayBound: the signatures remembered are bounded; when the bound is full of
// signatures still inside the window, a new request is refused rather than one forgotten, and
// once they are past the window (refused as stale anyway) they make room.
func TestSlackReplayBound(t *testing.T) {
	t.Parallel()
	fake := newFakeSlack(t, slackSecret)
	s := slackServer(t, "sqlite", testPolicy, fake, &server.SlackConfig{SigningSecret: []byte(slackSecret), MaxSeen: 1,
		Users: map[string]string{"U0ALICE": "alice"}, ResponseURLs: []string{fake.responsePrefix()}}, nil)
	now := s.clock.Now()
	if c := fake.send(s.url, fake.click("U0ALICE", "T0FAKE", notify.SlackActionApprove, "apr_none", now, []byte(slackSecret))); c.status != 200 {
		t.Fatalf("first = %d %s", c.status, c.raw)
	}
	wantProblem(t, "past the bound", fake.send(s.url, fake.click("U0ALICE", "T0FAKE", notify.SlackActionApprove, "apr_none", now, []byte(slackSecret))), 503, "slack_busy")
	s.clock.Add(6 * time.Minute)
	if c := fake.send(s.url, fake.click("U0ALICE", "T0FAKE", notify.SlackActionApprove, "apr_none", s.clock.Now(), []byte(slackSecret))); c.status != 200 {
		t.Fatalf("after the window = %d %s", c.status, c.raw)
	}
	if m := fake.waitFor("responses", 2)[1]; !strings.Contains(m["text"].(string), "(approval_not_found)") {
		t.Errorf("a click on no request = %v, want approval_not_found", m)
	}
}

// TestParseSlackUsers: the mapping file is read line by line; a bad line is named file:line.
func TestParseSlackUsers(t *testing.T) {
	t.Parallel()
	got, err := server.ParseSlackUsers("slack-users", []byte("# who answers from Slack\nU0ALICE alice\n\nW0BOB\tBob Smith\n"))
	if err != nil || len(got) != 2 || got["U0ALICE"] != "alice" || got["W0BOB"] != "Bob Smith" {
		t.Fatalf("ParseSlackUsers = %v, %v", got, err)
	}
	for _, tc := range []struct{ in, want string }{
		{"U0ALICE alice\nalice U0ALICE\n", "slack-users:2: Slack user id"},
		{"U0ALICE\n", "slack-users:1: "},
		{"U0ALICE alice\nU0ALICE bob\n", "slack-users:2: Slack user U0ALICE is mapped twice"},
		{"U0ALICE \u200b\n", "slack-users:1: U0ALICE: "},
	} {
		if _, err := server.ParseSlackUsers("slack-users", []byte(tc.in)); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("ParseSlackUsers(%q) = %v, want an error starting %q", tc.in, err, tc.want)
		}
	}
}

// driveSlack answers POST /v1/slack/interactions with each status the OpenAPI document lists
// for it, on a server observed by obs: a click taken (200), a signed payload that is not a
// click (400), an unsigned one (401), a body past the bound (413), and one past the
// remembered signatures (503). (404 is the server without Slack.)
func driveSlack(t *testing.T, obs *observed) {
	t.Helper()
	fake := newFakeSlack(t, slackSecret)
	g, err := latch.Open(t.Context(), &latch.Config{Policy: mustPolicy(t), StoreURL: storeURL(t, "sqlite")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	srvr, err := server.New(g, &server.Config{MaxBody: 4096, Slack: &server.SlackConfig{SigningSecret: []byte(slackSecret), MaxSeen: 2,
		Users: map[string]string{"U0ALICE": "alice"}, ResponseURLs: []string{fake.responsePrefix()}}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(obs.wrap(srvr.Handler()))
	t.Cleanup(hs.Close)
	now := time.Now()
	fake.send(hs.URL, fake.click("U0ALICE", "T0FAKE", notify.SlackActionApprove, "apr_none", now, []byte(slackSecret)))
	fake.waitFor("responses", 1) // the refusal (no such request) is posted before the server goes
	notClick := "payload=" + url.QueryEscape(`{"type":"view_submission"}`)
	sign := func(body string) *http.Request {
		req, _ := http.NewRequest("POST", "/v1/slack/interactions", strings.NewReader(body))
		req.Header.Set(server.SlackHeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
		req.Header.Set(server.SlackHeaderSignature, server.SlackSign([]byte(slackSecret), now.Unix(), []byte(body)))
		return req
	}
	fake.send(hs.URL, sign(notClick))
	fake.send(hs.URL, fake.click("U0ALICE", "T0FAKE", notify.SlackActionApprove, "apr_none", now, []byte("wrong")))
	fake.send(hs.URL, sign("payload="+strings.Repeat("x", 5000)))
	fake.send(hs.URL, fake.click("U0ALICE", "T0FAKE", notify.SlackActionApprove, "apr_none", now, []byte(slackSecret)))
}

// TestSlackDeny: a mapped user's Deny denies the request at once, the message says who denied
// it and loses its buttons, and the agent's call presenting it is refused.
func TestSlackDeny(t *testing.T) {
	t.Parallel()
	fake := newFakeSlack(t, slackSecret)
	s := slackServer(t, "sqlite", testPolicy, fake, &server.SlackConfig{SigningSecret: []byte(slackSecret),
		Users: map[string]string{"U0ALICE": "alice"}, ResponseURLs: []string{fake.responsePrefix()}}, nil)
	r := s.do("POST", "/v1/actions", s.alice, charge("inv_1", 90000))
	if r.status != 202 {
		t.Fatalf("charge = %d %s", r.status, r.raw)
	}
	apr := r.body["approval_id"].(string)
	if c := fake.send(s.url, fake.click("U0ALICE", "T0FAKE", notify.SlackActionDeny, apr, s.clock.Now(), []byte(slackSecret))); c.status != 200 {
		t.Fatalf("deny = %d %s", c.status, c.raw)
	}
	m := fake.waitFor("responses", 1)[0]
	if m["replace_original"] != true || len(buttons(m)) != 0 || !strings.Contains(strings.Join(mrkdwn(m), "\n"), "*Denied*: denied by `slack:alice`") {
		t.Errorf("after the deny = %v, want the message replaced, denied by alice, without buttons", m)
	}
	body := charge("inv_1", 90000)
	body["approval_id"] = apr
	wantProblem(t, "the denied approval presented", s.do("POST", "/v1/actions", s.alice, body), 403, "approval_denied")
}
