package authority

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/latchkit/latch/policy"
)

func TestEvaluateMatching(t *testing.T) {
	t.Parallel()
	auth := mustAuthority(t, 3, `    - id: reads
      subject: {agent: "svc:**"}
      actions: ["docs.**"]
    - id: invoices
      subject: {agent: "svc:billing:*", user: "customer:*"}
      actions: [billing.charge]
      resources: ["invoice:*"]
      environments: [production]
    - id: humans
      subject: {user: alice}
      actions: ["*.read"]
`)
	base := Request{Agent: "svc:billing:w1", User: "customer:7", Action: "billing.charge", Resource: "invoice:9", Environment: "production", Now: testNow}
	with := func(f func(*Request)) Request {
		r := base
		f(&r)
		return r
	}
	tests := []struct {
		name string
		r    Request
		want outcome
	}{
		{"all dimensions match", base, outcome{Allowed: true, Reason: ReasonGranted, GrantID: "invoices"}},
		{"** needs a further segment", with(func(r *Request) { r.Action = "docs" }), outcome{Reason: ReasonNoAuthority, Dimension: DimActions}},
		{"** matches deeper", with(func(r *Request) { r.Action = "docs.a.b" }), outcome{Allowed: true, Reason: ReasonGranted, GrantID: "reads"}},
		{"agent outside the pattern", with(func(r *Request) { r.Agent = "svc:ops:w1"; r.Action = "x.y" }), outcome{Reason: ReasonNoAuthority, Dimension: DimActions}},
		{"no agent", with(func(r *Request) { r.Agent = "" }), outcome{Reason: ReasonNoAuthority, Dimension: DimSubject}},
		{"a constrained user needs a user", with(func(r *Request) { r.User = "" }), outcome{Reason: ReasonNoAuthority, Dimension: DimSubject}},
		{"user outside the pattern", with(func(r *Request) { r.User = "staff:1" }), outcome{Reason: ReasonNoAuthority, Dimension: DimSubject}},
		{"declared resources need a resource", with(func(r *Request) { r.Resource = "" }), outcome{Reason: ReasonNoAuthority, Dimension: DimResources}},
		{"resource outside the patterns", with(func(r *Request) { r.Resource = "receipt:9" }), outcome{Reason: ReasonNoAuthority, Dimension: DimResources}},
		{"resource with an empty segment", with(func(r *Request) { r.Resource = "invoice:" }), outcome{Reason: ReasonNoAuthority, Dimension: DimResources}},
		{"declared environments need the environment", with(func(r *Request) { r.Environment = "" }), outcome{Reason: ReasonNoAuthority, Dimension: DimEnvironments}},
		{"environments are exact", with(func(r *Request) { r.Environment = "Production" }), outcome{Reason: ReasonNoAuthority, Dimension: DimEnvironments}},
		{"user-only grant, any agent", Request{Agent: "cli", User: "alice", Action: "docs.read", Now: testNow}, outcome{Allowed: true, Reason: ReasonGranted, GrantID: "humans"}},
		{"actions are case-sensitive", Request{Agent: "cli", User: "alice", Action: "ops.Read", Now: testNow}, outcome{Reason: ReasonNoAuthority, Dimension: DimActions}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := Evaluate(auth, nil, tt.r)
			if diff := cmp.Diff(tt.want, outcomeOf(d)); diff != "" {
				t.Errorf("Evaluate (-want +got):\n%s\ntrace: %q", diff, d.Trace)
			}
		})
	}
}

func TestEvaluateNoGrants(t *testing.T) {
	t.Parallel()
	r := Request{Agent: "a", Action: "x", Now: testNow}
	for _, a := range []*policy.Authority{nil, {MaxDelegationDepth: 3}} {
		d := Evaluate(a, nil, r)
		if diff := cmp.Diff(Decision{Reason: ReasonNoAuthority, Trace: []string{"no grants"}}, d); diff != "" {
			t.Errorf("Evaluate(%v) (-want +got):\n%s", a, diff)
		}
	}
}

