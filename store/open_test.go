package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/store"
)

type nopDriver struct{}

func (nopDriver) Open(context.Context, string, *store.OpenOptions) (store.Store, error) {
	return nil, errors.New("nop")
}

// TestRegisterRefuses: a nil driver, a name that is not a URL scheme and a scheme registered
// twice stop the program at start-up, and leave the registry as it was.
func TestRegisterRefuses(t *testing.T) {
	t.Parallel()
	before := store.Schemes()
	for _, tc := range []struct {
		name   string
		scheme string
		d      store.Driver
	}{
		{"nil driver", "nildriver", nil},
		{"empty scheme", "", nopDriver{}},
		{"digit first", "1db", nopDriver{}},
		{"space", "my db", nopDriver{}},
		{"colon", "sqlite:", nopDriver{}},
		{"twice", "sqlite", nopDriver{}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) (%s) did not panic", tc.scheme, tc.name)
				}
			}()
			store.Register(tc.scheme, tc.d)
		}()
	}
	if got := store.Schemes(); strings.Join(got, ",") != strings.Join(before, ",") {
		t.Errorf("Schemes() = %v after refused registrations, want %v", got, before)
	}
}

func TestScheme(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"sqlite:state.db":          "sqlite",
		"sqlite:":                  "sqlite",
		"postgres://h/db":          "postgres",
		"postgresql://h/db":        "postgresql",
		"wrap+sqlite.v2:x":         "wrap+sqlite.v2",
		"state.db":                 "",
		"/var/lib/latch/state.db":  "",
		"":                         "",
		"1db:x":                    "",
		"my db:x":                  "",
		`C:\latch\state.db`:        "C", // a Windows path is a scheme "C" to a URL reader: unknown, refused
		"postgres ://h/db":         "",
		"://h/db":                  "",
		"sqlite:state.db?mode=x:y": "sqlite",
	} {
		if got := store.Scheme(in); got != want {
			t.Errorf("Scheme(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLookupErrors: a URL nobody registered is refused with ErrUnknownScheme, listing the
// registered schemes and never a password.
func TestLookupErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url  string
		want []string
	}{
		{"", []string{"empty store URL", "registered: "}},
		{"state.db", []string{`unsupported store URL "state.db": no scheme`}},
		{"mysql://u:pw@h/db", []string{`unsupported store URL "mysql://u:xxxxx@h/db"`, `unknown store scheme "mysql"`,
			"registered: postgres, postgresql, sqlite"}},
	} {
		d, err := store.Lookup(tc.url)
		if d != nil || !errors.Is(err, store.ErrUnknownScheme) {
			t.Errorf("Lookup(%q) = %v, %v; want ErrUnknownScheme", tc.url, d, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Lookup(%q) = %q, want it to contain %q", tc.url, err, w)
			}
		}
		if strings.Contains(err.Error(), ":pw@") {
			t.Errorf("Lookup(%q) = %q: it shows the password", tc.url, err)
		}
		if _, oerr := store.Open(t.Context(), tc.url, nil); !errors.Is(oerr, store.ErrUnknownScheme) {
			t.Errorf("Open(%q) = %v, want ErrUnknownScheme", tc.url, oerr)
		}
	}
	for _, u := range []string{"sqlite:x.db", "postgres://h/db", "postgresql://h/db"} {
		if _, err := store.Lookup(u); err != nil {
			t.Errorf("Lookup(%q) = %v, want its backend", u, err)
		}
	}
}

// TestUnlinkedBackend: a program that does not link a backend of this module in is told which
// import adds it.
func TestUnlinkedBackend(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url, registered, want string
	}{
		{"postgres://u:pw@h/db", "sqlite", `unknown store scheme "postgres": its backend is not linked into this program; add import _ "github.com/latchkit/latch/store/postgres" (registered: sqlite)`},
		{"postgresql://h/db", "sqlite", `add import _ "github.com/latchkit/latch/store/postgres"`},
		{"sqlite:x.db", "", `add import _ "github.com/latchkit/latch/store/sqlite" (registered: none)`},
	} {
		var reg []string
		if tc.registered != "" {
			reg = strings.Split(tc.registered, ",")
		}
		err := store.UnknownScheme(tc.url, reg)
		if !errors.Is(err, store.ErrUnknownScheme) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("unknownScheme(%q, %v) = %v, want ErrUnknownScheme containing %q", tc.url, reg, err, tc.want)
		}
		if strings.Contains(err.Error(), ":pw@") {
			t.Errorf("unknownScheme(%q) = %q: it shows the password", tc.url, err)
		}
	}
}

