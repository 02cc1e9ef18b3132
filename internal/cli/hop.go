package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/receipt"
)

func (a *app) hopCommand() *cobra.Command {
	var parent, to, file, as string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "hop --parent ID --to AGENT[/USER] --file GRANT.yaml --as AGENT[/USER] [flags]",
		Short: "Hand part of a grant to one other agent, for work passed on to it",
		Long: `Create a hop: a narrower grant beneath a policy grant or a delegation the sender
(--as) holds (--parent), addressed to one receiving agent (--to AGENT[/USER]). The
receiver presents the hop's id on the calls it makes for that work (Options.Hop,
latch.WithHop, "hop" over HTTP): those calls are decided by the hop's chain alone,
never by the receiver's own grants, and a hop that is missing, not live or addressed
to another agent refuses them authority_hop.

GRANT.yaml has the keys of a delegation's grant; its subject may be left out (it is
the receiver) and, if written, must be exactly the receiver:

  actions: [payments.refund]
  constraints: { amount_lte: 500 }
  expires_at: "2026-12-15T00:00:00Z"

It is checked as latch delegate checks a delegation: a hop wider than its parent on
any dimension exits 1 naming the reason and the dimension (authority_escalation on
constraints.amount_lte), recorded as a delegation_rejected event. A hop is never
delegable. --json prints it as one object (the shape of latch delegations --json).`,
		Example: "  latch hop --parent planner-refunds --to billing --file refund-500.yaml --as planner",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case strings.TrimSpace(parent) == "":
				return usagef("missing --parent ID (a grant id of the policy, or a dlg_… delegation id)")
			case strings.TrimSpace(to) == "":
				return usagef("missing --to AGENT[/USER] (the receiving agent)")
			case strings.TrimSpace(file) == "":
				return usagef("missing --file GRANT.yaml (the grant handed on)")
			}
			sender, err := parseCreator(as)
			if err != nil {
				return err
			}
			receiver, err := parseCreator(to)
			if err != nil {
				return usagef("--to: %s", strings.TrimPrefix(err.Error(), "who delegates? "))
			}
			doc, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("read %s: %w", file, unwrapPath(err))
			}
			g, err := a.openGuard(true)
			if err != nil {
				return err
			}
			defer g.Close()
			d, err := g.Hop(a.ctx, parent, doc, receiver, sender)
			if err != nil {
				return delegateError(parent, err)
			}
			j := newDelegationJSON(d, nil)
			if asJSON {
				return jsonLine(a.stdout, j)
			}
			fmt.Fprintf(a.stdout, "hop %s to %s beneath %s, by %s\n", d.ID, principal(deref(j.Subject.Agent), deref(j.Subject.User)), d.Parent, d.CreatedBy)
			t := newTable(a.stdout)
			grantRows(t, j)
			t.row("  expires_at", dash(deref(j.ExpiresAt)))
			if err := t.flush(); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "the receiver presents it as hop %s; revoke it with: latch revoke %s\n", d.ID, d.ID)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&parent, "parent", "", "the `ID` handed on from: a policy grant id or a dlg_… delegation id the sender holds")
	f.StringVar(&to, "to", "", "the receiving agent: `AGENT[/USER]`, one concrete agent")
	f.StringVar(&file, "file", "", "the grant handed on, a YAML `FILE` with the keys of a grant (no id; subject optional)")
	f.StringVar(&as, "as", "", "the sender: `AGENT[/USER]`, matched by the parent's subject")
	f.BoolVar(&asJSON, "json", false, "print the hop as one JSON object")
	return cmd
}

// inspectHop prints what ran under the hop id as a tree (operator.Hop): the hop, then, in chain
// order, its own records (its creation, a revocation) and each call decided under it, with the
// call's receipts and its effect record now.
func (a *app) inspectHop(id string, asJSON bool) error {
	st, err := a.openRead()
	if err != nil {
		return err
	}
	defer st.Close()
	t, err := a.operatorOf(st, a.displayPolicy(), nil).Hop(a.ctx, id)
	if errors.Is(err, operator.ErrNothingRecorded) {
		return fmt.Errorf("nothing recorded for hop %s in this store: no delegation by that id, and no receipt names it", cell(id))
	}
	if err != nil {
		return err
	}
	if asJSON {
		return jsonLine(a.stdout, t)
	}
	return writeHopTree(a.stdout, t)
}

