package cli

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/internal/policyreplay"
	"github.com/latchkit/latch/policy"
)

//go:embed starter.yaml
var starterPolicy []byte

func (a *app) initCommand() *cobra.Command {
	var template string
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a commented starter latch.yaml (never overwrites)",
		Long: `Write a commented starter policy to --policy, $LATCH_POLICY or ./latch.yaml.

--template NAME writes a sector starter instead: payments, devops, support, data,
healthcare-records or email-outreach (--template list says what each covers). Every starter
passes latch check --strict and latch verify as written; edit the names of its approvers and
agents, then check again.

An existing file is never overwritten: init refuses and changes nothing.`,
		Example: "  latch init && latch check\n  latch init --template list\n  latch init --template payments && latch check --strict && latch verify",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc, what := starterPolicy, "a starter policy"
			if cmd.Flags().Changed("template") {
				if template == templateListName {
					writeTemplateList(a.stdout)
					return nil
				}
				var err error
				if doc, err = starterTemplate(template); err != nil {
					return err
				}
				what = "the " + template + " starter policy"
			}
			path, err := a.policyPath()
			if err != nil {
				return err
			}
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("%s already exists; init never overwrites a policy (remove it first, or pass --policy NEW_FILE)", path)
			}
			if err != nil {
				return fmt.Errorf("write %s: %w", path, unwrapPath(err))
			}
			if _, err := f.Write(doc); err != nil {
				f.Close()
				return fmt.Errorf("write %s: %w", path, unwrapPath(err))
			}
			if err := f.Close(); err != nil {
				return fmt.Errorf("write %s: %w", path, unwrapPath(err))
			}
			fmt.Fprintf(a.stdout, "wrote %s: %s. Edit the actions, then run: latch check\n", path, what)
			return nil
		},
	}
	cmd.Flags().StringVar(&template, "template", "", "write the sector starter `NAME` (list: show them)")
	return cmd
}

// unwrapPath drops the *fs.PathError wrapper whose path the message already names.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// checkJSON is the output of `latch check --json`.
type checkJSON struct {
	OK          bool          `json:"ok"`
	File        string        `json:"file"`
	Hash        string        `json:"hash"`
	Version     *string       `json:"version"`
	Environment *string       `json:"environment"`
	Mode        string        `json:"mode"`
	Actions     int           `json:"actions"`
	Strict      bool          `json:"strict"`
	Warnings    []warningJSON `json:"warnings"`
}

type warningJSON struct {
	Code    string `json:"code"`
	Action  string `json:"action"`
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Message string `json:"message"`
}

