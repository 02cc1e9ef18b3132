package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Sentinel errors for a delivery that is refused before anything runs. A *RefusalError carries
// the detail and matches one of them.
var (
	// ErrSignatureMissing: the delivery carries no signature the verifier can check.
	ErrSignatureMissing = errors.New("webhook: signature missing")
	// ErrSignatureInvalid: the signature is malformed or matches none of the secrets.
	ErrSignatureInvalid = errors.New("webhook: signature invalid")
	// ErrTimestampOutsideTolerance: the signed timestamp is further from now than the tolerance
	// (a replay of an old delivery, or a clock far off).
	ErrTimestampOutsideTolerance = errors.New("webhook: timestamp outside tolerance")
	// ErrEventID: the verified delivery names no usable event or delivery id.
	ErrEventID = errors.New("webhook: event id missing or invalid")
	// ErrBodyTooLarge: the body is larger than Config.MaxBody.
	ErrBodyTooLarge = errors.New("webhook: body too large")
	// ErrMethod: a delivery must be a POST.
	ErrMethod = errors.New("webhook: method not allowed")
	// ErrBody: the body could not be read, or is not what the provider sends.
	ErrBody = errors.New("webhook: body unreadable")
)

// Refusal reasons: the "error" field of a refusal's JSON body.
const (
	ReasonSignatureMissing   = "signature_missing"
	ReasonSignatureInvalid   = "signature_invalid"
	ReasonTimestampTolerance = "timestamp_outside_tolerance"
	ReasonEventID            = "event_id_invalid"
	ReasonBodyTooLarge       = "body_too_large"
	ReasonMethod             = "method_not_allowed"
	ReasonBody               = "body_unreadable"
)

// RefusalError is a delivery refused before anything ran: nothing was decided, reserved or
// written. Reason is one of the Reason constants; Detail says what was wrong, for people (it
// never holds a secret or an expected signature).
type RefusalError struct {
	Reason string
	Detail string
}

func (e *RefusalError) Error() string { return "webhook: " + e.Reason + ": " + e.Detail }

// Is matches the sentinel of the reason.
func (e *RefusalError) Is(target error) bool {
	switch e.Reason {
	case ReasonSignatureMissing:
		return target == ErrSignatureMissing
	case ReasonSignatureInvalid:
		return target == ErrSignatureInvalid
	case ReasonTimestampTolerance:
		return target == ErrTimestampOutsideTolerance
	case ReasonEventID:
		return target == ErrEventID
	case ReasonBodyTooLarge:
		return target == ErrBodyTooLarge
	case ReasonMethod:
		return target == ErrMethod
	case ReasonBody:
		return target == ErrBody
	}
	return false
}

// status is the HTTP status a refusal answers with.
func (e *RefusalError) status() int {
	switch e.Reason {
	case ReasonSignatureMissing, ReasonSignatureInvalid, ReasonTimestampTolerance:
		return http.StatusUnauthorized
	case ReasonBodyTooLarge:
		return http.StatusRequestEntityTooLarge
	case ReasonMethod:
		return http.StatusMethodNotAllowed
	}
	return http.StatusBadRequest
}

