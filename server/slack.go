package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/notify"
	"github.com/latchkit/latch/store"
)

// Defaults of SlackConfig.
const (
	// DefaultSlackTolerance is how far a request's timestamp may be from the server's clock:
	// the window Slack documents.
	DefaultSlackTolerance = 5 * time.Minute
	// DefaultSlackResponseURL is the prefix every response_url Slack sends starts with.
	DefaultSlackResponseURL = "https://hooks.slack.com/"
	// DefaultSlackMaxSeen bounds the signatures remembered to refuse replays.
	DefaultSlackMaxSeen = 10000
	// slackMaxBody bounds an interactivity request: a payload carries the message it came
	// from, and ours are a few kilobytes.
	slackMaxBody = 256 << 10
	// slackPosts bounds the posts to response_url in flight at once.
	slackPosts = 32
)

// The headers Slack signs its requests with.
const (
	SlackHeaderTimestamp = "X-Slack-Request-Timestamp"
	SlackHeaderSignature = "X-Slack-Signature"
)

// SlackConfig configures POST /v1/slack/interactions, where Slack sends the clicks on the
// Approve and Deny buttons of the approval messages latch posts (notify.FormatSlack with
// notify.Config.SlackButtons).
type SlackConfig struct {
	// SigningSecret is the Slack app's signing secret: every request must carry its signature
	// (SlackSign). Required. It is never logged.
	SigningSecret []byte
	// Users maps a Slack user id (U0123ABCD) to the approver name the click answers as: the
	// person who approves in Slack is that approver, with that approver's roles, and is held
	// to the same entitlement, M-of-N and self-approval rules as on every other surface. A
	// user not in it is refused slack_user_unmapped.
	Users map[string]string
	// Team, when set, is the only Slack workspace (team id T0123ABCD) whose clicks are taken.
	Team string
	// ResponseURLs are the prefixes a payload's response_url must start with before latch
	// posts the outcome to it; default DefaultSlackResponseURL. Tests point it at a local
	// fake.
	ResponseURLs []string
	// Tolerance is how far a request's timestamp may be from now; default
	// DefaultSlackTolerance.
	Tolerance time.Duration
	// MaxSeen bounds the signatures remembered (for Tolerance) to refuse a replayed request;
	// default DefaultSlackMaxSeen. When it is full of signatures still inside the window, new
	// requests are refused 503 slack_busy rather than forgetting one that could be replayed.
	MaxSeen int
	// Client posts the outcomes to response_url; default a client of the server's own with a
	// 10-second timeout that follows no redirect.
	Client *http.Client
}

// slackUserID is the shape of a Slack user id.
var slackUserID = regexp.MustCompile(`^[UW][A-Z0-9]{2,31}$`)

// ParseSlackUsers reads the mapping of Slack users to approvers from a file's content: one
// mapping per line, the Slack user id, white space, then the approver's name (which may hold
// spaces); blank lines and lines starting with # are skipped. An error names name:line.
func ParseSlackUsers(name string, data []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.IndexAny(line, " \t")
		if i < 0 {
			return nil, fmt.Errorf("%s:%d: %s names no approver: want a Slack user id, white space, and an approver's name", name, n, safetext.Quote(line))
		}
		id, who := line[:i], line[i+1:]
		if !slackUserID.MatchString(id) {
			return nil, fmt.Errorf("%s:%d: Slack user id %s: want U or W and capital letters or digits (U0123ABCD)", name, n, safetext.Quote(id))
		}
		approver, err := store.NormalizeApprover(who)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %w", name, n, id, err)
		}
		if prev, ok := out[id]; ok {
			return nil, fmt.Errorf("%s:%d: Slack user %s is mapped twice (to %s and %s)", name, n, id, safetext.Quote(prev), safetext.Quote(approver))
		}
		out[id] = approver
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// SlackSign is the X-Slack-Signature of body sent at Unix time ts, as Slack documents it:
// "v0=" and the hex HMAC-SHA256, keyed with the signing secret, of "v0:", the decimal
// timestamp, ":", and the raw body.
func SlackSign(secret []byte, ts int64, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("v0:" + strconv.FormatInt(ts, 10) + ":"))
	m.Write(body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}

