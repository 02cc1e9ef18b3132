package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/latchkit/latch/internal/safetext"
)

// Account is a local approver account: a person who logs in to the console of `latch serve`
// with a password and answers approval requests as Name. The password itself is never stored:
// PasswordHash is a bcrypt hash.
type Account struct {
	Name         string // the approver name answers are recorded as (NormalizeApprover)
	PasswordHash string // bcrypt
	// Roles are the policy roles the account is a member of, sorted, without duplicates. A
	// role counts only when the policy defines it (docs/approvals.md#who-may-approve).
	Roles     []string
	CreatedAt time.Time
}

// ErrAccountExists is returned when creating an account whose name, compared as SameName
// compares names, is taken.
var ErrAccountExists = errors.New("approver account exists")

// AccountStore is implemented by backends that keep the local approver accounts of the
// console. Names are looked up as SameName compares them: "Alice" and "alice" are one account.
type AccountStore interface {
	// CreateAccount inserts an account; ErrAccountExists when its name is taken.
	CreateAccount(ctx context.Context, a *Account) error
	// Account returns the account named name; ErrNotFound when there is none.
	Account(ctx context.Context, name string) (*Account, error)
	// Accounts returns every account, by name as names are compared.
	Accounts(ctx context.Context) ([]*Account, error)
	// RemoveAccount deletes the account named name in one write, and with it the console
	// sessions of the name (SessionStore); ErrNotFound when there is none.
	RemoveAccount(ctx context.Context, name string) (*Account, error)
}

// NameKey is the form under which a name is compared and looked up: SameName(a, b) is
// NameKey(a) == NameKey(b) for non-empty keys.
func NameKey(name string) string { return nameKey(name) }

// CheckAccount validates an account before it is stored: a valid approver name, already
// normalized; a password hash; roles that are valid names, sorted and distinct.
func CheckAccount(a *Account) error {
	if a == nil {
		return errors.New("account: none")
	}
	n, err := NormalizeApprover(a.Name)
	if err != nil {
		return fmt.Errorf("account: %w", err)
	}
	if n != a.Name {
		return fmt.Errorf("account: name %q is not normalized (want %q)", a.Name, n)
	}
	if a.PasswordHash == "" {
		return fmt.Errorf("account %s: no password hash", a.Name)
	}
	if a.CreatedAt.IsZero() {
		return fmt.Errorf("account %s: no creation time", a.Name)
	}
	for i, r := range a.Roles {
		if err := CheckRole(r); err != nil {
			return fmt.Errorf("account %s: %w", a.Name, err)
		}
		if i > 0 && a.Roles[i-1] >= r {
			return fmt.Errorf("account %s: roles are not sorted and distinct", a.Name)
		}
	}
	return nil
}

// CheckRole validates a role name as an account may carry it: 1 to 64 bytes of valid UTF-8
// with no white space, control or invisible format characters. Whether the policy defines the
// role is the policy's business: an account's role the policy does not define counts for
// nothing.
func CheckRole(r string) error {
	if r == "" || len(r) > 64 || !utf8.ValidString(r) {
		return fmt.Errorf("role %s: want 1 to 64 bytes of UTF-8", safetext.Quote(r))
	}
	for _, c := range r {
		if unicode.IsSpace(c) || unicode.IsControl(c) || unicode.Is(unicode.Cf, c) {
			return fmt.Errorf("role %s: holds white space, a control or an invisible character", safetext.Quote(r))
		}
	}
	return nil
}

// SortRoles returns roles sorted and without duplicates.
func SortRoles(roles []string) []string {
	out := slices.Clone(roles)
	slices.Sort(out)
	return slices.Compact(out)
}

// AccountRoles returns the members of each role that the accounts of s name, as role →
// account names (sorted). It is the store's half of a role's membership: the policy's
// approvers section lists the other half, and a role counts only when the policy defines it
// (docs/approvals.md#who-may-approve). A store that keeps no accounts has no members to add.
func AccountRoles(ctx context.Context, s Store) (map[string][]string, error) {
	as, ok := s.(AccountStore)
	if !ok {
		return map[string][]string{}, nil
	}
	list, err := as.Accounts(ctx)
	if err != nil {
		return nil, fmt.Errorf("account roles: %w", err)
	}
	out := map[string][]string{}
	for _, a := range list {
		for _, r := range a.Roles {
			out[r] = append(out[r], a.Name)
		}
	}
	for _, names := range out {
		slices.Sort(names)
	}
	return out, nil
}

// ApproverRoles returns the roles of the account of as named name (compared as SameName
// compares names); none when there is no such account. Backends give it as their RoleLookup.
func ApproverRoles(ctx context.Context, as AccountStore, name string) ([]string, error) {
	a, err := as.Account(ctx, name)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return a.Roles, nil
}
