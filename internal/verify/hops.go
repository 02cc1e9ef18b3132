package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/authority"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// G25's and G26's faults, and the grant G25 gives the receiver of its hop.
const (
	// faultHopUnchecked creates hops straight in the store (via hop), without checking that
	// they are contained in their parent, as a Hop that skipped the containment check would.
	// G25 fails.
	faultHopUnchecked = "hop_unchecked"
	// faultHopFallback presents a call the hop refused again without the hop, as a guard that
	// fell back to the receiver's other grants when the hop did not allow a call would. G25
	// fails.
	faultHopFallback = "hop_fallback"
	// faultHopReceiptUnnamed writes the receiver's receipts without the hop they ran under, as
	// a receipt writer that recorded only the policy grant at the top of the chain would. G26
	// fails.
	faultHopReceiptUnnamed = "hop_receipt_unnamed"

	// receiverOwnGrant is the id of the wider grant of its own G25 gives the receiver of the
	// hop, for the action the scenario uses and nothing else constrained.
	receiverOwnGrant = "latch-verify-receiver-own"
)

// hopVia is variant v presenting the hop id.
func (v variant) hopVia(id string) variant {
	v.hop = id
	return v
}

// hopOf is the hop G25 and G26 create beneath a delegable grant: the narrowed child G9 creates,
// addressed to latch-verify-delegate (narrowed), with pk, the pick as that receiver proposes it.
type hopOf struct {
	parent   *policy.Grant // the operator's delegable grant
	grant    policy.Grant  // the hop's grant
	sender   latch.Principal
	receiver latch.Principal
	pk       *pick // proposed as the receiver
	t0       time.Time
}

// hopPick finds the hop G25 and G26 play, with n variants, or says why there is none.
func (r *runner) hopPick(n int) (*hopOf, string) {
	g, pk, t0, why := r.delegablePick(n)
	if pk == nil {
		return nil, why
	}
	sender := pk.principal()
	base := narrowed(r.scenarioGrant(g), pk, pk.variants[0], sender, t0)
	return &hopOf{parent: g, grant: base, sender: sender, receiver: latch.Principal{Agent: delegateAgent, User: base.Subject.User},
		pk: asDelegate(pk, base), t0: t0}, ""
}

// hop creates a hop beneath parent addressed to to, by by: through the guard (which checks that
// it is contained in its parent), or, with faultHopUnchecked, straight into the store.
func (r *runner) hop(ctx context.Context, e *env, parent string, g policy.Grant, to, by latch.Principal) (*store.Delegation, error) {
	doc, err := json.Marshal(encodeGrant(&g))
	if err != nil {
		return nil, fmt.Errorf("encode a hop's grant: %w", err)
	}
	if !r.faults[faultHopUnchecked] {
		return e.g.Hop(ctx, parent, doc, to, by)
	}
	ds, ok := e.st.(store.DelegationStore)
	if !ok {
		return nil, fmt.Errorf("store %T keeps no delegations", e.st)
	}
	d := &store.Delegation{ID: newDelegationID(), Parent: parent, Grant: doc, CreatedBy: principalText(by), CreatedAt: e.clock.Now(), Via: store.ViaHop}
	if err := ds.CreateDelegation(ctx, d, nil); err != nil {
		return nil, err
	}
	return d, nil
}

// beyond is how G25 narrows its hop so that one call the receiver's own grant allows is outside
// it: the hop's grant, the variant outside it, when it is made, and what makes it outside.
type beyond struct {
	grant policy.Grant
	v     variant
	at    time.Time
	how   string
}

