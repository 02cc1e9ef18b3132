package identity

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/latchkit/latch"
)

const (
	defaultLeeway   = 30 * time.Second
	maxLeeway       = 5 * time.Minute
	defaultCacheTTL = 10 * time.Minute
	// maxTokenBytes bounds the credential parsed; real JWTs are a few KiB.
	maxTokenBytes = 64 << 10
)

// supportedAlgorithms are the JWS algorithms this package verifies, each bound to its own key
// type (docs/authority.md#identity-jwts).
var supportedAlgorithms = []string{"RS256", "ES256", "EdDSA"}

// Config configures a JWT verifier. Issuer, Audience and exactly one key source (KeyFiles or
// JWKSURL) are required.
type Config struct {
	// Issuer is the exact iss a token must carry.
	Issuer string
	// Audience must be the token's aud, or one of the strings in its aud list.
	Audience string
	// Leeway is the clock skew tolerated on exp, nbf and iat. Zero means 30s; at most 5m.
	Leeway time.Duration
	// Algorithms are the accepted JWS algorithms, a subset of RS256, ES256 and EdDSA (the
	// default: all three). "none" and the HMAC algorithms (HS256…) are refused: a verifier that
	// holds only public keys must never treat one as a shared secret.
	Algorithms []string

	// KeyFiles are pinned public keys, one PEM file each holding one PKIX "PUBLIC KEY" block:
	// RSA (at least 2048 bits), EC P-256 or Ed25519.
	KeyFiles []string
	// KeyIDs optionally labels the pinned keys: KeyIDs[i] is the kid of KeyFiles[i] ("" for
	// none). A token naming a kid is checked only with the key labelled so, or with the
	// unlabelled keys; a token naming none is checked with every key that fits its algorithm.
	// Empty, or as long as KeyFiles, with no kid repeated.
	KeyIDs []string

	// JWKSURL is where the issuer publishes its keys, as an alternative to KeyFiles. It must be
	// https (http is allowed for loopback hosts only). The set is fetched on first use (NewJWT
	// does no I/O), cached, and refetched when older than CacheTTL or when a token names a kid
	// it lacks — at most once per 30s. A fetch has a 10s timeout and reads at most 1 MiB. When a
	// stale set cannot be refetched, verification fails: stale keys are not used.
	JWKSURL string
	// CacheTTL is how long a fetched JWKS is used. Zero means 10m; at least 30s.
	CacheTTL time.Duration
	// HTTPClient fetches the JWKS. Nil means a client of this package's own, which follows
	// redirects only to URLs JWKSURL itself could name.
	HTTPClient *http.Client

	// AgentClaim is the claim naming the principal's agent; default "sub". Its value must be a
	// non-empty string. A name is looked up first as a top-level claim (so
	// "https://example.com/agent" works), then as a dotted path into nested objects
	// ("act.sub").
	AgentClaim string
	// UserClaim is the claim naming the user the agent acts for, looked up like AgentClaim;
	// default none. When the token lacks it the principal has no user; when it is present it
	// must be a string.
	UserClaim string

	// ApproverClaim and ApproverValue, ApproverAudience: the marks of a person's token. Without
	// any, every token this verifier accepts is an agent's, and nothing tells a person from an
	// agent: a verifier that serves both must be told. A token carrying a mark is a person's — an
	// approver, who answers approval requests and resolves effects — and never an agent's:
	// Principal and Verify refuse it (approver_token), so it cannot propose. Identify tells
	// which a token is.
	//
	// ApproverClaim names a claim (looked up like AgentClaim, e.g. "latch_role"); a token whose
	// claim is the string ApproverValue, or a list of strings holding it, is a person's.
	// ApproverValue is required with ApproverClaim.
	ApproverClaim string
	ApproverValue string
	// ApproverAudience is an audience that marks a person's token: a token whose aud holds it
	// is accepted in place of Audience, and is a person's. A token whose aud holds both
	// Audience and ApproverAudience is refused (role): one credential is one principal.
	ApproverAudience string
	// ApproverNameClaim is the claim naming the person of a person's token, looked up like
	// AgentClaim; default "sub".
	ApproverNameClaim string

	// Revocations, when set, is consulted for every token whose signature and claims verify: a
	// token it reports revoked (by jti, or its sub's tokens issued at or before a time) is
	// refused credential_revoked before its exp, and while the feed is stale for Issuer every
	// token is refused revocation_feed_stale (docs/governance.md#revoked-credentials). Several
	// verifiers may share one feed.
	Revocations *RevocationFeed

	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// JWT verifies bearer JWTs and maps them to principals. It implements latch.IdentityProvider and
// is safe for concurrent use.
type JWT struct {
	cfg    Config
	parser *jwt.Parser
	pinned *keySet     // with KeyFiles
	remote *jwksSource // with JWKSURL
}

var _ latch.IdentityProvider = (*JWT)(nil)

// NewJWT validates cfg (which it copies), fills its defaults and loads the pinned keys. It does
// no network I/O.
func NewJWT(cfg *Config) (*JWT, error) {
	if cfg == nil {
		return nil, errors.New("identity: config required: issuer, audience and keys")
	}
	c := *cfg
	c.Algorithms = slices.Clone(c.Algorithms)
	c.KeyFiles = slices.Clone(c.KeyFiles)
	c.KeyIDs = slices.Clone(c.KeyIDs)
	if err := c.fill(); err != nil {
		return nil, fmt.Errorf("identity: %w", err)
	}
	j := &JWT{cfg: c}
	j.parser = jwt.NewParser(
		jwt.WithValidMethods(c.Algorithms),
		jwt.WithIssuer(c.Issuer),
		jwt.WithAudience(c.audiences()...),
		jwt.WithLeeway(c.Leeway),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(c.Now),
	)
	if len(c.KeyFiles) > 0 {
		keys := make([]key, len(c.KeyFiles))
		for i, path := range c.KeyFiles {
			pub, err := loadPEM(path)
			if err != nil {
				return nil, fmt.Errorf("identity: key file %s: %w", path, err)
			}
			keys[i].pub = pub
			if len(c.KeyIDs) > 0 {
				keys[i].kid = c.KeyIDs[i]
			}
		}
		set, err := newKeySet(keys)
		if err != nil {
			return nil, fmt.Errorf("identity: key ids: %w", err)
		}
		j.pinned = set
	} else {
		client := c.HTTPClient
		if client == nil {
			client = &http.Client{CheckRedirect: checkRedirect}
		}
		j.remote = &jwksSource{url: c.JWKSURL, client: client, ttl: c.CacheTTL, now: c.Now}
	}
	return j, nil
}

func (c *Config) fill() error {
	if c.Issuer == "" {
		return errors.New("issuer required")
	}
	if c.Audience == "" {
		return errors.New("audience required")
	}
	switch {
	case c.Leeway < 0:
		return fmt.Errorf("leeway %s is negative", c.Leeway)
	case c.Leeway == 0:
		c.Leeway = defaultLeeway
	case c.Leeway > maxLeeway:
		return fmt.Errorf("leeway %s exceeds %s", c.Leeway, maxLeeway)
	}
	if len(c.Algorithms) == 0 {
		c.Algorithms = slices.Clone(supportedAlgorithms)
	}
	for _, a := range c.Algorithms {
		switch {
		case strings.EqualFold(a, "none"):
			return errors.New(`algorithm "none" refused: tokens must be signed`)
		case strings.HasPrefix(strings.ToUpper(a), "HS"):
			return fmt.Errorf("algorithm %q refused: symmetric algorithms would let a public key act as a shared secret", a)
		case !slices.Contains(supportedAlgorithms, a):
			return fmt.Errorf("algorithm %q not supported (supported: %s)", a, strings.Join(supportedAlgorithms, ", "))
		}
	}
	switch {
	case len(c.KeyFiles) == 0 && c.JWKSURL == "":
		return errors.New("keys required: key files or a jwks url")
	case len(c.KeyFiles) > 0 && c.JWKSURL != "":
		return errors.New("key files and a jwks url are exclusive: choose one key source")
	}
	if len(c.KeyIDs) > 0 && len(c.KeyIDs) != len(c.KeyFiles) {
		return fmt.Errorf("%d key ids for %d key files", len(c.KeyIDs), len(c.KeyFiles))
	}
	if c.JWKSURL != "" {
		if err := checkJWKSURL(c.JWKSURL); err != nil {
			return err
		}
	}
	switch {
	case c.CacheTTL < 0:
		return fmt.Errorf("cache ttl %s is negative", c.CacheTTL)
	case c.CacheTTL == 0:
		c.CacheTTL = defaultCacheTTL
	case c.CacheTTL < refreshInterval:
		return fmt.Errorf("cache ttl %s is below the %s refresh interval", c.CacheTTL, refreshInterval)
	}
	if c.AgentClaim == "" {
		c.AgentClaim = "sub"
	}
	if err := checkClaimPath(c.AgentClaim); err != nil {
		return fmt.Errorf("agent claim: %w", err)
	}
	if c.UserClaim != "" {
		if err := checkClaimPath(c.UserClaim); err != nil {
			return fmt.Errorf("user claim: %w", err)
		}
	}
	if err := c.fillApprover(); err != nil {
		return err
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// fillApprover checks the marks of a person's token.
func (c *Config) fillApprover() error {
	switch {
	case c.ApproverClaim == "" && c.ApproverValue != "":
		return errors.New("approver value given without an approver claim")
	case c.ApproverClaim != "" && c.ApproverValue == "":
		return fmt.Errorf("approver claim %q needs the value that marks a person's token", c.ApproverClaim)
	case c.ApproverAudience != "" && c.ApproverAudience == c.Audience:
		return fmt.Errorf("approver audience %q is the agents' audience: a person's audience must differ", c.ApproverAudience)
	}
	if c.ApproverClaim != "" {
		if err := checkClaimPath(c.ApproverClaim); err != nil {
			return fmt.Errorf("approver claim: %w", err)
		}
	}
	if c.ApproverNameClaim == "" {
		c.ApproverNameClaim = "sub"
	}
	if err := checkClaimPath(c.ApproverNameClaim); err != nil {
		return fmt.Errorf("approver name claim: %w", err)
	}
	return nil
}

// audiences are the audiences a token may carry: the agents', and the people's when set.
func (c *Config) audiences() []string {
	if c.ApproverAudience == "" {
		return []string{c.Audience}
	}
	return []string{c.Audience, c.ApproverAudience}
}

// checkJWKSURL refuses a key source an on-path attacker could substitute.
func checkJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("jwks url: %w", err)
	}
	switch {
	case u.Host == "":
		return fmt.Errorf("jwks url %q has no host", raw)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("jwks url %q must be https (http only for loopback hosts)", raw)
}

// checkRedirect keeps the default client's redirects to URLs NewJWT would accept, so an
// https JWKS URL cannot be redirected to plain http.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("stopped after 5 redirects")
	}
	return checkJWKSURL(req.URL.String())
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func checkClaimPath(p string) error {
	if slices.Contains(strings.Split(p, "."), "") {
		return fmt.Errorf("%q has an empty path segment", p)
	}
	return nil
}

// Principal verifies the credential in ctx (see latch.WithCredential) and returns its principal.
// A person's token (see Config.ApproverClaim) is refused approver_token: people do not propose.
func (j *JWT) Principal(ctx context.Context) (latch.Principal, error) {
	return j.Verify(ctx, latch.CredentialFrom(ctx))
}

// Verify verifies token — a compact JWS, optionally prefixed "Bearer " — and returns its
// principal. A JWKS fetch it triggers carries ctx's values but not its cancellation (the fetch
// has its own timeout and serves every waiting caller). The error is an *Error. A person's token
// is refused approver_token.
func (j *JWT) Verify(ctx context.Context, token string) (latch.Principal, error) {
	p, person, err := j.identify(ctx, token)
	if err != nil {
		return latch.Principal{}, err
	}
	if person != nil {
		return latch.Principal{}, refuse("approver_token", "the token is a person's (an approver's): people answer approval requests and resolve effects, and do not propose actions")
	}
	return p, nil
}

// Person is the person a verified person's token names: an approver, who answers approval
// requests and resolves effects, and never proposes.
type Person struct {
	Name      string // the value of Config.ApproverNameClaim
	Issuer    string
	ExpiresAt time.Time // the token's exp
	Claims    map[string]any
}

// Identify verifies the credential in ctx, as Principal does, and tells whose it is: a person's
// (a token carrying an approver mark: the *Person, and a zero principal), or an agent's (its
// principal, and a nil *Person). The error is an *Error.
func (j *JWT) Identify(ctx context.Context) (latch.Principal, *Person, error) {
	return j.identify(ctx, latch.CredentialFrom(ctx))
}

func (j *JWT) identify(ctx context.Context, token string) (latch.Principal, *Person, error) {
	claims, err := j.verify(ctx, token)
	if err != nil {
		return latch.Principal{}, nil, err
	}
	if err := j.checkRevoked(ctx, claims); err != nil {
		return latch.Principal{}, nil, err
	}
	person, err := j.isPerson(claims)
	switch {
	case err != nil:
		return latch.Principal{}, nil, err
	case person:
		pp, err := j.person(claims)
		return latch.Principal{}, pp, err
	}
	p, err := j.principal(claims)
	return p, nil, err
}

// verify checks token's signature and registered claims and returns its claims.
func (j *JWT) verify(ctx context.Context, token string) (jwt.MapClaims, error) {
	token = strings.TrimSpace(token)
	if scheme, rest, ok := strings.Cut(token, " "); ok {
		if !strings.EqualFold(scheme, "bearer") {
			return nil, refuse("malformed", "credential is not a bearer token")
		}
		token = strings.TrimSpace(rest)
	} else if strings.EqualFold(token, "bearer") {
		token = ""
	}
	if token == "" {
		return nil, refuse("no_credential", "no credential")
	}
	if len(token) > maxTokenBytes {
		return nil, refuse("malformed", fmt.Sprintf("token of %d bytes exceeds %d", len(token), maxTokenBytes))
	}
	claims := jwt.MapClaims{}
	parsed, err := j.parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		return j.keyFor(ctx, t)
	})
	if err != nil {
		return nil, j.explain(parsed, claims, err)
	}
	return claims, nil
}

