package sqlite

import (
	"errors"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// TestFilesPrivate checks that a writer creates the store's directory 0700 and the database, its
// -wal, -shm and -lock files 0600: approval ids in them are bearer capabilities.
func TestFilesPrivate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "a", ".latch")
	path := filepath.Join(dir, "state.db")
	s := open(t, "sqlite:"+path, nil)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if _, err := s.Record(t.Context(), &store.RecordRequest{Now: now, Receipt: deniedReceipt("act_1", now)}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Dir(dir), dir} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("directory %s: %v, %v; want mode 0700", p, fi.Mode().Perm(), err)
		}
	}
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-lock"} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v; want mode 0600", p, statMode(p))
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 4 {
		t.Errorf("%s holds %d files, want the database, -wal, -shm and -lock (no leftover temporary file)", dir, len(entries))
	}
}

func statMode(p string) string {
	fi, err := os.Stat(p)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("mode %v", fi.Mode().Perm())
}

func deniedReceipt(actionID string, now time.Time) *receipt.Receipt {
	return &receipt.Receipt{
		ReceiptID: "rcp_" + actionID, ActionID: actionID, Action: "a", ActionHash: "sha256:00", Arguments: []byte("{}"),
		Principal: receipt.Principal{Agent: "x"}, Decision: "deny", Result: "denied", StartedAt: now,
		PolicyHash: "sha256:00", Mode: "enforce",
	}
}

// TestNotWritableNamed checks that a writer refuses, at Open and naming the path, a store it
// could not write: a read-only database file, a read-only directory it must create files in, a
// read-only -shm file left behind. (SQLite opens such a database read-only without a word, and
// the first write fails "attempt to write a readonly database", naming nothing.) The opens run
// in a process that file modes bind: this one, or a copy of the test binary run as nobody when
// this one is root.
func TestNotWritableNamed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(dir, path string) error
		want  string // the path the error must name
		what  string
	}{
		{"file", func(dir, path string) error { return os.Chmod(path, 0o400) }, "state.db", "file"},
		{"directory", func(dir, path string) error {
			for _, suffix := range []string{"-wal", "-shm", "-lock"} {
				os.Remove(path + suffix)
			}
			return os.Chmod(dir, 0o500)
		}, ".latch", "directory"},
		{"shm", func(dir, path string) error { return os.WriteFile(path+"-shm", nil, 0o400) }, "state.db-shm", "file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := sharedTempDir(t)
			dir := filepath.Join(base, ".latch")
			path := filepath.Join(dir, "state.db")
			openClose(t, "sqlite:"+path, nil).Close()
			if err := tc.setup(dir, path); err != nil {
				t.Fatal(err)
			}
			out := runUnprivileged(t, base, "TestNotWritableChild", "LATCH_TEST_NOT_WRITABLE="+path)
			want := fmt.Sprintf("the %s %s is read-only to this process", tc.what, filepath.Join(dir, strings.TrimPrefix(tc.want, ".latch")))
			if tc.want == ".latch" {
				want = fmt.Sprintf("the directory %s is read-only to this process", dir)
			}
			if !strings.Contains(out, "not writable: true") || !strings.Contains(out, want) {
				t.Errorf("writer Open of %s (%s read-only) said:\n%s\nwant ErrNotWritable and %q", path, tc.name, out, want)
			}
		})
	}
}

// TestNotWritableChild is the child of TestNotWritableNamed: it opens the store a writer and
// prints the error.
func TestNotWritableChild(t *testing.T) {
	path := os.Getenv("LATCH_TEST_NOT_WRITABLE")
	if path == "" {
		return // run as a child only
	}
	s, err := Open(t.Context(), "sqlite:"+path, nil)
	if err == nil {
		now := time.Now()
		_, err = s.Record(t.Context(), &store.RecordRequest{Now: now, Receipt: deniedReceipt("act_child", now)})
		s.Close()
	}
	fmt.Printf("error: %v\nnot writable: %v\n", err, errors.Is(err, ErrNotWritable))
}

// sharedTempDir returns a temporary directory that an unprivileged child can reach.
func sharedTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "latch-files-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { os.Chmod(p, 0o700); return nil })
		os.RemoveAll(dir)
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runUnprivileged runs the test named test of this binary with env added, as this user when it
// is not root, else as nobody (a copy of the binary in dir, dir and everything in it given to
// nobody), and returns its output.
func runUnprivileged(t *testing.T, dir, test string, env ...string) string {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := osexec.CommandContext(t.Context(), bin, "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	if os.Geteuid() == 0 {
		const nobody = 65534
		cp := filepath.Join(dir, "child.test")
		if err := copyFile(bin, cp); err != nil {
			t.Fatal(err)
		}
		err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, nobody, nobody)
		})
		if err != nil {
			t.Fatal(err)
		}
		cmd.Path, cmd.Args[0] = cp, cp
		cmd.Dir = dir
		cmd.Env = append(cmd.Env, "HOME="+dir, "GOCOVERDIR="+dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", test, err, out)
	}
	return string(out)
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
