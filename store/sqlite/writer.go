package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	zsqlite "zombiezen.com/go/sqlite"

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
// several requests and fewer are queued yet, and then only while they keep arriving (see groupcommit.Gatherer).
//
// Each request still reads, plans and writes under the write lock, and sees the writes of the
// requests before it in its batch (they are in the same transaction): the outcome is exactly
// that of running them one after the other. In a batch of more than one, each request runs
// inside its own SAVEPOINT, so a request that fails is rolled back alone and the others commit.
// (A batch runs without savepoints first, and with them only when one of its requests fails: see
// run.) A reply is given only after the COMMIT: if the COMMIT fails, every request in the batch
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
	plock   *procLock     // nil where there is none
	ckpt    *checkpointer // nil: SQLite's own checkpoints only
	commits *atomic.Int64
	lock    chan struct{} // held by the leader while it runs a batch; a channel so waits can select

	gather *groupcommit.Gatherer

	mu     sync.Mutex
	queue  []*request
	closed bool

	conn *wconn // the one writer connection, with its prepared statements; used by the leader only

	// legacy is set for a store kept at a schema before notesVersion (tests build the stores
	// older binaries left): its transactions read and write the columns that schema has.
	// version is that schema's version.
	legacy  bool
	version int
	// noAnswers is set for a store kept at a schema before answersVersion.
	noAnswers bool

	// The executing mark (executing.go): the event rows this writer committed since it last
	// moved the mark, their ids, the effects it made executing and has not moved out since, and
	// the move to ask for when rows of other writers lie past the mark (nil: never).
	sinceMark int
	own       []idRange
	inflight  map[string]struct{}
	markDue   func()
	rowIDs    []idRange         // a transaction's txn.rowIDs, kept for the next
	changes   []executingChange // a transaction's txn.changes, kept for the next
}

