package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/store"
)

func (a *app) effectsCommand() *cobra.Command {
	var state string
	var asJSON, failIfAny bool
	cmd := &cobra.Command{
		Use:   "effects [flags]",
		Short: "List effect records (what ran, what needs a person)",
		Long: `List effect records by key.

States: executing (held by one attempt under a lease), committed, failed (the
executor said it did not act; the key may be retried) and ambiguous (the outcome is
unknown; every attempt is refused until latch resolve). An executing record whose
lease has passed is shown "executing (lease expired)": reading never changes it, the
next attempt on the key writes it ambiguous. An ambiguous record whose holder's lease
lapsed and who has not reported since (it may still be acting) is shown
"ambiguous (lease expired)". A record whose holder reported an outcome that
contradicts its resolution is marked "(conflict)"; the ERROR column says how.

--state STATE lists the records stored in that state; --state needs_person lists what
waits for a person, exactly what latch resolve accepts: ambiguous records, executing
records whose lease lapsed (their holder never finished) and resolved records with an
outcome conflict (docs/cli.md#what-needs-a-person). The HTTP API, the console and the
operator MCP server list the same set. --fail-if-any exits 1 when anything is listed,
for alerting from cron.

--json prints JSON Lines, one object per record (state is the stored state):
  effect_key, state, attempt, action, action_id, action_hash, lease_expires_at,
  lease_lapsed, error, conflict, result, resolved_by, note, created_at, updated_at`,
		Example: "  latch effects --state needs_person\n  latch effects --state needs_person --fail-if-any\n  latch effects --json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if state != "" && !oneOf(state, operator.EffectStates) {
				return usagef("--state %q: want one of %s", state, strings.Join(operator.EffectStates, ", "))
			}
			st, err := a.openRead()
			if err != nil {
				return err
			}
			defer st.Close()
			o := a.operatorOf(st, nil, nil)
			list, err := o.EffectRecords(a.ctx, state)
			if err != nil {
				return err
			}
			if err := a.printEffects(o, list, state, asJSON); err != nil {
				return err
			}
			if failIfAny && len(list) > 0 {
				return &exitCoder{code: ExitRefused, err: fmt.Errorf("%d effect record(s)%s", len(list), filterNote("state", state))}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "only records in this `STATE`: "+strings.Join(operator.EffectStates, "|")+" (needs_person: what latch resolve accepts)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON Lines, one record per line")
	cmd.Flags().BoolVar(&failIfAny, "fail-if-any", false, "exit 1 when any record is listed")
	return cmd
}

func (a *app) printEffects(o *operator.Operator, list []*store.Effect, state string, asJSON bool) error {
	if asJSON {
		for _, e := range list {
			if err := jsonLine(a.stdout, o.EffectView(e)); err != nil {
				return err
			}
		}
		return nil
	}
	if len(list) == 0 {
		fmt.Fprintln(a.stdout, "no effect records"+filterNote("state", state))
		return nil
	}
	t := newTable(a.stdout, "KEY", "STATE", "ATTEMPT", "ACTION", "ACTION ID", "UPDATED", "LEASE UNTIL", "RESOLVED BY", "ERROR")
	for _, e := range list {
		msg := e.Error
		if e.Conflict != "" {
			msg = "conflict: " + e.Conflict
		}
		t.row(cell(e.Key), operator.ReadState(o.EffectView(e)), strconv.Itoa(e.Attempt), cell(e.Action), e.ActionID,
			stamp(e.UpdatedAt), stamp(e.LeaseExpiresAt), dash(e.ResolvedBy), dash(cell(msg)))
	}
	return t.flush()
}

