package postgres

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// A standing approval written and read through a transaction-mode pooler's exec mode
// (default_query_exec_mode=exec, unprepared statements) reads back as it was granted; and one
// that an earlier version wrote in that mode — its document stored as the text of its hex form,
// because a []byte argument was sent as bytea to the text column — is read too.
func TestStandingInExecMode(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := Open(ctx, newSchemaURL(t)+"&default_query_exec_mode=exec", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now().UTC().Truncate(time.Microsecond)
	a := &store.Approval{
		ID: "apr_" + randomHex(16), Status: store.Pending, ActionHash: "sha256:" + randomHex(32), ActionName: "billing.charge",
		Action: json.RawMessage(`{"arguments":{"amount":100,"invoice_id":"inv_0"},"name":"billing.charge"}`),
		Agent:  "agent:test", CreatedAt: now, ExpiresAt: now.Add(time.Hour),
	}
	if _, err := st.CreateApproval(ctx, &store.ApprovalRequest{Now: now, Approval: a}); err != nil {
		t.Fatal(err)
	}
	terms := store.StandingTerms{Uses: 3, For: store.Duration(time.Hour), Vary: []string{"invoice_id"}, Max: map[string]int64{"amount": 500}}
	id := store.StandingPrefix + randomHex(16)
	if _, err := st.AnswerApproval(ctx, &store.AnswerRequest{Now: now, ID: a.ID, Grant: true, Approver: "user:bob",
		Standing: &terms, StandingID: id}); err != nil {
		t.Fatalf("AnswerApproval with standing terms = %v", err)
	}
	s, err := st.Standing(ctx, id)
	if err != nil || s.ID != id || s.Status != store.StandingActive || s.Uses != 0 {
		t.Fatalf("Standing(%s) = %+v, %v, want it active with no use", id, s, err)
	}

	// As an earlier version stored it in this mode.
	old := *s
	old.ID = store.StandingPrefix + randomHex(16)
	raw, err := json.Marshal(&old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.pool.Exec(ctx, `INSERT INTO `+st.quoted()+`.standing_approvals (standing_id, status, uses, created_at, doc)
		VALUES ($1, $2, 0, $3, $4::text)`, old.ID, string(old.Status), now.UnixNano(), `\x`+hex.EncodeToString(raw)); err != nil {
		t.Fatal(err)
	}
	got, err := st.Standing(ctx, old.ID)
	if err != nil || fmt.Sprint(*got) != fmt.Sprint(old) {
		t.Fatalf("Standing(%s) of a document stored as hex text = %+v, %v, want %+v", old.ID, got, err, old)
	}
}
