package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"
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

// session is one logged-in person. Only the SHA-256 of its secret is kept as the map key.
type session struct {
	name    string
	method  string // "session" or "proxy"
	csrf    string
	created time.Time
	seen    time.Time
	flash   string // a message for the next page
}

// sessions keeps the console's sessions in the serve process.
type sessions struct {
	mu   sync.Mutex
	m    map[[32]byte]*session
	ttl  time.Duration // from login
	idle time.Duration // from the last request
	now  func() time.Time
}

func newSessions(ttl, idle time.Duration, now func() time.Time) *sessions {
	return &sessions{m: map[[32]byte]*session{}, ttl: ttl, idle: idle, now: now}
}

// create starts a session and returns its secret (the cookie's value).
func (ss *sessions) create(name, method string) (string, *session) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error
	secret := base64.RawURLEncoding.EncodeToString(b[:])
	mac := hmac.New(sha256.New, b[:])
	mac.Write([]byte("latch console csrf"))
	now := ss.now()
	s := &session{name: name, method: method, csrf: base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), created: now, seen: now}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.sweep(now)
	ss.m[sha256.Sum256([]byte(secret))] = s
	return secret, s
}

// get returns the live session of secret, and marks it seen; nil when there is none or it
// expired (and then it is forgotten).
func (ss *sessions) get(secret string) *session {
	if secret == "" {
		return nil
	}
	k := sha256.Sum256([]byte(secret))
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.m[k]
	if s == nil {
		return nil
	}
	now := ss.now()
	if ss.expired(s, now) {
		delete(ss.m, k)
		return nil
	}
	s.seen = now
	return s
}

func (ss *sessions) expired(s *session, now time.Time) bool {
	return !now.Before(s.created.Add(ss.ttl)) || !now.Before(s.seen.Add(ss.idle))
}

// end forgets the session of secret.
func (ss *sessions) end(secret string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, sha256.Sum256([]byte(secret)))
}

// endAll forgets every session of name (an account removed, a proxy naming another person).
func (ss *sessions) endAll(name string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for k, s := range ss.m {
		if s.name == name {
			delete(ss.m, k)
		}
	}
}

func (ss *sessions) sweep(now time.Time) {
	if len(ss.m) < 1024 {
		return
	}
	for k, s := range ss.m {
		if ss.expired(s, now) {
			delete(ss.m, k)
		}
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
