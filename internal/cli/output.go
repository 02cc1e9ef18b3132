package cli

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// stamp formats a time as every latch timestamp is written: RFC 3339, UTC, milliseconds, Z.
// The zero time is "-" in human output.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(receipt.TimeFormat)
}

// jstamp is stamp for JSON: null for the zero time.
func jstamp(t time.Time) *string { return jsonview.Stamp(t) }

// jstr is a JSON string, null when empty.
func jstr(s string) *string { return jsonview.Str(s) }

// dash is s, or "-" when empty, for a table cell.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return cell(s)
}

// cell makes s safe for one table cell without losing anything: tabs and line breaks are
// written as escapes rather than cutting the row, and so is everything else that could act on a
// terminal (termSafe).
func cell(s string) string { return termSafe(s, false) }

// table is an aligned-column writer; call flush when done.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

func (t *table) row(cells ...string) {
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// jsonLine writes v as one line of JSON, without HTML escaping (an argument "<a&b>" is printed
// as it was hashed).
func jsonLine(w io.Writer, v any) error {
	enc := json.NewEncoder(rawWriter(w))
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// principal formats a principal as agent or agent/user.
func principal(agent, user string) string {
	if user == "" {
		return dash(agent)
	}
	return cell(agent + "/" + user)
}

// principalJSON is a principal in JSON output.
type principalJSON = jsonview.Principal

// approvalAction reads the action an approval is bound to, its arguments redacted as pol says,
// falling back to the request's own
// columns when the document is absent or unreadable.
func approvalAction(pol *policy.Policy, a *store.Approval) jsonview.ActionDoc {
	return jsonview.ShownActionOf(pol, a)
}

// required is how many distinct grants a decides on: the most of what its answers recorded and
// what the policy's approvers of its action say (1 without a policy).
func required(pol *policy.Policy, a *store.Approval) (int, bool) { return jsonview.Required(pol, a) }

// answersCell is the APPROVER cell of latch approvals: the approver who decided, or for a
// request still pending the grants so far ("1 of 2: session:alice"); "-" when nobody answered
// a request one grant decides.
func answersCell(pol *policy.Policy, a *store.Approval) string {
	n, verified := required(pol, a)
	var who []string
	for _, x := range a.Answers {
		if x.Grant || a.Status != store.Pending {
			who = append(who, x.Approver.String())
		}
	}
	switch {
	case a.Status == store.Pending && (n > 1 || len(who) > 0):
		s := fmt.Sprintf("%d of %d", store.Grants(a.Answers, verified), n)
		if len(who) > 0 {
			s += ": " + strings.Join(who, ", ")
		}
		return s
	case len(who) > 1:
		return strings.Join(who, ", ")
	}
	return dash(a.Approver)
}

// operatorOf is the operator layer over st, reading arguments through pol's display hints (nil:
// the raw values alone) and verifying checkpoints with key (nil: not checked).
func (a *app) operatorOf(st store.Store, pol *policy.Policy, key ed25519.PublicKey) *operator.Operator {
	o, err := operator.New(&operator.Config{Store: st, Policy: pol, Now: a.now, CheckpointKey: key})
	if err != nil {
		panic(err) // a store is always given, and a key always parsed by receipt.ParsePublicKey
	}
	return o
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// displayPolicy is the policy whose display hints read arguments for people, or nil: the hints
// are presentation only, so a policy that cannot be read just leaves the raw values.
func (a *app) displayPolicy() *policy.Policy {
	path, err := a.policyPath()
	if err != nil {
		return nil
	}
	p, err := policy.LoadContext(a.ctx, path)
	if err != nil {
		return nil
	}
	return p
}

// readable renders the arguments of a call as the policy's display hints say a person should
// read them ("Refund: €2,500.00 (250000 minor units); Order: "ord_1""), or "" when no hint
// applies. The raw canonical arguments are always shown beside it.
func readable(p *policy.Policy, action string, canonical json.RawMessage) string {
	if p == nil || p.Actions[action] == nil {
		return ""
	}
	v, err := canon.Parse(canonical)
	args, ok := v.(map[string]any)
	if err != nil || !ok {
		return ""
	}
	var parts []string
	for _, av := range p.View(action, args) {
		if av.Label == "" && av.Human == "" {
			continue
		}
		name, val := av.Name, av.Raw
		if av.Label != "" {
			name = av.Label
		}
		if av.Human != "" {
			val = av.Human
		}
		parts = append(parts, name+": "+val)
	}
	return strings.Join(parts, "; ")
}

// withReadable is the raw arguments followed by their reading, when there is one.
func withReadable(p *policy.Policy, action string, canonical json.RawMessage) string {
	s := string(canonical)
	if r := readable(p, action, canonical); r != "" {
		s += "  — " + r
	}
	return s
}
