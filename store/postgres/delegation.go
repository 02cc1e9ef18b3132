package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latchkit/latch/store"
)

var _ store.DelegationStore = (*Store)(nil)

// delegationsVersion is the schema version that added delegations.
const delegationsVersion = 2

// viaVersion is the schema version that added delegations.via and reason.
var viaVersion = func() int {
	for _, m := range migrations {
		if strings.HasSuffix(m.Name, "_delegation_via.sql") {
			return m.Version
		}
	}
	panic("postgres: no delegation_via migration")
}()

// CreateDelegation inserts a delegation and its events in one transaction. Delegations are
// insert-only: an existing id is an error.
func (s *Store) CreateDelegation(ctx context.Context, d *store.Delegation, events []store.Event) error {
	if err := store.CheckDelegation(d, events); err != nil {
		return fmt.Errorf("create delegation: %w", err)
	}
	if d == nil || d.ID == "" || d.Parent == "" {
		return errors.New("create delegation: no id or parent")
	}
	created, err := nanos(d.CreatedAt)
	if err != nil || !created.Valid {
		return fmt.Errorf("create delegation %s: created_at: %v", d.ID, errors.Join(err, errors.New("time required")))
	}
	grant := d.Grant
	if grant == nil {
		grant = []byte{}
	}
	args := []any{d.ID, d.Parent, grant, d.CreatedBy, created.Int64, d.Via, d.Reason}
	w, err := s.write(ctx, "create delegation "+d.ID, func(ctx context.Context, t *txn) error {
		if err := t.lockHead(ctx); err != nil { // it appends a record: the head first (the lock order)
			return err
		}
		if err := t.insert(ctx, "delegation "+d.ID, s.q.insertDelegation, args, presence{s.q.delegationPresent, args}); err != nil {
			return err
		}
		if _, err := t.insertEvents(ctx, events, d.CreatedAt); err != nil {
			return err
		}
		_, err := t.appendReceipt(ctx, store.DelegationRecord(d))
		return err
	})
	if err != nil {
		return err
	}
	written(events, w.events, d.CreatedAt)
	return nil
}

// written sets the ids the store gave events (the witness's, in order) and now as the time of
// those that had none: a caller hands the events to sinks as they were written.
func written(events []store.Event, ids []int64, now time.Time) {
	for i := range events {
		if i < len(ids) {
			events[i].ID = ids[i]
		}
		if events[i].Time.IsZero() {
			events[i].Time = now
		}
	}
}

// RevokeDelegation records the revocation of one delegation: store.ErrNotFound when there is no
// such delegation, store.ErrRevoked when it is already revoked.
func (s *Store) RevokeDelegation(ctx context.Context, req *store.RevokeRequest) (*store.Delegation, error) {
	if err := req.Check(); err != nil {
		return nil, fmt.Errorf("revoke delegation: %w", err)
	}
	op := "revoke " + req.ID
	w, err := s.write(ctx, op, func(ctx context.Context, t *txn) error {
		if err := t.lockHead(ctx); err != nil { // it appends a record: the head first (the lock order)
			return err
		}
		d, err := readForWrite(ctx, t, op, "delegation", t.QueryRow(ctx, s.q.readDelegation, req.ID), scanDelegation)
		if err != nil {
			return err
		}
		if !d.RevokedAt.IsZero() {
			return refused{fmt.Errorf("%s: %w (by %s)", op, store.ErrRevoked, d.RevokedBy)}
		}
		if err := store.CheckApprover(req.By); err != nil {
			return refused{fmt.Errorf("%s: revoker: %w", op, err)}
		}
		at, err := nanos(req.Now)
		if err != nil || !at.Valid {
			return refused{fmt.Errorf("%s: time: %v", op, errors.Join(err, errors.New("time required")))}
		}
		args := []any{req.ID, req.By, at.Int64}
		tag, err := t.Exec(ctx, s.q.insertRevocation, args...)
		switch {
		case err != nil:
			return fmt.Errorf("insert revocation: %w", err)
		case tag.RowsAffected() != 1:
			return errConflict // revoked meanwhile: read again
		}
		t.w.inserted = append(t.w.inserted, presence{s.q.revocationPresent, args})
		if _, err := t.insertEvents(ctx, req.Events, req.Now); err != nil {
			return err
		}
		d.RevokedAt, d.RevokedBy = req.Now, req.By
		if _, err := t.appendReceipt(ctx, store.RevocationRecord(d, req.Now)); err != nil {
			return err
		}
		t.w.result = d
		return nil
	})
	if err != nil {
		return nil, err
	}
	written(req.Events, w.events, req.Now)
	return w.result.(*store.Delegation), nil
}

// Delegations returns every delegation, revoked ones included, in creation order. A schema
// older than delegations (a reader upgraded before the writers) holds none.
func (s *Store) Delegations(ctx context.Context) ([]*store.Delegation, error) {
	if s.version < delegationsVersion {
		return nil, nil
	}
	return list(ctx, s, "delegations", s.q.listDelegations, nil, scanDelegation)
}

// LogEvents writes events that change no state (a refused delegation) in one transaction.
func (s *Store) LogEvents(ctx context.Context, events []store.Event) error {
	if err := store.CheckEvents(events); err != nil {
		return fmt.Errorf("log events: %w", err)
	}
	if len(events) == 0 {
		return nil
	}
	w, err := s.write(ctx, "log events", func(ctx context.Context, t *txn) error {
		_, err := t.insertEvents(ctx, events, events[0].Time)
		return err
	})
	if err != nil {
		return err
	}
	written(events, w.events, events[0].Time)
	return nil
}

func scanDelegation(row pgx.Row) (*store.Delegation, error) {
	var d store.Delegation
	var created int64
	var revoked stamp
	if err := row.Scan(&d.ID, &d.Parent, &d.Grant, &d.CreatedBy, &created, &revoked, &d.RevokedBy, &d.Via, &d.Reason); err != nil {
		return nil, err
	}
	d.CreatedAt = fromNanos(stamp{Int64: created, Valid: true})
	d.RevokedAt = fromNanos(revoked)
	return &d, nil
}
