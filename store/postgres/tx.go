package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// maxTries bounds the read-decide-write loop of one write method. Each retry follows a
// transaction that lost a compare-and-set to one that committed, so the loop makes progress;
// a handful of tries covers the 8-way races of the conformance suite many times over.
const maxTries = 16

// begin starts every write transaction: READ COMMITTED whatever the server's default, and a
// transaction-local idle timeout, so that a client that vanishes mid-transaction (a partition, a
// frozen host) holds its row locks for seconds, not until TCP notices. Both are one round trip and
// transaction-scoped: nothing is left on the session for a pooler to carry to another client.
var begin = pgx.TxOptions{BeginQuery: `BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE; SET LOCAL idle_in_transaction_session_timeout = '30s'`}

// settleTimeout bounds settling a lost commit. Settling ignores the caller's cancellation (the
// cancellation may be what cut the commit) but not for long.
const settleTimeout = 10 * time.Second

var (
	// errConflict is a compare-and-set that matched no row: another transaction wrote first.
	errConflict = errors.New("row changed since it was read")
	// errLanded says that an earlier attempt of this call, whose commit was lost, has landed.
	errLanded = errors.New("the earlier commit landed")
)

// refused is a decision a write method returns without writing: the transaction is rolled back
// and err is returned as it is.
type refused struct{ err error }

func (r refused) Error() string { return r.err.Error() }

// witness is what one transaction wrote, kept so that a lost commit can be settled by reading it
// back, and the result its method returns if it landed.
type witness struct {
	effect   *effectRow   // the effect row as written
	approval *approvalRow // the approval row as written
	seq      int64        // the receipt appended, and its hash
	hash     string
	events   []int64    // the ids of the events inserted
	inserted []presence // rows inserted under a unique id (or an event matched whole), never changed by anyone after

	result  any   // what the method returns
	refusal error // an error the method returns although it committed (an expired approval answered)
}

// presence is a query counting the rows equal to one that a transaction inserted.
type presence struct {
	sql  string
	args []any
}

// eventsOnly reports whether events are all the transaction wrote.
func (w *witness) eventsOnly() bool {
	return w.effect == nil && w.approval == nil && w.seq == 0 && len(w.inserted) == 0 && len(w.events) > 0
}

// txn is one attempt at a write transaction.
type txn struct {
	pgx.Tx
	s *Store
	// pending is an earlier attempt of the same call whose commit was lost and that a re-read
	// did not find. It may still land: its COMMIT can be in flight on the server, holding the
	// locks of what it wrote. So a re-issue checks for it after every read (the decision is then
	// never taken from its rows), and if it lands later still, the re-issue's writes wait on its
	// locks: the same row loses its compare-and-set and the next try finds it; the chain head
	// and the reused event ids give that wait to writes with no row to compare.
	pending *witness
	w       witness
	// lapsed says the transaction wrote a lapsed lease ambiguous: once it commits, the store
	// checks the clocks (skew.go), since the lapse was decided on the host's.
	lapsed bool
}

// write runs fn in one READ COMMITTED transaction and commits it, again from the start when a
// compare-and-set loses. A lost commit is settled from the rows, never guessed.
func (s *Store) write(ctx context.Context, op string, fn func(ctx context.Context, t *txn) error) (*witness, error) {
	return s.writeAfter(ctx, op, nil, fn)
}