func TestRedactDescribe(t *testing.T) {
	t.Parallel()
	abs, err := filepath.Abs("rel/state.db")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url, redact, describe string
	}{
		{"postgres://u:pw@h/db?schema=s", "postgres://u:xxxxx@h/db?schema=s", "postgres://u:xxxxx@h/db?schema=s"},
		{"postgres://u@h/db", "postgres://u@h/db", "postgres://u@h/db"},
		{"postgres://u:p%zz@h/db", "postgres URL (unparsable)", "postgres URL (unparsable)"},
		{"sqlite:rel/state.db", "sqlite:rel/state.db", "sqlite:" + abs},
		{"sqlite:rel/state.db?synchronous=normal", "sqlite:rel/state.db?synchronous=normal", "sqlite:" + abs},
		{"mysql://u:pw@h/db", "mysql://u:xxxxx@h/db", "mysql://u:xxxxx@h/db"},
	} {
		if got := store.Redact(tc.url); got != tc.redact {
			t.Errorf("Redact(%q) = %q, want %q", tc.url, got, tc.redact)
		}
		if got := store.Describe(tc.url); got != tc.describe {
			t.Errorf("Describe(%q) = %q, want %q", tc.url, got, tc.describe)
		}
	}
}

// TestReadOnlyEveryBackend: a store opened read-only through store.Open refuses every write
// with the one store.ErrReadOnly, whatever the backend.
func TestReadOnlyEveryBackend(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			u := testdb.URL(t, backend, "latch_store")
			w, err := store.Open(ctx, u, nil)
			if err != nil {
				t.Fatalf("Open(%s) = %v", u, err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			r, err := store.Open(ctx, u, &store.OpenOptions{ReadOnly: true})
			if err != nil {
				t.Fatalf("Open(%s, read-only) = %v", u, err)
			}
			defer r.Close()
			now := time.Now()
			if _, err := r.Reserve(ctx, &store.ReserveRequest{Now: now, ActionID: "act_1", Action: "a.b", ActionHash: "sha256:00",
				EffectKey: "k:1", Lease: time.Minute}); !errors.Is(err, store.ErrReadOnly) {
				t.Errorf("read-only Reserve = %v, want store.ErrReadOnly", err)
			}
			if _, err := r.Resolve(ctx, &store.ResolveRequest{Now: now, Key: "k:1", To: store.Failed, By: "cli:ana"}); !errors.Is(err, store.ErrReadOnly) {
				t.Errorf("read-only Resolve = %v, want store.ErrReadOnly", err)
			}
		})
	}
}