func TestEvaluateTrace(t *testing.T) {
	t.Parallel()
	auth := mustAuthority(t, 3, payGrant+`    - id: ops
      subject: {agent: "svc:ops:*"}
      actions: ["ops.**"]
`)
	ds := []Delegation{
		{ID: "dlg_bot", Parent: "pay", Grant: *mustGrant(t, narrowGrant)},
	}
	r := botRequest()
	r.Args["amount"] = int64(20000)
	d := Evaluate(auth, ds, r)
	want := Decision{
		Reason:       ReasonConstraint,
		Dimension:    "constraints.amount_lte",
		GrantID:      "pay",
		DelegationID: "dlg_bot",
		Trace: []string{
			"grant pay: no match on subject",
			"grant ops: no match on actions",
			"delegation dlg_bot: authority_constraint on constraints.amount_lte: 20000 > 10000",
		},
	}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("Evaluate (-want +got):\n%s", diff)
	}
	r.Args["amount"] = int64(10000)
	d = Evaluate(auth, ds, r)
	want = Decision{
		Allowed:      true,
		Reason:       ReasonGranted,
		GrantID:      "pay",
		DelegationID: "dlg_bot",
		// The delegation, then the policy grant above it: every budget the call is charged.
		Chain: []Link{{ID: "dlg_bot", Budgets: ds[0].Grant.Budgets}, {ID: "pay", Budgets: grantByID(auth, "pay").Budgets}},
		Trace: []string{
			"grant pay: no match on subject",
			"grant ops: no match on actions",
			"delegation dlg_bot: allowed beneath grant pay",
		},
	}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("Evaluate (-want +got):\n%s", diff)
	}
}

// TestRevocation checks that a revoked delegation, and everything beneath it, is cut, and that
// a delegation whose policy grant is gone from the policy is too.
func TestRevocation(t *testing.T) {
	t.Parallel()
	auth := mustAuthority(t, 3, payGrant)
	mid := Delegation{ID: "dlg_mid", Parent: "pay", Grant: *mustGrant(t, midGrant)}
	child := Delegation{ID: "dlg_child", Parent: "dlg_mid", Grant: *mustGrant(t, narrowGrant)}
	revoked := func(d Delegation) Delegation {
		d.Revoked = true
		return d
	}
	noPay := cloneAuthority(auth)
	noPay.Grants = nil
	tests := []struct {
		name string
		a    *policy.Authority
		ds   []Delegation
		want outcome
	}{
		{"control: the grandchild is allowed", auth, []Delegation{mid, child}, outcome{Allowed: true, Reason: ReasonGranted, GrantID: "pay", DelegationID: "dlg_child"}},
		{"the delegation revoked", auth, []Delegation{mid, revoked(child)}, outcome{Reason: ReasonRevoked, Dimension: DimRevoked, GrantID: "pay", DelegationID: "dlg_child"}},
		{"its parent revoked cuts it", auth, []Delegation{revoked(mid), child}, outcome{Reason: ReasonRevoked, Dimension: DimRevoked, GrantID: "pay", DelegationID: "dlg_child"}},
		{"its parent missing", auth, []Delegation{child}, outcome{Reason: ReasonRevoked, Dimension: DimParent, DelegationID: "dlg_child"}},
		{"the policy grant removed", noPay, []Delegation{mid, child}, outcome{Reason: ReasonRevoked, Dimension: DimParent, DelegationID: "dlg_child"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := Evaluate(tt.a, tt.ds, botRequest())
			if diff := cmp.Diff(tt.want, outcomeOf(d)); diff != "" {
				t.Errorf("Evaluate (-want +got):\n%s\ntrace: %q", diff, d.Trace)
			}
		})
	}
}