func (a *app) checkCommand() *cobra.Command {
	var strict, asJSON bool
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Validate the policy, print its hash, warn on what is probably wrong",
		Long: `Load the policy strictly, as a guard would, and print its hash.

An invalid policy exits 1 with file:line:column and what was expected. What is legal but
probably wrong is warned about on stderr, each with file:line:column and a code:

  no_effect           may decide allow or approve but has no effect template: without an
                      effect key, nothing stops it running twice
  no_arguments        has conditions but no arguments: section, so a misspelt argument
                      name is caught only when a call arrives (denied missing_argument)
  partial_argument    an argument tested in some conditional rules but not in others
  shadowed_rule       a rule after one with no conditions, which always matches first
  unsatisfiable_rule  a rule whose conditions can never all hold
  never_allowed       rules none of which can ever decide allow or approve

--strict makes any warning fail (exit 1); --json prints one JSON object with the warnings.
See docs/policy.md for every key and every message.`,
		Example: "  latch check\n  latch check --strict --policy deploy/latch.yaml\n  latch check --json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := a.loadPolicy()
			if err != nil {
				return err
			}
			mode := p.Mode
			if mode == "" {
				mode = policy.ModeEnforce
			}
			ws := p.Warnings()
			failed := strict && len(ws) > 0
			if asJSON {
				out := checkJSON{
					OK: !failed, File: p.File, Hash: p.Hash, Version: jstr(p.Version), Environment: jstr(p.Environment),
					Mode: string(mode), Actions: len(p.Actions), Strict: strict, Warnings: []warningJSON{},
				}
				for _, w := range ws {
					out.Warnings = append(out.Warnings, warningJSON{Code: w.Code, Action: w.Action, File: p.File, Line: w.Pos.Line, Column: w.Pos.Column, Message: w.Msg})
				}
				if err := jsonLine(a.stdout, out); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(a.stdout, "%s %s: valid policy, %d %s, mode %s\n", a.mark(true), cell(p.File), len(p.Actions), plural(len(p.Actions), "action", "actions"), mode)
				t := newTable(a.stdout)
				t.row("hash", p.Hash)
				if p.Version != "" {
					t.row("version", cell(p.Version))
				}
				if p.Environment != "" {
					t.row("environment", cell(p.Environment))
				}
				if err := t.flush(); err != nil {
					return err
				}
				for _, w := range ws {
					fmt.Fprintf(a.stderr, "warning: %s:%d:%d: %s [%s]\n", cell(p.File), w.Pos.Line, w.Pos.Column, cell(w.Msg), w.Code)
				}
			}
			if failed {
				return fmt.Errorf("%d %s and --strict: fix them or drop --strict", len(ws), plural(len(ws), "warning", "warnings"))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&strict, "strict", false, "exit 1 when there is any warning")
	f.BoolVar(&asJSON, "json", false, "print one JSON object with the warnings")
	return cmd
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// evalJSON is the output of `latch eval --json`.
type evalJSON struct {
	Decision    string          `json:"decision"`
	Reason      string          `json:"reason"`
	Action      string          `json:"action"`
	ActionHash  string          `json:"action_hash"`
	EffectKey   *string         `json:"effect_key"`
	Resource    *string         `json:"resource"`
	Arguments   json.RawMessage `json:"arguments"`
	Principal   principalJSON   `json:"principal"`
	Environment string          `json:"environment"`
	PolicyHash  string          `json:"policy_hash"`
	ArgCheck    argCheckJSON    `json:"argument_check"`
	Trace       []ruleJSON      `json:"trace"`
}

// argCheckJSON is the check of the arguments against what the action needs, made before any
// rule: the first line of eval's trace.
type argCheckJSON struct {
	OK       bool     `json:"ok"`
	Reason   *string  `json:"reason"`
	Argument *string  `json:"argument"`
	Pointer  *string  `json:"pointer"`
	Message  *string  `json:"message"`
	Required []string `json:"required"`
	Declared bool     `json:"declared"` // the action has an arguments: section
}

type ruleJSON struct {
	Rule       int        `json:"rule"`
	Matched    bool       `json:"matched"`
	Decision   string     `json:"decision"`
	Conditions []condJSON `json:"conditions"`
}

type condJSON struct {
	Key  string `json:"key"`
	Held bool   `json:"held"`
	Why  string `json:"why"`
}

func (a *app) evalCommand() *cobra.Command {
	var args, agent, user, resource string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "eval ACTION [flags]",
		Short: "Decide one call against the policy; writes nothing",
		Long: `Decide one call as a guard would and show why: the decision, its reason, the
rule trace, the action hash a human's approval would be bound to, and the effect key.

eval never opens the store. The action hash covers the principal and environment, so
pass --agent (and --user) as the worker would for a hash that matches its approvals;
the environment is $LATCH_ENVIRONMENT, else the policy's, else production.
The first line of the trace is the check of the arguments against what the action
needs (docs/policy.md#arguments): every argument the policy names is present, and each
declared argument fits its declaration; a call that fails it is denied missing_argument
or invalid_arguments before any rule.
Exits 0 for any decision; 1 when the arguments cannot form an action (a float, a
template argument of the wrong type).`,
		Example: `  latch eval billing.charge --args '{"invoice_id":"inv_1","amount":200000}' --agent billing-worker`,
		Args:    exactArgs("ACTION"),
		RunE: func(cmd *cobra.Command, pos []string) error {
			var raw json.RawMessage
			if err := json.Unmarshal([]byte(args), &raw); err != nil {
				return usagef("--args is not JSON: %v", err)
			}
			if len(raw) == 0 || raw[0] != '{' {
				return usagef("--args must be a JSON object")
			}
			p, err := a.loadPolicy()
			if err != nil {
				return err
			}
			env := a.getenv("LATCH_ENVIRONMENT")
			if env == "" {
				env = p.Environment
			}
			if env == "" {
				env = "production"
			}
			ev, err := latch.EvaluatePolicy(p, &latch.Call{Action: pos[0], Arguments: []byte(args), Resource: resource},
				latch.Principal{Agent: agent, User: user}, env)
			if err != nil {
				return err
			}
			out := evalJSON{
				Decision: string(ev.Decision), Reason: ev.Reason, Action: ev.Action, ActionHash: ev.ActionHash,
				EffectKey: jstr(ev.EffectKey), Resource: jstr(ev.Resource), Arguments: ev.Arguments,
				Principal: principalJSON{Agent: jstr(agent), User: jstr(user)}, Environment: env,
				PolicyHash: ev.PolicyHash, Trace: []ruleJSON{},
			}
			act := p.Actions[ev.Action]
			out.ArgCheck = argCheckOf(ev.ArgumentCheck, act)
			for _, rt := range ev.Trace {
				r := ruleJSON{Rule: rt.Index, Matched: rt.Matched, Conditions: []condJSON{}}
				if act != nil && rt.Index < len(act.Rules) {
					r.Decision = string(act.Rules[rt.Index].Decision)
				}
				for _, c := range rt.Conditions {
					r.Conditions = append(r.Conditions, condJSON{Key: c.Key, Held: c.Held, Why: c.Why})
				}
				out.Trace = append(out.Trace, r)
			}
			if asJSON {
				return jsonLine(a.stdout, out)
			}
			return a.printEval(out, act)
		},
	}
	f := cmd.Flags()
	f.StringVar(&args, "args", "{}", "the call's arguments, a JSON `OBJECT`")
	f.StringVar(&agent, "agent", "eval", "the proposing agent, as the worker names itself")
	f.StringVar(&user, "user", "", "the user the agent acts for")
	f.StringVar(&resource, "resource", "", "an explicit resource (else rendered from the policy's template)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func (a *app) printEval(e evalJSON, act *policy.Action) error {
	t := newTable(a.stdout)
	t.row("decision", e.Decision)
	t.row("reason", e.Reason)
	t.row("action", cell(e.Action))
	t.row("arguments", cell(string(e.Arguments)))
	t.row("resource", dash(deref(e.Resource)))
	t.row("principal", principal(deref(e.Principal.Agent), deref(e.Principal.User)))
	t.row("environment", cell(e.Environment))
	t.row("action hash", e.ActionHash)
	t.row("effect key", dash(deref(e.EffectKey)))
	t.row("policy hash", e.PolicyHash)
	if err := t.flush(); err != nil {
		return err
	}
	if act == nil {
		fmt.Fprintln(a.stdout, "trace        none: the action is not listed, so it is denied")
		return nil
	}
	fmt.Fprintln(a.stdout, "trace")
	fmt.Fprintf(a.stdout, "  arguments  %s\n", a.argCheckLine(e.ArgCheck))
	if !e.ArgCheck.OK {
		fmt.Fprintf(a.stdout, "  → deny (%s): no rule is evaluated\n", deref(e.ArgCheck.Reason))
		return nil
	}
	if len(act.Rules) == 0 {
		fmt.Fprintf(a.stdout, "  decision   %s (the action has a bare decision)\n", act.Decision)
		return nil
	}
	for _, r := range e.Trace {
		verdict := "no match"
		if r.Matched {
			verdict = "match → " + r.Decision
		}
		fmt.Fprintf(a.stdout, "  rule[%d]  %s\n", r.Rule, verdict)
		if len(r.Conditions) == 0 {
			fmt.Fprintln(a.stdout, "    (no conditions: always holds)")
		}
		for _, c := range r.Conditions {
			fmt.Fprintf(a.stdout, "    %s %s: %s\n", a.mark(c.Held), c.Key, cell(c.Why))
		}
	}
	if e.Reason == policy.ReasonNoMatchingRule {
		fmt.Fprintln(a.stdout, "  no rule matched → deny")
	}
	return nil
}

func argCheckOf(c policy.ArgumentCheck, act *policy.Action) argCheckJSON {
	out := argCheckJSON{OK: c.OK(), Required: []string{}}
	if !c.OK() {
		out.Reason, out.Argument, out.Pointer, out.Message = jstr(c.Reason), jstr(c.Argument), jstr(c.Pointer), jstr(c.Msg)
	}
	if act != nil {
		for _, r := range act.Requirements() {
			out.Required = append(out.Required, r.Argument)
		}
		out.Declared = act.Arguments != nil
	}
	return out
}

// argCheckLine is the first line of eval's trace.
func (a *app) argCheckLine(c argCheckJSON) string {
	if !c.OK {
		return a.mark(false) + " " + deref(c.Reason) + " at " + cell(deref(c.Pointer)) + ": " + cell(deref(c.Message))
	}
	req := "nothing required"
	if len(c.Required) > 0 {
		req = "required present: " + cell(strings.Join(c.Required, ", "))
	}
	if c.Declared {
		return a.mark(true) + " " + req + "; every declared argument fits"
	}
	return a.mark(true) + " " + req + " (no arguments: section, so types are not checked)"
}

// policyCommand is `latch policy`: the commands about a policy change.
func (a *app) policyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Work with a proposed policy change (replay it against recorded calls, propose it for approval)",
		Args:  noArgs,
	}
	cmd.AddCommand(a.policyReplayCommand(), a.policyProposeCommand())
	return cmd
}

