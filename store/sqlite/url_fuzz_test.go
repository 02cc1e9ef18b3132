package sqlite

import (
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseURL asserts properties of the store URL parser: an accepted URL names an absolute
// path with no NUL and a known synchronous mode; the file: URI handed to SQLite names exactly
// that path as SQLite decodes it (no character of the path can end it early or add a parameter);
// and writing the location back as a URL parses to the same location.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"sqlite:state.db", "sqlite:/var/lib/latch/state.db", "sqlite:./.latch/state.db?synchronous=normal",
		"sqlite:a b/c%20d#e?synchronous=FULL", "sqlite::memory:", "sqlite:file:x.db", "sqlite://x",
		"sqlite:x?mode=memory", "sqlite:x?synchronous=normal&synchronous=full", "sqlite:x?synchronous=normal;cache=shared",
		"sqlite:", "postgres://x", "sqlite:%3Fmode=ro",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		loc, err := parseURL(raw)
		if err != nil {
			return
		}
		if !filepath.IsAbs(loc.path) || strings.ContainsRune(loc.path, 0) {
			t.Fatalf("parseURL(%q).path = %q: want an absolute path without NUL", raw, loc.path)
		}
		if loc.synchronous != "FULL" && loc.synchronous != "NORMAL" {
			t.Fatalf("parseURL(%q).synchronous = %q", raw, loc.synchronous)
		}
		if got := uriPath(t, dsn(loc.path, "x=1")); got != filepath.ToSlash(loc.path) {
			t.Fatalf("parseURL(%q): SQLite would open %q, want %q", raw, got, loc.path)
		}
		back := "sqlite:" + loc.path
		if loc.synchronous == "NORMAL" {
			back += "?synchronous=normal"
		}
		again, err := parseURL(back)
		if err != nil || again != loc {
			t.Fatalf("parseURL(%q) = %+v, but its location written back, %q, parses to %+v, %v", raw, loc, back, again, err)
		}
	})
}

// uriPath decodes the path of a file: URI as SQLite does: it ends at the first ? or #, and %HH
// escapes are decoded.
func uriPath(t *testing.T, uri string) string {
	t.Helper()
	p := strings.TrimPrefix(uri, "file:")
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	dec, err := url.PathUnescape(p)
	if err != nil {
		t.Fatalf("dsn %q: path %q does not decode: %v", uri, p, err)
	}
	return dec
}