// checkRevoked asks the revocation feed, if any, about verified claims.
func (j *JWT) checkRevoked(ctx context.Context, claims jwt.MapClaims) error {
	if j.cfg.Revocations == nil {
		return nil
	}
	sub, _ := claims["sub"].(string)
	jti, _ := claims["jti"].(string)
	var iat time.Time
	if t, _ := claims.GetIssuedAt(); t != nil {
		iat = t.Time
	}
	return j.cfg.Revocations.Check(ctx, j.cfg.Issuer, sub, jti, iat)
}

// isPerson reports whether verified claims carry an approver mark (Config.ApproverClaim,
// ApproverAudience). A token marked by audience for both agents and people is refused.
func (j *JWT) isPerson(claims jwt.MapClaims) (bool, error) {
	person := false
	if j.cfg.ApproverAudience != "" {
		aud, _ := claims.GetAudience() // the parser has read it
		if slices.Contains(aud, j.cfg.ApproverAudience) {
			if slices.Contains(aud, j.cfg.Audience) {
				return false, refuse("role", fmt.Sprintf("audience holds both the agents' %s and the people's %s: a token is one or the other",
					quote(j.cfg.Audience), quote(j.cfg.ApproverAudience)))
			}
			person = true
		}
	}
	if j.cfg.ApproverClaim != "" {
		if v, ok := lookup(claims, j.cfg.ApproverClaim); ok {
			switch v := v.(type) {
			case string:
				person = person || v == j.cfg.ApproverValue
			case []any:
				for _, e := range v {
					if s, isString := e.(string); isString && s == j.cfg.ApproverValue {
						person = true
					}
				}
			}
		}
	}
	return person, nil
}

