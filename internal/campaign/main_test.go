package campaign

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) {
	Child()
	os.Exit(m.Run())
}

// backend is one store the campaign runs against.
type backend struct {
	name string
	url  func(t *testing.T, dir string) string
}

var backends = []backend{
	{"sqlite", func(t *testing.T, dir string) string { return "sqlite:" + filepath.Join(dir, "state.db") }},
	{"postgres", postgresURL},
}

// postgresURL returns a URL naming a fresh schema on the test server (dropped at cleanup), or
// skips when no server is configured (fails under LATCH_REQUIRE_POSTGRES=1).
func postgresURL(t *testing.T, _ string) string {
	t.Helper()
	raw := os.Getenv("LATCH_TEST_POSTGRES_URL")
	if raw == "" {
		if os.Getenv("LATCH_REQUIRE_POSTGRES") == "1" {
			t.Fatal("LATCH_TEST_POSTGRES_URL is unset and LATCH_REQUIRE_POSTGRES=1: run ./scripts/test.sh, which starts a server")
		}
		t.Skip("LATCH_TEST_POSTGRES_URL is unset: skipping Postgres (./scripts/test.sh starts a server)")
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("url.Parse(LATCH_TEST_POSTGRES_URL) = %v", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails
	schema := "campaign_" + hex.EncodeToString(b[:])
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, raw)
		if err != nil {
			t.Logf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Logf("drop schema %s: %v", schema, err)
		}
	})
	return u.String()
}

// runChild runs a driver process to its end and returns its stdout, its exit state and its
// stderr.
func runChild(ctx context.Context, t *testing.T, spec *childSpec) ([]byte, *os.ProcessState, string) {
	t.Helper()
	cmd, err := spec.command(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s driver: %v", spec.Role, err)
	}
	_ = cmd.Wait() // the exit state is judged by the caller
	return stdout.Bytes(), cmd.ProcessState, stderr.String()
}
