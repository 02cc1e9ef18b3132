package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/store"
)

// taskPolicy has one task-bound grant (ops.restart, for tickets INC-…) and one that names no
// tasks (report.read).
const taskPolicy = `
schema: latch.policy/v1
actions:
  ops.restart:
    effect: "restart:{host}"
    resource: "host:{host}"
    decision: allow
  report.read:
    decision: allow
authority:
  grants:
    - id: tickets
      subject: { agent: ops-bot }
      actions: [ops.restart]
      tasks: ["ticket:INC-*"]
    - id: reports
      subject: { agent: ops-bot }
      actions: [report.read]
`

func restartCall(host, task string) *latch.Call {
	args, _ := json.Marshal(map[string]any{"host": host})
	c := &latch.Call{Action: "ops.restart", Arguments: args}
	if task != "" {
		c.Options = &latch.Options{Task: task}
	}
	return c
}

func opsBot(ctx context.Context) context.Context {
	return latch.WithPrincipal(ctx, latch.Principal{Agent: "ops-bot"})
}

func ok(context.Context, json.RawMessage) (any, error) { return "ok", nil }

// authorityEvent returns the payload of the authority event (resolved or denied) of actionID.
func authorityEvent(t *testing.T, g *latch.Guard, actionID string) (string, map[string]any) {
	t.Helper()
	evs, err := g.Store().Events(t.Context(), store.EventFilter{ActionID: actionID})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Kind == store.EventAuthorityResolved || ev.Kind == store.EventAuthorityDenied {
			var data map[string]any
			if err := json.Unmarshal(ev.Payload, &data); err != nil {
				t.Fatal(err)
			}
			return ev.Kind, data
		}
	}
	t.Fatalf("no authority event for %s", actionID)
	return "", nil
}

