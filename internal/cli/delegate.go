package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// parseCreator reads --as AGENT[/USER]: who creates a delegation. The agent is required (a
// human acts through one: --as cli/alice); the user, when given, says on whose behalf.
func parseCreator(as string) (latch.Principal, error) {
	if strings.TrimSpace(as) == "" {
		return latch.Principal{}, usagef("who delegates? pass --as AGENT[/USER] (a human acting through the CLI: --as cli/alice)")
	}
	agent, user, hasUser := strings.Cut(as, "/")
	switch {
	case agent == "":
		return latch.Principal{}, usagef("--as %q: the agent is missing (want AGENT[/USER], e.g. cli/alice)", as)
	case hasUser && user == "":
		return latch.Principal{}, usagef("--as %q: the user after / is empty (want AGENT[/USER])", as)
	case strings.Contains(user, "/"):
		return latch.Principal{}, usagef("--as %q: at most one / (want AGENT[/USER])", as)
	}
	return latch.Principal{Agent: agent, User: user}, nil
}

func (a *app) delegateCommand() *cobra.Command {
	var parent, file, as string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "delegate --parent ID --file GRANT.yaml --as AGENT[/USER] [flags]",
		Short: "Delegate part of a grant: a narrower grant beneath it, for one agent",
		Long: `Create a delegation: a narrower grant beneath a policy grant or another delegation
(--parent, a grant id or dlg_…), for the one agent the file names, on behalf of the
creator (--as AGENT[/USER]; a human acting through the CLI is --as cli/alice).

GRANT.yaml has the keys of an authority.grants entry, without id:

  subject: { agent: finance-bot }
  actions: [payments.refund]
  constraints: { amount_lte: 100000, currency_in: [EUR, USD] }
  environments: [production]
  expires_at: "2026-12-15T00:00:00Z"
  delegable: true            # optional: may be delegated again, narrower still

The creator must be matched by the parent's subject, the parent must be delegable,
and the child must be a provable subset of the parent on every dimension: actions
and resources contained pattern by pattern, every constraint present with an operand
at least as strict, environments a subset, expires_at no later. Leaving out a
dimension the parent constrains is widening. A refusal exits 1 naming the reason and
the dimension (authority_escalation on constraints.amount_lte) and is recorded as a
delegation_rejected event.

The store is created if it does not exist yet, as a worker's guard would create it.
--json prints the delegation as one object (the shape of latch delegations --json).`,
		Example: "  latch delegate --parent alice-payments --file finance-bot.yaml --as cli/alice\n" +
			"  latch delegate --parent dlg_5e0c… --file support-bot.yaml --as finance-bot --json",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case strings.TrimSpace(parent) == "":
				return usagef("missing --parent ID (a grant id of the policy, or a dlg_… delegation id)")
			case strings.TrimSpace(file) == "":
				return usagef("missing --file GRANT.yaml (the delegated grant)")
			}
			creator, err := parseCreator(as)
			if err != nil {
				return err
			}
			doc, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("read %s: %w", file, unwrapPath(err))
			}
			if _, err := policy.ParseGrant(file, doc); err != nil {
				return err // file:line:column: what is wrong
			}
			g, err := a.openGuard(true)
			if err != nil {
				return err
			}
			defer g.Close()
			d, err := g.Delegate(a.ctx, parent, doc, creator)
			if err != nil {
				return delegateError(parent, err)
			}
			j := newDelegationJSON(d, nil)
			if asJSON {
				return jsonLine(a.stdout, j)
			}
			fmt.Fprintf(a.stdout, "delegated %s to %s beneath %s, by %s\n", d.ID, principal(deref(j.Subject.Agent), deref(j.Subject.User)), d.Parent, d.CreatedBy)
			t := newTable(a.stdout)
			grantRows(t, j)
			t.row("  expires_at", dash(deref(j.ExpiresAt)))
			t.row("  delegable", yesNo(j.Delegable))
			if err := t.flush(); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "revoke it (and everything beneath it) with: latch revoke %s\n", d.ID)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&parent, "parent", "", "the `ID` delegated from: a policy grant id or a dlg_… delegation id")
	f.StringVar(&file, "file", "", "the delegated grant, a YAML `FILE` with the keys of a grant (no id)")
	f.StringVar(&as, "as", "", "who delegates: `AGENT[/USER]`, matched by the parent's subject")
	f.BoolVar(&asJSON, "json", false, "print the delegation as one JSON object")
	return cmd
}