// TestDenyPrecedence combines near misses failing for different reasons and checks that the
// decision reports the highest-precedence one (SPEC §9.4), whichever order they come in.
func TestDenyPrecedence(t *testing.T) {
	t.Parallel()
	auth := mustAuthority(t, 3, payGrant+`    - id: constrained
      subject: {agent: "svc:finance:bot"}
      actions: [billing.charge]
      constraints: {amount_lte: 10}
    - id: old
      subject: {agent: "svc:finance:bot"}
      actions: [billing.charge]
      expires_at: "2026-01-01T00:00:00Z"
    - id: unrelated
      subject: {agent: "svc:finance:bot"}
      actions: [billing.refund]
`)
	narrow := mustGrant(t, narrowGrant)
	escalated := *clone(narrow)
	escalated.Actions = []string{"billing.*"}
	expiredChild := *clone(narrow)
	expiredChild.ExpiresAt = testNow.Add(-time.Microsecond)
	ds := map[string]Delegation{
		ReasonRevoked:    {ID: "dlg_revoked", Parent: "pay", Grant: *narrow, Revoked: true},
		ReasonEscalation: {ID: "dlg_escalated", Parent: "pay", Grant: escalated},
		ReasonExpired:    {ID: "dlg_expired", Parent: "pay", Grant: expiredChild},
		ReasonUnreadable: {ID: "dlg_unreadable", Err: errors.New("checksum mismatch")},
	}
	grants := map[string]string{ReasonConstraint: "constrained", ReasonExpired: "old"}
	tests := []struct {
		name    string
		grants  []string // policy grants kept, by the reason they fail with
		ds      []string // delegations present, by the reason they fail with
		want    string
		wantDim string
	}{
		{"nothing near", nil, nil, ReasonNoAuthority, DimSubject}, // pay is for billing.charge, not for the bot
		{"constraint", []string{ReasonConstraint}, nil, ReasonConstraint, "constraints.amount_lte"},
		{"expired beats constraint", []string{ReasonConstraint, ReasonExpired}, nil, ReasonExpired, DimExpiresAt},
		{"expired delegation beats constraint", []string{ReasonConstraint}, []string{ReasonExpired}, ReasonExpired, DimExpiresAt},
		{"revoked beats expired", []string{ReasonConstraint, ReasonExpired}, []string{ReasonRevoked}, ReasonRevoked, DimRevoked},
		{"revoked beats expired, delegations first", nil, []string{ReasonExpired, ReasonRevoked}, ReasonRevoked, DimRevoked},
		{"escalation beats revoked", []string{ReasonConstraint}, []string{ReasonRevoked, ReasonEscalation}, ReasonEscalation, DimActions},
		{"escalation beats all but unreadable", []string{ReasonConstraint, ReasonExpired}, []string{ReasonEscalation, ReasonExpired, ReasonRevoked}, ReasonEscalation, DimActions},
		{"unreadable beats everything", []string{ReasonConstraint, ReasonExpired}, []string{ReasonEscalation, ReasonRevoked, ReasonUnreadable}, ReasonUnreadable, DimRecord},
		{"unreadable alone", nil, []string{ReasonUnreadable}, ReasonUnreadable, DimRecord},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := cloneAuthority(auth)
			a.Grants = []*policy.Grant{grantByID(a, "pay"), grantByID(a, "unrelated")}
			for _, reason := range tt.grants {
				a.Grants = append(a.Grants, grantByID(auth, grants[reason]))
			}
			var dl []Delegation
			for _, reason := range tt.ds {
				dl = append(dl, ds[reason])
			}
			r := botRequest()
			r.Args["amount"] = int64(100)
			d := Evaluate(a, dl, r)
			if d.Allowed || d.Reason != tt.want || d.Dimension != tt.wantDim {
				t.Errorf("Evaluate = %+v, want %s on %s\ntrace: %q", outcomeOf(d), tt.want, tt.wantDim, d.Trace)
			}
		})
	}
}

// TestExactExpiry checks guarantee G8: a grant is valid at its expires_at and expired one
// microsecond (indeed one nanosecond) later, for a policy grant, for a delegation, and for a
// delegation whose policy grant expires.
func TestExactExpiry(t *testing.T) {
	t.Parallel()
	at := mustTime(t, "2026-06-30T00:00:00Z")
	auth := mustAuthority(t, 3, `    - id: direct
      subject: {agent: "svc:a"}
      actions: [x.y]
      expires_at: "2026-06-30T02:00:00+02:00"
    - id: parent
      subject: {agent: "svc:p"}
      actions: [x.y]
      expires_at: "2026-06-30T00:00:00Z"
      delegable: true
    - id: later
      subject: {agent: "svc:p"}
      actions: [x.y]
      expires_at: "2026-12-31T00:00:00Z"
      delegable: true
`)
	child := mustGrant(t, "subject: {agent: \"svc:c\"}\nactions: [x.y]\nexpires_at: \"2026-06-30T00:00:00Z\"\n")
	underLater := mustGrant(t, "subject: {agent: \"svc:d\"}\nactions: [x.y]\nexpires_at: \"2026-06-30T00:00:00Z\"\n")
	ds := []Delegation{
		{ID: "dlg_c", Parent: "parent", Grant: *child},
		{ID: "dlg_d", Parent: "later", Grant: *underLater},
	}
	for _, agent := range []string{"svc:a", "svc:c", "svc:d"} {
		for _, tt := range []struct {
			now     time.Time
			allowed bool
		}{
			{at.Add(-time.Nanosecond), true},
			{at, true},
			{at.In(time.FixedZone("X", -7*3600)), true},
			{at.Add(time.Nanosecond), false},
			{at.Add(time.Microsecond), false},
			{time.Time{}, false}, // no clock proves nothing
		} {
			d := Evaluate(auth, ds, Request{Agent: agent, Action: "x.y", Now: tt.now})
			if d.Allowed != tt.allowed || !d.Allowed && (d.Reason != ReasonExpired || d.Dimension != DimExpiresAt) {
				t.Errorf("Evaluate(%s at %v) = %+v, want allowed=%v or %s on %s", agent, tt.now, outcomeOf(d), tt.allowed, ReasonExpired, DimExpiresAt)
			}
		}
	}
}

