package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// ErrReadOnly is returned by every write method of a store opened with OpenOptions.ReadOnly, by
// every backend.
var ErrReadOnly = errors.New("store opened read-only")

// ErrUnknownScheme is wrapped by the error Open returns for a URL whose scheme no linked-in
// backend registered.
var ErrUnknownScheme = errors.New("unknown store scheme")

// ErrNoScratch is wrapped by the error NewScratch returns when the backend of a URL cannot make
// throwaway stores (its Driver is not a Scratcher).
var ErrNoScratch = errors.New("backend makes no scratch stores")

// OpenOptions configures Open. The zero value (and nil) opens a writer, which creates the store
// and applies pending migrations.
type OpenOptions struct {
	// ReadOnly opens an existing store without creating or migrating it: a missing store is an
	// error wrapping ErrNoStore, and every write method returns ErrReadOnly.
	ReadOnly bool
	// Logger receives what the backend logs (migrations, lost commits). Nil discards.
	Logger *slog.Logger
}

// Driver opens the stores of the URL schemes it is registered for. A backend package registers
// its Driver in an init function, so that importing the package is what makes its scheme
// available, as with database/sql drivers:
//
//	import _ "github.com/latchkit/latch/store/postgres" // postgres:// and postgresql://
//
// A Driver may also offer optional capabilities, found by a type assertion: Scratcher (throwaway
// stores for latch verify, latch demo, latch bench and tests) and Describer (how a URL is shown
// in a log line).
type Driver interface {
	// Open opens the store at url, whose scheme is one the Driver was registered for. opts is
	// never nil.
	Open(ctx context.Context, url string, opts *OpenOptions) (Store, error)
}

// Scratcher is implemented by a Driver that can make throwaway stores: fresh, empty stores
// beside a given one that a tool fills, runs against and removes, never touching the given
// store itself.
type Scratcher interface {
	// NewScratch returns a Scratch that makes stores of the backend of place, a store URL that
	// is only read for where the scratch stores go (a server, say) and the options they keep
	// (a SQLite URL's synchronous=, a Postgres URL's sslmode=). The store at place is never
	// opened. cfg is never nil.
	NewScratch(ctx context.Context, place string, cfg *ScratchConfig) (Scratch, error)
}

// ScratchConfig configures NewScratch.
type ScratchConfig struct {
	// Prefix names everything the scratch makes (a directory, a schema), so that what a crash
	// left behind says whose it was. Letters, digits and '_' are kept; default "latch_scratch".
	Prefix string
	// Dir is where a backend that keeps its stores in files makes the scratch's own directory;
	// "" is the operating system's temporary directory. Backends on a server ignore it.
	Dir string
	// Volatile says the stores need not survive a power cut (they live for seconds, as a
	// demonstration's do): a backend that can commit faster without waiting for the disk may.
	// Durability settings given in place win.
	Volatile bool
}

// Scratch makes fresh, empty stores and removes them. It is safe for concurrent use.
type Scratch interface {
	// URL returns the URL of a new, empty store, named for name where the backend names
	// stores. Each call returns a different store; the first writer to open it creates its
	// tables.
	URL(ctx context.Context, name string) (string, error)
	// Close removes every store URL returned. Stores still open may not be removable.
	Close(ctx context.Context) error
}

// Describer is implemented by a Driver whose URLs need more than a hidden password to be shown
// in a log line (a relative file path made absolute, say). Without it, Describe hides the
// password of a URL with an authority and shows the rest as given.
type Describer interface {
	// Describe returns url as a log line shows it: never a password.
	Describe(url string) string
}

// linked names the import path of the backends of this module by the schemes they register,
// so that a URL of a backend that the program does not link in gets an error saying what to
// import rather than only that the scheme is unknown.
var linked = map[string]string{
	"sqlite":     "github.com/latchkit/latch/store/sqlite",
	"postgres":   "github.com/latchkit/latch/store/postgres",
	"postgresql": "github.com/latchkit/latch/store/postgres",
}

var (
	driversMu sync.RWMutex
	drivers   = map[string]Driver{}
)

// Register makes d open the store URLs of scheme ("postgres" for postgres://…, "sqlite" for
// sqlite:PATH). It is called from a backend's init function. Register panics if d is nil, if
// scheme is not a URL scheme (a letter, then letters, digits, '+', '-' or '.'), or if scheme is
// already registered: two backends claiming one scheme is a build mistake to stop at start-up.
func Register(scheme string, d Driver) {
	if d == nil {
		panic("store: Register of scheme " + scheme + " with a nil Driver")
	}
	if !validScheme(scheme) {
		panic(fmt.Sprintf("store: Register of %q: not a URL scheme", scheme))
	}
	driversMu.Lock()
	defer driversMu.Unlock()
	if _, dup := drivers[scheme]; dup {
		panic("store: Register of scheme " + scheme + " twice")
	}
	drivers[scheme] = d
}

