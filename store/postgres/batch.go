package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
	"github.com/latchkit/latch/store/internal/groupcommit"
)

// Group commit.
//
// Reserve and Record are the two writes of every protected call, and both have the same shape:
// read at most one effect row and one approval row, ask a pure decider what to write, write it.
// A transaction of its own costs each of them five to seven round trips and a durable commit, and
// every Record holds the one chain-head row from its append to its commit, so that appends from
// all workers queue on that row, one commit at a time.
//
// So the planned writes of one Store queue, and whichever caller finds no batch running leads
// the next: it takes the queued writes (up to maxBatch) and runs them in one transaction of
// two pipelined round trips whatever their number — begin, lock the chain head and read every
// row the deciders need; write every effect and approval (compare-and-set, as alone), every
// event, and the receipts, sealed in order, with the head, and COMMIT behind them without
// waiting for their replies (batchWrites says how a failed write still stops that COMMIT, and
// how a lost reply is settled). Meanwhile the next writes
// queue for the next leader: nobody waits on a timer, and a lone write (one worker) is a batch of
// one, which takes fewer round trips than the write's own transaction (seven for a Record, whose
// statements are sent one by one, each waiting for the one before).
// The batch is only a faster way to reach the outcome each write would reach alone, and anything
// unusual sends every write of the batch back to its own transaction (write, in tx.go, with its
// retries and its settling of lost commits): a compare-and-set that matches no row (another
// transaction wrote first), any error of a write (the server then answers the COMMIT behind it
// with ROLLBACK), a commit the server refused. Two writes
// of one batch never touch the same effect or approval row (a second one waits for the next
// batch), so each decision is taken from rows no other write of the batch has changed.
//
// Every transaction of a planned write — a batch or a write on its own — takes its locks in the
// lock order of the package documentation (postgres.go): the chain head first, then effect rows
// by key, then approval rows by id. A Record always appends a receipt and a refused Reserve
// does, so the head is locked before anything else even by a batch that may turn out to append
// nothing: a transaction that held an effect row while waiting for the head would deadlock with
// one that held the head while waiting for that row.
//
// A batch whose commit is lost is settled like any lost commit: by reading back what only it
// can have written (its receipts by seq and hash, its events by id). Landed: every write of the
// batch is answered from it. Not landed: every write goes back to its own transaction with its
// part of the batch as the lost attempt to look for, so that if the batch was still committing
// and lands after all, each write finds its part and returns it instead of writing twice.

// maxBatch bounds the writes of one transaction.
const maxBatch = 32

// leaders is how many batches of one Store run at once. One: a second batch in flight mostly
// waits for the first's chain head, and measured (8 workers) two cost 15-20 % of the calls per
// second and three 40 %, with more commits per call.
const leaders = 1

// batchTimeout bounds one batch. The batch runs on behalf of several callers, so no caller's
// cancellation ends it; a caller whose write was taken waits for the batch's answer.
const batchTimeout = 30 * time.Second

// beginBatch begins a batch's transaction as begin does a write method's. The statement after it,
// the lock of the chain head (queries.lockHeadBatch), also sets the transaction's settings, so
// that they cost no statement of their own: two a call, each a round of the server's executor.
//
// The settings give the batch generic plans. Every statement of a batch finds its rows by key (a
// primary key, = ANY of an array of keys), so a plan made once per connection serves every
// batch; left to choose, the server re-plans the array reads of effects and approvals at every
// execution (a custom plan for a one-element array looks cheaper than the generic one), which
// measured 32 µs of the server's time per read, two reads a call.
//
// A plan made once must stay right as the tables grow, and the generic plan of an = ANY read is
// costed for ten keys: made while the table is small (a new store, or a connection opened early)
// a sequential scan looks cheaper than the index, and it stays the plan — scanning the whole
// table at every read — until the table's statistics change (an autovacuum analyze). So the
// batch turns sequential scans off: its reads take their key's index whatever the table's size
// when they were planned. Every setting is transaction-local (set_config's is_local): nothing
// is left on the session for a pooler to carry.
const beginBatch = "BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE"