// delegateError explains a refused delegation in one line: the reason and the dimension first.
func delegateError(parent string, err error) error {
	var ae *latch.AuthorityError
	if errors.As(err, &ae) {
		if ae.Detail != "" {
			return fmt.Errorf("refused: %s", ae.Detail)
		}
		if ae.Dimension != "" {
			return fmt.Errorf("refused: %s on %s", ae.Reason, ae.Dimension)
		}
		return fmt.Errorf("refused: %s", ae.Reason)
	}
	return fmt.Errorf("delegate beneath %s: %s", parent, reason(err))
}

func (a *app) revokeCommand() *cobra.Command {
	var as, createdBy, under string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "revoke ID | --created-by AGENT[/USER] | --under GRANT [flags]",
		Short: "Revoke a delegation, and with it everything beneath it",
		Long: `Revoke the delegation ID (dlg_…), with one write: it and every delegation created
beneath it, at any depth, stop granting anything at once (authority_revoked). The
record keeps revoked_by = "cli:NAME", NAME from --as, else $LATCH_APPROVER, else
$USER. A revocation is final: a revoked delegation is never restored (delegate
again instead). Policy grants are revoked by editing the policy.

Instead of an ID, a selector revokes every delegation it matches, each with its own
write and delegation_revoked event:

  --created-by AGENT[/USER]  delegations created by exactly this principal (as the
                             CREATED BY column of latch delegations shows it)
  --under GRANT              every delegation whose chain passes through GRANT: a
                             policy grant id, a break-glass envelope id, or a dlg_…
                             id. GRANT itself is not revoked, only what lies beneath
                             it (revoke a dlg_… by id to end it too).

Both selectors together revoke what matches both. A match already revoked is
skipped, so a run stopped halfway leaves what it reached revoked and running it
again finishes the rest. Nothing matched at all exits 1. The text output lists each
revoked id; --json prints one object: {"revoked": [ids], "skipped": [ids]}.`,
		Example: "  latch revoke dlg_5e0c… --as alice\n" +
			"  latch revoke --created-by finance-bot --as alice\n" +
			"  latch revoke --under alice-payments --as alice --json",
		Args: func(cmd *cobra.Command, pos []string) error {
			selector := cmd.Flags().Changed("created-by") || cmd.Flags().Changed("under")
			switch {
			case selector && len(pos) > 0:
				return usagef("pass an ID or a selector (--created-by, --under), not both")
			case selector:
				return nil
			}
			return exactArgs("ID (or a selector: --created-by AGENT[/USER], --under GRANT)")(cmd, pos)
		},
		RunE: func(cmd *cobra.Command, pos []string) error {
			if len(pos) == 0 {
				if cmd.Flags().Changed("created-by") {
					if _, err := parseRevokeCreator(createdBy); err != nil {
						return err
					}
				}
				if cmd.Flags().Changed("under") && strings.TrimSpace(under) == "" {
					return usagef("--under is empty (want a policy grant id, an envelope id or a dlg_… id)")
				}
			}
			name, err := a.operator(as, cmd.Flags().Changed("as"))
			if err != nil {
				return err
			}
			g, err := a.openGuard(false)
			if err != nil {
				return err
			}
			defer g.Close()
			if len(pos) == 0 {
				return a.revokeWhere(g, latch.RevokeSelector{CreatedBy: createdBy, Under: under}, "cli:"+name, asJSON)
			}
			id := pos[0]
			d, err := g.Revoke(a.ctx, id, "cli:"+name)
			switch {
			case errors.Is(err, store.ErrNotFound):
				if !strings.HasPrefix(id, "dlg_") {
					return fmt.Errorf("no delegation %s in this store (a policy grant is revoked by editing the policy)", id)
				}
				return fmt.Errorf("no delegation %s in this store", id)
			case errors.Is(err, store.ErrRevoked):
				return fmt.Errorf("%s is already revoked; nothing was changed", id)
			case err != nil:
				return fmt.Errorf("revoke %s: %s", id, reason(err))
			}
			if asJSON {
				return jsonLine(a.stdout, revokeJSON{Revoked: []string{d.ID}, Skipped: []string{}})
			}
			beneath := 0
			if ds, ok := g.Store().(store.DelegationStore); ok {
				if all, err := ds.Delegations(a.ctx); err == nil {
					beneath = len(descendants(all, d.ID))
				}
			}
			fmt.Fprintf(a.stdout, "revoked %s (%s beneath %s), by %s at %s; it and the %d %s beneath it grant nothing from now on\n",
				d.ID, delegationSubject(d), d.Parent, d.RevokedBy, stamp(d.RevokedAt), beneath, plural(beneath, "delegation", "delegations"))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&as, "as", "", "who revokes: recorded as cli:`NAME` (default $LATCH_APPROVER, else $USER)")
	f.StringVar(&createdBy, "created-by", "", "revoke every delegation created by exactly `AGENT[/USER]`")
	f.StringVar(&under, "under", "", "revoke every delegation beneath `GRANT` (a policy grant, envelope or dlg_… id), GRANT itself excluded")
	f.BoolVar(&asJSON, "json", false, "print {\"revoked\": [ids], \"skipped\": [ids]} as one JSON object")
	return cmd
}

