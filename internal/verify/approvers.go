package verify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// The approver guarantees (G17–G19) answer requests as people the policy's roles entitle. The
// scratch store has no approver accounts of the operator's, so verify gives it its own
// (approverAccounts): every name it answers as — and the requesting principal, so that G18
// shows the requester refused although entitled — holds every role the policy defines, except
// the outsider of G17. Every answer is verified (a logged-in approver, store.MethodSession).

// Reasons for N/A of the approver guarantees.
const (
	naNoRoles = "no action that can decide approve names roles in its approvers (anyone but the requester may answer it: nobody is outside)"
	naNoMofN  = "no action that can decide approve requires two or more grants (approvers.required): one grant decides every request"
)

// verifyOutsider is the approver G17 answers as: a member of no role.
const verifyOutsider = "latch-verify-outsider"

// approverName is the i-th (0-based) person verify answers as.
func approverName(i int) string {
	if i == 0 {
		return verifyApprover
	}
	return fmt.Sprintf("%s-%d", verifyApprover, i+1)
}

// approverAccounts stands in for the approver accounts of the console (store.RoleLookup, given
// to the guard as Config.ApproverRoles): every name holds every role the policy defines, except
// the outsider. With faultAnyoneEntitled the outsider holds them too.
type approverAccounts struct {
	roles  []string
	anyone bool
}

func newApproverAccounts(pol *policy.Policy, faults faultSet) *approverAccounts {
	a := &approverAccounts{anyone: faults[faultAnyoneEntitled]}
	if pol.Approvers != nil {
		for r := range pol.Approvers.Roles {
			a.roles = append(a.roles, r)
		}
		slices.Sort(a.roles)
	}
	return a
}

// ApproverRoles implements store.RoleLookup.
func (a *approverAccounts) ApproverRoles(_ context.Context, name string) ([]string, error) {
	if store.SameName(name, verifyOutsider) && !a.anyone {
		return nil, nil
	}
	return slices.Clone(a.roles), nil
}

// listedOutsider reports whether the policy itself lists the outsider in a role (then G17 has
// nobody outside to answer as).
func listedOutsider(pol *policy.Policy) bool {
	if pol.Approvers == nil {
		return false
	}
	for _, r := range pol.Approvers.Roles {
		for _, m := range r.Members {
			if store.SameName(m, verifyOutsider) {
				return true
			}
		}
	}
	return false
}

// answerAs answers request id as name, verified over a login session.
func (e *env) answerAs(ctx context.Context, id, name string, grant bool, method string) (*store.Approval, error) {
	if method == "" {
		method = store.MethodSession
	}
	return e.g.Answer(ctx, &store.AnswerRequest{ID: id, Grant: grant, Approver: name, Method: method, Verified: true,
		Note: "latch verify"})
}

