package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// testDelegations: delegations are insert-only, listed in creation order with their revocation;
// a revocation is one write, refused for an unknown or already revoked delegation.
func testDelegations(t *testing.T, b Backend) {
	f := newFixture(t, b)
	ds, ok := f.st.(store.DelegationStore)
	if !ok {
		t.Fatalf("backend %s does not keep delegations (store.DelegationStore)", b.Name)
	}
	ctx := t.Context()
	grant := []byte("subject: { agent: finance-bot }\nactions: [payments.refund]\nexpires_at: 2026-12-01T00:00:00Z\n")
	parent := &store.Delegation{ID: newID("dlg_"), Parent: "alice-payments", Grant: grant, CreatedBy: "alice", CreatedAt: t0}
	child := &store.Delegation{ID: newID("dlg_"), Parent: parent.ID, Grant: grant, CreatedBy: "finance-bot", CreatedAt: t0.Add(time.Second)}
	created := []store.Event{{Kind: store.EventDelegationCreated, Time: t0, Payload: []byte(`{"parent":"alice-payments"}`)}}
	if err := ds.CreateDelegation(ctx, parent, created); err != nil {
		t.Fatalf("CreateDelegation: %v", err)
	}
	if err := ds.CreateDelegation(ctx, child, nil); err != nil {
		t.Fatalf("CreateDelegation(child): %v", err)
	}
	if err := ds.CreateDelegation(ctx, parent, nil); err == nil {
		t.Errorf("CreateDelegation with an existing id succeeded: delegations are insert-only")
	}
	list, err := ds.Delegations(ctx)
	if err != nil {
		t.Fatalf("Delegations: %v", err)
	}
	if len(list) != 2 || list[0].ID != parent.ID || list[1].ID != child.ID || string(list[0].Grant) != string(grant) ||
		list[1].Parent != parent.ID || !list[0].CreatedAt.Equal(t0) || list[0].CreatedBy != "alice" || !list[0].RevokedAt.IsZero() {
		t.Fatalf("Delegations = %+v", list)
	}
	if evs := f.events(store.EventFilter{}); len(evs) != 1 || evs[0].Kind != store.EventDelegationCreated {
		t.Errorf("events = %v, want the delegation_created event written with it", kinds(evs))
	} else if created[0].ID != evs[0].ID {
		t.Errorf("CreateDelegation left the event's id %d, the store gave it %d (a sink gets it as written)", created[0].ID, evs[0].ID)
	}

	at := t0.Add(time.Minute)
	revoked := []store.Event{{Kind: store.EventDelegationRevoked}}
	d, err := ds.RevokeDelegation(ctx, &store.RevokeRequest{Now: at, ID: parent.ID, By: "cli:alice", Events: revoked})
	if err != nil || d.RevokedBy != "cli:alice" || !d.RevokedAt.Equal(at) {
		t.Fatalf("RevokeDelegation = %+v, %v", d, err)
	}
	logged := []store.Event{{Kind: store.EventDelegationRejected, Time: at}}
	if err := ds.LogEvents(ctx, logged); err != nil {
		t.Fatalf("LogEvents: %v", err)
	}
	if _, err := ds.RevokeDelegation(ctx, &store.RevokeRequest{Now: at, ID: parent.ID, By: "cli:alice"}); !errors.Is(err, store.ErrRevoked) {
		t.Errorf("second revocation err = %v, want ErrRevoked", err)
	}
	if _, err := ds.RevokeDelegation(ctx, &store.RevokeRequest{Now: at, ID: "dlg_missing", By: "cli:alice"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("revoking an unknown delegation err = %v, want ErrNotFound", err)
	}
	list, _ = ds.Delegations(ctx)
	if len(list) != 2 || !list[0].RevokedAt.Equal(at) || list[0].RevokedBy != "cli:alice" || !list[1].RevokedAt.IsZero() {
		t.Errorf("after revocation Delegations = %+v: only the revoked one carries the revocation", list)
	}
	evs := f.events(store.EventFilter{})
	if len(evs) != 3 || evs[1].Kind != store.EventDelegationRevoked || evs[2].Kind != store.EventDelegationRejected {
		t.Fatalf("events = %v, want delegation_revoked, then the logged delegation_rejected", kinds(evs))
	}
	if revoked[0].ID != evs[1].ID || !revoked[0].Time.Equal(at) || logged[0].ID != evs[2].ID {
		t.Errorf("events as the caller holds them: revoked id %d at %s, logged id %d; the store holds ids %d at %s and %d",
			revoked[0].ID, revoked[0].Time, logged[0].ID, evs[1].ID, evs[1].Time, evs[2].ID)
	}

	// A break-glass grant keeps how it came to be and why; a delegation reads via and reason "".
	opened := &store.Delegation{ID: newID("dlg_"), Parent: "incident", Grant: grant, CreatedBy: "session:carol",
		CreatedAt: at, Via: store.ViaBreakGlass, Reason: "INC-42: refunds stuck"}
	if err := ds.CreateDelegation(ctx, opened, nil); err != nil {
		t.Fatalf("CreateDelegation(break-glass): %v", err)
	}
	list, _ = ds.Delegations(ctx)
	if len(list) != 3 || list[0].Via != "" || list[0].Reason != "" || list[2].ID != opened.ID ||
		list[2].Via != store.ViaBreakGlass || list[2].Reason != opened.Reason || list[2].CreatedBy != "session:carol" {
		t.Errorf("Delegations = %+v, want the break-glass grant last with its via and reason, the others with none", list)
	}
	if d, err := ds.RevokeDelegation(ctx, &store.RevokeRequest{Now: at, ID: opened.ID, By: "cli:alice"}); err != nil ||
		d.Via != store.ViaBreakGlass || d.Reason != opened.Reason {
		t.Errorf("RevokeDelegation(break-glass) = %+v, %v, want it with its via and reason", d, err)
	}
}
