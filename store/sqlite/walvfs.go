package sqlite

// The WAL writer. SQLite appends a transaction to its write-ahead log one frame at a time, and
// each frame is two writes: its 24-byte header and then its page. A protected call commits some
// 14 pages in its two transactions, so some 29 write system calls, and on a machine where a
// system call costs a few microseconds they were the largest part of a call's CPU.
//
// walVFS is SQLite's default VFS with one difference: the frames a transaction writes to a WAL
// file are gathered in memory, in order, and written in one call when the transaction's commit
// frame is complete. Nothing else changes:
//
//   - A commit is written before SQLite's write of its commit frame returns, so before SQLite
//     publishes it in the WAL index, where readers look: no reader, in this process or another,
//     can see a commit whose frames are not in the file. A write that fails (a full disk) fails
//     that write of the commit frame, and SQLite rolls the transaction back as it would have.
//   - Frames of a transaction that has not committed (a cache spill) are written before any other
//     use of the WAL file (a read, a sync, a size, a truncation, a file control, its close, a
//     write that does not follow them), and before the connection releases any WAL lock, so
//     before another connection can append where they lie: the file holds what SQLite wrote, in
//     the order it wrote it.
//   - With synchronous=FULL, SQLite syncs the WAL after the commit frame; every byte is written by
//     then.
//
// A commit frame is the one whose header carries the database size after the commit (bytes 4–7,
// never zero for a commit frame, always zero for any other frame).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"modernc.org/libc"
	"modernc.org/libc/sys/types"
	sqlite3 "modernc.org/sqlite/lib"
)

// walVFSName is the name the WAL writer is registered under; the store's writer connections name
// it in their URI (vfs=…).
const walVFSName = "latch-wal"

const (
	walFrameHeader = 24      // bytes of a WAL frame's header
	walBufferMax   = 4 << 20 // bytes gathered before they are written whatever follows
	// walWriteMax is the most one write of the base VFS takes: the unix VFS writes at most
	// 0x1ffff bytes a call and reports a longer write as a full disk.
	walWriteMax = 0x1f000
)

var (
	walVFSOnce  sync.Once
	walVFSErr   error
	walBase     uintptr // the default VFS it wraps
	walBaseOpen uintptr // its xOpen

	walMu      sync.Mutex
	walMethods = map[walTableKey]*walMethodTable{}
	walFiles   = map[uintptr]*walFile{} // WAL files by sqlite3_file
	walDBFiles = map[uintptr]*walDB{}   // database files by sqlite3_file
	walDBs     = map[uintptr]*walDB{}   // database files by the name they were opened with
)

// walCounts counts, for the tests, the frames the WAL writer gathered and the writes it made.
var walCounts struct{ frames, writes atomic.Int64 }

// walTableKey names a method table: the base VFS's methods it wraps, for a database file or a
// WAL file.
type walTableKey struct {
	base uintptr
	db   bool
}

// walDB is an open database file and the WAL file of the same connection.
type walDB struct {
	base *sqlite3.Tsqlite3_io_methods
	name uintptr
	wal  *walFile
}

// walMethodTable is a copy, in SQLite's memory, of the base VFS's io methods with some replaced.
type walMethodTable struct {
	base    *sqlite3.Tsqlite3_io_methods
	methods uintptr // *sqlite3.Tsqlite3_io_methods
}

// walFile is one open WAL file: the bytes gathered and where they go.
type walFile struct {
	base    *sqlite3.Tsqlite3_io_methods
	pFile   uintptr
	name    string // the file's path
	db      *walDB
	buf     uintptr // the bytes gathered, in SQLite's memory
	n, size int     // bytes gathered; bytes buf can hold
	off     int64   // the file offset of the first byte gathered
	commit  bool    // the last frame header written was a commit frame's
}

