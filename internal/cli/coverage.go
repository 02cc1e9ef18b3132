package cli

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/latchkit/latch/internal/jsonview"
)

func (a *app) coverageCommand() *cobra.Command {
	var since string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "coverage [--since T] [--json]",
		Short: "Which policy rules decided the recorded calls, and which never fired",
		Long: `Count, for each action of the policy and each of its rules (or its bare decision),
the recorded calls it decided, and list what the recorded calls never exercised: the
rules that decided no call, the actions no call named, and the effect templates that
never produced an effect key. Calls to actions the policy does not list are counted too.

A call is counted once: from its receipt, or — when it has none yet, such as a call
that asked for an approval nobody answered — from its policy_evaluated event; a call
made again with its approval is counted by its receipt only. What decided a call is the
reason its record names: rule[i], decision (a bare decision), no_matching_rule, or a
refusal that came after the policy's decision (a budget, a scope, a precondition, the
authority axis) or before it (the call's arguments), counted under OTHER by reason.

Only calls decided under this policy (its hash) are attributed to its rules; calls
decided under another policy are counted apart, since a rule's index means nothing there.

--since T counts the calls decided at or after T (an RFC 3339 time, or a duration back
from now: 90m, 24h, 7d). --json prints one object, as GET /v1/coverage returns it:
policy_hash, policy_version, since, until, calls, other_policies, actions [{action, calls,
rules [{action, rule, line, decision, calls}], no_matching_rule, other_reasons [{name,
count}], effect, effect_keys}], never_fired [{action, rule, line, decision, calls}],
never_called, templates_without_key, unlisted [{name, count}].
See docs/coverage.md.`,
		Example: "  latch coverage\n  latch coverage --since 7d\n  latch coverage --json | jq '.never_fired'",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var from time.Time
			if cmd.Flags().Changed("since") {
				t, err := a.sinceTime(since)
				if err != nil {
					return err
				}
				from = t
			}
			pol, err := a.loadPolicy()
			if err != nil {
				return err
			}
			st, err := a.openRead()
			if err != nil {
				return err
			}
			defer st.Close()
			out, err := a.operatorOf(st, pol, nil).Coverage(a.ctx, from)
			if err != nil {
				return err
			}
			if asJSON {
				return jsonLine(a.stdout, out)
			}
			return a.printCoverage(pol.File, out)
		},
	}
	cmd.Flags().StringVar(&since, "since", "", "only calls decided at or after `T` (RFC 3339, or a duration back from now: 90m, 24h, 7d)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func (a *app) printCoverage(file string, c jsonview.Coverage) error {
	what := cell(file) + " (" + c.PolicyHash
	if c.PolicyVersion != nil {
		what += ", version " + cell(*c.PolicyVersion)
	}
	what += ")"
	window := "every recorded call"
	if c.Since != nil {
		window = "calls decided since " + *c.Since
	}
	fmt.Fprintf(a.stdout, "coverage of %s: %s: %d\n", what, window, c.Calls)
	if c.OtherPolicies > 0 {
		fmt.Fprintf(a.stdout, "(%d %s decided under another policy, not counted here)\n", c.OtherPolicies, plural(c.OtherPolicies, "call", "calls"))
	}
	fmt.Fprintln(a.stdout)
	t := newTable(a.stdout, "ACTION", "RULE", "LINE", "DECISION", "CALLS")
	for _, act := range c.Actions {
		for _, r := range act.Rules {
			t.row(cell(act.Action), r.Rule, strconv.Itoa(r.Line), r.Decision, strconv.Itoa(r.Calls))
		}
		if act.NoMatchingRule > 0 {
			t.row(cell(act.Action), "no_matching_rule", "-", "deny", strconv.Itoa(act.NoMatchingRule))
		}
		for _, o := range act.OtherReasons {
			t.row(cell(act.Action), "OTHER "+cell(o.Name), "-", "deny", strconv.Itoa(o.Count))
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout)
	if len(c.NeverFired) == 0 {
		fmt.Fprintln(a.stdout, "every rule decided at least one call")
	} else {
		fmt.Fprintf(a.stdout, "%d %s never fired:\n", len(c.NeverFired), plural(len(c.NeverFired), "rule", "rules"))
		for _, r := range c.NeverFired {
			fmt.Fprintf(a.stdout, "  %s %s (line %d, %s)\n", cell(r.Action), r.Rule, r.Line, r.Decision)
		}
	}
	if len(c.NeverCalled) > 0 {
		fmt.Fprintf(a.stdout, "%d %s never called:\n", len(c.NeverCalled), plural(len(c.NeverCalled), "action", "actions"))
		for _, n := range c.NeverCalled {
			fmt.Fprintf(a.stdout, "  %s\n", cell(n))
		}
	}
	if len(c.TemplatesWithoutKey) > 0 {
		fmt.Fprintf(a.stdout, "%d effect %s never produced a key:\n", len(c.TemplatesWithoutKey), plural(len(c.TemplatesWithoutKey), "template", "templates"))
		for _, act := range c.Actions {
			if act.Effect != nil && act.EffectKeys == 0 {
				fmt.Fprintf(a.stdout, "  %s %s\n", cell(act.Action), cell(*act.Effect))
			}
		}
	}
	if len(c.Unlisted) > 0 {
		fmt.Fprintln(a.stdout, "calls to actions the policy does not list:")
		for _, u := range c.Unlisted {
			fmt.Fprintf(a.stdout, "  %s %d\n", cell(u.Name), u.Count)
		}
	}
	return nil
}