func newWriter(conn *wconn, plock *procLock, ckpt *checkpointer, commits *atomic.Int64) *writer {
	return &writer{conn: conn, plock: plock, ckpt: ckpt, commits: commits, lock: make(chan struct{}, 1), inflight: map[string]struct{}{},
		gather: groupcommit.New(groupcommit.Window, groupcommit.Gap)}
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

// onConn runs fn on the writer connection while no batch runs (tests read its settings and
// hold its transactions with it).
func (w *writer) onConn(fn func(*wconn) error) error {
	w.lock <- struct{}{}
	defer func() { <-w.lock }()
	if w.conn == nil {
		return errClosed
	}
	return fn(w.conn)
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

// run runs a batch in one transaction on the writer connection and sets every request's reply.
// A savepoint per request costs two statements
// and a journal of the pages each request changes, a tenth of a request's work, and requests
// almost never fail: so a batch first runs without them, and only if one of its requests fails
// is it rolled back whole and run again, each request inside its own savepoint. A request
// therefore may run twice, which is harmless: it only reads and writes in the transaction, and
// its reply is the last run's.
func (w *writer) run(batch []*request) {
	c := w.conn
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
	t := &txn{c: c, legacy: w.legacy, version: w.version, noAnswers: w.noAnswers,
		rowIDs: w.rowIDs[:0], changes: w.changes[:0]}
	defer func() { w.rowIDs, w.changes = t.rowIDs[:0], t.changes[:0] }() // reused by the next batch
	w.markInBatch(t)
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
	w.committed(t)
	w.ckpt.committed()
	if w.ckpt.restartDue() {
		// Copies what was committed since the checkpointer's last pass, so that the next
		// commit starts the log over; a failure (a reader still holds the log) leaves that to
		// a later pass, and to SQLite's own checkpoint at wal_autocheckpoint.
		_ = t.c.pragma(`PRAGMA wal_checkpoint(PASSIVE)`)
	}
}

// close refuses new requests, fails the queued ones, waits for a running batch, closes the writer
// connection (finalizing its prepared statements) and stops the checkpointer.
func (w *writer) close() error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.lock <- struct{}{}
	defer func() { <-w.lock }()
	w.mu.Lock()
	w.failQueued()
	w.mu.Unlock()
	var err error
	if w.conn != nil {
		err = w.conn.c.Close()
		w.conn = nil
	}
	return errors.Join(err, w.plock.close(), w.ckpt.close())
}

// wconn is the writer connection: a SQLite connection used through its own statement API
// (zombiezen.com/go/sqlite over the same SQLite library the readers use), not through
// database/sql. Every statement the writer runs is prepared once and kept; arguments are bound
// straight to it and columns read straight from it, without the driver interface's boxing of
// each argument, its copies of every column name and its result and rows objects (docs/performance.md).
// It is used by the leader only (the writer's lock), or by Open and Close when no leader runs.
type wconn struct {
	c    *zsqlite.Conn
	row  zrow   // the row a scanner reads; reused for every row
	args []arg  // the arguments of exec, insert and the queries as arg; reused
	more []byte // the more array of an event row being written (eventrows.go); reused
}

// argKind is the SQLite type an arg binds as.
type argKind uint8

const (
	argNull argKind = iota
	argText
	argInt
)

// arg is one argument of a statement, typed, so that binding it boxes nothing: the hot
// statements of a call are built from them (execArgs, insertArgs); the others pass any values.
type arg struct {
	kind argKind
	s    string
	n    int64
}

func text(s string) arg   { return arg{kind: argText, s: s} }
func integer(n int64) arg { return arg{kind: argInt, n: n} }

// argOf converts a value as the any-taking methods accept it.
func argOf(a any) (arg, bool) {
	switch v := a.(type) {
	case nil:
		return arg{}, true
	case string:
		return text(v), true
	case int64:
		return integer(v), true
	case int:
		return integer(int64(v)), true
	case bool:
		if v {
			return integer(1), true
		}
		return integer(0), true
	}
	return arg{}, false
}

// anyArgs converts args into c.args.
func (c *wconn) anyArgs(q string, args []any) ([]arg, error) {
	c.args = c.args[:0]
	for i, a := range args {
		v, ok := argOf(a)
		if !ok {
			return nil, fmt.Errorf("%s: argument %d: cannot bind a %T", q, i+1, a)
		}
		c.args = append(c.args, v)
	}
	return c.args, nil
}

// openWConn opens the writer connection to loc with the settings every write relies on
// (TestPragmas): WAL, the URL's synchronous, foreign keys, busy_timeout and the backstop
// checkpoint interval. The file exists already (openWriter created it with its mode).
func openWConn(loc location) (*wconn, error) {
	if err := registerWALVFS(); err != nil {
		return nil, err
	}
	c, err := zsqlite.OpenConn(dsn(loc.path, "vfs="+walVFSName), zsqlite.OpenReadWrite|zsqlite.OpenURI)
	if err != nil {
		return nil, err
	}
	// SQLite's own busy handler (sleeps of 1, 2, 5 … 100 ms) for busyTimeoutMillis, as the
	// readers and the bare baseline have it.
	c.SetBusyTimeout(busyTimeoutMillis * time.Millisecond)
	w := &wconn{c: c}
	for _, q := range []string{
		`PRAGMA journal_mode = WAL`,
		`PRAGMA synchronous = ` + loc.synchronous,
		`PRAGMA foreign_keys = ON`,
		fmt.Sprintf(`PRAGMA wal_autocheckpoint = %d`, walCheckpointPages),
	} {
		if err := w.pragma(q); err != nil {
			c.Close()
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	return w, nil
}

// pragma runs a statement once, without keeping it prepared.
func (c *wconn) pragma(q string) error {
	st, _, err := c.c.PrepareTransient(q)
	if err != nil {
		return err
	}
	defer st.Finalize()
	for {
		row, err := st.Step()
		if err != nil || !row {
			return err
		}
	}
}

// prepare returns the statement for q, prepared on first use and kept, reset and with its
// arguments bound.
func (c *wconn) prepare(q string, args []arg) (*zsqlite.Stmt, error) {
	st, err := c.c.Prepare(q)
	if err != nil {
		return nil, err
	}
	for i, a := range args {
		switch a.kind {
		case argNull:
			st.BindNull(i + 1)
		case argText:
			st.BindText(i+1, a.s) // copied into SQLite's memory here
		case argInt:
			st.BindInt64(i+1, a.n)
		}
	}
	return st, nil
}

// run steps a statement to its end.
func run(st *zsqlite.Stmt) error {
	for {
		row, err := st.Step()
		if err != nil || !row {
			return err
		}
	}
}

// exec runs a statement and returns the number of rows it changed.
func (c *wconn) exec(q string, args ...any) (int64, error) {
	a, err := c.anyArgs(q, args)
	if err != nil {
		return 0, err
	}
	return c.execArgs(q, a...)
}

// execArgs is exec with typed arguments.
func (c *wconn) execArgs(q string, args ...arg) (int64, error) {
	st, err := c.prepare(q, args)
	if err != nil {
		return 0, err
	}
	if err := run(st); err != nil {
		return 0, err
	}
	return int64(c.c.Changes()), nil
}

// insertArgs runs an INSERT and returns the rowid of the last row it inserted.
func (c *wconn) insertArgs(q string, args ...arg) (int64, error) {
	st, err := c.prepare(q, args)
	if err != nil {
		return 0, err
	}
	if err := run(st); err != nil {
		return 0, err
	}
	return c.c.LastInsertRowID(), nil
}

// queryRow runs a query for at most one row and passes it to scan; found is false when there
// is none.
func (c *wconn) queryRow(q string, args []any, scan func(scanner) error) (found bool, err error) {
	a, err := c.anyArgs(q, args)
	if err != nil {
		return false, err
	}
	return c.queryRowArgs(q, a, scan)
}

// queryRowArgs is queryRow with typed arguments.
func (c *wconn) queryRowArgs(q string, args []arg, scan func(scanner) error) (found bool, err error) {
	st, err := c.prepare(q, args)
	if err != nil {
		return false, err
	}
	defer resetStmt(st, &err)
	row, err := st.Step()
	if err != nil || !row {
		return false, err
	}
	c.row.st = st
	return true, scan(&c.row)
}

// query runs a query and passes each row to scan.
func (c *wconn) query(q string, args []any, scan func(scanner) error) (err error) {
	a, err := c.anyArgs(q, args)
	if err != nil {
		return err
	}
	st, err := c.prepare(q, a)
	if err != nil {
		return err
	}
	defer resetStmt(st, &err)
	r := &zrow{st: st} // scan may run another query on c
	for {
		row, err := st.Step()
		if err != nil || !row {
			return err
		}
		if err := scan(r); err != nil {
			return err
		}
	}
}

// resetStmt ends a query that may not have been stepped to its end, so that it holds nothing
// open; its error goes to *err when there is none yet.
func resetStmt(st *zsqlite.Stmt, err *error) {
	if rerr := st.Reset(); *err == nil {
		*err = rerr
	}
}

// zrow is the current row of a statement, scanned into the destinations the scanners here use,
// as database/sql would scan them: a NULL only into a sql.Null* (or another sql.Scanner).
type zrow struct{ st *zsqlite.Stmt }

func (r *zrow) Scan(dest ...any) error {
	if n := r.st.ColumnCount(); len(dest) != n {
		return fmt.Errorf("scan: %d destinations for %d columns", len(dest), n)
	}
	for i, d := range dest {
		typ := r.st.ColumnType(i)
		ok := true
		switch d := d.(type) {
		case *string:
			*d, ok = r.st.ColumnText(i), typ == zsqlite.TypeText
		case *int64:
			*d, ok = r.st.ColumnInt64(i), typ == zsqlite.TypeInteger
		case *int:
			*d, ok = int(r.st.ColumnInt64(i)), typ == zsqlite.TypeInteger
		case *sql.NullString:
			d.Valid = typ != zsqlite.TypeNull
			d.String, ok = "", typ == zsqlite.TypeNull || typ == zsqlite.TypeText
			if d.Valid {
				d.String = r.st.ColumnText(i)
			}
		case *sql.NullInt64:
			d.Valid = typ != zsqlite.TypeNull
			d.Int64, ok = r.st.ColumnInt64(i), typ == zsqlite.TypeNull || typ == zsqlite.TypeInteger
		case sql.Scanner:
			if err := d.Scan(r.value(i, typ)); err != nil {
				return fmt.Errorf("scan column %d: %w", i, err)
			}
		default:
			ok = false
		}
		if !ok {
			return fmt.Errorf("scan column %d: cannot store a %s value in %T", i, typ, d)
		}
	}
	return nil
}

// rowCheck reads columns of a zrow with the types zrow.Scan requires, keeping the first
// mismatch.
type rowCheck struct{ err error }

func (c *rowCheck) want(r *zrow, i int, ok bool) {
	if !ok && c.err == nil {
		c.err = fmt.Errorf("scan column %d: unexpected %s value", i, r.st.ColumnType(i))
	}
}

func (c *rowCheck) text(r *zrow, i int) string {
	c.want(r, i, r.st.ColumnType(i) == zsqlite.TypeText)
	return r.st.ColumnText(i)
}

func (c *rowCheck) integer(r *zrow, i int) int64 {
	c.want(r, i, r.st.ColumnType(i) == zsqlite.TypeInteger)
	return r.st.ColumnInt64(i)
}

func (c *rowCheck) nullText(r *zrow, i int) sql.NullString {
	typ := r.st.ColumnType(i)
	c.want(r, i, typ == zsqlite.TypeText || typ == zsqlite.TypeNull)
	if typ == zsqlite.TypeNull {
		return sql.NullString{}
	}
	return sql.NullString{String: r.st.ColumnText(i), Valid: true}
}

func (c *rowCheck) nullInteger(r *zrow, i int) sql.NullInt64 {
	typ := r.st.ColumnType(i)
	c.want(r, i, typ == zsqlite.TypeInteger || typ == zsqlite.TypeNull)
	return sql.NullInt64{Int64: r.st.ColumnInt64(i), Valid: typ != zsqlite.TypeNull}
}

// value is column i as database/sql's driver would return it.
func (r *zrow) value(i int, typ zsqlite.ColumnType) any {
	switch typ {
	case zsqlite.TypeInteger:
		return r.st.ColumnInt64(i)
	case zsqlite.TypeFloat:
		return r.st.ColumnFloat(i)
	case zsqlite.TypeText:
		return r.st.ColumnText(i)
	case zsqlite.TypeBlob:
		b := make([]byte, r.st.ColumnLen(i))
		r.st.ColumnBytes(i, b)
		return b
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
	// What the writer learns from the transaction once it commits (executing.go): the ids of
	// the event rows it appended and the effects it made executing or moved out of executing.
	rowIDs  []idRange
	changes []executingChange
	marked  map[string]struct{} // the batch began by moving the executing mark: w.inflight after it
}

// headMark is what a request's savepoint must restore of the transaction's memory.
type headMark struct {
	read          bool
	head          receipt.Head
	rows, changes int // lengths of t.rowIDs and t.changes
}

func (t *txn) mark() headMark { return headMark{t.headRead, t.head, len(t.rowIDs), len(t.changes)} }
func (t *txn) reset(m headMark) {
	t.headRead, t.head = m.read, m.head
	t.rowIDs, t.changes = t.rowIDs[:m.rows], t.changes[:m.changes]
}
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
	n, err := t.c.execArgs(`UPDATE chain_head SET seq = ?, hash = ? WHERE id = 1 AND seq = ?`, integer(t.head.Seq), text(t.head.Hash), integer(t.base.Seq))
	return checkRows(n, err, "chain head")
}

// queued is the length of the queue.
func (w *writer) queued() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue)
}
