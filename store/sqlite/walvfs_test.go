package sqlite

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
	zsqlite "zombiezen.com/go/sqlite"
)

// walConn opens a connection to the database at path, through the WAL writer when gather is set
// and through SQLite's own VFS otherwise, in WAL mode with synchronous=NORMAL.
func walConn(t *testing.T, path string, gather bool, pragmas ...string) *zsqlite.Conn {
	t.Helper()
	name := uri(path)
	if gather {
		if err := registerWALVFS(); err != nil {
			t.Fatal(err)
		}
		name = dsn(path, "vfs="+walVFSName)
	}
	c, err := zsqlite.OpenConn(name, zsqlite.OpenReadWrite|zsqlite.OpenCreate|zsqlite.OpenURI)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for _, q := range append([]string{`PRAGMA busy_timeout = 5000`, `PRAGMA journal_mode = WAL`, `PRAGMA synchronous = NORMAL`}, pragmas...) {
		walExec(t, c, q)
	}
	return c
}

// walExec runs q on c to completion.
func walExec(t *testing.T, c *zsqlite.Conn, q string) {
	t.Helper()
	if err := walTry(c, q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func walTry(c *zsqlite.Conn, q string) error { return (&wconn{c: c}).pragma(q) }

// walInt is the integer q answers on c.
func walInt(t *testing.T, c *zsqlite.Conn, q string) int64 {
	t.Helper()
	st, _, err := c.PrepareTransient(q)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Finalize()
	if row, err := st.Step(); err != nil || !row {
		t.Fatalf("%s: row %v, %v", q, row, err)
	}
	return st.ColumnInt64(0)
}

// walIntegrity fails t unless a connection through SQLite's own VFS finds the database whole.
func walIntegrity(t *testing.T, path string) {
	t.Helper()
	c := walConn(t, path, false)
	st, _, err := c.PrepareTransient(`PRAGMA integrity_check`)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Finalize()
	if row, err := st.Step(); err != nil || !row || st.ColumnText(0) != "ok" {
		t.Fatalf("integrity_check: %v, %q", err, st.ColumnText(0))
	}
}

const walTestSchema = `CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT NOT NULL, v TEXT NOT NULL);
CREATE INDEX t_k ON t (k); CREATE INDEX t_v ON t (v)`

func walSchema(t *testing.T, c *zsqlite.Conn) {
	t.Helper()
	for _, q := range strings.Split(walTestSchema, ";") {
		walExec(t, c, q)
	}
}

// TestWALWriterOneWriteACommit: a transaction that writes several pages reaches the WAL file in
// one write, not two a page, and what it wrote reads back through SQLite's own VFS.
func TestWALWriterOneWriteACommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	w := walConn(t, path, true)
	walSchema(t, w)
	frames0, writes0 := walCounts.frames.Load(), walCounts.writes.Load()
	const commits = 200
	for i := range commits {
		// Keys out of order, so that each commit touches a leaf of each index and the table.
		walExec(t, w, fmt.Sprintf(`INSERT INTO t (k, v) VALUES ('k%d', '%s')`, (i*7919)%commits, strings.Repeat("v", 100+i%50)))
	}
	frames, writes := walCounts.frames.Load()-frames0, walCounts.writes.Load()-writes0
	if frames < 2*commits {
		t.Fatalf("%d commits wrote %d frames; want at least 2 a commit (table and index pages)", commits, frames)
	}
	if writes > commits+2 { // the log's header may be a write of its own
		t.Fatalf("%d commits of %d frames took %d writes; want one a commit", commits, frames, writes)
	}
	r := walConn(t, path, false)
	if n := walInt(t, r, `SELECT count(*) FROM t`); n != commits {
		t.Fatalf("a reader through SQLite's own VFS sees %d rows, want %d", n, commits)
	}
	walIntegrity(t, path)
}

// TestWALWriterCommitReadableAtOnce: every commit is in the file when the commit returns, so a
// connection with its own file descriptor reads it at once.
func TestWALWriterCommitReadableAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	w := walConn(t, path, true)
	walSchema(t, w)
	r := walConn(t, path, false)
	for i := range 300 {
		walExec(t, w, fmt.Sprintf(`INSERT INTO t (id, k, v) VALUES (%d, 'k%d', 'v%d')`, i+1, i, i))
		if got := walInt(t, r, fmt.Sprintf(`SELECT coalesce(sum(length(v)), -1) FROM t WHERE id = %d AND k = 'k%d'`, i+1, i)); got != int64(len(fmt.Sprint("v", i))) {
			t.Fatalf("commit %d: the other connection reads %d, want the row written", i, got)
		}
	}
}