// TestTaskBoundGrant: a grant that names tasks admits a call of a matching task (Options.Task,
// or WithTask for a protected function), and refuses another task and a call with none with
// no_authority on the tasks dimension; the task is on the receipt and in the authority event,
// on both stores.
func TestTaskBoundGrant(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, taskPolicy)
			ctx := opsBot(t.Context())

			rc, err := e.g.Execute(ctx, restartCall("a", "ticket:INC-7"), ok)
			if err != nil {
				t.Fatalf("Execute(task ticket:INC-7) = %v, want committed", err)
			}
			if rc.Result != "committed" || rc.Task != "ticket:INC-7" || rc.Authority == nil || rc.Authority.GrantID != "tickets" {
				t.Errorf("receipt = result %s, task %q, authority %+v; want committed, ticket:INC-7, grant tickets", rc.Result, rc.Task, rc.Authority)
			}
			sameAsStored(t, rc)
			if doc := lastReceipt(t, e.g); doc["task"] != "ticket:INC-7" {
				t.Errorf("stored receipt task = %v, want ticket:INC-7", doc["task"])
			}
			if kind, data := authorityEvent(t, e.g, rc.ActionID); kind != store.EventAuthorityResolved || data["task"] != "ticket:INC-7" {
				t.Errorf("authority event = %s %v, want %s with task ticket:INC-7", kind, data, store.EventAuthorityResolved)
			}

			// A protected function learns its task per call from the context.
			restart := latch.Protect(e.g, "ops.restart", func(_ context.Context, a struct {
				Host string `json:"host"`
			}) (string, error) {
				return "restarted " + a.Host, nil
			}, nil)
			if out, err := restart(latch.WithTask(ctx, "ticket:INC-8"), struct {
				Host string `json:"host"`
			}{"b"}); err != nil || out != "restarted b" {
				t.Errorf("protected call with WithTask(ticket:INC-8) = %q, %v; want restarted b", out, err)
			}
			if doc := lastReceipt(t, e.g); doc["task"] != "ticket:INC-8" {
				t.Errorf("stored receipt task = %v, want ticket:INC-8", doc["task"])
			}

			for _, task := range []string{"ticket:OPS-1", "", "ticket:INC-1:sub"} {
				rc, err := e.g.Execute(ctx, restartCall("c", task), ok)
				var ae *latch.AuthorityError
				if !errors.As(err, &ae) || ae.Reason != "no_authority" || ae.Dimension != "tasks" || !errors.Is(err, latch.ErrAuthority) {
					t.Fatalf("Execute(task %q) = %v, want an AuthorityError no_authority on tasks", task, err)
				}
				if r := latch.RefusalOf(err); r == nil || r.Reason != "no_authority" || r.Dimension != "tasks" {
					t.Errorf("RefusalOf(task %q) = %+v, want no_authority on tasks", task, r)
				}
				if rc == nil || rc.Result != "denied" || rc.Task != task {
					t.Fatalf("refusal receipt (task %q) = %+v, want denied with the task", task, rc)
				}
				kind, data := authorityEvent(t, e.g, rc.ActionID)
				if kind != store.EventAuthorityDenied || data["dimension"] != "tasks" || data["reason"] != "no_authority" {
					t.Errorf("authority event (task %q) = %s %v, want %s no_authority on tasks", task, kind, data, store.EventAuthorityDenied)
				}
				if _, has := data["task"]; has != (task != "") || (task != "" && data["task"] != task) {
					t.Errorf("authority event (task %q) task = %v, want the task when there is one", task, data["task"])
				}
			}

			// A grant that names no tasks admits a call with a task and one without.
			for _, task := range []string{"", "ticket:OPS-1"} {
				c := &latch.Call{Action: "report.read", Options: &latch.Options{Task: task}}
				if _, err := e.g.Execute(ctx, c, ok); err != nil {
					t.Errorf("report.read with task %q = %v, want allowed", task, err)
				}
			}

			// Evaluate decides the task dimension as Execute does.
			ev, err := e.g.Evaluate(ctx, restartCall("d", "ticket:OPS-1"))
			if err != nil || ev.Authority == nil || ev.Authority.Allowed || ev.Authority.Dimension != "tasks" || ev.Reason != "no_authority" {
				t.Errorf("Evaluate(task ticket:OPS-1) = %+v, %v; want denied no_authority on tasks", ev, err)
			}
			ev, err = e.g.Evaluate(latch.WithTask(ctx, "ticket:INC-2"), restartCall("d", ""))
			if err != nil || ev.Authority == nil || !ev.Authority.Allowed {
				t.Errorf("Evaluate(WithTask ticket:INC-2) = %+v, %v; want allowed", ev, err)
			}
			verifyChain(t, e.g)
		})
	}
}

// TestTaskBeginFinish: a call begun with Begin carries its task through to the receipt that
// Finish writes, also when Finish runs in another process (another guard on the store).
func TestTaskBeginFinish(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := newEnvOn(t, backend, taskPolicy)
			ctx := opsBot(t.Context())
			p, err := e.g.Begin(ctx, restartCall("a", "ticket:INC-3"))
			if err != nil {
				t.Fatalf("Begin(task ticket:INC-3) = %v", err)
			}
			other := e.another(t, taskPolicy)
			rc, err := other.Finish(ctx, p.ActionID, latch.OutcomeCommitted, json.RawMessage(`"done"`), "")
			if err != nil {
				t.Fatalf("Finish = %v", err)
			}
			if rc.Result != "committed" || rc.Task != "ticket:INC-3" {
				t.Errorf("receipt = %s, task %q; want committed, ticket:INC-3", rc.Result, rc.Task)
			}
			sameAsStored(t, rc)

			_, err = e.g.Begin(ctx, restartCall("b", "ticket:OPS-3"))
			var ae *latch.AuthorityError
			if !errors.As(err, &ae) || ae.Reason != "no_authority" || ae.Dimension != "tasks" {
				t.Errorf("Begin(task ticket:OPS-3) = %v, want no_authority on tasks", err)
			}
			_, err = e.g.Begin(ctx, restartCall("b", ""))
			if !errors.As(err, &ae) || ae.Reason != "no_authority" || ae.Dimension != "tasks" {
				t.Errorf("Begin(no task) = %v, want no_authority on tasks", err)
			}
		})
	}
}