// revokeJSON is what latch revoke --json prints: the ids revoked by this run and the matches
// skipped because they were already revoked, in creation order.
type revokeJSON struct {
	Revoked []string `json:"revoked"`
	Skipped []string `json:"skipped"`
}

// parseRevokeCreator checks --created-by: AGENT or AGENT/USER, matched exactly.
func parseRevokeCreator(s string) (latch.Principal, error) {
	agent, user, hasUser := strings.Cut(s, "/")
	switch {
	case strings.TrimSpace(s) == "":
		return latch.Principal{}, usagef("--created-by is empty (want AGENT[/USER], e.g. cli/alice)")
	case agent == "":
		return latch.Principal{}, usagef("--created-by %q: the agent is missing (want AGENT[/USER], e.g. cli/alice)", s)
	case hasUser && user == "":
		return latch.Principal{}, usagef("--created-by %q: the user after / is empty (want AGENT[/USER])", s)
	case strings.Contains(user, "/"):
		return latch.Principal{}, usagef("--created-by %q: at most one / (want AGENT[/USER])", s)
	}
	return latch.Principal{Agent: agent, User: user}, nil
}

// revokeWhere revokes what a selector matches and prints each revoked id. What was revoked
// before a failure is printed too, so the operator sees how far the run got.
func (a *app) revokeWhere(g *latch.Guard, sel latch.RevokeSelector, by string, asJSON bool) error {
	res, err := g.RevokeWhere(a.ctx, sel, by)
	if errors.Is(err, latch.ErrNothingMatched) {
		return fmt.Errorf("no delegation matches %s; nothing was changed", cell(selectorText(sel)))
	}
	if res == nil {
		return fmt.Errorf("revoke %s: %s", selectorText(sel), reason(err))
	}
	out := revokeJSON{Revoked: []string{}, Skipped: []string{}}
	for _, d := range res.Revoked {
		out.Revoked = append(out.Revoked, d.ID)
	}
	for _, d := range res.Skipped {
		out.Skipped = append(out.Skipped, d.ID)
	}
	if asJSON {
		if jerr := jsonLine(a.stdout, out); jerr != nil {
			return jerr
		}
	} else {
		for _, d := range res.Revoked {
			fmt.Fprintf(a.stdout, "revoked %s (%s beneath %s), by %s at %s\n", d.ID, cell(delegationSubject(d)), cell(d.Parent), cell(d.RevokedBy), stamp(d.RevokedAt))
		}
		for _, id := range out.Skipped {
			fmt.Fprintf(a.stdout, "skipped %s: already revoked\n", id)
		}
	}
	if err != nil {
		return fmt.Errorf("revoke %s: %s (the %d revoked before it stay revoked; run it again to finish)", selectorText(sel), reason(err), len(out.Revoked))
	}
	if !asJSON {
		fmt.Fprintf(a.stdout, "%d revoked, %d already revoked, matching %s\n", len(out.Revoked), len(out.Skipped), cell(selectorText(sel)))
	}
	return nil
}

