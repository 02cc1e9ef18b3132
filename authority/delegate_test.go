package authority

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/latchkit/latch/policy"
)

// payGrant is a delegable policy grant constrained on every dimension.
const payGrant = `    - id: pay
      subject: {agent: "svc:finance:lead", user: alice}
      actions: [billing.charge, "billing.refund*"]
      resources: ["invoice:*"]
      constraints:
        amount_lte: 50000
        amount_gt: 0
        currency_in: [EUR, USD]
        memo_prefix: inv-
        account_not_in: [frozen-1]
        channel_eq: api
      environments: [staging, production]
      tasks: ["ticket:**", "river:job:*"]
      expires_at: "2026-12-31T23:59:59Z"
      delegable: true
`

// midGrant is pay delegated, unchanged but for the agent, and still delegable.
const midGrant = `subject: {agent: "svc:finance:mid", user: alice}
actions: [billing.charge, "billing.refund*"]
resources: ["invoice:*"]
constraints: {amount_lte: 50000, amount_gt: 0, currency_in: [EUR, USD], memo_prefix: inv-, account_not_in: [frozen-1], channel_eq: api}
environments: [staging, production]
tasks: ["ticket:**", "river:job:*"]
expires_at: "2026-12-31T23:59:59Z"
delegable: true
`

// narrowGrant is narrower than pay (and mid) on every dimension.
const narrowGrant = `subject: {agent: "svc:finance:bot", user: alice}
actions: [billing.charge]
resources: ["invoice:eu-*"]
constraints: {amount_lte: 10000, amount_gte: 1, currency_eq: EUR, memo_prefix: inv-eu-, account_not_in: [frozen-1, frozen-2], channel_eq: api}
environments: [production]
tasks: ["ticket:INC-*"]
expires_at: "2026-06-30T00:00:00Z"
`

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// botRequest is allowed by narrowGrant, and by nothing else in these tests.
func botRequest() Request {
	return Request{
		Agent: "svc:finance:bot", User: "alice",
		Action: "billing.charge", Resource: "invoice:eu-7", Environment: "production", Task: "ticket:INC-42",
		Args: map[string]any{
			"amount": int64(5000), "currency": "EUR", "memo": "inv-eu-7", "account": "acc-1", "channel": "api",
		},
		Now: testNow,
	}
}

// dimensionRow is one containment dimension: a child widened on it, a child that leaves it
// out, and a change to the policy grant pay that leaves the narrow child no longer within it.
type dimensionRow struct {
	name, dim      string
	widen, omit    func(t testing.TB, g *policy.Grant)
	omitReason     string // at creation; "" is authority_escalation
	omitEvalReason string // at evaluation of a stored child; "" is authority_escalation
	narrowParent   func(t testing.TB, g *policy.Grant)
}

