package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// The action_id of the buttons of an approval message: a Slack interactivity payload naming one
// of them answers the request its value names (server.SlackConfig).
const (
	SlackActionApprove = "latch_approve"
	SlackActionDeny    = "latch_deny"
)

// Bounds of a Slack approval message: Slack refuses a section longer than 3000 characters, and
// an argument list that fills a screen is read by nobody. What is cut is said to be cut.
const (
	slackMaxArguments = 20  // arguments listed; the rest are counted
	slackMaxValue     = 200 // characters of one value's display form
)

// SlackMessage is a Slack message body: the Block Kit blocks and the text Slack shows where
// blocks are not rendered (notifications, old clients). ReplaceOriginal and ResponseType are
// for a post to an interaction's response_url: replace the message that carried the buttons,
// or say something to the clicking person alone ("ephemeral").
type SlackMessage struct {
	Text            string `json:"text"`
	Blocks          []any  `json:"blocks,omitempty"`
	ReplaceOriginal bool   `json:"replace_original,omitempty"`
	ResponseType    string `json:"response_type,omitempty"`
}

// slackGuard is where a Notifier reads an approval request and the policy in force for the
// Slack message of an approval_requested alert (UseGuard).
type slackGuard struct {
	g atomic.Pointer[latch.Guard]
}

// UseGuard gives the notifier the guard whose events it alerts on, so that the Slack message
// of a requested approval shows the request's arguments in their display form (the policy's
// labels and money hints) and, with Config.SlackButtons, Approve and Deny buttons. latch serve
// calls it once the guard is open (the notifier is one of the guard's sinks, so it exists
// first). Without it, or for the JSON format, alerts are as before: one line of text.
func (n *Notifier) UseGuard(g *latch.Guard) { n.slack.g.Store(g) }

// slackApproval is the Block Kit message of an approval_requested alert, nil when the format
// is not Slack, the alert is another kind, no guard was given, or the request cannot be read
// (the alert is then sent as its one line of text).
func (n *Notifier) slackApproval(a *Alert) *SlackMessage {
	g := n.slack.g.Load()
	if n.cfg.Format != FormatSlack || a.Alert != KindApprovalRequested || g == nil || a.ApprovalID == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.Timeout)
	defer cancel()
	rec, err := g.Store().Approval(ctx, a.ApprovalID)
	if err != nil {
		n.log.Warn("latch notify: read the approval request for its Slack message; sending its text alone", "approval_id", a.ApprovalID, "err", err)
		return nil
	}
	m := SlackApprovalMessage(rec, g.Policy(), n.cfg.SlackButtons, n.cfg.Now())
	return &m
}

// SlackApprovalMessage is the Slack message of approval request a as it stands at now: what is
// asked, by whom, until when; the arguments in their display form through pol's hints (pol
// may be nil: raw values); the answers given so far; and, while the request is pending and
// buttons is set, Approve and Deny buttons whose value is the request's id. Every value in it
// that an agent or a person typed (action name, arguments, principal, approver names, notes)
// is an inline code span escaped for Slack's mrkdwn (see FormatSlack), so it cannot mention
// anyone, disguise a link or format the message; the words around them are latch's.
func SlackApprovalMessage(a *store.Approval, pol *policy.Policy, buttons bool, now time.Time) SlackMessage {
	doc := jsonview.ActionOf(a)
	who := "agent " + slackCode(str(doc.Principal.Agent))
	if u := str(doc.Principal.User); u != "" {
		who += " for user " + slackCode(u)
	}
	head := fmt.Sprintf("*Approval requested* for %s by %s", slackCode(doc.Name), who)
	if doc.Resource != nil && *doc.Resource != "" {
		head += " on " + slackCode(*doc.Resource)
	}
	head += fmt.Sprintf("\nRequest %s, expires %s", slackCode(a.ID), slackCode(a.ExpiresAt.UTC().Format(receipt.TimeFormat)))
	blocks := []any{slackSection(head)}
	if args := slackArguments(pol, doc.Name, doc.Arguments); args != "" {
		blocks = append(blocks, slackSection(args))
	}
	required, verified := jsonview.Required(pol, a)
	state := slackState(a, required, verified, now)
	blocks = append(blocks, map[string]any{"type": "context", "elements": []any{
		map[string]any{"type": "mrkdwn", "text": state},
		map[string]any{"type": "mrkdwn", "text": "action hash " + slackCode(a.ActionHash)},
	}})
	open := a.Status == store.Pending && now.Before(a.ExpiresAt)
	if buttons && open {
		blocks = append(blocks, slackButtons(a.ID))
	}
	text := fmt.Sprintf("latch: approval requested for %s (%s): %s", slackCode(doc.Name), slackCode(a.ID), state)
	return SlackMessage{Text: text, Blocks: blocks}
}

