package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/latchkit/latch/store"
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

// hopReceipt is one receipt naming a hop, as latch inspect --hop --json prints it.
type hopReceipt struct {
	Seq     int64           `json:"seq"`
	Hash    string          `json:"hash"`
	Receipt json.RawMessage `json:"receipt"`
}

// inspectHop prints every receipt naming the hop id: the sender's record of creating it (a
// delegation record whose delegation_id is the hop) and each call decided under it (whose
// authority.delegation_id is the hop), in chain order.
func (a *app) inspectHop(id string, asJSON bool) error {
	st, err := a.openRead()
	if err != nil {
		return err
	}
	defer st.Close()
	var found []hopReceipt
	for r, err := range st.Receipts(a.ctx, store.ReceiptFilter{}) {
		if err != nil {
			return err
		}
		var doc struct {
			Delegation *struct {
				DelegationID string `json:"delegation_id"`
			} `json:"delegation"`
			Authority *struct {
				DelegationID string `json:"delegation_id"`
			} `json:"authority"`
		}
		if json.Unmarshal(r.Doc, &doc) != nil {
			continue // an unreadable document names no hop; latch receipts --verify reports it
		}
		if (doc.Delegation != nil && doc.Delegation.DelegationID == id) || (doc.Authority != nil && doc.Authority.DelegationID == id) {
			found = append(found, hopReceipt{Seq: r.Seq, Hash: r.Hash, Receipt: r.Doc})
		}
	}
	if asJSON {
		if found == nil {
			found = []hopReceipt{}
		}
		return jsonLine(a.stdout, map[string]any{"hop": id, "receipts": found})
	}
	if len(found) == 0 {
		return fmt.Errorf("no receipt in this store names hop %s", cell(id))
	}
	fmt.Fprintf(a.stdout, "hop %s: %d receipt(s)\n", cell(id), len(found))
	t := newTable(a.stdout)
	t.row("SEQ", "KIND", "BY", "ACTION", "RESULT", "REASON")
	for _, f := range found {
		var d struct {
			Kind      string `json:"kind"`
			By        string `json:"by"`
			Action    string `json:"action"`
			Result    string `json:"result"`
			Reason    string `json:"decision_reason"`
			Principal *struct {
				Agent string `json:"agent"`
				User  string `json:"user"`
			} `json:"principal"`
		}
		_ = json.Unmarshal(f.Receipt, &d) // read once above
		by := d.By
		if d.Principal != nil {
			by = principal(d.Principal.Agent, d.Principal.User)
		}
		t.row(fmt.Sprint(f.Seq), cell(d.Kind), cell(by), dash(cell(d.Action)), cell(d.Result), dash(cell(d.Reason)))
	}
	return t.flush()
}
