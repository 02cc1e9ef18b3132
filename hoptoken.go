package latch

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/latchkit/latch/authority"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// HopTokenType is the JWS "typ" header of a hop token: a token of any other type (an identity
// JWT signed with the same key, say) is never read as a hop.
const HopTokenType = "latch-hop+jwt"

// DefaultHopTokenTTL is how long a hop token lives when its hop has no expires_at of its own.
const DefaultHopTokenTTL = time.Hour

// hopIDPattern is the shape of a hop's id, which a token names.
var hopIDPattern = regexp.MustCompile(`^dlg_[0-9a-f]{32}$`)

// hopClaims are the claims of a hop token: the hop's id and parent, the sender (iss), the
// receiver (aud, agent or agent/user), when it was issued and when it expires (the hop's own
// expires_at, or DefaultHopTokenTTL after issue).
type hopClaims struct {
	Hop    string `json:"hop"`
	Parent string `json:"parent"`
	jwt.RegisteredClaims
}

// checkHopKeys refuses a Config whose hop keys are not Ed25519 keys.
func checkHopKeys(c *Config) error {
	if c.HopKey != nil && len(c.HopKey) != ed25519.PrivateKeySize {
		return fmt.Errorf("latch: open: HopKey is %d bytes, an Ed25519 private key is %d", len(c.HopKey), ed25519.PrivateKeySize)
	}
	for i, k := range c.HopVerifyKeys {
		if len(k) != ed25519.PublicKeySize {
			return fmt.Errorf("latch: open: HopVerifyKeys[%d] is %d bytes, an Ed25519 public key is %d", i, len(k), ed25519.PublicKeySize)
		}
	}
	return nil
}

// HopToken signs a compact token for the hop d (Guard.Hop) with Config.HopKey: a JWS (JWT) of
// type latch-hop+jwt, EdDSA, naming the hop, its parent, its sender (iss) and its receiver
// (aud), expiring with the hop (or DefaultHopTokenTTL after now when the hop has no
// expires_at). The receiver presents the token where it would present the hop's id
// (Options.Hop, WithHop, "hop" over HTTP, _meta latch/hop behind the gateway); its guard checks
// the signature, that the audience is the caller and that the token has not expired before it
// looks the hop up in the store, then decides the call by the hop as for its id. A guard
// without HopKey issues none.
func (g *Guard) HopToken(d *store.Delegation) (string, error) {
	if g.cfg.HopKey == nil {
		return "", errors.New("latch: hop token: the guard has no HopKey to sign with")
	}
	if d == nil || d.Via != store.ViaHop {
		return "", errors.New("latch: hop token: not a hop (Guard.Hop makes one)")
	}
	gr, err := policy.ParseGrant(d.ID, d.Grant)
	if err != nil {
		return "", fmt.Errorf("latch: hop token %s: %w", d.ID, err)
	}
	now := g.cfg.Now()
	exp := gr.ExpiresAt
	if exp.IsZero() {
		exp = now.Add(DefaultHopTokenTTL)
	}
	if !exp.After(now) {
		return "", fmt.Errorf("latch: hop token %s: the hop expired at %s", d.ID, exp.UTC().Format(time.RFC3339))
	}
	aud := principalName(Principal{Agent: gr.Subject.Agent, User: gr.Subject.User})
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, hopClaims{Hop: d.ID, Parent: d.Parent, RegisteredClaims: jwt.RegisteredClaims{
		Issuer: d.CreatedBy, Audience: jwt.ClaimStrings{aud}, IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(exp),
	}})
	t.Header["typ"] = HopTokenType
	s, err := t.SignedString(g.cfg.HopKey)
	if err != nil {
		return "", fmt.Errorf("latch: hop token %s: %w", d.ID, err)
	}
	return s, nil
}

// isHopToken reports whether a presented hop is a token rather than an id: a compact JWS has
// three dot-separated parts, an id none.
func isHopToken(s string) bool { return strings.Count(s, ".") == 2 }

// hopFromToken checks a presented hop token — its signature against the guard's hop keys, its
// type, that its audience is the caller p and that it has not expired at now — without reading
// the store, and returns the id of the hop it names. Every failure is an *AuthorityError
// authority_hop saying which check failed.
func (g *Guard) hopFromToken(tok string, p Principal, now time.Time) (string, error) {
	keys := make([]jwt.VerificationKey, 0, len(g.cfg.HopVerifyKeys)+1)
	if g.cfg.HopKey != nil {
		keys = append(keys, g.cfg.HopKey.Public())
	}
	for _, k := range g.cfg.HopVerifyKeys {
		keys = append(keys, k)
	}
	refuse := func(why string) (string, error) {
		return "", &AuthorityError{Reason: authority.ReasonHop, Dimension: authority.DimHop, Detail: "the hop token " + why}
	}
	if len(keys) == 0 {
		return refuse("cannot be checked: this guard has no hop keys (Config.HopVerifyKeys)")
	}
	var c hopClaims
	_, err := jwt.ParseWithClaims(tok, &c, func(t *jwt.Token) (any, error) {
		if typ, _ := t.Header["typ"].(string); typ != HopTokenType {
			return nil, fmt.Errorf("is of type %q, not %s", typ, HopTokenType)
		}
		return jwt.VerificationKeySet{Keys: keys}, nil
	}, jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}), jwt.WithTimeFunc(func() time.Time { return now }),
		jwt.WithExpirationRequired(), jwt.WithIssuedAt())
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return refuse("has expired")
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return refuse("is not signed by a key this guard trusts")
	case err != nil:
		return refuse("is not valid: " + err.Error())
	case !hopIDPattern.MatchString(c.Hop):
		return refuse("names no hop id")
	case !addressedTo(c.Audience, p):
		return refuse(fmt.Sprintf("is addressed to %s, not to the caller %q", strings.Join(c.Audience, ", "), principalName(p)))
	}
	return c.Hop, nil
}

// addressedTo reports whether a token's audience is the caller p: one receiver, agent or
// agent/user, whose agent is p's and whose user, when it names one, is p's — the rule a hop's
// subject is matched by.
func addressedTo(aud jwt.ClaimStrings, p Principal) bool {
	if len(aud) != 1 {
		return false
	}
	agent, user, _ := strings.Cut(aud[0], "/")
	return agent == p.Agent && (user == "" || user == p.User)
}
