package sqlite

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// slackVersion is the schema that widened the answers' method check to slack.
const slackVersion = 20

// TestSlackMethodMigration: a store an older binary left at schema 19, with answers recorded
// (one as proxy), refuses an answer of method slack by its check; migrated forward, its answers
// read back as they were, its chain verifies, and a slack answer is stored and read back.
func TestSlackMethodMigration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := "sqlite:" + filepath.Join(t.TempDir(), "state.db")
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

	old := openAtVersion(t, url, slackVersion-1)
	ask(old, "apr_proxy")
	ask(old, "apr_slack")
	if err := answer(old, "apr_proxy", store.MethodProxy); err != nil {
		t.Fatalf("proxy answer at schema %d: %v", slackVersion-1, err)
	}
	if err := answer(old, "apr_slack", store.MethodSlack); err == nil || errors.Is(err, store.ErrInvalidInput) {
		t.Fatalf("slack answer at schema %d = %v, want refused by the table's check", slackVersion-1, err)
	}
	old.Close()

	s, err := Open(ctx, url, nil) // migrates
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if v, err := schemaVersion(ctx, s.r); err != nil || v != latestVersion() || v < slackVersion {
		t.Fatalf("schema version after migrating = %d, %v; want %d (at least %d)", v, err, latestVersion(), slackVersion)
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