// beyondHop narrows h's grant so that a later variant of its pick falls outside the hop while
// the first stays inside: by resource when the hop names resources and the two differ, else by
// an eq constraint on an argument the two give different scalar values, checked with
// authority.Evaluate over the hop's grant alone; failing both, the call is made after the hop's
// expires_at (still within its parent's).
func beyondHop(h *hopOf, env string) beyond {
	in, out := h.pk.variants[0], h.pk.variant(1)
	check := func(g policy.Grant) bool {
		only := &policy.Authority{Grants: []*policy.Grant{&g}}
		req := func(v variant) authority.Request {
			return authority.Request{Agent: h.receiver.Agent, User: h.receiver.User, Action: h.pk.Action,
				Resource: h.pk.resourceOf(v), Task: v.Task, Args: v.Args, Environment: env, Now: h.t0}
		}
		g.ID = "hop"
		return authority.Evaluate(only, nil, req(in)).Allowed && !authority.Evaluate(only, nil, req(out)).Allowed
	}
	if h.grant.Resources != nil && h.pk.resourceOf(in) != h.pk.resourceOf(out) && check(h.grant) {
		return beyond{grant: h.grant, v: out, at: h.t0, how: "resource " + h.pk.resourceOf(out) + " is not among the hop's resources"}
	}
	keys := make([]string, 0, len(in.Args))
	for k := range in.Args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a, b := in.Args[k], out.Args[k]
		if sameValue(a, b) || slices.ContainsFunc(h.grant.Constraints, func(c policy.Condition) bool { return c.Key == k+"_eq" }) {
			continue
		}
		switch a.(type) {
		case string, int64, bool:
		default:
			continue
		}
		c, err := policy.ParseCondition(k+"_eq", a)
		if err != nil {
			continue
		}
		g := h.grant
		g.Constraints = append(slices.Clone(h.grant.Constraints), c)
		if check(g) {
			return beyond{grant: g, v: out, at: h.t0, how: fmt.Sprintf("the hop adds the constraint %s_eq: %v", k, a)}
		}
	}
	return beyond{grant: h.grant, v: out, at: h.grant.ExpiresAt.Add(time.Millisecond), how: "the call is made after the hop's expires_at"}
}

// receiverPolicy is the scenario policy with one more grant: the receiver's own, for action,
// wider than any hop (nothing constrained but the action).
func (r *runner) receiverPolicy(action string, receiver latch.Principal) (*scenarioPolicy, string, error) {
	p := *r.lifted
	au := *p.Authority
	id := receiverOwnGrant
	for slices.ContainsFunc(au.Grants, func(g *policy.Grant) bool { return g != nil && g.ID == id }) {
		id += "-x"
	}
	au.Grants = append(slices.Clone(au.Grants), &policy.Grant{ID: id, Subject: policy.Subject{Agent: receiver.Agent, User: receiver.User}, Actions: []string{action}})
	p.Authority = &au
	sp, err := newScenarioPolicy(&p, nil, true)
	return sp, id, err
}