// selectorText names a selector as the flags that made it.
func selectorText(sel latch.RevokeSelector) string {
	var parts []string
	if sel.CreatedBy != "" {
		parts = append(parts, "--created-by "+sel.CreatedBy)
	}
	if sel.Under != "" {
		parts = append(parts, "--under "+sel.Under)
	}
	return strings.Join(parts, " ")
}

func (a *app) delegationsCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "delegations [flags]",
		Short: "List delegations: who holds what, beneath which grant, until when",
		Long: `List every delegation in the store, in creation order, revoked ones included.

A break-glass grant (latch break-glass) has its envelope as PARENT, marked
"(break-glass)", and the person who opened it as CREATED BY.

REVOKED says whether the delegation still grants anything as far as revocation goes:
"-" (not revoked), "by NAME at TIME" (revoked itself), or "beneath dlg_…" (cut: a
delegation above it was revoked). An expired delegation is shown "(expired)". Whether
a delegation is still contained in its parent under the current policy is decided at
every call (authority_escalation), not here.

--json prints JSON Lines, one object per delegation:
  delegation_id, parent, subject {agent, user}, actions, resources, constraints,
  environments, expires_at, delegable, created_by, created_at, revoked, revoked_at,
  revoked_by, cut_by, grant, via (break-glass or null), reason`,
		Example: "  latch delegations\n  latch delegations --json | jq -r 'select(.revoked|not) | .delegation_id'",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.openRead()
			if err != nil {
				return err
			}
			defer st.Close()
			ds, ok := st.(store.DelegationStore)
			if !ok {
				return fmt.Errorf("store %T keeps no delegations", st)
			}
			all, err := ds.Delegations(a.ctx)
			if err != nil {
				return fmt.Errorf("list delegations: %w", err)
			}
			byID := make(map[string]*store.Delegation, len(all))
			for _, d := range all {
				byID[d.ID] = d
			}
			if asJSON {
				for _, d := range all {
					if err := jsonLine(a.stdout, newDelegationJSON(d, byID)); err != nil {
						return err
					}
				}
				return nil
			}
			if len(all) == 0 {
				fmt.Fprintln(a.stdout, "no delegations")
				return nil
			}
			now := a.now()
			t := newTable(a.stdout, "ID", "PARENT", "SUBJECT", "ACTIONS", "EXPIRES", "CREATED BY", "CREATED", "REVOKED")
			for _, d := range all {
				j := newDelegationJSON(d, byID)
				expires := dash(deref(j.ExpiresAt))
				if !j.expiresAt.IsZero() && now.After(j.expiresAt) {
					expires += " (expired)"
				}
				revoked := "-"
				switch {
				case !d.RevokedAt.IsZero():
					revoked = fmt.Sprintf("by %s at %s", dash(d.RevokedBy), stamp(d.RevokedAt))
				case j.CutBy != nil:
					revoked = "beneath " + *j.CutBy
				}
				actions := strings.Join(j.Actions, ",")
				if j.unreadable {
					actions = "(unreadable grant: every call is denied authority_unreadable)"
				}
				parent := cell(d.Parent)
				if d.Via != "" {
					parent += " (" + cell(d.Via) + ")"
				}
				t.row(d.ID, parent, principal(deref(j.Subject.Agent), deref(j.Subject.User)), cell(actions),
					expires, dash(d.CreatedBy), stamp(d.CreatedAt), revoked)
			}
			return t.flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON Lines, one delegation per line")
	return cmd
}

