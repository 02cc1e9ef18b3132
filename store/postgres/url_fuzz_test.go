package postgres

import (
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseURL asserts properties of the store URL parser: an error never repeats the URL's
// password; an accepted URL yields a usable schema name and a URL for pgx with the same scheme,
// user, host and database and no schema parameter; no parameter the URL gave is lost on the
// way (a parameter pgx never sees — sslmode among them — would be dropped silently); and the
// location written back as a URL parses to the same location.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"postgres://u@h:5432/db", "postgresql://u:p4ss@h/db?sslmode=disable&schema=latch",
		"postgres://h/db?schema=My%20Schema", "mysql://h/db", "postgres://h/db?schema=",
		"postgres://h/db?schema=a&schema=b", "postgres://u:secret@h/db?sslmode=verify-full&default_query_exec_mode=exec",
		"postgres://[::1]:5432/db?application_name=a%26b", "postgres://h/db?schema=" + strings.Repeat("x", 64),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		loc, err := parseURL(raw)
		if err != nil {
			if u, perr := url.Parse(raw); perr == nil {
				if pw, ok := u.User.Password(); ok && quotesPassword(err, pw) {
					t.Fatalf("parseURL(%q) = %v: the error repeats the password", raw, err)
				}
			}
			return
		}
		if loc.schema == "" || len(loc.schema) > maxIdentifier || strings.ContainsRune(loc.schema, 0) {
			t.Fatalf("parseURL(%q).schema = %q", raw, loc.schema)
		}
		in, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("parseURL(%q) accepted what url.Parse refuses: %v", raw, err)
		}
		out, err := url.Parse(loc.pgURL)
		if err != nil {
			t.Fatalf("parseURL(%q).pgURL = %q does not parse: %v", raw, loc.pgURL, err)
		}
		if out.Scheme != in.Scheme || out.User.String() != in.User.String() || out.Host != in.Host || out.Path != in.Path {
			t.Fatalf("parseURL(%q).pgURL = %q: scheme, user, host or database changed", raw, loc.pgURL)
		}
		got := out.Query()
		if _, ok := got["schema"]; ok {
			t.Fatalf("parseURL(%q).pgURL = %q still carries schema=", raw, loc.pgURL)
		}
		// Every parameter written in the URL reaches pgx (or is the schema), with its value.
		for _, part := range strings.Split(in.RawQuery, "&") {
			if part == "" {
				continue
			}
			k, v, _ := strings.Cut(part, "=")
			key, kerr := url.QueryUnescape(k)
			val, verr := url.QueryUnescape(v)
			if kerr != nil || verr != nil {
				t.Fatalf("parseURL(%q) accepted the undecodable parameter %q", raw, part)
			}
			if key == "schema" {
				if val != loc.schema {
					t.Fatalf("parseURL(%q).schema = %q, want %q", raw, loc.schema, val)
				}
				continue
			}
			if key == skewParam {
				if _, ok := got[key]; ok {
					t.Fatalf("parseURL(%q).pgURL = %q still carries %s=", raw, loc.pgURL, skewParam)
				}
				continue
			}
			if !slices.Contains(got[key], val) {
				t.Fatalf("parseURL(%q): parameter %q is lost on the way to pgx (pgURL %q)", raw, part, loc.pgURL)
			}
		}
		back := *out
		q := out.Query()
		q.Set("schema", loc.schema)
		back.RawQuery = q.Encode()
		again, err := parseURL(back.String())
		if err != nil || again.schema != loc.schema || !sameURL(again.pgURL, loc.pgURL) {
			t.Fatalf("parseURL(%q) = %+v, but written back as %q it parses to %+v, %v", raw, loc, back.String(), again, err)
		}
	})
}

// quotedPart is a Go-quoted string in an error message: the only way the parser's errors repeat
// what the URL said.
var quotedPart = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// quotesPassword reports whether err quotes a part of the URL that contains the password. (The
// message's own words are not counted: a password such as "para" is spelled by "parameter".)
func quotesPassword(err error, pw string) bool {
	if pw == "" {
		return false
	}
	for _, q := range quotedPart.FindAllString(err.Error(), -1) {
		if s, uerr := strconv.Unquote(q); uerr != nil || strings.Contains(s, pw) {
			return true
		}
	}
	return false
}

// sameURL reports whether two URLs say the same thing to pgx: the same parts and the same
// parameters, however the query string is spelled (an empty query is no query).
func sameURL(a, b string) bool {
	ua, errA := url.Parse(a)
	ub, errB := url.Parse(b)
	if errA != nil || errB != nil {
		return false
	}
	qa, qb := ua.Query(), ub.Query()
	ua.RawQuery, ub.RawQuery, ua.ForceQuery, ub.ForceQuery = "", "", false, false
	return ua.String() == ub.String() && maps.EqualFunc(qa, qb, slices.Equal)
}

// TestParseURLMalformedParameters: url.Values parsing drops a parameter it cannot decode (a
// semicolon, a bad % escape) without a word, so the server would be reached without the TLS
// mode or in the schema the operator wrote. Found by FuzzParseURL; each must be refused.
func TestParseURLMalformedParameters(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"postgres://h/db?schema=x;",
		"postgres://h/db?sslmode=require;",
		"postgres://h/db?sslmode=verify-full%",
		"postgres://h/db?sslmode=verify-full&application_name=%zz",
	} {
		if loc, err := parseURL(raw); err == nil {
			t.Errorf("parseURL(%q) = schema %q, pgx URL %q; want an error naming the malformed parameter", raw, loc.schema, loc.pgURL)
		}
	}
}

// TestParseURLErrorsHideThePassword: a URL whose parameter name, scheme or schema spells the
// password is refused without the error repeating it. Found by FuzzParseURL ("pass%" as a
// parameter name with password "pass").
func TestParseURLErrorsHideThePassword(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"postgres://:pass@?pass%",
		"postgres://u:hunter2@h/db?hunter2;x=1",
		"postgres://u:hunter2@h/db?hunter2=%zz",
		"postgres://u:hunter2@h/db?hunter2=a&hunter2=b",
		"hunter2://u:hunter2@h/db",
		"postgres://u:hunter2@h/db?schema=hunter2" + strings.Repeat("x", 64),
		"postgres://u:hunter2@h/db?clock_skew_threshold=hunter2",
	} {
		_, err := parseURL(raw)
		if err == nil {
			t.Errorf("parseURL(%q) accepted it", raw)
			continue
		}
		u, _ := url.Parse(raw)
		pw, _ := u.User.Password()
		if quotesPassword(err, pw) {
			t.Errorf("parseURL(%q) = %v: the error repeats the password", raw, err)
		}
		if !strings.Contains(err.Error(), "not shown") {
			t.Errorf("parseURL(%q) = %v: want it to say the part is not shown", raw, err)
		}
	}
}
