package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/latchkit/latch/store"
)

var _ store.AccountStore = (*Store)(nil)

// accountsVersion is the schema version that added approver accounts.
const accountsVersion = 9

const accountColumns = `name, password_hash, roles, created_at`

// CreateAccount inserts an approver account; ErrAccountExists when its name is taken.
func (s *Store) CreateAccount(ctx context.Context, a *store.Account) error {
	if err := store.CheckAccount(a); err != nil {
		return fmt.Errorf("create account: %w", err)
	}
	op := "create account " + a.Name
	roles := a.Roles
	if roles == nil {
		roles = []string{}
	}
	rj, err := json.Marshal(roles)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	created, err := nanos(a.CreatedAt)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	args := []any{a.Name, store.NameKey(a.Name), a.PasswordHash, string(rj), created}
	// The hash is a fresh salted bcrypt: equal rows are this call's own insert.
	present := presence{`SELECT count(*) FROM ` + s.quoted() + `.accounts WHERE name = $1 AND password_hash = $2`, []any{a.Name, a.PasswordHash}}
	_, err = s.write(ctx, op, func(ctx context.Context, t *txn) error {
		tag, err := t.Exec(ctx, `INSERT INTO `+s.quoted()+`.accounts (name, name_key, password_hash, roles, created_at)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`, args...)
		switch {
		case err != nil:
			return fmt.Errorf("insert account: %w", err)
		case tag.RowsAffected() == 1:
			t.w.inserted = append(t.w.inserted, present)
			return nil
		}
		if err := t.checkPending(ctx); err != nil {
			return err
		}
		return refused{fmt.Errorf("%s: %w", op, store.ErrAccountExists)}
	})
	return err
}

// Account returns the account whose name is name as names are compared.
func (s *Store) Account(ctx context.Context, name string) (*store.Account, error) {
	if s.version < accountsVersion {
		return nil, fmt.Errorf("account: %w", store.ErrNotFound)
	}
	a, err := scanAccount(s.pool.QueryRow(ctx, `SELECT `+accountColumns+` FROM `+s.quoted()+`.accounts WHERE name_key = $1`, store.NameKey(name)))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("account: %w", store.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("account: %w", err)
	}
	return a, nil
}

// Accounts returns every account, by name as names are compared.
func (s *Store) Accounts(ctx context.Context) ([]*store.Account, error) {
	if s.version < accountsVersion {
		return nil, nil
	}
	return list(ctx, s, "accounts", `SELECT `+accountColumns+` FROM `+s.quoted()+`.accounts ORDER BY name_key`, nil, scanAccount)
}

// RemoveAccount deletes an account and its console sessions in one write.
func (s *Store) RemoveAccount(ctx context.Context, name string) (*store.Account, error) {
	op := "remove account " + name
	w, err := s.write(ctx, op, func(ctx context.Context, t *txn) error {
		a, err := readForWrite(ctx, t, op, "account",
			t.QueryRow(ctx, `SELECT `+accountColumns+` FROM `+s.quoted()+`.accounts WHERE name_key = $1 FOR UPDATE`, store.NameKey(name)), scanAccount)
		if err != nil {
			return err
		}
		if _, err := t.Exec(ctx, `DELETE FROM `+s.quoted()+`.accounts WHERE name = $1`, a.Name); err != nil {
			return fmt.Errorf("delete account: %w", err)
		}
		// Its console sessions end in the same write: none outlives the account, nor answers for
		// an account later created under the same name.
		if _, err := t.Exec(ctx, `DELETE FROM `+s.quoted()+`.console_sessions WHERE name_key = $1`, store.NameKey(a.Name)); err != nil {
			return fmt.Errorf("delete sessions: %w", err)
		}
		// The row's absence proves a lost commit landed (a name taken again after it is
		// another account, and this delete's own outcome is what is asked).
		t.w.inserted = append(t.w.inserted, presence{`SELECT (NOT EXISTS (SELECT 1 FROM ` + s.quoted() + `.accounts WHERE name = $1 AND password_hash = $2))::int`, []any{a.Name, a.PasswordHash}})
		t.w.result = a
		return nil
	})
	if err != nil {
		return nil, err
	}
	return w.result.(*store.Account), nil
}

func scanAccount(row pgx.Row) (*store.Account, error) {
	var a store.Account
	var roles string
	var created int64
	if err := row.Scan(&a.Name, &a.PasswordHash, &roles, &created); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(roles), &a.Roles); err != nil {
		return nil, fmt.Errorf("account %s: roles: %w", a.Name, err)
	}
	a.CreatedAt = fromNanos(stamp{Int64: created, Valid: true})
	return &a, nil
}

// ApproverRoles returns the roles of the account named name (compared as SameName compares
// names); none when there is no such account.
func (s *Store) ApproverRoles(ctx context.Context, name string) ([]string, error) {
	return store.ApproverRoles(ctx, s, name)
}