func dimensionRows() []dimensionRow {
	return []dimensionRow{
		{
			name: "subject agent", dim: DimSubject,
			widen: func(_ testing.TB, g *policy.Grant) { g.Subject.Agent = "svc:finance:*" },
			omit:  func(_ testing.TB, g *policy.Grant) { g.Subject.Agent = "" },
			// The agent is the delegatee, not contained in the parent's agent: no change to
			// the parent's agent invalidates the child.
		},
		{
			name: "subject user", dim: DimSubject,
			widen:        func(_ testing.TB, g *policy.Grant) { g.Subject.User = "*" },
			omit:         func(_ testing.TB, g *policy.Grant) { g.Subject.User = "" },
			narrowParent: func(_ testing.TB, g *policy.Grant) { g.Subject.User = "bob" },
		},
		{
			name: "actions", dim: DimActions,
			widen:          func(_ testing.TB, g *policy.Grant) { g.Actions = []string{"billing.**"} },
			omit:           func(_ testing.TB, g *policy.Grant) { g.Actions = nil },
			omitReason:     ReasonInvalidGrant, // a grant with no actions is not a grant
			omitEvalReason: ReasonUnreadable,
			narrowParent:   func(_ testing.TB, g *policy.Grant) { g.Actions = []string{"billing.refund*"} },
		},
		{
			name: "resources", dim: DimResources,
			widen:        func(_ testing.TB, g *policy.Grant) { g.Resources = []string{"invoice:**"} },
			omit:         func(_ testing.TB, g *policy.Grant) { g.Resources = nil },
			narrowParent: func(_ testing.TB, g *policy.Grant) { g.Resources = []string{"invoice:us-*"} },
		},
		{
			name: "constraint lte", dim: "constraints.amount_lte",
			widen: func(t testing.TB, g *policy.Grant) { setConstraint(t, g, "amount_lte", int64(50001), false) },
			omit:  func(t testing.TB, g *policy.Grant) { setConstraint(t, g, "amount_lte", nil, true) },
			narrowParent: func(t testing.TB, g *policy.Grant) {
				setConstraint(t, g, "amount_lte", int64(9999), false)
			},
		},
		{
			name: "constraint gt", dim: "constraints.amount_gt",
			widen: func(t testing.TB, g *policy.Grant) { setConstraint(t, g, "amount_gte", int64(0), false) },
			omit:  func(t testing.TB, g *policy.Grant) { setConstraint(t, g, "amount_gte", nil, true) },
			narrowParent: func(t testing.TB, g *policy.Grant) {
				setConstraint(t, g, "amount_gt", int64(1), false)
			},
		},
		{
			name: "constraint in", dim: "constraints.currency_in",
			widen: func(t testing.TB, g *policy.Grant) {
				dropConstraintsOn(g, "currency")
				setConstraint(t, g, "currency_in", []any{"EUR", "GBP"}, false)
			},
			omit:         func(_ testing.TB, g *policy.Grant) { dropConstraintsOn(g, "currency") },
			narrowParent: func(t testing.TB, g *policy.Grant) { setConstraint(t, g, "currency_in", []any{"USD"}, false) },
		},
		{
			name: "constraint prefix", dim: "constraints.memo_prefix",
			widen:        func(t testing.TB, g *policy.Grant) { setConstraint(t, g, "memo_prefix", "in", false) },
			omit:         func(_ testing.TB, g *policy.Grant) { dropConstraintsOn(g, "memo") },
			narrowParent: func(t testing.TB, g *policy.Grant) { setConstraint(t, g, "memo_prefix", "inv-us-", false) },
		},
		{
			name: "constraint not_in", dim: "constraints.account_not_in",
			widen: func(t testing.TB, g *policy.Grant) { setConstraint(t, g, "account_not_in", []any{"frozen-2"}, false) },
			omit:  func(_ testing.TB, g *policy.Grant) { dropConstraintsOn(g, "account") },
			narrowParent: func(t testing.TB, g *policy.Grant) {
				setConstraint(t, g, "account_not_in", []any{"frozen-1", "frozen-3"}, false)
			},
		},
		{
			name: "constraint eq", dim: "constraints.channel_eq",
			widen: func(t testing.TB, g *policy.Grant) {
				dropConstraintsOn(g, "channel")
				setConstraint(t, g, "channel_in", []any{"api", "cli"}, false)
			},
			omit:         func(_ testing.TB, g *policy.Grant) { dropConstraintsOn(g, "channel") },
			narrowParent: func(t testing.TB, g *policy.Grant) { setConstraint(t, g, "channel_eq", "cli", false) },
		},
		{
			name: "environments", dim: DimEnvironments,
			widen:        func(_ testing.TB, g *policy.Grant) { g.Environments = []string{"production", "dev"} },
			omit:         func(_ testing.TB, g *policy.Grant) { g.Environments = nil },
			narrowParent: func(_ testing.TB, g *policy.Grant) { g.Environments = []string{"staging"} },
		},
		{
			name: "tasks", dim: DimTasks,
			widen:        func(_ testing.TB, g *policy.Grant) { g.Tasks = []string{"ticket:INC-*", "river:**"} },
			omit:         func(_ testing.TB, g *policy.Grant) { g.Tasks = nil },
			narrowParent: func(_ testing.TB, g *policy.Grant) { g.Tasks = []string{"ticket:OPS-*"} },
		},
		{
			name: "expires_at", dim: DimExpiresAt,
			widen: func(t testing.TB, g *policy.Grant) { g.ExpiresAt = mustTime(t, "2027-01-01T00:00:00Z") },
			omit:  func(_ testing.TB, g *policy.Grant) { g.ExpiresAt = time.Time{} },
			narrowParent: func(t testing.TB, g *policy.Grant) {
				g.ExpiresAt = mustTime(t, "2026-05-01T00:00:00Z") // still after testNow
			},
		},
		{
			name: "delegable", dim: DimDelegable,
			narrowParent: func(_ testing.TB, g *policy.Grant) { g.Delegable = false },
		},
	}
}

