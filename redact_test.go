package latch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/metrics"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// redactDoc charges a card whose number is shown by its last four only; an approver may lower
// the amount.
const redactDoc = `
schema: latch.policy/v1
approvers:
  roles:
    payments-leads: [alice]
actions:
  billing.charge:
    effect: "charge:{order_id}"
    arguments:
      order_id: { type: string }
      card_number: { type: string, redact: last4 }
      amount: { type: integer, min: 1, editable: { decrease: true } }
    approvers: { roles: [payments-leads] }
    decision: approve
`

const fullCard = "4242424242424242"

// TestRedactedArgumentReceipts: the approval binds the full card number (another number with
// the same last four is refused approval_mismatch), the call runs once, and its receipt — the
// arguments and the approval_edit's requested arguments alike — records a salted commitment and
// the masked form, never the number; the commitment proves the number to whoever holds it, and
// the chain verifies.
func TestRedactedArgumentReceipts(t *testing.T) {
	t.Parallel()
	const asked = `{"amount":50000,"card_number":"` + fullCard + `","order_id":"ord_1"}`
	const approved = `{"amount":40000,"card_number":"` + fullCard + `","order_id":"ord_1"}`
	const otherCard = `{"amount":40000,"card_number":"4000056655664242","order_id":"ord_1"}`
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			p, err := policy.Parse("latch.yaml", []byte(redactDoc))
			if err != nil {
				t.Fatal(err)
			}
			// Metrics and logs, at their most talkative, are searched for the number too.
			m, err := metrics.New(&metrics.Config{Policy: p})
			if err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			var logMu sync.Mutex
			logger := slog.New(slog.NewJSONHandler(&lockedWriter{mu: &logMu, w: &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
			g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: testdb.URL(t, backend, "latch_redact"),
				Sinks: []latch.Sink{m}, Logger: logger})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })
			m.UseStore(g.Store())
			var ran atomic.Int64
			call := func(args, approval string) (*latch.Receipt, error) {
				ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "shop-bot", User: "uma"})
				if approval != "" {
					ctx = latch.WithApproval(ctx, approval)
				}
				return g.Execute(ctx, &latch.Call{Action: "billing.charge", Arguments: json.RawMessage(args)},
					func(context.Context, json.RawMessage) (any, error) { ran.Add(1); return "ok", nil })
			}
			_, err = call(asked, "")
			var req *latch.ApprovalRequiredError
			if !errors.As(err, &req) {
				t.Fatalf("Execute = %v, want approval required", err)
			}
			if _, err := g.Answer(t.Context(), &store.AnswerRequest{ID: req.ApprovalID, Grant: true, Approver: "alice",
				Method: store.MethodSession, Verified: true, Set: json.RawMessage(`{"amount":40000}`)}); err != nil {
				t.Fatalf("grant with an edit: %v", err)
			}
			// The approval binds the full number: the same last four do not pass.
			if _, err := call(otherCard, req.ApprovalID); !errors.Is(err, latch.ErrApprovalMismatch) || ran.Load() != 0 {
				t.Fatalf("another card with the same last four = %v (ran %d), want approval_mismatch", err, ran.Load())
			}
			rc, err := call(approved, req.ApprovalID)
			if err != nil || ran.Load() != 1 {
				t.Fatalf("the approved call = %v (ran %d), want it run once", err, ran.Load())
			}
			if strings.Contains(string(rc.Doc), fullCard) {
				t.Fatalf("the receipt shows the card number:\n%s", rc.Doc)
			}
			for _, c := range []struct {
				what string
				args json.RawMessage
			}{{"arguments", rc.Arguments}, {"approval_edit.requested_arguments", rc.ApprovalEdit.RequestedArguments}} {
				r, err := receipt.RedactedArgument(c.args, "card_number")
				if err != nil {
					t.Fatalf("%s: %v (%s)", c.what, err, c.args)
				}
				if r.Redacted != "last4" || r.Shown != "••••4242" {
					t.Errorf("%s card_number = %+v, want last4 shown ••••4242", c.what, r)
				}
				if !r.Check(json.RawMessage(`"` + fullCard + `"`)) {
					t.Errorf("%s: the commitment does not prove the card number", c.what)
				}
				if r.Check(json.RawMessage(`"4000056655664242"`)) {
					t.Errorf("%s: the commitment proves another card number", c.what)
				}
			}
			if !strings.Contains(string(rc.Arguments), `"amount":40000`) || !strings.Contains(string(rc.ApprovalEdit.RequestedArguments), `"amount":50000`) {
				t.Errorf("receipt arguments %s / requested %s, want the amounts in full", rc.Arguments, rc.ApprovalEdit.RequestedArguments)
			}
			// The stored chain holds no card number either, and verifies.
			for r, err := range g.Store().Receipts(t.Context(), store.ReceiptFilter{}) {
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(r.Doc), fullCard) {
					t.Errorf("stored receipt %d shows the card number", r.Seq)
				}
			}
			verifyChain(t, g)
			rec := httptest.NewRecorder()
			m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			if body := rec.Body.String(); !strings.Contains(body, `latch_calls_total{action="billing.charge"`) || strings.Contains(body, fullCard) || strings.Contains(body, "4242") {
				t.Errorf("metrics: want billing.charge counted and no card digits in any label:\n%s", body)
			}
			logMu.Lock()
			defer logMu.Unlock()
			if strings.Contains(logs.String(), fullCard) {
				t.Errorf("the log shows the card number:\n%s", logs.String())
			}
		})
	}
}

// lockedWriter serialises writes to w: the guard logs from more than one goroutine.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