// slackState says where request a stands: its grants so far and who gave them, or how it was
// decided.
func slackState(a *store.Approval, required int, verified bool, now time.Time) string {
	var s string
	switch {
	case a.Status == store.Pending && !now.Before(a.ExpiresAt):
		s = "*Expired* unanswered"
	case a.Status == store.Pending:
		s = fmt.Sprintf("*Pending*: %d of %d grants", store.Grants(a.Answers, verified), required)
	case a.Status == store.Granted:
		s = "*Approved*"
	case a.DeniedAtExpiry():
		s = "*Denied* at its expiry, unanswered (" + slackCode(store.ExpiryApprover) + ")"
	case a.Status == store.Denied:
		s = "*Denied*"
	case a.Status == store.Consumed:
		s = "*Approved*, and spent by the call it was asked for"
	case a.Status == store.Expired:
		s = "*Expired*"
	default:
		s = slackCode(string(a.Status))
	}
	var parts []string
	for _, x := range a.Answers {
		verb := "granted"
		if !x.Grant {
			verb = "denied"
		}
		p := verb + " by " + slackCode(x.Approver.String())
		if x.Note != "" {
			p += " (" + slackValue(x.Note) + ")"
		}
		parts = append(parts, p)
	}
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, "; ")
	}
	return s
}

// slackArguments lists the arguments as a person reads them — the policy's label (or the
// argument's name) and its display form (the hint's reading, or the canonical JSON value) —
// one per line, at most slackMaxArguments, each value at most slackMaxValue characters. ""
// when there are none.
func slackArguments(pol *policy.Policy, action string, canonical json.RawMessage) string {
	v, err := canon.Parse(canonical)
	args, ok := v.(map[string]any)
	if err != nil || !ok || len(args) == 0 {
		return ""
	}
	view := pol.View(action, args)
	var b strings.Builder
	b.WriteString("*Arguments*")
	for i, av := range view {
		if i == slackMaxArguments {
			fmt.Fprintf(&b, "\n… and %d more: see latch approvals or the console", len(view)-i)
			break
		}
		name := slackCode(av.Name)
		if av.Label != "" {
			name = slackEscaper.Replace(av.Label) + " (" + name + ")"
		}
		val := av.Raw
		if av.Human != "" {
			val = av.Human
		}
		fmt.Fprintf(&b, "\n• %s: %s", name, slackValue(clip(val, slackMaxValue)))
	}
	return b.String()
}

// clip cuts s to at most max characters, marking the cut.
func clip(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}

func slackSection(mrkdwn string) map[string]any {
	return map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn", "text": mrkdwn}}
}

// slackButtons are the Approve and Deny buttons of request id. Approve asks for a confirmation
// first: one stray click must not let an action run.
func slackButtons(id string) map[string]any {
	plain := func(s string) map[string]any { return map[string]any{"type": "plain_text", "text": s} }
	return map[string]any{"type": "actions", "block_id": "latch_answer", "elements": []any{
		map[string]any{"type": "button", "action_id": SlackActionApprove, "text": plain("Approve"), "style": "primary", "value": id,
			"confirm": map[string]any{"title": plain("Approve this request?"),
				"text":    plain("The action runs once with exactly the arguments shown."),
				"confirm": plain("Approve"), "deny": plain("Cancel")}},
		map[string]any{"type": "button", "action_id": SlackActionDeny, "text": plain("Deny"), "style": "danger", "value": id},
	}}
}

// slackValue renders a value a person reads whole — an argument's display form, a note — for
// Slack's mrkdwn as an inline code span: spaces and letters of any script are kept as written,
// while controls, bidi and zero-width characters read as escapes (safetext.Escape, as on the
// console and the CLI), a backtick (which would end the span) as \x60, and &, < and > as the
// entities Slack requires, so that nothing in it mentions, links or formats.
func slackValue(v string) string {
	if v == "" {
		return "`\"\"`"
	}
	return "`" + slackEscaper.Replace(strings.ReplaceAll(safetext.Escape(v), "`", `\x60`)) + "`"
}

// SlackEscape renders a value for Slack's mrkdwn as the approval message renders every value a
// person typed: an inline code span, marked and escaped, that cannot mention, link or format.
func SlackEscape(v string) string { return slackValue(v) }

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
