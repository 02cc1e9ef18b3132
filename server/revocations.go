package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// revocationsAccepted is the answer to a push: how many revocations the document held, and
// when the feed was last refreshed (this push, for a feed fed only by pushes).
type revocationsAccepted struct {
	Accepted    int     `json:"accepted"`
	RefreshedAt *string `json:"refreshed_at"`
}

// pushRevocations is POST /v1/revocations: a revocation document (a plain list, or CAEP events
// as JSON) added to the JWT revocation feed. It is authenticated by its own secret
// (Config.RevocationSecret as a bearer credential), never by an API token or a JWT: a feed's
// transmitter is neither an agent nor a person. Pushing the same document again changes
// nothing.
func (s *Server) pushRevocations(w http.ResponseWriter, r *http.Request) {
	feed := s.cfg.Revocations
	if feed == nil || len(s.cfg.RevocationSecret) == 0 {
		writeProblem(w, problem(http.StatusNotFound, "no_revocation_feed", "this server takes no revocation pushes: latch serve --jwt-revocations … --revocation-push-secret-file FILE"))
		return
	}
	scheme, cred, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(cred) == "" {
		writeProblem(w, problem(http.StatusUnauthorized, "unauthenticated", "no credential: send Authorization: Bearer with the revocation push secret"))
		return
	}
	got, want := sha256.Sum256([]byte(strings.TrimSpace(cred))), sha256.Sum256(s.cfg.RevocationSecret)
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		writeProblem(w, problem(http.StatusUnauthorized, "invalid_token", "not the revocation push secret"))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeProblem(w, problem(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("the body exceeds %d bytes", s.cfg.MaxBody)))
			return
		}
		writeProblem(w, problem(http.StatusBadRequest, "malformed_body", "read the body: "+err.Error()))
		return
	}
	n, err := feed.Push(body)
	if err != nil {
		writeProblem(w, problem(http.StatusBadRequest, "invalid_revocations", err.Error()))
		return
	}
	s.log.Info("latch serve: revocations pushed", "accepted", n)
	var at *string
	if t := feed.Refreshed(); !t.IsZero() {
		v := t.UTC().Format(time.RFC3339Nano)
		at = &v
	}
	writeJSON(w, http.StatusOK, revocationsAccepted{Accepted: n, RefreshedAt: at})
}
