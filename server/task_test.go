package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/client"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// taskPolicy binds billing-worker's grant to tickets FIN-….
const taskPolicy = `
schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    decision: allow
authority:
  grants:
    - id: tickets
      subject: { agent: billing-worker }
      actions: [billing.charge]
      tasks: ["ticket:FIN-*"]
`

// TestBeginTask: POST /v1/actions takes the call's task; a task-bound grant admits its task
// (the receipt records it) and refuses another task, or none, 403 no_authority on tasks; a task
// no call may carry is 422 invalid_argument naming the field, and writes nothing. Both stores.
func TestBeginTask(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := startWith(t, backend, taskPolicy, nil)
			charge := func(id, task string) map[string]any {
				b := map[string]any{"action": "billing.charge", "arguments": map[string]any{"invoice_id": id}}
				if task != "" {
					b["task"] = task
				}
				return b
			}
			r := s.do("POST", "/v1/actions", s.alice, charge("inv_1", "ticket:FIN-7"))
			if r.status != 200 || r.body["status"] != "reserved" {
				t.Fatalf("begin with task ticket:FIN-7 = %d %s, want 200 reserved", r.status, r.raw)
			}
			out := s.do("POST", "/v1/actions/"+r.body["action_id"].(string)+"/outcome", s.alice, map[string]any{"outcome": "committed"})
			if out.status != 200 || out.body["result"] != "committed" {
				t.Fatalf("outcome = %d %s, want 200 committed", out.status, out.raw)
			}
			rc, err := receipt.Parse([]byte(mustJSON(t, out.body["receipt"])))
			if err != nil || rc.Task != "ticket:FIN-7" {
				t.Errorf("receipt task = %q (%v), want ticket:FIN-7", rc.Task, err)
			}

			for _, task := range []string{"ticket:OPS-7", ""} {
				p := wantProblem(t, "begin with task "+task, s.do("POST", "/v1/actions", s.alice, charge("inv_2", task)), 403, "no_authority")
				if p["kind"] != "authority" || p["dimension"] != "tasks" || p["reason"] != "no_authority" {
					t.Errorf("begin with task %q = %v, want kind authority, dimension tasks", task, p)
				}
			}

			before := s.footprint()
			p := wantProblem(t, "begin with a bad task", s.do("POST", "/v1/actions", s.alice, charge("inv_3", "ticket:FIN-\u202e7")), 422, "invalid_argument")
			if p["field"] != "task" || !strings.Contains(p["detail"].(string), "invalid task") {
				t.Errorf("begin with a bad task = %v, want field task", p)
			}
			if after := s.footprint(); after != before {
				t.Errorf("a bad task wrote: %+v, then %+v", before, after)
			}
			if p := wantProblem(t, "task not a string", s.do("POST", "/v1/actions", s.alice, `{"action":"billing.charge","arguments":{"invoice_id":"x"},"task":7}`), 400, "wrong_type"); p["field"] != "task" {
				t.Errorf("task not a string = %v, want field task", p)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestClientTask: the Go client sends Options.Task, or the context's task, as the call's task.
func TestClientTask(t *testing.T) {
	t.Parallel()
	s := startWith(t, "sqlite", taskPolicy, nil)
	c := client.New(s.url, s.alice)
	type args struct {
		InvoiceID string `json:"invoice_id"`
	}
	charged := func(context.Context, args) (string, error) { return "charged", nil }

	bound := client.Protect(c, "billing.charge", charged, &latch.Options{Task: "ticket:FIN-1"})
	if out, err := bound(t.Context(), args{"inv_1"}); err != nil || out != "charged" {
		t.Errorf("Protect with Options.Task = %q, %v; want charged", out, err)
	}
	free := client.Protect(c, "billing.charge", charged, nil)
	if out, err := free(latch.WithTask(t.Context(), "ticket:FIN-2"), args{"inv_2"}); err != nil || out != "charged" {
		t.Errorf("Protect with WithTask = %q, %v; want charged", out, err)
	}
	_, err := free(latch.WithTask(t.Context(), "ticket:OPS-3"), args{"inv_3"})
	var ae *latch.AuthorityError
	if !errors.As(err, &ae) || ae.Reason != "no_authority" || ae.Dimension != "tasks" {
		t.Errorf("Protect with another task = %v, want an AuthorityError no_authority on tasks", err)
	}
	if _, err := free(t.Context(), args{"inv_4"}); !errors.As(err, &ae) || ae.Dimension != "tasks" {
		t.Errorf("Protect with no task = %v, want an AuthorityError no_authority on tasks", err)
	}
	if _, err := bound(latch.WithTask(t.Context(), "ticket:FIN-9"), args{"inv_5"}); !errors.Is(err, latch.ErrInvalidArgument) {
		t.Errorf("Protect with Options.Task and another WithTask = %v, want invalid_argument", err)
	}
	var tasks []string
	for r, err := range s.g.Store().Receipts(t.Context(), store.ReceiptFilter{}) {
		if err != nil {
			t.Fatal(err)
		}
		rc, err := receipt.Parse(r.Doc)
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, rc.Task)
	}
	if want := []string{"ticket:FIN-1", "ticket:FIN-2", "ticket:OPS-3", ""}; strings.Join(tasks, ",") != strings.Join(want, ",") {
		t.Errorf("receipts' tasks = %q, want %q", tasks, want)
	}
}
