package sqlite

import (
	"context"
	"errors"
	"sync"
	"time"

	zsqlite "zombiezen.com/go/sqlite"

	"github.com/latchkit/latch/receipt"
)

// lookupPool holds read connections used directly, on SQLite's statement API, rather than
// through the database/sql reader pool, for the two reads that run most: TokenByHash (latch
// serve, every request; through database/sql, whose per-query work — connection checkout,
// argument conversion, rows — was half of it, the lookup cost a tenth of the server's CPU) and
// the receipt walk of Receipts (database/sql's scan and a second copy of each document cost
// about 3 µs a receipt, most of a chain walk). Each connection keeps its statements prepared.
// Connections are opened when no idle one is free, and at most lookupIdle are kept.
type lookupPool struct {
	mu     sync.Mutex
	idle   []*wconn
	closed bool
}

// lookupIdle bounds the idle connections a lookupPool keeps.
const lookupIdle = 4

// take returns an idle connection, or a new read-only connection to path.
func (p *lookupPool) take(path string) (*wconn, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("store closed")
	}
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	c, err := zsqlite.OpenConn(uri(path), zsqlite.OpenReadOnly|zsqlite.OpenURI)
	if err != nil {
		return nil, err
	}
	c.SetBusyTimeout(busyTimeoutMillis * time.Millisecond)
	w := &wconn{c: c}
	if err := w.pragma(`PRAGMA query_only = 1`); err != nil {
		c.Close()
		return nil, err
	}
	return w, nil
}

// give returns c after a lookup that ended with err: kept if the lookup succeeded and fewer
// than lookupIdle are idle, closed otherwise.
func (p *lookupPool) give(c *wconn, err error) {
	p.mu.Lock()
	if err == nil && !p.closed && len(p.idle) < lookupIdle {
		p.idle = append(p.idle, c)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	_ = c.c.Close()
}

// close closes the idle connections; a connection in use is closed when it is given back.
func (p *lookupPool) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	for _, c := range p.idle {
		errs = append(errs, c.c.Close())
	}
	p.idle = nil
	return errors.Join(errs...)
}

// errStopped ends a query whose rows' consumer stopped ranging over them.
var errStopped = errors.New("stopped")

// receiptRows runs q (seq, hash, doc) on a direct connection and yields each row, read in one
// statement and so from one snapshot, checking ctx every 1,024 rows. However the walk ends — the
// consumer stops, an error, ctx, a panic in the consumer — the statement is reset (query), so the
// connection holds no read transaction open, and it goes back to the pool.
func (s *Store) receiptRows(ctx context.Context, q string, args []any, yield func(receipt.Sealed, error) bool) (err error) {
	c, err := s.lookups.take(s.path)
	if err != nil {
		return err
	}
	defer func() { s.lookups.give(c, err) }()
	n := 0
	err = sealedRows(c, q, args, func(r receipt.Sealed) error {
		if n++; n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if !yield(r, nil) {
			return errStopped
		}
		return nil
	})
	if errors.Is(err, errStopped) {
		err = nil
	}
	return err
}

// sealedRows runs q, which selects seq, hash and doc, on c and passes each receipt to fn, the
// document copied once, straight from SQLite; an error from fn ends the query and is returned.
func sealedRows(c *wconn, q string, args []any, fn func(receipt.Sealed) error) error {
	return c.query(q, args, func(sc scanner) error {
		r := sc.(*zrow)
		var ck rowCheck
		rc := receipt.Sealed{Seq: ck.integer(r, 0), Hash: ck.text(r, 1)}
		ck.want(r, 2, r.st.ColumnType(2) == zsqlite.TypeText)
		rc.Doc = make([]byte, r.st.ColumnLen(2))
		r.st.ColumnBytes(2, rc.Doc)
		if ck.err != nil {
			return ck.err
		}
		return fn(rc)
	})
}
