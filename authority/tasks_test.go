package authority

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/latchkit/latch/policy"
)

// TestEvaluateTasks covers the task dimension: a grant that names tasks matches only a request
// whose task one of its patterns matches, and never one without a task; a grant that names none
// admits any task or none; a request refused by its task alone is no_authority on tasks.
func TestEvaluateTasks(t *testing.T) {
	t.Parallel()
	auth := mustAuthority(t, 3, `    - id: tickets
      subject: {agent: "svc:ops"}
      actions: [ops.restart]
      resources: ["host:*"]
      environments: [production]
      tasks: ["ticket:INC-*", "river:job:**"]
    - id: anything
      subject: {agent: "svc:docs"}
      actions: [docs.read]
    - id: other-action
      subject: {agent: "svc:ops"}
      actions: [ops.stop]
      tasks: ["ticket:*"]
`)
	base := Request{Agent: "svc:ops", Action: "ops.restart", Resource: "host:a", Environment: "production", Task: "ticket:INC-7", Now: testNow}
	with := func(f func(*Request)) Request {
		r := base
		f(&r)
		return r
	}
	allowed := func(id string) outcome { return outcome{Allowed: true, Reason: ReasonGranted, GrantID: id} }
	onTasks := outcome{Reason: ReasonNoAuthority, Dimension: DimTasks}
	tests := []struct {
		name string
		r    Request
		want outcome
	}{
		{"its task", base, allowed("tickets")},
		{"a prefix pattern needs the same segment count", with(func(r *Request) { r.Task = "ticket:INC-7:sub" }), onTasks},
		{"deep wildcard, one further segment", with(func(r *Request) { r.Task = "river:job:12" }), allowed("tickets")},
		{"deep wildcard, several further segments", with(func(r *Request) { r.Task = "river:job:12:attempt:2" }), allowed("tickets")},
		{"deep wildcard needs a further segment", with(func(r *Request) { r.Task = "river:job" }), onTasks},
		{"another task", with(func(r *Request) { r.Task = "ticket:OPS-7" }), onTasks},
		{"tasks are case-sensitive", with(func(r *Request) { r.Task = "Ticket:INC-7" }), onTasks},
		{"an empty segment matches nothing", with(func(r *Request) { r.Task = "ticket:" }), onTasks},
		{"no task", with(func(r *Request) { r.Task = "" }), onTasks},
		{"the environment fails before the task", with(func(r *Request) { r.Task = ""; r.Environment = "staging" }), outcome{Reason: ReasonNoAuthority, Dimension: DimEnvironments}},
		{"a grant without tasks admits a task", Request{Agent: "svc:docs", Action: "docs.read", Task: "ticket:INC-7", Now: testNow}, allowed("anything")},
		{"a grant without tasks admits no task", Request{Agent: "svc:docs", Action: "docs.read", Now: testNow}, allowed("anything")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := Evaluate(auth, nil, tt.r)
			if diff := cmp.Diff(tt.want, outcomeOf(d)); diff != "" {
				t.Errorf("Evaluate(%+v) (-want +got):\n%s\ntrace: %q", tt.r, diff, d.Trace)
			}
			if tt.want == onTasks && !hasLine(d.Trace, "grant tickets: no match on tasks") {
				t.Errorf("Evaluate trace = %q, want a line saying grant tickets does not match on tasks", d.Trace)
			}
		})
	}
}

func hasLine(trace []string, line string) bool {
	for _, l := range trace {
		if l == line {
			return true
		}
	}
	return false
}

// TestEvaluateDelegatedTasks checks a delegation that narrows its parent's tasks: the request is
// matched against the child's tasks, not the parent's.
func TestEvaluateDelegatedTasks(t *testing.T) {
	t.Parallel()
	auth := mustAuthority(t, 3, `    - id: lead
      subject: {agent: "svc:lead"}
      actions: [ops.restart]
      tasks: ["ticket:**"]
      expires_at: "2026-12-31T00:00:00Z"
      delegable: true
`)
	child := mustGrant(t, `subject: {agent: "svc:bot"}
actions: [ops.restart]
tasks: ["ticket:INC-1"]
expires_at: "2026-06-30T00:00:00Z"
`)
	if err := CheckDelegation(auth, nil, "lead", child, Request{Agent: "svc:lead", Now: testNow}); err != nil {
		t.Fatalf("CheckDelegation = %v, want nil", err)
	}
	ds := []Delegation{{ID: "dlg_bot", Parent: "lead", Grant: *child}}
	for _, tt := range []struct {
		task string
		want outcome
	}{
		{"ticket:INC-1", outcome{Allowed: true, Reason: ReasonGranted, GrantID: "lead", DelegationID: "dlg_bot"}},
		{"ticket:INC-2", outcome{Reason: ReasonNoAuthority, Dimension: DimTasks}}, // the parent's, not the child's
		{"", outcome{Reason: ReasonNoAuthority, Dimension: DimTasks}},
	} {
		d := Evaluate(auth, ds, Request{Agent: "svc:bot", Action: "ops.restart", Task: tt.task, Now: testNow})
		if diff := cmp.Diff(tt.want, outcomeOf(d)); diff != "" {
			t.Errorf("Evaluate(task %q) (-want +got):\n%s\ntrace: %q", tt.task, diff, d.Trace)
		}
	}
}