// writeAfter is write for a call whose earlier attempt (pending, when not nil) was committed in
// a batch whose commit was lost and that a re-read did not find (see batch.go): the re-issue
// looks for it exactly as write looks for its own lost attempts.
func (s *Store) writeAfter(ctx context.Context, op string, pending *witness, fn func(ctx context.Context, t *txn) error) (*witness, error) {
	if s.readOnly {
		return nil, fmt.Errorf("%s: %w", op, store.ErrReadOnly)
	}
	if t := s.fillTxnOf(ctx); t != nil {
		return t.fill(ctx, op, fn) // a write method called by Fill: in Fill's transaction (fill.go)
	}
	var last error
	for try := 0; try < maxTries; try++ {
		tx, err := s.pool.BeginTx(ctx, begin)
		if err != nil {
			var pe *pgconn.PgError
			var ce *pgconn.ConnectError
			if !errors.As(err, &pe) && !errors.As(err, &ce) && ctx.Err() == nil {
				// A pooled connection that died while idle (a server restart, a proxy or
				// firewall dropping it): a failed BEGIN wrote nothing, and the pool has
				// discarded the connection, so try another.
				last = err
				continue
			}
			return nil, fmt.Errorf("%s: begin: %w", op, err)
		}
		t := &txn{Tx: tx, s: s, pending: pending}
		// A re-issue first looks for the lost attempt: it may have landed after the re-read.
		err = t.checkPending(ctx)
		if tc := store.TokenCheckOf(ctx); tc != nil && err == nil {
			// The caller's API token is read in the write's own transaction, before the
			// write: a revoked one refuses it with nothing written (store.TokenCheck).
			err = t.checkToken(ctx, op, tc)
		}
		if err == nil {
			err = fn(ctx, t)
		}
		if err != nil {
			_ = tx.Rollback(ctx) // a failed rollback closes the connection, which rolls back too
			var r refused
			switch {
			case errors.As(err, &r):
				return nil, r.err
			case errors.Is(err, errLanded):
				s.writes.Add(1)
				s.log.Warn("lost commit found landed", "store", s.url, "op", op)
				return pending, nil
			case errors.Is(err, errConflict), retryable(err):
				last = err
				continue
			}
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		cerr := tx.Commit(ctx)
		if cerr == nil {
			s.writes.Add(1)
			if t.lapsed {
				s.checkSkew(ctx, skewAtLease)
			}
			return &t.w, nil
		}
		if notCommitted(cerr) {
			last = cerr
			continue
		}
		// The outcome is unknown: COMMIT may have landed and only its reply been lost.
		landed, err := s.settle(ctx, &t.w)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%s: commit outcome unknown (%v) and the re-read failed: %w", op, cerr, err)
		case landed:
			s.writes.Add(1)
			s.log.Warn("lost commit settled: it landed", "store", s.url, "op", op, "error", cerr)
			return &t.w, nil
		case pending != nil:
			// Re-issued once already: stop rather than loop on a connection that keeps failing.
			return nil, fmt.Errorf("%s: commit lost twice, the write is not in the store: %w", op, cerr)
		}
		// Not in the store. The loop reads again: rows unchanged re-issue the same write, rows
		// changed by someone else are decided afresh.
		s.log.Warn("lost commit settled: it did not land; re-issuing", "store", s.url, "op", op, "error", cerr)
		pending, last = &t.w, cerr
	}
	return nil, fmt.Errorf("%s: gave up after %d tries: %w", op, maxTries, last)
}

// lapses reports an effect write that makes a lapsed lease ambiguous: a lapse decided on the
// host's clock (now), after which the store checks it against the database's.
func lapses(w *store.EffectWrite, now time.Time) bool {
	return w != nil && w.Next.State == store.Ambiguous && store.LeaseLapsed(w.Prev, now)
}

// retryable reports a transaction PostgreSQL aborted and that may simply run again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01") // serialization_failure, deadlock_detected
}

// notCommitted reports a COMMIT error that proves the transaction did not commit: the server
// answered it with an error or with ROLLBACK. Nothing else proves it. In particular
// pgconn.SafeToRetry is not proof: when the connection drops while pgx waits for the reply to a
// COMMIT it has sent, pgx v5.12 reports "conn closed" as safe to retry (TestCutCommit found it).
func notCommitted(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) || errors.Is(err, pgx.ErrTxCommitRollback)
}

// settle decides whether a transaction whose commit was lost landed, by reading what it wrote on
// a fresh connection.
func (s *Store) settle(ctx context.Context, w *witness) (bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	var last error
	for i := range 3 {
		if i > 0 {
			select {
			case <-ctx.Done():
				return false, errors.Join(last, ctx.Err())
			case <-time.After(time.Duration(i) * 100 * time.Millisecond):
			}
		}
		conn, err := pgx.ConnectConfig(ctx, s.conn.Copy())
		if err != nil {
			last = err
			continue
		}
		landed, err := s.landed(ctx, conn, w)
		conn.Close(ctx)
		if err == nil {
			return landed, nil
		}
		last = err
	}
	return false, last
}

