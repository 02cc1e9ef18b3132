package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

var (
	actionIDPattern   = regexp.MustCompile(`^act_[0-9a-f]{32}$`)
	approvalIDPattern = regexp.MustCompile(`^apr_[0-9a-f]{32}$`)
)

func (a *app) inspectCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect ID",
		Short: "Everything about an action id, an approval id or an effect key",
		Long: `Answer "what happened to this?" in one command.

ID is an action id (act_…), an approval id (apr_…) or otherwise an effect key. The
output is the record (for an approval: the request with the exact arguments and the
hash they are bound to; for an effect: the effect record), the timeline of events in
the order they were written, and the receipt(s), each as its full document.`,
		Example: "  latch inspect act_5b1e…\n  latch inspect apr_6f0c…\n  latch inspect charge:inv_88",
		Args:    exactArgs("ID"),
		RunE: func(cmd *cobra.Command, pos []string) error {
			st, err := a.openRead()
			if err != nil {
				return err
			}
			defer st.Close()
			id := pos[0]
			switch {
			case actionIDPattern.MatchString(id):
				return a.inspectAction(st, id)
			case approvalIDPattern.MatchString(id):
				return a.inspectApproval(st, id)
			}
			return a.inspectEffect(st, id)
		},
	}
}

// evidence is what inspect gathers: events (deduplicated by id) and receipts (by seq).
type evidence struct {
	subject  string // the id or key inspected: not repeated on every timeline row
	events   map[int64]*store.Event
	receipts map[int64]receipt.Sealed
}

func newEvidence(subject string) *evidence {
	return &evidence{subject: subject, events: map[int64]*store.Event{}, receipts: map[int64]receipt.Sealed{}}
}

