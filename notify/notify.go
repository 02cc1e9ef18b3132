// Package notify posts alerts to webhooks when something needs a person: an approval was
// requested, a request waited long enough to be reminded about or escalated, an effect became
// ambiguous, a lease lapsed with no outcome, a holder's outcome contradicted a resolution, a
// break-glass grant was opened, a gateway's pinned upstream tool drifted from its pin. It is a
// latch.Sink: register it with a guard (latch serve does,
// with --notify URL), and it alerts on the events the guard commits.
//
// Each alert is a JSON document signed with HMAC-SHA256 over the timestamp and the body (see
// Sign and Verify), posted to every URL with a timeout, retried with exponential backoff on a
// network error, a 5xx or a 429, and given up after Config.Attempts. Every URL has a bounded
// queue and a goroutine of its own: a slow or failing receiver delays only its own alerts, never
// a call, and what does not fit in its queue is dropped and counted. The store keeps every event
// whatever happens to its alert.
//
// With FormatSlack and the guard given (Notifier.UseGuard), a requested approval is posted as a
// Slack Block Kit message showing the request's arguments in their display form, with Approve
// and Deny buttons when latch serve takes Slack's clicks (Config.SlackButtons; see
// SlackApprovalMessage).
package notify

import (
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

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Alert kinds.
const (
	KindApprovalRequested = "approval_requested"
	// KindApprovalReminded: a request waited its action's remind_after unanswered.
	KindApprovalReminded = "approval_reminded"
	// KindApprovalEscalated: a request waited its action's escalate_after unanswered and was
	// escalated to the roles and people the alert names, who may now answer it.
	KindApprovalEscalated = "approval_escalated"
	KindEffectAmbiguous   = "effect_ambiguous" // an attempt's outcome is unknown
	KindLeaseLapsed       = "lease_lapsed"     // a holder's lease lapsed with no outcome
	KindOutcomeConflict   = "outcome_conflict"
	// KindBudgetThreshold: a budget's consumption reached Config.BudgetShare of its limit
	// (Notifier.Budgets). It comes from no event: its EventID is 0 and its Event "".
	KindBudgetThreshold = "budget_threshold"
	// KindBreakGlassOpened: a person opened a break-glass grant (docs/authority.md#break-glass).
	KindBreakGlassOpened = "break_glass_opened"
)

// KindApprovalDeniedAtExpiry: a request reached its expiry unanswered and its action's
// approvers.on_expiry wrote it denied (docs/approvals.md#reminders-and-escalation).
const KindApprovalDeniedAtExpiry = "approval_denied_at_expiry"

// Body formats.
const (
	FormatJSON = "json" // the Alert document
	// FormatSlack posts {"text": …}, for a Slack incoming webhook (or anything that takes that
	// shape). Every value in the text (action name, effect key, approval id) is an inline code
	// span with &, < and > escaped, so an effect key rendered from an agent's arguments cannot
	// mention @channel, ping a user, disguise a link or format the message; bidi, zero-width and
	// control characters in it, and backticks, read as escapes.
	FormatSlack = "slack"
)

// Headers of every post.
const (
	HeaderTimestamp = "Latch-Timestamp" // Unix seconds, signed with the body
	HeaderSignature = "Latch-Signature" // v1=<hex HMAC-SHA256 of "timestamp.body">
	// HeaderDelivery is the same for every retry of an alert: the event's store id, or for a
	// budget alert "budget:ID:METRIC:MS.N" (MS: when the crossing was seen, in Unix
	// milliseconds; N: the notifier's count of crossings).
	HeaderDelivery = "Latch-Delivery"
	HeaderAlert    = "Latch-Alert" // the alert's kind
)

// Config configures a Notifier.
type Config struct {
	URLs []string // where to post; http or https, at least one
	// Secret signs every body (HeaderSignature). Required for FormatJSON; optional for
	// FormatSlack, whose URL is itself the secret.
	Secret []byte
	Format string // FormatJSON (default) or FormatSlack

	QueueSize int           // alerts waiting per URL; default 1000
	Timeout   time.Duration // one post; default 5s
	Attempts  int           // posts per alert before it is given up; default 5
	Backoff   time.Duration // the wait before the first retry, doubled for each next (at most 1m); default 1s

	Client *http.Client // default a client of the package's own
	Logger *slog.Logger
	// Failures, when set, is told of every alert given up ("failed") or dropped ("dropped");
	// a *metrics.Sink counts them.
	Failures interface{ DeliveryFailed(kind string) }
	Now      func() time.Time // the signature's clock; default time.Now
	// BudgetShare, when positive, is the share of a budget's limit (0.8: 80%) whose crossing
	// Budgets alerts on, once per crossing; 0 sends no budget alerts. At most 1.
	BudgetShare float64
	// SlackButtons, with FormatSlack and a guard given (UseGuard), puts Approve and Deny
	// buttons on the message of a requested approval. Set it only when latch serve answers
	// Slack's interactivity requests (server.SlackConfig): a button nothing answers is a lie.
	SlackButtons bool
}

// Alert is the JSON body of an alert (FormatJSON).
type Alert struct {
	Alert      string          `json:"alert"` // one of the Kind constants
	EventID    int64           `json:"event_id"`
	Event      string          `json:"event"` // the event kind it comes from
	At         string          `json:"at"`
	Action     string          `json:"action,omitempty"` // when this process saw the action proposed
	ActionID   string          `json:"action_id,omitempty"`
	EffectKey  string          `json:"effect_key,omitempty"`
	ApprovalID string          `json:"approval_id,omitempty"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	Text       string          `json:"text"` // one line for a person; agent-supplied values marked (see FormatSlack)

	render   func(quote func(string) string) string // Text with each value passed through quote
	delivery string                                 // HeaderDelivery when the alert comes from no event
}

// Notifier posts alerts. It implements latch.Sink and is safe for concurrent use.
type Notifier struct {
	cfg     Config
	targets []*target
	log     *slog.Logger

	mu      sync.Mutex
	actions map[string]string // action id → action name, from action_proposed; bounded
	closed  bool
	// above holds the budgets (id and metric) whose consumption was at or past BudgetShare
	// when Budgets last saw them.
	above     map[[2]string]bool
	crossings int64 // the crossings alerted on, for their delivery ids

	slack slackGuard // where the Slack message of a requested approval is read from
}

var _ latch.Sink = (*Notifier)(nil)

// maxActions bounds the action names remembered for alert texts.
const maxActions = 10000

type target struct {
	url   string
	queue chan *Alert
	done  chan struct{}
	stop  chan struct{}
}

// New validates cfg and starts one delivery goroutine per URL; Close stops them.
func New(cfg *Config) (*Notifier, error) {
	if cfg == nil {
		return nil, errors.New("notify: no configuration: at least one URL")
	}
	c := *cfg
	if c.Format == "" {
		c.Format = FormatJSON
	}
	if c.QueueSize == 0 {
		c.QueueSize = 1000
	}
	if c.Timeout == 0 {
		c.Timeout = 5 * time.Second
	}
	if c.Attempts == 0 {
		c.Attempts = 5
	}
	if c.Backoff == 0 {
		c.Backoff = time.Second
	}
	if c.Client == nil {
		c.Client = &http.Client{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	switch {
	case len(c.URLs) == 0:
		return nil, errors.New("notify: no URL to post alerts to")
	case c.Format != FormatJSON && c.Format != FormatSlack:
		return nil, fmt.Errorf("notify: format %q is not json or slack", c.Format)
	case c.Format == FormatJSON && len(c.Secret) == 0:
		return nil, errors.New("notify: the json format needs a secret to sign its alerts")
	case c.SlackButtons && c.Format != FormatSlack:
		return nil, errors.New("notify: Approve and Deny buttons go with the slack format")
	case c.QueueSize < 0 || c.Timeout < 0 || c.Attempts < 0 || c.Backoff < 0:
		return nil, errors.New("notify: negative queue size, timeout, attempts or backoff")
	case !(c.BudgetShare >= 0 && c.BudgetShare <= 1): // NaN too
		return nil, fmt.Errorf("notify: budget share %v: want a share of the limit from 0 (no budget alerts) to 1", c.BudgetShare)
	}
	n := &Notifier{cfg: c, log: c.Logger, actions: map[string]string{}, above: map[[2]string]bool{}}
	for _, raw := range c.URLs {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("notify: URL %q: want http:// or https:// and a host", raw)
		}
		n.targets = append(n.targets, &target{url: raw, queue: make(chan *Alert, c.QueueSize),
			done: make(chan struct{}), stop: make(chan struct{})})
	}
	for _, t := range n.targets {
		go n.run(t)
	}
	return n, nil
}

// Receipt does nothing: alerts come from events.
func (n *Notifier) Receipt(context.Context, *latch.Receipt) error { return nil }

// Event queues an alert for the events that need a person; it never blocks.
func (n *Notifier) Event(_ context.Context, e store.Event) error {
	if e.Kind == store.EventActionProposed {
		var p struct{ Action string }
		if json.Unmarshal(e.Payload, &p) == nil && p.Action != "" {
			n.remember(e.ActionID, p.Action)
		}
		return nil
	}
	a := n.alertOf(e)
	if a == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.queue(a)
	return nil
}

// queue hands a to every target without blocking; n.mu is held.
func (n *Notifier) queue(a *Alert) {
	if n.closed {
		return
	}
	for _, t := range n.targets {
		select {
		case t.queue <- a:
		default:
			n.failed("dropped", t.url, a, errors.New("queue full"))
		}
	}
}

func (n *Notifier) remember(actionID, name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.actions) >= maxActions {
		for k := range n.actions { // drop one: a bound, not a cache policy
			delete(n.actions, k)
			break
		}
	}
	n.actions[actionID] = name
}

// alertOf is the alert of an event, or nil when it needs nobody.
func (n *Notifier) alertOf(e store.Event) *Alert {
	var p struct {
		Cause     string `json:"cause"`
		ExpiresAt string `json:"expires_at"`
		// Of a break-glass opening's delegation_created.
		Via, Parent, By, Agent, User, Reason string
		DelegationID                         string `json:"delegation_id"`
		// Of a reminder's or an escalation's event.
		Action, Progress string
		Roles, People    []string
	}
	_ = json.Unmarshal(e.Payload, &p) // an undecodable payload alerts without its details
	n.mu.Lock()
	action := n.actions[e.ActionID]
	n.mu.Unlock()
	a := &Alert{EventID: e.ID, Event: e.Kind, At: e.Time.UTC().Format(receipt.TimeFormat), Action: action,
		ActionID: e.ActionID, EffectKey: e.EffectKey, ApprovalID: e.ApprovalID, Payload: e.Payload}
	// The text is rendered twice from the same words: marked for the JSON document's Text, and
	// marked and escaped for Slack. Every value in it may come from an agent (an effect key is
	// rendered from the call's arguments); the words around them are ours.
	switch {
	case e.Kind == store.EventApprovalRequested:
		a.Alert = KindApprovalRequested
		a.render = func(q func(string) string) string {
			s := fmt.Sprintf("Approval requested for %s (%s)", actionOr(q, action), q(e.ApprovalID))
			if p.ExpiresAt != "" {
				s += ", expires " + q(p.ExpiresAt)
			}
			return s + ": latch approvals"
		}
	case e.Kind == store.EventApprovalReminded || e.Kind == store.EventApprovalEscalated:
		if action == "" {
			action = p.Action // a sweeper's process did not see the call proposed
		}
		a.Action = action
		a.render = func(q func(string) string) string {
			what := "Reminder: approval"
			if e.Kind == store.EventApprovalEscalated {
				what = "Escalated: approval"
			}
			s := fmt.Sprintf("%s %s for %s is still unanswered", what, q(e.ApprovalID), actionOr(q, action))
			if progressForm.MatchString(p.Progress) { // ours ("1 of 2"), not an agent's: shown as is
				s += " (" + p.Progress + " granted)"
			}
			if who := names(q, p.Roles, p.People); who != "" {
				if e.Kind == store.EventApprovalEscalated {
					s += "; escalated to " + who + ", who may now answer it"
				} else {
					s += "; approvers: " + who
				}
			}
			if p.ExpiresAt != "" {
				s += "; expires " + q(p.ExpiresAt)
			}
			return s + ": latch approvals"
		}
		a.Alert = KindApprovalReminded
		if e.Kind == store.EventApprovalEscalated {
			a.Alert = KindApprovalEscalated
		}
	case e.Kind == store.EventApprovalDeniedAtExpiry:
		if action == "" {
			action = p.Action // a sweeper's process did not see the call proposed
		}
		a.Alert, a.Action = KindApprovalDeniedAtExpiry, action
		a.render = func(q func(string) string) string {
			s := fmt.Sprintf("Denied at expiry: approval %s for %s was not answered in time", q(e.ApprovalID), actionOr(q, action))
			if p.ExpiresAt != "" {
				s += " (expired " + q(p.ExpiresAt) + ")"
			}
			return s + "; the call is refused approval_denied and may ask again"
		}
	case e.Kind == store.EventExecutionAmbiguous && p.Cause == "lease_expired":
		a.Alert = KindLeaseLapsed
		a.render = func(q func(string) string) string {
			return fmt.Sprintf("Lease lapsed with no outcome: effect %s is ambiguous; find out whether it happened, then latch resolve", q(e.EffectKey))
		}
	case e.Kind == store.EventExecutionAmbiguous:
		a.Alert = KindEffectAmbiguous
		a.render = func(q func(string) string) string {
			return fmt.Sprintf("Outcome unknown: effect %s of %s is ambiguous; retries are refused until someone runs latch resolve", q(e.EffectKey), actionOr(q, action))
		}
	case e.Kind == store.EventDelegationCreated && p.Via == store.ViaBreakGlass:
		a.Alert = KindBreakGlassOpened
		a.render = func(q func(string) string) string {
			whom := q(p.Agent)
			if p.User != "" {
				whom += " for " + q(p.User)
			}
			return fmt.Sprintf("Break-glass opened: envelope %s for %s by %s until %s, because %s; end it early with latch revoke %s",
				q(p.Parent), whom, q(p.By), q(p.ExpiresAt), q(p.Reason), q(p.DelegationID))
		}
	case e.Kind == store.EventUpstreamDrifted:
		a.Alert, a.render = KindUpstreamDrift, upstreamRender(e)
	case e.Kind == store.EventOutcomeConflict:
		a.Alert = KindOutcomeConflict
		a.render = func(q func(string) string) string {
			return fmt.Sprintf("Outcome conflict on effect %s: its holder reported otherwise than it was resolved; resolve it again", q(e.EffectKey))
		}
	default:
		return nil
	}
	a.Text = a.render(safetext.Quote)
	return a
}

// progressForm is the form of a reminder's progress (store.Progress of a pending request).
var progressForm = regexp.MustCompile(`^[0-9]{1,4} of [0-9]{1,4}$`)

// names lists roles ("role payments") and people through q, "" when there are none.
func names(q func(string) string, roles, people []string) string {
	var out []string
	for _, r := range roles {
		out = append(out, "role "+q(r))
	}
	for _, p := range people {
		out = append(out, q(p))
	}
	return strings.Join(out, ", ")
}

// actionOr is the action's name through q, or "an action" when this process did not see it.
func actionOr(q func(string) string, action string) string {
	if action == "" {
		return "an action"
	}
	return q(action)
}

// slackCode renders a value for Slack's mrkdwn as an inline code span, where *bold*, _italic_,
// ~strike~ and a leading > are plain text. The value is first marked as in the JSON Text
// (safetext.Quote: bidi, zero-width and control characters read as escapes), a backtick — which
// would close the span, and mrkdwn has no escape for it — is written as the escape \x60 inside
// a quoted form, and &, < and > become entities, as Slack requires of all text: "<!channel>",
// "<@U123>" or "<https://evil|pay>" then shows as typed instead of mentioning everyone, pinging a
// user or disguising a link.
func slackCode(v string) string {
	m := safetext.Quote(v)
	if strings.Contains(m, "`") {
		if !strings.HasPrefix(m, `"`) {
			m = strconv.Quote(m)
		}
		m = strings.ReplaceAll(m, "`", `\x60`)
	}
	return "`" + slackEscaper.Replace(m) + "`"
}

