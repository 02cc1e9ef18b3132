package postgres

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/jackc/pgx/v5"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

var _ store.RetentionStore = (*Store)(nil)

// retentionVersion is the schema that added holds and prunes (migration 10).
const retentionVersion = 10

func (s *Store) keepsRetention() error {
	if s.version < retentionVersion {
		return store.ErrNoRetention
	}
	return nil
}

// pgQuerier is a pool or a transaction.
type pgQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// dryRun rolls back a prune that only says what it would do.
type dryRun struct{ res *store.PruneResult }

func (dryRun) Error() string { return "dry run" }

// tbl qualifies a table with the store's schema.
func (s *Store) tbl(name string) string { return s.quoted() + "." + name }

// Prune removes the receipts below a signed checkpoint (store.RetentionStore), in one READ
// COMMITTED transaction that takes the chain head's lock first, as every appender does: appends
// wait for it, and it waits for the appends in flight, so it sees every row they wrote.
func (s *Store) Prune(ctx context.Context, req *store.PruneRequest) (*store.PruneResult, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if err := s.keepsRetention(); err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	w, err := s.write(ctx, "prune", func(ctx context.Context, t *txn) error {
		if err := t.lockHead(ctx); err != nil {
			return err
		}
		res, err := s.prune(ctx, t, req)
		switch {
		case err != nil:
			var he *store.HoldError
			var pe *store.PruneRefusedError
			if errors.As(err, &he) || errors.As(err, &pe) || errors.Is(err, store.ErrNoCheckpoint) || errors.Is(err, store.ErrNothingToPrune) {
				return refused{err}
			}
			return err
		case req.DryRun:
			return refused{dryRun{res}}
		}
		t.w.result = res
		return nil
	})
	var dr dryRun
	if errors.As(err, &dr) {
		return dr.res, nil
	}
	if err != nil {
		return nil, err
	}
	return w.result.(*store.PruneResult), nil
}

