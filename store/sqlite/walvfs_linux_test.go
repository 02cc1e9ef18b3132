package sqlite

import (
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestWALWriterWriteFailsTheCommit: a commit whose frames cannot all be written (here the
// process's file size limit, as a full disk would) fails, in a real process, and loses
// nothing: every earlier commit reads back, the failed one is absent, and the database is
// whole. The write that fails is the WAL writer's, at the commit frame.
func TestWALWriterWriteFailsTheCommit(t *testing.T) {
	if path := os.Getenv("LATCH_WAL_FSIZE_CHILD"); path != "" {
		walFsizeChild(t, path)
		return
	}
	path := filepath.Join(t.TempDir(), "w.db")
	cmd := osexec.Command(os.Args[0], "-test.run=^TestWALWriterWriteFailsTheCommit$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "LATCH_WAL_FSIZE_CHILD="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "commit refused:") || !strings.Contains(string(out), "rows after the refused commit: 20") {
		t.Fatalf("child did not report a refused commit and 20 rows:\n%s", out)
	}
	r := walConn(t, path, false)
	if n := walInt(t, r, `SELECT count(*) FROM t`); n != 20 {
		t.Fatalf("after the refused commit the database holds %d rows, want the 20 committed", n)
	}
	if n := walInt(t, r, `SELECT count(*) FROM t WHERE k = 'refused'`); n != 0 {
		t.Fatalf("the refused commit left %d rows", n)
	}
	walExec(t, r, `INSERT INTO t (k, v) VALUES ('later', 'v')`)
	r.Close()
	walIntegrity(t, path)
}

func walFsizeChild(t *testing.T, path string) {
	w := walConn(t, path, true)
	walSchema(t, w)
	for i := range 20 {
		walExec(t, w, fmt.Sprintf(`INSERT INTO t (k, v) VALUES ('k%d', 'v%d')`, i, i))
	}
	limit := max(fileSize(t, path+"-wal"), fileSize(t, path)) + 100 // less than one more frame
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: uint64(limit), Max: ^uint64(0)}); err != nil {
		t.Fatal(err)
	}
	err := walTry(w, `INSERT INTO t (k, v) SELECT 'refused', printf('%.3000c', 'x')`)
	if err == nil {
		t.Fatal("a commit past the file size limit succeeded")
	}
	fmt.Printf("commit refused: %v\n", err)
	fmt.Printf("rows after the refused commit: %d\n", walInt(t, w, `SELECT count(*) FROM t`))
}