// TestTaskNotInActionHash: the task is not part of the action, so the same call with another
// task, or none, has the same action hash (and an approval of it is the same approval).
func TestTaskNotInActionHash(t *testing.T) {
	t.Parallel()
	e := newEnv(t, taskPolicy)
	ctx := opsBot(t.Context())
	var hashes []string
	for _, task := range []string{"", "ticket:INC-1", "ticket:INC-2"} {
		ev, err := e.g.Evaluate(ctx, restartCall("a", task))
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, ev.ActionHash)
	}
	if hashes[0] == "" || hashes[0] != hashes[1] || hashes[1] != hashes[2] {
		t.Errorf("action hashes without a task, with ticket:INC-1, with ticket:INC-2 = %q, want all equal", hashes)
	}
	rc, err := e.g.Execute(ctx, restartCall("a", "ticket:INC-1"), ok)
	if err != nil || rc.ActionHash != hashes[0] {
		t.Errorf("Execute with a task: hash %s, %v; want the hash without one, %s", rc.ActionHash, err, hashes[0])
	}
}

// TestBadTaskWritesNothing: a task no call may carry is refused invalid_argument, naming the
// task, before anything is written, on Execute, Begin and Evaluate alike.
func TestBadTaskWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, taskPolicy)
	ctx := opsBot(t.Context())
	tests := []struct {
		name string
		ctx  context.Context
		call *latch.Call
		msg  string
	}{
		{"NUL", ctx, restartCall("a", "ticket:INC-\x001"), "control character"},
		{"line break", ctx, restartCall("a", "ticket:INC-1\nticket:INC-2"), "control character or a line break"},
		{"bidi override", ctx, restartCall("a", "ticket:INC-\u202e1"), "invisible format character"},
		{"not UTF-8", ctx, restartCall("a", "ticket:\xff"), "not valid UTF-8"},
		{"too long", ctx, restartCall("a", "ticket:"+strings.Repeat("9", latch.MaxTaskLength)), "longer than the 512"},
		{"in the context", latch.WithTask(ctx, "ticket:\x07"), restartCall("a", ""), "control character"},
		{"two tasks", latch.WithTask(ctx, "ticket:INC-2"), restartCall("a", "ticket:INC-1"), "differs from Options.Task"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := writes(t, e.g)
			calls := map[string]func() error{
				"Execute":  func() error { _, err := e.g.Execute(tt.ctx, tt.call, ok); return err },
				"Begin":    func() error { _, err := e.g.Begin(tt.ctx, tt.call); return err },
				"Evaluate": func() error { _, err := e.g.Evaluate(tt.ctx, tt.call); return err },
			}
			for name, call := range calls {
				err := call()
				var ie *latch.InvalidArgumentError
				if !errors.As(err, &ie) || ie.Reason != "invalid_argument" || !errors.Is(err, store.ErrInvalidInput) ||
					!strings.Contains(err.Error(), "invalid task") || !strings.Contains(err.Error(), tt.msg) {
					t.Errorf("%s = %v, want invalid_argument: invalid task …%s…", name, err, tt.msg)
				}
				if r := latch.RefusalOf(err); r == nil || r.Reason != "invalid_argument" {
					t.Errorf("%s: RefusalOf = %+v, want invalid_argument", name, r)
				}
			}
			if after := writes(t, e.g); after != before {
				t.Errorf("write transactions = %d, want %d: a bad task writes nothing", after, before)
			}
		})
	}
	if n := receiptCount(t, e.g); n != 0 {
		t.Errorf("receipts = %d, want 0", n)
	}
	// At the limit is fine.
	if _, err := e.g.Execute(ctx, restartCall("a", "ticket:INC-"+strings.Repeat("9", latch.MaxTaskLength-len("ticket:INC-"))), ok); err != nil {
		t.Errorf("Execute with a task of MaxTaskLength bytes = %v, want committed", err)
	}
}