func (s *Store) prune(ctx context.Context, t *txn, req *store.PruneRequest) (*store.PruneResult, error) {
	prev, err := s.chainStart(ctx, t)
	if err != nil {
		return nil, err
	}
	cps, err := s.checkpointsIn(ctx, t)
	if err != nil {
		return nil, err
	}
	var id string
	if err := t.QueryRow(ctx, `SELECT store_id FROM `+s.tbl("store_identity")+` WHERE id = 1`).Scan(&id); err != nil {
		return nil, fmt.Errorf("prune: store id: %w", err)
	}
	holds, err := s.holdsIn(ctx, t)
	if err != nil {
		return nil, err
	}
	from, cp, err := store.PlanPrune(req, prev, cps, id, holds)
	if err != nil {
		return nil, err
	}
	carry := store.NewCarrier()
	defer carry.Close()
	for it, err := range s.carriedRows(ctx, t) {
		if err == nil {
			err = carry.Carry(it)
		}
		if err != nil {
			return nil, fmt.Errorf("prune: %w", err)
		}
	}
	if err := store.VerifyBelow(s.segment(ctx, t, from, cp.Seq), prev.Start(), cp, carry); err != nil {
		return nil, err
	}
	var cutAt int64
	if err := t.QueryRow(ctx, `SELECT finished_at FROM `+s.tbl("receipts")+` WHERE seq = $1`, cp.Seq).Scan(&cutAt); err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	res := &store.PruneResult{DryRun: req.DryRun}
	exec := func(what, q string, args ...any) (int64, error) {
		tag, err := t.Exec(ctx, q, args...)
		if err != nil {
			return 0, fmt.Errorf("prune: %s: %w", what, err)
		}
		return tag.RowsAffected(), nil
	}
	if req.KeepSettled > 0 {
		before, err := nanos(req.Now.Add(-req.KeepSettled))
		if err != nil {
			return nil, fmt.Errorf("prune: %w", err)
		}
		// An effect whose charge still counts against its budget stays, with its charge: a key
		// reserved again from nothing would start at attempt 1 beside the old row, and the
		// charge must go on counting until its window has passed.
		q := `DELETE FROM ` + s.tbl("effects") + ` e WHERE state IN ('committed', 'failed') AND conflict = ''
			AND updated_at < $1 AND NOT EXISTS (SELECT 1 FROM ` + s.tbl("receipts") + ` r WHERE r.effect_key = e.effect_key AND r.seq >= $2)`
		args := []any{before.Int64, cp.Seq}
		if s.version >= ledgerVersion {
			now, err := nanos(req.Now)
			if err != nil {
				return nil, fmt.Errorf("prune: %w", err)
			}
			q += ` AND NOT EXISTS (SELECT 1 FROM ` + s.tbl("budget_charges") + ` c WHERE c.effect_key = e.effect_key
				AND c.released_at IS NULL AND c.consumed_at > $3 - c.window_ns)`
			args = append(args, now.Int64)
		}
		if res.Effects, err = exec("effects", q, args...); err != nil {
			return nil, err
		}
		// A request key names its effect's reservation: with the effect gone, a replay under it
		// has nothing to be handed, and the key would be kept for ever.
		if s.version >= requestKeysVersion {
			if _, err := exec("request keys", `DELETE FROM `+s.tbl("request_keys")+` k WHERE updated_at < $1
				AND NOT EXISTS (SELECT 1 FROM `+s.tbl("effects")+` e WHERE e.effect_key = k.effect_key)`, before.Int64); err != nil {
				return nil, err
			}
		}
		if s.version >= ledgerVersion {
			if _, err := exec("budget charges", `DELETE FROM `+s.tbl("budget_charges")+` c WHERE NOT EXISTS
				(SELECT 1 FROM `+s.tbl("effects")+` e WHERE e.effect_key = c.effect_key)`); err != nil {
				return nil, err
			}
		}
	}
	settled := `status IN ('consumed', 'denied', 'expired')
		AND NOT EXISTS (SELECT 1 FROM ` + s.tbl("receipts") + ` r WHERE r.approval_id = a.approval_id AND r.seq >= $1)`
	if _, err := exec("approval answers", `DELETE FROM `+s.tbl("approval_answers")+` WHERE approval_id IN
		(SELECT approval_id FROM `+s.tbl("approvals")+` a WHERE `+settled+`)`, cp.Seq); err != nil {
		return nil, err
	}
	if res.Approvals, err = exec("approvals", `DELETE FROM `+s.tbl("approvals")+` a WHERE `+settled, cp.Seq); err != nil {
		return nil, err
	}
	// The newest event always stays, as it does in SQLite; so do the events of an effect a
	// person may still resolve: the resolution reads who made the attempt from them.
	if res.Events, err = exec("events", `DELETE FROM `+s.tbl("events")+` WHERE at < $1 AND id < (SELECT max(id) FROM `+s.tbl("events")+`)
		AND effect_key NOT IN (SELECT effect_key FROM `+s.tbl("effects")+` WHERE state IN ('executing', 'ambiguous') OR conflict <> '')
		AND approval_id NOT IN (SELECT approval_id FROM `+s.tbl("approvals")+` WHERE status IN ('pending', 'granted'))`, cutAt); err != nil {
		return nil, err
	}
	if res.Receipts, err = exec("receipts", `DELETE FROM `+s.tbl("receipts")+` WHERE seq < $1`, cp.Seq); err != nil {
		return nil, err
	}
	if _, err := exec("carried", `DELETE FROM `+s.tbl("carried")); err != nil {
		return nil, err
	}
	// In chunks, in kind and key order: the kept ones are hashed in that order.
	var kept store.CarriedHasher
	chunk := make([]store.Carried, 0, carryChunk)
	for it, err := range carry.Sorted() {
		if err != nil {
			return nil, fmt.Errorf("prune: %w", err)
		}
		if chunk = append(chunk, it); len(chunk) == carryChunk {
			if err := s.carry(ctx, t, chunk, &kept); err != nil {
				return nil, err
			}
			chunk = chunk[:0]
		}
	}
	if err := s.carry(ctx, t, chunk, &kept); err != nil {
		return nil, err
	}
	cs := store.PrunedStart(req, cp, res.Receipts, &kept)
	sealed, err := t.appendReceipt(ctx, store.PruneRecord(&cs))
	if err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	cs.RecordSeq = sealed.Seq
	signed, err := nanos(cp.SignedAt)
	if err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	at, err := nanos(req.Now)
	if err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	if _, err := exec("record", `INSERT INTO `+s.tbl("prunes")+` (id, start_seq, start_hash, cp_signed_at, cp_store_id, cp_key_id, cp_signature,
		pruned_at, pruned_by, record_seq, removed, carried, carried_hash)
		VALUES ((SELECT COALESCE(max(id), 0) + 1 FROM `+s.tbl("prunes")+`), $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		cs.Seq, cs.Hash, signed.Int64, cp.StoreID, cp.KeyID, cp.Signature, at.Int64, cs.By, cs.RecordSeq, cs.Removed, cs.Carried, cs.CarriedHash); err != nil {
		return nil, err
	}
	res.Start = cs
	return res, nil
}

// carryChunk is how many carried records one statement inserts.
const carryChunk = 1024

// carry inserts the records of chunk whose row is kept, and adds those to kept in chunk's order.
func (s *Store) carry(ctx context.Context, t pgx.Tx, chunk []store.Carried, kept *store.CarriedHasher) error {
	if len(chunk) == 0 {
		return nil
	}
	kinds, keys, seqs, docs := make([]string, len(chunk)), make([]string, len(chunk)), make([]int64, len(chunk)), make([][]byte, len(chunk))
	for i, it := range chunk {
		kinds[i], keys[i], seqs[i], docs[i] = it.Kind, it.Key, it.Seq, it.Doc
	}
	rows, err := t.Query(ctx, `INSERT INTO `+s.tbl("carried")+` (kind, key, seq, doc)
		SELECT k, ky, sq, d FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bytea[]) AS u(k, ky, sq, d)
		WHERE (k = 'effect' AND EXISTS (SELECT 1 FROM `+s.tbl("effects")+` WHERE effect_key = ky))
		   OR (k = 'approval' AND EXISTS (SELECT 1 FROM `+s.tbl("approvals")+` WHERE approval_id = ky))
		   OR (k = 'delegation' AND EXISTS (SELECT 1 FROM `+s.tbl("delegations")+` WHERE delegation_id = ky))
		   OR (k = 'hold' AND EXISTS (SELECT 1 FROM `+s.tbl("holds")+` WHERE hold_id = ky))
		RETURNING kind, key`, kinds, keys, seqs, docs)
	if err != nil {
		return fmt.Errorf("prune: carry: %w", err)
	}
	in := map[[2]string]bool{}
	for rows.Next() {
		var k [2]string
		if err := rows.Scan(&k[0], &k[1]); err != nil {
			rows.Close()
			return fmt.Errorf("prune: carry: %w", err)
		}
		in[k] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("prune: carry: %w", err)
	}
	for _, it := range chunk {
		if in[[2]string{it.Kind, it.Key}] {
			kept.Add(it)
		}
	}
	return nil
}

// segment yields the receipts from seq from to seq to, inclusive, in the transaction.
func (s *Store) segment(ctx context.Context, q pgQuerier, from, to int64) iter.Seq2[receipt.Sealed, error] {
	return eachIn(ctx, q, "receipts", `SELECT seq, hash, doc FROM `+s.tbl("receipts")+` WHERE seq >= $1 AND seq <= $2 ORDER BY seq`,
		[]any{from, to}, func(row pgx.Row, r *receipt.Sealed) error { return row.Scan(&r.Seq, &r.Hash, &r.Doc) })
}

// carriedRows yields what the last prune carried, by kind and key in byte order.
func (s *Store) carriedRows(ctx context.Context, q pgQuerier) iter.Seq2[store.Carried, error] {
	return eachIn(ctx, q, "carried", `SELECT kind, key, seq, doc FROM `+s.tbl("carried")+` ORDER BY kind COLLATE "C", key COLLATE "C"`,
		nil, func(row pgx.Row, it *store.Carried) error { return row.Scan(&it.Kind, &it.Key, &it.Seq, &it.Doc) })
}

func (s *Store) checkpointsIn(ctx context.Context, q pgQuerier) ([]*receipt.Checkpoint, error) {
	out, err := listIn(ctx, q, "checkpoints", `SELECT `+checkpointColumns+` FROM `+s.tbl("checkpoints"), nil, scanCheckpoint)
	if err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	return out, nil
}

func (s *Store) chainStart(ctx context.Context, q pgQuerier) (*store.ChainStart, error) {
	var c store.ChainStart
	var signed, at stamp
	err := q.QueryRow(ctx, `SELECT start_seq, start_hash, cp_signed_at, cp_store_id, cp_key_id, cp_signature, pruned_at, pruned_by,
		record_seq, removed, carried, carried_hash FROM `+s.tbl("prunes")+` ORDER BY id DESC LIMIT 1`).Scan(&c.Seq, &c.Hash, &signed,
		&c.Checkpoint.StoreID, &c.Checkpoint.KeyID, &c.Checkpoint.Signature, &at, &c.By, &c.RecordSeq, &c.Removed, &c.Carried, &c.CarriedHash)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("chain start: %w", err)
	}
	c.Checkpoint.Seq, c.Checkpoint.Hash, c.Checkpoint.SignedAt, c.PrunedAt = c.Seq, c.Hash, fromNanos(signed), fromNanos(at)
	return &c, nil
}

// ChainStart returns where the chain starts since its last prune; nil when never pruned.
func (s *Store) ChainStart(ctx context.Context) (*store.ChainStart, error) {
	if s.keepsRetention() != nil {
		return nil, nil
	}
	return s.chainStart(ctx, s.pool)
}

const holdColumns = `hold_id, from_seq, to_seq, reason, created_by, created_at, released_at, released_by, release_reason`

func scanHold(row pgx.Row) (*store.Hold, error) {
	var h store.Hold
	var created, released stamp
	if err := row.Scan(&h.ID, &h.From, &h.To, &h.Reason, &h.By, &created, &released, &h.ReleasedBy, &h.ReleaseReason); err != nil {
		return nil, err
	}
	h.CreatedAt, h.ReleasedAt = fromNanos(created), fromNanos(released)
	return &h, nil
}

func (s *Store) holdsIn(ctx context.Context, q pgQuerier) ([]*store.Hold, error) {
	return listIn(ctx, q, "holds", `SELECT `+holdColumns+` FROM `+s.tbl("holds")+` ORDER BY n`, nil, scanHold)
}

// Holds returns every hold, released ones included, in the order they were placed.
func (s *Store) Holds(ctx context.Context) ([]*store.Hold, error) {
	if s.keepsRetention() != nil {
		return nil, nil
	}
	return s.holdsIn(ctx, s.pool)
}

// PlaceHold stores a legal hold and its record in one transaction.
func (s *Store) PlaceHold(ctx context.Context, req *store.HoldRequest) (*store.Hold, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if err := s.keepsRetention(); err != nil {
		return nil, fmt.Errorf("hold: %w", err)
	}
	h := req.Hold()
	at, err := nanos(req.Now)
	if err != nil {
		return nil, fmt.Errorf("hold: %w", err)
	}
	op := fmt.Sprintf("hold %d to %d", req.From, req.To)
	_, err = s.write(ctx, op, func(ctx context.Context, t *txn) error {
		if err := t.lockHead(ctx); err != nil {
			return err
		}
		start, err := s.chainStart(ctx, t)
		if err != nil {
			return err
		}
		if err := store.CheckHoldable(h, start); err != nil {
			return refused{fmt.Errorf("%s: %w", op, err)}
		}
		args := []any{h.ID, h.From, h.To, h.Reason, h.By, at.Int64}
		if err := t.insert(ctx, "hold", `INSERT INTO `+s.tbl("holds")+` (hold_id, n, from_seq, to_seq, reason, created_by, created_at)
			VALUES ($1, (SELECT COALESCE(max(n), 0) + 1 FROM `+s.tbl("holds")+`), $2, $3, $4, $5, $6)`, args,
			presence{`SELECT count(*) FROM ` + s.tbl("holds") + ` WHERE hold_id = $1 AND from_seq = $2 AND to_seq = $3 AND reason = $4
				AND created_by = $5 AND created_at = $6`, args}); err != nil {
			return err
		}
		_, err = t.appendReceipt(ctx, store.HoldRecord(h, req.Now))
		return err
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// ReleaseHold releases an active hold and appends the release's record in one transaction.
func (s *Store) ReleaseHold(ctx context.Context, req *store.ReleaseRequest) (*store.Hold, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if err := s.keepsRetention(); err != nil {
		return nil, fmt.Errorf("release hold: %w", err)
	}
	at, err := nanos(req.Now)
	if err != nil {
		return nil, fmt.Errorf("release hold: %w", err)
	}
	op := "release hold " + req.ID
	w, err := s.write(ctx, op, func(ctx context.Context, t *txn) error {
		if err := t.lockHead(ctx); err != nil {
			return err
		}
		h, err := readForWrite(ctx, t, op, "hold", t.QueryRow(ctx, `SELECT `+holdColumns+` FROM `+s.tbl("holds")+` WHERE hold_id = $1 FOR UPDATE`, req.ID), scanHold)
		if err != nil {
			return err
		}
		if !h.Active() {
			return refused{fmt.Errorf("%s: %w (by %s on %s)", op, store.ErrHoldReleased, h.ReleasedBy, h.ReleasedAt.UTC().Format(receipt.TimeFormat))}
		}
		tag, err := t.Exec(ctx, `UPDATE `+s.tbl("holds")+` SET released_at = $1, released_by = $2, release_reason = $3
			WHERE hold_id = $4 AND released_at IS NULL`, at.Int64, req.By, req.Reason, req.ID)
		switch {
		case err != nil:
			return fmt.Errorf("release hold: %w", err)
		case tag.RowsAffected() != 1:
			return errConflict
		}
		h.ReleasedAt, h.ReleasedBy, h.ReleaseReason = req.Now, req.By, req.Reason
		if _, err := t.appendReceipt(ctx, store.HoldRecord(h, req.Now)); err != nil {
			return err
		}
		t.w.result = h
		return nil
	})
	if err != nil {
		return nil, err
	}
	return w.result.(*store.Hold), nil
}

// holdsFunc reads the holds in the evidence transaction.
func (s *Store) holdsFunc(ctx context.Context, q pgQuerier) func() ([]*store.Hold, error) {
	return func() ([]*store.Hold, error) { return s.holdsIn(ctx, q) }
}
