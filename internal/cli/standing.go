package cli

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/store"
)

// standingFlags are latch approve's flags that grant a standing approval with the request
// (docs/approvals.md#standing-approvals).
type standingFlags struct {
	uses  int
	dur   time.Duration
	max   []string // ARG=N
	vary  []string
	total string // ARG=N
}

func (f *standingFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.IntVar(&f.uses, "standing-uses", 0, "also grant a standing approval admitting at most `N` further calls (needs --standing-for)")
	fs.DurationVar(&f.dur, "standing-for", 0, "the standing approval lasts `DURATION` from this grant (at most the policy's max_for)")
	fs.StringArrayVar(&f.max, "standing-max", nil, "a call may pass integer argument ARG from 0 up to N: `ARG=N` (repeatable)")
	fs.StringArrayVar(&f.vary, "standing-vary", nil, "a call may pass argument `ARG` with any value (repeatable)")
	fs.StringVar(&f.total, "standing-total", "", "the calls' values of integer argument ARG sum to at most N: `ARG=N`")
}

// terms are the standing terms the flags give, nil when none of them is set.
func (f *standingFlags) terms(cmd *cobra.Command) (*store.StandingTerms, error) {
	set := false
	for _, n := range []string{"standing-uses", "standing-for", "standing-max", "standing-vary", "standing-total"} {
		set = set || cmd.Flags().Changed(n)
	}
	if !set {
		return nil, nil
	}
	if f.uses < 1 || f.dur <= 0 {
		return nil, usagef("a standing approval needs --standing-uses N (at least 1) and --standing-for DURATION")
	}
	t := &store.StandingTerms{Uses: f.uses, For: store.Duration(f.dur), Vary: slices.Clone(f.vary)}
	for _, m := range f.max {
		name, n, err := argLimit("--standing-max", m)
		if err != nil {
			return nil, err
		}
		if t.Max == nil {
			t.Max = map[string]int64{}
		}
		t.Max[name] = n
	}
	if f.total != "" {
		name, n, err := argLimit("--standing-total", f.total)
		if err != nil {
			return nil, err
		}
		t.Total = &store.StandingTotal{Argument: name, Limit: n}
	}
	return t, nil
}

func argLimit(flag, v string) (string, int64, error) {
	name, num, ok := strings.Cut(v, "=")
	n, err := strconv.ParseInt(num, 10, 64)
	if !ok || name == "" || err != nil {
		return "", 0, usagef("%s %q: want ARG=N, N an integer", flag, v)
	}
	return name, n, nil
}

// standingLine says what a grant's standing approval admits.
func standingLine(s *store.Standing) string {
	var b strings.Builder
	fmt.Fprintf(&b, "standing approval %s: up to %d calls of %s until %s", s.ID, s.Terms.Uses, s.ActionName, stamp(s.ExpiresAt))
	if b2 := s.Terms.Bounds(); b2 != "" {
		b.WriteString("; " + b2)
	}
	fmt.Fprintf(&b, "; present it as the approval id (--approval %s)", s.ID)
	return b.String()
}

// listStanding is latch approvals --standing.
func (a *app) listStanding(state string, asJSON bool) error {
	if state != "" && !oneOf(state, operator.StandingStates) {
		return usagef("--state %q: want one of %s", state, strings.Join(operator.StandingStates, ", "))
	}
	st, err := a.openRead()
	if err != nil {
		return err
	}
	defer st.Close()
	o := a.operatorOf(st, a.displayPolicy(), nil)
	list, err := o.StandingRecords(a.ctx, state)
	if err != nil {
		return err
	}
	if asJSON {
		for _, s := range list {
			if err := jsonLine(a.stdout, o.StandingView(s)); err != nil {
				return err
			}
		}
		return nil
	}
	if len(list) == 0 {
		fmt.Fprintln(a.stdout, "no standing approvals"+filterNote("state", state))
		return nil
	}
	t := newTable(a.stdout, "ID", "STATE", "FROM", "ACTION", "PRINCIPAL", "USES", "EXPIRES", "GRANTED BY", "BOUNDS")
	for _, s := range list {
		v := o.StandingView(s)
		uses := fmt.Sprintf("%d of %d", s.Uses, s.Terms.Uses)
		if s.Terms.Total != nil {
			uses += fmt.Sprintf(" (%s %d of %d)", s.Terms.Total.Argument, s.Spent, s.Terms.Total.Limit)
		}
		t.row(s.ID, v.State, s.From, cell(v.Action), principal(deref(v.Principal.Agent), deref(v.Principal.User)), uses,
			stamp(s.ExpiresAt), cell(strings.Join(s.GrantedBy, ", ")), cell(dash(s.Terms.Bounds())))
	}
	return t.flush()
}

func (a *app) revokeStandingCommand() *cobra.Command {
	var as, note string
	cmd := &cobra.Command{
		Use:   "revoke-standing ID [flags]",
		Short: "Revoke a standing approval",
		Long: `Revoke the standing approval ID (sta_…), as NAME: --as, else $LATCH_APPROVER, else $USER.

Calls presenting it afterwards are refused approval_revoked; the calls it admitted stand.
Whoever may answer the action's approval requests may revoke it (the policy's approvers
of the action); anyone else is refused approver_not_entitled. latch approvals --standing
lists the standing approvals.`,
		Example: "  latch revoke-standing sta_6f0c… --as alice --note 'incident 42'",
		Args:    exactArgs("ID"),
		RunE: func(cmd *cobra.Command, pos []string) error {
			name, err := a.operator(as, cmd.Flags().Changed("as"))
			if err != nil {
				return err
			}
			g, err := a.openAnswerer()
			if err != nil {
				return err
			}
			defer g.Close()
			s, err := g.RevokeStanding(a.ctx, &store.RevokeStandingRequest{ID: pos[0], By: name, Note: note})
			var se *store.StandingError
			switch {
			case errors.Is(err, store.ErrNotFound):
				return fmt.Errorf("no standing approval %s in this store", pos[0])
			case errors.As(err, &se):
				return fmt.Errorf("%s refused: %s (%s)", pos[0], se.Detail, se.Reason)
			case err != nil:
				return fmt.Errorf("revoke-standing %s: %s", pos[0], reason(err))
			}
			fmt.Fprintf(a.stdout, "revoked %s as %s after %d of %d uses\n", s.ID, s.RevokedBy, s.Uses, s.Terms.Uses)
			return nil
		},
	}
	cmd.Flags().StringVar(&as, "as", "", "who revokes: `NAME` (default $LATCH_APPROVER, else $USER)")
	cmd.Flags().StringVar(&note, "note", "", "a `TEXT` kept with the revocation")
	return cmd
}
