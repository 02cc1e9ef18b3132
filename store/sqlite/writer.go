package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store/internal/groupcommit"
)

// Group commit.
//
// Every write method is one request: a function that reads the rows its decider needs, calls the
// decider and writes what it returned. Requests queue in the Store. Whichever caller takes the
// writer first leads: it runs the queued requests (up to maxBatch, in arrival order) in one
// BEGIN IMMEDIATE transaction on the one writer connection and commits them with one COMMIT, so
// that N calls in flight cost one durable commit instead of N. Meanwhile the next requests queue
// for the next leader, which is how batches form. A leader waits only when the last batch held
// several requests and fewer are queued yet, and then at most groupcommit.Window (see groupcommit.Gatherer).
//
// Each request still reads, plans and writes under the write lock, and sees the writes of the
// requests before it in its batch (they are in the same transaction): the outcome is exactly
// that of running them one after the other. In a batch of more than one, each request runs
// inside its own SAVEPOINT, so a request that fails is rolled back alone and the others commit.
// (A batch runs without savepoints first, and with them only when one of its requests fails: see
// runOn.) A reply is given only after the COMMIT: if the COMMIT fails, every request in the batch
// fails, and no caller is ever told of a reservation, outcome or receipt that was not committed.

// maxBatch bounds the requests of one transaction, so that another process waiting for the
// write lock waits for one bounded batch at most.
const maxBatch = 64

// request is one write method's transaction, as queued for a leader.
type request struct {
	fn    func(*txn) error
	err   error        // set by the leader before done is closed
	state atomic.Int32 // groupcommit.Queued, Taken or Abandoned
	done  chan struct{}
}

// errClosed is the reply to a request made after Close.
var errClosed = errors.New("store is closed")

// writer runs the write requests of one Store on its one writer connection.
type writer struct {
	db      *sql.DB
	plock   *procLock     // nil where there is none
	ckpt    *checkpointer // nil: SQLite's own checkpoints only
	commits *atomic.Int64
	lock    chan struct{} // held by the leader while it runs a batch; a channel so waits can select

	gather *groupcommit.Gatherer

	mu     sync.Mutex
	queue  []*request
	closed bool

	conn *wconn // the statements prepared on the driver connection; used by the leader only

	// legacy is set for a store kept at a schema before notesVersion (tests build the stores
	// older binaries left): its transactions read and write the columns that schema has.
	// version is that schema's version.
	legacy  bool
	version int
	// noAnswers is set for a store kept at a schema before answersVersion.
	noAnswers bool
}

func newWriter(db *sql.DB, plock *procLock, ckpt *checkpointer, commits *atomic.Int64) *writer {
	return &writer{db: db, plock: plock, ckpt: ckpt, commits: commits, lock: make(chan struct{}, 1),
		gather: groupcommit.New(groupcommit.Window)}
}

// do queues fn and returns its reply once its batch committed (or failed). A context that ends
// while the request still waits in the queue abandons it; once a leader has taken it, the reply
// is waited for, so that a caller is never told "cancelled" about a write that committed.
func (w *writer) do(ctx context.Context, fn func(*txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := &request{fn: fn, done: make(chan struct{})}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return errClosed
	}
	w.queue = append(w.queue, r)
	w.mu.Unlock()
	w.gather.Arrived()
	if err := groupcommit.Await(ctx, w.lock, &r.state, r.done, w.lead); err != nil {
		return err
	}
	return r.err
}

