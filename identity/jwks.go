package identity

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

const (
	// refreshInterval is the least time between two JWKS fetches, whatever triggers them: a
	// stream of tokens with made-up kids costs the issuer at most one request per interval.
	refreshInterval = 30 * time.Second
	// fetchTimeout bounds one JWKS fetch, independent of the caller's context.
	fetchTimeout = 10 * time.Second
	// maxJWKSBytes bounds the JWKS document read.
	maxJWKSBytes = 1 << 20
)

// jwksSource is a JWKS URL's key set, fetched on first use and cached. It is refetched when the
// cache is older than ttl, or when a token names a kid the set lacks, but never more than once
// per refreshInterval. A failed refetch of a stale set fails closed: stale keys are not used.
type jwksSource struct {
	url    string
	client *http.Client
	ttl    time.Duration
	now    func() time.Time

	fetchMu sync.Mutex // held across a fetch, so concurrent callers wait for one fetch

	mu          sync.Mutex // guards the fields below
	set         *keySet    // nil until a fetch succeeds
	fetchedAt   time.Time  // when set was fetched
	attempted   bool       // whether a fetch has been tried
	lastAttempt time.Time  // when the last fetch was tried
	lastErr     *Error     // the last fetch's error, nil if it succeeded
}

type jwksState struct {
	set         *keySet
	fetchedAt   time.Time
	attempted   bool
	lastAttempt time.Time
	lastErr     *Error
}

func (s *jwksSource) state() jwksState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return jwksState{s.set, s.fetchedAt, s.attempted, s.lastAttempt, s.lastErr}
}

// keys returns a key set fit to verify a token naming kid ("" for none).
func (s *jwksSource) keys(ctx context.Context, kid string) (*keySet, *Error) {
	if set, ok := s.usable(s.state(), kid); ok {
		return set, nil
	}
	s.fetchMu.Lock()
	defer s.fetchMu.Unlock()
	// Another caller may have fetched while this one waited.
	st := s.state()
	if set, ok := s.usable(st, kid); ok {
		return set, nil
	}
	now := s.now()
	if st.attempted && now.Sub(st.lastAttempt) < refreshInterval {
		// Rate-limited. A set that is still fresh answers (the kid will be reported unknown);
		// a stale or missing one repeats the last failure.
		if st.set != nil && now.Sub(st.fetchedAt) < s.ttl {
			return st.set, nil
		}
		if st.lastErr != nil {
			return nil, st.lastErr
		}
		return nil, refuse("keys_unavailable", "jwks is stale and its refresh is rate-limited")
	}
	set, err := s.fetch(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempted, s.lastAttempt = true, now
	if err != nil {
		s.lastErr = err
		return nil, err
	}
	s.set, s.fetchedAt, s.lastErr = set, now, nil
	return set, nil
}

// usable reports whether st's set can answer for kid without a fetch: it exists, is fresh, and
// has the kid if one is named.
func (s *jwksSource) usable(st jwksState, kid string) (*keySet, bool) {
	if st.set == nil || s.now().Sub(st.fetchedAt) >= s.ttl {
		return nil, false
	}
	if kid != "" && !st.set.has(kid) {
		return nil, false
	}
	return st.set, true
}

// fetch GETs and parses the JWKS. It runs on a context detached from the caller's cancellation
// (but not its values), so one impatient caller cannot spend the rate-limited attempt for all.
func (s *jwksSource) fetch(ctx context.Context) (*keySet, *Error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
	defer cancel()
	unavailable := func(msg string, err error) *Error {
		return &Error{Reason: "keys_unavailable", Msg: msg, Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, unavailable("fetch jwks", err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, unavailable("fetch jwks", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, refuse("keys_unavailable", fmt.Sprintf("fetch jwks: status %d", resp.StatusCode))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, unavailable("read jwks", err)
	}
	if len(body) > maxJWKSBytes {
		return nil, refuse("keys_unavailable", fmt.Sprintf("jwks larger than %d bytes", maxJWKSBytes))
	}
	set, err := parseJWKS(body)
	if err != nil {
		return nil, unavailable("read jwks", err)
	}
	return set, nil
}