// grantAll grants request id as many distinct entitled people as the action requires, skipping
// the first skip of them (who already answered).
func (e *env) grantAll(ctx context.Context, id, action string, skip int) (*store.Approval, error) {
	n := e.r.pol().ApproversFor(action).Required
	var a *store.Approval
	for i := skip; i < n; i++ {
		var err error
		if a, err = e.answerAs(ctx, id, approverName(i), true, ""); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// ask makes the call that stores an approval request, and returns its id without answering it.
func (e *env) ask(ctx context.Context, pk *pick, v variant) (string, error) {
	var c counter
	_, err := e.exec(ctx, pk, v, c.commit)
	var ar *latch.ApprovalRequiredError
	if !errors.As(err, &ar) {
		return "", fmt.Errorf("call without an approval: got %v, want an approval request", err)
	}
	if c.count() != 0 {
		return "", errors.New("call without an approval executed")
	}
	return ar.ApprovalID, nil
}

// answerState is what an answer could have changed: the request and its events.
type answerState struct {
	status  store.ApprovalStatus
	answers int
	events  int
}

func (e *env) answerState(ctx context.Context, id string) (answerState, error) {
	a, err := e.st.Approval(ctx, id)
	if err != nil {
		return answerState{}, fmt.Errorf("read approval %s: %w", id, err)
	}
	evs, err := e.st.Events(ctx, store.EventFilter{ApprovalID: id})
	if err != nil {
		return answerState{}, fmt.Errorf("read events of %s: %w", id, err)
	}
	return answerState{status: a.Status, answers: len(a.Answers), events: len(evs)}, nil
}

func (s answerState) String() string {
	return fmt.Sprintf("%s with %d answers, %d events", s.status, s.answers, s.events)
}

// refusedFor returns the refusal reason of an answer, or what happened instead.
func refusedFor(err error) string {
	var ae *store.AnswerError
	switch {
	case err == nil:
		return "accepted"
	case errors.As(err, &ae):
		return ae.Reason
	}
	return "error: " + err.Error()
}

// approvedControl grants request id by as many entitled people as the action requires
// (skipping those who already answered), presents it, and says whether the call ran once.
func (e *env) approvedControl(ctx context.Context, id string, pk *pick, v variant, skip int) (bool, string) {
	a, err := e.grantAll(ctx, id, pk.Action, skip)
	if err != nil {
		return false, "granting by the entitled approvers: " + err.Error()
	}
	var c counter
	_, err = e.execApproved(ctx, id, pk, v, c.commit)
	return err == nil && c.count() == 1 && a.Status == store.Granted,
		fmt.Sprintf("granted by %d entitled approvers (%s), the call %s, executions: %d", len(a.Answers), a.Status, outcomeOf(err), c.count())
}

// g17: an approver outside the action's roles is refused approver_not_entitled, for a grant and
// for a deny, and nothing is written; control: the entitled approvers grant it and the call runs.
func (r *runner) g17(ctx context.Context) (outcome, error) {
	pk, why := r.pickFor(policy.Approve, chooseOpts{accept: func(a *policy.Action) bool {
		return a.Approvers != nil && len(a.Approvers.Roles) > 0
	}}, naNoRoles)
	if pk == nil {
		return notApplicable(why), nil
	}
	if listedOutsider(r.pol()) {
		return notApplicable("the policy lists " + verifyOutsider + " in a role: verify has nobody outside the roles to answer as"), nil
	}
	v := pk.variants[0]
	e, err := r.newEnv(ctx, "g17", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	id, err := e.ask(ctx, pk, v)
	if err != nil {
		return controlFailed(pk.Action, "approval request for "+v.describe()+": "+err.Error()), nil
	}
	before, err := e.answerState(ctx, id)
	if err != nil {
		return outcome{}, err
	}
	_, gerr := e.answerAs(ctx, id, verifyOutsider, true, "")
	_, derr := e.answerAs(ctx, id, verifyOutsider, false, "")
	after, err := e.answerState(ctx, id)
	if err != nil {
		return outcome{}, err
	}
	ok, control := e.approvedControl(ctx, id, pk, v, 0)
	roles := strings.Join(r.pol().ApproversFor(pk.Action).Roles, ", ")
	detail := fmt.Sprintf("%s (roles %s): %s's grant %s, deny %s; request %s before, %s after; control: %s",
		v.describe(), roles, verifyOutsider, refusedFor(gerr), refusedFor(derr), before, after, control)
	switch {
	case refusedFor(gerr) != store.ReasonNotEntitled || refusedFor(derr) != store.ReasonNotEntitled:
		return fail(pk.Action, "an approver outside the roles was not refused approver_not_entitled", detail), nil
	case after != before:
		return fail(pk.Action, "a refused answer wrote something", detail), nil
	case !ok:
		return controlFailed(pk.Action, detail), nil
	}
	return pass(pk.Action, detail), nil
}

// spellings are ways of writing name that name the same person: as given, in capitals, padded,
// and in full-width letters.
func spellings(name string) []string {
	full := strings.Map(func(r rune) rune {
		if r > ' ' && r <= '~' {
			return r - '!' + '！'
		}
		return r
	}, name)
	out := []string{name, strings.ToUpper(name), " " + name + " ", full}
	slices.Sort(out)
	return slices.Compact(out)
}

// g18: the requesting agent, and the user it acts for, are refused self_approval in every
// spelling, although verify's accounts make them members of every role; nothing is written;
// control: other entitled approvers grant it and the call runs.
func (r *runner) g18(ctx context.Context) (outcome, error) {
	pk, why := r.pickFor(policy.Approve, chooseOpts{}, naNoApprove)
	if pk == nil {
		return notApplicable(why), nil
	}
	v := pk.variants[0]
	e, err := r.newEnv(ctx, "g18", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	id, err := e.ask(ctx, pk, v)
	if err != nil {
		return controlFailed(pk.Action, "approval request for "+v.describe()+": "+err.Error()), nil
	}
	before, err := e.answerState(ctx, id)
	if err != nil {
		return outcome{}, err
	}
	p := pk.principal()
	var names []string
	names = append(names, spellings(p.Agent)...)
	if p.User != "" {
		names = append(names, spellings(p.User)...)
	}
	var got []string
	accepted := false
	for i, n := range names {
		method := []string{store.MethodSession, store.MethodToken, store.MethodJWT, store.MethodProxy}[i%4]
		_, err := e.answerAs(ctx, id, n, true, method)
		reason := refusedFor(err)
		got = append(got, fmt.Sprintf("%q over %s %s", n, method, reason))
		if reason != store.ReasonSelfApproval {
			accepted = true
		}
	}
	after, err := e.answerState(ctx, id)
	if err != nil {
		return outcome{}, err
	}
	ok, control := e.approvedControl(ctx, id, pk, v, 0)
	detail := fmt.Sprintf("%s asked by %s: %s; request %s before, %s after; control: %s",
		v.describe(), principalText(p), strings.Join(got, "; "), before, after, control)
	switch {
	case accepted:
		return fail(pk.Action, "the requester's own answer was not refused self_approval", detail), nil
	case after != before:
		return fail(pk.Action, "a refused answer wrote something", detail), nil
	case !ok:
		return controlFailed(pk.Action, detail), nil
	}
	return pass(pk.Action, detail), nil
}

// g19: one person's further answers — another spelling, another method — are refused
// already_answered, the request stays pending with one grant and cannot be spent; control: the
// other required approvers grant it and the call runs once.
func (r *runner) g19(ctx context.Context) (outcome, error) {
	pk, why := r.pickFor(policy.Approve, chooseOpts{accept: func(a *policy.Action) bool {
		return a.Approvers != nil && a.Approvers.Required >= 2
	}}, naNoMofN)
	if pk == nil {
		return notApplicable(why), nil
	}
	v := pk.variants[0]
	required := r.pol().ApproversFor(pk.Action).Required
	e, err := r.newEnv(ctx, "g19", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	id, err := e.ask(ctx, pk, v)
	if err != nil {
		return controlFailed(pk.Action, "approval request for "+v.describe()+": "+err.Error()), nil
	}
	first, err := e.answerAs(ctx, id, approverName(0), true, store.MethodSession)
	if err != nil {
		return controlFailed(pk.Action, "the first grant: "+err.Error()), nil
	}
	before, err := e.answerState(ctx, id)
	if err != nil {
		return outcome{}, err
	}
	var got []string
	accepted := false
	for i, n := range spellings(approverName(0)) {
		method := []string{store.MethodToken, store.MethodJWT, store.MethodProxy, store.MethodSession}[i%4]
		_, err := e.answerAs(ctx, id, n, true, method)
		reason := refusedFor(err)
		got = append(got, fmt.Sprintf("%q over %s %s", n, method, reason))
		if reason != store.ReasonAlreadyAnswered {
			accepted = true
		}
	}
	after, err := e.answerState(ctx, id)
	if err != nil {
		return outcome{}, err
	}
	var c counter
	_, perr := e.execApproved(ctx, id, pk, v, c.commit)
	ok, control := e.approvedControl(ctx, id, pk, v, 1)
	detail := fmt.Sprintf("%s needs %d grants: %s granted (%s); again as %s; request %s before, %s after; presented then: %s, executions: %d; control: %s",
		v.describe(), required, approverName(0), store.Progress(first, required), strings.Join(got, "; "), before, after,
		outcomeOf(perr), c.count(), control)
	switch {
	case accepted:
		return fail(pk.Action, "one person's further answer was not refused already_answered", detail), nil
	case after != before || after.status != store.Pending:
		return fail(pk.Action, "one person's further answers changed the request", detail), nil
	case c.count() != 0:
		return fail(pk.Action, "the call ran on one person's grants", detail), nil
	case !ok:
		return controlFailed(pk.Action, detail), nil
	}
	return pass(pk.Action, detail), nil
}
