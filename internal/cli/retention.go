package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Retention commands (docs/retention.md): latch prune, latch hold.

func (a *app) pruneCommand() *cobra.Command {
	var before, pubFile, as string
	var dryRun, asJSON bool
	cmd := &cobra.Command{
		Use:   "prune --before DATE|SEQ [--pubkey FILE] [--dry-run]",
		Short: "Remove old receipts and events below a signed checkpoint",
		Long: `Remove the receipts below a signed checkpoint, and the events and records nothing
kept needs any more, in one transaction: all or nothing.

--before SEQ prunes below the newest stored checkpoint at or below seq SEQ;
--before DATE (2026-01-31, or an RFC 3339 time) below the newest one signed before
DATE. The checkpoint's own receipt is kept as the chain's new start, and latch
receipts --verify then says where the chain starts and why. Sign checkpoints first
with latch checkpoint --key FILE; with --pubkey FILE only checkpoints that key
signed qualify.

Kept whatever their age: ambiguous and executing effects, pending and granted
approvals, delegations, holds, and what the removed receipts said of all of them
(carried beside the chain, under the hash the prune's own record chains).
Committed and failed effects are kept for ever, unless the policy's
retention.settled_effects says how long: after that a prune removes them, and the
same effect key runs again.

A prune that would remove a seq a legal hold keeps (latch hold) is refused,
naming the hold and its reason, and writes nothing; so is one over a chain that
does not verify below the checkpoint. --dry-run says what a prune would remove.`,
		Example: "  latch prune --before 2026-01-01 --dry-run\n  latch prune --before 120000 --pubkey ~/.latch/checkpoint.key.pub",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if before == "" {
				return usagef("--before DATE|SEQ is required")
			}
			req := &store.PruneRequest{Now: a.now(), DryRun: dryRun}
			if seq, err := strconv.ParseInt(before, 10, 64); err == nil {
				if seq < 1 {
					return usagef("--before %s: want a seq of 1 or more, or a date", before)
				}
				req.BeforeSeq = seq
			} else {
				t, err := parseDate(before)
				if err != nil {
					return usagef("--before %q: want a seq (42), a date (2026-01-31) or an RFC 3339 time", before)
				}
				req.Before = t
			}
			name, err := a.operator(as, cmd.Flags().Changed("as"))
			if err != nil {
				return err
			}
			req.By = "cli:" + name
			if pubFile != "" {
				b, err := os.ReadFile(pubFile)
				if err != nil {
					return fmt.Errorf("read public key: %w", err)
				}
				pub, err := receipt.ParsePublicKey(b)
				if err != nil {
					return fmt.Errorf("public key %s: %w", pubFile, err)
				}
				req.Check = func(c *receipt.Checkpoint) error { return c.VerifySignature(pub) }
			}
			keep, note, err := a.settledRetention()
			if err != nil {
				return err
			}
			req.KeepSettled = keep
			rs, closeStore, err := a.retentionStore(a.openWrite)
			if err != nil {
				return err
			}
			defer closeStore()
			res, err := rs.Prune(a.ctx, req)
			if errors.Is(err, store.ErrNothingToPrune) {
				fmt.Fprintln(a.stdout, reason(err))
				return nil
			}
			if err != nil {
				return err
			}
			if asJSON {
				return jsonLine(a.stdout, pruneJSON(res, keep))
			}
			a.printPrune(res, note)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&before, "before", "", "prune below the newest checkpoint at or below `SEQ`, or signed before DATE")
	f.StringVar(&pubFile, "pubkey", "", "only checkpoints this Ed25519 public key `FILE` signed qualify")
	f.BoolVar(&dryRun, "dry-run", false, "say what would be removed, and remove nothing")
	f.BoolVar(&asJSON, "json", false, "print the result as one JSON object")
	f.StringVar(&as, "as", "", "who prunes: recorded as cli:`NAME` (default $LATCH_APPROVER, else $USER)")
	return cmd
}

// parseDate reads a date (midnight UTC) or an RFC 3339 time.
func parseDate(s string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Parse(time.RFC3339Nano, s)
}

// settledRetention is the policy's retention.settled_effects (0: for ever), and a note to print
// when there is no policy to read it from.
func (a *app) settledRetention() (time.Duration, string, error) {
	path, err := a.policyPath()
	if err != nil {
		return 0, "", err
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Sprintf("no policy at %s: committed and failed effects are kept for ever", path), nil
	}
	p, err := a.loadPolicy()
	if err != nil {
		return 0, "", err
	}
	if p.Retention == nil || p.Retention.SettledEffects == 0 {
		return 0, "", nil
	}
	return p.Retention.SettledEffects, "", nil
}