// hopBranch is one child of the hop in the printed tree: one of its records, or a call.
type hopBranch struct {
	seq   int64
	line  string
	lines []string // the call's receipts and effect
}

// writeHopTree prints t as a tree, its branches in chain order.
func writeHopTree(w io.Writer, t *jsonview.HopTree) error {
	var b strings.Builder
	b.WriteString(hopHeading(t) + "\n")
	var branches []hopBranch
	for _, r := range t.Records {
		branches = append(branches, hopBranch{seq: r.Seq, line: receiptLine(r)})
	}
	for _, c := range t.Calls {
		who := principal(deref(c.Principal.Agent), deref(c.Principal.User))
		line := fmt.Sprintf("call %s  %s  by %s  %s", cell(c.ActionID), cell(c.Action), cell(who), cell(c.Result))
		if c.Reason != nil && *c.Reason != "" && *c.Reason != "decision" {
			line += "  " + cell(*c.Reason)
		}
		br := hopBranch{line: line}
		for _, r := range c.Receipts {
			br.lines = append(br.lines, receiptLine(r))
		}
		if len(c.Receipts) > 0 {
			br.seq = c.Receipts[0].Seq
		}
		if e := c.Effect; e != nil {
			el := fmt.Sprintf("effect %s  now %s (attempt %d)", cell(e.EffectKey), cell(e.State), e.Attempt)
			if e.ActionID != c.ActionID {
				el += ", held by " + cell(e.ActionID)
			}
			br.lines = append(br.lines, el)
		} else if c.EffectKey != nil {
			br.lines = append(br.lines, "effect "+cell(*c.EffectKey)+"  not reserved")
		}
		branches = append(branches, br)
	}
	sort.SliceStable(branches, func(i, j int) bool { return branches[i].seq < branches[j].seq })
	for i, br := range branches {
		last := i == len(branches)-1
		head, pad := "├── ", "│   "
		if last {
			head, pad = "└── ", "    "
		}
		b.WriteString(head + br.line + "\n")
		for k, l := range br.lines {
			h := "├── "
			if k == len(br.lines)-1 {
				h = "└── "
			}
			b.WriteString(pad + h + l + "\n")
		}
	}
	if len(branches) == 0 {
		b.WriteString("└── no receipt names it\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// hopHeading is the tree's first line: the hop, its state, sender, receiver, parent and expiry.
func hopHeading(t *jsonview.HopTree) string {
	d := t.Delegation
	if d == nil {
		return fmt.Sprintf("hop %s (not among this store's delegations)", cell(t.Hop))
	}
	kind := "hop"
	if d.Via == nil || *d.Via != "hop" {
		kind = "delegation" // not a hop: shown all the same, named for what it is
		if d.Via != nil {
			kind += " via " + cell(*d.Via)
		}
	}
	s := fmt.Sprintf("%s %s (%s): %s → %s, beneath %s", kind, cell(t.Hop), t.State, cell(d.CreatedBy),
		cell(principal(deref(d.Subject.Agent), deref(d.Subject.User))), cell(d.Parent))
	if d.ExpiresAt != nil {
		s += ", until " + *d.ExpiresAt
	}
	return s
}

// receiptLine is one receipt in the tree: its seq, kind, result and reason or author.
func receiptLine(r jsonview.Receipt) string {
	var d struct {
		Kind   string `json:"kind"`
		Result string `json:"result"`
		Reason string `json:"decision_reason"`
		By     string `json:"by"`
	}
	_ = json.Unmarshal(r.Receipt, &d) // an unreadable document prints as its seq alone
	l := fmt.Sprintf("seq %d  %s  %s", r.Seq, cell(receipt.KindOf(d.Kind)), cell(d.Result))
	switch {
	case d.By != "":
		l += "  by " + cell(d.By)
	case d.Reason != "" && d.Reason != "decision":
		l += "  " + cell(d.Reason)
	}
	return l
}
