package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

func (a *app) inspectCommand() *cobra.Command {
	var asJSON bool
	var grant, hop string
	cmd := &cobra.Command{
		Use:   "inspect ID | --grant ID | --hop ID",
		Short: "Everything about an action id, an approval id or an effect key; or a grant's budgets",
		Long: `Answer "what happened to this?" in one command.

ID is an action id (act_…), an approval id (apr_…) or otherwise an effect key. The
output is the record (for an approval: the request with the exact arguments and the
hash they are bound to; for an effect: the effect record), the timeline of events in
the order they were written, and the receipt(s), each as its full document.

--json prints one object, as the operator MCP server's inspect tool answers:
  id, kind (action, approval or effect), approval, effect, events, receipts

--grant ID inspects a policy grant or a delegation instead: whether it decides calls
now (a revoked, expired or cut delegation does not), and each of its budgets with
what it has consumed, what remains, and every charge it holds with why (an ambiguous
effect holds its charge until a person resolves it). With --json, one object:
  grant_id, kind (grant or delegation), parent, subject, actions, expires_at, live,
  not_live, budgets (each as latch budgets --json prints it)

--hop ID shows what ran under the hop as a tree: the hop and its state (live,
revoked, expired), then in chain order its own records (the sender's record of
creating it, its revocation) and each call decided under it (authority.delegation_id),
with the call's receipts and its effect record now. With --json, one object: hop,
delegation, state, records, calls (each action_id, action, principal, result, reason,
effect_key, effect, receipts), receipts (every receipt naming the hop).`,
		Example: "  latch inspect act_5b1e…\n  latch inspect apr_6f0c…\n  latch inspect charge:inv_88 --json\n  latch inspect --grant ops-billing",
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("grant") || cmd.Flags().Changed("hop") {
				return noArgs(cmd, args)
			}
			return exactArgs("ID")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, pos []string) error {
			if cmd.Flags().Changed("hop") {
				if hop == "" || cmd.Flags().Changed("grant") {
					return usagef("--hop: say which hop (and not --grant too)")
				}
				return a.inspectHop(hop, asJSON)
			}
			if cmd.Flags().Changed("grant") {
				if grant == "" {
					return usagef("--grant: say which grant or delegation")
				}
				return a.inspectGrant(grant, asJSON)
			}
			st, err := a.openRead()
			if err != nil {
				return err
			}
			defer st.Close()
			pol := a.displayPolicy()
			o := a.operatorOf(st, pol, nil)
			id := pos[0]
			in, err := o.Inspect(a.ctx, id)
			switch {
			case errors.Is(err, operator.ErrNothingRecorded) && operator.KindOf(id) == operator.KindAction:
				return fmt.Errorf("nothing recorded for action %s in this store", id)
			case errors.Is(err, operator.ErrNothingRecorded):
				return fmt.Errorf("nothing recorded for %q in this store (not an effect key, and not an act_… or apr_… id)", id)
			case errors.Is(err, store.ErrNotFound):
				return fmt.Errorf("no approval request %s in this store", id)
			case err != nil:
				return err
			}
			if asJSON {
				return jsonLine(a.stdout, o.View(in))
			}
			switch in.Kind {
			case operator.KindAction:
				return a.inspectAction(o, pol, in)
			case operator.KindApproval:
				return a.inspectApproval(pol, in)
			}
			return a.inspectEffect(o, in)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().StringVar(&grant, "grant", "", "inspect the policy grant or delegation `ID`: its budgets, consumed and held")
	cmd.Flags().StringVar(&hop, "hop", "", "show the tree of what ran under the hop `ID`: its records and the calls decided under it")
	return cmd
}

func (a *app) inspectAction(o *operator.Operator, pol *policy.Policy, in *operator.Inspection) error {
	fmt.Fprintf(a.stdout, "action %s\n", in.ID)
	keys, approvals := map[string]bool{}, map[string]bool{}
	for _, e := range in.Events {
		if e.EffectKey != "" {
			keys[e.EffectKey] = true
		}
		if e.ApprovalID != "" {
			approvals[e.ApprovalID] = true
		}
	}
	t := newTable(a.stdout)
	for _, r := range in.Receipts {
		f := r.Doc
		if f == nil {
			continue
		}
		t.row("  action", cell(f.Action))
		t.row("  arguments", cell(string(f.Arguments)))
		if r := readable(pol, f.Action, f.Arguments); r != "" {
			t.row("  reads as", cell(r))
		}
		t.row("  principal", principal(f.Principal.Agent, f.Principal.User))
		t.row("  action hash", f.ActionHash)
		t.row("  result", cell(f.Result))
		if f.Error != "" {
			t.row("  error", cell(f.Error)) // why it was refused, or what the executor said
		}
		if f.EffectKey != "" {
			keys[f.EffectKey] = true
		}
		if f.ApprovalID != "" {
			approvals[f.ApprovalID] = true
		}
		break
	}
	st := o.Store()
	for _, k := range sortedKeys(keys) {
		if e, err := st.Effect(a.ctx, k); err == nil {
			t.row("  effect", fmt.Sprintf("%s is now %s (attempt %d)", cell(k), operator.ReadState(o.EffectView(e)), e.Attempt))
		}
	}
	for _, id := range sortedKeys(approvals) {
		if ap, err := st.Approval(a.ctx, id); err == nil {
			t.row("  approval", fmt.Sprintf("%s is now %s", id, approvalStatus(ap, a.now())))
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	return a.printEvidence(pol, in)
}

func (a *app) inspectApproval(pol *policy.Policy, in *operator.Inspection) error {
	ap, id := in.Approval, in.ID
	d := approvalAction(pol, ap)
	fmt.Fprintf(a.stdout, "approval %s\n", id)
	t := newTable(a.stdout)
	t.row("  status", approvalStatus(ap, a.now()))
	t.row("  action", cell(d.Name))
	t.row("  arguments", cell(string(d.Arguments)))
	if r := readable(pol, d.Name, d.Arguments); r != "" {
		t.row("  reads as", cell(r))
	}
	t.row("  resource", dash(deref(d.Resource)))
	t.row("  principal", principal(deref(d.Principal.Agent), deref(d.Principal.User)))
	t.row("  environment", dash(d.Environment))
	t.row("  action hash", ap.ActionHash)
	t.row("  policy hash", dash(ap.PolicyHash))
	t.row("  created", stamp(ap.CreatedAt))
	t.row("  expires", stamp(ap.ExpiresAt))
	answered := dash(ap.Approver)
	if !ap.AnsweredAt.IsZero() {
		answered += " at " + stamp(ap.AnsweredAt)
	}
	t.row("  approver", answered)
	if ap.ConsumedBy != "" {
		t.row("  consumed by", ap.ConsumedBy+" at "+stamp(ap.ConsumedAt))
	}
	remind, escalate := operator.ReadReminders(jsonview.RemindersOf(pol, ap, in.Events))
	if remind != "" {
		t.row("  reminder", cell(remind))
	}
	if escalate != "" {
		t.row("  escalation", cell(escalate))
	}
	if exp := operator.ReadExpiry(ap, jsonview.OnExpiryOf(pol, ap)); exp != "" {
		t.row("  at expiry", cell(exp))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(ap.Action) > 0 {
		doc, redacted := jsonview.ShownActionDocument(pol, ap)
		if redacted {
			fmt.Fprintln(a.stdout, "\nbound to this exact action (canonical form, the arguments the policy redacts masked; its SHA-256 over the full values is the action hash):")
		} else {
			fmt.Fprintln(a.stdout, "\nbound to this exact action (canonical form; its SHA-256 is the action hash):")
		}
		fmt.Fprintf(a.stdout, "  %s\n", doc)
	}
	return a.printEvidence(pol, in)
}

func (a *app) inspectEffect(o *operator.Operator, in *operator.Inspection) error {
	e, key := in.Effect, in.ID
	fmt.Fprintf(a.stdout, "effect %s\n", cell(key))
	t := newTable(a.stdout)
	if e == nil {
		t.row("  state", "no record (never reserved: every call on it was refused before reservation)")
	} else {
		t.row("  state", operator.ReadState(o.EffectView(e)))
		t.row("  attempt", strconv.Itoa(e.Attempt))
		t.row("  action", cell(e.Action))
		t.row("  holder", e.ActionID+" (the attempt that wrote this state)")
		t.row("  action hash", e.ActionHash)
		t.row("  lease until", stamp(e.LeaseExpiresAt))
		t.row("  error", dash(e.Error))
		t.row("  resolved by", dash(e.ResolvedBy))
		t.row("  created", stamp(e.CreatedAt))
		t.row("  updated", stamp(e.UpdatedAt))
		if len(e.Result) > 0 {
			t.row("  result", cell(string(e.Result)))
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	return a.printEvidence(o.Policy(), in)
}

// printEvidence prints the timeline of events by id and each receipt's full document.
func (a *app) printEvidence(pol *policy.Policy, in *operator.Inspection) error {
	fmt.Fprintln(a.stdout, "\ntimeline")
	if len(in.Events) == 0 {
		fmt.Fprintln(a.stdout, "  (no events)")
	} else {
		t := newTable(a.stdout)
		for _, e := range in.Events {
			var detail []string
			if e.EffectKey != "" && e.EffectKey != in.ID {
				detail = append(detail, "key="+e.EffectKey)
			}
			if e.ApprovalID != "" && e.ApprovalID != in.ID {
				detail = append(detail, "approval="+e.ApprovalID)
			}
			// The payload as every surface shows it: redacted arguments masked.
			if p := jsonview.NewEvent(pol, e).Payload; string(p) != "null" && string(p) != "{}" {
				detail = append(detail, string(p))
			}
			actionID := e.ActionID
			if actionID == "" || actionID == in.ID {
				actionID = "-"
			}
			t.row("  "+stamp(e.Time), e.Kind, actionID, cell(joinSpace(detail)))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(a.stdout, "\n%s\n", plural(len(in.Receipts), "receipt", "receipts"))
	if len(in.Receipts) == 0 {
		fmt.Fprintln(a.stdout, "  (none: nothing terminal happened yet)")
	}
	for _, r := range in.Receipts {
		f := r.Doc
		if f == nil {
			f = &receipt.Receipt{}
		}
		fmt.Fprintf(a.stdout, "  seq %d  %s  %s  hash %s\n", r.View.Seq, cell(f.Result), stamp(f.FinishedAt), r.View.Hash)
		if r.View.Unreadable != nil {
			fmt.Fprintf(a.stdout, "    (%s)\n", cell(*r.View.Unreadable))
		}
		var b bytes.Buffer
		if json.Indent(&b, r.View.Receipt, "    ", "  ") != nil || string(r.View.Receipt) == "null" {
			continue
		}
		fmt.Fprintf(a.stdout, "    %s\n", b.String())
	}
	return nil
}

func joinSpace(s []string) string {
	var b bytes.Buffer
	for i, x := range s {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(x)
	}
	return b.String()
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