func refuse(reason, format string, args ...any) *RefusalError {
	return &RefusalError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// Verifier checks a delivery's signature over its exact body and says which event it is. It
// returns a *RefusalError for a delivery it does not accept.
type Verifier interface {
	// Provider names the sender ("stripe", "github", or an HMAC scheme's name): the default
	// principal is "<provider>-webhook" and the default effect key "<provider>:{event_id}".
	Provider() string
	// Verify checks header and body at now and returns the verified event (without Body and
	// Header, which the handler fills in).
	Verify(header http.Header, body []byte, now time.Time) (*Event, error)
}

// DefaultTolerance is how far a signed timestamp may be from now when a config leaves it zero:
// the window Stripe's own libraries use.
const DefaultTolerance = 5 * time.Minute

// maxIDLen bounds an event id: it becomes part of an effect key.
const maxIDLen = 256

// checkID refuses an id that cannot name an effect: empty, too long, not printable text.
func checkID(id, where string) error {
	switch {
	case id == "":
		return refuse(ReasonEventID, "%s is missing", where)
	case len(id) > maxIDLen:
		return refuse(ReasonEventID, "%s is %d bytes, more than %d", where, len(id), maxIDLen)
	case !utf8.ValidString(id):
		return refuse(ReasonEventID, "%s is not valid UTF-8", where)
	}
	for _, r := range id {
		if !unicode.IsGraphic(r) || unicode.Is(unicode.Cf, r) {
			return refuse(ReasonEventID, "%s holds the character %U", where, r)
		}
	}
	return nil
}

// mac returns the HMAC of parts under key with h.
func mac(h func() hash.Hash, key []byte, parts ...[]byte) []byte {
	m := hmac.New(h, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// anyEqual reports whether one of got equals one of want, in constant time per comparison.
func anyEqual(got, want [][]byte) bool {
	ok := false
	for _, g := range got {
		for _, w := range want {
			if hmac.Equal(g, w) {
				ok = true
			}
		}
	}
	return ok
}

// checkTolerance refuses a timestamp further than tol from now, in either direction.
func checkTolerance(ts, now time.Time, tol time.Duration) error {
	d := now.Sub(ts)
	if d < 0 {
		d = -d
	}
	if d > tol {
		return refuse(ReasonTimestampTolerance, "signed at %s, %s from now; the tolerance is %s",
			ts.UTC().Format(time.RFC3339), d.Round(time.Second), tol)
	}
	return nil
}

// StripeConfig configures the Stripe verifier.
type StripeConfig struct {
	// Secrets are the endpoint's signing secrets (whsec_…), as the dashboard shows them. Give
	// two while rolling a secret: a signature under either is accepted.
	Secrets []string
	// Tolerance is how far the signed timestamp may be from now; zero means DefaultTolerance.
	Tolerance time.Duration
}

type stripeVerifier struct {
	secrets   [][]byte
	tolerance time.Duration
}

// Stripe returns a verifier of Stripe's Stripe-Signature header: "t=<unix seconds>" and one or
// more "v1=<hex>" signatures, each the HMAC-SHA256, under the endpoint secret, of
// "<t>.<body>". A delivery is accepted when a v1 signature matches a secret and t is within the
// tolerance of now. The event id and type are the body's "id" and "type".
func Stripe(cfg *StripeConfig) (Verifier, error) {
	var c StripeConfig
	if cfg != nil {
		c = *cfg
	}
	if len(c.Secrets) == 0 {
		return nil, errors.New("webhook: stripe verifier: no secret")
	}
	v := &stripeVerifier{tolerance: c.Tolerance}
	for i, s := range c.Secrets {
		if s == "" {
			return nil, fmt.Errorf("webhook: stripe verifier: secret %d is empty", i)
		}
		v.secrets = append(v.secrets, []byte(s))
	}
	if v.tolerance < 0 {
		return nil, fmt.Errorf("webhook: stripe verifier: negative tolerance %s", v.tolerance)
	}
	if v.tolerance == 0 {
		v.tolerance = DefaultTolerance
	}
	return v, nil
}

func (v *stripeVerifier) Provider() string { return "stripe" }

func (v *stripeVerifier) Verify(header http.Header, body []byte, now time.Time) (*Event, error) {
	h := header.Get("Stripe-Signature")
	if h == "" {
		return nil, refuse(ReasonSignatureMissing, "no Stripe-Signature header")
	}
	var t string
	var sigs [][]byte
	for item := range strings.SplitSeq(h, ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return nil, refuse(ReasonSignatureInvalid, "Stripe-Signature item %q is not key=value", truncate(item))
		}
		switch k {
		case "t":
			if t != "" {
				return nil, refuse(ReasonSignatureInvalid, "Stripe-Signature has two timestamps")
			}
			t = val
		case "v1":
			sig, err := hex.DecodeString(val)
			if err != nil || len(sig) != sha256.Size {
				return nil, refuse(ReasonSignatureInvalid, "Stripe-Signature v1 is not a hex SHA-256")
			}
			sigs = append(sigs, sig)
		}
	}
	if t == "" {
		return nil, refuse(ReasonSignatureInvalid, "Stripe-Signature has no timestamp t=")
	}
	if len(sigs) == 0 {
		return nil, refuse(ReasonSignatureMissing, "Stripe-Signature has no v1 signature")
	}
	secs, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return nil, refuse(ReasonSignatureInvalid, "Stripe-Signature timestamp %q is not unix seconds", truncate(t))
	}
	var want [][]byte
	for _, s := range v.secrets {
		want = append(want, mac(sha256.New, s, []byte(t), []byte("."), body))
	}
	if !anyEqual(sigs, want) {
		return nil, refuse(ReasonSignatureInvalid, "no v1 signature matches the endpoint secret")
	}
	ts := time.Unix(secs, 0)
	if err := checkTolerance(ts, now, v.tolerance); err != nil {
		return nil, err
	}
	var ev struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, refuse(ReasonBody, "the signed body is not a Stripe event: %v", err)
	}
	if err := checkID(ev.ID, `the event's "id"`); err != nil {
		return nil, err
	}
	return &Event{Provider: "stripe", ID: ev.ID, Type: ev.Type, Timestamp: ts}, nil
}

