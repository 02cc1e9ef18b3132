package verify

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/identity"
	"github.com/latchkit/latch/policy"
)

// revocationPoll is how long the scenario's feed trusts a read: the clock is moved past it so
// that the next check reads the feed again, as a running guard's would.
const revocationPoll = time.Second

// credentialLife is how long the scenario's tokens live: the refusal must come before exp.
const credentialLife = 24 * time.Hour

// g20: a credential revoked through a revocation feed is refused before its exp.
//
// The scenario is verify's own, whatever identity setup the operator has (it cannot see it): a
// scratch JWT issuer whose public key the guard's verifier pins, and a revocation feed read from
// a file. Two tokens are issued for the scenario's principal, each valid for a day. Token A
// makes a call, which runs; then A's jti is written to the feed, the clock moves past the
// feed's poll interval (1s), and A makes another call: it must be refused credential_revoked,
// execute nothing and write nothing, a day before A's exp. For an action that needs approval,
// that call presents an approval requested with A and granted before the revocation. Control: token A runs before the
// revocation, and token B, not revoked, runs after it.
func (r *runner) g20(ctx context.Context) (outcome, error) {
	pk, why := r.runnable(3)
	if pk == nil {
		return notApplicable(why), nil
	}
	dir, err := os.MkdirTemp(r.tmp, "g20-")
	if err != nil {
		return outcome{}, fmt.Errorf("verify: %w", err)
	}
	is, err := newIssuer(dir)
	if err != nil {
		return outcome{}, err
	}
	feedFile := filepath.Join(dir, "revoked.txt")
	if err := os.WriteFile(feedFile, []byte("# latch verify G20: nothing revoked yet\n"), 0o600); err != nil {
		return outcome{}, fmt.Errorf("verify: write the revocation feed: %w", err)
	}
	var setupErr error
	e, err := r.newEnvWith(ctx, "g20", r.sp, guardOptions{tune: func(cfg *latch.Config, now func() time.Time) {
		feed, err := identity.NewRevocationFeed(&identity.RevocationConfig{Source: feedFile, Poll: revocationPoll, Now: now})
		if err != nil {
			setupErr = err
			return
		}
		jc := &identity.Config{Issuer: scratchIssuerName, Audience: scratchAudience, KeyFiles: []string{is.keyFile},
			Algorithms: []string{"EdDSA"}, UserClaim: scratchUserClaim, Revocations: feed, Now: now}
		j, err := identity.NewJWT(jc)
		if err != nil {
			setupErr = err
			return
		}
		cfg.Identity = j
		if r.faults[faultCredentialCached] {
			cfg.Identity = &cachingIdentity{next: j}
		}
	}})
	if err != nil {
		return outcome{}, err
	}
	defer e.close()
	if setupErr != nil {
		return outcome{}, fmt.Errorf("verify: the scenario's verifier: %w", setupErr)
	}

	p := pk.principal()
	t0 := e.clock.Now()
	exp := t0.Add(credentialLife)
	jtiA, jtiB := newTokenID(), newTokenID()
	tokA, err := is.token(p, jtiA, t0, exp)
	if err != nil {
		return outcome{}, err
	}
	tokB, err := is.token(p, jtiB, t0, exp)
	if err != nil {
		return outcome{}, err
	}
	v0, v1, v2 := pk.variants[0], pk.variant(1), pk.variant(2) // B's call takes its own key: a faulty A may have taken v1's

	ctxA := latch.WithCredential(ctx, tokA)
	var c1 counter
	err1 := e.run(ctxA, pk, v0, c1.commit)
	// An approved action's revoked call presents an approval granted before the revocation:
	// a granted approval does not carry a revoked credential.
	approvalID, asked := "", ""
	if pk.Decision == policy.Approve {
		var aerr error
		approvalID, aerr = e.requestApproval(ctxA, pk, v1)
		asked = fmt.Sprintf("; approval for %s requested with token A and granted: %s", v1.describe(), errText(aerr))
		if aerr != nil {
			return controlFailed(pk.Action, fmt.Sprintf("as %s: token A %s: %s, executions: %d%s", principalText(p), v0.describe(), outcomeOf(err1), c1.count(), asked)), nil
		}
	}

	doc := fmt.Sprintf("# latch verify G20\niss %s\njti %s\n", scratchIssuerName, jtiA)
	if err := os.WriteFile(feedFile, []byte(doc), 0o600); err != nil {
		return outcome{}, fmt.Errorf("verify: write the revocation feed: %w", err)
	}
	e.clock.set(e.clock.Now().Add(2 * revocationPoll))

	before, err := e.snapshot(ctx)
	if err != nil {
		return outcome{}, err
	}
	var c2 counter
	var err2 error
	if approvalID != "" {
		_, err2 = e.execApproved(ctxA, approvalID, pk, v1, c2.commit)
	} else {
		_, err2 = e.exec(ctxA, pk, v1, c2.commit)
	}
	after, err := e.snapshot(ctx)
	if err != nil {
		return outcome{}, err
	}
	var c3 counter
	err3 := e.run(latch.WithCredential(ctx, tokB), pk, v2, c3.commit)

	reason := ""
	if rf := latch.RefusalOf(err2); rf != nil {
		reason = string(rf.Reason)
	}
	left := exp.Sub(e.clock.Now())
	detail := fmt.Sprintf("issuer %s (verify's own, its key pinned), feed %s polled every %s; as %s: token A (jti %s, exp %s) %s: %s, executions: %d%s; A's jti written to the feed, clock moved %s; token A, %s before its exp, %s: %s, executions: %d, store before: %s, after: %s; token B (jti %s, not revoked) %s: %s, executions: %d",
		scratchIssuerName, filepath.Base(feedFile), revocationPoll, principalText(p), jtiA, exp.Format(time.RFC3339), v0.describe(), outcomeOf(err1), c1.count(), asked,
		2*revocationPoll, left.Round(time.Minute), v1.describe(), refusalText(err2), c2.count(), before, after, jtiB, v2.describe(), outcomeOf(err3), c3.count())
	switch {
	case err1 != nil || c1.count() != 1 || err3 != nil || c3.count() != 1 || left <= 0:
		return controlFailed(pk.Action, detail), nil
	case c2.count() != 0:
		return fail(pk.Action, "the call with the revoked credential executed", detail), nil
	case reason != string(latch.ReasonCredentialRevoked) || !errors.Is(err2, latch.ErrIdentity):
		return fail(pk.Action, "the call with the revoked credential was not refused credential_revoked", detail), nil
	case before != after:
		return fail(pk.Action, "the refused call wrote to the store", detail), nil
	}
	return pass(pk.Action, "verify's own issuer and feed, not yours: "+detail), nil
}

// refusalText is outcomeOf, naming the refusal's reason word when latch gives one.
func refusalText(err error) string {
	if rf := latch.RefusalOf(err); rf != nil && rf.Reason != "" {
		return "refused " + string(rf.Reason)
	}
	return outcomeOf(err)
}

// cachingIdentity is the identity provider of faultCredentialCached: it remembers the principal
// of each credential it has verified once and never asks again — the bug G20 exists to catch.
type cachingIdentity struct {
	next latch.IdentityProvider
	mu   sync.Mutex
	seen map[string]latch.Principal
}

func (c *cachingIdentity) Principal(ctx context.Context) (latch.Principal, error) {
	cred := latch.CredentialFrom(ctx)
	c.mu.Lock()
	p, ok := c.seen[cred]
	c.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := c.next.Principal(ctx)
	if err != nil {
		return p, err
	}
	c.mu.Lock()
	if c.seen == nil {
		c.seen = map[string]latch.Principal{}
	}
	c.seen[cred] = p
	c.mu.Unlock()
	return p, nil
}
