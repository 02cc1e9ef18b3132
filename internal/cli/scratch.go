package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/latchkit/latch/store/postgres"
)

// scratchStores gives the demo throwaway stores of the configured backend: SQLite files in a
// temporary directory by default, or, when --store or $LATCH_STORE names a Postgres server,
// fresh schemas on it. The configured store itself is never touched. cleanup removes them all.
func (a *app) scratchStores(ctx context.Context, names ...string) (urls []string, cleanup func(), err error) {
	configured := a.storeFlag
	if configured == "" {
		configured = a.getenv("LATCH_STORE")
	}
	if !strings.HasPrefix(configured, "postgres://") && !strings.HasPrefix(configured, "postgresql://") {
		dir, err := os.MkdirTemp(a.getenv("TMPDIR"), "latch-demo-")
		if err != nil {
			return nil, nil, fmt.Errorf("scratch directory: %w", err)
		}
		for _, n := range names {
			// synchronous=normal: a scratch store deleted in a second need not survive a power cut.
			urls = append(urls, "sqlite:"+filepath.Join(dir, n+".db")+"?synchronous=normal")
		}
		return urls, func() { os.RemoveAll(dir) }, nil
	}
	if _, err := postgres.ServerURL(configured); err != nil {
		return nil, nil, err // a malformed parameter must not be dropped (sslmode=require;)
	}
	u, err := url.Parse(configured)
	if err != nil {
		return nil, nil, fmt.Errorf("store URL: %w", err)
	}
	q := u.Query()
	q.Del("schema")
	u.RawQuery = q.Encode()
	server := u.String()
	var b [6]byte
	_, _ = rand.Read(b[:])
	var schemas []string
	for _, n := range names {
		s := "latch_demo_" + hex.EncodeToString(b[:]) + "_" + n
		schemas = append(schemas, s)
		q.Set("schema", s)
		u.RawQuery = q.Encode()
		urls = append(urls, u.String())
	}
	cleanup = func() {
		conn, err := pgx.Connect(context.WithoutCancel(ctx), server)
		if err != nil {
			fmt.Fprintf(a.stderr, "latch demo: scratch schemas %s not dropped: %v\n", strings.Join(schemas, ", "), err)
			return
		}
		defer conn.Close(context.WithoutCancel(ctx))
		for _, s := range schemas {
			if _, err := conn.Exec(context.WithoutCancel(ctx), "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE"); err != nil {
				fmt.Fprintf(a.stderr, "latch demo: scratch schema %s not dropped: %v\n", s, err)
			}
		}
	}
	return urls, cleanup, nil
}