// TestDelegationDimensions is the escalation table (SPEC §9.5, guarantee G9): for every
// dimension the parent constrains, a widened child and a child that leaves the dimension out
// are refused naming it, at creation and when such a child is found in the store; and a narrow
// child, accepted, is cut (authority_escalation on the dimension) once the parent grant in the
// policy is changed so that it no longer contains it. Every case runs beneath a policy grant
// and beneath a delegable delegation of it.
func TestDelegationDimensions(t *testing.T) {
	t.Parallel()
	auth := mustAuthority(t, 3, payGrant)
	narrow := mustGrant(t, narrowGrant)
	mid := Delegation{ID: "dlg_mid", Parent: "pay", Grant: *mustGrant(t, midGrant), CreatedBy: "svc:finance:lead/alice"}
	parents := []struct {
		name, id string
		ds       []Delegation
		creator  Request
	}{
		{"beneath a policy grant", "pay", nil, Request{Agent: "svc:finance:lead", User: "alice", Now: testNow}},
		{"beneath a delegation", "dlg_mid", []Delegation{mid}, Request{Agent: "svc:finance:mid", User: "alice", Now: testNow}},
	}
	for _, pk := range parents {
		store := func(g *policy.Grant) []Delegation {
			return append(slices.Clone(pk.ds), Delegation{ID: "dlg_child", Parent: pk.id, Grant: *g})
		}
		// Controls: the narrow child is accepted and allows the request.
		if err := CheckDelegation(auth, pk.ds, pk.id, narrow, pk.creator); err != nil {
			t.Fatalf("%s: CheckDelegation(narrow) = %v, want nil", pk.name, err)
		}
		allowed := outcome{Allowed: true, Reason: ReasonGranted, GrantID: "pay", DelegationID: "dlg_child"}
		if got := outcomeOf(Evaluate(auth, store(narrow), botRequest())); got != allowed {
			t.Fatalf("%s: Evaluate(narrow) = %+v, want %+v", pk.name, got, allowed)
		}
		if d := Evaluate(auth, pk.ds, botRequest()); d.Allowed {
			t.Fatalf("%s: Evaluate without the child = allowed, want denied (the test must exercise the child)", pk.name)
		}
		for _, row := range dimensionRows() {
			t.Run(pk.name+"/"+row.name, func(t *testing.T) {
				t.Parallel()
				variants := []struct {
					kind               string
					mutate             func(testing.TB, *policy.Grant)
					reason, evalReason string
				}{
					{"widened", row.widen, "", ""},
					{"omitted", row.omit, row.omitReason, row.omitEvalReason},
				}
				for _, v := range variants {
					if v.mutate == nil {
						continue
					}
					child := clone(narrow)
					v.mutate(t, child)
					reason := or(v.reason, ReasonEscalation)
					err := CheckDelegation(auth, pk.ds, pk.id, child, pk.creator)
					if err == nil {
						t.Errorf("CheckDelegation(%s child) = nil, want %s on %s", v.kind, reason, row.dim)
					} else if e := asError(t, err); e.Reason != reason || e.Dimension != row.dim {
						t.Errorf("CheckDelegation(%s child) = %v, want %s on %s", v.kind, err, reason, row.dim)
					}

					want := outcome{Reason: or(v.evalReason, ReasonEscalation), Dimension: row.dim, GrantID: "pay", DelegationID: "dlg_child"}
					if want.Reason == ReasonUnreadable {
						want.Dimension, want.GrantID = DimRecord, ""
					}
					if got := outcomeOf(Evaluate(auth, store(child), botRequest())); got != want {
						t.Errorf("Evaluate(stored %s child) = %+v, want %+v", v.kind, got, want)
					}
				}
				if row.narrowParent != nil {
					changed := cloneAuthority(auth)
					pay := grantByID(changed, "pay")
					row.narrowParent(t, pay)
					want := outcome{Reason: ReasonEscalation, Dimension: row.dim, GrantID: "pay", DelegationID: "dlg_child"}
					if got := outcomeOf(Evaluate(changed, store(narrow), botRequest())); got != want {
						t.Errorf("Evaluate(narrow child, parent changed) = %+v, want %+v", got, want)
					}
					creator := pk.creator
					if pk.id == "pay" {
						creator.User = pay.Subject.User // still a principal pay is for
					}
					if err := CheckDelegation(changed, pk.ds, pk.id, narrow, creator); err == nil {
						t.Errorf("CheckDelegation(narrow child, parent changed) = nil, want a refusal")
					} else if e := asError(t, err); e.Reason != ReasonEscalation || e.Dimension != row.dim {
						t.Errorf("CheckDelegation(narrow child, parent changed) = %v, want %s on %s", err, ReasonEscalation, row.dim)
					}
				}
			})
		}
	}
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func TestCheckDelegationRefusals(t *testing.T) {
	t.Parallel()
	auth := mustAuthority(t, 2, payGrant+`    - id: plain
      subject: {agent: "svc:finance:lead"}
      actions: [billing.charge]
    - id: old
      subject: {agent: "svc:finance:lead"}
      actions: [billing.charge]
      expires_at: "2026-01-01T00:00:00Z"
      delegable: true
`)
	narrow := mustGrant(t, narrowGrant)
	mid := Delegation{ID: "dlg_mid", Parent: "pay", Grant: *mustGrant(t, midGrant)}
	revoked := mid
	revoked.Revoked = true
	lead := Request{Agent: "svc:finance:lead", User: "alice", Now: testNow}
	expiredChild := clone(narrow)
	expiredChild.ExpiresAt = testNow.Add(-time.Second)
	atNow := clone(narrow)
	atNow.ExpiresAt = testNow
	badPattern := clone(narrow)
	badPattern.Resources = []string{"invoice::x"}
	deep1 := Delegation{ID: "dlg_1", Parent: "dlg_mid", Grant: *mustGrant(t, midGrant)}
	deep1.Grant.Subject.Agent = "svc:finance:deep"

	tests := []struct {
		name      string
		ds        []Delegation
		parent    string
		child     *policy.Grant
		creator   Request
		reason    string // "" for accepted
		dimension string
	}{
		{"accepted", nil, "pay", narrow, lead, "", ""},
		{"accepted expiring now", nil, "pay", atNow, lead, "", ""},
		{"unknown parent", nil, "nope", narrow, lead, ReasonNoAuthority, DimParent},
		{"parent not delegable", nil, "plain", narrow, lead, ReasonEscalation, DimDelegable},
		{"parent expired", nil, "old", narrow, lead, ReasonExpired, DimExpiresAt},
		{"creator another agent", nil, "pay", narrow, Request{Agent: "svc:finance:bot", User: "alice", Now: testNow}, ReasonNoAuthority, DimSubject},
		{"creator without the user", nil, "pay", narrow, Request{Agent: "svc:finance:lead", Now: testNow}, ReasonNoAuthority, DimSubject},
		{"creator is the delegatee of mid, not lead", []Delegation{mid}, "dlg_mid", narrow, lead, ReasonNoAuthority, DimSubject},
		{"parent delegation revoked", []Delegation{revoked}, "dlg_mid", narrow, Request{Agent: "svc:finance:mid", User: "alice", Now: testNow}, ReasonRevoked, DimRevoked},
		{"parent delegation expired", []Delegation{mid}, "dlg_mid", narrow, Request{Agent: "svc:finance:mid", User: "alice", Now: mustTime(t, "2027-01-01T00:00:00Z")}, ReasonExpired, DimExpiresAt},
		{"too deep", []Delegation{mid, deep1}, "dlg_1", narrow, Request{Agent: "svc:finance:deep", User: "alice", Now: testNow}, ReasonEscalation, DimDepth},
		{"child already expired", nil, "pay", expiredChild, lead, ReasonExpired, DimExpiresAt},
		{"nil child", nil, "pay", nil, lead, ReasonInvalidGrant, ""},
		{"child with a bad pattern", nil, "pay", badPattern, lead, ReasonInvalidGrant, DimResources},
		{"zero clock", nil, "pay", narrow, Request{Agent: "svc:finance:lead", User: "alice"}, ReasonExpired, DimExpiresAt},
		{"unreadable row", []Delegation{{ID: "dlg_x", Err: errors.New("bad row")}}, "pay", narrow, lead, ReasonUnreadable, DimRecord},
		{"ambiguous parent", []Delegation{mid, mid}, "dlg_mid", narrow, Request{Agent: "svc:finance:mid", User: "alice", Now: testNow}, ReasonUnreadable, DimParent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := CheckDelegation(auth, tt.ds, tt.parent, tt.child, tt.creator)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("CheckDelegation = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckDelegation = nil, want %s on %s", tt.reason, tt.dimension)
			}
			e := asError(t, err)
			if diff := cmp.Diff(outcome{Reason: tt.reason, Dimension: tt.dimension}, outcome{Reason: e.Reason, Dimension: e.Dimension}); diff != "" {
				t.Errorf("CheckDelegation = %v (-want +got):\n%s", err, diff)
			}
			if !errors.Is(err, &Error{Reason: tt.reason}) {
				t.Errorf("errors.Is(%v, &Error{Reason: %q}) = false", err, tt.reason)
			}
		})
	}
}