// TestWALWriterSpillRollbackAndLargeCommits: a transaction larger than the page cache spills
// frames before it commits; rolled back, its frames must reach the file before another
// connection appends where they lie, or they would later overwrite that connection's commit. A
// commit of megabytes is written in pieces.
func TestWALWriterSpillRollbackAndLargeCommits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	a := walConn(t, path, true, `PRAGMA cache_size = 8`)
	walSchema(t, a)
	big := func(c *zsqlite.Conn, from, n int) {
		t.Helper()
		walExec(t, c, fmt.Sprintf(`WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < %[2]d) INSERT INTO t (id, k, v) SELECT %[1]d + value, 'k' || value, printf('%%.2000c', 'x') FROM s`, from, n))
	}
	walExec(t, a, `BEGIN IMMEDIATE`)
	big(a, 1_000_000, 3000) // some 6 MB: spills, and is more than one gathering of bytes
	walExec(t, a, `ROLLBACK`)

	b := walConn(t, path, false)
	walExec(t, b, `BEGIN IMMEDIATE`)
	for i := range 50 {
		walExec(t, b, fmt.Sprintf(`INSERT INTO t (id, k, v) VALUES (%d, 'b%d', 'written by b')`, i+1, i))
	}
	walExec(t, b, `COMMIT`)

	// a uses its WAL file again: a read, then a large commit of its own.
	if n := walInt(t, a, `SELECT count(*) FROM t WHERE v = 'written by b'`); n != 50 {
		t.Fatalf("a reads %d of b's rows, want 50", n)
	}
	big(a, 2_000_000, 3000)
	if n := walInt(t, b, `SELECT count(*) FROM t WHERE v = 'written by b'`); n != 50 {
		t.Fatalf("after a's commit, b reads %d of its rows, want 50", n)
	}
	if n := walInt(t, b, `SELECT count(*) FROM t WHERE id > 2000000`); n != 3000 {
		t.Fatalf("b reads %d of a's large commit, want 3000", n)
	}
	a.Close()
	b.Close()
	walIntegrity(t, path)
}

// TestWALWriterUnlockWritesPending: bytes gathered for a transaction that never reached its
// commit frame are written before its connection releases the write lock, so before another
// connection can append at the same offsets.
func TestWALWriterUnlockWritesPending(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	a := walConn(t, path, true)
	walSchema(t, a)
	walExec(t, a, `BEGIN IMMEDIATE`)
	walExec(t, a, `INSERT INTO t (k, v) VALUES ('k', 'v')`) // the write lock is held; nothing is written yet
	f := walFileNamed(t, path+"-wal")
	before := fileSize(t, path+"-wal")
	// A frame that is not a commit frame, where SQLite would append the next one, as a spill
	// writes it.
	frame := make([]byte, walFrameHeader)
	tls := libc.NewTLS()
	defer tls.Close()
	if rc := walWrite(tls, f.pFile, uintptr(unsafe.Pointer(&frame[0])), int32(len(frame)), before); rc != sqlite3.SQLITE_OK {
		t.Fatalf("walWrite: %d", rc)
	}
	if !f.pending() || fileSize(t, path+"-wal") != before {
		t.Fatalf("the frame header was written at once (pending %v); want it gathered", f.pending())
	}
	walExec(t, a, `ROLLBACK`)
	if f.pending() {
		t.Fatal("the connection released its locks with bytes still gathered")
	}
	if got := fileSize(t, path+"-wal"); got < before+walFrameHeader {
		t.Fatalf("the WAL is %d bytes after the rollback, want at least %d: the gathered bytes were not written", got, before+walFrameHeader)
	}
	walIntegrity(t, path)
}

// walFileNamed is the open WAL file at path.
func walFileNamed(t *testing.T, path string) *walFile {
	t.Helper()
	walMu.Lock()
	defer walMu.Unlock()
	for _, f := range walFiles {
		if f.name == path {
			return f
		}
	}
	t.Fatalf("no WAL file %s is open through the WAL writer", path)
	return nil
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestWALWriterCommitFrameWrittenWhole: every byte written after a commit frame's header is
// written at once, also when SQLite writes the frame's page in two parts (it syncs inside a
// frame when it pads a commit to a sector boundary), so no part of a commit waits for a later
// write.
func TestWALWriterCommitFrameWrittenWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.db")
	a := walConn(t, path, true)
	walSchema(t, a)
	walExec(t, a, `BEGIN IMMEDIATE`) // the write lock, so that nobody else appends meanwhile
	f := walFileNamed(t, path+"-wal")
	off := fileSize(t, path+"-wal")
	tls := libc.NewTLS()
	defer tls.Close()
	write := func(b []byte) {
		t.Helper()
		if rc := walWrite(tls, f.pFile, uintptr(unsafe.Pointer(&b[0])), int32(len(b)), off); rc != sqlite3.SQLITE_OK {
			t.Fatalf("walWrite: %d", rc)
		}
		off += int64(len(b))
	}
	// Frames beyond the end of the log, which SQLite never reads: a frame, then a commit
	// frame whose page comes in two parts.
	header := func(commit bool) []byte {
		h := make([]byte, walFrameHeader)
		h[3] = 1 // page 1
		if commit {
			h[7] = 9 // the database's size after the commit
		}
		return h
	}
	page := make([]byte, 4096)
	write(header(false))
	write(page)
	if !f.pending() {
		t.Fatal("a frame that is not a commit frame was written at once; want it gathered")
	}
	write(header(true))
	write(page[:1000])
	if f.pending() || fileSize(t, path+"-wal") != off {
		t.Fatalf("after the first part of a commit frame's page, pending %v, file %d bytes, want all %d written", f.pending(), fileSize(t, path+"-wal"), off)
	}
	write(page[1000:])
	if f.pending() || fileSize(t, path+"-wal") != off {
		t.Fatalf("after the rest of a commit frame's page, pending %v, file %d bytes, want all %d written", f.pending(), fileSize(t, path+"-wal"), off)
	}
	walExec(t, a, `ROLLBACK`)
	walIntegrity(t, path)
}

// pending reports whether f holds bytes not yet written.
func (f *walFile) pending() bool { return f.n > 0 }