// GitHubConfig configures the GitHub verifier.
type GitHubConfig struct {
	// Secrets are the webhook's secrets; give two while changing it.
	Secrets []string
}

type githubVerifier struct{ secrets [][]byte }

// GitHub returns a verifier of GitHub's X-Hub-Signature-256 header ("sha256=<hex>", the
// HMAC-SHA256 of the body under the webhook secret). The event id is the X-GitHub-Delivery
// header, which a redelivery repeats; the type is X-GitHub-Event. The legacy SHA-1
// X-Hub-Signature is not accepted. GitHub signs no timestamp and not the delivery id: see
// docs/integrations/webhook.md for what that means for replays.
func GitHub(cfg *GitHubConfig) (Verifier, error) {
	var c GitHubConfig
	if cfg != nil {
		c = *cfg
	}
	if len(c.Secrets) == 0 {
		return nil, errors.New("webhook: github verifier: no secret")
	}
	v := &githubVerifier{}
	for i, s := range c.Secrets {
		if s == "" {
			return nil, fmt.Errorf("webhook: github verifier: secret %d is empty", i)
		}
		v.secrets = append(v.secrets, []byte(s))
	}
	return v, nil
}

func (v *githubVerifier) Provider() string { return "github" }

func (v *githubVerifier) Verify(header http.Header, body []byte, _ time.Time) (*Event, error) {
	h := header.Get("X-Hub-Signature-256")
	if h == "" {
		return nil, refuse(ReasonSignatureMissing, "no X-Hub-Signature-256 header")
	}
	hexSig, ok := strings.CutPrefix(h, "sha256=")
	if !ok {
		return nil, refuse(ReasonSignatureInvalid, "X-Hub-Signature-256 does not start with sha256=")
	}
	sig, err := hex.DecodeString(hexSig)
	if err != nil || len(sig) != sha256.Size {
		return nil, refuse(ReasonSignatureInvalid, "X-Hub-Signature-256 is not a hex SHA-256")
	}
	var want [][]byte
	for _, s := range v.secrets {
		want = append(want, mac(sha256.New, s, body))
	}
	if !anyEqual([][]byte{sig}, want) {
		return nil, refuse(ReasonSignatureInvalid, "X-Hub-Signature-256 does not match the webhook secret")
	}
	id := header.Get("X-GitHub-Delivery")
	if err := checkID(id, "the X-GitHub-Delivery header"); err != nil {
		return nil, err
	}
	return &Event{Provider: "github", ID: id, Type: header.Get("X-GitHub-Event")}, nil
}

// HMACConfig configures a generic HMAC verifier, for a sender that signs with a shared secret
// in headers of its own naming.
type HMACConfig struct {
	Name    string   // the provider's name; default "hmac"
	Secrets [][]byte // the shared secrets; a signature under any of them is accepted

	SignatureHeader string // default "Webhook-Signature"
	IDHeader        string // the event or delivery id; default "Webhook-Id"
	TimestampHeader string // unix seconds; "" when the sender signs no timestamp
	TypeHeader      string // the event type, optional

	// Prefix is stripped from each signature before decoding ("sha256=", "v1,"); a signature
	// without it is ignored. The header may hold several signatures separated by spaces.
	Prefix   string
	Encoding string           // "hex" (default) or "base64" (standard, padded)
	Hash     func() hash.Hash // default sha256.New

	// Content is the signed message. Default: with a TimestampHeader, "<id>.<timestamp>.<body>"
	// (so neither the id nor the time can be swapped under a captured body); without, the body.
	Content func(id, timestamp string, body []byte) []byte
	// Tolerance is how far the signed timestamp may be from now; zero means DefaultTolerance.
	Tolerance time.Duration
}