// person maps a person's verified claims to the person.
func (j *JWT) person(claims jwt.MapClaims) (*Person, error) {
	v, ok := lookup(claims, j.cfg.ApproverNameClaim)
	name, isString := v.(string)
	if !ok || !isString || strings.TrimSpace(name) == "" {
		return nil, refuse("approver_claim", fmt.Sprintf("approver name claim %q is missing or not a non-empty string", j.cfg.ApproverNameClaim))
	}
	p := &Person{Name: name, Issuer: j.cfg.Issuer, Claims: map[string]any(claims)}
	if exp, _ := claims.GetExpirationTime(); exp != nil {
		p.ExpiresAt = exp.Time.UTC()
	}
	return p, nil
}

// keyFor selects the keys that may verify t. jwt has already checked t's alg is allowed.
func (j *JWT) keyFor(ctx context.Context, t *jwt.Token) (any, error) {
	if _, ok := t.Header["crit"]; ok {
		// RFC 7515 §4.1.11: extensions a verifier does not understand must be refused.
		return nil, refuse("malformed", "critical header extensions not supported")
	}
	kid := ""
	if v, ok := t.Header["kid"]; ok {
		s, isString := v.(string)
		if !isString {
			return nil, refuse("malformed", "key id is not a string")
		}
		kid = s
	}
	alg := t.Method.Alg()
	set := j.pinned
	if j.remote != nil {
		var err *Error
		if set, err = j.remote.keys(ctx, kid); err != nil {
			return nil, err
		}
	}
	keys, err := set.candidates(kid, alg)
	if err != nil {
		return nil, err
	}
	if len(keys) == 1 {
		return keys[0], nil
	}
	vks := make([]jwt.VerificationKey, len(keys))
	for i, k := range keys {
		vks[i] = k
	}
	return jwt.VerificationKeySet{Keys: vks}, nil
}