// slackEndpoint answers Slack's interactivity requests.
type slackEndpoint struct {
	cfg  SlackConfig
	log  *slog.Logger
	mu   sync.Mutex
	seen map[string]time.Time // signature → the request's timestamp, while inside the window
	// posts bounds and tracks the posts to response_url.
	posts chan struct{}
	wg    sync.WaitGroup
}

func newSlackEndpoint(c *SlackConfig, log *slog.Logger) (*slackEndpoint, error) {
	cfg := *c
	if len(cfg.SigningSecret) == 0 {
		return nil, errors.New("slack: no signing secret")
	}
	if cfg.Tolerance == 0 {
		cfg.Tolerance = DefaultSlackTolerance
	}
	if cfg.MaxSeen == 0 {
		cfg.MaxSeen = DefaultSlackMaxSeen
	}
	if cfg.Tolerance < 0 || cfg.MaxSeen < 0 {
		return nil, errors.New("slack: negative tolerance or bound of remembered signatures")
	}
	if len(cfg.ResponseURLs) == 0 {
		cfg.ResponseURLs = []string{DefaultSlackResponseURL}
	}
	cfg.ResponseURLs = append([]string(nil), cfg.ResponseURLs...)
	for _, p := range cfg.ResponseURLs {
		u, err := url.Parse(p)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || !strings.HasSuffix(u.Path, "/") {
			return nil, fmt.Errorf("slack: response URL prefix %q: want http(s)://host/ ending in a slash", p)
		}
	}
	users := make(map[string]string, len(cfg.Users)) // a copy: the caller's map may change
	for id, name := range cfg.Users {
		if !slackUserID.MatchString(id) {
			return nil, fmt.Errorf("slack: user id %s: want U or W and capital letters or digits", safetext.Quote(id))
		}
		if _, err := store.NormalizeApprover(name); err != nil {
			return nil, fmt.Errorf("slack: user %s: %w", id, err)
		}
		users[id] = name
	}
	cfg.Users = users
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return &slackEndpoint{cfg: cfg, log: log, seen: map[string]time.Time{}, posts: make(chan struct{}, slackPosts)}, nil
}

// Reasons of the Slack interactivity endpoint.
const (
	reasonSlackOff       = "no_slack"
	reasonSlackSignature = "slack_signature_invalid"
	reasonSlackStale     = "slack_timestamp_stale"
	reasonSlackReplayed  = "slack_replayed"
	reasonSlackBusy      = "slack_busy"
	reasonSlackPayload   = "slack_payload_invalid"
	// ReasonSlackUnmapped is told to a Slack user who is not in SlackConfig.Users.
	ReasonSlackUnmapped = "slack_user_unmapped"
	// ReasonSlackTeam is told to a user of another workspace than SlackConfig.Team.
	ReasonSlackTeam = "slack_team_mismatch"
)

// slackPayload is the part of a block_actions payload latch reads.
type slackPayload struct {
	Type string `json:"type"`
	User struct {
		ID string `json:"id"`
	} `json:"user"`
	Team struct {
		ID string `json:"id"`
	} `json:"team"`
	ResponseURL string `json:"response_url"`
	Actions     []struct {
		ActionID string `json:"action_id"`
		Value    string `json:"value"`
	} `json:"actions"`
}