// openGuard opens a guard over the configured policy and store for the delegation commands.
// create says whether a missing store may be created (delegate: the first delegation may come
// before any worker); revoke needs an existing one, as there is nothing to revoke otherwise.
func (a *app) openGuard(create bool) (*latch.Guard, error) { return a.openGuardWith(create, nil) }

// openGuardWith is openGuard with sinks told of what the guard writes (an alert notifier).
func (a *app) openGuardWith(create bool, sinks []latch.Sink) (*latch.Guard, error) {
	return a.openGuardConfig(create, latch.Config{Sinks: sinks})
}

// openGuardConfig is openGuard with base's sinks and hop key.
func (a *app) openGuardConfig(create bool, base latch.Config) (*latch.Guard, error) {
	p, err := a.loadPolicy()
	if err != nil {
		return nil, err
	}
	if p.Authority == nil {
		return nil, errors.New("the policy has no authority section: without one there are no grants to delegate, and no delegation is evaluated")
	}
	var st store.Store
	if create {
		u, err := a.storeURL()
		if err != nil {
			return nil, err
		}
		if st, err = latch.OpenStore(a.ctx, u, nil); err != nil {
			return nil, errors.New(reason(err))
		}
	} else if st, err = a.openWrite(); err != nil {
		return nil, err
	}
	g, err := latch.Open(a.ctx, &latch.Config{Policy: p, Store: st, Now: a.now, Sinks: base.Sinks, HopKey: base.HopKey})
	if err != nil {
		st.Close()
		return nil, errors.New(reason(err))
	}
	return g, nil
}

// grantRows writes what a delegated or opened grant admits, one row per dimension it declares.
func grantRows(t *table, j delegationJSON) {
	t.row("  actions", strings.Join(j.Actions, ", "))
	if j.Resources != nil {
		t.row("  resources", strings.Join(j.Resources, ", "))
	}
	if len(j.Constraints) > 0 {
		t.row("  constraints", constraintsText(j.Constraints))
	}
	if j.Environments != nil {
		t.row("  environments", strings.Join(j.Environments, ", "))
	}
	if j.Tasks != nil {
		t.row("  tasks", strings.Join(j.Tasks, ", "))
	}
	for _, b := range j.Budgets {
		t.row("  budget", fmt.Sprintf("%d %s per %s", b.Limit, b.Metric, b.Window))
	}
}

// delegationJSON is one line of `latch delegations --json`, the object `latch delegate --json`
// and `latch break-glass --json` print, and what POST /v1/break-glass answers (jsonview).
type delegationJSON struct {
	jsonview.Delegation
	expiresAt  time.Time
	unreadable bool
}

// newDelegationJSON renders a stored delegation (jsonview.NewDelegation), with the expiry the
// table marks and whether its grant no longer parses.
func newDelegationJSON(d *store.Delegation, byID map[string]*store.Delegation) delegationJSON {
	v, g := jsonview.NewDelegation(d, byID)
	j := delegationJSON{Delegation: v, unreadable: g == nil}
	if g != nil {
		j.expiresAt = g.ExpiresAt
	}
	return j
}

// descendants returns the ids of every delegation beneath id, at any depth.
func descendants(all []*store.Delegation, id string) []string {
	under := map[string]bool{id: true}
	var out []string
	for changed := true; changed; {
		changed = false
		for _, d := range all {
			if under[d.Parent] && !under[d.ID] {
				under[d.ID] = true
				out = append(out, d.ID)
				changed = true
			}
		}
	}
	return out
}

// delegationSubject names whom a delegation is for, as agent or agent/user.
func delegationSubject(d *store.Delegation) string {
	g, err := policy.ParseGrant(d.ID, d.Grant)
	if err != nil {
		return "an unreadable grant"
	}
	return principal(g.Subject.Agent, g.Subject.User)
}

// constraintsText renders constraints as key: operand, in key order.
func constraintsText(c map[string]any) string {
	parts := make([]string, 0, len(c))
	for _, k := range sortedKeys(boolKeys(c)) {
		b, _ := json.Marshal(c[k])
		parts = append(parts, k+": "+string(b))
	}
	return strings.Join(parts, ", ")
}

func boolKeys(m map[string]any) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
