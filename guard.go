package latch

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/internal/storeurl"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
	_ "github.com/latchkit/latch/store/sqlite" // the default store, sqlite:PATH: Open works with no other import
)

// Default durations.
const (
	DefaultLease       = 5 * time.Minute
	DefaultApprovalTTL = 15 * time.Minute
)

// Config configures a Guard. The zero value (or a nil *Config) means: the policy at
// $LATCH_POLICY or ./latch.yaml, the store at $LATCH_STORE or beside the policy.
type Config struct {
	PolicyPath string         // default $LATCH_POLICY, else ./latch.yaml
	Policy     *policy.Policy // alternatively, an already parsed policy
	StoreURL   string         // default $LATCH_STORE, else sqlite beside the policy
	Store      store.Store    // alternatively, an open store; the guard takes it over and closes it
	// ApproverRoles gives approvers roles beyond the names the policy lists (the local approver
	// accounts of the console; docs/approvals.md#who-may-approve). Default: the store, when it
	// implements store.RoleLookup.
	ApproverRoles store.RoleLookup
	Environment   string        // default $LATCH_ENVIRONMENT, else the policy's, else "production"
	Lease         time.Duration // default 5m
	ApprovalTTL   time.Duration // default 15m
	Identity      IdentityProvider
	Sinks         []Sink // a Sink that is also an Observer is told how calls end (package metrics)
	// TracerProvider makes the spans of each call's pipeline steps (docs/observability.md); nil
	// means OpenTelemetry's global provider, read on every call: until the program sets one, no
	// span is made at all (no allocation).
	TracerProvider trace.TracerProvider
	Logger         *slog.Logger
	Now            func() time.Time // injectable clock
	// Scope is the guard's scope provider (docs/scopes.md): asked on every allowed call, and on
	// every call presenting an approval, for the resources its principal is assigned; a call
	// whose resource is not among them is refused out_of_scope. It wins over the policy's
	// scopes section, which is then not used. Options.Scope overrides it for one call.
	Scope ScopeFunc
	// ScopeTimeout bounds each question to Scope (or to an Options.Scope that gives no timeout
	// of its own): default DefaultScopeTimeout.
	ScopeTimeout time.Duration
	// RequireApprovedPolicy refuses every call (Execute, Begin; Evaluate reports it) with
	// policy_unapproved unless the store holds an approved change to the policy in force, by its
	// hash (docs/governance.md). It lives in code, not in the file it governs.
	RequireApprovedPolicy bool
	// SuspendRounds bounds how many times one execution may suspend (Suspend): default
	// DefaultSuspendRounds. The suspension past it records the call ambiguous.
	SuspendRounds int
	// SuspendLease is how long each suspension holds the call's lease, from when it suspends:
	// its resume must come before. Default DefaultLease; at most the longest lease a policy may
	// give (policy.MaxLease).
	SuspendLease time.Duration
	// HopKey signs the compact hop tokens Guard.HopToken issues (docs/agents.md#hop-tokens);
	// nil issues none. Its public half is also one of the keys a presented token is checked
	// against.
	HopKey ed25519.PrivateKey
	// HopVerifyKeys are the public keys a presented hop token's signature is checked against,
	// beside HopKey's: the senders' keys, several so that a key can rotate. A guard with none
	// (and no HopKey) refuses every token authority_hop; hop ids are unaffected.
	HopVerifyKeys []ed25519.PublicKey
}

// Guard holds a policy and a store and runs the pipeline of every protected call. It is safe
// for concurrent use.
type Guard struct {
	cfg Config
	// pol is the policy in force: each call reads it once (prepared.pol); SetPolicy swaps it.
	pol    atomic.Pointer[policy.Policy]
	store  store.Store
	env    string
	log    *slog.Logger
	grants grantCache
	sinks  *sinks // nil without sinks
	obs    observers
	tracer trace.Tracer
	// finishing holds the action ids whose outcome Finish is recording in this process, so
	// that two concurrent posts of one outcome record it once.
	finishing sync.Map
	// begun keeps the calls Begin began here until Finish records them (remote.go).
	begun begunCache
	// protected records what each Protect call was given, for Check.
	protected protections
	// hooks are the reconcile hooks the sweeper asks (reconcile.go).
	hooks reconcilers
	// scope is the provider of the policy's scopes section; nil without one, or when
	// Config.Scope wins over it (scope.go). SetPolicy swaps it with the policy.
	scope atomic.Pointer[guardScope]
	// approvedPolicy is the hash of the last policy found approved (policyapproval.go).
	approvedPolicy atomic.Pointer[string]
}