// landed reports whether the transaction that wrote w is in the store. What it inserted that
// nobody else can have written or can change — its receipt (by seq and hash), its events (by id:
// a sequence never hands an id out twice), rows under a fresh unique id — proves it landed as soon
// as any of it is seen: only a committed transaction's rows are visible. When it wrote none of
// that, the rows it updated decide, compared whole: exactly as written is ours; anything else, it
// did not land. "Not landed" can be premature (the COMMIT may still be in flight); the re-issue
// that follows is built to find a late landing (see txn.pending).
func (s *Store) landed(ctx context.Context, q queryRower, w *witness) (bool, error) {
	immutable := w.seq > 0 || len(w.events) > 0 || len(w.inserted) > 0
	if w.seq > 0 || len(w.events) > 0 {
		var hash *string
		var n int
		events := w.events
		if events == nil {
			events = []int64{}
		}
		if err := q.QueryRow(ctx, s.q.witness, w.seq, events).Scan(&hash, &n); err != nil {
			return false, err
		}
		if n != 0 && n != len(w.events) { // one statement, one snapshot: all or none
			return false, fmt.Errorf("%d of the %d events written are in the store", n, len(w.events))
		}
		if (hash != nil && *hash == w.hash) || n > 0 {
			return true, nil
		}
	}
	for _, p := range w.inserted {
		var n int
		if err := q.QueryRow(ctx, p.sql, p.args...).Scan(&n); err != nil {
			return false, err
		}
		if n > 0 {
			return true, nil
		}
	}
	if immutable {
		return false, nil
	}
	if w.effect != nil {
		var r effectRow
		err := r.scan(q.QueryRow(ctx, s.q.readEffect, w.effect.key))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return false, nil
		case err != nil:
			return false, err
		case !r.equal(w.effect):
			return false, nil
		}
	}
	if w.approval != nil {
		var r approvalRow
		err := r.scan(q.QueryRow(ctx, s.q.readApproval, w.approval.id))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return false, nil
		case err != nil:
			return false, err
		case !r.equal(w.approval):
			return false, nil
		}
	}
	return true, nil // everything it wrote is there as written (or it wrote nothing)
}

// readForWrite reads, in a write, the row the write changes (scan reads row). None is refused
// as store.ErrNotFound, named by op; what names the row in other errors. Either way a pending
// attempt of the same write is settled first (checkPending): errLanded when it landed after all.
func readForWrite[T any](ctx context.Context, t *txn, op, what string, row pgx.Row, scan func(pgx.Row) (*T, error)) (*T, error) {
	v, err := scan(row)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if err := t.checkPending(ctx); err != nil {
			return nil, err
		}
		return nil, refused{fmt.Errorf("%s: %w", op, store.ErrNotFound)}
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if err := t.checkPending(ctx); err != nil {
		return nil, err
	}
	return v, nil
}

// checkPending reports errLanded when the pending attempt turns out to have landed.
func (t *txn) checkPending(ctx context.Context) error {
	if t.pending == nil {
		return nil
	}
	ok, err := t.s.landed(ctx, t, t.pending)
	switch {
	case err != nil:
		return err
	case ok:
		return errLanded
	}
	return nil
}

// readEffect reads the effect under key, nil when there is none. In a re-issue it then looks for
// the lost attempt: whatever the read saw of it, the check (a later snapshot) sees too, so a
// decision is never taken from rows that the lost attempt itself wrote.
func (t *txn) readEffect(ctx context.Context, key string) (*store.Effect, error) {
	var r effectRow
	err := r.scan(t.QueryRow(ctx, t.s.q.readEffect, key))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, t.checkPending(ctx)
	case err != nil:
		return nil, fmt.Errorf("read effect %s: %w", key, err)
	}
	if err := t.checkPending(ctx); err != nil {
		return nil, err
	}
	return r.effect(), nil
}