// TestDepth checks max_delegation_depth at creation and at evaluation, including a limit
// lowered in the policy after delegations were made.
func TestDepth(t *testing.T) {
	t.Parallel()
	chainGrant := func(agent string) policy.Grant {
		return *mustGrant(t, "subject: {agent: \""+agent+"\"}\nactions: [x.y]\nexpires_at: \"2026-12-31T00:00:00Z\"\ndelegable: true\n")
	}
	root := `    - id: root
      subject: {agent: "svc:0"}
      actions: [x.y]
      expires_at: "2026-12-31T00:00:00Z"
      delegable: true
`
	ds := []Delegation{
		{ID: "dlg_1", Parent: "root", Grant: chainGrant("svc:1")},
		{ID: "dlg_2", Parent: "dlg_1", Grant: chainGrant("svc:2")},
		{ID: "dlg_3", Parent: "dlg_2", Grant: chainGrant("svc:3")},
	}
	for _, tt := range []struct {
		max     int
		allowed []string // agents allowed; the others are too deep
	}{
		{0, nil},
		{1, []string{"svc:1"}},
		{2, []string{"svc:1", "svc:2"}},
		{3, []string{"svc:1", "svc:2", "svc:3"}},
	} {
		auth := mustAuthority(t, tt.max, root)
		for i, agent := range []string{"svc:1", "svc:2", "svc:3"} {
			d := Evaluate(auth, ds, Request{Agent: agent, Action: "x.y", Now: testNow})
			want := outcome{Allowed: true, Reason: ReasonGranted, GrantID: "root", DelegationID: ds[i].ID}
			if !contains(tt.allowed, agent) {
				want = outcome{Reason: ReasonEscalation, Dimension: DimDepth, GrantID: "root", DelegationID: ds[i].ID}
			}
			if got := outcomeOf(d); got != want {
				t.Errorf("max %d: Evaluate(%s) = %+v, want %+v", tt.max, agent, got, want)
			}
			// Creating a delegation beneath this agent's: allowed iff it would be within max.
			parent, creator := "root", "svc:0"
			if i > 0 {
				parent, creator = ds[i-1].ID, ds[i-1].Grant.Subject.Agent
			}
			g := chainGrant(agent)
			err := CheckDelegation(auth, ds[:i], parent, &g, Request{Agent: creator, Now: testNow})
			if ok := i < tt.max; ok != (err == nil) {
				t.Errorf("max %d: CheckDelegation(depth %d) = %v", tt.max, i+1, err)
			} else if err != nil {
				if e := asError(t, err); e.Reason != ReasonEscalation || e.Dimension != DimDepth {
					t.Errorf("max %d: CheckDelegation(depth %d) = %v, want %s on %s", tt.max, i+1, err, ReasonEscalation, DimDepth)
				}
			}
		}
	}
}

func contains(l []string, s string) bool {
	for _, e := range l {
		if e == s {
			return true
		}
	}
	return false
}

