package authority

import (
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/policy"
)

// breakGlassPolicy has one policy grant (for someone else) and two envelopes: incident, open
// to the oncall role, and open, which any verified person may open.
const breakGlassPolicy = `schema: latch.policy/v1
actions: {}
approvers:
  roles:
    oncall: [carol]
authority:
  max_delegation_depth: 0
  grants:
    - id: reader
      subject: {agent: reporter}
      actions: [reports.read]
  break_glass:
    - id: incident
      subject: {agent: "ops-*", user: "team:*"}
      actions: ["payments.*"]
      resources: ["order:*"]
      constraints: {amount_lte: 1000}
      environments: [production]
      max_ttl: 4h
      openers: [oncall]
    - id: open
      subject: {agent: "ops-bot"}
      actions: [db.restart]
      max_ttl: 30m
`

func mustBreakGlass(t testing.TB) *policy.Authority {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(breakGlassPolicy))
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	return p.Authority
}

// openedGrant is incident narrowed to ops-bot acting for team:a, for 1h from testNow.
const openedGrant = `subject: {agent: ops-bot, user: "team:a"}
actions: [payments.refund]
resources: ["order:*"]
constraints: {amount_lte: 500}
environments: [production]
expires_at: "2026-03-01T13:00:00Z"
`

var carol = Opener{Name: "carol", Verified: true, Roles: []string{"oncall"}}

func incidentRequest(t testing.TB) BreakGlassRequest {
	return BreakGlassRequest{Envelope: "incident", Grant: mustGrant(t, openedGrant), TTL: time.Hour,
		Reason: "INC-42: refunds stuck", Opener: carol, Now: testNow}
}

// refundCall is a call the opened grant allows.
func refundCall() Request {
	return Request{Agent: "ops-bot", User: "team:a", Action: "payments.refund", Resource: "order:7",
		Environment: "production", Args: map[string]any{"amount": int64(100)}, Now: testNow.Add(time.Minute)}
}

func TestCheckBreakGlassAccepts(t *testing.T) {
	t.Parallel()
	a := mustBreakGlass(t)
	if err := CheckBreakGlass(a, nil, incidentRequest(t)); err != nil {
		t.Fatalf("CheckBreakGlass(incident, narrowed) = %v, want nil", err)
	}
	// The envelope's own shape, for one concrete agent, for the whole max_ttl.
	whole := clone(&a.Envelope("incident").Grant)
	whole.ID, whole.Subject = "", policy.Subject{Agent: "ops-bot", User: "team:a"}
	whole.ExpiresAt = testNow.Add(4 * time.Hour)
	r := incidentRequest(t)
	r.Grant, r.TTL = whole, 4*time.Hour
	if err := CheckBreakGlass(a, nil, r); err != nil {
		t.Fatalf("CheckBreakGlass(incident, whole envelope, max_ttl) = %v, want nil", err)
	}
	// Any verified person opens an envelope without openers.
	g := mustGrant(t, "subject: {agent: ops-bot}\nactions: [db.restart]\nexpires_at: \"2026-03-01T12:30:00Z\"\n")
	o := Opener{Name: "dave", Verified: true}
	if err := CheckBreakGlass(a, nil, BreakGlassRequest{Envelope: "open", Grant: g, TTL: 30 * time.Minute, Reason: "db wedged", Opener: o, Now: testNow}); err != nil {
		t.Fatalf("CheckBreakGlass(open, dave) = %v, want nil", err)
	}
}

