package verify

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the driver G11 alters a scratch receipt with

	"github.com/latchkit/latch/store/postgres"
)

// scratch hands out fresh, empty stores of the operator's backend kind and removes them all at
// the end. Only the kind of the operator's URL is used: the operator's store is never opened.
type scratch interface {
	kind() string
	// location returns the URL of a new, empty store named for a scenario.
	location(ctx context.Context, name string) (string, error)
	// alterReceipt overwrites the stored document of receipt seq in the store at url, behind
	// latch's back, as someone editing the database would.
	alterReceipt(ctx context.Context, url string, seq int64, doc []byte) error
	// edit runs statements on the store at url in one transaction, behind latch's back, and
	// returns how many rows each changed. A statement names tables as {name} and its parameters
	// as ?: each backend writes them its own way.
	edit(ctx context.Context, url string, stmts ...stmt) ([]int64, error)
	// close removes every store handed out.
	close(ctx context.Context) error
}

// newScratch picks the scratch backend from the operator's store URL ("" is the default,
// SQLite).
func newScratch(ctx context.Context, storeURL string) (scratch, error) {
	switch {
	case storeURL == "" || strings.HasPrefix(storeURL, "sqlite:"):
		dir, err := os.MkdirTemp("", "latch-verify-")
		if err != nil {
			return nil, fmt.Errorf("verify: scratch directory: %w", err)
		}
		return &sqliteScratch{dir: dir}, nil
	case strings.HasPrefix(storeURL, "postgres://"), strings.HasPrefix(storeURL, "postgresql://"):
		return newPostgresScratch(storeURL)
	}
	return nil, &UsageError{Msg: fmt.Sprintf("unsupported store URL %q (want sqlite:PATH or postgres://…)", redactURL(storeURL))}
}

// sqliteScratch keeps one SQLite file per scenario in a temporary directory.
type sqliteScratch struct {
	dir string
}

func (s *sqliteScratch) kind() string { return "sqlite" }

func (s *sqliteScratch) location(ctx context.Context, name string) (string, error) {
	return "sqlite:" + filepath.Join(s.dir, name+".db"), nil
}

func (s *sqliteScratch) alterReceipt(ctx context.Context, u string, seq int64, doc []byte) error {
	path, ok := strings.CutPrefix(u, "sqlite:")
	if !ok || filepath.Dir(path) != s.dir {
		return fmt.Errorf("alter receipt: %s is not a scratch store", u)
	}
	db, err := sql.Open("sqlite", fileDSN(path))
	if err != nil {
		return fmt.Errorf("alter receipt: %w", err)
	}
	defer db.Close()
	return checkAltered(db.ExecContext(ctx, "UPDATE receipts SET doc = ? WHERE seq = ?", string(doc), seq))
}

// fileDSN is the data source name of the SQLite file at path.
func fileDSN(path string) string {
	p := strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(filepath.ToSlash(path))
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows volume: file:/C:/x
	}
	return "file:" + p + "?_pragma=busy_timeout(10000)"
}

// stmt is one statement of scratch.edit.
type stmt struct {
	sql  string
	args []any
}

// docValue is a receipt document as a stmt argument: SQLite keeps it as TEXT, Postgres as bytea.
type docValue []byte

func (s *sqliteScratch) edit(ctx context.Context, u string, stmts ...stmt) ([]int64, error) {
	path, ok := strings.CutPrefix(u, "sqlite:")
	if !ok || filepath.Dir(path) != s.dir {
		return nil, fmt.Errorf("edit store: %s is not a scratch store", u)
	}
	db, err := sql.Open("sqlite", fileDSN(path))
	if err != nil {
		return nil, fmt.Errorf("edit store: %w", err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("edit store: %w", err)
	}
	defer tx.Rollback()
	var n []int64
	for _, st := range stmts {
		q := tableRef.ReplaceAllString(st.sql, "$1")
		args := make([]any, len(st.args))
		for i, a := range st.args {
			if d, ok := a.(docValue); ok {
				a = string(d)
			}
			args[i] = a
		}
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("edit store: %s: %w", q, err)
		}
		c, err := res.RowsAffected()
		if err != nil {
			return nil, fmt.Errorf("edit store: %w", err)
		}
		n = append(n, c)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("edit store: %w", err)
	}
	return n, nil
}

// tableRef is a table named in a stmt: {receipts}.
var tableRef = regexp.MustCompile(`\{([a-z_]+)\}`)