// registerWALVFS registers the WAL writer once per process.
func registerWALVFS() error {
	walVFSOnce.Do(func() {
		tls := libc.NewTLS()
		defer tls.Close()
		walBase = sqlite3.Xsqlite3_vfs_find(tls, 0)
		if walBase == 0 {
			walVFSErr = errors.New("sqlite: no default VFS to write the WAL through")
			return
		}
		base := (*sqlite3.Tsqlite3_vfs)(cptr(walBase))
		// Everything SQLite keeps an address of is in its own memory, outside Go's heap.
		p := libc.Xcalloc(tls, 1, types.Size_t(unsafe.Sizeof(sqlite3.Tsqlite3_vfs{})))
		if p == 0 {
			walVFSErr = errors.New("sqlite: out of memory registering the WAL writer")
			return
		}
		v := (*sqlite3.Tsqlite3_vfs)(cptr(p))
		*v = *base
		v.FpNext = 0
		name, err := libc.CString(walVFSName)
		if err != nil {
			walVFSErr = err
			return
		}
		v.FzName = name
		walBaseOpen = base.FxOpen
		*(*func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32)(unsafe.Pointer(&v.FxOpen)) = walOpen
		if rc := sqlite3.Xsqlite3_vfs_register(tls, p, 0); rc != sqlite3.SQLITE_OK {
			walVFSErr = fmt.Errorf("sqlite: registering the WAL writer: result code %d", rc)
		}
	})
	return walVFSErr
}

// walOpen is the WAL writer's xOpen: the base VFS opens the file; a WAL file gets the gathering
// methods, and a database file the methods that write its WAL's gathered bytes when a lock is
// released.
func walOpen(tls *libc.TLS, _ uintptr, zName, pFile uintptr, flags int32, pOutFlags uintptr) int32 {
	rc := (*(*func(*libc.TLS, uintptr, uintptr, uintptr, int32, uintptr) int32)(unsafe.Pointer(&struct{ uintptr }{walBaseOpen})))(tls, walBase, zName, pFile, flags, pOutFlags)
	file := (*sqlite3.Tsqlite3_file)(cptr(pFile))
	if rc != sqlite3.SQLITE_OK || file.FpMethods == 0 || zName == 0 {
		return rc
	}
	if flags&(sqlite3.SQLITE_OPEN_WAL|sqlite3.SQLITE_OPEN_MAIN_DB) == 0 {
		return rc
	}
	walMu.Lock()
	defer walMu.Unlock()
	t := walTable(tls, file.FpMethods, flags&sqlite3.SQLITE_OPEN_MAIN_DB != 0)
	if t == nil {
		return rc // out of memory: the file keeps the base VFS's methods, and works as they do
	}
	if flags&sqlite3.SQLITE_OPEN_WAL != 0 {
		// The pager allocates the names of its database and its WAL together, and SQLite finds
		// the database's from the WAL's: the very address the database was opened with.
		f := &walFile{base: t.base, pFile: pFile, name: libc.GoString(zName)}
		walFiles[pFile] = f
		if d := walDBs[sqlite3.Xsqlite3_filename_database(tls, zName)]; d != nil {
			d.wal, f.db = f, d
		}
	} else {
		d := &walDB{base: t.base, name: zName}
		walDBs[zName] = d
		walDBFiles[pFile] = d
	}
	file.FpMethods = t.methods
	return rc
}