type hmacVerifier struct{ c HMACConfig }

// HMAC returns a verifier of a generic HMAC signature scheme (see HMACConfig).
func HMAC(cfg *HMACConfig) (Verifier, error) {
	var c HMACConfig
	if cfg != nil {
		c = *cfg
	}
	if len(c.Secrets) == 0 {
		return nil, errors.New("webhook: hmac verifier: no secret")
	}
	for i, s := range c.Secrets {
		if len(s) == 0 {
			return nil, fmt.Errorf("webhook: hmac verifier: secret %d is empty", i)
		}
	}
	if c.Name == "" {
		c.Name = "hmac"
	}
	if c.SignatureHeader == "" {
		c.SignatureHeader = "Webhook-Signature"
	}
	if c.IDHeader == "" {
		c.IDHeader = "Webhook-Id"
	}
	switch c.Encoding {
	case "":
		c.Encoding = "hex"
	case "hex", "base64":
	default:
		return nil, fmt.Errorf("webhook: hmac verifier: encoding %q is neither hex nor base64", c.Encoding)
	}
	if c.Hash == nil {
		c.Hash = sha256.New
	}
	if c.Tolerance < 0 {
		return nil, fmt.Errorf("webhook: hmac verifier: negative tolerance %s", c.Tolerance)
	}
	if c.Tolerance == 0 {
		c.Tolerance = DefaultTolerance
	}
	if c.Content == nil {
		if c.TimestampHeader != "" {
			c.Content = func(id, ts string, body []byte) []byte {
				return append([]byte(id+"."+ts+"."), body...)
			}
		} else {
			c.Content = func(_, _ string, body []byte) []byte { return body }
		}
	}
	return &hmacVerifier{c: c}, nil
}

func (v *hmacVerifier) Provider() string { return v.c.Name }

func (v *hmacVerifier) Verify(header http.Header, body []byte, now time.Time) (*Event, error) {
	c := &v.c
	h := header.Get(c.SignatureHeader)
	if h == "" {
		return nil, refuse(ReasonSignatureMissing, "no %s header", c.SignatureHeader)
	}
	var sigs [][]byte
	for tok := range strings.FieldsSeq(h) {
		s, ok := strings.CutPrefix(tok, c.Prefix)
		if !ok {
			continue
		}
		var sig []byte
		var err error
		if c.Encoding == "base64" {
			sig, err = base64.StdEncoding.DecodeString(s)
		} else {
			sig, err = hex.DecodeString(s)
		}
		if err != nil {
			return nil, refuse(ReasonSignatureInvalid, "%s holds a signature that is not %s", c.SignatureHeader, c.Encoding)
		}
		sigs = append(sigs, sig)
	}
	if len(sigs) == 0 {
		return nil, refuse(ReasonSignatureMissing, "%s holds no signature starting with %q", c.SignatureHeader, c.Prefix)
	}
	id := header.Get(c.IDHeader)
	var ts string
	if c.TimestampHeader != "" {
		if ts = header.Get(c.TimestampHeader); ts == "" {
			return nil, refuse(ReasonSignatureInvalid, "no %s header", c.TimestampHeader)
		}
	}
	msg := c.Content(id, ts, body)
	var want [][]byte
	for _, s := range c.Secrets {
		want = append(want, mac(c.Hash, s, msg))
	}
	if !anyEqual(sigs, want) {
		return nil, refuse(ReasonSignatureInvalid, "no signature in %s matches the secret", c.SignatureHeader)
	}
	ev := &Event{Provider: c.Name, ID: id}
	if c.TypeHeader != "" {
		ev.Type = header.Get(c.TypeHeader)
	}
	if c.TimestampHeader != "" {
		secs, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			return nil, refuse(ReasonSignatureInvalid, "%s %q is not unix seconds", c.TimestampHeader, truncate(ts))
		}
		ev.Timestamp = time.Unix(secs, 0)
		if err := checkTolerance(ev.Timestamp, now, c.Tolerance); err != nil {
			return nil, err
		}
	}
	if err := checkID(id, "the "+c.IDHeader+" header"); err != nil {
		return nil, err
	}
	return ev, nil
}

// truncate shortens a sender's text for a refusal's detail.
func truncate(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
