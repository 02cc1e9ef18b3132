//go:build !unix

package sqlite

import "os"

// canWrite reports only whether path exists where access(2) is not available: SQLite's own
// read-only error is then the one a writer gets.
func canWrite(path string) error {
	_, err := os.Stat(path)
	return err
}