// slackEscaper escapes the three characters Slack's mrkdwn gives meaning to as control
// sequences.
var slackEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// Close stops accepting alerts and waits, at most Timeout, for each queue's alert in flight;
// alerts still queued are dropped (and counted).
func (n *Notifier) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	n.mu.Unlock()
	for _, t := range n.targets {
		close(t.stop)
	}
	deadline := time.NewTimer(n.cfg.Timeout)
	defer deadline.Stop()
	for _, t := range n.targets {
		select {
		case <-t.done:
		case <-deadline.C:
			return errors.New("notify: close: deliveries still in flight")
		}
	}
	return nil
}

// run delivers t's alerts in order until Close.
func (n *Notifier) run(t *target) {
	defer close(t.done)
	for {
		select {
		case <-t.stop:
			for {
				select {
				case a := <-t.queue:
					n.failed("dropped", t.url, a, errors.New("notifier closed"))
				default:
					return
				}
			}
		case a := <-t.queue:
			n.deliver(t, a)
		}
	}
}

// deliver posts a, retrying with backoff, until it is accepted, refused for good, given up, or
// the notifier closes.
func (n *Notifier) deliver(t *target, a *Alert) {
	body, err := n.body(a)
	if err != nil {
		n.failed("failed", t.url, a, err)
		return
	}
	wait := n.cfg.Backoff
	for attempt := 1; ; attempt++ {
		retry, err := n.post(t.url, a, body)
		if err == nil {
			return
		}
		if !retry || attempt >= n.cfg.Attempts {
			n.failed("failed", t.url, a, fmt.Errorf("attempt %d: %w", attempt, err))
			return
		}
		timer := time.NewTimer(wait)
		select {
		case <-t.stop:
			timer.Stop()
			n.failed("dropped", t.url, a, errors.New("notifier closed while retrying"))
			return
		case <-timer.C:
		}
		wait = min(2*wait, time.Minute)
	}
}