// lead runs one batch of queued requests. The caller holds w.lock.
func (w *writer) lead() {
	w.mu.Lock()
	if w.closed {
		// Close has begun: it waits for this leader, and no new batch starts.
		w.failQueued()
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	w.gather.Wait(w.queued)
	// Other processes' writers queue on the process lock rather than in SQLite's busy handler.
	// It is taken before the batch is: the requests that queue while it is awaited join it.
	if w.plock.lock(busyTimeoutMillis * time.Millisecond) {
		defer w.plock.unlock()
	}
	w.mu.Lock()
	batch := make([]*request, 0, min(len(w.queue), maxBatch))
	n := 0
	for ; n < len(w.queue) && len(batch) < maxBatch; n++ {
		if r := w.queue[n]; r.state.CompareAndSwap(groupcommit.Queued, groupcommit.Taken) {
			batch = append(batch, r)
		}
	}
	w.queue = append(w.queue[:0], w.queue[n:]...)
	w.gather.Took(len(batch))
	w.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	w.run(batch)
	for _, r := range batch {
		close(r.done)
	}
}

// run runs a batch on the writer connection and sets every request's reply.
func (w *writer) run(batch []*request) {
	fail := func(err error) {
		for _, r := range batch {
			if r.err == nil {
				r.err = err
			}
		}
	}
	// The connection is taken from the pool for one batch (the pool holds only it), so that
	// nothing else is locked out of it between batches.
	ctx := context.Background()
	conn, err := w.db.Conn(ctx)
	if err != nil {
		fail(err)
		return
	}
	defer conn.Close()
	ran := false
	err = conn.Raw(func(dc any) error {
		ran = true
		c, err := w.wconn(dc)
		if err != nil {
			fail(err)
			return nil
		}
		w.runOn(c, batch)
		return nil // never driver.ErrBadConn: the connection and its statements are kept
	})
	if err != nil && !ran {
		fail(err)
	}
}

// failQueued answers every queued request with errClosed. The caller holds w.mu.
func (w *writer) failQueued() {
	for _, r := range w.queue {
		if r.state.CompareAndSwap(groupcommit.Queued, groupcommit.Taken) {
			r.err = errClosed
			close(r.done)
		}
	}
	w.queue = nil
}

// wconn returns the prepared-statement cache of driver connection dc, starting a new one if the
// pool replaced the connection.
func (w *writer) wconn(dc any) (*wconn, error) {
	if w.conn != nil && w.conn.dc == dc {
		return w.conn, nil
	}
	prep, ok := dc.(driver.ConnPrepareContext)
	if !ok {
		return nil, fmt.Errorf("driver connection %T cannot prepare statements", dc)
	}
	w.conn = &wconn{dc: dc, prep: prep, stmts: map[string]driver.Stmt{}}
	return w.conn, nil
}

// runOn runs a batch in one transaction on c. A savepoint per request costs two statements
// and a journal of the pages each request changes, a tenth of a request's work, and requests
// almost never fail: so a batch first runs without them, and only if one of its requests fails
// is it rolled back whole and run again, each request inside its own savepoint. A request
// therefore may run twice, which is harmless: it only reads and writes in the transaction, and
// its reply is the last run's.
func (w *writer) runOn(c *wconn, batch []*request) {
	if len(batch) > 1 && w.attempt(c, batch, false) {
		return
	}
	w.attempt(c, batch, len(batch) > 1)
}

// attempt runs a batch in one transaction, guarded (a savepoint per request) or not, and
// commits what succeeded. It reports false, having written nothing and answered nobody, when an
// unguarded batch meets a failing request.
func (w *writer) attempt(c *wconn, batch []*request, guarded bool) bool {
	if _, err := c.exec(`BEGIN IMMEDIATE`); err != nil {
		for _, r := range batch {
			r.err = err
		}
		return true
	}
	t := &txn{c: c, legacy: w.legacy, version: w.version, noAnswers: w.noAnswers}
	// abort ends the transaction without committing anything and fails every request that has
	// no error of its own yet.
	abort := func(err error) {
		_, _ = c.exec(`ROLLBACK`) // fails only when SQLite already rolled back
		for _, r := range batch {
			if r.err == nil {
				r.err = err
			}
		}
	}
	succeeded := 0
	for _, r := range batch {
		if guarded {
			if _, err := c.exec(`SAVEPOINT request`); err != nil {
				abort(fmt.Errorf("savepoint: %w", err))
				return true
			}
		}
		mark := t.mark()
		if err := r.fn(t); err != nil {
			switch {
			case len(batch) == 1:
				r.err = err
				_, _ = c.exec(`ROLLBACK`)
				return true
			case !guarded:
				_, _ = c.exec(`ROLLBACK`)
				return false
			}
			r.err = err
			t.reset(mark)
			// ROLLBACK TO fails when SQLite has rolled back the whole transaction (an I/O error,
			// a full disk): then nothing of the batch stands.
			if _, rerr := c.exec(`ROLLBACK TO request`); rerr != nil {
				abort(fmt.Errorf("batch rolled back after %w: %w", err, rerr))
				return true
			}
		} else {
			succeeded++
		}
		if guarded {
			if _, err := c.exec(`RELEASE request`); err != nil {
				abort(fmt.Errorf("release savepoint: %w", err))
				return true
			}
		}
	}
	if succeeded == 0 {
		_, _ = c.exec(`ROLLBACK`)
		return true
	}
	w.commit(t, abort)
	return true
}

// commit moves the chain head and commits; on failure nothing of the batch was written.
func (w *writer) commit(t *txn, abort func(error)) {
	if err := t.flushHead(); err != nil {
		abort(err)
		return
	}
	if _, err := t.c.exec(`COMMIT`); err != nil {
		abort(fmt.Errorf("commit: %w", err))
		return
	}
	w.commits.Add(1)
	w.ckpt.committed()
}

// close refuses new requests, fails the queued ones, waits for a running batch, finalizes the
// prepared statements and stops the checkpointer.
func (w *writer) close() error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.lock <- struct{}{}
	defer func() { <-w.lock }()
	w.mu.Lock()
	w.failQueued()
	w.mu.Unlock()
	err := w.closeStatements()
	return errors.Join(err, w.plock.close(), w.ckpt.close())
}