// walTable is the method table for a file the base VFS opened with the methods at base: a WAL
// file's (db false) or a database file's. Called with walMu held.
func walTable(tls *libc.TLS, base uintptr, db bool) *walMethodTable {
	k := walTableKey{base, db}
	if t := walMethods[k]; t != nil {
		return t
	}
	t := &walMethodTable{base: (*sqlite3.Tsqlite3_io_methods)(cptr(base))}
	t.methods = libc.Xcalloc(tls, 1, types.Size_t(unsafe.Sizeof(sqlite3.Tsqlite3_io_methods{})))
	if t.methods == 0 {
		return nil
	}
	m := (*sqlite3.Tsqlite3_io_methods)(cptr(t.methods))
	*m = *t.base
	if db {
		*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&m.FxClose)) = walDBClose
		*(*func(*libc.TLS, uintptr, int32, int32, int32) int32)(unsafe.Pointer(&m.FxShmLock)) = walDBShmLock
	} else {
		*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&m.FxClose)) = walClose
		*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&m.FxRead)) = walRead
		*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&m.FxWrite)) = walWrite
		*(*func(*libc.TLS, uintptr, int64) int32)(unsafe.Pointer(&m.FxTruncate)) = walTruncate
		*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&m.FxSync)) = walSync
		*(*func(*libc.TLS, uintptr, uintptr) int32)(unsafe.Pointer(&m.FxFileSize)) = walFileSize
		*(*func(*libc.TLS, uintptr, int32, uintptr) int32)(unsafe.Pointer(&m.FxFileControl)) = walFileControl
	}
	walMethods[k] = t
	return t
}

// walFileOf is the state of an open WAL file.
func walFileOf(pFile uintptr) *walFile {
	walMu.Lock()
	f := walFiles[pFile]
	walMu.Unlock()
	return f
}

// walDBShmLock is a database file's xShmLock. Before a lock is released, the bytes its WAL has
// gathered are written: they are frames of a transaction that did not commit (a commit's frames
// are written with its commit frame), and once the write lock is released another connection
// may append at the same offsets, which a later write of these bytes would overwrite.
func walDBShmLock(tls *libc.TLS, pFile uintptr, ofst, n, flags int32) int32 {
	walMu.Lock()
	d := walDBFiles[pFile]
	walMu.Unlock()
	if flags&sqlite3.SQLITE_SHM_UNLOCK != 0 && d.wal != nil {
		// An error here belongs to bytes no reader can reach; SQLite's own write of them would
		// have failed as silently at the end of a rolled-back transaction.
		_ = d.wal.flush(tls)
	}
	return (*(*func(*libc.TLS, uintptr, int32, int32, int32) int32)(unsafe.Pointer(&struct{ uintptr }{d.base.FxShmLock})))(tls, pFile, ofst, n, flags)
}

func walDBClose(tls *libc.TLS, pFile uintptr) int32 {
	walMu.Lock()
	d := walDBFiles[pFile]
	delete(walDBFiles, pFile)
	if walDBs[d.name] == d {
		delete(walDBs, d.name)
	}
	if d.wal != nil {
		d.wal.db = nil
	}
	walMu.Unlock()
	return (*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&struct{ uintptr }{d.base.FxClose})))(tls, pFile)
}

// flush writes what f has gathered.
func (f *walFile) flush(tls *libc.TLS) int32 {
	if f.n == 0 {
		return sqlite3.SQLITE_OK
	}
	b, n, off := f.buf, f.n, f.off
	f.n = 0
	for n > 0 {
		m := min(n, walWriteMax)
		if rc := f.write(tls, b, int32(m), off); rc != sqlite3.SQLITE_OK {
			return rc
		}
		walCounts.writes.Add(1)
		b, n, off = b+uintptr(m), n-m, off+int64(m)
	}
	return sqlite3.SQLITE_OK
}

func walWrite(tls *libc.TLS, pFile, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	f := walFileOf(pFile)
	if f.n > 0 && iOfst != f.off+int64(f.n) {
		if rc := f.flush(tls); rc != sqlite3.SQLITE_OK {
			return rc
		}
	}
	if f.n+int(iAmt) > f.size {
		if !f.grow(tls, f.n+int(iAmt)) {
			// No memory to gather in: write what is gathered, then this write, as SQLite would.
			if rc := f.flush(tls); rc != sqlite3.SQLITE_OK {
				return rc
			}
			return f.write(tls, zBuf, iAmt, iOfst)
		}
	}
	if f.n == 0 {
		f.off = iOfst
	}
	data := unsafe.Slice((*byte)(cptr(zBuf)), iAmt)
	copy(unsafe.Slice((*byte)(cptr(f.buf+uintptr(f.n))), iAmt), data)
	f.n += int(iAmt)
	switch {
	case iAmt == walFrameHeader:
		walCounts.frames.Add(1)
		f.commit = binary.BigEndian.Uint32(data[4:8]) != 0
	case f.commit:
		// The page of a commit frame (or a part of it, where SQLite syncs inside a frame): the
		// transaction is complete. Until the next frame's header, each write is written as it
		// comes, as SQLite's own VFS would.
		return f.flush(tls)
	case f.n >= walBufferMax:
		return f.flush(tls)
	}
	return sqlite3.SQLITE_OK
}