// TestUnreadable checks that one unreadable or malformed delegation denies everything, even a
// request a policy grant allows on its own.
func TestUnreadable(t *testing.T) {
	t.Parallel()
	auth := mustAuthority(t, 3, `    - id: open
      subject: {agent: "svc:a"}
      actions: ["x.**"]
      expires_at: "2026-12-31T00:00:00Z"
      delegable: true
`)
	r := Request{Agent: "svc:a", Action: "x.y", Now: testNow}
	if d := Evaluate(auth, nil, r); !d.Allowed {
		t.Fatalf("control: Evaluate = %+v, want allowed", outcomeOf(d))
	}
	good := *mustGrant(t, "subject: {agent: \"svc:b\"}\nactions: [x.y]\nexpires_at: \"2026-12-31T00:00:00Z\"\n")
	bad := func(f func(*Delegation)) Delegation {
		d := Delegation{ID: "dlg_bad", Parent: "open", Grant: good}
		f(&d)
		return d
	}
	tests := []struct {
		name string
		d    Delegation
	}{
		{"read error", bad(func(d *Delegation) { d.Err = errors.New("row 7: bad json") })},
		{"no id", bad(func(d *Delegation) { d.ID = "" })},
		{"no parent", bad(func(d *Delegation) { d.Parent = "" })},
		{"its own parent", bad(func(d *Delegation) { d.Parent = d.ID })},
		{"another grant id", bad(func(d *Delegation) { d.Grant.ID = "open" })},
		{"empty subject", bad(func(d *Delegation) { d.Grant.Subject = policy.Subject{} })},
		{"bad action pattern", bad(func(d *Delegation) { d.Grant.Actions = []string{"x.**.y"} })},
		{"empty resources", bad(func(d *Delegation) { d.Grant.Resources = []string{} })},
		{"empty environment", bad(func(d *Delegation) { d.Grant.Environments = []string{""} })},
		{"malformed constraint", bad(func(d *Delegation) {
			d.Grant.Constraints = policy.Conditions{{Key: "user_eq", Operand: "bob"}}
		})},
		{"delegable without expiry", bad(func(d *Delegation) { d.Grant.Delegable, d.Grant.ExpiresAt = true, time.Time{} })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ds := []Delegation{{ID: "dlg_good", Parent: "open", Grant: good}, tt.d}
			d := Evaluate(auth, ds, r)
			want := outcome{Reason: ReasonUnreadable, Dimension: DimRecord, DelegationID: tt.d.ID}
			if got := outcomeOf(d); got != want {
				t.Errorf("Evaluate = %+v, want %+v", got, want)
			}
			if len(d.Trace) != 1 || !strings.Contains(d.Trace[0], "denies everything") {
				t.Errorf("Evaluate trace = %q, want one line saying it denies everything", d.Trace)
			}
			err := CheckDelegation(auth, ds, "open", &good, r)
			if e := asError(t, err); e.Reason != ReasonUnreadable {
				t.Errorf("CheckDelegation = %v, want %s", err, ReasonUnreadable)
			}
		})
	}
}

// TestCorruptChains checks chains a healthy insert-only store cannot produce: ids that name
// two records, and loops.
func TestCorruptChains(t *testing.T) {
	t.Parallel()
	auth := mustAuthority(t, 9, `    - id: root
      subject: {agent: "svc:0"}
      actions: [x.y]
      expires_at: "2026-12-31T00:00:00Z"
      delegable: true
    - id: dlg_clash
      subject: {agent: "svc:0"}
      actions: [x.y]
      expires_at: "2026-12-31T00:00:00Z"
      delegable: true
`)
	g := func(agent string) policy.Grant {
		return *mustGrant(t, "subject: {agent: \""+agent+"\"}\nactions: [x.y]\nexpires_at: \"2026-12-31T00:00:00Z\"\ndelegable: true\n")
	}
	tests := []struct {
		name string
		ds   []Delegation
		want outcome
	}{
		{"loop", []Delegation{
			{ID: "dlg_a", Parent: "dlg_b", Grant: g("svc:a")},
			{ID: "dlg_b", Parent: "dlg_a", Grant: g("svc:b")},
		}, outcome{Reason: ReasonUnreadable, Dimension: DimParent, DelegationID: "dlg_a"}},
		{"duplicate delegation id", []Delegation{
			{ID: "dlg_a", Parent: "root", Grant: g("svc:a")},
			{ID: "dlg_a", Parent: "root", Grant: g("svc:z")},
		}, outcome{Reason: ReasonUnreadable, Dimension: DimRecord, DelegationID: "dlg_a"}},
		{"parent id names a grant and a delegation", []Delegation{
			{ID: "dlg_a", Parent: "dlg_clash", Grant: g("svc:a")},
			{ID: "dlg_clash", Parent: "root", Grant: g("svc:z")},
		}, outcome{Reason: ReasonUnreadable, Dimension: DimParent, DelegationID: "dlg_a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := Evaluate(auth, tt.ds, Request{Agent: "svc:a", Action: "x.y", Now: testNow})
			if diff := cmp.Diff(tt.want, outcomeOf(d)); diff != "" {
				t.Errorf("Evaluate (-want +got):\n%s\ntrace: %q", diff, d.Trace)
			}
		})
	}
}