// explain turns a jwt error into an *Error naming what failed. Claim values are quoted only
// once the signature has verified (jwt validates claims after the signature).
func (j *JWT) explain(t *jwt.Token, claims jwt.MapClaims, err error) error {
	if e, ok := errors.AsType[*Error](err); ok {
		return e
	}
	if errors.Is(err, jwt.ErrTokenMalformed) || t == nil || t.Header == nil {
		return refuse("malformed", "malformed token")
	}
	alg, _ := t.Header["alg"].(string)
	if !slices.Contains(j.cfg.Algorithms, alg) {
		return refuse("algorithm", fmt.Sprintf("algorithm %s not accepted", quote(alg)))
	}
	if errors.Is(err, jwt.ErrTokenSignatureInvalid) {
		return refuse("signature", "invalid signature")
	}
	if !errors.Is(err, jwt.ErrTokenInvalidClaims) {
		return refuse("malformed", "unverifiable token")
	}
	switch iss, isString := claims["iss"].(string); {
	case claims["iss"] != nil && !isString:
		return refuse("issuer", "issuer is not a string")
	case iss == "":
		return refuse("issuer", "token has no issuer")
	case iss != j.cfg.Issuer:
		return refuse("issuer", fmt.Sprintf("issuer %s not accepted", quote(iss)))
	}
	aud, audErr := claims.GetAudience()
	switch {
	case audErr != nil:
		return refuse("audience", "audience is not a string or a list of strings")
	case len(aud) == 0 || len(aud) == 1 && aud[0] == "":
		return refuse("audience", "token has no audience")
	case !slices.ContainsFunc(aud, func(a string) bool { return slices.Contains(j.cfg.audiences(), a) }):
		quoted := make([]string, 0, min(len(aud), 4))
		for _, a := range aud[:min(len(aud), 4)] {
			quoted = append(quoted, quote(a))
		}
		s := strings.Join(quoted, ", ")
		if len(aud) > 1 {
			if len(aud) > 4 {
				s += ", …"
			}
			s = "[" + s + "]"
		}
		return refuse("audience", fmt.Sprintf("audience %s not accepted", s))
	}
	exp, expErr := claims.GetExpirationTime()
	if expErr != nil {
		return refuse("no_expiry", "exp is not a number")
	}
	if exp == nil {
		return refuse("no_expiry", "token has no expiry (exp)")
	}
	if errors.Is(err, jwt.ErrTokenExpired) {
		e := refuse("expired", "token expired at "+stamp(exp.Time))
		// The signature, issuer and audience held (jwt checks claims after the signature), so
		// the principal is known: the pipeline refuses the call and records it, attributed. A
		// person's expired token names no agent.
		if person, perr := j.isPerson(claims); perr == nil && !person {
			if p, perr := j.principal(claims); perr == nil {
				e.Err = &latch.ExpiredCredentialError{Principal: p}
			}
		}
		return e
	}
	if errors.Is(err, jwt.ErrTokenNotValidYet) {
		nbf, _ := claims.GetNotBefore()
		if nbf == nil {
			return refuse("not_yet_valid", "token not valid yet")
		}
		return refuse("not_yet_valid", "token not valid before "+stamp(nbf.Time))
	}
	if errors.Is(err, jwt.ErrTokenUsedBeforeIssued) {
		iat, _ := claims.GetIssuedAt()
		if iat == nil {
			return refuse("issued_in_future", "token issued in the future")
		}
		return refuse("issued_in_future", "token issued in the future, at "+stamp(iat.Time))
	}
	if errors.Is(err, jwt.ErrInvalidType) {
		return refuse("malformed", "a time claim (nbf, iat) is not a number")
	}
	return refuse("malformed", "invalid claims")
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// principal maps verified claims to a principal.
func (j *JWT) principal(claims jwt.MapClaims) (latch.Principal, error) {
	v, ok := lookup(claims, j.cfg.AgentClaim)
	if !ok {
		return latch.Principal{}, refuse("agent_claim", fmt.Sprintf("agent claim %q missing", j.cfg.AgentClaim))
	}
	agent, ok := v.(string)
	if !ok || agent == "" {
		return latch.Principal{}, refuse("agent_claim", fmt.Sprintf("agent claim %q is not a non-empty string", j.cfg.AgentClaim))
	}
	p := latch.Principal{Agent: agent, Issuer: j.cfg.Issuer, Claims: map[string]any(claims)}
	if j.cfg.UserClaim != "" {
		if v, ok := lookup(claims, j.cfg.UserClaim); ok {
			user, isString := v.(string)
			if !isString {
				return latch.Principal{}, refuse("user_claim", fmt.Sprintf("user claim %q is not a string", j.cfg.UserClaim))
			}
			p.User = user
		}
	}
	if exp, _ := claims.GetExpirationTime(); exp != nil {
		p.ExpiresAt = exp.Time.UTC()
	}
	return p, nil
}

// lookup finds a claim by its exact top-level name, else by a dotted path into nested objects.
func lookup(claims map[string]any, name string) (any, bool) {
	if v, ok := claims[name]; ok {
		return v, true
	}
	var cur any = claims
	for seg := range strings.SplitSeq(name, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[seg]; !ok {
			return nil, false
		}
	}
	return cur, true
}