// post makes one post; retry says whether a failure may succeed later.
func (n *Notifier) post(u string, a *Alert, body []byte) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderAlert, a.Alert)
	delivery := a.delivery
	if delivery == "" {
		delivery = strconv.FormatInt(a.EventID, 10)
	}
	req.Header.Set(HeaderDelivery, delivery)
	if len(n.cfg.Secret) > 0 {
		ts := n.cfg.Now().Unix()
		req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
		req.Header.Set(HeaderSignature, Sign(n.cfg.Secret, ts, body))
	}
	resp, err := n.cfg.Client.Do(req)
	if err != nil {
		return true, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch {
	case resp.StatusCode < 300:
		return false, nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return true, fmt.Errorf("receiver answered %s", resp.Status)
	}
	return false, fmt.Errorf("receiver refused the alert: %s", resp.Status)
}

func (n *Notifier) body(a *Alert) ([]byte, error) {
	if m := n.slackApproval(a); m != nil {
		return json.Marshal(m)
	}
	if n.cfg.Format == FormatSlack {
		text := a.Text
		if a.render != nil {
			text = a.render(slackCode)
		}
		return json.Marshal(map[string]string{"text": "latch: " + text})
	}
	return json.Marshal(a)
}

func (n *Notifier) failed(kind, u string, a *Alert, err error) {
	n.log.Warn("latch notify: alert "+kind, "url", redact(u), "alert", a.Alert, "event_id", a.EventID, "err", err)
	if n.cfg.Failures != nil {
		n.cfg.Failures.DeliveryFailed(kind)
	}
}

