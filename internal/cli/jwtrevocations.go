package cli

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/latchkit/latch/identity"
)

// jwtRevocations are the flags of a revocation feed for the verified JWTs (identity's
// RevocationFeed): a revoked credential is refused before its exp, and past the max staleness
// every JWT of the issuer is.
type jwtRevocations struct {
	source       string // FILE or URL
	maxStaleness time.Duration
	poll         time.Duration
	push         bool // latch serve takes pushes (--revocation-push-secret-file)

	built *identity.RevocationFeed // the feed provider built, for the push endpoint
}

func (r *jwtRevocations) register(f *pflag.FlagSet) {
	f.StringVar(&r.source, "jwt-revocations", "", "refuse JWTs this revocation feed reports revoked, before their exp: a `FILE` re-read as it changes, or a URL polled (https; http only on loopback); a plain list or CAEP events (docs/governance.md#revoked-credentials)")
	f.DurationVar(&r.maxStaleness, "jwt-revocations-max-staleness", 0, "refuse every JWT of the issuer (revocation_feed_stale) while the feed's last successful read is older than `DURATION` (default 0: no bound)")
	f.DurationVar(&r.poll, "jwt-revocations-poll", 0, "read the feed again when its last read is older than `DURATION` (default 5s for a file, 30s for a URL)")
}

func (r *jwtRevocations) given() bool {
	return r.source != "" || r.maxStaleness != 0 || r.poll != 0
}

func (r *jwtRevocations) check() error {
	switch {
	case r.source == "" && !r.push && (r.maxStaleness != 0 || r.poll != 0):
		return usagef("--jwt-revocations-max-staleness and --jwt-revocations-poll go with --jwt-revocations FILE|URL")
	case r.maxStaleness < 0:
		return usagef("--jwt-revocations-max-staleness %v: want a duration, or 0 for no bound", r.maxStaleness)
	case r.poll < 0:
		return usagef("--jwt-revocations-poll %v: want a positive duration", r.poll)
	}
	_, err := r.config(nil, "")
	return err
}

// config checks the flags by building the feed they describe (which does no I/O).
func (r *jwtRevocations) config(log *slog.Logger, issuer string) (*identity.RevocationFeed, error) {
	f, err := identity.NewRevocationFeed(&identity.RevocationConfig{Source: r.source, Issuers: []string{issuer},
		MaxStaleness: r.maxStaleness, Poll: r.poll, Logger: log})
	if err != nil {
		return nil, usagef("--jwt-revocations: %s", strings.TrimLeft(strings.TrimPrefix(err.Error(), "identity: revocation feed"), ": "))
	}
	return f, nil
}

// feed builds the feed the flags describe for issuer (nil when none) and reads it once: a feed
// that cannot be read at start stops the command rather than run unknowing.
func (r *jwtRevocations) feed(ctx context.Context, issuer string, log *slog.Logger) (*identity.RevocationFeed, error) {
	if r.source == "" && !r.push {
		return nil, nil
	}
	f, err := r.config(log, issuer)
	if err != nil {
		return nil, err
	}
	if err := f.Refresh(ctx); err != nil {
		return nil, fmt.Errorf("--jwt-revocations: %w", err)
	}
	r.built = f
	return f, nil
}