func days(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

func (a *app) printPrune(res *store.PruneResult, note string) {
	s := res.Start
	verb := "pruned"
	if res.DryRun {
		verb = "would prune (dry run, nothing written)"
	}
	from := s.Seq - res.Receipts
	fmt.Fprintf(a.stdout, "%s seq %d to %d, below the signed checkpoint of seq %d (signed at %s, key %s)\n", verb, from, s.Seq-1, s.Seq,
		s.Checkpoint.SignedAt.UTC().Format(receipt.TimeFormat), s.Checkpoint.KeyID)
	fmt.Fprintf(a.stdout, "  removed  %d %s, %d %s, %d settled %s, %d %s\n", res.Receipts, plural(int(res.Receipts), "receipt", "receipts"),
		res.Events, plural(int(res.Events), "event", "events"), res.Effects, plural(int(res.Effects), "effect", "effects"),
		res.Approvals, plural(int(res.Approvals), "approval", "approvals"))
	fmt.Fprintf(a.stdout, "  carried  %d %s of kept rows\n", s.Carried, plural(int(s.Carried), "record", "records"))
	if res.DryRun {
		fmt.Fprintf(a.stdout, "  the chain would start at seq %d\n", s.Seq)
	} else {
		fmt.Fprintf(a.stdout, "  the chain now starts at seq %d; the prune is recorded at seq %d\n", s.Seq, s.RecordSeq)
	}
	if note != "" {
		fmt.Fprintf(a.stdout, "  note     %s\n", note)
	}
}

func pruneJSON(res *store.PruneResult, keep time.Duration) map[string]any {
	s := res.Start
	out := map[string]any{
		"dry_run": res.DryRun,
		"start":   s.Seq,
		"checkpoint": map[string]any{"seq": s.Checkpoint.Seq, "hash": s.Checkpoint.Hash,
			"signed_at": s.Checkpoint.SignedAt.UTC().Format(receipt.TimeFormat), "key_id": s.Checkpoint.KeyID},
		"removed": map[string]any{"receipts": res.Receipts, "events": res.Events, "effects": res.Effects, "approvals": res.Approvals},
		"carried": s.Carried, "carried_hash": s.CarriedHash,
		"settled_effects_kept": "forever",
	}
	if keep > 0 {
		out["settled_effects_kept"] = days(keep)
	}
	if !res.DryRun {
		out["record_seq"] = s.RecordSeq
	}
	return out
}

func (a *app) holdCommand() *cobra.Command {
	var from, to int64
	var why, as string
	cmd := &cobra.Command{
		Use:   "hold --from SEQ --to SEQ --reason TEXT",
		Short: "Keep a range of receipts from any prune (legal hold); list and release holds",
		Long: `Place a legal hold: the receipts from --from to --to (inclusive) are kept from any
prune until the hold is released. A prune that would remove one of them is refused,
naming the hold and its reason. Placing and releasing a hold are chained records
(kinds hold and hold_released), with who did it and why.

  latch hold list [--all]                        the active holds (--all: released ones too)
  latch hold release ID --reason TEXT            release one; the hold stays listed`,
		Example: "  latch hold --from 1200 --to 1350 --reason \"litigation: case 4411\"\n  latch hold list\n  latch hold release hold_3f… --reason \"case closed\"",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case !cmd.Flags().Changed("from") || !cmd.Flags().Changed("to"):
				return usagef("--from SEQ and --to SEQ are required")
			case from < 1 || to < from:
				return usagef("--from %d --to %d: want 1 <= from <= to", from, to)
			case strings.TrimSpace(why) == "":
				return usagef("--reason TEXT is required: a hold says why it keeps what it keeps")
			}
			rs, by, closeStore, err := a.retentionAs(as, cmd.Flags().Changed("as"))
			if err != nil {
				return err
			}
			defer closeStore()
			h, err := rs.PlaceHold(a.ctx, &store.HoldRequest{Now: a.now(), From: from, To: to, Reason: why, By: by})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "hold %s placed: seq %d to %d are kept from any prune until it is released\n  reason  %s\n",
				h.ID, h.From, h.To, cell(h.Reason))
			return nil
		},
	}
	f := cmd.Flags()
	f.Int64Var(&from, "from", 0, "the first `SEQ` kept")
	f.Int64Var(&to, "to", 0, "the last `SEQ` kept (inclusive)")
	f.StringVar(&why, "reason", "", "why the range is held (`TEXT`, recorded)")
	f.StringVar(&as, "as", "", "who places the hold: recorded as cli:`NAME` (default $LATCH_APPROVER, else $USER)")
	cmd.AddCommand(a.holdListCommand(), a.holdReleaseCommand())
	return cmd
}