// TestScratchEveryBackend: each backend makes distinct, empty, usable stores beside the place
// it is given, never at it, keeps the place's options, and removes them all at Close.
func TestScratchEveryBackend(t *testing.T) {
	t.Parallel()
	places := map[string]string{"sqlite": "sqlite:/operator/never/opened.db?synchronous=normal"}
	if pg := os.Getenv("LATCH_TEST_POSTGRES_URL"); pg != "" {
		sep := "?"
		if strings.Contains(pg, "?") {
			sep = "&"
		}
		places["postgres"] = pg + sep + "schema=operator_never_opened"
	} else if os.Getenv("LATCH_REQUIRE_POSTGRES") == "1" {
		t.Fatal("LATCH_REQUIRE_POSTGRES=1 but LATCH_TEST_POSTGRES_URL is unset")
	}
	for backend, place := range places {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			sc, err := store.NewScratch(ctx, place, &store.ScratchConfig{Prefix: "Scratch-Test", Dir: t.TempDir()})
			if err != nil {
				t.Fatalf("NewScratch(%s) = %v", store.Redact(place), err)
			}
			closed := false
			t.Cleanup(func() {
				if !closed {
					sc.Close(context.Background())
				}
			})
			var urls []string
			for range 2 {
				u, err := sc.URL(ctx, "same name")
				if err != nil {
					t.Fatalf("URL = %v", err)
				}
				urls = append(urls, u)
				if store.Scheme(u) != backend || strings.Contains(u, "operator") || !strings.Contains(u, "scratch_test_") {
					t.Errorf("scratch URL %s: want a %s store named scratch_test_…, not the operator's", store.Redact(u), backend)
				}
				if backend == "sqlite" && !strings.HasSuffix(u, "?synchronous=normal") {
					t.Errorf("scratch URL %s lost the place's synchronous=normal", u)
				}
				st, err := store.Open(ctx, u, nil)
				if err != nil {
					t.Fatalf("Open(scratch %s) = %v", store.Redact(u), err)
				}
				if es, err := st.Effects(ctx, store.EffectFilter{}); err != nil || len(es) != 0 {
					t.Errorf("scratch store holds %d effects (%v), want none", len(es), err)
				}
				if err := st.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if urls[0] == urls[1] {
				t.Fatalf("two scratch stores share the URL %s", store.Redact(urls[0]))
			}
			closed = true
			if err := sc.Close(ctx); err != nil {
				t.Fatalf("Close = %v", err)
			}
			for _, u := range urls {
				if _, err := store.Open(ctx, u, &store.OpenOptions{ReadOnly: true}); !errors.Is(err, store.ErrNoStore) {
					t.Errorf("read-only Open of %s after Close = %v, want ErrNoStore", store.Redact(u), err)
				}
			}
			if _, err := sc.URL(ctx, "late"); err == nil {
				t.Error("URL after Close succeeded")
			}
		})
	}
}

func TestScratchRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		place string
		is    error
		want  string
	}{
		{"postgres:", store.ErrNoScratch, "names no server"},
		{"nosuch:", store.ErrUnknownScheme, `unknown store scheme "nosuch"`},
		{"sqlite:?bogus=1", nil, `unknown parameter "bogus"`},
		{"postgres://u:pw@h/db?sslmode=require;", nil, "malformed parameter"},
	} {
		sc, err := store.NewScratch(t.Context(), tc.place, &store.ScratchConfig{Dir: t.TempDir()})
		if err == nil {
			sc.Close(t.Context())
			t.Errorf("NewScratch(%q) succeeded", tc.place)
			continue
		}
		if tc.is != nil && !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), ":pw@") {
			t.Errorf("NewScratch(%q) = %v, want %v containing %q, no password", tc.place, err, tc.is, tc.want)
		}
	}
}

// TestScratchVolatile: a volatile scratch of the default backend trades durability for speed,
// unless its place says otherwise.
func TestScratchVolatile(t *testing.T) {
	t.Parallel()
	for place, want := range map[string]string{"sqlite:": "?synchronous=normal", "sqlite:?synchronous=full": "?synchronous=full"} {
		sc, err := store.NewScratch(t.Context(), place, &store.ScratchConfig{Dir: t.TempDir(), Volatile: true})
		if err != nil {
			t.Fatalf("NewScratch(%q) = %v", place, err)
		}
		u, err := sc.URL(t.Context(), "v")
		sc.Close(t.Context())
		if err != nil || !strings.HasSuffix(u, want) {
			t.Errorf("volatile scratch of %q = %q, %v; want …%s", place, u, err, want)
		}
	}
}
