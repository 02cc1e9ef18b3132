package cli

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

func (a *app) receiptsCommand() *cobra.Command {
	var last int
	var asJSON, verify, checkpoints bool
	var pubFile string
	var anchors []string
	cmd := &cobra.Command{
		Use:   "receipts [flags]",
		Short: "List receipts; --verify checks the hash chain",
		Long: `List receipts in seq order: every decided call leaves one, hash-chained to the one
before it.

--json prints JSON Lines, one object per receipt: {"seq","hash","receipt","unreadable"}, the
document exactly as stored under "receipt" (what GET /v1/receipts lists too). A row whose
document does not read as a receipt says so in "unreadable" (its "receipt" is the stored
object, or null when it is not one).

--verify walks the whole chain and names every break with its seq: missing (a
deleted receipt), link_broken (prev_hash differs from the predecessor's hash),
content_altered (the document no longer hashes to its hash), head_mismatch (the
chain head differs from the last receipt). Any break exits 1. With --json it prints
{"ok","verified","breaks":[{"kind","seq","detail","subject","chain","table"}],"state","start",
"checkpoints"}, as GET /v1/receipts/verify answers.
The chain detects alteration, not authorship: someone who rewrites every row and the
head can forge a consistent chain.`,
		Example: "  latch receipts --last 20\n  latch receipts --verify\n  latch receipts --json | jq 'select(.receipt.result==\"ambiguous\")'",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lastGiven := cmd.Flags().Changed("last")
			switch {
			case lastGiven && last < 1:
				return usagef("--last %d: want a positive number", last)
			case lastGiven && verify:
				return usagef("--verify walks the whole chain; --last does not apply to it")
			case (checkpoints || len(anchors) > 0) && (!verify || pubFile == ""):
				return usagef("--checkpoints and --anchor go with --verify and --pubkey FILE")
			}
			st, err := a.openRead()
			if err != nil {
				return err
			}
			defer st.Close()
			if verify {
				return a.verifyChain(st, asJSON, checkpoints, pubFile, anchors)
			}
			o := a.operatorOf(st, nil, nil)
			rows := o.Receipts(a.ctx, store.ReceiptFilter{Last: last})
			if asJSON {
				for r, err := range rows {
					if err != nil {
						return err
					}
					if err := jsonLine(a.stdout, r.View); err != nil {
						return err
					}
				}
				return nil
			}
			return a.printReceipts(rows)
		},
	}
	f := cmd.Flags()
	f.IntVar(&last, "last", 0, "only the last `N` receipts")
	f.BoolVar(&asJSON, "json", false, "print JSON Lines (with --verify: one report object)")
	f.BoolVar(&verify, "verify", false, "verify the hash chain, and the state against it; exit 1 on any break")
	f.BoolVar(&checkpoints, "checkpoints", false, "with --verify: check every signed checkpoint against the chain (needs --pubkey)")
	f.StringVar(&pubFile, "pubkey", "", "the checkpoint public key `FILE` (PEM, from latch checkpoint keygen)")
	f.StringArrayVar(&anchors, "anchor", nil, "with --checkpoints: also check an exported checkpoint `FILE` (repeatable)")
	return cmd
}

func (a *app) printReceipts(rows func(func(operator.Receipt, error) bool)) error {
	var t *table
	n := 0
	for r, err := range rows {
		if err != nil {
			return err
		}
		if t == nil {
			t = newTable(a.stdout, "SEQ", "FINISHED", "ACTION", "DECISION", "RESULT", "PRINCIPAL", "EFFECT KEY", "ACTION ID", "ERROR")
		}
		n++
		f := r.Doc
		if f == nil {
			t.row(strconv.FormatInt(r.View.Seq, 10), "-", "(document unreadable: run latch receipts --verify)", "-", "-", "-", "-", "-", "-")
			continue
		}
		decision := f.Decision
		if f.DecisionReason != "" {
			decision += " (" + cell(f.DecisionReason) + ")"
		}
		who := principal(f.Principal.Agent, f.Principal.User)
		if !receipt.IsCall(f.Kind) {
			// A state change no call made: its kind, and who made it.
			decision, who = f.Kind, dash(cell(f.By+f.Approver))
		}
		t.row(strconv.FormatInt(f.Seq, 10), stamp(f.FinishedAt), cell(f.Action), decision, cell(f.Result),
			who, dash(f.EffectKey), dash(f.ActionID), dash(f.Error))
	}
	if n == 0 {
		fmt.Fprintln(a.stdout, "no receipts")
		return nil
	}
	return t.flush()
}