// plannedWrite is a write method that reads at most one effect and one approval and decides
// with a pure planner: Reserve and Record.
type plannedWrite struct {
	op         string
	effectKey  string
	approvalID string
	// once is the action id of a record made once (store.RecordRequest.Once): a receipt of it
	// refuses the write with store.ErrRecorded.
	once string
	plan func(eff *store.Effect, apr *store.Approval) *plan
}

// refusedOnce is the refusal of a record made once whose action has a receipt already.
func (pw *plannedWrite) refusedOnce() error {
	return fmt.Errorf("%s: %w", pw.op, store.ErrRecorded)
}

// plan is what a planned write decided: the rows to write, the events and the receipt to append,
// and how its result is built from the events and the receipt as written.
type plan struct {
	effect   *store.EffectWrite
	approval *store.ApprovalWrite
	events   []store.Event
	now      time.Time // the time of events without one
	receipt  *receipt.Receipt
	result   func(events []store.Event, sealed *receipt.Sealed) any
}

// run is the planned write in a transaction of its own, which locks the chain head first (the
// lock order): the write may append a receipt.
func (pw *plannedWrite) run(ctx context.Context, t *txn) error {
	if err := t.lockHead(ctx); err != nil {
		return err
	}
	if pw.once != "" {
		var found []string
		rows, err := t.Query(ctx, t.s.q.recorded, []string{pw.once})
		if err == nil {
			found, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err != nil {
			return fmt.Errorf("read the receipts of %s: %w", pw.once, err)
		}
		if len(found) > 0 {
			// The receipt may be this write's own, from a lost attempt that landed late (a
			// re-issue after a lost commit): that is the answer, not a refusal.
			if err := t.checkPending(ctx); err != nil {
				return err
			}
			return refused{pw.refusedOnce()}
		}
	}
	var eff *store.Effect
	var apr *store.Approval
	var err error
	if pw.effectKey != "" {
		if eff, err = t.readEffect(ctx, pw.effectKey); err != nil {
			return err
		}
	}
	if pw.approvalID != "" {
		if apr, err = t.readApproval(ctx, pw.approvalID); err != nil {
			return err
		}
	}
	p := pw.plan(eff, apr)
	events, sealed, err := t.apply(ctx, p.effect, p.approval, p.events, p.now, p.receipt)
	if err != nil {
		return err
	}
	t.w.result = p.result(events, sealed)
	return nil
}

// queuedWrite is a planned write waiting for, or in, a batch.
type queuedWrite struct {
	pw    *plannedWrite
	state atomic.Int32 // groupcommit.Queued, Taken or Abandoned
	done  chan struct{}

	// token is the TokenCheck of the write's context, or nil: decided in the batch's
	// transaction, from the token rows its reads include.
	token *store.TokenCheck

	// The answer, set before done is closed: the batch's witness of this write, or alone set
	// when the write is to run in its own transaction (after lost, when not nil: the part of a
	// batch whose commit was lost and did not land).
	w     witness
	err   error
	alone bool
	lost  *witness

	// Set by the leader while it runs the batch.
	p      *plan
	events []store.Event
	sealed *receipt.Sealed
}

// batcher is the queue of one Store's planned writes.
type batcher struct {
	lock   chan struct{} // held by the leader while it runs a batch; a channel so waits can select
	gather *groupcommit.Gatherer
	mu     sync.Mutex
	queue  []*queuedWrite
}

func newBatcher() *batcher {
	return &batcher{lock: make(chan struct{}, leaders), gather: groupcommit.New(groupcommit.Window, groupcommit.Gap)}
}

// queued is the length of the queue.
func (b *batcher) queued() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// planned runs pw, in a batch with the planned writes in flight beside it or alone.
func (s *Store) planned(ctx context.Context, pw *plannedWrite) (*witness, error) {
	if s.readOnly {
		return nil, fmt.Errorf("%s: %w", pw.op, store.ErrReadOnly)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", pw.op, err)
	}
	if t := s.fillTxnOf(ctx); t != nil {
		return t.fill(ctx, pw.op, pw.run) // a write method called by Fill: in Fill's transaction (fill.go)
	}
	q := &queuedWrite{pw: pw, token: store.TokenCheckOf(ctx), done: make(chan struct{})}
	b := s.batch
	b.mu.Lock()
	b.queue = append(b.queue, q)
	b.mu.Unlock()
	b.gather.Arrived()
	if err := groupcommit.Await(ctx, b.lock, &q.state, q.done, s.lead); err != nil {
		return nil, fmt.Errorf("%s: %w", pw.op, err)
	}
	if q.alone {
		w, err := s.writeAfter(ctx, pw.op, q.lost, pw.run)
		if err == nil && w == q.lost && w.result == nil {
			// The batch landed late, and the replies of its writes were lost with it.
			if err := s.answerLanded(ctx, q); err != nil {
				return nil, fmt.Errorf("%s: the batch landed: %w", pw.op, err)
			}
		}
		return w, err
	}
	if q.err != nil {
		return nil, q.err
	}
	return &q.w, nil
}

// lead takes the queued writes and runs them. The caller holds the batcher's lock.
func (s *Store) lead() {
	b := s.batch
	b.gather.Wait(b.queued)
	b.mu.Lock()
	var batch []*queuedWrite
	effects, approvals, once := map[string]bool{}, map[string]bool{}, map[string]bool{}
	rest := b.queue[:0]
	for _, q := range b.queue {
		switch {
		case q.state.Load() == groupcommit.Abandoned:
		case len(batch) == maxBatch:
			rest = append(rest, q) // the next batch
		case effects[q.pw.effectKey], approvals[q.pw.approvalID], once[q.pw.once]:
			// The next batch: a batch decides each write from rows that no other write of the
			// batch changes. (Not a transaction of its own: under contention, the same key
			// delivered several times at once, that would be one more transaction per write
			// queueing on the chain head.)
			rest = append(rest, q)
		case q.state.CompareAndSwap(groupcommit.Queued, groupcommit.Taken):
			batch = append(batch, q)
			if q.pw.effectKey != "" {
				effects[q.pw.effectKey] = true
			}
			if q.pw.approvalID != "" {
				approvals[q.pw.approvalID] = true
			}
			if q.pw.once != "" {
				once[q.pw.once] = true
			}
		}
	}
	clear(b.queue[len(rest):])
	b.queue = rest
	b.gather.Took(len(batch))
	b.mu.Unlock()

	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	committed, lost, err := s.runBatch(ctx, batch)
	for _, q := range batch {
		switch {
		case committed:
			if q.err == nil && q.w.result == nil {
				// Landed, and the replies of its writes were lost with the connection.
				if err := s.answerLanded(ctx, q); err != nil {
					q.err = fmt.Errorf("%s: the batch landed: %w", q.pw.op, err)
				}
			}
		case err != nil:
			q.err = fmt.Errorf("%s: %w", q.pw.op, err)
		default:
			q.alone = true
			// A write the batch refused (a record made once, found recorded) wrote nothing
			// that its own transaction could look for: it decides again there.
			if lost && q.err == nil {
				q.lost = &q.w
			}
			q.err = nil
		}
		close(q.done)
	}
}

// runBatch runs the writes of batch in one transaction. committed: it committed (or its lost
// commit landed) and every write is answered from it. Otherwise each write runs alone; lost says
// that the batch's commit was lost and did not land, so each must look for its part. err is a
// lost commit that could not be settled: every write of the batch fails with it.
func (s *Store) runBatch(ctx context.Context, batch []*queuedWrite) (committed, lost bool, err error) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, false, nil
	}
	conn := pc.Conn()
	broken := false
	defer func() {
		if broken {
			_ = conn.Close(ctx) // the pool discards a closed connection
		}
		pc.Release()
	}()
	// The transaction is begun by hand, in the round trip of its first reads.
	all, out, cerr := s.batchWrites(ctx, conn, batch)
	switch out {
	case batchAlone:
		if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
			broken = true
		}
		return false, false, nil
	case batchRolledBack:
		return false, false, nil
	case batchCommitted:
		s.writes.Add(1)
		s.skewAfterBatch(ctx, batch)
		return true, false, nil
	case batchWritten:
		var tag pgconn.CommandTag
		tag, cerr = conn.Exec(ctx, "COMMIT")
		switch {
		case cerr == nil && tag.String() == "COMMIT":
			s.writes.Add(1)
			s.skewAfterBatch(ctx, batch)
			return true, false, nil
		case cerr == nil:
			return false, false, nil // the server answered ROLLBACK: a statement had failed
		case notCommitted(cerr):
			return false, false, nil
		}
	}
	// batchUnknown, or the COMMIT of batchWritten lost: the outcome is unknown.
	broken = true
	if out == batchUnknown {
		eventWitnesses(s, batch, all)
	}
	landed, err := s.settle(ctx, all)
	switch {
	case err != nil:
		return false, false, fmt.Errorf("commit outcome unknown (%v) and the re-read failed: %w", cerr, err)
	case landed:
		s.writes.Add(1)
		s.log.Warn("lost commit settled: it landed", "store", s.url, "op", "batch", "writes", len(batch), "error", cerr)
		s.skewAfterBatch(ctx, batch)
		return true, false, nil
	}
	s.log.Warn("lost commit settled: it did not land; re-issuing", "store", s.url, "op", "batch", "writes", len(batch),
		"error", cerr)
	return false, true, nil
}