// Schemes returns the registered schemes, sorted.
func Schemes() []string {
	driversMu.RLock()
	defer driversMu.RUnlock()
	s := make([]string, 0, len(drivers))
	for k := range drivers {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// Scheme returns the scheme of a store URL: what comes before its first ':' ("sqlite" for
// sqlite:PATH), or "" when url does not start with a URL scheme.
func Scheme(url string) string {
	s, _, ok := strings.Cut(url, ":")
	if !ok || !validScheme(s) {
		return ""
	}
	return s
}

// validScheme reports whether s is a URL scheme (RFC 3986): a letter, then letters, digits,
// '+', '-' or '.'.
func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
		case i > 0 && ('0' <= r && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return true
}

// Lookup returns the Driver registered for the scheme of url. Its error, for a URL with no
// scheme or one nobody registered, wraps ErrUnknownScheme, lists the registered schemes and,
// for a backend of this module that the program does not link in, names the import to add.
func Lookup(url string) (Driver, error) {
	scheme := Scheme(url)
	driversMu.RLock()
	d, ok := drivers[scheme]
	driversMu.RUnlock()
	if ok {
		return d, nil
	}
	return nil, unknownScheme(url, Schemes())
}

// unknownScheme is Lookup's error for url when registered are the schemes registered.
func unknownScheme(url string, registered []string) error {
	scheme := Scheme(url)
	list := strings.Join(registered, ", ")
	if list == "" {
		list = "none"
	}
	shown := Redact(url)
	switch pkg, known := linked[scheme]; {
	case url == "":
		return fmt.Errorf("empty store URL: %w (registered: %s)", ErrUnknownScheme, list)
	case scheme == "":
		return fmt.Errorf("unsupported store URL %q: no scheme: %w (registered: %s)", shown, ErrUnknownScheme, list)
	case known:
		return fmt.Errorf("unsupported store URL %q: %w %q: its backend is not linked into this program; add import _ %q (registered: %s)",
			shown, ErrUnknownScheme, scheme, pkg, list)
	}
	return fmt.Errorf("unsupported store URL %q: %w %q (registered: %s)", shown, ErrUnknownScheme, scheme, list)
}

// Open opens the store at url with the Driver registered for its scheme; opts may be nil. A
// writer creates the store if it does not exist and applies pending migrations; a read-only open
// does neither. The errors to branch on are ErrUnknownScheme, ErrNoStore, ErrNotLatch and
// ErrSchemaTooNew.
func Open(ctx context.Context, url string, opts *OpenOptions) (Store, error) {
	d, err := Lookup(url)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	var o OpenOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	st, err := d.Open(ctx, url, &o)
	if err != nil {
		return nil, err // an untyped nil: a Driver's typed nil in an interface is not nil
	}
	return st, nil
}

// NewScratch returns a Scratch of the backend of place (see Scratcher); cfg may be nil. A
// backend whose Driver is not a Scratcher is an error wrapping ErrNoScratch.
func NewScratch(ctx context.Context, place string, cfg *ScratchConfig) (Scratch, error) {
	d, err := Lookup(place)
	if err != nil {
		return nil, fmt.Errorf("scratch store: %w", err)
	}
	sc, ok := d.(Scratcher)
	if !ok {
		return nil, fmt.Errorf("scratch store: scheme %q: %w", Scheme(place), ErrNoScratch)
	}
	var c ScratchConfig
	if cfg != nil {
		c = *cfg
	}
	c.Prefix = ScratchName(c.Prefix)
	if c.Prefix == "" {
		c.Prefix = "latch_scratch"
	}
	return sc.NewScratch(ctx, place, &c)
}

// ScratchName keeps the ASCII letters, digits and '_' of s, lower-cased, with '-' and '.' as '_':
// a name every backend can use as a file name or an identifier unquoted.
func ScratchName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case 'a' <= r && r <= 'z', '0' <= r && r <= '9', r == '_':
			b.WriteRune(r)
		case r == '-' || r == '.':
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Describe returns url as a log line shows it: by the Describer of its backend when there is
// one, else as Redact does.
func Describe(url string) string {
	if d, err := Lookup(url); err == nil {
		if ds, ok := d.(Describer); ok {
			return ds.Describe(url)
		}
	}
	return Redact(url)
}

// Redact returns raw with any password in it replaced by "xxxxx", for messages. A URL that
// cannot be parsed is shown by its scheme alone when it may hold a password ('@').
func Redact(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil && strings.Contains(raw, "@"):
		return Scheme(raw) + " URL (unparsable)"
	case err != nil || u.User == nil:
		return raw
	}
	return u.Redacted()
}