// TestDelegableChild checks that a delegable child is held to the same rules, and that what is
// delegated beneath it is checked against it rather than against the grant above.
func TestDelegableChild(t *testing.T) {
	t.Parallel()
	auth := mustAuthority(t, 3, payGrant)
	child := mustGrant(t, narrowGrant+"delegable: true\n")
	lead := Request{Agent: "svc:finance:lead", User: "alice", Now: testNow}
	if err := CheckDelegation(auth, nil, "pay", child, lead); err != nil {
		t.Fatalf("CheckDelegation(delegable narrow child) = %v, want nil", err)
	}
	ds := []Delegation{{ID: "dlg_bot", Parent: "pay", Grant: *child}}
	grandchild := mustGrant(t, `subject: {agent: "svc:support:bot", user: alice}
actions: [billing.charge]
resources: ["invoice:eu-1*"]
constraints: {amount_lte: 100, amount_gte: 1, currency_eq: EUR, memo_prefix: inv-eu-1, account_not_in: [frozen-1, frozen-2], channel_eq: api}
environments: [production]
tasks: ["ticket:INC-1*"]
expires_at: "2026-04-01T00:00:00Z"
`)
	bot := Request{Agent: "svc:finance:bot", User: "alice", Now: testNow}
	if err := CheckDelegation(auth, ds, "dlg_bot", grandchild, bot); err != nil {
		t.Fatalf("CheckDelegation(grandchild) = %v, want nil", err)
	}
	// Within pay but not within the delegable child: refused.
	wider := clone(grandchild)
	setConstraint(t, wider, "amount_lte", int64(20000), false)
	if e := asError(t, CheckDelegation(auth, ds, "dlg_bot", wider, bot)); e.Reason != ReasonEscalation || e.Dimension != "constraints.amount_lte" {
		t.Errorf("CheckDelegation(grandchild wider than its parent) = %v, want %s on constraints.amount_lte", e, ReasonEscalation)
	}
	// A delegable child without an expiry is refused for the expiry, whatever else it is.
	noExpiry := clone(child)
	noExpiry.ExpiresAt = time.Time{}
	if e := asError(t, CheckDelegation(auth, nil, "pay", noExpiry, lead)); e.Reason != ReasonInvalidGrant || e.Dimension != DimExpiresAt {
		t.Errorf("CheckDelegation(delegable child without expires_at) = %v, want %s on %s", e, ReasonInvalidGrant, DimExpiresAt)
	}
	// A non-delegable child cannot be delegated further.
	ds[0].Grant.Delegable = false
	if e := asError(t, CheckDelegation(auth, ds, "dlg_bot", grandchild, bot)); e.Reason != ReasonEscalation || e.Dimension != DimDelegable {
		t.Errorf("CheckDelegation(beneath a non-delegable child) = %v, want %s on %s", e, ReasonEscalation, DimDelegable)
	}
}