func (a *app) resolveCommand() *cobra.Command {
	var committed, failed bool
	var to, as, result, note string
	cmd := &cobra.Command{
		Use:   "resolve KEY --to committed|failed [flags]",
		Short: "Resolve an effect that needs a person: it happened, or it did not",
		Long: `Say what happened to an effect that needs a person, after checking the remote system.

  --to committed  it happened: later attempts on KEY are refused as duplicates
  --to failed     it did not happen: the next attempt on KEY runs (a renewal)

--committed and --failed are short for --to committed and --to failed.

An effect needs a person when it is ambiguous, executing under a lease that lapsed
(its holder never finished: it is written ambiguous and resolved in one transaction),
or resolved and marked with an outcome conflict (its holder reported the opposite
later): what latch effects --state needs_person lists. Anything else is refused and
unchanged.

--result JSON (with committed) stores the effect's result: later duplicates get it
(latch.ResultOf). --note TEXT keeps why, on the record and in its event.
The record keeps resolved_by = "cli:NAME", NAME from --as, else $LATCH_APPROVER,
else $USER. The same resolution over HTTP is POST /v1/effects/KEY/resolve
{"to","result","note"}, and the operator MCP server's resolve tool takes the same names.`,
		Example: "  latch resolve charge:inv_88 --to committed --as alice\n" +
			"  latch resolve charge:inv_88 --to committed --result '{\"charge_id\":\"ch_1\"}' --note 'seen in the dashboard'",
		Args: exactArgs("KEY"),
		RunE: func(cmd *cobra.Command, pos []string) error {
			n := 0
			for _, given := range []bool{committed, failed, cmd.Flags().Changed("to")} {
				if given {
					n++
				}
			}
			if n != 1 {
				return usagef("say what happened: exactly one of --to committed|failed, --committed or --failed")
			}
			switch {
			case committed:
				to = string(store.Committed)
			case failed:
				to = string(store.Failed)
			}
			r := &operator.Resolution{To: to, Note: note}
			if cmd.Flags().Changed("result") {
				r.Result = json.RawMessage(result)
				if strings.TrimSpace(result) == "" {
					r.Result = json.RawMessage(`""`) // refused below as JSON, not taken as none
				}
			}
			key := pos[0]
			if _, err := r.Check(key, ""); err != nil {
				return usagef("%s", resolveInputMessage(err))
			}
			name, err := a.operator(as, cmd.Flags().Changed("as"))
			if err != nil {
				return err
			}
			g, err := a.openOperator()
			if err != nil {
				return err
			}
			defer g.Close()
			o := a.operatorOf(g.Store(), g.Policy(), nil)
			e, err := o.Resolve(a.ctx, g, key, r, "cli:"+name)
			var ref *operator.Refusal
			var ie *operator.InputError
			switch {
			case errors.As(err, &ref) && ref.Reason == operator.ReasonEffectNotFound:
				return fmt.Errorf("no effect record %q in this store", key)
			case errors.As(err, &ref) && ref.Reason == operator.ReasonNotAmbiguous && ref.State != "":
				return fmt.Errorf("%s is %s, which needs no person; only an effect that needs a person can be resolved (latch effects --state needs_person), and nothing was changed", key, ref.State)
			case errors.As(err, &ref) && ref.Reason == operator.ReasonNotAmbiguous:
				return fmt.Errorf("%s needs no person; only an effect that needs a person can be resolved, and nothing was changed", key)
			case errors.As(err, &ie):
				return usagef("%s", resolveInputMessage(err))
			case err != nil:
				return fmt.Errorf("resolve %s: %s", key, reason(err))
			}
			next := "later attempts on it are refused as duplicates"
			if e.State == store.Failed {
				next = fmt.Sprintf("the next attempt on it may run, as attempt %d (within max_attempts)", e.Attempt+1)
			}
			fmt.Fprintf(a.stdout, "resolved %s: %s (attempt %d), by %s; %s\n", cell(e.Key), e.State, e.Attempt, e.ResolvedBy, next)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&to, "to", "", "what happened: `committed` (it happened) or failed (it did not)")
	f.BoolVar(&committed, "committed", false, "short for --to committed")
	f.BoolVar(&failed, "failed", false, "short for --to failed")
	f.StringVar(&as, "as", "", "who resolves: recorded as cli:`NAME` (default $LATCH_APPROVER, else $USER)")
	f.StringVar(&result, "result", "", "with committed: the effect's result, as `JSON`, handed to later duplicates")
	f.StringVar(&note, "note", "", "why: a `TEXT` kept on the record and in its event")
	return cmd
}

// resolveInputMessage says what is wrong with a resolution in the CLI's words (its flags).
func resolveInputMessage(err error) string {
	var ie *operator.InputError
	if !errors.As(err, &ie) {
		return err.Error()
	}
	switch ie.Field {
	case "to":
		return "--to: " + ie.Detail
	case "result":
		if strings.HasPrefix(ie.Detail, "a result goes with") {
			return "--result goes with --to committed: a failed effect has no result"
		}
		return "--" + ie.Detail
	case "note":
		return "--note: " + ie.Detail
	}
	return ie.Detail
}
