//go:build unix

package policy

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLoadRefusesWhatIsNotAPolicyFile: a device, a named pipe, a directory and a file over
// MaxFileSize are refused before they can exhaust memory or block the caller.
func TestLoadRefusesWhatIsNotAPolicyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte(header+"# "+strings.Repeat("x", MaxFileSize)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want error
		msg  string
	}{
		{"/dev/zero", ErrNotRegularFile, "it is a character device"},
		{fifo, ErrNotRegularFile, "it is a named pipe"},
		{dir, ErrNotRegularFile, "it is a directory"},
		{big, ErrFileTooLarge, "the limit is 4194304 (4 MiB)"},
	}
	for _, tt := range tests {
		done := make(chan error, 1)
		go func() {
			_, err := Load(tt.path)
			done <- err
		}()
		select {
		case err := <-done:
			var pe *Error
			if !errors.As(err, &pe) || pe.Line != 0 || !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Load(%q) = %v, want an *Error matching %v saying %q", tt.path, err, tt.want, tt.msg)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Load(%q) still blocked after 10s", tt.path)
		}
	}
}

// TestLoadAtTheLimit: a file of exactly MaxFileSize bytes is read.
func TestLoadAtTheLimit(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "latch.yaml")
	body := header + "actions: {}\n# "
	body += strings.Repeat("x", MaxFileSize-len(body)-1) + "\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err != nil {
		t.Fatalf("Load(a %d-byte policy) = %v, want it read", len(body), err)
	}
}

func TestLoadContextCancelled(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "latch.yaml")
	if err := os.WriteFile(path, []byte(header+"actions: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := LoadContext(ctx, path); !errors.Is(err, context.Canceled) {
		t.Fatalf("LoadContext(cancelled) = %v, want context.Canceled", err)
	}
	if _, err := LoadContext(t.Context(), path); err != nil {
		t.Fatalf("LoadContext = %v", err)
	}
}
