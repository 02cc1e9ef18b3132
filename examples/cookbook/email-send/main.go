// Command email-send sends a renewal reminder from a job that its queue delivers three times.
//
// The queue (at-least-once, as most are) hands the same job to three workers, one after another as its visibility timeout lapses. Each sends the
// reminder through a protected function whose effect key is the customer and the campaign, so
// the mail provider (an in-memory fake counting messages) sends one email; the other two
// workers are refused as already committed and get the first send's message id back from the
// refusal, so they can acknowledge the job with the same answer. A reminder to a customer the
// policy says never to contact (a suppressed address) is denied by its rule, naming it.
//
// Unguarded (LATCH_EXAMPLE_UNGUARDED=1) the customer gets three reminders: the recipe exits 1.
package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/examples/cookbook/internal/recipe"
)

const policyYAML = `
schema: latch.policy/v1
actions:
  email.send:
    effect: "email:{campaign}:{customer_id}"
    resource: "customer:{customer_id}"
    arguments:
      campaign: { type: string }
      customer_id: { type: string }
      to: { type: string }
      suppressed: { type: boolean }
    rules:
      - when: { suppressed_eq: true }
        decision: deny
      - decision: allow
`

// Reminder is the job's payload.
type Reminder struct {
	Campaign   string `json:"campaign"`
	CustomerID string `json:"customer_id"`
	To         string `json:"to"`
	Suppressed bool   `json:"suppressed"`
}

// mailer is the fake provider: it counts the messages it sends to each address.
type mailer struct {
	mu   sync.Mutex
	sent map[string]int
	n    int
}

func (m *mailer) send(_ context.Context, r Reminder) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent[r.To]++
	m.n++
	return fmt.Sprintf("msg_%03d", m.n), nil
}

func main() {
	recipe.Run("email-send", policyYAML, func(ctx context.Context, k *recipe.Kitchen) error {
		m := &mailer{sent: map[string]int{}}
		send := latch.Protect(k.Guard, "email.send", m.send, nil)
		if err := k.Guard.Check(); err != nil {
			return err
		}
		if k.Unguarded {
			send = m.send
		}
		ctx = latch.WithPrincipal(ctx, latch.Principal{Agent: "reminder-worker"})
		job := Reminder{Campaign: "renewal-2026", CustomerID: "cus_77", To: "ana@example.com"}

		ids := make([]string, 3)
		errs := make([]error, 3)
		for w := range 3 { // the queue redelivers the job to a worker after each visibility timeout
			ids[w], errs[w] = send(ctx, job)
		}
		sent, dup, first := 0, 0, ids[0]
		for w := range 3 {
			id, replayed := ids[w], false
			if errors.Is(errs[w], latch.ErrDuplicateEffect) {
				id, replayed = "", true
				if v, ok := latch.ResultOf[string](errs[w]); ok {
					id = v
				}
			}
			switch {
			case errs[w] == nil:
				sent++
				k.Say("worker %d: sent %s", w+1, id)
			case replayed:
				dup++
				k.Expect(id == first, "worker %d was handed %q, want the first send's %q", w+1, id, first)
				k.Say("worker %d: refused %s, the reminder went out as %s", w+1, recipe.Reason(errs[w]), id)
			default:
				k.Say("worker %d: %v", w+1, errs[w])
			}
		}
		_, err := send(ctx, Reminder{Campaign: "renewal-2026", CustomerID: "cus_78", To: "bo@example.com", Suppressed: true})
		k.Say("reminder to a suppressed address: %v", err)
		if !k.Unguarded {
			rule := ""
			if r := latch.RefusalOf(err); r != nil {
				rule = r.Rule
			}
			k.Expect(recipe.Reason(err) == string(latch.ReasonDenied) && rule == "rule[0]",
				"the suppressed address was refused %q by %q, want denied by rule[0]", recipe.Reason(err), rule)
			k.Expect(sent == 1 && dup == 2, "%d workers sent and %d were refused as duplicates, want 1 and 2", sent, dup)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		k.Say("emails to ana@example.com: %d, to bo@example.com: %d", m.sent["ana@example.com"], m.sent["bo@example.com"])
		k.Expect(m.sent["ana@example.com"] == 1, "ana got %d reminders, want 1", m.sent["ana@example.com"])
		k.Expect(m.sent["bo@example.com"] == 0, "the suppressed address got %d reminders, want none", m.sent["bo@example.com"])
		return nil
	})
}
