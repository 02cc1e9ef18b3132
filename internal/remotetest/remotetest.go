// Package remotetest is a real HTTP server on 127.0.0.1 that stands in, in tests, for a remote
// that acts (a payment processor, a bank): it counts what it did for each key, and can be told,
// per key, to refuse before acting or to act and then hang up without replying (a lost reply).
// The integration tests use it so that "nothing happened" and "it happened but the reply was
// lost" are what a real network client sees, not flags set by hand.
package remotetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
)

// Fault is what the server does to one request instead of acting and answering.
type Fault int

const (
	// Refuse answers 503 before acting: the remote did nothing.
	Refuse Fault = iota + 1
	// DropReply acts, then closes the connection without writing a response.
	DropReply
	// HangUp closes the connection without acting: the client sees what it sees after
	// DropReply and cannot tell the two apart; only asking the remote (Acts) can.
	HangUp
)

// ErrRefused is what Act returns when the remote answered that it did not act.
var ErrRefused = errors.New("remote refused before acting")

// Server is the remote. Its methods are safe for concurrent use.
type Server struct {
	srv    *httptest.Server
	mu     sync.Mutex
	acts   map[string]int
	faults map[string][]Fault
}

// New starts a server on 127.0.0.1, closed with t.Cleanup.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{acts: map[string]int{}, faults: map[string][]Fault{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the server's base URL.
func (s *Server) URL() string { return s.srv.URL }

// Fail makes the next requests for key meet faults, one per request, in order; later requests
// act normally.
func (s *Server) Fail(key string, faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[key] = append(s.faults[key], faults...)
}

// Acts returns how many times the remote acted for key.
func (s *Server) Acts(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acts[key]
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("key")
	s.mu.Lock()
	var f Fault
	if q := s.faults[key]; len(q) > 0 {
		f, s.faults[key] = q[0], q[1:]
	}
	if f != Refuse && f != HangUp {
		s.acts[key]++
	}
	s.mu.Unlock()
	switch f {
	case Refuse:
		http.Error(w, "unavailable: nothing was done", http.StatusServiceUnavailable)
	case DropReply, HangUp:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	default:
		fmt.Fprintf(w, "done:%s", key)
	}
}

// Act asks the remote to act for key, as a client would. It returns the remote's answer, an
// error matching ErrRefused when the remote said it did nothing, or the transport's error when
// no answer came (the remote may or may not have acted).
func (s *Server) Act(ctx context.Context, key string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.srv.URL+"/act?key="+url.QueryEscape(key), nil)
	if err != nil {
		return "", err
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		return "", fmt.Errorf("act %s: %w", key, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("act %s: read reply: %w", key, err)
	}
	if resp.StatusCode == http.StatusServiceUnavailable {
		return "", fmt.Errorf("act %s: %w", key, ErrRefused)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("act %s: status %d", key, resp.StatusCode)
	}
	return string(body), nil
}