// write writes n bytes at p to the file at off through the base VFS.
func (f *walFile) write(tls *libc.TLS, p uintptr, n int32, off int64) int32 {
	return (*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&struct{ uintptr }{f.base.FxWrite})))(tls, f.pFile, p, n, off)
}

// grow makes room for n bytes in f.buf, keeping what it holds.
func (f *walFile) grow(tls *libc.TLS, n int) bool {
	size := max(n, 2*f.size, 64<<10)
	p := libc.Xrealloc(tls, f.buf, types.Size_t(size))
	if p == 0 {
		return false
	}
	f.buf, f.size = p, size
	return true
}

func walRead(tls *libc.TLS, pFile, zBuf uintptr, iAmt int32, iOfst int64) int32 {
	f := walFileOf(pFile)
	if rc := f.flush(tls); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return (*(*func(*libc.TLS, uintptr, uintptr, int32, int64) int32)(unsafe.Pointer(&struct{ uintptr }{f.base.FxRead})))(tls, pFile, zBuf, iAmt, iOfst)
}

func walTruncate(tls *libc.TLS, pFile uintptr, size int64) int32 {
	f := walFileOf(pFile)
	if rc := f.flush(tls); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return (*(*func(*libc.TLS, uintptr, int64) int32)(unsafe.Pointer(&struct{ uintptr }{f.base.FxTruncate})))(tls, pFile, size)
}

func walSync(tls *libc.TLS, pFile uintptr, flags int32) int32 {
	f := walFileOf(pFile)
	if rc := f.flush(tls); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return (*(*func(*libc.TLS, uintptr, int32) int32)(unsafe.Pointer(&struct{ uintptr }{f.base.FxSync})))(tls, pFile, flags)
}

func walFileSize(tls *libc.TLS, pFile, pSize uintptr) int32 {
	f := walFileOf(pFile)
	if rc := f.flush(tls); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return (*(*func(*libc.TLS, uintptr, uintptr) int32)(unsafe.Pointer(&struct{ uintptr }{f.base.FxFileSize})))(tls, pFile, pSize)
}

func walFileControl(tls *libc.TLS, pFile uintptr, op int32, pArg uintptr) int32 {
	f := walFileOf(pFile)
	if rc := f.flush(tls); rc != sqlite3.SQLITE_OK {
		return rc
	}
	return (*(*func(*libc.TLS, uintptr, int32, uintptr) int32)(unsafe.Pointer(&struct{ uintptr }{f.base.FxFileControl})))(tls, pFile, op, pArg)
}

func walClose(tls *libc.TLS, pFile uintptr) int32 {
	f := walFileOf(pFile)
	rc := f.flush(tls)
	walMu.Lock()
	delete(walFiles, pFile)
	if f.db != nil {
		f.db.wal = nil
	}
	walMu.Unlock()
	libc.Xfree(tls, f.buf)
	if crc := (*(*func(*libc.TLS, uintptr) int32)(unsafe.Pointer(&struct{ uintptr }{f.base.FxClose})))(tls, pFile); rc == sqlite3.SQLITE_OK {
		rc = crc
	}
	return rc
}

// cptr is the memory SQLite passes as an address: its own allocations, outside Go's heap, which
// the collector neither moves nor frees.
func cptr(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }
