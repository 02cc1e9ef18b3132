package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"

	"github.com/latchkit/latch/store"
)

// Password rules. bcrypt reads at most 72 bytes, so a longer password is refused rather than
// silently cut.
const (
	MinPassword = 10
	MaxPassword = 72
	// PasswordCost is the bcrypt cost of new hashes.
	PasswordCost = 12
)

// ErrWrongPassword is returned by CheckPassword for a password that does not match.
var ErrWrongPassword = errors.New("wrong password")

// HashPassword returns the bcrypt hash under which an account's password is kept. It refuses a
// password shorter than MinPassword characters, longer than MaxPassword bytes, or not UTF-8.
func HashPassword(password string) (string, error) {
	switch {
	case !utf8.ValidString(password):
		return "", errors.New("password is not valid UTF-8")
	case utf8.RuneCountInString(password) < MinPassword:
		return "", fmt.Errorf("password is shorter than %d characters", MinPassword)
	case len(password) > MaxPassword:
		return "", fmt.Errorf("password is longer than %d bytes (bcrypt reads no further)", MaxPassword)
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), PasswordCost)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return string(h), nil
}

// CheckPassword reports whether password matches hash: nil, ErrWrongPassword, or an error
// saying the hash is unreadable.
func CheckPassword(hash, password string) error {
	err := bcrypt.CompareHashAndPassword([]byte(hash), []byte(password))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, bcrypt.ErrMismatchedHashAndPassword):
		return ErrWrongPassword
	}
	return fmt.Errorf("check password: %w", err)
}

// dummyCost is the bcrypt cost of dummyHash: PasswordCost, lowered by the package's tests (the
// race detector makes it take seconds).
var dummyCost = PasswordCost

// dummyHash is compared against when a login names no account, so that an unknown name takes
// as long to refuse as a wrong password.
var dummyHash = sync.OnceValue(func() []byte {
	h, _ := bcrypt.GenerateFromPassword([]byte("latch console timing equaliser"), dummyCost)
	return h
})

// limiter counts wrong passwords per key (an account name, a client address) and refuses
// further attempts for a while once there are too many: after limitFree failures the key is
// locked for limitBase, doubling with each further failure up to limitMax. A successful login
// clears the account's count. While a key is locked, even a right password is refused.
//
// An attempt is counted when it starts, not when its check ends: begin reserves it, and refuses
// it when the key's failures and the attempts still being checked reach the limit (after a lock
// lapses, one attempt at a time). So guesses
// sent at once are never checked beyond the limit (counted after the check, 40 guesses sent
// together would all be checked before the first failure was counted).
type limiter struct {
	mu   sync.Mutex
	free int // failures allowed before a lock
	keys map[string]*strikes
	now  func() time.Time
}

type strikes struct {
	n        int       // failures
	inflight int       // attempts begun and not ended
	until    time.Time // locked until
	last     time.Time
}

const (
	// limitFree failures lock an account name; limitFreeAddr lock a client address, which may
	// be a proxy that many people share.
	limitFree     = 5
	limitFreeAddr = 50
	limitBase     = 30 * time.Second
	limitMax      = 15 * time.Minute
	limitKeep     = time.Hour   // a key with no failure for this long is forgotten
	limitKeys     = 100_000     // beyond this many keys, forgotten ones are swept first
	limitBusy     = time.Second // how long to wait when the limit is taken by attempts in flight
)

func newLimiter(free int, now func() time.Time) *limiter {
	return &limiter{free: free, keys: map[string]*strikes{}, now: now}
}

// begin reserves an attempt against every key, or none: it returns 0 when the attempt may be
// checked (end must follow), and otherwise how long to wait — the longest lock among keys, or
// limitBusy when the attempts in flight would take the key past its limit.
func (l *limiter) begin(keys ...string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	var d time.Duration
	for _, k := range keys {
		s := l.keys[k]
		if s == nil {
			continue
		}
		if now.Sub(s.last) > limitKeep && s.inflight == 0 {
			delete(l.keys, k)
			continue
		}
		// The failures still allowed before a lock; once a lock has lapsed, one attempt at a
		// time (its failure locks the key again, for longer).
		budget := max(l.free-s.n, 1)
		switch {
		case now.Before(s.until):
			d = max(d, s.until.Sub(now))
		case s.inflight >= budget:
			d = max(d, limitBusy)
		}
	}
	if d > 0 {
		return d
	}
	if len(l.keys) >= limitKeys {
		l.sweep(now)
	}
	for _, k := range keys {
		s := l.keys[k]
		if s == nil {
			s = &strikes{last: now}
			l.keys[k] = s
		}
		s.inflight++
	}
	return 0
}

// end settles an attempt that begin reserved against keys: a wrong password counts as a failure
// of each, and may lock it.
func (l *limiter) end(wrong bool, keys ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	for _, k := range keys {
		s := l.keys[k]
		if s == nil {
			continue
		}
		s.inflight = max(s.inflight-1, 0)
		if !wrong {
			continue
		}
		if now.Sub(s.last) > limitKeep {
			s.n = 0
		}
		s.n++
		s.last = now
		if s.n >= l.free {
			lock := limitBase << min(s.n-l.free, 10)
			s.until = now.Add(min(lock, limitMax))
		}
	}
}