// readApproval reads the approval id, nil when there is none.
func (t *txn) readApproval(ctx context.Context, id string) (*store.Approval, error) {
	var r approvalRow
	err := r.scan(t.QueryRow(ctx, t.s.q.readApproval, id))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, t.checkPending(ctx)
	case err != nil:
		return nil, fmt.Errorf("read approval %s: %w", id, err)
	}
	if err := t.checkPending(ctx); err != nil {
		return nil, err
	}
	return r.approval(), nil
}

// readHistory reads the requests of action hash still pending and the last one answered
// (store.ApprovalHistory).
func (t *txn) readHistory(ctx context.Context, hash string) (store.ApprovalHistory, error) {
	var h store.ApprovalHistory
	rows, err := t.Query(ctx, t.s.q.pendingByHash, hash)
	if err != nil {
		return h, fmt.Errorf("read approvals of %s: %w", hash, err)
	}
	for rows.Next() {
		var r approvalRow
		if err := r.scan(rows); err != nil {
			rows.Close()
			return h, fmt.Errorf("read approvals of %s: %w", hash, err)
		}
		h.Pending = append(h.Pending, r.approval())
	}
	if err := rows.Err(); err != nil {
		return h, fmt.Errorf("read approvals of %s: %w", hash, err)
	}
	var r approvalRow
	switch err := r.scan(t.QueryRow(ctx, t.s.q.answeredByHash, hash)); {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return h, fmt.Errorf("read approvals of %s: %w", hash, err)
	default:
		h.Answered = r.approval()
	}
	return h, t.checkPending(ctx)
}

// effectStmt returns the statement that applies an effect write — INSERT … ON CONFLICT DO
// NOTHING, or a compare-and-set on the row that was read — and the row it writes. The statement
// must affect exactly one row; none is errConflict.
func (s *Store) effectStmt(w *store.EffectWrite) (string, []any, effectRow, error) {
	next, err := toEffectRow(&w.Next)
	if err != nil {
		return "", nil, next, err
	}
	if w.Prev == nil {
		return s.q.insertEffect, next.args(s.q.legacy), next, nil
	}
	prev, err := toEffectRow(w.Prev)
	if err != nil {
		return "", nil, next, err
	}
	args := []any{prev.key, prev.state, prev.attempt, prev.actionID, prev.lease,
		next.state, next.attempt, next.actionID, next.action, next.actionHash, next.lease, next.result,
		next.errText, next.resolvedBy, next.created, next.updated}
	if !s.q.legacy {
		args = append(args, next.arguments, next.note, next.conflict)
	}
	return s.q.casEffect, args, next, nil
}

// writeEffect applies an effect write, and what it does to the budget charges of the attempt it
// writes (store.ChargeChange); no row written is errConflict.
func (t *txn) writeEffect(ctx context.Context, w *store.EffectWrite) error {
	if w == nil {
		return nil
	}
	sql, args, next, err := t.s.effectStmt(w)
	if err != nil {
		return err
	}
	tag, err := t.Exec(ctx, sql, args...)
	switch {
	case err != nil:
		return fmt.Errorf("write effect %s: %w", next.key, err)
	case tag.RowsAffected() != 1:
		return errConflict
	}
	t.w.effect = &next
	// The attempt's budget charges are released (or held again) with the write that makes it
	// failed (or not), in its transaction.
	return t.applyCharges(ctx, w)
}

// approvalStmt returns the compare-and-set (on the previous status) that applies an approval
// write, and the row it writes.
func (s *Store) approvalStmt(w *store.ApprovalWrite) (string, []any, approvalRow, error) {
	n, err := toApprovalRow(&w.Next)
	if err != nil {
		return "", nil, n, err
	}
	args := []any{n.id, string(w.PrevStatus), n.status, n.actionHash, n.action,
		n.actionName, n.agent, n.user, n.policyHash, n.created, n.expires, n.approver, n.answered, n.consumedBy,
		n.consumed}
	if !s.q.legacy {
		args = append(args, n.note)
	}
	return s.q.casApproval, args, n, nil
}

// writeApproval applies an approval write; no row written is errConflict.
func (t *txn) writeApproval(ctx context.Context, w *store.ApprovalWrite) error {
	if w == nil {
		return nil
	}
	sql, args, n, err := t.s.approvalStmt(w)
	if err != nil {
		return err
	}
	tag, err := t.Exec(ctx, sql, args...)
	switch {
	case err != nil:
		return fmt.Errorf("write approval %s: %w", n.id, err)
	case tag.RowsAffected() != 1:
		return errConflict
	}
	t.w.approval = &n
	return nil
}

