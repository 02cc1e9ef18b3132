package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/store"
)

var effectStates = []string{string(store.Executing), string(store.Committed), string(store.Failed), string(store.Ambiguous)}

func (a *app) effectsCommand() *cobra.Command {
	var state string
	var asJSON, failIfAny bool
	cmd := &cobra.Command{
		Use:   "effects [flags]",
		Short: "List effect records (what ran, what is ambiguous)",
		Long: `List effect records by key.

States: executing (held by one attempt under a lease), committed, failed (the
executor said it did not act; the key may be retried) and ambiguous (the outcome is
unknown; every attempt is refused until latch resolve). An executing record whose
lease has passed is shown "executing (lease expired)": reading never changes it, the
next attempt on the key writes it ambiguous. An ambiguous record whose holder's lease
lapsed and who has not reported since (it may still be acting) is shown
"ambiguous (lease expired)". A record whose holder reported an outcome that
contradicts its resolution is marked "(conflict)"; the ERROR column says how.

--state ambiguous also lists the executing records whose lease has lapsed (their
holder never finished): they are what waits for a person, and latch resolve accepts
them. --fail-if-any exits 1 when anything is listed, for alerting from cron.

--json prints JSON Lines, one object per record (state is the stored state):
  effect_key, state, attempt, action, action_id, action_hash, lease_expires_at,
  lease_lapsed, error, conflict, result, resolved_by, note, created_at, updated_at`,
		Example: "  latch effects --state ambiguous\n  latch effects --state ambiguous --fail-if-any\n  latch effects --json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if state != "" && !oneOf(state, effectStates) {
				return usagef("--state %q: want one of %s", state, strings.Join(effectStates, ", "))
			}
			st, err := a.openRead()
			if err != nil {
				return err
			}
			defer st.Close()
			now := a.now()
			list, err := st.Effects(a.ctx, store.EffectFilter{State: store.State(state)})
			if err != nil {
				return fmt.Errorf("list effects: %w", err)
			}
			if state == string(store.Ambiguous) {
				// The holders that never finished wait for a person as much as the ambiguous
				// records do; they are listed without writing anything.
				executing, err := st.Effects(a.ctx, store.EffectFilter{State: store.Executing})
				if err != nil {
					return fmt.Errorf("list effects: %w", err)
				}
				for _, e := range executing {
					if store.LeaseLapsed(e, now) {
						list = append(list, e)
					}
				}
				slices.SortFunc(list, func(x, y *store.Effect) int { return strings.Compare(x.Key, y.Key) })
			}
			if err := a.printEffects(list, state, asJSON, now); err != nil {
				return err
			}
			if failIfAny && len(list) > 0 {
				return &exitCoder{code: ExitRefused, err: fmt.Errorf("%d effect record(s)%s", len(list), filterNote("state", state))}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "only records in this `STATE`: "+strings.Join(effectStates, "|")+" (ambiguous includes lapsed leases)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON Lines, one record per line")
	cmd.Flags().BoolVar(&failIfAny, "fail-if-any", false, "exit 1 when any record is listed")
	return cmd
}

func (a *app) printEffects(list []*store.Effect, state string, asJSON bool, now time.Time) error {
	if asJSON {
		for _, e := range list {
			if err := jsonLine(a.stdout, newEffectJSON(e, now)); err != nil {
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
		t.row(cell(e.Key), effectState(e, now), strconv.Itoa(e.Attempt), cell(e.Action), e.ActionID,
			stamp(e.UpdatedAt), stamp(e.LeaseExpiresAt), dash(e.ResolvedBy), dash(cell(msg)))
	}
	return t.flush()
}

func (a *app) resolveCommand() *cobra.Command {
	var committed, failed bool
	var as, result, note string
	cmd := &cobra.Command{
		Use:   "resolve KEY --committed|--failed [flags]",
		Short: "Resolve an ambiguous effect: it happened, or it did not",
		Long: `Say what happened to an ambiguous effect, after checking the remote system.

  --committed  it happened: later attempts on KEY are refused as duplicates
  --failed     it did not happen: the next attempt on KEY runs (a renewal)

An ambiguous effect can be resolved, and so can an executing one whose lease has
lapsed (its holder never finished: it is written ambiguous and resolved in one
transaction), and a resolved one marked with a conflict (its holder reported the
opposite later). Anything else is refused and unchanged.

--result JSON (with --committed) stores the effect's result: later duplicates get it
(latch.ResultOf). --note TEXT keeps why, on the record and in its event.
The record keeps resolved_by = "cli:NAME", NAME from --as, else $LATCH_APPROVER,
else $USER.`,
		Example: "  latch resolve charge:inv_88 --committed --as alice\n" +
			"  latch resolve charge:inv_88 --committed --result '{\"charge_id\":\"ch_1\"}' --note 'seen in the dashboard'",
		Args: exactArgs("KEY"),
		RunE: func(cmd *cobra.Command, pos []string) error {
			if committed == failed {
				return usagef("say what happened: exactly one of --committed or --failed")
			}
			var res json.RawMessage
			if cmd.Flags().Changed("result") {
				if failed {
					return usagef("--result goes with --committed: a failed effect has no result")
				}
				_, canonical, err := canon.ParseCanonical([]byte(result))
				if err != nil {
					return usagef("--result: %v", err)
				}
				res = canonical
			}
			name, err := a.operator(as, cmd.Flags().Changed("as"))
			if err != nil {
				return err
			}
			to := store.Committed
			if failed {
				to = store.Failed
			}
			g, err := a.openOperator()
			if err != nil {
				return err
			}
			defer g.Close()
			st := g.Store()
			key := pos[0]
			e, err := g.ResolveEffect(a.ctx, &store.ResolveRequest{Key: key, To: to, By: "cli:" + name, Result: res, Note: note})
			switch {
			case errors.Is(err, store.ErrNotFound):
				return fmt.Errorf("no effect record %q in this store", key)
			case errors.Is(err, store.ErrNotAmbiguous):
				cur, rerr := st.Effect(a.ctx, key)
				if rerr != nil {
					return fmt.Errorf("%s is not ambiguous; only an ambiguous effect can be resolved", key)
				}
				return fmt.Errorf("%s is %s, not ambiguous; only an ambiguous effect can be resolved, and nothing was changed", key, effectState(cur, a.now()))
			case err != nil:
				return fmt.Errorf("resolve %s: %s", key, reason(err))
			}
			next := "later attempts on it are refused as duplicates"
			if to == store.Failed {
				next = fmt.Sprintf("the next attempt on it may run, as attempt %d (within max_attempts)", e.Attempt+1)
			}
			fmt.Fprintf(a.stdout, "resolved %s: %s (attempt %d), by %s; %s\n", cell(e.Key), e.State, e.Attempt, e.ResolvedBy, next)
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&committed, "committed", false, "the effect happened")
	f.BoolVar(&failed, "failed", false, "the effect did not happen")
	f.StringVar(&as, "as", "", "who resolves: recorded as cli:`NAME` (default $LATCH_APPROVER, else $USER)")
	f.StringVar(&result, "result", "", "with --committed: the effect's result, as `JSON`, handed to later duplicates")
	f.StringVar(&note, "note", "", "why: a `TEXT` kept on the record and in its event")
	return cmd
}