// seqs returns the receipts' seqs in order.
func (ev *evidence) seqs() []int64 {
	seqs := make([]int64, 0, len(ev.receipts))
	for s := range ev.receipts {
		seqs = append(seqs, s)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	return seqs
}

func (a *app) gather(st store.Store, ev *evidence, ef store.EventFilter, rf store.ReceiptFilter) error {
	events, err := st.Events(a.ctx, ef)
	if err != nil {
		return fmt.Errorf("read events: %w", err)
	}
	for _, e := range events {
		ev.events[e.ID] = e
	}
	for r, err := range st.Receipts(a.ctx, rf) {
		if err != nil {
			return fmt.Errorf("read receipts: %w", err)
		}
		ev.receipts[r.Seq] = r
	}
	return nil
}

func (a *app) inspectAction(st store.Store, id string) error {
	ev := newEvidence(id)
	if err := a.gather(st, ev, store.EventFilter{ActionID: id}, store.ReceiptFilter{ActionID: id}); err != nil {
		return err
	}
	if len(ev.events) == 0 && len(ev.receipts) == 0 {
		return fmt.Errorf("nothing recorded for action %s in this store", id)
	}
	fmt.Fprintf(a.stdout, "action %s\n", id)
	keys, approvals := map[string]bool{}, map[string]bool{}
	for _, e := range ev.events {
		if e.EffectKey != "" {
			keys[e.EffectKey] = true
		}
		if e.ApprovalID != "" {
			approvals[e.ApprovalID] = true
		}
	}
	t := newTable(a.stdout)
	for _, seq := range ev.seqs() {
		if f, ok := readReceipt(ev.receipts[seq]); ok {
			t.row("  action", cell(f.Action))
			t.row("  arguments", cell(string(f.Arguments)))
			if r := readable(a.displayPolicy(), f.Action, f.Arguments); r != "" {
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
	}
	for _, k := range sortedKeys(keys) {
		if e, err := st.Effect(a.ctx, k); err == nil {
			t.row("  effect", fmt.Sprintf("%s is now %s (attempt %d)", cell(k), effectState(e, a.now()), e.Attempt))
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
	return a.printEvidence(ev)
}

func (a *app) inspectApproval(st store.Store, id string) error {
	ap, err := st.Approval(a.ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no approval request %s in this store", id)
	}
	if err != nil {
		return fmt.Errorf("read approval: %w", err)
	}
	ev := newEvidence(id)
	if err := a.gather(st, ev, store.EventFilter{ApprovalID: id}, store.ReceiptFilter{ApprovalID: id}); err != nil {
		return err
	}
	// The actions that requested, spent or presented it: their events are part of its story.
	actions := map[string]bool{}
	if ap.ConsumedBy != "" {
		actions[ap.ConsumedBy] = true
	}
	for _, e := range ev.events {
		if e.ActionID != "" {
			actions[e.ActionID] = true
		}
	}
	for _, r := range ev.receipts {
		if f, ok := readReceipt(r); ok && f.ActionID != "" {
			actions[f.ActionID] = true
		}
	}
	for _, act := range sortedKeys(actions) {
		if err := a.gather(st, ev, store.EventFilter{ActionID: act}, store.ReceiptFilter{ActionID: act}); err != nil {
			return err
		}
	}

	d := approvalAction(ap)
	fmt.Fprintf(a.stdout, "approval %s\n", id)
	t := newTable(a.stdout)
	t.row("  status", approvalStatus(ap, a.now()))
	t.row("  action", cell(d.Name))
	t.row("  arguments", cell(string(d.Arguments)))
	if r := readable(a.displayPolicy(), d.Name, d.Arguments); r != "" {
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
	if err := t.flush(); err != nil {
		return err
	}
	if len(ap.Action) > 0 {
		fmt.Fprintln(a.stdout, "\nbound to this exact action (canonical form; its SHA-256 is the action hash):")
		fmt.Fprintf(a.stdout, "  %s\n", ap.Action)
	}
	return a.printEvidence(ev)
}

func (a *app) inspectEffect(st store.Store, key string) error {
	e, err := st.Effect(a.ctx, key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("read effect: %w", err)
	}
	ev := newEvidence(key)
	if err := a.gather(st, ev, store.EventFilter{EffectKey: key}, store.ReceiptFilter{EffectKey: key}); err != nil {
		return err
	}
	if e == nil && len(ev.events) == 0 && len(ev.receipts) == 0 {
		return fmt.Errorf("nothing recorded for %q in this store (not an effect key, and not an act_… or apr_… id)", key)
	}
	fmt.Fprintf(a.stdout, "effect %s\n", cell(key))
	t := newTable(a.stdout)
	if e == nil {
		t.row("  state", "no record (never reserved: every call on it was refused before reservation)")
	} else {
		t.row("  state", effectState(e, a.now()))
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
	return a.printEvidence(ev)
}

// printEvidence prints the timeline of events by id and each receipt's full document.
func (a *app) printEvidence(ev *evidence) error {
	ids := make([]int64, 0, len(ev.events))
	for id := range ev.events {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	fmt.Fprintln(a.stdout, "\ntimeline")
	if len(ids) == 0 {
		fmt.Fprintln(a.stdout, "  (no events)")
	} else {
		t := newTable(a.stdout)
		for _, id := range ids {
			e := ev.events[id]
			var detail []string
			if e.EffectKey != "" && e.EffectKey != ev.subject {
				detail = append(detail, "key="+e.EffectKey)
			}
			if e.ApprovalID != "" && e.ApprovalID != ev.subject {
				detail = append(detail, "approval="+e.ApprovalID)
			}
			if len(e.Payload) > 0 && string(e.Payload) != "null" && string(e.Payload) != "{}" {
				detail = append(detail, string(e.Payload))
			}
			actionID := e.ActionID
			if actionID == "" || actionID == ev.subject {
				actionID = "-"
			}
			t.row("  "+stamp(e.Time), e.Kind, actionID, cell(joinSpace(detail)))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	seqs := ev.seqs()
	fmt.Fprintf(a.stdout, "\n%s\n", plural(len(seqs), "receipt", "receipts"))
	if len(seqs) == 0 {
		fmt.Fprintln(a.stdout, "  (none: nothing terminal happened yet)")
	}
	for _, s := range seqs {
		r := ev.receipts[s]
		f, _ := readReceipt(r)
		fmt.Fprintf(a.stdout, "  seq %d  %s  %s  hash %s\n", r.Seq, cell(f.Result), stamp(f.FinishedAt), r.Hash)
		var b bytes.Buffer
		if err := json.Indent(&b, r.Doc, "    ", "  "); err != nil {
			fmt.Fprintf(a.stdout, "    %s\n", cell(string(r.Doc)))
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