// slackInteraction is POST /v1/slack/interactions: a click on an approval message's Approve or
// Deny button, sent by Slack. The request is taken only when its signature is the signing
// secret's over its timestamp and raw body, its timestamp is within the tolerance of now, and
// this signature was not seen before (a replay); the clicking Slack user is then the approver
// SlackConfig.Users maps them to, and the answer goes through Guard.Answer as every surface's
// does. Slack is answered 200 at once; what came of the click is posted to the payload's
// response_url: the message replaced by the request as it now stands, or, for a refused answer,
// a message to the clicking person alone naming the reason.
func (s *Server) slackInteraction(w http.ResponseWriter, r *http.Request) {
	e := s.slack
	if e == nil {
		writeProblem(w, problem(http.StatusNotFound, reasonSlackOff, "this server takes no Slack interactions: latch serve --slack-signing-secret-file FILE --slack-users FILE"))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, min(s.cfg.MaxBody, slackMaxBody)))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeProblem(w, problem(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the body exceeds %d bytes", min(s.cfg.MaxBody, slackMaxBody))))
			return
		}
		writeProblem(w, problem(http.StatusBadRequest, "malformed_body", "read the body: "+err.Error()))
		return
	}
	now := s.cfg.Now()
	if p := e.verify(r.Header, body, now); p != nil {
		s.log.Info("latch serve: Slack interaction refused", "reason", p.Reason)
		writeProblem(w, p)
		return
	}
	pl, p := e.read(body)
	if p != nil {
		writeProblem(w, p)
		return
	}
	grant := pl.Actions[0].ActionID == notify.SlackActionApprove
	id := pl.Actions[0].Value
	var replies []notify.SlackMessage
	switch approver, ok := e.cfg.Users[pl.User.ID]; {
	case e.cfg.Team != "" && pl.Team.ID != e.cfg.Team:
		replies = append(replies, slackRefusal(ReasonSlackTeam, "this latch takes answers from one Slack workspace only, and not from "+notify.SlackEscape(pl.Team.ID)))
	case !ok:
		replies = append(replies, slackRefusal(ReasonSlackUnmapped, "your Slack user "+notify.SlackEscape(pl.User.ID)+
			" is not mapped to a latch approver; an operator adds it to the file of latch serve --slack-users, or you answer in the console"))
	default:
		replies = s.slackAnswer(r.Context(), id, grant, approver, pl.User.ID, now)
	}
	// Slack wants its answer within 3 seconds: the outcome follows on response_url.
	w.WriteHeader(http.StatusOK)
	e.post(pl.ResponseURL, replies)
}

// slackAnswer answers request id as approver through Guard.Answer and says what came of it:
// the request as it now stands (replacing the message), or a refusal to the person alone —
// followed by the request as it stands when it is no longer pending.
func (s *Server) slackAnswer(ctx context.Context, id string, grant bool, approver, user string, now time.Time) []notify.SlackMessage {
	a, err := s.g.Answer(ctx, &store.AnswerRequest{ID: id, Grant: grant, Approver: approver,
		Method: store.MethodSlack, Verified: true, Note: "via Slack as " + user})
	var ae *store.AnswerError
	switch {
	case err == nil:
		s.log.Info("latch serve: answered in Slack", "approval_id", id, "approver", approver, "grant", grant)
		m := notify.SlackApprovalMessage(a, s.g.Policy(), true, now)
		m.ReplaceOriginal = true
		return []notify.SlackMessage{m}
	case errors.Is(err, store.ErrNotFound):
		if len(id) > 100 { // the value is Slack's to bound, not ours to echo whole
			id = id[:100] + "…"
		}
		return []notify.SlackMessage{slackRefusal("approval_not_found", "no approval request "+notify.SlackEscape(id))}
	case errors.As(err, &ae):
		out := []notify.SlackMessage{slackRefusal(ae.Reason, notify.SlackEscape(trimLatch(err)))}
		if ae.Approval != nil && ae.Approval.Status != store.Pending {
			m := notify.SlackApprovalMessage(ae.Approval, s.g.Policy(), true, now)
			m.ReplaceOriginal = true
			out = append(out, m)
		}
		return out
	default:
		s.log.Error("latch serve: answer in Slack", "approval_id", id, "err", err)
		return []notify.SlackMessage{slackRefusal("internal", "latch could not record the answer; try again, or answer in the console")}
	}
}

// slackRefusal is a message to the clicking person alone: the reason word, and why.
func slackRefusal(reason, why string) notify.SlackMessage {
	return notify.SlackMessage{ResponseType: "ephemeral", Text: "latch refused your answer (" + reason + "): " + why}
}

