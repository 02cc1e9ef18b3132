package authority

import (
	"strconv"
	"time"

	"github.com/latchkit/latch/policy"
)

// Request is one proposal on the authority axis: who asks (Agent, and User when the agent acts
// for one), what (Action, and Resource when the action has one), where (Environment, the
// policy's environment), for which task (Task, the id of the job, ticket or workflow the call is
// part of, "" when it names none), with which arguments (Args, in canon's value model), and when
// (Now, the injected clock). A zero Now cannot show that anything has not expired: every grant
// with an expires_at is then treated as expired.
type Request struct {
	Agent, User string
	Action      string
	Resource    string
	Environment string
	Task        string
	Args        map[string]any
	Now         time.Time
	// Hop, when set, is the id of a hop the caller presents: the request is then decided by
	// that hop's chain alone ([ViaHop]), and a hop that is missing, not live or addressed to
	// another subject denies it with [ReasonHop].
	Hop string
}

// Delegation is a stored, insert-only delegation record: a narrower grant created beneath a
// parent, which is a policy grant id or another delegation's id ("dlg_…").
type Delegation struct {
	ID     string
	Parent string
	// Grant is the child grant as written. Its ID is "" or the delegation's ID; Grant.Pos is
	// not used.
	Grant     policy.Grant
	CreatedBy string // the agent (or agent/user) who created it
	CreatedAt time.Time
	// Revoked says this delegation itself was revoked. Delegations beneath it are cut by the
	// chain walk, so revoking a chain of any depth is one write.
	Revoked bool
	// Via is ViaBreakGlass for a grant opened in a break-glass envelope (its Parent is the
	// envelope's id), ViaHop for a hop, "" for a delegation.
	Via string
	// Err is non-nil when the stored row could not be read. One unreadable row denies
	// everything: a row that cannot be read might be the revocation that matters.
	Err error
}

// Decision is the result of [Evaluate]. On a deny, Reason is the highest-precedence reason
// (docs/authority.md) among the grants that matched the subject, action, resource and environment, or
// no_authority when none did; Dimension names what failed; GrantID and DelegationID name the
// grant that failed that way. On an allow, GrantID is the policy grant at the root of the
// chain and DelegationID the delegation that matched ("" for a policy grant). Trace has one
// line per grant considered, in order: policy grants as listed, then delegations as given.
type Decision struct {
	Allowed      bool
	Reason       string // ReasonGranted, or a deny reason
	Dimension    string // "" when allowed
	GrantID      string
	DelegationID string
	// Chain is, on an allow, the grant that allowed the call and every grant above it: the
	// delegation that matched (when one did), its parent, and so on up to the policy grant (or
	// break-glass envelope) at the root, each with its budgets. A call is charged against every
	// budget on it, so a delegation can spend no more than any grant above it has left
	// (docs/budgets.md). nil on a deny.
	Chain []Link
	// BreakGlass is the envelope the matching delegation was opened in, when it is a
	// break-glass grant (GrantID is then the envelope's id too); "" otherwise.
	BreakGlass string
	Trace      []string
}

// Link is one grant of a [Decision]'s chain: its id (a policy grant's id, a break-glass
// envelope's id, or a delegation's dlg_ id) and its budgets.
type Link struct {
	ID      string
	Budgets []policy.Budget
}

// ReasonGranted is the Reason of an allowing [Decision].
const ReasonGranted = "granted"