// clear forgets the failures of key (the attempts still in flight stay counted).
func (l *limiter) clear(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.keys[key]; s != nil {
		s.n, s.until = 0, time.Time{}
		if s.inflight == 0 {
			delete(l.keys, key)
		}
	}
}

func (l *limiter) sweep(now time.Time) {
	for k, s := range l.keys {
		if now.Sub(s.last) > limitKeep && s.inflight == 0 {
			delete(l.keys, k)
		}
	}
}

// gate bounds the password checks that run at once; a login that finds it full is refused, not
// queued.
type gate chan struct{}

// DefaultLoginConcurrency is the default of Config.LoginConcurrency: half the cores the process
// may use (at least one), so that a flood of logins leaves the other half to the API.
func DefaultLoginConcurrency() int { return max(1, runtime.GOMAXPROCS(0)/2) }

func (g gate) enter() bool {
	select {
	case g <- struct{}{}:
		return true
	default:
		return false
	}
}

func (g gate) leave() { <-g }

// session is one logged-in person, as the store keeps it, with the CSRF token of its forms.
type session struct {
	hash   string // store.SessionHash of the secret
	name   string
	method string // MethodSession or MethodProxy
	csrf   string
}

// sessions keeps the console's sessions in the store (store.SessionStore): a session outlives a
// restart of the server, and every replica on the store honours it and its logout at once. Only
// the SHA-256 of a session's secret is stored; the CSRF token of its forms is derived from the
// secret, so it is neither stored nor the same on two sessions.
type sessions struct {
	st   store.SessionStore
	ttl  time.Duration // from login
	idle time.Duration // from the last request
	now  func() time.Time
	log  *slog.Logger

	mu        sync.Mutex
	lastSweep time.Time
}

// sweepEvery is how often a server deletes the sessions that expired, at a login.
const sweepEvery = 10 * time.Minute

func newSessions(st store.SessionStore, ttl, idle time.Duration, now func() time.Time, log *slog.Logger) *sessions {
	return &sessions{st: st, ttl: ttl, idle: idle, now: now, log: log}
}

// touchEvery is how much later than its last recorded request a request must come to be
// written: a session's idle timeout is kept to this (a minute, or a tenth of the timeout when
// that is shorter), and a busy page costs no write per request.
func (ss *sessions) touchEvery() time.Duration { return min(time.Minute, ss.idle/10) }

// mac is the HMAC-SHA256 of what under the session secret, base64url.
func mac(secret, what string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(what))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// create starts a session in the store and returns its secret (the cookie's value).
func (ss *sessions) create(ctx context.Context, name, method string) (string, *session, error) {
	secret := randomToken()
	now := ss.now()
	rec := &store.Session{Hash: store.SessionHash(secret), Name: name, Method: method, CreatedAt: now, SeenAt: now, ExpiresAt: now.Add(ss.ttl)}
	if err := ss.st.CreateSession(ctx, rec); err != nil {
		return "", nil, err
	}
	ss.sweep(ctx, now)
	return secret, &session{hash: rec.Hash, name: name, method: method, csrf: mac(secret, "latch console csrf")}, nil
}

// get returns the live session of secret: nil when there is none, it ended, or it expired (and
// then it is deleted). With touch, a request is recorded (at most once per touchEvery). An
// error is a store that does not answer.
func (ss *sessions) get(ctx context.Context, secret string, touch bool) (*session, error) {
	if secret == "" {
		return nil, nil
	}
	h := store.SessionHash(secret)
	rec, err := ss.st.Session(ctx, h)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	now := ss.now()
	if !now.Before(rec.ExpiresAt) || !now.Before(rec.SeenAt.Add(ss.idle)) {
		if err := ss.st.EndSession(ctx, h); err != nil && !errors.Is(err, store.ErrNotFound) {
			ss.log.Warn("latch console: an expired session was not deleted", "err", err)
		}
		return nil, nil
	}
	if touch && now.Sub(rec.SeenAt) >= ss.touchEvery() {
		switch err := ss.st.TouchSession(ctx, h, now); {
		case errors.Is(err, store.ErrNotFound): // ended in the meantime
			return nil, nil
		case err != nil:
			return nil, err
		}
	}
	return &session{hash: h, name: rec.Name, method: rec.Method, csrf: mac(secret, "latch console csrf")}, nil
}

// end deletes the session of secret (a logout).
func (ss *sessions) end(ctx context.Context, secret string) error {
	if err := ss.st.EndSession(ctx, store.SessionHash(secret)); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

// endAll deletes every session of name (an account removed).
func (ss *sessions) endAll(ctx context.Context, name string) {
	if _, err := ss.st.EndSessions(ctx, name); err != nil {
		ss.log.Warn("latch console: the sessions of a removed account were not deleted", "name", name, "err", err)
	}
}

// sweep deletes the expired sessions, once per sweepEvery at most.
func (ss *sessions) sweep(ctx context.Context, now time.Time) {
	ss.mu.Lock()
	due := now.Sub(ss.lastSweep) >= sweepEvery
	if due {
		ss.lastSweep = now
	}
	ss.mu.Unlock()
	if !due {
		return
	}
	if _, err := ss.st.SweepSessions(ctx, now, now.Add(-ss.idle)); err != nil {
		ss.log.Warn("latch console: expired sessions were not swept", "err", err)
	}
}

// sameToken compares two tokens in constant time; empty never matches.
func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// randomToken returns 32 random bytes, base64url.
func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