// closeStatements finalizes the statements prepared on the writer connection: a connection with
// statements left open is never really closed.
func (w *writer) closeStatements() error {
	if w.conn == nil {
		return nil
	}
	conn, err := w.db.Conn(context.Background())
	if err != nil {
		return err
	}
	defer conn.Close()
	var errs []error
	err = conn.Raw(func(dc any) error {
		if dc == w.conn.dc {
			for _, st := range w.conn.stmts {
				errs = append(errs, st.Close())
			}
		}
		return nil
	})
	w.conn = nil
	return errors.Join(append(errs, err)...)
}

// wconn is the writer connection as the driver exposes it, with every statement the writer runs
// prepared once: parsing SQL would otherwise cost more than executing it.
type wconn struct {
	dc    any
	prep  driver.ConnPrepareContext
	stmts map[string]driver.Stmt
	args  []driver.NamedValue // reused for every statement
	vals  []driver.Value      // reused for every row read
}

func (c *wconn) stmt(q string) (driver.Stmt, error) {
	if st, ok := c.stmts[q]; ok {
		return st, nil
	}
	st, err := c.prep.PrepareContext(context.Background(), q)
	if err != nil {
		return nil, err
	}
	c.stmts[q] = st
	return st, nil
}

// named converts arguments as database/sql would for this driver: int becomes int64.
func (c *wconn) named(args []any) []driver.NamedValue {
	c.args = c.args[:0]
	for i, a := range args {
		if n, ok := a.(int); ok {
			a = int64(n)
		}
		c.args = append(c.args, driver.NamedValue{Ordinal: i + 1, Value: a})
	}
	return c.args
}

