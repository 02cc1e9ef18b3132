package client_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/store"
)

// TestSuspendResume: through the client, a begun charge is suspended, refused a resume with a
// wrong token (the same *latch.OutcomeError a local guard returns), resumed with its token and
// finished: one receipt, the effect committed. Both stores.
func TestSuspendResume(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			c, g := serve(t, backend)
			args := json.RawMessage(`{"invoice_id":"inv_c1","amount":100}`)
			b, err := c.Begin(t.Context(), "billing.charge", args, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			s, err := c.Suspend(t.Context(), b.ActionID, json.RawMessage(`{"ask":"confirm"}`))
			if err != nil || s.Round != 1 || s.Token == "" || string(s.Request) != `{"ask":"confirm"}` || s.LeaseExpiresAt.IsZero() {
				t.Fatalf("Suspend = %+v, %v", s, err)
			}
			_, err = c.Resume(t.Context(), &latch.ResumeRequest{ActionID: b.ActionID, Token: "lrt_wrong", Arguments: args})
			var oe *latch.OutcomeError
			if !errors.As(err, &oe) || oe.Reason != string(latch.ReasonSuspensionToken) || !errors.Is(err, latch.ErrOutcomeRefused) {
				t.Errorf("Resume with a wrong token = %T %v, want *latch.OutcomeError suspension_token", err, err)
			}
			r, err := c.Resume(t.Context(), &latch.ResumeRequest{ActionID: b.ActionID, Token: s.Token,
				Arguments: json.RawMessage(`{"amount":100,"invoice_id":"inv_c1"}`), Input: map[string]json.RawMessage{"ok": json.RawMessage("true")}})
			if err != nil || r.Round != 1 || string(r.Request) != `{"ask":"confirm"}` {
				t.Fatalf("Resume = %+v, %v", r, err)
			}
			rec, err := c.Finish(t.Context(), b.ActionID, "committed", json.RawMessage(`{"charge":"ch_1"}`), "")
			if err != nil || rec.Result != "committed" {
				t.Fatalf("Finish = %+v, %v", rec, err)
			}
			if eff, err := g.Store().Effect(t.Context(), "charge:inv_c1"); err != nil || eff.State != store.Committed {
				t.Errorf("effect = %+v, %v; want committed", eff, err)
			}
		})
	}
}