// TestEvaluateDoesNotMutate checks that Evaluate leaves its inputs alone (it is shared by
// concurrent calls).
func TestEvaluateDoesNotMutate(t *testing.T) {
	t.Parallel()
	auth := mustAuthority(t, 3, payGrant)
	ds := []Delegation{{ID: "dlg_bot", Parent: "pay", Grant: *mustGrant(t, narrowGrant)}}
	before := policy.Normalize(&policy.Policy{Authority: auth})
	r := botRequest()
	for range 3 {
		Evaluate(auth, ds, r)
	}
	if diff := cmp.Diff(before, policy.Normalize(&policy.Policy{Authority: auth})); diff != "" {
		t.Errorf("Evaluate changed the authority (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(botRequest().Args, r.Args); diff != "" {
		t.Errorf("Evaluate changed the arguments (-before +after):\n%s", diff)
	}
}

// TestEvaluateChain checks the chain an allow carries — the deciding grant, then every grant
// above it up to the policy grant, each with its own budgets — so that a call is charged
// against every budget above it; and that a deny carries none.
func TestEvaluateChain(t *testing.T) {
	t.Parallel()
	auth := mustAuthority(t, 3, payGrant)
	mid := mustGrant(t, midGrant)
	mid.Subject.Agent = "svc:finance:mid"
	leaf := mustGrant(t, narrowGrant)
	ds := []Delegation{
		{ID: "dlg_leaf", Parent: "dlg_mid", Grant: *leaf},
		{ID: "dlg_mid", Parent: "pay", Grant: *mid},
	}
	d := Evaluate(auth, ds, botRequest())
	if !d.Allowed {
		t.Fatalf("Evaluate = %+v, want allowed", d)
	}
	day := 24 * time.Hour
	want := []Link{
		{ID: "dlg_leaf", Budgets: []policy.Budget{{Metric: "count", Limit: 10, Window: 2 * day}, {Metric: "amount", Limit: 500000, Window: 30 * day}, {Metric: "fee", Limit: 5, Window: time.Hour}}},
		{ID: "dlg_mid", Budgets: []policy.Budget{{Metric: "count", Limit: 100, Window: day}, {Metric: "amount", Limit: 1000000, Window: 30 * day}}},
		{ID: "pay", Budgets: []policy.Budget{{Metric: "count", Limit: 100, Window: day}, {Metric: "amount", Limit: 1000000, Window: 30 * day}}},
	}
	if diff := cmp.Diff(want, d.Chain, cmpopts.IgnoreFields(policy.Budget{}, "Pos")); diff != "" {
		t.Errorf("Evaluate chain (-want +got):\n%s", diff)
	}

	// A policy grant that allows is a chain of one.
	r := botRequest()
	r.Agent = "svc:finance:lead"
	r.Resource = "invoice:us-1"
	r.Environment = "staging"
	r.Args["currency"] = "USD"
	r.Args["memo"] = "inv-us-1"
	if d := Evaluate(auth, ds, r); !d.Allowed || len(d.Chain) != 1 || d.Chain[0].ID != "pay" || len(d.Chain[0].Budgets) != 2 {
		t.Errorf("Evaluate(by the policy grant's holder) = %+v, want allowed with the chain [pay]", d)
	}

	// A deny charges nothing: no chain.
	r = botRequest()
	r.Args["amount"] = int64(20000)
	if d := Evaluate(auth, ds, r); d.Allowed || d.Chain != nil {
		t.Errorf("Evaluate(over the constraint) = %+v, want denied with no chain", d)
	}
}