// insert runs an INSERT … ON CONFLICT DO NOTHING of a row under a fresh unique id, and records
// how to find it again (present counts rows equal to it). A conflict is either the lost attempt
// of this call, landed late, or a genuine duplicate, refused.
func (t *txn) insert(ctx context.Context, what, sql string, args []any, present presence) error {
	tag, err := t.Exec(ctx, sql, args...)
	switch {
	case err != nil:
		return fmt.Errorf("insert %s: %w", what, err)
	case tag.RowsAffected() == 1:
		t.w.inserted = append(t.w.inserted, present)
		return nil
	}
	if err := t.checkPending(ctx); err != nil {
		return err
	}
	return fmt.Errorf("%s exists", what)
}

// insertApproval inserts a new approval request.
func (t *txn) insertApproval(ctx context.Context, a *store.Approval) error {
	r, err := toApprovalRow(a)
	if err != nil {
		return err
	}
	return t.insert(ctx, "approval "+a.ID, t.s.q.insertApproval, r.args(t.s.q.approvalInsertColumns),
		presence{t.s.q.approvalPresent, []any{r.id, r.actionHash, r.created}})
}

// insertEvents appends events in one round trip and returns them with their ids; an event
// without a time gets now.
func (t *txn) insertEvents(ctx context.Context, events []store.Event, now time.Time) ([]store.Event, error) {
	if len(events) == 0 {
		return nil, nil
	}
	var reuse []int64
	if t.pending != nil && t.pending.eventsOnly() {
		reuse = t.pending.events
	}
	out := make([]store.Event, len(events))
	b := &pgx.Batch{}
	for i, e := range events {
		e, args, err := eventArgs(e, now)
		if err != nil {
			return nil, err
		}
		if i < len(reuse) {
			b.Queue(t.s.q.insertEventWithID, append(args, reuse[i])...)
		} else {
			b.Queue(t.s.q.insertEvent, args...)
		}
		out[i] = e
	}
	br := t.SendBatch(ctx, b)
	var taken bool
	var err error
	for i := range out {
		err = br.QueryRow().Scan(&out[i].ID)
		if errors.Is(err, pgx.ErrNoRows) && i < len(reuse) {
			taken, err = true, nil
			break
		}
		if err != nil {
			err = fmt.Errorf("insert event %s: %w", out[i].Kind, err)
			break
		}
		t.w.events = append(t.w.events, out[i].ID)
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("insert events: %w", cerr)
	}
	switch {
	case err != nil:
		return nil, err
	case taken:
		if err := t.checkPending(ctx); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("insert events: event id %d is taken", reuse[0])
	}
	return out, nil
}

// eventArgs returns e as written (a zero time becomes now) and the arguments of insertEvent.
func eventArgs(e store.Event, now time.Time) (store.Event, []any, error) {
	if e.Kind == "" {
		return e, nil, errors.New("insert event: event without a kind")
	}
	if e.Time.IsZero() {
		e.Time = now
	}
	at, err := nanos(e.Time)
	if err != nil {
		return e, nil, fmt.Errorf("insert event %s: %w", e.Kind, err)
	}
	return e, []any{e.Kind, at, e.ActionID, e.EffectKey, e.ApprovalID, rawJSON(e.Payload)}, nil
}

// lockHead locks the chain head for the rest of the transaction. Every transaction that may
// append a receipt calls it before it touches any other row (the lock order, postgres.go).
//
// A re-issue whose lost attempt appended a receipt settles that attempt right there, before it
// writes anything: the attempt held the head until it ended, so the lock waited for it if it was
// still committing, and what the check finds now is final — landed, or never. Not landed, the
// attempt is forgotten: a later check would read this transaction's own writes, which can be the
// very rows the attempt wrote (an answer's row, keyed by request, approver and time; a delegation
// or a hold under the same id), and take them for it (TestCutAnswer, TestCutInsertsThenAppends).
func (t *txn) lockHead(ctx context.Context) error {
	var seq int64
	var hash string
	if err := t.QueryRow(ctx, t.s.q.lockHead).Scan(&seq, &hash); err != nil {
		return fmt.Errorf("lock chain head: %w", err)
	}
	if t.pending == nil || t.pending.seq == 0 {
		return nil
	}
	if err := t.checkPending(ctx); err != nil {
		return err
	}
	t.pending = nil
	return nil
}