// TestTaskContainment is the containment table of the task dimension: the rule of actions
// (every child pattern within some parent pattern), and, when the parent names tasks, a child
// that names none is widening.
func TestTaskContainment(t *testing.T) {
	t.Parallel()
	tests := []struct {
		parent, child []string // nil: not declared
		ok            bool
	}{
		{nil, nil, true},
		{nil, []string{"ticket:*"}, true},
		{[]string{"ticket:**"}, nil, false},
		{[]string{"ticket:**"}, []string{"ticket:**"}, true},
		{[]string{"ticket:**"}, []string{"ticket:*"}, true},
		{[]string{"ticket:**"}, []string{"ticket:INC-1:leg:2"}, true},
		{[]string{"ticket:**"}, []string{"ticket"}, false}, // ** is one or more further segments
		{[]string{"ticket:**"}, []string{"tickets:1"}, false},
		{[]string{"ticket:INC-*"}, []string{"ticket:INC-1*"}, true},
		{[]string{"ticket:INC-*"}, []string{"ticket:INC-1"}, true},
		{[]string{"ticket:INC-*"}, []string{"ticket:IN*"}, false},
		{[]string{"ticket:INC-*"}, []string{"ticket:*"}, false},
		{[]string{"ticket:INC-1"}, []string{"ticket:INC-*"}, false}, // a wildcard is never within a literal
		{[]string{"ticket:INC-*"}, []string{"ticket:INC-1:sub"}, false},
		{[]string{"ticket:INC-*", "river:job:*"}, []string{"river:job:7", "ticket:INC-2"}, true},
		{[]string{"ticket:INC-*", "river:job:*"}, []string{"river:job:7", "asynq:task:1"}, false},
	}
	for _, tt := range tests {
		name := "parent " + patternsText(tt.parent) + " child " + patternsText(tt.child)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			parent := &policy.Grant{ID: "p", Subject: policy.Subject{Agent: "svc:lead"}, Actions: []string{"ops.restart"},
				Tasks: tt.parent, Delegable: true, ExpiresAt: testNow.AddDate(1, 0, 0)}
			child := &policy.Grant{Subject: policy.Subject{Agent: "svc:bot"}, Actions: []string{"ops.restart"},
				Tasks: tt.child, ExpiresAt: testNow.AddDate(0, 1, 0)}
			auth := &policy.Authority{MaxDelegationDepth: 3, Grants: []*policy.Grant{parent}}
			err := CheckDelegation(auth, nil, "p", child, Request{Agent: "svc:lead", Now: testNow})
			if tt.ok {
				if err != nil {
					t.Errorf("CheckDelegation = %v, want nil", err)
				}
			} else if err == nil {
				t.Errorf("CheckDelegation = nil, want %s on %s", ReasonEscalation, DimTasks)
			} else if e := asError(t, err); e.Reason != ReasonEscalation || e.Dimension != DimTasks {
				t.Errorf("CheckDelegation = %v, want %s on %s", err, ReasonEscalation, DimTasks)
			}
			// The same rule at evaluation, for a child found in the store: a call it would
			// admit is allowed only when the child is contained.
			task := "ticket:INC-1"
			if tt.child != nil {
				task = concreteTask(tt.child[0])
			}
			d := Evaluate(auth, []Delegation{{ID: "dlg_c", Parent: "p", Grant: *child}},
				Request{Agent: "svc:bot", Action: "ops.restart", Task: task, Now: testNow})
			switch {
			case tt.ok && !d.Allowed:
				t.Errorf("Evaluate(task %q) = %s on %s, want allowed; trace %q", task, d.Reason, d.Dimension, d.Trace)
			case !tt.ok && (d.Allowed || d.Reason != ReasonEscalation || d.Dimension != DimTasks):
				t.Errorf("Evaluate(task %q) = allowed %v, %s on %s; want %s on %s", task, d.Allowed, d.Reason, d.Dimension, ReasonEscalation, DimTasks)
			}
		})
	}
}

// concreteTask is a task the pattern p matches: each wildcard filled in.
func concreteTask(p string) string {
	p = strings.ReplaceAll(p, "**", "x:y")
	return strings.ReplaceAll(p, "*", "9")
}

func patternsText(l []string) string {
	if l == nil {
		return "none"
	}
	return strings.Join(l, ",")
}

// TestMalformedTasks checks that a stored delegation whose tasks are malformed is unreadable, as
// any malformed record is, and that a child with malformed tasks is not a grant.
func TestMalformedTasks(t *testing.T) {
	t.Parallel()
	auth := mustAuthority(t, 3, `    - id: lead
      subject: {agent: "svc:lead"}
      actions: [ops.restart]
      expires_at: "2026-12-31T00:00:00Z"
      delegable: true
`)
	for _, tasks := range [][]string{{}, {"ticket:*x"}, {"**"}, {"a::b"}} {
		child := &policy.Grant{Subject: policy.Subject{Agent: "svc:bot"}, Actions: []string{"ops.restart"}, Tasks: tasks, ExpiresAt: testNow.AddDate(0, 1, 0)}
		err := CheckDelegation(auth, nil, "lead", child, Request{Agent: "svc:lead", Now: testNow})
		if e := asError(t, err); e.Reason != ReasonInvalidGrant || e.Dimension != DimTasks {
			t.Errorf("CheckDelegation(tasks %q) = %v, want %s on %s", tasks, err, ReasonInvalidGrant, DimTasks)
		}
		d := Evaluate(auth, []Delegation{{ID: "dlg_c", Parent: "lead", Grant: *child}}, Request{Agent: "svc:docs", Action: "x.y", Now: testNow})
		if d.Allowed || d.Reason != ReasonUnreadable {
			t.Errorf("Evaluate with a stored child whose tasks are %q = %s, want %s", tasks, d.Reason, ReasonUnreadable)
		}
	}
}
