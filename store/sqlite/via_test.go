package sqlite

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// TestDelegationViaMigration: a delegation an older binary stored, before delegations had via
// and reason, reads as a delegation (via and reason "") by a reader still at that schema and
// after the store is migrated; a break-glass grant stored after keeps both.
func TestDelegationViaMigration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "state.db")
	url := "sqlite:" + path
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	openAtVersion(t, url, viaVersion-1).Close()
	d := &store.Delegation{ID: "dlg_00000000000000000000000000000001", Parent: "alice-payments",
		Grant: []byte("subject: {agent: bot}\nactions: [a.b]\n"), CreatedBy: "alice", CreatedAt: at}
	db := rawDB(t, path)
	if _, err := db.ExecContext(ctx, `INSERT INTO delegations (delegation_id, parent, grant_doc, created_by, created_at, seq) VALUES (?, ?, ?, ?, ?, 1)`,
		d.ID, d.Parent, string(d.Grant), d.CreatedBy, at.UnixNano()); err != nil {
		t.Fatalf("insert at schema %d: %v", viaVersion-1, err)
	}
	db.Close()

	r, err := Open(ctx, url, &Config{ReadOnly: true})
	if err != nil {
		t.Fatalf("open read-only at schema %d: %v", viaVersion-1, err)
	}
	list, err := r.Delegations(ctx)
	r.Close()
	if err != nil || len(list) != 1 || list[0].ID != d.ID || list[0].Via != "" || list[0].Reason != "" {
		t.Fatalf("Delegations of a reader at schema %d = %+v, %v; want the delegation with no via or reason", viaVersion-1, list, err)
	}

	s, err := Open(ctx, url, nil) // migrates
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	bg := &store.Delegation{ID: "dlg_00000000000000000000000000000002", Parent: "incident", Grant: d.Grant,
		CreatedBy: "session:carol", CreatedAt: at, Via: store.ViaBreakGlass, Reason: "INC-42"}
	if err := s.CreateDelegation(ctx, bg, nil); err != nil {
		t.Fatalf("CreateDelegation: %v", err)
	}
	list, err = s.Delegations(ctx)
	if err != nil || len(list) != 2 || list[0].Via != "" || list[0].Reason != "" || list[1].Via != store.ViaBreakGlass || list[1].Reason != "INC-42" {
		t.Fatalf("Delegations after migrating = %+v, %v", list, err)
	}
}