// appendReceipt seals rc as the successor of the chain head, stores it and moves the head. The
// head row stays locked by this transaction until it ends, so appenders queue on it briefly and
// seq stays gap-free.
func (t *txn) appendReceipt(ctx context.Context, rc *receipt.Receipt) (*receipt.Sealed, error) {
	if rc == nil {
		return nil, nil
	}
	if err := checkReceipt(rc); err != nil {
		return nil, err
	}
	var seq int64
	var head string
	if err := t.QueryRow(ctx, t.s.q.bumpHead).Scan(&seq, &head); err != nil {
		return nil, fmt.Errorf("append receipt %s: chain head: %w", rc.ReceiptID, err)
	}
	if t.pending != nil && t.pending.seq > 0 {
		// lockHead settles such an attempt and forgets it: a write that appends without taking
		// the head first breaks the lock order and would check for its attempt too late.
		return nil, fmt.Errorf("append receipt %s: the chain head was not locked first", rc.ReceiptID)
	}
	seq, prev := receipt.Next(receipt.Head{Seq: seq - 1, Hash: head})
	sealed, args, err := receiptArgs(rc, seq, prev)
	if err != nil {
		return nil, err
	}
	tag, err := t.Exec(ctx, t.s.q.insertReceipt, args...)
	switch {
	case err != nil:
		return nil, fmt.Errorf("append receipt %d: %w", seq, err)
	case tag.RowsAffected() != 1:
		return nil, fmt.Errorf("append receipt %d: the chain head moved under its lock", seq)
	}
	t.w.seq, t.w.hash = seq, sealed.Hash
	return &sealed, nil
}

// apply writes what a decider planned, in the order every write method writes: the effect, the
// approval (either may be nil), the events (a zero time becomes now), the receipt (nil: none).
// It returns the events as written and the receipt as sealed.
func (t *txn) apply(ctx context.Context, effect *store.EffectWrite, approval *store.ApprovalWrite,
	events []store.Event, now time.Time, rc *receipt.Receipt) ([]store.Event, *receipt.Sealed, error) {
	if lapses(effect, now) {
		t.lapsed = true
	}
	if err := t.writeEffect(ctx, effect); err != nil {
		return nil, nil, err
	}
	if err := t.writeApproval(ctx, approval); err != nil {
		return nil, nil, err
	}
	written, err := t.insertEvents(ctx, events, now)
	if err != nil {
		return nil, nil, err
	}
	sealed, err := t.appendReceipt(ctx, rc)
	if err != nil {
		return nil, nil, err
	}
	return written, sealed, nil
}

// checkReceipt refuses a receipt the store cannot append, before the chain head is taken.
func checkReceipt(rc *receipt.Receipt) error {
	if rc.ReceiptID == "" {
		return errors.New("append receipt: receipt has no receipt_id")
	}
	if _, err := nanos(rc.FinishedAt); err != nil {
		return fmt.Errorf("append receipt %s: %w", rc.ReceiptID, err)
	}
	return nil
}

// receiptArgs seals rc as receipt seq after prev and returns it with the arguments of
// insertReceipt (seq, hash, doc, then the columns copied for filtering).
func receiptArgs(rc *receipt.Receipt, seq int64, prev string) (receipt.Sealed, []any, error) {
	if err := checkReceipt(rc); err != nil {
		return receipt.Sealed{}, nil, err
	}
	finished, _ := nanos(rc.FinishedAt) // checked
	sealed, err := receipt.Seal(rc, seq, prev)
	if err != nil {
		return receipt.Sealed{}, nil, err
	}
	return sealed, []any{seq, sealed.Hash, sealed.Doc, rc.ReceiptID, rc.ActionID, rc.Action, rc.EffectKey,
		rc.ApprovalID, rc.Result, finished.Int64}, nil
}