// batchOutcome is where batchWrites left the batch's transaction.
type batchOutcome int

const (
	// batchAlone: nothing is committed; the transaction is to be rolled back and each write run
	// alone.
	batchAlone batchOutcome = iota
	// batchWritten: every write succeeded; the transaction is to be committed.
	batchWritten
	// batchCommitted: the COMMIT went with the writes, and the server answered it COMMIT.
	batchCommitted
	// batchRolledBack: the COMMIT went with the writes, and the server refused it (a statement
	// had failed, the transaction was aborted): nothing landed, and the transaction is over.
	batchRolledBack
	// batchUnknown: the COMMIT went with the writes, and the connection failed before its
	// answer was read: the outcome is settled from the rows.
	batchUnknown
)

// answerLanded builds the answer of a write whose batch committed although the replies of its
// writes were never read (its COMMIT went with them, and the connection failed): the ids of its
// events are read back.
func (s *Store) answerLanded(ctx context.Context, q *queuedWrite) error {
	if len(q.events) > 0 {
		var c eventColumnsOf
		for _, e := range q.events {
			if _, err := c.add(e, e.Time); err != nil {
				return err
			}
		}
		rows, err := s.pool.Query(ctx, s.q.eventIDs, c.kind, c.at, c.actionID, c.effectKey, c.approvalID, c.payload)
		if err != nil {
			return fmt.Errorf("read back the events written: %w", err)
		}
		ids := make([]int64, 0, len(q.events))
		for rows.Next() {
			var n, id int64
			if err := rows.Scan(&n, &id); err != nil {
				rows.Close()
				return fmt.Errorf("read back the events written: %w", err)
			}
			if n != int64(len(ids)+1) {
				rows.Close()
				return fmt.Errorf("read back the events written: an event before the %d-th of %d found other than once", n, len(q.events))
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read back the events written: %w", err)
		}
		if len(ids) != len(q.events) {
			return fmt.Errorf("read back the events written: %d of %d found", len(ids), len(q.events))
		}
		for i := range q.events {
			q.events[i].ID = ids[i]
		}
		q.w.events = ids
	}
	q.w.result = q.p.result(q.events, q.sealed)
	return nil
}

// skewAfterBatch checks the clocks once a committed batch wrote a lapsed lease ambiguous
// (skew.go).
func (s *Store) skewAfterBatch(ctx context.Context, batch []*queuedWrite) {
	for _, q := range batch {
		if q.p != nil && lapses(q.p.effect, q.p.now) {
			s.checkSkew(ctx, skewAtLease)
			return
		}
	}
}

// batchWrites reads, plans and writes the batch in tx, and returns the witness of all it wrote
// and where it left the transaction (batchOutcome); err is what made the outcome unknown.
//
// The batch locks the chain head with its reads, first (the lock order), so that it can seal its
// receipts before it writes and send every write in one more round trip: begin, lock and read;
// write; commit. A batch that appends receipts sends its COMMIT in the round trip of its writes,
// without waiting for their replies: two round trips in all. Each write that must change a row
// fails on the server when it changes none (mustOne), so a COMMIT behind a failed write finds
// the transaction aborted and answers ROLLBACK; and the receipts, sealed before they are sent,
// are a witness to settle a reply that is lost. A batch without receipts waits for the replies of
// its writes before it commits, because the witness of its commit is the ids of its events.
func (s *Store) batchWrites(ctx context.Context, tx *pgx.Conn, batch []*queuedWrite) (*witness, batchOutcome, error) {
	// Begin, lock the head and read every row the deciders need.
	reads := &pgx.Batch{}
	reads.Queue(beginBatch)
	var keys, ids, actions, hashes []string
	for _, q := range batch {
		if q.token != nil && !slices.Contains(hashes, q.token.Hash) {
			hashes = append(hashes, q.token.Hash)
		}
		if q.pw.effectKey != "" {
			keys = append(keys, q.pw.effectKey)
		}
		if q.pw.approvalID != "" {
			ids = append(ids, q.pw.approvalID)
		}
		if q.pw.once != "" {
			actions = append(actions, q.pw.once)
		}
	}
	reads.Queue(s.q.lockHeadBatch)
	if len(keys) > 0 {
		reads.Queue(s.q.readEffects, keys)
	}
	if len(ids) > 0 {
		reads.Queue(s.q.readApprovals, ids)
	}
	if len(actions) > 0 {
		reads.Queue(s.q.recorded, actions)
	}
	if len(hashes) > 0 {
		reads.Queue(s.q.validTokens, hashes)
	}
	br := tx.SendBatch(ctx, reads)
	_, err := br.Exec()
	var head receipt.Head // the chain head before this batch's receipts
	if err == nil {
		var settings [3]string
		err = br.QueryRow().Scan(&head.Seq, &head.Hash, &settings[0], &settings[1], &settings[2])
	}
	effects := make(map[string]*store.Effect, len(keys))
	approvals := make(map[string]*store.Approval, len(ids))
	if err == nil && len(keys) > 0 {
		err = readRows(br, func(rows pgx.Rows) error {
			var r effectRow
			if err := r.scan(rows); err != nil {
				return err
			}
			effects[r.key] = r.effect()
			return nil
		})
	}
	if err == nil && len(ids) > 0 {
		err = readRows(br, func(rows pgx.Rows) error {
			var r approvalRow
			if err := r.scan(rows); err != nil {
				return err
			}
			approvals[r.id] = r.approval()
			return nil
		})
	}
	recorded := make(map[string]bool, len(actions))
	if err == nil && len(actions) > 0 {
		err = readRows(br, func(rows pgx.Rows) error {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			recorded[id] = true
			return nil
		})
	}
	valid := make(map[string]bool, len(hashes))
	if err == nil && len(hashes) > 0 {
		err = readRows(br, func(rows pgx.Rows) error {
			var hash string
			if err := rows.Scan(&hash); err != nil {
				return err
			}
			valid[hash] = true
			return nil
		})
	}
	if cerr := br.Close(); err != nil || cerr != nil {
		return nil, batchAlone, nil
	}
	receipts := 0
	for _, q := range batch {
		if q.token != nil {
			if err := q.token.Decide(valid[q.token.Hash]); err != nil {
				// Refused: it writes nothing, and is answered with the refusal if the batch
				// commits (store.TokenCheck).
				q.err = fmt.Errorf("%s: %w", q.pw.op, err)
				q.p = &plan{result: func([]store.Event, *receipt.Sealed) any { return nil }}
				continue
			}
		}
		if recorded[q.pw.once] {
			// Refused: it writes nothing, and is answered with the refusal if the batch commits.
			q.err = q.pw.refusedOnce()
			q.p = &plan{result: func([]store.Event, *receipt.Sealed) any { return nil }}
			continue
		}
		q.p = q.pw.plan(effects[q.pw.effectKey], approvals[q.pw.approvalID])
		if q.p.receipt != nil {
			receipts++
		}
	}

	// Write the rows, in lock order, and the events; append the receipts.
	writes := &pgx.Batch{}
	checks := 0
	byKey := slices.Clone(batch)
	slices.SortFunc(byKey, func(a, b *queuedWrite) int { return strings.Compare(a.pw.effectKey, b.pw.effectKey) })
	for _, q := range byKey {
		if q.p.effect == nil {
			continue
		}
		_, args, row, err := s.effectStmt(q.p.effect)
		if err != nil {
			return nil, batchAlone, nil
		}
		sql := s.q.mustCASEffect
		if q.p.effect.Prev == nil {
			sql = s.q.mustInsertEffect
		}
		writes.Queue(sql, args...)
		q.w.effect = &row
		checks++
	}
	byApproval := slices.Clone(batch)
	slices.SortFunc(byApproval, func(a, b *queuedWrite) int { return strings.Compare(a.pw.approvalID, b.pw.approvalID) })
	for _, q := range byApproval {
		if q.p.approval == nil {
			continue
		}
		_, args, row, err := s.approvalStmt(q.p.approval)
		if err != nil {
			return nil, batchAlone, nil
		}
		writes.Queue(s.q.mustCASApproval, args...)
		q.w.approval = &row
		checks++
	}
	// The budget charges the effect writes release (a record of a failed outcome) or hold
	// again, after every effect write: their results are read after the checks'.
	charges := 0
	for _, q := range byKey {
		if q.p.effect == nil {
			continue
		}
		sql, args, err := s.chargeStmt(q.p.effect)
		if err != nil {
			return nil, batchAlone, nil
		}
		if sql != "" {
			writes.Queue(sql, args...)
			charges++
		}
	}
	var ev eventColumnsOf
	for _, q := range batch {
		q.events = make([]store.Event, len(q.p.events))
		for i, e := range q.p.events {
			e, err := ev.add(e, q.p.now)
			if err != nil {
				return nil, batchAlone, nil
			}
			q.events[i] = e
		}
	}
	if len(ev.kind) > 0 {
		// One statement for all the batch's events, not one per event: each statement costs the
		// server a round of execution, and a parse and a plan when statements are not prepared
		// (default_query_exec_mode=exec, for transaction-mode poolers).
		writes.Queue(s.q.insertEvents, ev.kind, ev.at, ev.actionID, ev.effectKey, ev.approvalID, ev.payload)
	}
	var appended receipt.Head
	if receipts > 0 {
		var err error
		if appended, err = s.queueReceipts(writes, batch, head); err != nil {
			return nil, batchAlone, nil
		}
	}
	// The COMMIT goes with the writes when what they write can settle a lost reply — receipts,
	// sealed here, or else events, matched whole (the ids the server gives them come with the
	// replies) — and the exec mode is one whose SendBatch has sent every write when it returns:
	// cache_statement (it prepares new statements first, waiting for that) and exec (one write
	// of the whole batch). The COMMIT, a simple query, follows them. (The other exec modes wait
	// for the writes' replies.)
	all := &witness{}
	mode := s.conn.DefaultQueryExecMode
	pipelined := (receipts > 0 || len(ev.kind) > 0) && (mode == pgx.QueryExecModeCacheStatement || mode == pgx.QueryExecModeExec)
	if pipelined {
		all.seq, all.hash = appended.Seq, appended.Hash // without receipts: eventWitnesses
	}
	br = tx.SendBatch(ctx, writes)
	var sendErr error
	if pipelined {
		fe := tx.PgConn().Frontend()
		fe.Send(&pgproto3.Query{String: "COMMIT"})
		sendErr = fe.Flush()
	}
	failed := false
	for range checks {
		if _, err := br.Exec(); err != nil {
			failed = true // another transaction wrote first (mustOne), or the statement failed
		}
	}
	for range charges {
		if _, err := br.Exec(); err != nil {
			failed = true
		}
	}
	if len(ev.kind) > 0 {
		rows, err := br.Query()
		var ids []int64
		if err == nil {
			ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		}
		if err != nil || len(ids) != len(ev.kind) {
			failed = true
		} else {
			// The rows were inserted in the order of the arrays (ORDER BY n), so the sequence
			// handed out their ids in that order: ascending ids are the events in order.
			slices.Sort(ids)
			all.events = ids
			for _, q := range batch {
				for i := range q.events {
					q.events[i].ID, ids = ids[0], ids[1:]
					q.w.events = append(q.w.events, q.events[i].ID)
				}
			}
		}
	}
	if receipts > 0 {
		if _, err := br.Exec(); err != nil {
			failed = true
		}
	}
	closeErr := br.Close()
	if closeErr != nil {
		failed = true
	}
	if !failed {
		all.seq, all.hash = appended.Seq, appended.Hash
		for _, q := range batch {
			// Before the commit is answered: a write re-issued after a lost commit returns this
			// if it finds the batch landed late.
			q.w.result = q.p.result(q.events, q.sealed)
		}
	}
	if !pipelined {
		switch {
		case failed:
			return nil, batchAlone, nil
		case receipts == 0 && len(all.events) == 0:
			return nil, batchAlone, nil // nothing would settle a lost commit: each write alone
		}
		return all, batchWritten, nil
	}
	all.events = nil // the witness is the receipts, or an event matched whole
	switch {
	case sendErr != nil:
		return all, batchUnknown, sendErr
	case tx.PgConn().IsClosed():
		return all, batchUnknown, closeErr
	}
	tag, err := receiveCommit(ctx, tx.PgConn())
	switch {
	case err == nil && tag == "COMMIT" && !failed:
		return all, batchCommitted, nil
	case err == nil && tag == "COMMIT":
		// Committed, and yet a write's reply was not read as it should be (the writes were not
		// sent: the transaction committed nothing, or some other failure of the client's): the
		// rows decide, and the transaction is over, so what they say is final.
		return all, batchUnknown, fmt.Errorf("the batch's COMMIT succeeded but its writes' replies were not read: %w", closeErr)
	case err == nil:
		return all, batchRolledBack, nil // ROLLBACK: a statement had failed
	case notCommitted(err):
		return all, batchRolledBack, nil
	}
	return all, batchUnknown, err
}

// eventWitnesses adds to the witnesses of a batch whose COMMIT went with its writes and whose
// outcome is unknown what settles it when the receipts cannot: an event matched whole, the
// batch's first if it appended no receipt, and each write's first for a write that appended
// none (its witness if it is re-issued). They are built only then: a batch that is answered
// needs none.
func eventWitnesses(s *Store, batch []*queuedWrite, all *witness) {
	for _, q := range batch {
		if len(q.events) == 0 || q.p == nil {
			continue
		}
		p := s.eventPresence(q.events[0])
		if q.sealed == nil {
			q.w.inserted = append(q.w.inserted, p)
		}
		if all.seq == 0 && len(all.inserted) == 0 {
			all.inserted = []presence{p}
		}
	}
}

// eventPresence counts the events equal to e in every column but the id: a witness of the
// commit of an event whose id is not known (an event carries its call's action id and the time
// of its request to the nanosecond: no other write writes one equal to it).
func (s *Store) eventPresence(e store.Event) presence {
	at, _ := nanos(e.Time) // checked when it was queued
	return presence{s.q.eventPresent, []any{e.Kind, at, e.ActionID, e.EffectKey, e.ApprovalID, rawJSON(e.Payload)}}
}

// receiveCommit reads the answer to a COMMIT sent as a simple query behind a batch (after the
// batch's own replies were read): its command tag, or the server's error, and the ready-for-query
// that ends it.
func receiveCommit(ctx context.Context, pc *pgconn.PgConn) (string, error) {
	var tag string
	var failed error
	for {
		msg, err := pc.ReceiveMessage(ctx)
		if err != nil {
			return "", err
		}
		switch m := msg.(type) {
		case *pgproto3.CommandComplete:
			tag = string(m.CommandTag)
		case *pgproto3.ErrorResponse:
			failed = pgconn.ErrorResponseToPgError(m)
		case *pgproto3.ReadyForQuery:
			return tag, failed
		}
	}
}

// queueReceipts seals the batch's receipts in order after head, queues the statement that
// appends them and moves the head, and returns the head it moves to.
func (s *Store) queueReceipts(b *pgx.Batch, batch []*queuedWrite, head receipt.Head) (receipt.Head, error) {
	from := head.Seq
	var rc receiptColumnsOf
	for _, q := range batch {
		if q.p.receipt == nil {
			continue
		}
		seq, prev := receipt.Next(head)
		sealed, args, err := receiptArgs(q.p.receipt, seq, prev)
		if err != nil {
			return head, err
		}
		rc.add(args)
		q.sealed = &sealed
		q.w.seq, q.w.hash = seq, sealed.Hash
		head = receipt.Head{Seq: seq, Hash: sealed.Hash}
	}
	b.Queue(s.q.appendReceipts, rc.seq, rc.hash, rc.doc, rc.receiptID, rc.actionID, rc.action, rc.effectKey,
		rc.approvalID, rc.result, rc.finished, head.Seq, head.Hash, from, len(rc.seq))
	return head, nil
}

// eventColumnsOf holds events column by column, for insertEvents.
type eventColumnsOf struct {
	kind, actionID, effectKey, approvalID []string
	at                                    []int64
	payload                               [][]byte
}

// add appends e (a zero time becomes now) and returns it as written.
func (c *eventColumnsOf) add(e store.Event, now time.Time) (store.Event, error) {
	e, args, err := eventArgs(e, now)
	if err != nil {
		return e, err
	}
	c.kind = append(c.kind, e.Kind)
	c.at = append(c.at, args[1].(stamp).Int64)
	c.actionID = append(c.actionID, e.ActionID)
	c.effectKey = append(c.effectKey, e.EffectKey)
	c.approvalID = append(c.approvalID, e.ApprovalID)
	c.payload = append(c.payload, rawJSON(e.Payload))
	return e, nil
}

// readRows reads the rows of the batch's next query with scan.
func readRows(br pgx.BatchResults, scan func(pgx.Rows) error) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// receiptColumnsOf holds sealed receipts column by column, for appendReceipts.
type receiptColumnsOf struct {
	seq, finished                                                    []int64
	hash, receiptID, actionID, action, effectKey, approvalID, result []string
	doc                                                              [][]byte
}

// add appends one receipt, given as receiptArgs returns it.
func (c *receiptColumnsOf) add(args []any) {
	c.seq = append(c.seq, args[0].(int64))
	c.hash = append(c.hash, args[1].(string))
	c.doc = append(c.doc, args[2].([]byte))
	c.receiptID = append(c.receiptID, args[3].(string))
	c.actionID = append(c.actionID, args[4].(string))
	c.action = append(c.action, args[5].(string))
	c.effectKey = append(c.effectKey, args[6].(string))
	c.approvalID = append(c.approvalID, args[7].(string))
	c.result = append(c.result, args[8].(string))
	c.finished = append(c.finished, args[9].(int64))
}