func TestCheckBreakGlassRefusals(t *testing.T) {
	t.Parallel()
	a := mustBreakGlass(t)
	tests := []struct {
		name        string
		change      func(t testing.TB, r *BreakGlassRequest)
		reason, dim string
	}{
		{"unknown envelope", func(_ testing.TB, r *BreakGlassRequest) { r.Envelope = "nope" }, ReasonNoAuthority, DimParent},
		{"a policy grant is no envelope", func(_ testing.TB, r *BreakGlassRequest) { r.Envelope = "reader" }, ReasonNoAuthority, DimParent},
		{"unverified opener", func(_ testing.TB, r *BreakGlassRequest) { r.Opener.Verified = false }, ReasonNoAuthority, DimOpener},
		{"no opener", func(_ testing.TB, r *BreakGlassRequest) { r.Opener = Opener{Verified: true, Roles: []string{"oncall"}} }, ReasonNoAuthority, DimOpener},
		{"not an opener", func(_ testing.TB, r *BreakGlassRequest) { r.Opener = Opener{Name: "dave", Verified: true} }, ReasonNoAuthority, DimOpener},
		{"no reason", func(_ testing.TB, r *BreakGlassRequest) { r.Reason = " \t" }, ReasonInvalidGrant, DimReason},
		{"reason too long", func(_ testing.TB, r *BreakGlassRequest) { r.Reason = strings.Repeat("x", MaxReasonBytes+1) }, ReasonInvalidGrant, DimReason},
		{"zero ttl", func(_ testing.TB, r *BreakGlassRequest) { r.TTL = 0 }, ReasonInvalidGrant, DimTTL},
		{"negative ttl", func(_ testing.TB, r *BreakGlassRequest) { r.TTL = -time.Minute }, ReasonInvalidGrant, DimTTL},
		{"ttl beyond max_ttl", func(_ testing.TB, r *BreakGlassRequest) {
			r.TTL = 4*time.Hour + time.Second
			r.Grant.ExpiresAt = r.Now.Add(r.TTL)
		}, ReasonEscalation, DimExpiresAt},
		{"expires beyond max_ttl", func(_ testing.TB, r *BreakGlassRequest) { r.Grant.ExpiresAt = r.Now.Add(5 * time.Hour) }, ReasonEscalation, DimExpiresAt},
		{"no expiry", func(_ testing.TB, r *BreakGlassRequest) { r.Grant.ExpiresAt = time.Time{} }, ReasonEscalation, DimExpiresAt},
		{"already expired", func(_ testing.TB, r *BreakGlassRequest) { r.Grant.ExpiresAt = r.Now.Add(-time.Second) }, ReasonExpired, DimExpiresAt},
		{"delegable", func(_ testing.TB, r *BreakGlassRequest) { r.Grant.Delegable = true }, ReasonEscalation, DimDelegable},
		{"agent pattern", func(_ testing.TB, r *BreakGlassRequest) { r.Grant.Subject.Agent = "ops-*" }, ReasonEscalation, DimSubject},
		{"agent outside the envelope", func(_ testing.TB, r *BreakGlassRequest) { r.Grant.Subject.Agent = "billing-bot" }, ReasonEscalation, DimSubject},
		{"user left out", func(_ testing.TB, r *BreakGlassRequest) { r.Grant.Subject.User = "" }, ReasonEscalation, DimSubject},
		{"user outside the envelope", func(_ testing.TB, r *BreakGlassRequest) { r.Grant.Subject.User = "alice" }, ReasonEscalation, DimSubject},
		{"wider actions", func(_ testing.TB, r *BreakGlassRequest) { r.Grant.Actions = []string{"payments.**"} }, ReasonEscalation, DimActions},
		{"resources left out", func(_ testing.TB, r *BreakGlassRequest) { r.Grant.Resources = nil }, ReasonEscalation, DimResources},
		{"wider constraint", func(t testing.TB, r *BreakGlassRequest) { setConstraint(t, r.Grant, "amount_lte", int64(1001), false) }, ReasonEscalation, "constraints.amount_lte"},
		{"constraint left out", func(t testing.TB, r *BreakGlassRequest) { setConstraint(t, r.Grant, "amount_lte", nil, true) }, ReasonEscalation, "constraints.amount_lte"},
		{"environments left out", func(_ testing.TB, r *BreakGlassRequest) { r.Grant.Environments = nil }, ReasonEscalation, DimEnvironments},
		{"another environment", func(_ testing.TB, r *BreakGlassRequest) { r.Grant.Environments = []string{"staging"} }, ReasonEscalation, DimEnvironments},
		{"no grant", func(_ testing.TB, r *BreakGlassRequest) { r.Grant = nil }, ReasonInvalidGrant, ""},
		{"malformed grant", func(_ testing.TB, r *BreakGlassRequest) { r.Grant.Actions = nil }, ReasonInvalidGrant, DimActions},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := incidentRequest(t)
			tt.change(t, &r)
			err := CheckBreakGlass(a, nil, r)
			if err == nil {
				t.Fatalf("CheckBreakGlass = nil, want %s on %s", tt.reason, tt.dim)
			}
			e := asError(t, err)
			if e.Reason != tt.reason || e.Dimension != tt.dim {
				t.Errorf("CheckBreakGlass = %v, want %s on %q", err, tt.reason, tt.dim)
			}
		})
	}
}

