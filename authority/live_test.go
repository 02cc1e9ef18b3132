package authority_test

import (
	"errors"
	"testing"
	"time"

	"github.com/latchkit/latch/authority"
	"github.com/latchkit/latch/policy"
)

// TestLive: a grant is live exactly when its chain would let it decide a call — a revoked or
// expired link, a parent that no longer contains it, or an expired policy grant at the top
// makes it, and everything beneath it, dead; an unreadable row elsewhere does not.
func TestLive(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	later := now.Add(time.Hour)
	a := &policy.Authority{MaxDelegationDepth: 3, Grants: []*policy.Grant{
		{ID: "root", Subject: policy.Subject{Agent: "ops"}, Actions: []string{"billing.*"}, ExpiresAt: later, Delegable: true},
		{ID: "old", Subject: policy.Subject{Agent: "ops"}, Actions: []string{"billing.*"}, ExpiresAt: now.Add(-time.Hour)},
	}}
	child := func(id, parent string, revoked bool, actions ...string) authority.Delegation {
		return authority.Delegation{ID: id, Parent: parent, Revoked: revoked,
			Grant: policy.Grant{Subject: policy.Subject{Agent: "ops"}, Actions: actions, ExpiresAt: later, Delegable: true}}
	}
	ds := []authority.Delegation{
		child("dlg_a", "root", false, "billing.charge"),
		child("dlg_b", "dlg_a", false, "billing.charge"),
		child("dlg_cut", "dlg_a", true, "billing.charge"),
		child("dlg_under_cut", "dlg_cut", false, "billing.charge"),
		child("dlg_wide", "dlg_a", false, "billing.*"),
		{ID: "dlg_broken", Parent: "root", Err: errors.New("unreadable")},
	}
	for id, want := range map[string]string{
		"root": "", "dlg_a": "", "dlg_b": "",
		"old":           authority.ReasonExpired,
		"dlg_cut":       authority.ReasonRevoked,
		"dlg_under_cut": authority.ReasonRevoked,
		"dlg_wide":      authority.ReasonEscalation,
		"dlg_broken":    authority.ReasonUnreadable,
		"dlg_none":      authority.ReasonNoAuthority,
	} {
		err := authority.Live(a, ds, id, now)
		var ae *authority.Error
		switch {
		case want == "" && err != nil:
			t.Errorf("Live(%s) = %v, want live", id, err)
		case want != "" && (!errors.As(err, &ae) || ae.Reason != want):
			t.Errorf("Live(%s) = %v, want %s", id, err, want)
		}
	}
}