// TestSubjectContainment covers the subject rules: the delegatee is one concrete agent whom the
// parent's agent pattern need not match; the user an agent's grant acts for stays contained;
// the user who holds a user's grant is replaced like an agent.
func TestSubjectContainment(t *testing.T) {
	t.Parallel()
	auth := mustAuthority(t, 3, `    - id: agent
      subject: {agent: "svc:lead"}
      actions: [x.y]
      expires_at: "2026-12-31T00:00:00Z"
      delegable: true
    - id: agent-for-customers
      subject: {agent: "svc:lead", user: "customer:*"}
      actions: [x.y]
      expires_at: "2026-12-31T00:00:00Z"
      delegable: true
    - id: human
      subject: {user: alice}
      actions: [x.y]
      expires_at: "2026-12-31T00:00:00Z"
      delegable: true
`)
	creators := map[string]Request{
		"agent":               {Agent: "svc:lead", Now: testNow},
		"agent-for-customers": {Agent: "svc:lead", User: "customer:1", Now: testNow},
		"human":               {Agent: "cli", User: "alice", Now: testNow},
	}
	tests := []struct {
		parent      string
		agent, user string
		ok          bool
	}{
		{"agent", "svc:other", "", true},
		{"agent", "svc:other", "bob", true},
		{"agent", "svc:*", "", false},
		{"agent", "", "bob", false},
		{"agent-for-customers", "svc:other", "customer:7", true},
		{"agent-for-customers", "svc:other", "customer:*", true},
		{"agent-for-customers", "svc:other", "", false},
		{"agent-for-customers", "svc:other", "*", false},
		{"agent-for-customers", "svc:other", "staff:1", false},
		{"agent-for-customers", "svc:oth*", "customer:7", false},
		{"human", "svc:refund-bot", "", true},
		{"human", "svc:refund-bot", "alice", true},
		{"human", "svc:*", "", false},
		{"human", "", "alice", false},
	}
	for _, tt := range tests {
		g := mustGrant(t, "actions: [x.y]\nexpires_at: \"2026-12-01T00:00:00Z\"\nsubject: {agent: a}\n")
		g.Subject = policy.Subject{Agent: tt.agent, User: tt.user}
		err := CheckDelegation(auth, nil, tt.parent, g, creators[tt.parent])
		if tt.ok != (err == nil) {
			t.Errorf("CheckDelegation(%s, agent %q user %q) = %v, want ok=%v", tt.parent, tt.agent, tt.user, err, tt.ok)
			continue
		}
		if err != nil {
			if e := asError(t, err); e.Reason != ReasonEscalation || e.Dimension != DimSubject {
				t.Errorf("CheckDelegation(%s, agent %q user %q) = %v, want %s on %s", tt.parent, tt.agent, tt.user, err, ReasonEscalation, DimSubject)
			}
			continue
		}
		// Accepted: the delegatee can now act (through the delegation, or through the parent
		// when the parent already covers it, as a user's grant covers any agent acting for her).
		r := Request{Agent: tt.agent, User: tt.user, Action: "x.y", Now: testNow}
		if tt.user == "" || tt.user == "customer:*" {
			r.User = "customer:7"
		}
		ds := []Delegation{{ID: "dlg_1", Parent: tt.parent, Grant: *g}}
		if d := Evaluate(auth, ds, r); !d.Allowed {
			t.Errorf("Evaluate(%s delegated to %q/%q) = %+v, want allowed", tt.parent, tt.agent, tt.user, outcomeOf(d))
		}
	}
}
