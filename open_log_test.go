package latch_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchkit/latch"
)

// TestOpenLogsStoreAndPolicy: Open says once, at Info, which store (absolute path, or URL
// without its password) and which policy (file and hash) and mode it runs on.
func TestOpenLogsStoreAndPolicy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	policyPath := filepath.Join(dir, "latch.yaml")
	if err := os.WriteFile(policyPath, []byte(testPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	g, err := latch.Open(t.Context(), &latch.Config{PolicyPath: policyPath, StoreURL: "sqlite:" + filepath.Join(dir, "s.db"), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	out := buf.String()
	if n := strings.Count(out, "guard open"); n != 1 {
		t.Fatalf("log has %d \"guard open\" lines, want 1:\n%s", n, out)
	}
	for _, want := range []string{"level=INFO", "sqlite:" + filepath.Join(dir, "s.db"), policyPath, g.Policy().Hash, "mode=enforce"} {
		if !strings.Contains(out, want) {
			t.Errorf("open log lacks %q:\n%s", want, out)
		}
	}
}