// retentionAs is the operator who places or releases a hold (by: cli:NAME, from --as, given or
// not) and the retention store, opened for writing, with the function that closes it.
func (a *app) retentionAs(as string, given bool) (_ store.RetentionStore, by string, closeStore func(), _ error) {
	name, err := a.operator(as, given)
	if err != nil {
		return nil, "", nil, err
	}
	rs, closeStore, err := a.retentionStore(a.openWrite)
	if err != nil {
		return nil, "", nil, err
	}
	return rs, "cli:" + name, closeStore, nil
}

// retentionStore opens the existing store with open (a.openRead or a.openWrite) as a
// RetentionStore, and returns the function that closes it.
func (a *app) retentionStore(open func() (store.Store, error)) (store.RetentionStore, func(), error) {
	st, err := open()
	if err != nil {
		return nil, nil, err
	}
	rs, err := store.Retention(st)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return rs, func() { st.Close() }, nil
}

func (a *app) holdListCommand() *cobra.Command {
	var all, asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--all] [--json]",
		Short: "List the active legal holds (--all: released ones too)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rs, closeStore, err := a.retentionStore(a.openRead)
			if err != nil {
				return err
			}
			defer closeStore()
			holds, err := rs.Holds(a.ctx)
			if err != nil {
				return err
			}
			released := 0
			var shown []*store.Hold
			for _, h := range holds {
				if !h.Active() {
					released++
					if !all {
						continue
					}
				}
				shown = append(shown, h)
			}
			if asJSON {
				for _, h := range shown {
					v := map[string]any{"hold_id": h.ID, "from": h.From, "to": h.To, "reason": h.Reason, "by": h.By,
						"placed_at": h.CreatedAt.UTC().Format(receipt.TimeFormat), "active": h.Active()}
					if !h.Active() {
						v["released_at"], v["released_by"], v["release_reason"] = h.ReleasedAt.UTC().Format(receipt.TimeFormat), h.ReleasedBy, h.ReleaseReason
					}
					if err := jsonLine(a.stdout, v); err != nil {
						return err
					}
				}
				return nil
			}
			more := ""
			if !all && released > 0 {
				more = fmt.Sprintf("(%d released: latch hold list --all)", released)
			}
			if len(shown) == 0 {
				fmt.Fprintln(a.stdout, strings.TrimSpace("no active holds "+more))
				return nil
			}
			t := newTable(a.stdout, "HOLD", "FROM", "TO", "PLACED", "BY", "REASON", "RELEASED")
			for _, h := range shown {
				rel := "-"
				if !h.Active() {
					rel = fmt.Sprintf("%s by %s: %s", stamp(h.ReleasedAt), cell(h.ReleasedBy), cell(h.ReleaseReason))
				}
				t.row(h.ID, strconv.FormatInt(h.From, 10), strconv.FormatInt(h.To, 10), stamp(h.CreatedAt), cell(h.By), cell(h.Reason), rel)
			}
			if err := t.flush(); err != nil {
				return err
			}
			if more != "" {
				fmt.Fprintln(a.stdout, more)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "released holds too")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON Lines")
	return cmd
}

func (a *app) holdReleaseCommand() *cobra.Command {
	var why, as string
	cmd := &cobra.Command{
		Use:   "release ID --reason TEXT",
		Short: "Release a legal hold (recorded, with who and why; the hold stays listed)",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(why) == "" {
				return usagef("--reason TEXT is required: a release says why")
			}
			rs, by, closeStore, err := a.retentionAs(as, cmd.Flags().Changed("as"))
			if err != nil {
				return err
			}
			defer closeStore()
			h, err := rs.ReleaseHold(a.ctx, &store.ReleaseRequest{Now: a.now(), ID: args[0], Reason: why, By: by})
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("no hold %s (latch hold list --all lists them)", args[0])
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "hold %s released: seq %d to %d may be pruned again\n  reason  %s\n", h.ID, h.From, h.To, cell(h.ReleaseReason))
			return nil
		},
	}
	cmd.Flags().StringVar(&why, "reason", "", "why the hold is released (`TEXT`, recorded)")
	cmd.Flags().StringVar(&as, "as", "", "who releases: recorded as cli:`NAME` (default $LATCH_APPROVER, else $USER)")
	return cmd
}
