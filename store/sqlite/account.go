package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/latchkit/latch/store"
)

var _ store.AccountStore = (*Store)(nil)

// accountsVersion is the schema version that added approver accounts.
const accountsVersion = 10

const accountColumns = `name, password_hash, roles, created_at`

// CreateAccount inserts an approver account; ErrAccountExists when its name is taken.
func (s *Store) CreateAccount(ctx context.Context, a *store.Account) error {
	if err := store.CheckAccount(a); err != nil {
		return fmt.Errorf("create account: %w", err)
	}
	roles, err := rolesJSON(a.Roles)
	if err != nil {
		return fmt.Errorf("create account %s: %w", a.Name, err)
	}
	var b binder
	created := b.time(a.CreatedAt)
	if b.err != nil {
		return fmt.Errorf("create account %s: %w", a.Name, b.err)
	}
	err = s.write(ctx, func(t *txn) error {
		n, err := t.c.exec(`INSERT INTO accounts (name, name_key, password_hash, roles, created_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT DO NOTHING`, a.Name, store.NameKey(a.Name), a.PasswordHash, roles, created)
		if err != nil {
			return err
		}
		if n != 1 {
			return store.ErrAccountExists
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create account %s: %w", a.Name, err)
	}
	return nil
}

// Account returns the account whose name is name as names are compared.
func (s *Store) Account(ctx context.Context, name string) (*store.Account, error) {
	if s.readOnly && s.version < accountsVersion {
		return nil, fmt.Errorf("account: %w", store.ErrNotFound)
	}
	a, err := collectOne(ctx, s.r, `SELECT `+accountColumns+` FROM accounts WHERE name_key = ?`, []any{store.NameKey(name)}, scanAccount)
	if err != nil {
		return nil, fmt.Errorf("account: %w", err)
	}
	return a, nil
}

// Accounts returns every account, by name as names are compared.
func (s *Store) Accounts(ctx context.Context) ([]*store.Account, error) {
	if s.readOnly && s.version < accountsVersion {
		return nil, nil
	}
	out, err := collect(ctx, s.r, `SELECT `+accountColumns+` FROM accounts ORDER BY name_key`, nil, scanAccount)
	if err != nil {
		return nil, fmt.Errorf("list accounts: %w", err)
	}
	return out, nil
}

// RemoveAccount deletes an account and its console sessions in one write.
func (s *Store) RemoveAccount(ctx context.Context, name string) (*store.Account, error) {
	var out *store.Account
	err := s.write(ctx, func(t *txn) error {
		var err error
		if out, err = readRow(t, `SELECT `+accountColumns+` FROM accounts WHERE name_key = ?`, []any{store.NameKey(name)}, scanAccount); err != nil {
			return err
		}
		if _, err = t.c.exec(`DELETE FROM accounts WHERE name = ?`, out.Name); err != nil {
			return err
		}
		// Its console sessions end in the same write: none outlives the account, nor answers for
		// an account later created under the same name.
		_, err = t.c.exec(`DELETE FROM console_sessions WHERE name_key = ?`, store.NameKey(out.Name))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("remove account %s: %w", name, err)
	}
	return out, nil
}

func rolesJSON(roles []string) (string, error) {
	if roles == nil {
		roles = []string{}
	}
	b, err := json.Marshal(roles)
	return string(b), err
}

func scanAccount(sc scanner) (*store.Account, error) {
	var a store.Account
	var roles string
	var created sql.NullInt64
	if err := sc.Scan(&a.Name, &a.PasswordHash, &roles, &created); err != nil {
		return nil, err
	}
	if err := json.NewDecoder(strings.NewReader(roles)).Decode(&a.Roles); err != nil {
		return nil, fmt.Errorf("account %s: roles: %w", a.Name, err)
	}
	a.CreatedAt = fromNanos(created)
	return &a, nil
}

// ApproverRoles returns the roles of the account named name (compared as SameName compares
// names); none when there is no such account.
func (s *Store) ApproverRoles(ctx context.Context, name string) ([]string, error) {
	return store.ApproverRoles(ctx, s, name)
}