// g25: beneath the first delegable grant (as G9 finds it), hops to latch-verify-delegate that
// widen the grant on each dimension it constrains, or are delegable, are refused
// authority_escalation naming the dimension, and nothing is stored; the receiver, which holds a
// wider grant of its own, is decided by the hop: a call outside the hop presenting it is refused
// and does not execute, although its own grant allows the same call. Control: the narrowing hop
// is created, and the call within it runs, its receipt naming the hop.
func (r *runner) g25(ctx context.Context) (outcome, error) {
	h, why := r.hopPick(3)
	if h == nil {
		return notApplicable(why), nil
	}
	b := beyondHop(h, r.env)
	sg := r.scenarioGrant(h.parent)
	var probes []probe
	found, skipped := probesFor(sg, b.grant)
	for _, pb := range found {
		if pb.dim != authority.DimSubject { // a hop's subject is its receiver, by construction
			probes = append(probes, pb)
		}
	}
	del := b.grant
	del.Delegable = true
	probes = append(probes, probe{kind: "widened", dim: authority.DimDelegable, grant: del})

	sp, ownID, err := r.receiverPolicy(h.pk.Action, h.receiver)
	if err != nil {
		return outcome{}, err
	}
	e, err := r.newEnv(ctx, "g25", sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	e.clock.set(h.t0)

	var seen, bad []string
	for _, pb := range probes {
		before, err := e.delegationCount(ctx)
		if err != nil {
			return outcome{}, err
		}
		d, herr := r.hop(ctx, e, h.parent.ID, pb.grant, h.receiver, h.sender)
		after, err := e.delegationCount(ctx)
		if err != nil {
			return outcome{}, err
		}
		var ae *latch.AuthorityError
		got := "accepted"
		switch {
		case errors.As(herr, &ae):
			got = "refused " + ae.Reason + " on " + ae.Dimension
		case herr != nil:
			return outcome{}, fmt.Errorf("hop the %s grant on %s: %w", pb.kind, pb.dim, herr)
		}
		seen = append(seen, fmt.Sprintf("%s %s: %s", pb.kind, pb.dim, got))
		if d != nil || after != before || ae == nil || ae.Reason != authority.ReasonEscalation || ae.Dimension != pb.dim {
			bad = append(bad, fmt.Sprintf("the %s hop on %s was %s", pb.kind, pb.dim, got))
		}
	}

	// The control: the narrowing hop is created, and the call within it runs under it.
	in := h.pk.variants[0]
	d, cerr := r.hop(ctx, e, h.parent.ID, b.grant, h.receiver, h.sender)
	if cerr != nil {
		return controlFailed(h.pk.Action, fmt.Sprintf("beneath %s, by %s: %s; the narrowing hop to %s: %s",
			h.parent.ID, principalText(h.sender), strings.Join(seen, "; "), principalText(h.receiver), outcomeOf(cerr))), nil
	}
	var c counter
	rc, err := e.runReceipt(ctx, h.pk, in.hopVia(d.ID), c.commit)
	via := "no receipt"
	if rc != nil && rc.Authority != nil {
		via = "via " + rc.Authority.DelegationID
	}
	ctlOK := err == nil && c.count() == 1 && rc != nil && rc.Authority != nil && rc.Authority.DelegationID == d.ID
	ctl := fmt.Sprintf("narrowing hop %s to %s created; %s presenting it: %s (%s), executions: %d",
		d.ID, principalText(h.receiver), in.describe(), outcomeOf(err), via, c.count())

	// The receiver's own grant allows the call outside the hop (else its refusal would prove
	// nothing), and presenting the hop it is refused.
	e.clock.set(b.at)
	ev, err := e.g.Evaluate(withPrincipal(ctx, h.receiver), b.v.call(h.pk.Action))
	own := "not evaluated: " + errText(err)
	if err == nil {
		own = fmt.Sprintf("%s (authority %s)", ev.Decision, authorityText(ev.Authority))
		ctlOK = ctlOK && ev.Decision != policy.Deny && ev.Authority != nil && ev.Authority.Allowed && ev.Authority.GrantID == ownID
	} else {
		ctlOK = false
	}
	var oc counter
	_, oerr := e.exec(ctx, h.pk, b.v.hopVia(d.ID), oc.commit)
	var ae *latch.AuthorityError
	if r.faults[faultHopFallback] && errors.As(oerr, &ae) {
		_, oerr = e.runReceipt(ctx, h.pk, b.v, oc.commit)
	}
	outside := fmt.Sprintf("outside the hop (%s), %s: without the hop its own grant %s decides %s; presenting the hop: %s, executions: %d",
		b.how, b.v.describe(), ownID, own, outcomeOf(oerr), oc.count())

	detail := fmt.Sprintf("beneath %s, by %s: %s; control, %s; %s", h.parent.ID, principalText(h.sender), strings.Join(seen, "; "), ctl, outside)
	if len(skipped) > 0 {
		detail += "; not probed: " + strings.Join(skipped, "; ")
	}
	switch {
	case !ctlOK:
		return controlFailed(h.pk.Action, detail), nil
	case len(bad) > 0:
		return fail(h.pk.Action, bad[0], detail), nil
	case oc.count() != 0:
		return fail(h.pk.Action, "the call outside the hop executed under the receiver's own grant", detail), nil
	case !errors.As(oerr, &ae):
		return fail(h.pk.Action, "the call outside the hop was not refused on the authority axis", detail), nil
	}
	return pass(h.pk.Action, detail), nil
}

// authorityText renders an authority decision for a detail.
func authorityText(d *authority.Decision) string {
	switch {
	case d == nil:
		return "none"
	case d.Allowed:
		return "granted by " + d.GrantID
	}
	return "denied " + d.Reason
}

// g26: beneath the first delegable grant, the sender creates a hop to latch-verify-delegate and
// the receiver makes a call presenting it; in the chain, the record of the hop's creation (the
// issuer's receipt) and the receiver's receipt must name the same hop. Control: the hop is
// created and the call under it runs.
func (r *runner) g26(ctx context.Context) (outcome, error) {
	h, why := r.hopPick(1)
	if h == nil {
		return notApplicable(why), nil
	}
	e, err := r.newEnv(ctx, "g26", r.sp)
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	e.clock.set(h.t0)

	v := h.pk.variants[0]
	d, herr := r.hop(ctx, e, h.parent.ID, h.grant, h.receiver, h.sender)
	if herr != nil {
		return controlFailed(h.pk.Action, fmt.Sprintf("beneath %s, by %s, the hop to %s: %s",
			h.parent.ID, principalText(h.sender), principalText(h.receiver), outcomeOf(herr))), nil
	}
	var c counter
	rc, cerr := e.runReceipt(ctx, h.pk, v.hopVia(d.ID), c.commit)
	if cerr != nil || c.count() != 1 || rc == nil {
		return controlFailed(h.pk.Action, fmt.Sprintf("hop %s to %s created; %s presenting it: %s, executions: %d",
			d.ID, principalText(h.receiver), v.describe(), outcomeOf(cerr), c.count())), nil
	}
	issuer, receiver, err := hopRecords(ctx, e, principalText(h.sender), rc.ReceiptID)
	if err != nil {
		return outcome{}, err
	}
	detail := fmt.Sprintf("hop %s beneath %s, by %s to %s; issuer's records naming a hop by %s: %s; receiver's receipt %s names hop %q",
		d.ID, h.parent.ID, principalText(h.sender), principalText(h.receiver), principalText(h.sender), quoteAll(issuer), rc.ReceiptID, receiver)
	switch {
	case len(issuer) != 1:
		return fail(h.pk.Action, fmt.Sprintf("the chain holds %d records of the hop's creation by its sender, want 1", len(issuer)), detail), nil
	case receiver != issuer[0]:
		return fail(h.pk.Action, "the issuer's and the receiver's receipts name different hops", detail), nil
	}
	return pass(h.pk.Action, detail+": one hop"), nil
}

// hopRecords reads the chain: the delegation ids named by the records of delegations created by
// sender, and the delegation id the receipt receiptID names on its authority ("" when none).
func hopRecords(ctx context.Context, e *env, sender, receiptID string) ([]string, string, error) {
	var issuer []string
	receiver := ""
	for sealed, err := range e.st.Receipts(ctx, store.ReceiptFilter{}) {
		if err != nil {
			return nil, "", fmt.Errorf("read receipts: %w", err)
		}
		var doc struct {
			ReceiptID  string `json:"receipt_id"`
			Kind       string `json:"kind"`
			Delegation *struct {
				ID        string `json:"delegation_id"`
				CreatedBy string `json:"created_by"`
			} `json:"delegation"`
			Authority *struct {
				DelegationID string `json:"delegation_id"`
			} `json:"authority"`
		}
		if err := json.Unmarshal(sealed.Doc, &doc); err != nil {
			return nil, "", fmt.Errorf("read receipt %d: %w", sealed.Seq, err)
		}
		switch {
		case doc.Kind == receipt.KindDelegation && doc.Delegation != nil && doc.Delegation.CreatedBy == sender:
			issuer = append(issuer, doc.Delegation.ID)
		case doc.ReceiptID == receiptID && doc.Authority != nil:
			receiver = doc.Authority.DelegationID
		}
	}
	return issuer, receiver, nil
}

func quoteAll(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	return strings.Join(ss, ", ")
}