// redact drops a URL's query and user info, where webhook secrets often live.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User, u.RawQuery = nil, ""
	if strings.Count(u.Path, "/") > 1 { // a Slack-style URL carries its secret in the path
		u.Path = u.Path[:strings.Index(u.Path[1:], "/")+1] + "/…"
	}
	return u.String()
}

// Sign is the HeaderSignature of body sent at Unix time ts: "v1=" and the hex HMAC-SHA256, keyed
// with secret, of the decimal timestamp, a dot, and the body.
func Sign(secret []byte, ts int64, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(strconv.FormatInt(ts, 10)))
	m.Write([]byte("."))
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// Errors of Verify.
var (
	ErrBadSignature = errors.New("notify: signature does not match")
	ErrStale        = errors.New("notify: timestamp outside the tolerance")
)

// Verify checks an alert as a receiver gets it: the HeaderTimestamp and HeaderSignature values
// and the raw body. The timestamp must be within tolerance of now (a replayed alert is
// refused), and the signature must match (compared in constant time).
func Verify(secret []byte, timestamp, signature string, body []byte, now time.Time, tolerance time.Duration) error {
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s %q is not Unix seconds", ErrBadSignature, HeaderTimestamp, timestamp)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: sent %s, now %s", ErrStale, time.Unix(ts, 0).UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	if !hmac.Equal([]byte(Sign(secret, ts, body)), []byte(signature)) {
		return ErrBadSignature
	}
	return nil
}
