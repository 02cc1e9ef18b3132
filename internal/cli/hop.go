package cli

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/receipt"
)

func (a *app) hopCommand() *cobra.Command {
	var parent, to, file, as, tokenKey string
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
delegable. --json prints it as one object (the shape of latch delegations --json).

--token-key FILE also signs a hop token (docs/agents.md#hop-tokens) with that Ed25519
key and prints it: the receiver presents it instead of the id, and a guard trusting
the key's public half (latch serve --hop-verify-key) checks it before reading the
store.`,
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
			var key ed25519.PrivateKey
			if tokenKey != "" {
				b, err := os.ReadFile(tokenKey)
				if err != nil {
					return fmt.Errorf("read --token-key %s: %w", tokenKey, unwrapPath(err))
				}
				if key, err = receipt.ParseSigningKey(b); err != nil {
					return usagef("--token-key %s: %v (make one with latch checkpoint keygen --out FILE)", tokenKey, err)
				}
			}
			g, err := a.openGuardConfig(true, latch.Config{HopKey: key})
			if err != nil {
				return err
			}
			defer g.Close()
			d, err := g.Hop(a.ctx, parent, doc, receiver, sender)
			if err != nil {
				return delegateError(parent, err)
			}
			var tok string
			if key != nil {
				if tok, err = g.HopToken(d); err != nil {
					return fmt.Errorf("hop %s was created, but its token was not: %w", d.ID, err)
				}
			}
			j := newDelegationJSON(d, nil)
			if asJSON && tok != "" {
				return jsonLine(a.stdout, map[string]any{"hop": j, "token": tok})
			}
			if asJSON {
				return jsonLine(a.stdout, j)
			}
			if tok != "" {
				defer fmt.Fprintf(a.stdout, "token %s\n", tok)
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
	f.StringVar(&tokenKey, "token-key", "", "also sign a hop token with the Ed25519 private key in `FILE` (PEM, as latch checkpoint keygen writes it) and print it, to hand the receiver instead of the id")
	f.BoolVar(&asJSON, "json", false, "print the hop as one JSON object (with --token-key: {\"hop\": …, \"token\": …})")
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

// readHopVerifyKeys reads the public keys of --hop-verify-key FILE flags.
func readHopVerifyKeys(files []string) ([]ed25519.PublicKey, error) {
	var keys []ed25519.PublicKey
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read --hop-verify-key %s: %w", f, unwrapPath(err))
		}
		k, err := receipt.ParsePublicKey(b)
		if err != nil {
			return nil, usagef("--hop-verify-key %s: %v (the .pub file latch checkpoint keygen writes)", f, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}
