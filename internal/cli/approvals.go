package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/operator"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

func oneOf(v string, allowed []string) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}

func (a *app) approvalsCommand() *cobra.Command {
	var status, state string
	var asJSON, standing bool
	cmd := &cobra.Command{
		Use:   "approvals [flags]",
		Short: "List approval requests with the exact arguments",
		Long: `List approval requests, oldest first, with the exact arguments each is bound to.

A request is bound to the SHA-256 of the exact action (name, canonical arguments,
resource, principal, environment): approving it allows that action and nothing else.
A pending or granted request past its expiry is shown "(expired)"; reading never
changes it. latch inspect ID shows the hash and the timeline.

Where the policy gives an argument display hints (a label, money in minor units), the
arguments are followed by how a person should read them — "Refund: €2,500.00 (250000
minor units)" — beside the exact values, which are what the approval is bound to.

A request stored on the state of its target (an action with a precondition) is listed
below the table with when that state was read: "apr_…: state captured at 2026-… (sha256:…)".
The approval is spent only while the target's state still has that fingerprint.

A request asked for an action whose last request was denied is listed below the table:
"apr_…: asked again after apr_… was denied by bob". Asking again while a request for the
same action is pending hands back that request; it is not listed twice.

--json prints JSON Lines, one object per request:
  approval_id, status, action, action_hash, arguments, display, principal, resource,
  created_at, expires_at, approver, previous_denied, previous_denied_by, precondition
  ({hash, captured_at} or null), answers, required, grants, reminders (null, or when the
  request is reminded about and escalated), edit (null, or what approvers changed:
  {requested_action_hash, requested_arguments, edits}), on_expiry (expire, or deny: a
  request still pending at its expiry is written denied, by latch:expiry)

--standing lists the standing approvals instead, newest first (--state active, exhausted,
expired, revoked): how many of its calls each has admitted, until when, who granted it
and its bounds. With --json, one object per standing approval:
  standing_id, state, from, action, action_hash, arguments, display, principal, resource,
  terms ({uses, for, max, vary, total}), uses, spent, granted_by, created_at, expires_at,
  last_used_by, last_used_at, revoked_by, revoked_at, note`,
		Example: "  latch approvals --status pending\n  latch approvals --json | jq -r .approval_id\n  latch approvals --standing --state active",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if standing {
				if status != "" {
					return usagef("--status filters requests; standing approvals take --state")
				}
				return a.listStanding(state, asJSON)
			}
			if state != "" {
				return usagef("--state filters standing approvals: pass --standing")
			}
			if status != "" && !oneOf(status, operator.ApprovalStatuses) {
				return usagef("--status %q: want one of %s", status, strings.Join(operator.ApprovalStatuses, ", "))
			}
			st, err := a.openRead()
			if err != nil {
				return err
			}
			defer st.Close()
			pol := a.displayPolicy()
			o := a.operatorOf(st, pol, nil)
			list, err := o.ApprovalRecords(a.ctx, status)
			if err != nil {
				return err
			}
			if asJSON {
				for _, ap := range list {
					v, err := o.ApprovalDetail(a.ctx, ap)
					if err != nil {
						return err
					}
					if err := jsonLine(a.stdout, v); err != nil {
						return err
					}
				}
				return nil
			}
			if len(list) == 0 {
				fmt.Fprintln(a.stdout, "no approval requests"+filterNote("status", status))
				return nil
			}
			now := a.now()
			t := newTable(a.stdout, "ID", "STATUS", "ACTION", "PRINCIPAL", "RESOURCE", "EXPIRES", "APPROVER", "ARGUMENTS")
			var again []string
			for _, ap := range list {
				j, err := o.ApprovalDetail(a.ctx, ap)
				if err != nil {
					return err
				}
				t.row(ap.ID, approvalStatus(ap, now), cell(j.Action), principal(deref(j.Principal.Agent), deref(j.Principal.User)),
					dash(deref(j.Resource)), stamp(ap.ExpiresAt), cell(answersCell(pol, ap)), cell(withReadable(pol, j.Action, j.Arguments)))
				if !ap.PreconditionAt.IsZero() {
					again = append(again, fmt.Sprintf("%s: state captured at %s (%s)", ap.ID, stamp(ap.PreconditionAt),
						cell(dash(ap.PreconditionHash))))
				}
				if ap.PreviousDenied != "" {
					again = append(again, fmt.Sprintf("%s: asked again after %s was denied by %s", ap.ID, cell(ap.PreviousDenied), cell(ap.PreviousDeniedBy)))
				}
				if exp := operator.ReadExpiry(ap, j.OnExpiry); exp != "" {
					again = append(again, fmt.Sprintf("%s: %s", ap.ID, cell(exp)))
				}
				if remind, escalate := operator.ReadReminders(j.Reminders); ap.Status == store.Pending {
					if remind != "" {
						again = append(again, fmt.Sprintf("%s: reminder %s", ap.ID, cell(remind)))
					}
					if escalate != "" {
						again = append(again, fmt.Sprintf("%s: escalation %s", ap.ID, cell(escalate)))
					}
				}
				if e := j.Edit; e != nil {
					for _, st := range e.Edits {
						var ch []string
						for _, name := range slices.Sorted(maps.Keys(st.Arguments)) {
							c := st.Arguments[name]
							ch = append(ch, fmt.Sprintf("%s %s → %s", name, c.From, c.To))
						}
						again = append(again, fmt.Sprintf("%s: edited by %s: %s (requested %s)", ap.ID, cell(st.Method+":"+st.Approver),
							cell(strings.Join(ch, ", ")), cell(withReadable(pol, j.Action, e.RequestedArguments))))
					}
				}
			}
			if err := t.flush(); err != nil {
				return err
			}
			if len(again) > 0 {
				fmt.Fprintln(a.stdout)
				for _, line := range again {
					fmt.Fprintln(a.stdout, line)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&status, "status", "", "only requests with this `STATUS`: "+strings.Join(operator.ApprovalStatuses, "|"))
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON Lines, one request per line")
	cmd.Flags().BoolVar(&standing, "standing", false, "list the standing approvals instead of the requests")
	cmd.Flags().StringVar(&state, "state", "", "with --standing, only those in this `STATE`: "+strings.Join(operator.StandingStates, "|"))
	return cmd
}

func filterNote(name, v string) string {
	if v == "" {
		return ""
	}
	return fmt.Sprintf(" with %s %s", name, v)
}

// approvalStatus is the status an operator reads: a request still pending or granted past its
// expiry can no longer be used, and says so.
func approvalStatus(ap *store.Approval, now time.Time) string {
	if (ap.Status == store.Pending || ap.Status == store.Granted) && !ap.ExpiresAt.IsZero() && !now.Before(ap.ExpiresAt) {
		return string(ap.Status) + " (expired)"
	}
	return string(ap.Status)
}

// answerCommand builds approve (grant) or deny.
func (a *app) answerCommand(grant bool) *cobra.Command {
	verb, done := "deny", "denied"
	short, long := "Deny an approval request", "Deny"
	if grant {
		verb, done = "approve", "approved"
		short, long = "Grant an approval request", "Grant"
	}
	var as, note string
	var sets []string
	var sf standingFlags
	cmd := &cobra.Command{
		Use:   verb + " ID [flags]",
		Short: short,
		Long: fmt.Sprintf(`%s the approval request ID, as NAME: --as, else $LATCH_APPROVER, else $USER.

NAME is recorded as the approver, NFKC-normalized and trimmed. A principal may not
answer its own request (NAME equal to the requesting agent or user, compared without
case, spaces or invisible characters, is refused: self_approval); an expired request is
written expired and refused; a request is answered once. --note keeps a note with the
answer (on the request and in its event).%s%s`, long, setHelp(grant), map[bool]string{true: `

--standing-uses N --standing-for DURATION also grant a standing approval from the request
(docs/approvals.md#standing-approvals): up to N further calls of the same action by the
same principal, until DURATION from now, each presenting the standing approval's id. Every
argument must be the request's, except --standing-max ARG=N (an integer from 0 to N) and
--standing-vary ARG (any value); --standing-total ARG=N caps the sum over the calls. The
policy's approvers.standing bounds N and DURATION; without it the grant is refused
(standing_not_allowed). An answer either edits the request (--set) or grants a standing
approval from it, not both.`}[grant]),
		Example: fmt.Sprintf("  latch %s apr_6f0c… --as alice", verb) + setExample(grant),
		Args:    exactArgs("ID"),
		RunE: func(cmd *cobra.Command, pos []string) error {
			name, err := a.operator(as, cmd.Flags().Changed("as"))
			if err != nil {
				return err
			}
			var terms *store.StandingTerms
			if grant {
				if terms, err = sf.terms(cmd); err != nil {
					return err
				}
			}
			g, err := a.openAnswerer()
			if err != nil {
				return err
			}
			defer g.Close()
			set, err := setObject(sets)
			if err != nil {
				return err
			}
			req := &store.AnswerRequest{ID: pos[0], Grant: grant, Approver: name, Note: note, Method: store.MethodCLI, Set: set, Standing: terms}
			ap, err := g.Answer(a.ctx, req)
			if err != nil {
				return answerError(verb, pos[0], name, err)
			}
			if set != nil {
				fmt.Fprintf(a.stdout, "edited %s as %s: %s; the call runs only with the edited arguments\n", ap.ID, name, editText(a.ctx, g, ap.ID))
			}
			pol := g.Policy()
			d := approvalAction(pol, ap)
			if ap.Status == store.Pending { // a grant of several required
				n, verified := required(pol, ap)
				fmt.Fprintf(a.stdout, "recorded %s's grant of %s (cli, not verified): %d of %d grants; still pending: %s %s\n", ap.Answers[len(ap.Answers)-1].Name, ap.ID,
					store.Grants(ap.Answers, verified), n, ap.ActionName, cell(withReadable(pol, ap.ActionName, d.Arguments)))
				return nil
			}
			fmt.Fprintf(a.stdout, "%s %s as %s: %s %s\n", done, ap.ID, ap.Approver, ap.ActionName, cell(withReadable(pol, ap.ActionName, d.Arguments)))
			fmt.Fprintf(a.stdout, "bound to %s", ap.ActionHash)
			if grant {
				fmt.Fprintf(a.stdout, "; single use, until %s", stamp(ap.ExpiresAt))
			}
			fmt.Fprintln(a.stdout)
			if req.StandingID != "" {
				if s, err := g.Standing(a.ctx, req.StandingID); err == nil {
					fmt.Fprintln(a.stdout, standingLine(s))
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&as, "as", "", "who answers: `NAME` is recorded as the approver (default $LATCH_APPROVER, else $USER)")
	cmd.Flags().StringVar(&note, "note", "", "a `TEXT` kept with the answer")
	if grant {
		cmd.Flags().StringArrayVar(&sets, "set", nil, "approve with an edit: `NAME=VALUE` sets argument NAME to the JSON VALUE (repeatable; only arguments the policy marks editable, only narrowed)")
		sf.register(cmd)
	}
	return cmd
}

// setHelp is the help of approve's --set.
func setHelp(grant bool) string {
	if !grant {
		return ""
	}
	return `

--set NAME=VALUE approves with an edit (docs/approvals.md#approve-with-edits): argument
NAME takes the JSON VALUE instead of what was requested. Only arguments the policy marks
editable may change, and only as it allows (an amount only lowered, not below its floor):
anything else is refused (edit_not_editable, edit_widens, edit_invalid) and nothing is
written. The request then binds the edited arguments: the agent presents them with the
same approval, and the requested ones are refused.`
}

func setExample(grant bool) string {
	if !grant {
		return ""
	}
	return "\n  latch approve apr_6f0c… --as alice --set amount=40000"
}

// setObject is the JSON object of approve's --set NAME=VALUE flags; nil when there are none.
func setObject(sets []string) (json.RawMessage, error) {
	if len(sets) == 0 {
		return nil, nil
	}
	obj := make(map[string]json.RawMessage, len(sets))
	for _, kv := range sets {
		name, val, ok := strings.Cut(kv, "=")
		switch {
		case !ok || name == "":
			return nil, fmt.Errorf("--set %q: expected NAME=VALUE, for example --set amount=40000", kv)
		case obj[name] != nil:
			return nil, fmt.Errorf("--set %s is given twice", name)
		case !json.Valid([]byte(val)):
			return nil, fmt.Errorf("--set %s=%s: the value is JSON (a number as it is, a string in double quotes: --set 'note=\"text\"')", name, val)
		}
		obj[name] = json.RawMessage(val)
	}
	return json.Marshal(obj)
}

// editText says what the last edit of request id changed, read back from its events.
func editText(ctx context.Context, g *latch.Guard, id string) string {
	ap, err := g.Approved(ctx, id)
	if err != nil || !ap.Edited() {
		return "the edit could not be read back"
	}
	last := ap.Edits[len(ap.Edits)-1]
	parts := make([]string, 0, len(last.Changes))
	for _, c := range last.Changes {
		parts = append(parts, fmt.Sprintf("%s %s → %s", c.Argument, c.From, c.To))
	}
	return strings.Join(parts, ", ")
}

// actionOf names a request's action for a message.
func actionOf(ap *store.Approval) string {
	if ap == nil || ap.ActionName == "" {
		return "this action"
	}
	return ap.ActionName
}

// answerError explains a refused answer in one line.
func answerError(verb, id, name string, err error) error {
	var ae *store.AnswerError
	var se *store.StandingError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("no approval request %s in this store", id)
	case errors.As(err, &se):
		return fmt.Errorf("%s refused: %s (%s); nothing was granted", id, se.Detail, se.Reason)
	case errors.As(err, &ae):
		ap := ae.Approval
		switch r := ae.Reason; {
		case r == "self_approval":
			return fmt.Errorf("%s refused: %s requested this action and may not answer it (self_approval)", id, name)
		case r == "expired":
			return fmt.Errorf("%s refused: the request expired at %s (expired)", id, stamp(ap.ExpiresAt))
		case r == "invalid_approver":
			return fmt.Errorf("%s refused: %q is not a valid approver name (invalid_approver)", id, name)
		case r == store.ReasonNotEntitled:
			return fmt.Errorf("%s refused: %s is not in a role the policy lets approve %s (approver_not_entitled); see docs/approvals.md", id, name, actionOf(ap))
		case r == store.ReasonNotVerified:
			return fmt.Errorf("%s refused: the policy requires verified approvers for %s, and an answer given here as --as %s is not verified: answer in the console or over the API of latch serve (approver_not_verified)", id, actionOf(ap), name)
		case r == policy.ReasonEditNotEditable || r == policy.ReasonEditWidens || r == policy.ReasonEditInvalid || r == store.ReasonEditStale:
			why := ae.Detail
			if r == store.ReasonEditStale {
				why = "another approver edited it meanwhile; read it again (latch approvals)"
			}
			return fmt.Errorf("%s refused: %s; nothing was written (%s)", id, why, r)
		case r == store.ReasonAlreadyAnswered:
			return fmt.Errorf("%s refused: %s has already answered it; one person counts once (already_answered)", id, name)
		case strings.HasPrefix(r, "already_") && ap != nil:
			by := ""
			if ap.Approver != "" {
				by = " by " + ap.Approver
			}
			return fmt.Errorf("%s refused: it is already %s%s; a request is answered once (%s)", id, ap.Status, by, r)
		default:
			return fmt.Errorf("%s refused: %s", id, r)
		}
	}
	return fmt.Errorf("%s %s: %s", verb, id, reason(err))
}