func (a *app) policyReplayCommand() *cobra.Command {
	var last int
	var since string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "replay FILE [--last N | --since T] [--json]",
		Short: "Re-decide recorded calls under a proposed policy and list every decision that would change",
		Long: `Read the call receipts of the store, rebuild each call (action, arguments, resource,
principal, environment, task) and decide it under the proposed policy FILE exactly as a guard
would — the policy's rules and, when FILE has an authority section, its grants and the store's
delegations — then list every call whose decision would change (allow→approve,
approve→deny, deny→allow, …) with the count of each change.

Each call is decided as of the moment it started: a grant's expires_at is compared with that
instant, and a delegation counts only if it existed then, revoked only if it had been revoked
by then. Receipts without a principal are skipped. A refusal that depended on a circumstance
of the moment rather than on the policy (an expired credential, a spent budget, a resource
outside the caller's scope, an unreadable store) is kept as recorded and counted as kept.

replay only reads: it executes nothing and writes nothing to the store. The changed calls
listed are capped at 1000 (in seq order); the counts always cover every call.

--last N replays the call receipts among the last N receipts; --since T those finished at or
after T (an RFC 3339 time, or a duration back from now: 90m, 24h, 7d). --json prints one
object: policy_hash, policy_version, replayed, skipped, kept, first_seq, last_seq, changed,
transitions {"allow→approve": N, …}, changes [{seq, receipt_id, action_id, action, principal,
environment, resource, effect_key, started_at, from, from_reason, to, reason}], truncated.
Exits 0 when the replay ran, whether or not any decision changes; 1 when it could not (an
invalid FILE, a store that cannot be read); 2 on a usage error.`,
		Example: "  latch policy replay proposed.yaml\n  latch policy replay proposed.yaml --last 500\n  latch policy replay proposed.yaml --since 7d --json",
		Args:    exactArgs("FILE"),
		RunE: func(cmd *cobra.Command, pos []string) error {
			opts := &policyreplay.Options{}
			if cmd.Flags().Changed("last") {
				if last < 1 {
					return usagef("--last %d: want a positive number", last)
				}
				opts.Last = last
			}
			if cmd.Flags().Changed("since") {
				if opts.Last > 0 {
					return usagef("--last and --since select receipts two ways: give one")
				}
				t, err := a.sinceTime(since)
				if err != nil {
					return err
				}
				opts.Since = t
			}
			proposed, err := policy.LoadContext(a.ctx, pos[0])
			if err != nil {
				return err
			}
			st, err := a.openRead()
			if err != nil {
				return err
			}
			defer st.Close()
			rep, err := policyreplay.Replay(a.ctx, st, proposed, opts)
			if err != nil {
				return err
			}
			if asJSON {
				return jsonLine(a.stdout, rep.View())
			}
			return a.printReplay(proposed, rep)
		},
	}
	f := cmd.Flags()
	f.IntVar(&last, "last", 0, "only the call receipts among the last `N` receipts")
	f.StringVar(&since, "since", "", "only receipts finished at or after `T` (RFC 3339, or a duration back from now: 90m, 24h, 7d)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// sinceTime reads --since: an RFC 3339 time, or a window back from now.
func (a *app) sinceTime(s string) (time.Time, error) {
	t, err := operator.ParseSince(s, a.now())
	if err != nil {
		return time.Time{}, usagef("--%s", err)
	}
	return t, nil
}

func (a *app) printReplay(p *policy.Policy, r *policyreplay.Report) error {
	what := cell(p.File) + " (" + p.Hash
	if p.Version != "" {
		what += ", version " + cell(p.Version)
	}
	what += ")"
	window := "no receipts"
	if r.FirstSeq != 0 {
		window = fmt.Sprintf("receipts %d-%d", r.FirstSeq, r.LastSeq)
	}
	fmt.Fprintf(a.stdout, "replayed %d %s under %s, %s\n", r.Replayed, plural(r.Replayed, "call", "calls"), what, window)
	if r.Skipped > 0 || r.Kept > 0 {
		fmt.Fprintf(a.stdout, "skipped %d without a principal; kept %d %s of the moment as recorded\n", r.Skipped, r.Kept, plural(r.Kept, "refusal", "refusals"))
	}
	if r.Changed == 0 {
		fmt.Fprintln(a.stdout, "no decision would change")
		return nil
	}
	fmt.Fprintf(a.stdout, "%d %s would change:\n", r.Changed, plural(r.Changed, "decision", "decisions"))
	t := newTable(a.stdout)
	for _, tr := range r.Transitions {
		t.row("  "+tr.Key(), strconv.Itoa(tr.Count))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout)
	t = newTable(a.stdout, "SEQ", "ACTION", "PRINCIPAL", "EFFECT KEY", "FROM", "TO", "REASON")
	for _, c := range r.Changes {
		from := string(c.From)
		if c.FromReason != "" {
			from += " (" + cell(c.FromReason) + ")"
		}
		t.row(strconv.FormatInt(c.Seq, 10), cell(c.Action), principal(c.Principal.Agent, c.Principal.User), dash(c.EffectKey),
			from, string(c.To), dash(c.Reason))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if r.Truncated {
		fmt.Fprintf(a.stdout, "(%d of %d changed calls listed; narrow the replay with --last or --since to see the rest)\n", len(r.Changes), r.Changed)
	}
	return nil
}