// Evaluate decides r on the authority axis (docs/authority.md): it is allowed iff some grant — a policy
// grant of a, or a delegation of ds — matches the subject, action, resource, environment and
// task (a grant that names tasks matches only a request whose task one of them matches), all
// its constraints hold on r.Args, it has not expired (it is valid up to and including its
// expires_at), and, for a delegation, its whole chain up to a policy grant is present,
// unrevoked, unexpired, at most a.MaxDelegationDepth deep and still contained in its parent at
// every link (containment is checked again here, so a parent grant narrowed in the policy file
// cuts what was delegated beneath it: authority_escalation).
//
// A nil a has no grants and so denies everything; the caller skips the authority axis when the
// policy has no authority section (docs/authority.md). A Delegation with Err set, or one that is not a
// well-formed record, denies everything with authority_unreadable, whatever it would have
// matched.
//
// Evaluate is pure and safe for concurrent use. It allocates the trace and what the
// constraints' own evaluation allocates, nothing in proportion to r.Args.
func Evaluate(a *policy.Authority, ds []Delegation, r Request) Decision {
	for i := range ds {
		if f := checkRecord(&ds[i]); f.failed() {
			d := &ds[i]
			return Decision{
				Reason:       ReasonUnreadable,
				Dimension:    DimRecord,
				DelegationID: d.ID,
				Trace:        []string{"delegation " + idText(d.ID) + ": " + f.msg + "; one unreadable delegation denies everything"},
			}
		}
	}
	if r.Hop != "" {
		return evaluateHop(a, ds, r)
	}
	var grants []*policy.Grant
	if a != nil {
		grants = a.Grants
	}
	// The trace is written into one buffer and cut into lines at the end: a few allocations
	// per decision rather than one per grant considered.
	n := len(grants) + len(ds) + 1
	e := evaluation{text: make([]byte, 0, 48*n), ends: make([]int, 0, n), progress: -1}

	for _, g := range grants {
		if g == nil {
			continue
		}
		if i := mismatch(g, &r); i >= 0 {
			e.miss("grant ", g.ID, i)
			continue
		}
		f, reason := refusal{}, ""
		if expired(g.ExpiresAt, r.Now) {
			f, reason = expiredRefusal("", g.ExpiresAt, r.Now), ReasonExpired
		} else {
			f, reason = constraints(g, r.Args)
		}
		if !f.failed() {
			e.line("grant ", g.ID, ": allowed")
			return e.allow(g.ID, "", []Link{{ID: g.ID, Budgets: g.Budgets}})
		}
		e.near("grant ", g.ID, reason, f, g.ID, "")
	}

	for i := range ds {
		d := &ds[i]
		if d.Via == ViaHop {
			continue // a hop is used only by a call that presents it
		}
		if m := mismatch(&d.Grant, &r); m >= 0 {
			e.miss("delegation ", d.ID, m)
			continue
		}
		c := walk(a, ds, d, r.Now)
		var rootID string
		if c.root != nil {
			rootID = c.root.ID
		}
		if c.reason != "" {
			e.near("delegation ", d.ID, c.reason, c.refusal, rootID, d.ID)
			continue
		}
		if f, reason := constraints(&d.Grant, r.Args); f.failed() {
			e.near("delegation ", d.ID, reason, f, rootID, d.ID)
			continue
		}
		e.line("delegation ", d.ID, ": allowed beneath grant ", rootID)
		dec := e.allow(rootID, d.ID, links(a, ds, d, c.depth))
		dec.BreakGlass = c.envelope
		return dec
	}

	if e.best.Reason != "" {
		e.best.Trace = e.trace()
		return e.best
	}
	dim := ""
	if e.progress >= 0 {
		dim = matchDims[e.progress]
	}
	if len(e.ends) == 0 {
		e.line("no grants")
	}
	return Decision{Reason: ReasonNoAuthority, Dimension: dim, Trace: e.trace()}
}

// evaluation accumulates what Evaluate has seen.
type evaluation struct {
	text     []byte   // the trace, line after line
	ends     []int    // where each line of text ends
	best     Decision // the highest-precedence near miss so far
	progress int      // the furthest a non-matching grant got (index into matchDims), -1 if none
}

// line appends one trace line made of parts.
func (e *evaluation) line(parts ...string) {
	for _, p := range parts {
		e.text = append(e.text, p...)
	}
	e.ends = append(e.ends, len(e.text))
}

// trace returns the lines written so far.
func (e *evaluation) trace() []string {
	all := string(e.text)
	lines := make([]string, len(e.ends))
	start := 0
	for i, end := range e.ends {
		lines[i], start = all[start:end], end
	}
	return lines
}

func (e *evaluation) miss(kind, id string, at int) {
	e.line(kind, id, ": no match on ", matchDims[at])
	if at > e.progress {
		e.progress = at
	}
}

func (e *evaluation) near(kind, id, reason string, f refusal, grantID, delegationID string) {
	e.line(kind, id, ": ", reason, " on ", f.dim, ": ", f.msg)
	if e.best.Reason == "" || rank(reason) < rank(e.best.Reason) {
		e.best = Decision{Reason: reason, Dimension: f.dim, GrantID: grantID, DelegationID: delegationID}
	}
}

func (e *evaluation) allow(grantID, delegationID string, chain []Link) Decision {
	return Decision{
		Allowed:      true,
		Reason:       ReasonGranted,
		GrantID:      grantID,
		DelegationID: delegationID,
		Chain:        chain,
		Trace:        e.trace(),
	}
}