// Open builds a guard: it loads the policy (a missing or invalid policy is an error, never a
// permissive guard) and opens, creating and migrating if needed, the store.
func Open(ctx context.Context, cfg *Config) (*Guard, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.ApprovalTTL == 0 {
		c.ApprovalTTL = DefaultApprovalTTL
	}
	if c.Lease < 0 || c.ApprovalTTL < 0 || c.ScopeTimeout < 0 {
		return nil, errors.New("latch: open: negative lease, approval ttl or scope timeout")
	}
	if c.SuspendLease == 0 {
		c.SuspendLease = DefaultLease
	}
	switch {
	case c.SuspendRounds < 0:
		return nil, fmt.Errorf("latch: open: suspend rounds %d is negative", c.SuspendRounds)
	case c.SuspendLease < 0 || c.SuspendLease > policy.MaxLease:
		return nil, fmt.Errorf("latch: open: suspend lease %v is not from 1ns to the longest lease, %v", c.SuspendLease, policy.MaxLease)
	}
	if err := checkHopKeys(&c); err != nil { // hoptoken.go
		return nil, err
	}
	p := c.Policy
	if p == nil {
		if c.PolicyPath == "" {
			path, err := policy.LocateLookup(os.LookupEnv)
			if err != nil {
				return nil, err
			}
			c.PolicyPath = path
		}
		var err error
		if p, err = policy.LoadContext(ctx, c.PolicyPath); err != nil {
			return nil, err
		}
	}
	var scope *guardScope
	if c.Scope == nil && p.Scopes != nil {
		var err error
		if scope, err = policyScope(p.Scopes); err != nil {
			return nil, err
		}
	}
	if c.StoreURL == "" && c.Store == nil {
		c.StoreURL = storeurl.Default(c.PolicyPath, os.Getenv)
	}
	env := c.Environment
	if env == "" {
		env = os.Getenv("LATCH_ENVIRONMENT")
	}
	if env == "" {
		env = p.Environment
	}
	if env == "" {
		env = "production"
	}
	st := c.Store
	if st == nil {
		var err error
		if st, err = OpenStore(ctx, c.StoreURL, &StoreOptions{Logger: c.Logger}); err != nil {
			return nil, err
		}
	}
	obs := observersOf(c.Sinks)
	g := &Guard{cfg: c, store: st, env: env, log: c.Logger, sinks: newSinks(c.Sinks, c.Logger, obs), obs: obs,
		tracer: newTracer(c.TracerProvider)}
	g.pol.Store(p)
	g.scope.Store(scope)
	g.logOpen(c)
	return g, nil
}

// logOpen says, once, which store and policy the guard runs on: two replicas that silently use
// two local stores (each its own SQLite file) would each allow what the other already did, and
// the first log line of each must show it.
func (g *Guard) logOpen(c Config) {
	storeName := store.Describe(c.StoreURL)
	if c.Store != nil {
		storeName = fmt.Sprintf("%T (given)", c.Store)
	}
	policyFile := "(given in memory)"
	if c.Policy == nil && c.PolicyPath != "" {
		policyFile = c.PolicyPath
		if abs, err := filepath.Abs(c.PolicyPath); err == nil {
			policyFile = abs
		}
	}
	mode := string(g.current().Mode)
	if mode == "" {
		mode = string(policy.ModeEnforce)
	}
	g.log.Info("latch: guard open", "store", storeName, "policy", policyFile, "policy_hash", g.current().Hash,
		"mode", mode, "environment", g.env)
	switch {
	case c.Scope != nil && g.current().Scopes != nil:
		g.log.Warn("latch: the policy's scopes section is not used: Config.Scope is the scope provider")
	case g.scope.Load() != nil:
		g.log.Info("latch: scopes from the policy", "scopes", g.current().Scopes.String())
	}
}

