package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/policyreplay"
	"github.com/latchkit/latch/policy"
)

// policyProposeCommand is `latch policy propose FILE`: a proposal of a new policy, stored as an
// approval request of the reserved action latch.policy.apply.
func (a *app) policyProposeCommand() *cobra.Command {
	var as string
	var last int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "propose FILE [--as NAME] [--replay-last N] [--json]",
		Short: "Propose FILE as the new policy: an approval request with its diff and replay report",
		Long: `Parse FILE and store a proposal to make it the policy: an approval request of the
reserved action latch.policy.apply, asked as NAME (--as, else $LATCH_APPROVER, else $USER),
carrying FILE's hash, a line diff of FILE against the policy in force (--policy, $LATCH_POLICY
or ./latch.yaml) and the report of replaying the last N call receipts under FILE (latch policy
replay; --replay-last, default 500, 0 for none).

The proposal is answered like any approval request — latch approve ID, the console, the API of
latch serve — by the people the approvers.policy_change rule of the policy in force names
(anyone but the proposer, one grant, when it names nobody). A guard opened with
RequireApprovedPolicy (latch serve --require-approved-policy) runs calls only under a policy
whose proposal was granted; proposing the policy in force itself (an empty diff) is how its
first approval is asked for. Prints the request's id; --json prints {approval_id, policy_hash,
status, expires_at}. Exits 1 when FILE is invalid, the store cannot be written, or FILE is
already approved.`,
		Example: "  latch policy propose next.yaml --as olga\n  latch approve apr_6f0c… --as omar",
		Args:    exactArgs("FILE"),
		RunE: func(cmd *cobra.Command, pos []string) error {
			if last < 0 {
				return usagef("--replay-last %d: want 0 or more", last)
			}
			name, err := a.operator(as, cmd.Flags().Changed("as"))
			if err != nil {
				return err
			}
			proposed, err := policy.LoadContext(a.ctx, pos[0])
			if err != nil {
				return err
			}
			curPath, err := a.policyPath()
			if err != nil {
				return err
			}
			current, err := a.loadPolicy()
			if err != nil {
				return err
			}
			oldText, err := os.ReadFile(curPath)
			if err != nil {
				return fmt.Errorf("read %s: %w", curPath, unwrapPath(err))
			}
			newText, err := os.ReadFile(pos[0])
			if err != nil {
				return fmt.Errorf("read %s: %w", pos[0], unwrapPath(err))
			}
			st, err := a.openWrite()
			if err != nil {
				return err
			}
			var replay json.RawMessage
			if last > 0 {
				rep, err := policyreplay.Replay(a.ctx, st, proposed, &policyreplay.Options{Last: last})
				if err != nil {
					st.Close()
					return err
				}
				if replay, err = json.Marshal(rep.View()); err != nil {
					st.Close()
					return fmt.Errorf("replay report: %w", err)
				}
			}
			g, err := latch.Open(a.ctx, &latch.Config{Policy: current, Store: st, Now: a.now})
			if err != nil {
				st.Close()
				return errors.New(reason(err))
			}
			defer g.Close()
			ctx := latch.WithPrincipal(a.ctx, latch.Principal{Agent: "cli", User: name})
			ap, err := g.ProposePolicy(ctx, proposed, lineDiff(curPath, pos[0], string(oldText), string(newText)), replay)
			if err != nil {
				if latch.ReasonOf(err) == string(latch.ReasonCommitted) {
					return fmt.Errorf("%s (%s) is already approved", pos[0], proposed.Hash)
				}
				return errors.New(reason(err))
			}
			if asJSON {
				return jsonLine(a.stdout, map[string]any{"approval_id": ap.ID, "policy_hash": proposed.Hash,
					"status": string(ap.Status), "expires_at": ap.ExpiresAt.UTC().Format("2006-01-02T15:04:05.000Z")})
			}
			fmt.Fprintf(a.stdout, "proposed %s (%s) as %s: approval request %s, expires %s\n", cell(pos[0]), proposed.Hash, cell(name),
				ap.ID, ap.ExpiresAt.UTC().Format("2006-01-02T15:04:05Z"))
			fmt.Fprintf(a.stdout, "answer it: latch approve %s --as NAME (or in the console)\n", ap.ID)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&as, "as", "", "who proposes: `NAME` (default $LATCH_APPROVER, else $USER); they cannot approve it")
	f.IntVar(&last, "replay-last", 500, "replay the last `N` receipts under FILE for the approver (0: no replay)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// lineDiff is a unified-style line diff of oldText (file oldName) against newText: hunks of
// changed lines with up to three lines of context, "" when the texts are equal.
func lineDiff(oldName, newName, oldText, newText string) string {
	a, b := splitLines(oldText), splitLines(newText)
	// lcs[i][j] is the length of the longest common subsequence of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type op struct {
		kind byte // ' ', '-', '+'
		text string
		ai   int // line number in a (1-based) of ' ' and '-'
		bi   int // line number in b of ' ' and '+'
	}
	var ops []op
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			ops = append(ops, op{' ', a[i], i + 1, j + 1})
			i, j = i+1, j+1
		case j < len(b) && (i == len(a) || lcs[i][j+1] >= lcs[i+1][j]):
			ops = append(ops, op{'+', b[j], i + 1, j + 1})
			j++
		default:
			ops = append(ops, op{'-', a[i], i + 1, j + 1})
			i++
		}
	}
	const context = 3
	var out strings.Builder
	for k := 0; k < len(ops); {
		if ops[k].kind == ' ' {
			k++
			continue
		}
		start := max(0, k-context)
		end := k
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*context {
				end = min(len(ops), end+context)
				break
			}
			end = run
		}
		if out.Len() == 0 {
			fmt.Fprintf(&out, "--- %s\n+++ %s\n", oldName, newName)
		}
		na, nb := 0, 0
		for _, o := range ops[start:end] {
			if o.kind != '+' {
				na++
			}
			if o.kind != '-' {
				nb++
			}
		}
		fmt.Fprintf(&out, "@@ -%d,%d +%d,%d @@\n", ops[start].ai, na, ops[start].bi, nb)
		for _, o := range ops[start:end] {
			out.WriteByte(o.kind)
			out.WriteString(o.text)
			out.WriteByte('\n')
		}
		k = end
	}
	return out.String()
}

func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}