// links is the chain of a delegation whose walk held (depth delegations, then a policy grant):
// d, each parent in turn, and the policy grant at the top.
func links(a *policy.Authority, ds []Delegation, d *Delegation, depth int) []Link {
	out := make([]Link, 0, depth+1)
	cur := d
	for range depth {
		out = append(out, Link{ID: cur.ID, Budgets: cur.Grant.Budgets})
		if cur.Via == ViaBreakGlass {
			// A break-glass grant's parent is its envelope, whose budgets every opening shares.
			if env := a.Envelope(cur.Parent); env != nil {
				return append(out, Link{ID: env.ID, Budgets: env.Budgets})
			}
			return out // not reached: the walk refused a grant whose envelope is gone
		}
		pg, pd, _ := lookup(a, ds, cur.Parent)
		if pg != nil {
			return append(out, Link{ID: pg.ID, Budgets: pg.Budgets})
		}
		cur = pd
	}
	return out // not reached: the walk found the policy grant within depth links
}

// matchDims are the dimensions a request is matched on, in the order they are checked. The
// action comes first: a grant for other actions says nothing about this request, so when no
// grant matches, the dimension reported is the furthest any grant got (a grant for this action
// but another agent: "subject").
var matchDims = [...]string{DimActions, DimSubject, DimResources, DimEnvironments, DimTasks}

// mismatch returns the index in matchDims of the first dimension on which g does not match r,
// or -1 when it matches: the action, the subject (a constrained user requires r to have one),
// the resource (a grant that declares resources does not match a request without one), the
// environment (exact names) and the task (a grant that names tasks does not match a request
// without one).
func mismatch(g *policy.Grant, r *Request) int {
	if !matchAny(g.Actions, r.Action, '.') {
		return 0
	}
	if !matchSubject(g.Subject, r.Agent, r.User) {
		return 1
	}
	if g.Resources != nil && !matchAny(g.Resources, r.Resource, ':') {
		return 2
	}
	if g.Environments != nil && (r.Environment == "" || !has(g.Environments, r.Environment)) {
		return 3
	}
	if g.Tasks != nil && (r.Task == "" || !matchAny(g.Tasks, r.Task, ':')) {
		return 4
	}
	return -1
}

func matchSubject(s policy.Subject, agent, user string) bool {
	if s.Agent == "" && s.User == "" {
		return false
	}
	return (s.Agent == "" || Match(s.Agent, agent, ':')) && (s.User == "" || Match(s.User, user, ':'))
}

func matchAny(patterns []string, s string, sep byte) bool {
	for _, p := range patterns {
		if Match(p, s, sep) {
			return true
		}
	}
	return false
}

// constraints evaluates g's constraints on args. The verdict comes from Holds, which does not
// allocate; Eval runs only to explain a refusal.
func constraints(g *policy.Grant, args map[string]any) (refusal, string) {
	if g.Constraints.Holds(args) {
		return refusal{}, ""
	}
	_, res := g.Constraints.Eval(args)
	for _, cr := range res {
		if !cr.Held {
			return refusal{DimConstraints + "." + cr.Key, cr.Why}, ReasonConstraint
		}
	}
	return refusal{DimConstraints, "constraints do not hold"}, ReasonConstraint
}

// expired reports whether a grant expiring at t (zero: never) has expired at now. A grant is
// valid up to and including t; a zero now proves nothing and counts as expired.
func expired(t, now time.Time) bool {
	return !t.IsZero() && (now.IsZero() || now.After(t))
}

// expiredRefusal explains why name (or, when name is "", the grant the trace line is about)
// counts as expired at now.
func expiredRefusal(name string, t, now time.Time) refusal {
	if name != "" {
		name += " "
	}
	if now.IsZero() {
		return refusal{DimExpiresAt, name + "expires at " + timeText(t) + " and no time was given to show it has not expired"}
	}
	return refusal{DimExpiresAt, name + "expired at " + timeText(t) + " (now " + timeText(now) + ")"}
}

// checkRecord refuses a delegation that cannot be read or is not a well-formed record: no id,
// no parent, its own parent, a grant id other than its own, or a malformed grant.
func checkRecord(d *Delegation) refusal {
	switch {
	case d.Err != nil:
		return refusal{DimRecord, "unreadable: " + d.Err.Error()}
	case d.ID == "":
		return refusal{DimRecord, "no id"}
	case d.Parent == "":
		return refusal{DimRecord, "no parent"}
	case d.Parent == d.ID:
		return refusal{DimRecord, "its own parent"}
	case d.Grant.ID != "" && d.Grant.ID != d.ID:
		return refusal{DimRecord, "grant id " + strconv.Quote(d.Grant.ID) + " is not the delegation's id"}
	}
	if f := validGrant(&d.Grant); f.failed() {
		return refusal{DimRecord, "malformed grant: " + f.dim + ": " + f.msg}
	}
	return refusal{}
}

func idText(id string) string {
	if id == "" {
		return "(no id)"
	}
	return id
}