// Close closes the guard's store.
// Close delivers what is queued for the sinks (waiting at most SinkTimeout) and closes the
// guard's store.
func (g *Guard) Close() error {
	g.sinks.close()
	return g.store.Close()
}

// Now is the guard's clock (Config.Now): the time expiries and leases are read by. Code that
// reads the guard's store beside it (package interrupt) reads time by it too.
func (g *Guard) Now() time.Time { return g.cfg.Now() }

// Policy returns the guard's policy in force.
func (g *Guard) Policy() *policy.Policy { return g.current() }

// current is the policy in force.
func (g *Guard) current() *policy.Policy { return g.pol.Load() }

// Store returns the guard's store, for operator tooling.
func (g *Guard) Store() store.Store { return g.store }

// Environment returns the environment calls default to.
func (g *Guard) Environment() string { return g.env }

// StoreOptions configures OpenStore.
type StoreOptions struct {
	// ReadOnly opens an existing store without creating or migrating it.
	ReadOnly bool
	Logger   *slog.Logger
}

// OpenStore opens the store at url with the backend registered for its scheme (store.Open):
// sqlite:PATH always, since this package links the SQLite store in; postgres://… and
// postgresql://… once the program imports the PostgreSQL store,
//
//	import _ "github.com/latchkit/latch/store/postgres"
//
// and any other scheme whose backend package the program imports.
func OpenStore(ctx context.Context, url string, opts *StoreOptions) (store.Store, error) {
	var o StoreOptions
	if opts != nil {
		o = *opts
	}
	return store.Open(ctx, url, &store.OpenOptions{ReadOnly: o.ReadOnly, Logger: o.Logger})
}

// newID returns prefix + 32 lowercase hex characters from the system CSPRNG.
func newID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	return prefix + hex.EncodeToString(b[:])
}

// idempotencyToken derives the token of docs/guarantees.md#the-idempotency-tokens from the effect key and attempt:
// the canonical form of {"attempt": attempt, "effect_key": key, "schema": "latch.idempotency/v1"},
// written member by member in key order rather than through a map, since it runs on every call.
func idempotencyToken(key string, attempt int) string {
	var buf [128]byte
	b, err := canon.AppendInt(append(buf[:0], `{"attempt":`...), int64(attempt))
	if err != nil {
		return "" // unreachable: attempts count from 1
	}
	return tokenOf(append(b, ','), key, "latch.idempotency/v1")
}

// tokenOf ends a token's canonical document begun in b with its last two members, the effect key
// and the schema (a constant that needs no escaping), and shapes its hash as a UUID. It returns
// "" for a key that is not valid UTF-8, which an effect key always is.
func tokenOf(b []byte, key, schema string) string {
	b, err := canon.AppendString(append(b, `"effect_key":`...), key)
	if err != nil {
		return ""
	}
	b = append(b, `,"schema":"`...)
	b = append(b, schema...)
	return uuidOf(append(b, `"}`...))
}

// uuidOf shapes the SHA-256 of b as a version 8 (custom, name-derived) UUID.
func uuidOf(b []byte) string {
	sum := sha256.Sum256(b)
	sum[6] = sum[6]&0x0f | 0x80 // version 8: a custom, name-derived UUID
	sum[8] = sum[8]&0x3f | 0x80 // RFC 9562 variant
	var u [36]byte              // written in place: one allocation, the string
	hex.Encode(u[0:8], sum[0:4])
	hex.Encode(u[9:13], sum[4:6])
	hex.Encode(u[14:18], sum[6:8])
	hex.Encode(u[19:23], sum[8:10])
	hex.Encode(u[24:36], sum[10:16])
	u[8], u[13], u[18], u[23] = '-', '-', '-', '-'
	return string(u[:])
}

// effectToken derives the token of EffectToken from the effect key alone: the canonical form of
// {"effect_key": key, "schema": "latch.effect-token/v1"}, written as idempotencyToken's is.
func effectToken(key string) string {
	var buf [128]byte
	return tokenOf(append(buf[:0], '{'), key, "latch.effect-token/v1")
}
