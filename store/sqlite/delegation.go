package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/latchkit/latch/store"
)

var _ store.DelegationStore = (*Store)(nil)

// CreateDelegation inserts a delegation and its events in one transaction.
func (s *Store) CreateDelegation(ctx context.Context, d *store.Delegation, events []store.Event) error {
	if err := store.CheckDelegation(d, events); err != nil {
		return fmt.Errorf("create delegation: %w", err)
	}
	if d == nil || d.ID == "" || d.Parent == "" {
		return errors.New("create delegation: no id or parent")
	}
	err := s.write(ctx, func(t *txn) error {
		var b binder
		at := b.time(d.CreatedAt)
		if b.err != nil {
			return b.err
		}
		if _, err := t.c.exec(`INSERT INTO delegations (delegation_id, parent, grant_doc, created_by, created_at, via, reason, seq)
			VALUES (?, ?, ?, ?, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM delegations))`,
			d.ID, d.Parent, string(d.Grant), d.CreatedBy, at, d.Via, d.Reason); err != nil {
			return err
		}
		w, err := t.insertEvents(events, d.CreatedAt, nil)
		if err != nil {
			return err
		}
		copy(events, w)
		_, err = t.appendReceipt(store.DelegationRecord(d))
		return err
	})
	if err != nil {
		return fmt.Errorf("create delegation %s: %w", d.ID, err)
	}
	return nil
}

// RevokeDelegation inserts the revocation of one delegation.
func (s *Store) RevokeDelegation(ctx context.Context, req *store.RevokeRequest) (*store.Delegation, error) {
	if err := req.Check(); err != nil {
		return nil, fmt.Errorf("revoke delegation: %w", err)
	}
	var out *store.Delegation
	err := s.write(ctx, func(t *txn) error {
		d, err := readRow(t, s.delegationQuery()+` WHERE d.delegation_id = ?`, []any{req.ID}, scanDelegation)
		switch {
		case err != nil:
			return err
		case !d.RevokedAt.IsZero():
			return fmt.Errorf("%w (by %s)", store.ErrRevoked, d.RevokedBy)
		}
		if err := store.CheckApprover(req.By); err != nil {
			return fmt.Errorf("revoker: %w", err)
		}
		var b binder
		at := b.time(req.Now)
		if b.err != nil {
			return b.err
		}
		if _, err := t.c.exec(`INSERT INTO revocations (delegation_id, revoked_by, revoked_at) VALUES (?, ?, ?)`, req.ID, req.By, at); err != nil {
			return err
		}
		d.RevokedAt, d.RevokedBy = req.Now, req.By
		out = d
		w, err := t.insertEvents(req.Events, req.Now, nil)
		if err != nil {
			return err
		}
		copy(req.Events, w)
		_, err = t.appendReceipt(store.RevocationRecord(d, req.Now))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("revoke %s: %w", req.ID, err)
	}
	return out, nil
}

// Delegations returns every delegation, revoked ones included, in creation order.
func (s *Store) Delegations(ctx context.Context) ([]*store.Delegation, error) {
	if s.readOnly && s.version < 2 {
		return nil, nil // a reader of a schema from before delegations existed: there are none
	}
	out, err := collect(ctx, s.r, s.delegationQuery()+` ORDER BY d.seq`, nil, scanDelegation)
	if err != nil {
		return nil, fmt.Errorf("list delegations: %w", err)
	}
	return out, nil
}

// delegationQuery reads delegations with their revocation, if any. A reader of a schema older
// than viaVersion reads empty strings for via and reason: every row then was a delegation.
func (s *Store) delegationQuery() string {
	cols := `d.via, d.reason`
	if s.readOnly && s.version < viaVersion {
		cols = `'', ''`
	}
	return `SELECT d.delegation_id, d.parent, d.grant_doc, d.created_by, d.created_at, r.revoked_at, COALESCE(r.revoked_by, ''), ` + cols + `
	FROM delegations d LEFT JOIN revocations r ON r.delegation_id = d.delegation_id`
}

// viaVersion is the schema version that added delegations.via and reason.
var viaVersion = func() int {
	for _, m := range migrations {
		if strings.HasSuffix(m.Name, "_delegation_via.sql") {
			return m.Version
		}
	}
	panic("sqlite: no delegation_via migration")
}()

func scanDelegation(sc scanner) (*store.Delegation, error) {
	var d store.Delegation
	var grant string
	var created, revoked sql.NullInt64
	if err := sc.Scan(&d.ID, &d.Parent, &grant, &d.CreatedBy, &created, &revoked, &d.RevokedBy, &d.Via, &d.Reason); err != nil {
		return nil, err
	}
	d.Grant = []byte(grant)
	d.CreatedAt = fromNanos(created)
	d.RevokedAt = fromNanos(revoked)
	return &d, nil
}

// LogEvents writes events that change no state in one transaction.
func (s *Store) LogEvents(ctx context.Context, events []store.Event) error {
	if err := store.CheckEvents(events); err != nil {
		return fmt.Errorf("log events: %w", err)
	}
	if len(events) == 0 {
		return nil
	}
	if err := s.write(ctx, func(t *txn) error {
		w, err := t.insertEvents(events, events[0].Time, nil)
		copy(events, w)
		return err
	}); err != nil {
		return fmt.Errorf("log events: %w", err)
	}
	return nil
}
