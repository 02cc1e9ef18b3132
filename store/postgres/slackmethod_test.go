package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/latchkit/latch/store"
)

// slackVersion is the schema that widened the answers' method check to slack.
const slackVersion = 19

// TestSlackMethodMigration: a schema left at 18 by an older binary — its answers' method check
// without slack, as that binary created it — with answers recorded (one as proxy) refuses an
// answer of method slack; migrated forward, its answers read back as they were, its chain
// verifies, and a slack answer is stored and read back.
func TestSlackMethodMigration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := newSchemaURL(t)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ask := func(st store.Store, id string) {
		t.Helper()
		a := &store.Approval{ID: id, Status: store.Pending, ActionHash: "sha256:" + id, ActionName: "billing.refund",
			Action: json.RawMessage(`{"schema":"latch.action/v1","name":"billing.refund"}`), Agent: "agent:billing",
			PolicyHash: "sha256:policy", CreatedAt: at, ExpiresAt: at.Add(time.Hour)}
		if _, err := st.CreateApproval(ctx, &store.ApprovalRequest{Now: at, Approval: a}); err != nil {
			t.Fatalf("CreateApproval(%s): %v", id, err)
		}
	}
	answer := func(st store.Store, id, method string) error {
		_, err := st.AnswerApproval(ctx, &store.AnswerRequest{Now: at.Add(time.Minute), ID: id, Grant: true, Approver: "alice",
			Method: method, Verified: true})
		return err
	}

	// The rows an older binary wrote are the rows of today's: write them, then put the schema
	// back to 18 as that binary left it — the method check of schema 7, and the version.
	st, err := Open(ctx, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	ask(st, "apr_proxy")
	ask(st, "apr_slack")
	if err := answer(st, "apr_proxy", store.MethodProxy); err != nil {
		t.Fatalf("proxy answer: %v", err)
	}
	q := st.quoted()
	st.Close()
	if err := execDirect(ctx, u, `ALTER TABLE `+q+`.approval_answers DROP CONSTRAINT approval_answers_method_check;
ALTER TABLE `+q+`.approval_answers ADD CONSTRAINT approval_answers_method_check CHECK (method IN ('cli', 'token', 'jwt', 'session', 'proxy'));
UPDATE `+q+`.latch_schema SET version = `+fmt.Sprint(slackVersion-1)+` WHERE id = 1`); err != nil {
		t.Fatalf("set the schema back to %d: %v", slackVersion-1, err)
	}
	// At 18 the check refuses a slack answer.
	err = execDirect(ctx, u, `INSERT INTO `+q+`.approval_answers (approval_id, n, approver, approver_key, method, verified, granted, answered_at, required)
VALUES ('apr_slack', 1, 'alice', 'alice', 'slack', true, true, 0, 1)`)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.ConstraintName != "approval_answers_method_check" {
		t.Fatalf("slack answer at schema %d = %v, want refused by approval_answers_method_check", slackVersion-1, err)
	}

	s, err := Open(ctx, u, nil) // migrates
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if v := schemaVersionOf(t, s); v != latestVersion() {
		t.Fatalf("schema version after migrating = %d, want %d", v, latestVersion())
	}
	if err := answer(s, "apr_slack", store.MethodSlack); err != nil {
		t.Fatalf("slack answer after migrating: %v", err)
	}
	for id, method := range map[string]string{"apr_proxy": store.MethodProxy, "apr_slack": store.MethodSlack} {
		a, err := s.Approval(ctx, id)
		if err != nil || a.Status != store.Granted || len(a.Answers) != 1 || a.Answers[0].Method != method || !a.Answers[0].Verified {
			t.Errorf("Approval(%s) after migrating = %+v, %v; want granted by one %s answer", id, a, err, method)
		}
	}
	rep, err := store.VerifyChain(ctx, s)
	if err != nil || !rep.OK || rep.Verified == 0 {
		t.Errorf("VerifyChain after migrating = %+v, %v; want it to verify", rep, err)
	}
}
