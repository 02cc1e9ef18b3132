package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	sqlitedriver "modernc.org/sqlite"
	sqlitelib "modernc.org/sqlite/lib"
	zsqlite "zombiezen.com/go/sqlite"
)

// createPrivate creates the database file at path with mode 0600 if it does not exist. SQLite
// would create it 0644, and its -wal and -shm files take the database file's mode, so creating
// it first keeps all three private. An existing file keeps its mode.
//
// The file is made under a temporary name and linked into place, so that no descriptor of the
// database file itself is ever opened here: closing one would drop the POSIX locks SQLite holds
// on it for other stores of this process.
func createPrivate(path string) error {
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil // it exists (or cannot be looked at, which SQLite will report)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".new-*")
	if err != nil {
		return notWritable(filepath.Dir(path), err)
	}
	name := tmp.Name()
	defer os.Remove(name)
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Link(name, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// checkWritable refuses a store a writer could open but not write, naming what is read-only.
// SQLite opens a database it cannot write read-only without a word and fails at the first write
// with "attempt to write a readonly database", naming nothing. A writer needs the database file,
// its -wal, -shm and -lock files writable, and the directory writable when any of those has yet
// to be created. Access is asked of the system (access(2)), never by opening the files, for the
// reason given at createPrivate.
func checkWritable(path string) error {
	dir := filepath.Dir(path)
	missing := false
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-lock"} {
		err := canWrite(p)
		switch {
		case err == nil:
		case errors.Is(err, fs.ErrNotExist):
			missing = true
		default:
			return notWritable(p, err)
		}
	}
	if missing {
		if err := canWrite(dir); err != nil {
			return notWritable(dir, err)
		}
	}
	return nil
}

// notWritable explains a path this process cannot write.
func notWritable(path string, err error) error {
	what := "file"
	if fi, serr := os.Stat(path); serr == nil {
		if fi.IsDir() {
			what = "directory"
		}
		return fmt.Errorf("%w: the %s %s is read-only to this process (mode %v): a writer needs to write it; "+
			"open the store read-only to read it: %v", ErrNotWritable, what, path, fi.Mode().Perm(), err)
	}
	return fmt.Errorf("%w: %s: %v", ErrNotWritable, path, err)
}

// ErrNotWritable is matched by the error of a writer's Open when the database file, one of its
// -wal, -shm and -lock files or its directory cannot be written by this process, and by a write
// that SQLite refused because the database had become read-only.
var ErrNotWritable = errors.New("store not writable")

// readOnlyError names the store when SQLite refuses a write because the database is read-only
// (its file, its -wal or -shm file, or its directory changed mode after the store opened).
func (s *Store) readOnlyError(err error) error {
	if err == nil {
		return nil // before errors.As, whose target would escape: two allocations a write
	}
	var se *sqlitedriver.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlitelib.SQLITE_READONLY || zsqlite.ErrCode(err).ToPrimary() == zsqlite.ResultReadOnly {
		return fmt.Errorf("%w: %s, its -wal or -shm file or its directory is read-only to this process: %w",
			ErrNotWritable, s.path, err)
	}
	return err
}