// TestCheckBreakGlassUnreadable: one unreadable delegation refuses an opening too.
func TestCheckBreakGlassUnreadable(t *testing.T) {
	t.Parallel()
	a := mustBreakGlass(t)
	ds := []Delegation{{ID: "dlg_x", Parent: "incident", Via: ViaBreakGlass, Err: errString("garbled")}}
	e := asError(t, CheckBreakGlass(a, ds, incidentRequest(t)))
	if e.Reason != ReasonUnreadable {
		t.Errorf("CheckBreakGlass with an unreadable row = %v, want %s", e, ReasonUnreadable)
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// opened is the opened grant as stored: a break-glass delegation beneath incident.
func opened(t testing.TB) Delegation {
	return Delegation{ID: "dlg_bg", Parent: "incident", Via: ViaBreakGlass, Grant: *mustGrant(t, openedGrant), CreatedAt: testNow}
}

func TestEvaluateBreakGlass(t *testing.T) {
	t.Parallel()
	a := mustBreakGlass(t)
	call := refundCall()

	// An envelope matching a call decides nothing on its own.
	if d := Evaluate(a, nil, call); d.Allowed || d.Reason != ReasonNoAuthority {
		t.Fatalf("Evaluate with only the envelope = %+v, want no_authority", outcomeOf(d))
	}

	d := Evaluate(a, []Delegation{opened(t)}, call)
	if !d.Allowed || d.GrantID != "incident" || d.DelegationID != "dlg_bg" || d.BreakGlass != "incident" {
		t.Fatalf("Evaluate under the opened grant = %+v (break_glass %q), want allowed beneath incident via dlg_bg", outcomeOf(d), d.BreakGlass)
	}

	tests := []struct {
		name        string
		change      func(a *policy.Authority, d *Delegation, r *Request)
		reason, dim string
	}{
		{"expired", func(_ *policy.Authority, _ *Delegation, r *Request) {
			r.Now = testNow.Add(time.Hour + time.Microsecond)
		}, ReasonExpired, DimExpiresAt},
		{"revoked", func(_ *policy.Authority, d *Delegation, _ *Request) { d.Revoked = true }, ReasonRevoked, DimRevoked},
		{"a plain delegation beneath an envelope", func(_ *policy.Authority, d *Delegation, _ *Request) { d.Via = "" }, ReasonEscalation, DimParent},
		{"an unknown via beneath an envelope", func(_ *policy.Authority, d *Delegation, _ *Request) { d.Via = "hand-off" }, ReasonEscalation, DimParent},
		{"a break-glass delegation beneath a grant", func(_ *policy.Authority, d *Delegation, _ *Request) { d.Parent = "reader" }, ReasonRevoked, DimParent},
		{"envelope removed", func(a *policy.Authority, _ *Delegation, _ *Request) { a.BreakGlass = a.BreakGlass[1:] }, ReasonRevoked, DimParent},
		{"envelope narrowed", func(a *policy.Authority, _ *Delegation, _ *Request) {
			a.BreakGlass[0].Constraints = nil
			c, _ := policy.ParseCondition("amount_lte", int64(100))
			a.BreakGlass[0].Constraints = policy.Conditions{c}
		}, ReasonEscalation, "constraints.amount_lte"},
		{"max_ttl shortened", func(a *policy.Authority, _ *Delegation, _ *Request) { a.BreakGlass[0].MaxTTL = 30 * time.Minute }, ReasonEscalation, DimExpiresAt},
		{"stored without expiry", func(_ *policy.Authority, d *Delegation, _ *Request) { d.Grant.ExpiresAt = time.Time{} }, ReasonEscalation, DimExpiresAt},
		{"stored delegable", func(_ *policy.Authority, d *Delegation, _ *Request) { d.Grant.Delegable = true }, ReasonEscalation, DimDelegable},
		{"stored wider than the envelope", func(_ *policy.Authority, d *Delegation, r *Request) {
			d.Grant.Subject.Agent, r.Agent = "billing-bot", "billing-bot"
		}, ReasonEscalation, DimSubject},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := mustBreakGlass(t)
			d, r := opened(t), refundCall()
			tt.change(a, &d, &r)
			got := Evaluate(a, []Delegation{d}, r)
			if got.Allowed || got.Reason != tt.reason || got.Dimension != tt.dim {
				t.Errorf("Evaluate = %+v, want %s on %s (trace %q)", outcomeOf(got), tt.reason, tt.dim, got.Trace)
			}
		})
	}
}

// TestBreakGlassNotDelegable: nothing is delegated beneath an envelope or a break-glass grant.
func TestBreakGlassNotDelegable(t *testing.T) {
	t.Parallel()
	a := mustBreakGlass(t)
	a.MaxDelegationDepth = 3
	child := mustGrant(t, "subject: {agent: ops-bot, user: \"team:a\"}\nactions: [payments.refund]\nresources: [\"order:1\"]\nconstraints: {amount_lte: 5}\nenvironments: [production]\nexpires_at: \"2026-03-01T12:30:00Z\"\n")
	creator := Request{Agent: "ops-bot", User: "team:a", Now: testNow}
	e := asError(t, CheckDelegation(a, nil, "incident", child, creator))
	if e.Reason != ReasonNoAuthority || e.Dimension != DimParent {
		t.Errorf("CheckDelegation beneath an envelope = %v, want no_authority on parent", e)
	}
	e = asError(t, CheckDelegation(a, []Delegation{opened(t)}, "dlg_bg", child, creator))
	if e.Reason != ReasonEscalation || e.Dimension != DimDelegable {
		t.Errorf("CheckDelegation beneath a break-glass grant = %v, want authority_escalation on delegable", e)
	}
}

// TestBreakGlassTasks: an envelope reads a grant's tasks like any other key; an opening must
// keep them (contained as actions are), and a call under it must name a matching task.
func TestBreakGlassTasks(t *testing.T) {
	t.Parallel()
	p, err := policy.Parse("latch.yaml", []byte(`schema: latch.policy/v1
actions: {}
authority:
  grants: []
  break_glass:
    - id: ticketed
      subject: {agent: ops-bot}
      actions: [db.restart]
      tasks: ["ticket:*"]
      max_ttl: 1h
`))
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	a := p.Authority
	req := BreakGlassRequest{Envelope: "ticketed", TTL: time.Hour, Reason: "x", Opener: Opener{Name: "dave", Verified: true}, Now: testNow,
		Grant: mustGrant(t, "subject: {agent: ops-bot}\nactions: [db.restart]\nexpires_at: \"2026-03-01T13:00:00Z\"\n")}
	if e := asError(t, CheckBreakGlass(a, nil, req)); e.Reason != ReasonEscalation || e.Dimension != DimTasks {
		t.Errorf("an opening without the envelope's tasks = %v, want authority_escalation on tasks", e)
	}
	req.Grant = mustGrant(t, "subject: {agent: ops-bot}\nactions: [db.restart]\ntasks: [\"ticket:42\"]\nexpires_at: \"2026-03-01T13:00:00Z\"\n")
	if err := CheckBreakGlass(a, nil, req); err != nil {
		t.Fatalf("an opening for ticket:42 = %v", err)
	}
	d := Delegation{ID: "dlg_t", Parent: "ticketed", Via: ViaBreakGlass, Grant: *req.Grant, CreatedAt: testNow}
	call := Request{Agent: "ops-bot", Action: "db.restart", Task: "ticket:42", Now: testNow}
	if got := Evaluate(a, []Delegation{d}, call); !got.Allowed || got.BreakGlass != "ticketed" {
		t.Errorf("a call for ticket:42 = %+v, want allowed under ticketed", outcomeOf(got))
	}
	call.Task = "ticket:43"
	if got := Evaluate(a, []Delegation{d}, call); got.Allowed {
		t.Errorf("a call for ticket:43 = %+v, want refused", outcomeOf(got))
	}
}