// exec runs a statement and returns the number of rows it changed. Statements run with a
// context that never ends: an interrupt would roll back the whole batch, not one request.
func (c *wconn) exec(q string, args ...any) (int64, error) {
	st, err := c.stmt(q)
	if err != nil {
		return 0, err
	}
	res, err := st.(driver.StmtExecContext).ExecContext(context.Background(), c.named(args))
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// insert runs an INSERT and returns the rowid of the last row it inserted.
func (c *wconn) insert(q string, args ...any) (int64, error) {
	st, err := c.stmt(q)
	if err != nil {
		return 0, err
	}
	res, err := st.(driver.StmtExecContext).ExecContext(context.Background(), c.named(args))
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// queryRow runs a query for at most one row and passes it to scan; found is false when there
// is none.
func (c *wconn) queryRow(q string, args []any, scan func(scanner) error) (found bool, err error) {
	st, err := c.stmt(q)
	if err != nil {
		return false, err
	}
	rows, err := st.(driver.StmtQueryContext).QueryContext(context.Background(), c.named(args))
	if err != nil {
		return false, err
	}
	defer func() {
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
	}()
	n := len(rows.Columns())
	if cap(c.vals) < n {
		c.vals = make([]driver.Value, n)
	}
	vals := c.vals[:n]
	switch err := rows.Next(vals); {
	case errors.Is(err, io.EOF):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, scan(valueRow(vals))
}

// query runs a query and passes each row to scan.
func (c *wconn) query(q string, args []any, scan func(scanner) error) (err error) {
	st, err := c.stmt(q)
	if err != nil {
		return err
	}
	rows, err := st.(driver.StmtQueryContext).QueryContext(context.Background(), c.named(args))
	if err != nil {
		return err
	}
	defer func() {
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
	}()
	vals := make([]driver.Value, len(rows.Columns()))
	for {
		switch err := rows.Next(vals); {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
		if err := scan(valueRow(vals)); err != nil {
			return err
		}
	}
}

// valueRow is a row as the driver returns it, scanned as database/sql would into the
// destinations the scanners here use.
type valueRow []driver.Value

func (r valueRow) Scan(dest ...any) error {
	if len(dest) != len(r) {
		return fmt.Errorf("scan: %d destinations for %d columns", len(dest), len(r))
	}
	for i, d := range dest {
		v := r[i]
		var ok bool
		switch d := d.(type) {
		case *string:
			*d, ok = v.(string)
		case *int64:
			*d, ok = v.(int64)
		case *int:
			var n int64
			n, ok = v.(int64)
			*d = int(n)
		case sql.Scanner:
			if err := d.Scan(v); err != nil {
				return fmt.Errorf("scan column %d: %w", i, err)
			}
			ok = true
		}
		if !ok {
			return fmt.Errorf("scan column %d: cannot store %T in %T", i, v, d)
		}
	}
	return nil
}

// txn is the transaction one request runs in. The chain head is read once per transaction and
// written once, at commit: every receipt of the batch moves it in memory.
type txn struct {
	c       *wconn
	legacy  bool // the schema is older than notesVersion
	version int  // the schema's version
	// noAnswers: the schema is older than answersVersion
	noAnswers bool
	headRead  bool
	base      receipt.Head // the head as the table holds it
	head      receipt.Head // the head after this transaction's appends
}

// headMark is what a request's savepoint must restore of the transaction's memory.
type headMark struct {
	read bool
	head receipt.Head
}

func (t *txn) mark() headMark   { return headMark{t.headRead, t.head} }
func (t *txn) reset(m headMark) { t.headRead, t.head = m.read, m.head }
func (t *txn) readHead() error {
	if t.headRead {
		return nil
	}
	_, err := t.c.queryRow(`SELECT seq, hash FROM chain_head WHERE id = 1`, nil, func(sc scanner) error {
		return sc.Scan(&t.base.Seq, &t.base.Hash)
	})
	if err != nil {
		return fmt.Errorf("chain head: %w", err)
	}
	t.headRead, t.head = true, t.base
	return nil
}

// flushHead writes the head the transaction moved, compare-and-set on the seq it read.
func (t *txn) flushHead() error {
	if !t.headRead || t.head == t.base {
		return nil
	}
	n, err := t.c.exec(`UPDATE chain_head SET seq = ?, hash = ? WHERE id = 1 AND seq = ?`, t.head.Seq, t.head.Hash, t.base.Seq)
	return checkRows(n, err, "chain head")
}

// queued is the length of the queue.
func (w *writer) queued() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue)
}
