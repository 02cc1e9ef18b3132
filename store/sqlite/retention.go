package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

var _ store.RetentionStore = (*Store)(nil)

// retentionVersion is the schema that added holds and prunes (migration 11).
const retentionVersion = 11

func (s *Store) keepsRetention() error {
	if s.version != 0 && s.version < retentionVersion {
		return store.ErrNoRetention
	}
	return nil
}

// dryRun rolls back a prune that only says what it would do.
type dryRun struct{ res *store.PruneResult }

func (dryRun) Error() string { return "dry run" }

// Prune removes the receipts below a signed checkpoint (store.RetentionStore). It runs as one
// write request: under the write lock, all or nothing, with the calls queued meanwhile waiting
// for it.
func (s *Store) Prune(ctx context.Context, req *store.PruneRequest) (*store.PruneResult, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	if err := s.keepsRetention(); err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	var res *store.PruneResult
	err := s.write(ctx, func(t *txn) error {
		r, err := t.prune(req)
		if err != nil {
			return err
		}
		if req.DryRun {
			return dryRun{r}
		}
		res = r
		return nil
	})
	var dr dryRun
	if errors.As(err, &dr) {
		return dr.res, nil
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (t *txn) prune(req *store.PruneRequest) (*store.PruneResult, error) {
	prev, err := t.chainStart()
	if err != nil {
		return nil, err
	}
	var cps []*receipt.Checkpoint
	err = t.c.query(checkpointQuery, nil, func(sc scanner) error {
		c, err := scanCheckpoint(sc)
		if err == nil {
			cps = append(cps, c)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("prune: checkpoints: %w", err)
	}
	var id string
	if _, err := t.c.queryRow(`SELECT store_id FROM store_identity WHERE id = 1`, nil, func(sc scanner) error { return sc.Scan(&id) }); err != nil {
		return nil, fmt.Errorf("prune: store id: %w", err)
	}
	holds, err := t.holds()
	if err != nil {
		return nil, err
	}
	from, cp, err := store.PlanPrune(req, prev, cps, id, holds)
	if err != nil {
		return nil, err
	}
	// The part to remove must verify, up to the checkpoint's own receipt; what it says of kept
	// rows is gathered on the way, with what the last prune carried.
	carry := store.NewCarrier()
	defer carry.Close()
	err = t.c.query(`SELECT kind, key, seq, doc FROM carried`, nil, func(sc scanner) error {
		var it store.Carried
		if err := scanCarried(sc, &it); err != nil {
			return err
		}
		return carry.Carry(it)
	})
	if err != nil {
		return nil, fmt.Errorf("prune: carried: %w", err)
	}
	if err := store.VerifyBelow(t.segment(from, cp.Seq), prev.Start(), cp, carry); err != nil {
		return nil, err
	}
	var cutAt int64
	if _, err := t.c.queryRow(`SELECT finished_at FROM receipts WHERE seq = ?`, []any{cp.Seq}, func(sc scanner) error {
		return sc.Scan(&cutAt)
	}); err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	res := &store.PruneResult{DryRun: req.DryRun}
	if req.KeepSettled > 0 {
		var b binder
		before := b.time(req.Now.Add(-req.KeepSettled))
		if b.err != nil {
			return nil, fmt.Errorf("prune: %w", b.err)
		}
		// An effect whose charge still counts against its budget stays, with its charge: a key
		// reserved again from nothing would start at attempt 1 beside the old row, and the
		// charge must go on counting until its window has passed.
		settled := `state IN ('committed', 'failed') AND conflict = '' AND updated_at < ?
			AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.effect_key = effects.effect_key AND r.seq >= ?)`
		if t.receiptLinks() {
			// The receipts of an effect are found through the event rows that link them.
			settled = `state IN ('committed', 'failed') AND conflict = '' AND updated_at < ?
			AND NOT EXISTS (SELECT 1 FROM events v WHERE v.effect_key = effects.effect_key AND v.seq >= ?)`
		}
		args := []any{before, cp.Seq}
		if t.keepsLedger() {
			settled += ` AND NOT EXISTS (SELECT 1 FROM budget_charges c WHERE c.effect_key = effects.effect_key
				AND c.released_at IS NULL AND c.consumed_at > ? - c.window_ns)`
			args = append(args, b.nanos(req.Now))
		}
		if res.Effects, err = t.c.exec(`DELETE FROM effects WHERE `+settled, args...); err != nil {
			return nil, fmt.Errorf("prune: effects: %w", err)
		}
		// A request key names its effect's reservation: with the effect gone, a replay under it
		// has nothing to be handed, and the key would be kept for ever.
		if t.version == 0 || t.version >= requestKeysVersion {
			if _, err := t.c.exec(`DELETE FROM request_keys WHERE updated_at < ?
				AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.effect_key = request_keys.effect_key)`, before); err != nil {
				return nil, fmt.Errorf("prune: request keys: %w", err)
			}
		}
		if t.keepsLedger() {
			if _, err := t.c.exec(`DELETE FROM budget_charges WHERE NOT EXISTS
				(SELECT 1 FROM effects e WHERE e.effect_key = budget_charges.effect_key)`); err != nil {
				return nil, fmt.Errorf("prune: budget charges: %w", err)
			}
		}
	}
	const settledApproval = `status IN ('consumed', 'denied', 'expired')
		AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.approval_id = approvals.approval_id AND r.approval_id <> '' AND r.seq >= ?)`
	if _, err := t.c.exec(`DELETE FROM approval_answers WHERE approval_id IN (SELECT approval_id FROM approvals WHERE `+settledApproval+`)`, cp.Seq); err != nil {
		return nil, fmt.Errorf("prune: approval answers: %w", err)
	}
	if res.Approvals, err = t.c.exec(`DELETE FROM approvals WHERE `+settledApproval, cp.Seq); err != nil {
		return nil, fmt.Errorf("prune: approvals: %w", err)
	}
	// The newest event always stays: event ids are rowids, which restart from an empty table.
	// So do the events of an effect a person may still resolve (executing, ambiguous, or
	// settled with an outcome conflict): the resolution reads who made the attempt from them.
	// A row of several events (schema 21) goes only when its last event is before the cut too.
	prunable := `at < ? AND id < (SELECT MAX(id) FROM events)
		AND effect_key NOT IN (SELECT effect_key FROM effects WHERE effect_key IN (` + unsettledKeys(t.executingWindow()) + `) AND ` + unsettledWhere + `)
		AND approval_id NOT IN (SELECT approval_id FROM approvals WHERE status IN ('pending', 'granted'))`
	count := `COUNT(*)`
	args := []any{cutAt}
	if t.eventRows() {
		prunable += ` AND (more IS NULL OR (SELECT MAX(json_extract(value, '$.at')) FROM json_each(more)) < ?)`
		count = `COALESCE(SUM(COALESCE(n, 1)), 0)`
		args = append(args, cutAt)
	}
	if t.receiptLinks() {
		// A row that links a receipt the prune keeps stays with it; rows that only link a
		// receipt (negative ids) go with their receipt, below.
		prunable += ` AND id > 0 AND (seq IS NULL OR seq < ?)`
		args = append(args, cp.Seq)
		if _, err := t.c.exec(`DELETE FROM events WHERE id < 0 AND seq < ?`, cp.Seq); err != nil {
			return nil, fmt.Errorf("prune: receipt links: %w", err)
		}
	}
	if _, err := t.c.queryRow(`SELECT `+count+` FROM events WHERE `+prunable, args,
		func(sc scanner) error { return sc.Scan(&res.Events) }); err != nil {
		return nil, fmt.Errorf("prune: events: %w", err)
	}
	if _, err = t.c.exec(`DELETE FROM events WHERE `+prunable, args...); err != nil {
		return nil, fmt.Errorf("prune: events: %w", err)
	}
	if res.Receipts, err = t.c.exec(`DELETE FROM receipts WHERE seq < ?`, cp.Seq); err != nil {
		return nil, fmt.Errorf("prune: receipts: %w", err)
	}
	if t.receiptSpans() {
		// The spans whose receipts are all gone; one that keeps some still summarizes them.
		if _, err := t.c.exec(`DELETE FROM receipt_spans WHERE last_seq < ?`, cp.Seq); err != nil {
			return nil, fmt.Errorf("prune: receipt spans: %w", err)
		}
	}
	// Carry what the removed records said of the rows that are kept.
	if _, err := t.c.exec(`DELETE FROM carried`); err != nil {
		return nil, fmt.Errorf("prune: carried: %w", err)
	}
	exists := map[string]string{
		store.CarriedEffect:     `SELECT 1 FROM effects WHERE effect_key = ?`,
		store.CarriedApproval:   `SELECT 1 FROM approvals WHERE approval_id = ?`,
		store.CarriedDelegation: `SELECT 1 FROM delegations WHERE delegation_id = ?`,
		store.CarriedHold:       `SELECT 1 FROM holds WHERE hold_id = ?`,
	}
	var kept store.CarriedHasher
	for it, err := range carry.Sorted() {
		if err != nil {
			return nil, fmt.Errorf("prune: %w", err)
		}
		n, err := t.c.exec(`INSERT INTO carried (kind, key, seq, doc) SELECT ?, ?, ?, ? WHERE EXISTS (`+exists[it.Kind]+`)`,
			it.Kind, it.Key, it.Seq, string(it.Doc), it.Key)
		if err != nil {
			return nil, fmt.Errorf("prune: carry %s %s: %w", it.Kind, it.Key, err)
		}
		if n == 1 {
			kept.Add(it)
		}
	}
	cs := store.PrunedStart(req, cp, res.Receipts, &kept)
	sealed, err := t.appendReceipt(store.PruneRecord(&cs))
	if err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	cs.RecordSeq = sealed.Seq
	var b binder
	signed, at := b.time(cp.SignedAt), b.time(req.Now)
	if b.err != nil {
		return nil, fmt.Errorf("prune: %w", b.err)
	}
	if _, err := t.c.exec(`INSERT INTO prunes (start_seq, start_hash, cp_signed_at, cp_store_id, cp_key_id, cp_signature, pruned_at, pruned_by,
		record_seq, removed, carried, carried_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		cs.Seq, cs.Hash, signed, cp.StoreID, cp.KeyID, cp.Signature, at, cs.By, cs.RecordSeq, cs.Removed, cs.Carried, cs.CarriedHash); err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	res.Start = cs
	return res, nil
}

// segment yields the receipts from seq from to seq to, inclusive, in the transaction.
func (t *txn) segment(from, to int64) iter.Seq2[receipt.Sealed, error] {
	return func(yield func(receipt.Sealed, error) bool) {
		err := sealedRows(t.c, `SELECT seq, hash, doc FROM receipts WHERE seq >= ? AND seq <= ? ORDER BY seq`, []any{from, to},
			func(r receipt.Sealed) error {
				if !yield(r, nil) {
					return errStopped
				}
				return nil
			})
		if err != nil && !errors.Is(err, errStopped) {
			yield(receipt.Sealed{}, err)
		}
	}
}

const chainStartQuery = `SELECT start_seq, start_hash, cp_signed_at, cp_store_id, cp_key_id, cp_signature, pruned_at, pruned_by,
	record_seq, removed, carried, carried_hash FROM prunes ORDER BY id DESC LIMIT 1`

func scanChainStart(sc scanner) (*store.ChainStart, error) {
	var c store.ChainStart
	var signed, at sql.NullInt64
	if err := sc.Scan(&c.Seq, &c.Hash, &signed, &c.Checkpoint.StoreID, &c.Checkpoint.KeyID, &c.Checkpoint.Signature, &at, &c.By,
		&c.RecordSeq, &c.Removed, &c.Carried, &c.CarriedHash); err != nil {
		return nil, err
	}
	c.Checkpoint.Seq, c.Checkpoint.Hash, c.Checkpoint.SignedAt, c.PrunedAt = c.Seq, c.Hash, fromNanos(signed), fromNanos(at)
	return &c, nil
}

func (t *txn) chainStart() (*store.ChainStart, error) {
	var c *store.ChainStart
	_, err := t.c.queryRow(chainStartQuery, nil, func(sc scanner) (err error) {
		c, err = scanChainStart(sc)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("chain start: %w", err)
	}
	return c, nil
}

// ChainStart returns where the chain starts since its last prune; nil when never pruned.
func (s *Store) ChainStart(ctx context.Context) (*store.ChainStart, error) {
	if s.keepsRetention() != nil {
		return nil, nil
	}
	c, err := scanChainStart(s.r.QueryRowContext(ctx, chainStartQuery))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("chain start: %w", err)
	}
	return c, nil
}

const holdQuery = `SELECT hold_id, from_seq, to_seq, reason, created_by, created_at, released_at, released_by, release_reason FROM holds`

func scanHold(sc scanner) (*store.Hold, error) {
	var h store.Hold
	var created, released sql.NullInt64
	if err := sc.Scan(&h.ID, &h.From, &h.To, &h.Reason, &h.By, &created, &released, &h.ReleasedBy, &h.ReleaseReason); err != nil {
		return nil, err
	}
	h.CreatedAt, h.ReleasedAt = fromNanos(created), fromNanos(released)
	return &h, nil
}

func (t *txn) holds() ([]*store.Hold, error) {
	var out []*store.Hold
	err := t.c.query(holdQuery+` ORDER BY n`, nil, func(sc scanner) error {
		h, err := scanHold(sc)
		if err == nil {
			out = append(out, h)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("holds: %w", err)
	}
	return out, nil
}

// Holds returns every hold, released ones included, in the order they were placed.
func (s *Store) Holds(ctx context.Context) ([]*store.Hold, error) {
	if s.keepsRetention() != nil {
		return nil, nil
	}
	out, err := collect(ctx, s.r, holdQuery+` ORDER BY n`, nil, scanHold)
	if err != nil {
		return nil, fmt.Errorf("holds: %w", err)
	}
	return out, nil
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
	err := s.write(ctx, func(t *txn) error {
		start, err := t.chainStart()
		if err != nil {
			return err
		}
		if err := store.CheckHoldable(h, start); err != nil {
			return err
		}
		var b binder
		at := b.time(req.Now)
		if b.err != nil {
			return b.err
		}
		if _, err := t.c.exec(`INSERT INTO holds (hold_id, n, from_seq, to_seq, reason, created_by, created_at)
			VALUES (?, (SELECT COALESCE(MAX(n), 0) + 1 FROM holds), ?, ?, ?, ?, ?)`, h.ID, h.From, h.To, h.Reason, h.By, at); err != nil {
			return err
		}
		_, err = t.appendReceipt(store.HoldRecord(h, req.Now))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("hold %d to %d: %w", req.From, req.To, err)
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
	var out *store.Hold
	err := s.write(ctx, func(t *txn) error {
		h, err := readRow(t, holdQuery+` WHERE hold_id = ?`, []any{req.ID}, scanHold)
		switch {
		case err != nil:
			return err
		case !h.Active():
			return fmt.Errorf("%w (by %s on %s)", store.ErrHoldReleased, h.ReleasedBy, h.ReleasedAt.UTC().Format(receipt.TimeFormat))
		}
		var b binder
		at := b.time(req.Now)
		if b.err != nil {
			return b.err
		}
		n, err := t.c.exec(`UPDATE holds SET released_at = ?, released_by = ?, release_reason = ? WHERE hold_id = ? AND released_at IS NULL`,
			at, req.By, req.Reason, req.ID)
		if err := checkRows(n, err, "hold "+req.ID); err != nil {
			return err
		}
		h.ReleasedAt, h.ReleasedBy, h.ReleaseReason = req.Now, req.By, req.Reason
		out = h
		_, err = t.appendReceipt(store.HoldRecord(h, req.Now))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("release hold %s: %w", req.ID, err)
	}
	return out, nil
}