// verify checks a request as Slack documents: its timestamp within the tolerance of now, its
// signature the signing secret's over "v0:timestamp:body" (compared in constant time), and
// not seen before.
func (e *slackEndpoint) verify(h http.Header, body []byte, now time.Time) *Problem {
	tsv, sig := h.Get(SlackHeaderTimestamp), h.Get(SlackHeaderSignature)
	ts, err := strconv.ParseInt(tsv, 10, 64)
	if err != nil || sig == "" {
		return problem(http.StatusUnauthorized, reasonSlackSignature, "a Slack request carries "+SlackHeaderTimestamp+" (Unix seconds) and "+SlackHeaderSignature)
	}
	sent := time.Unix(ts, 0)
	if d := now.Sub(sent); d > e.cfg.Tolerance || d < -e.cfg.Tolerance {
		return problem(http.StatusUnauthorized, reasonSlackStale, fmt.Sprintf("the request was signed at %s, more than %s from now (%s)",
			sent.UTC().Format(time.RFC3339), e.cfg.Tolerance, now.UTC().Format(time.RFC3339)))
	}
	if !hmac.Equal([]byte(SlackSign(e.cfg.SigningSecret, ts, body)), []byte(sig)) {
		return problem(http.StatusUnauthorized, reasonSlackSignature, "the signature is not the signing secret's over the timestamp and the body")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.seen[sig]; ok {
		return problem(http.StatusUnauthorized, reasonSlackReplayed, "this signed request was taken before: a request is taken once")
	}
	if len(e.seen) >= e.cfg.MaxSeen {
		for k, at := range e.seen {
			if now.Sub(at) > e.cfg.Tolerance { // refused as stale now: no longer needed to refuse it as a replay
				delete(e.seen, k)
			}
		}
	}
	if len(e.seen) >= e.cfg.MaxSeen {
		return problem(http.StatusServiceUnavailable, reasonSlackBusy, fmt.Sprintf("%d Slack requests were taken within %s; try again shortly", len(e.seen), e.cfg.Tolerance))
	}
	e.seen[sig] = sent
	return nil
}

// read decodes a block_actions payload naming one of latch's buttons, with a response_url
// under one of the configured prefixes.
func (e *slackEndpoint) read(body []byte) (*slackPayload, *Problem) {
	bad := func(detail string) (*slackPayload, *Problem) {
		return nil, problem(http.StatusBadRequest, reasonSlackPayload, detail)
	}
	form, err := url.ParseQuery(string(body))
	if err != nil || len(form["payload"]) != 1 {
		return bad("the body is not a form with one payload member")
	}
	var pl slackPayload
	if err := json.Unmarshal([]byte(form.Get("payload")), &pl); err != nil {
		return bad("the payload is not JSON: " + err.Error())
	}
	switch {
	case pl.Type != "block_actions":
		return bad("the payload is of type " + safetext.Quote(pl.Type) + "; latch takes block_actions only")
	case len(pl.Actions) != 1 || (pl.Actions[0].ActionID != notify.SlackActionApprove && pl.Actions[0].ActionID != notify.SlackActionDeny):
		return bad("the payload names no single " + notify.SlackActionApprove + " or " + notify.SlackActionDeny + " action")
	case pl.Actions[0].Value == "":
		return bad("the action names no approval request")
	case pl.User.ID == "":
		return bad("the payload names no user")
	}
	ok := false
	for _, p := range e.cfg.ResponseURLs {
		ok = ok || strings.HasPrefix(pl.ResponseURL, p)
	}
	if !ok {
		return bad("the payload's response_url is not under " + strings.Join(e.cfg.ResponseURLs, " or "))
	}
	return &pl, nil
}

// post sends msgs, in order, to responseURL, in the background and bounded: a slow Slack
// delays nobody's answer. A post that does not fit the bound is dropped and logged.
func (e *slackEndpoint) post(responseURL string, msgs []notify.SlackMessage) {
	select {
	case e.posts <- struct{}{}:
	default:
		e.log.Warn("latch serve: too many Slack posts in flight; the outcome of a click is not posted")
		return
	}
	e.wg.Add(1)
	go func() {
		defer func() { <-e.posts; e.wg.Done() }()
		for _, m := range msgs {
			if err := e.postOne(responseURL, m); err != nil {
				// The URL is a credential to the message: it is not logged.
				e.log.Warn("latch serve: post the outcome of a click to Slack", "err", err)
				return
			}
		}
	}()
}

func (e *slackEndpoint) postOne(responseURL string, m notify.SlackMessage) error {
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, responseURL, bytes.NewReader(body))
	if err != nil {
		return errors.New("response_url does not make a request")
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.cfg.Client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL
		}
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("slack answered %s", resp.Status)
	}
	return nil
}

// wait waits for the posts in flight.
func (e *slackEndpoint) wait() {
	if e != nil {
		e.wg.Wait()
	}
}
