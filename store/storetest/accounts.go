package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latchkit/latch/store"
)

// testAccounts: approver accounts are found under any spelling of their name that SameName
// takes for it, a taken name is refused ErrAccountExists (even under racing creators, one of
// which wins), roles read back as written and feed AccountRoles, another handle reads them
// alike, and a removal is one write that leaves nothing behind.
func testAccounts(t *testing.T, b Backend) {
	f := newFixture(t, b)
	as, ok := f.st.(store.AccountStore)
	if !ok {
		t.Fatalf("backend %s does not keep approver accounts (store.AccountStore)", b.Name)
	}
	ctx := t.Context()
	alice := &store.Account{Name: "Alice", PasswordHash: "$2a$10$" + newID(""), Roles: []string{"payments-leads", "sre"}, CreatedAt: t0}
	bob := &store.Account{Name: "bob", PasswordHash: "$2a$10$" + newID(""), Roles: []string{"payments-leads"}, CreatedAt: t0.Add(time.Second)}
	carol := &store.Account{Name: "carol", PasswordHash: "$2a$10$" + newID(""), Roles: []string{}, CreatedAt: t0.Add(2 * time.Second)}
	for _, a := range []*store.Account{alice, bob, carol} {
		if err := as.CreateAccount(ctx, a); err != nil {
			t.Fatalf("CreateAccount(%s): %v", a.Name, err)
		}
	}
	for _, name := range []string{"Alice", "alice", " ALICE ", "ａｌｉｃｅ", "al\u200bice"} {
		got, err := as.Account(ctx, name)
		if err != nil || !cmp.Equal(got, alice) {
			t.Errorf("Account(%q) = %+v, %v; want %+v", name, got, err, alice)
		}
	}
	if _, err := as.Account(ctx, "dave"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Account(unknown) err = %v, want ErrNotFound", err)
	}
	// Bad input is refused before anything is written.
	for _, bad := range []*store.Account{
		{Name: " alice", PasswordHash: "x", CreatedAt: t0},
		{Name: "dave", CreatedAt: t0},
		{Name: "dave", PasswordHash: "x", Roles: []string{"b", "a"}, CreatedAt: t0},
		{Name: "dave", PasswordHash: "x", Roles: []string{"has space"}, CreatedAt: t0},
		{Name: "dave", PasswordHash: "x"},
	} {
		if err := as.CreateAccount(ctx, bad); err == nil || errors.Is(err, store.ErrAccountExists) {
			t.Errorf("CreateAccount(%+v) = %v, want a validation error", bad, err)
		}
	}
	if _, err := as.Account(ctx, "dave"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused account was written: Account(dave) err = %v", err)
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	created, exists := 0, 0
	for i := range 4 {
		wg.Go(func() {
			a := &store.Account{Name: []string{"dave", "Dave", "DAVE", "dave"}[i], PasswordHash: "$2a$10$" + newID(""), CreatedAt: t0}
			err := as.CreateAccount(ctx, a)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case errors.Is(err, store.ErrAccountExists):
				exists++
			default:
				t.Errorf("CreateAccount(%s): %v", a.Name, err)
			}
		})
	}
	wg.Wait()
	if created != 1 || exists != 3 {
		t.Errorf("4 racing creations of one name: %d created, %d refused ErrAccountExists; want 1 and 3", created, exists)
	}

	roles, err := store.AccountRoles(ctx, f.st)
	want := map[string][]string{"payments-leads": {"Alice", "bob"}, "sre": {"Alice"}}
	if err != nil || !cmp.Equal(roles, want) {
		t.Errorf("AccountRoles = %v, %v; want %v", roles, err, want)
	}

	rl, ok := f.st.(interface {
		ApproverRoles(ctx context.Context, name string) ([]string, error)
	})
	if !ok {
		t.Fatalf("backend %s does not give approvers' account roles (ApproverRoles)", b.Name)
	}
	if r, err := rl.ApproverRoles(ctx, "ALICE"); err != nil || !cmp.Equal(r, alice.Roles) {
		t.Errorf("ApproverRoles(ALICE) = %v, %v; want %v", r, err, alice.Roles)
	}
	if r, err := rl.ApproverRoles(ctx, "nobody"); err != nil || len(r) != 0 {
		t.Errorf("ApproverRoles(nobody) = %v, %v; want none", r, err)
	}

	wc, counted := f.st.(store.WriteCounter)
	var writes int64
	if counted {
		writes = wc.WriteTransactions()
	}
	got, err := as.RemoveAccount(ctx, "BOB")
	if err != nil || !cmp.Equal(got, bob) {
		t.Fatalf("RemoveAccount(BOB) = %+v, %v; want %+v", got, err, bob)
	}
	if counted && wc.WriteTransactions()-writes != 1 {
		t.Errorf("RemoveAccount committed %d write transactions, want 1", wc.WriteTransactions()-writes)
	}
	if _, err := as.RemoveAccount(ctx, "bob"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RemoveAccount again err = %v, want ErrNotFound", err)
	}

	as = openStore(t, b, f.url).(store.AccountStore) // another handle on the same store
	list, err := as.Accounts(ctx)
	if err != nil || len(list) != 3 {
		t.Fatalf("after reopen Accounts = %+v, %v; want Alice, carol and one dave", list, err)
	}
	if !cmp.Equal(list[0], alice) || !cmp.Equal(list[1], carol) || store.NameKey(list[2].Name) != "dave" {
		t.Errorf("after reopen Accounts = %+v %+v %+v; want Alice, carol, one dave, by name as compared", list[0], list[1], list[2])
	}
	if list[1].Roles == nil || len(list[1].Roles) != 0 {
		t.Errorf("carol's roles = %#v, want an empty list", list[1].Roles)
	}
}