// chain is the result of walking a delegation's chain.
type chain struct {
	root     *policy.Grant // the policy grant (or envelope) at the top, nil if not reached
	envelope string        // the envelope at the top of a break-glass chain
	depth    int           // delegations from d up to the root, d included
	reason   string        // the highest-precedence failure, "" if the chain holds
	refusal
}

func (c *chain) fail(reason, dim, msg string) {
	if c.reason == "" || rank(reason) < rank(c.reason) {
		c.reason, c.refusal = reason, refusal{dim, msg}
	}
}

// walk checks d's chain at now, from d up to the policy grant at its top. At every link: the
// delegation is not revoked and has not expired, its parent exists (exactly once), is
// delegable and still contains it on every dimension; the policy grant at the top has not
// expired; and the chain is at most a.MaxDelegationDepth long. Every link is checked, and the
// highest-precedence failure is kept.
func walk(a *policy.Authority, ds []Delegation, d *Delegation, now time.Time) chain {
	var c chain
	if n := count(a, ds, d.ID); n > 1 {
		c.fail(ReasonUnreadable, DimRecord, "id "+d.ID+" names "+strconv.Itoa(n)+" records")
		return c
	}
	cur, opened := d, false
	for c.depth = 1; ; c.depth++ {
		if cur.Revoked {
			c.fail(ReasonRevoked, DimRevoked, "delegation "+cur.ID+" is revoked")
		}
		if expired(cur.Grant.ExpiresAt, now) {
			f := expiredRefusal("delegation "+cur.ID, cur.Grant.ExpiresAt, now)
			c.fail(ReasonExpired, f.dim, f.msg)
		}
		if cur.Via == ViaBreakGlass {
			c.opening(a, cur) // the envelope is the root of a break-glass chain
			opened = true
			break
		}
		pg, pd, n := lookup(a, ds, cur.Parent)
		switch {
		case n == 0 && a.Envelope(cur.Parent) != nil:
			c.fail(ReasonEscalation, DimParent, "parent "+cur.Parent+" of delegation "+cur.ID+" is a break-glass envelope, beneath which only a break-glass opening may be")
			return c
		case n == 0:
			c.fail(ReasonRevoked, DimParent, "parent "+cur.Parent+" of delegation "+cur.ID+" no longer exists")
			return c
		case n > 1:
			c.fail(ReasonUnreadable, DimParent, "parent id "+cur.Parent+" names "+strconv.Itoa(n)+" records")
			return c
		}
		parent := pg
		if pd != nil {
			parent = &pd.Grant
		}
		if !parent.Delegable {
			c.fail(ReasonEscalation, DimDelegable, "parent "+cur.Parent+" of delegation "+cur.ID+" is not delegable")
		}
		if f := contained(parent, &cur.Grant); f.failed() {
			c.fail(ReasonEscalation, f.dim, "delegation "+cur.ID+" is not within its parent "+cur.Parent+": "+f.msg)
		}
		if pg != nil {
			c.root = pg
			if expired(pg.ExpiresAt, now) {
				f := expiredRefusal("grant "+pg.ID, pg.ExpiresAt, now)
				c.fail(ReasonExpired, f.dim, f.msg)
			}
			break
		}
		if c.depth >= len(ds) {
			// More links than records: the chain loops.
			c.fail(ReasonUnreadable, DimParent, "the chain of delegation "+d.ID+" loops")
			return c
		}
		cur = pd
	}
	// A break-glass opening is no delegation: it does not count towards the depth (and, never
	// delegable, has nothing beneath it).
	depth := c.depth
	if opened {
		depth--
	}
	if limit := maxDepth(a); depth > limit {
		c.fail(ReasonEscalation, DimDepth, "delegation "+d.ID+" is "+strconv.Itoa(depth)+" deep (max_delegation_depth is "+strconv.Itoa(limit)+")")
	}
	return c
}

// lookup finds the policy grant or delegation with the given id, and how many records have it
// (more than one is ambiguous and must not be guessed at).
func lookup(a *policy.Authority, ds []Delegation, id string) (*policy.Grant, *Delegation, int) {
	var g *policy.Grant
	var d *Delegation
	n := 0
	if a != nil {
		for _, pg := range a.Grants {
			if pg != nil && pg.ID == id {
				g, n = pg, n+1
			}
		}
	}
	for i := range ds {
		if ds[i].ID == id {
			d, n = &ds[i], n+1
		}
	}
	return g, d, n
}

func maxDepth(a *policy.Authority) int {
	if a == nil {
		return 0
	}
	return a.MaxDelegationDepth
}

func count(a *policy.Authority, ds []Delegation, id string) int {
	_, _, n := lookup(a, ds, id)
	return n
}