// verifyChain walks the chain against the head, both read in one snapshot (store.VerifyChain):
// workers appending meanwhile cannot make an intact chain look broken. With checkpoints, the
// signed checkpoints and the anchors are checked against it with the public key in pubFile.
func (a *app) verifyChain(st store.Store, asJSON, checkpoints bool, pubFile string, anchorFiles []string) error {
	var key ed25519.PublicKey
	var anchors []*receipt.Checkpoint
	if checkpoints {
		var err error
		if key, anchors, err = readCheckpointKey(pubFile, anchorFiles); err != nil {
			return err
		}
	}
	rep, err := a.operatorOf(st, nil, key).VerifyChain(a.ctx, anchors)
	if err != nil {
		return err
	}
	if !asJSON && rep.Start != nil {
		// A pruned chain: where it starts, and why, before anything else.
		fmt.Fprintf(a.stdout, "chain starts at seq %d: %s\n", rep.Start.Seq, cell(rep.Start.Reason))
	}
	if asJSON {
		if err := jsonLine(a.stdout, rep); err != nil {
			return err
		}
	} else if rep.OK {
		fmt.Fprintf(a.stdout, "%s chain intact: %d %s verified\n", a.mark(true), rep.Verified, plural(int(rep.Verified), "receipt", "receipts"))
		if s := rep.State; s != nil {
			fmt.Fprintf(a.stdout, "%s state matches the chain: %d %s, %d %s, %d %s checked", a.mark(true),
				s.Effects, plural(int(s.Effects), "effect", "effects"), s.Approvals, plural(int(s.Approvals), "approval", "approvals"),
				s.Delegations, plural(int(s.Delegations), "delegation", "delegations"))
			if s.Unchained > 0 {
				fmt.Fprintf(a.stdout, " (%d written before records carried state, not checked)", s.Unchained)
			}
			fmt.Fprintln(a.stdout)
		}
		if cp := rep.Checkpoints; cp != nil {
			held := cp.Held
			fmt.Fprintf(a.stdout, "%s %d signed %s", a.mark(true), held, plural(held, "checkpoint holds", "checkpoints hold"))
			if below := cp.Below; below > 0 {
				fmt.Fprintf(a.stdout, " (%d older %s the chain's start: what %s signed was pruned)", below,
					plural(below, "one is below", "ones are below"), plural(below, "it", "they"))
			}
			fmt.Fprintln(a.stdout)
		}
	} else {
		t := newTable(a.stdout)
		for _, b := range rep.Breaks {
			t.row(a.mark(false)+" "+b.Kind, "seq "+strconv.FormatInt(b.Seq, 10), cell(b.Detail))
		}
		// state_diverged names its subject in the detail; the seq is the last record about it.
		if err := t.flush(); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "chain broken: %d %s in %d %s read\n", len(rep.Breaks), plural(len(rep.Breaks), "break", "breaks"), rep.Verified, plural(int(rep.Verified), "receipt", "receipts"))
	}
	if rep.OK {
		return nil
	}
	named := make([]string, len(rep.Breaks))
	for i, b := range rep.Breaks {
		named[i] = fmt.Sprintf("%s at seq %d", b.Kind, b.Seq)
		if b.Subject != nil {
			named[i] = fmt.Sprintf("%s of %s (seq %d)", b.Kind, *b.Subject, b.Seq)
		}
	}
	return errors.New("receipt chain broken: " + strings.Join(named, ", "))
}