func checkAltered(res sql.Result, err error) error {
	if err != nil {
		return fmt.Errorf("alter receipt: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("alter receipt: %d rows changed, want 1 (%v)", n, err)
	}
	return nil
}

func (s *sqliteScratch) close(ctx context.Context) error { return os.RemoveAll(s.dir) }

// postgresScratch keeps one private schema per scenario, latch_verify_<random>, on the
// operator's server, and drops them all at the end. It connects to the server only to create,
// alter and drop its own schemas; the operator's schema is never touched.
type postgresScratch struct {
	base  *url.URL // the operator's URL without schema=
	mu    sync.Mutex
	made  []string
	names map[string]string // url → schema
}

func newPostgresScratch(storeURL string) (*postgresScratch, error) {
	if _, err := postgres.ServerURL(storeURL); err != nil {
		return nil, &UsageError{Msg: err.Error()} // a malformed parameter must not be dropped (sslmode=require;)
	}
	u, err := url.Parse(storeURL)
	if err != nil {
		return nil, &UsageError{Msg: fmt.Sprintf("bad store URL %s: %v", redactURL(storeURL), err)}
	}
	q := u.Query()
	q.Del("schema")
	u.RawQuery = q.Encode()
	return &postgresScratch{base: u, names: map[string]string{}}, nil
}

func (s *postgresScratch) kind() string { return "postgres" }

func (s *postgresScratch) connect(ctx context.Context) (*pgx.Conn, error) {
	c, err := pgx.Connect(ctx, s.base.String())
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", redactURL(s.base.String()), err)
	}
	return c, nil
}

func (s *postgresScratch) location(ctx context.Context, name string) (string, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "latch_verify_" + hex.EncodeToString(b[:])
	c, err := s.connect(ctx)
	if err != nil {
		return "", fmt.Errorf("verify: scratch schema: %w", err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	// CREATE SCHEMA, not IF NOT EXISTS: a schema that already exists is not ours to use.
	if _, err := c.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return "", fmt.Errorf("verify: create scratch schema %s: %w", schema, err)
	}
	u := *s.base
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()
	s.mu.Lock()
	s.made = append(s.made, schema)
	s.names[u.String()] = schema
	s.mu.Unlock()
	return u.String(), nil
}

func (s *postgresScratch) alterReceipt(ctx context.Context, u string, seq int64, doc []byte) error {
	s.mu.Lock()
	schema, ok := s.names[u]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("alter receipt: %s is not a scratch store", redactURL(u))
	}
	c, err := s.connect(ctx)
	if err != nil {
		return fmt.Errorf("alter receipt: %w", err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	tag, err := c.Exec(ctx, "UPDATE "+pgx.Identifier{schema, "receipts"}.Sanitize()+" SET doc = $1 WHERE seq = $2", doc, seq)
	if err != nil {
		return fmt.Errorf("alter receipt: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("alter receipt: %d rows changed, want 1", tag.RowsAffected())
	}
	return nil
}

func (s *postgresScratch) edit(ctx context.Context, u string, stmts ...stmt) ([]int64, error) {
	s.mu.Lock()
	schema, ok := s.names[u]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("edit store: %s is not a scratch store", redactURL(u))
	}
	c, err := s.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("edit store: %w", err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	tx, err := c.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("edit store: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var n []int64
	for _, st := range stmts {
		q := tableRef.ReplaceAllStringFunc(st.sql, func(m string) string {
			return pgx.Identifier{schema, m[1 : len(m)-1]}.Sanitize()
		})
		var b strings.Builder
		arg := 0
		for _, r := range q {
			if r == '?' {
				arg++
				fmt.Fprintf(&b, "$%d", arg)
				continue
			}
			b.WriteRune(r)
		}
		args := make([]any, len(st.args))
		for i, a := range st.args {
			if d, ok := a.(docValue); ok {
				a = []byte(d)
			}
			args[i] = a
		}
		tag, err := tx.Exec(ctx, b.String(), args...)
		if err != nil {
			return nil, fmt.Errorf("edit store: %s: %w", b.String(), err)
		}
		n = append(n, tag.RowsAffected())
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("edit store: %w", err)
	}
	return n, nil
}

func (s *postgresScratch) close(ctx context.Context) error {
	s.mu.Lock()
	made := s.made
	s.made = nil
	s.mu.Unlock()
	if len(made) == 0 {
		return nil
	}
	c, err := s.connect(ctx)
	if err != nil {
		return fmt.Errorf("verify: drop scratch schemas: %w", err)
	}
	defer c.Close(ctx)
	var errs []error
	for _, schema := range made {
		if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			errs = append(errs, fmt.Errorf("drop scratch schema %s: %w", schema, err))
		}
	}
	return errors.Join(errs...)
}

// redactURL hides a password in a URL for messages.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}
