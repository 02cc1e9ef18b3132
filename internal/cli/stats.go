package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/receipt"
)

// resultColumns are the receipt results of docs/guarantees.md#results, in the order stats prints them. A result
// outside this list (a newer writer) gets a column of its own rather than being dropped.
var resultColumns = []string{receipt.Committed, receipt.Failed, receipt.Ambiguous, receipt.Denied, receipt.Blocked, receipt.Observed}

func (a *app) statsCommand() *cobra.Command {
	var since string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stats [flags]",
		Short: "Count receipts by action and result; in observe mode, what would have been blocked",
		Long: `Count the receipts finished in a window (default: all of them) by action and result.

When the window holds observe-mode receipts (result "observed", carrying would_have),
stats leads with what enforcement would have blocked: calls that would have been
denied, would have needed a human's approval, or whose effect would have been refused
(a duplicate, one in progress, an ambiguous one).

--json prints one object: since, until, receipts, counts [{action, result, count}],
observed, would_have_blocked [{action, would_have, reason, count}].`,
		Example: "  latch stats --since 24h\n  latch stats --since 7d --json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var window time.Duration
			if cmd.Flags().Changed("since") {
				d, err := operator.ParseWindow(since)
				if err != nil {
					return usagef("--%s", err)
				}
				window = d
			}
			st, err := a.openRead()
			if err != nil {
				return err
			}
			defer st.Close()
			o, err := operator.New(&operator.Config{Store: st, Now: a.now, Keeper: &readKeeper{a: a, st: st}})
			if err != nil {
				return err
			}
			out, err := o.Stats(a.ctx, window)
			if err != nil {
				return err
			}
			if asJSON {
				return jsonLine(a.stdout, out)
			}
			return a.printStats(out, since)
		},
	}
	cmd.Flags().StringVar(&since, "since", "", "only receipts finished in the last `DURATION` (90m, 24h, 7d)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func (a *app) printStats(s jsonview.Stats, since string) error {
	window := "all receipts"
	if s.Since != nil {
		window = fmt.Sprintf("receipts finished since %s (last %s)", *s.Since, since)
	}
	if s.Observed > 0 {
		n := 0
		for _, b := range s.WouldHaveBlocked {
			n += b.Count
		}
		fmt.Fprintf(a.stdout, "OBSERVE MODE: enforcement would have blocked %d of %d observed %s\n", n, s.Observed, plural(s.Observed, "call", "calls"))
		if n > 0 {
			t := newTable(a.stdout, "ACTION", "WOULD HAVE", "REASON", "CALLS")
			for _, b := range s.WouldHaveBlocked {
				t.row(cell(b.Action), b.WouldHave, dash(b.Reason), strconv.Itoa(b.Count))
			}
			if err := t.flush(); err != nil {
				return err
			}
		}
		fmt.Fprintln(a.stdout)
	}
	if s.Receipts == 0 {
		fmt.Fprintf(a.stdout, "%s: none\n", window)
		return nil
	}
	fmt.Fprintf(a.stdout, "%s: %d\n", window, s.Receipts)
	cols := append([]string(nil), resultColumns...)
	rows := map[string]map[string]int{}
	var actions []string
	for _, c := range s.Counts {
		if rows[c.Action] == nil {
			rows[c.Action] = map[string]int{}
			actions = append(actions, c.Action)
		}
		rows[c.Action][c.Result] += c.Count
		if !oneOf(c.Result, cols) {
			cols = append(cols, c.Result)
		}
	}
	header := []string{"ACTION"}
	for _, c := range cols {
		header = append(header, strings.ToUpper(c))
	}
	t := newTable(a.stdout, append(header, "TOTAL")...)
	totals := map[string]int{}
	for _, act := range actions {
		cells, sum := []string{cell(act)}, 0
		for _, c := range cols {
			n := rows[act][c]
			cells = append(cells, strconv.Itoa(n))
			sum += n
			totals[c] += n
		}
		t.row(append(cells, strconv.Itoa(sum))...)
	}
	if len(actions) > 1 {
		cells := []string{"TOTAL"}
		for _, c := range cols {
			cells = append(cells, strconv.Itoa(totals[c]))
		}
		t.row(append(cells, strconv.Itoa(s.Receipts))...)
	}
	return t.flush()
}
