package identity

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/latchkit/latch"
)

// The event types of the CAEP profile of the OpenID Shared Signals Framework that revoke.
const (
	EventSessionRevoked   = "https://schemas.openid.net/secevent/caep/event-type/session-revoked"
	EventCredentialChange = "https://schemas.openid.net/secevent/caep/event-type/credential-change"
)

const (
	defaultFilePoll        = 5 * time.Second
	defaultURLPoll         = 30 * time.Second
	defaultRevocationBytes = 4 << 20
	defaultRevocationWait  = 10 * time.Second
	// maxRevocations bounds the entries one read (or all pushes together) may hold.
	maxRevocations = 1 << 20
)

// RevocationConfig configures a RevocationFeed.
type RevocationConfig struct {
	// Source is where the revoked credentials are read: a file path, or an https URL (http only
	// for loopback hosts). Empty means a feed fed only by Push. The document is either a plain
	// list or a JSON object of CAEP events (docs/governance.md#revoked-credentials).
	Source string
	// Issuers are the issuers the feed covers: when the feed is stale, every credential of one
	// of them is refused revocation_feed_stale. Empty means every issuer whose verifier
	// consults the feed.
	Issuers []string
	// MaxStaleness is how old the feed's last successful read (or push) may be before the
	// covered issuers' credentials are refused. Zero means no bound: the feed is never stale.
	MaxStaleness time.Duration
	// Poll is how long a read is trusted before a check reads the source again. Zero means 5s
	// for a file and 30s for a URL.
	Poll time.Duration
	// MaxBytes bounds the document read (and a pushed body). Zero means 4 MiB.
	MaxBytes int64
	// Timeout bounds a URL fetch. Zero means 10s.
	Timeout time.Duration
	// HTTPClient fetches a URL source; nil means a client of this package's own, which follows
	// redirects only to URLs Source itself could name.
	HTTPClient *http.Client
	// Logger receives a line for each read that fails (the last good state stays in force);
	// nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// RevocationFeed knows which credentials were revoked before their exp, per issuer: by jti, and
// by subject (every credential of the subject, or those issued at or before a time). It reads
// its Source again when a check finds the last read older than Poll (so it starts no
// goroutine), keeps the last good state when a read fails, and ages from its last successful
// read: past MaxStaleness it refuses every credential of the issuers it covers. Push adds
// entries to it (the push endpoint of latch serve). A JWT verifier consults it when its
// Config.Revocations names it. It is safe for concurrent use.
type RevocationFeed struct {
	cfg    RevocationConfig
	isURL  bool
	client *http.Client

	refreshing sync.Mutex // held by the one read in flight

	mu        sync.RWMutex
	read      revocations // the source's last good document
	pushed    revocations // what Push added
	refreshed time.Time   // the last successful read or push; zero: never
	attempted time.Time   // the last read, successful or not
	lastErr   error
}

// revocations is one document's entries, by issuer.
type revocations map[string]*issuerRevocations

type issuerRevocations struct {
	jti map[string]bool
	// sub maps a subject to the time at or before which its credentials were issued to be
	// revoked; the zero time revokes all of them.
	sub map[string]time.Time
}

func (r revocations) issuer(iss string) *issuerRevocations {
	ir := r[iss]
	if ir == nil {
		ir = &issuerRevocations{jti: map[string]bool{}, sub: map[string]time.Time{}}
		r[iss] = ir
	}
	return ir
}

func (r revocations) count() int {
	n := 0
	for _, ir := range r {
		n += len(ir.jti) + len(ir.sub)
	}
	return n
}

// addSub revokes sub's credentials issued at or before before (all of them for the zero time);
// of two entries for one subject the wider wins.
func (ir *issuerRevocations) addSub(sub string, before time.Time) {
	cur, ok := ir.sub[sub]
	switch {
	case !ok:
		ir.sub[sub] = before
	case cur.IsZero() || before.IsZero():
		ir.sub[sub] = time.Time{}
	case before.After(cur):
		ir.sub[sub] = before
	}
}

// NewRevocationFeed validates cfg (which it copies) and fills its defaults. It does no I/O: the
// first check (or Refresh) reads the source.
func NewRevocationFeed(cfg *RevocationConfig) (*RevocationFeed, error) {
	if cfg == nil {
		cfg = &RevocationConfig{}
	}
	c := *cfg
	c.Issuers = slices.Clone(c.Issuers)
	f := &RevocationFeed{read: revocations{}, pushed: revocations{}}
	if u, err := url.Parse(c.Source); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		if u.Host == "" || !(u.Scheme == "https" || isLoopback(u.Hostname())) {
			return nil, fmt.Errorf("identity: revocation feed url %q must be https (http only for loopback hosts)", c.Source)
		}
		f.isURL = true
	}
	switch {
	case c.MaxStaleness < 0:
		return nil, fmt.Errorf("identity: revocation feed: max staleness %s is negative", c.MaxStaleness)
	case c.Poll < 0:
		return nil, fmt.Errorf("identity: revocation feed: poll %s is negative", c.Poll)
	case c.Poll == 0 && f.isURL:
		c.Poll = defaultURLPoll
	case c.Poll == 0:
		c.Poll = defaultFilePoll
	}
	if c.MaxStaleness > 0 && c.Source != "" && c.Poll > c.MaxStaleness {
		return nil, fmt.Errorf("identity: revocation feed: poll %s exceeds max staleness %s: the feed would go stale between reads", c.Poll, c.MaxStaleness)
	}
	switch {
	case c.MaxBytes < 0:
		return nil, fmt.Errorf("identity: revocation feed: max bytes %d is negative", c.MaxBytes)
	case c.MaxBytes == 0:
		c.MaxBytes = defaultRevocationBytes
	}
	switch {
	case c.Timeout < 0:
		return nil, fmt.Errorf("identity: revocation feed: timeout %s is negative", c.Timeout)
	case c.Timeout == 0:
		c.Timeout = defaultRevocationWait
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	f.cfg = c
	f.client = c.HTTPClient
	if f.client == nil {
		f.client = &http.Client{CheckRedirect: checkRedirect}
	}
	return f, nil
}

// Covers reports whether the feed's staleness applies to credentials of iss.
func (f *RevocationFeed) Covers(iss string) bool {
	return len(f.cfg.Issuers) == 0 || slices.Contains(f.cfg.Issuers, iss)
}

// Refreshed returns when the feed was last read successfully (or pushed to); zero for never.
func (f *RevocationFeed) Refreshed() time.Time {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.refreshed
}

// Refresh reads the source now. On failure the last good state stays in force, the feed ages
// from its last successful read, and the error says what failed.
func (f *RevocationFeed) Refresh(ctx context.Context) error {
	f.refreshing.Lock()
	defer f.refreshing.Unlock()
	return f.refresh(ctx)
}

func (f *RevocationFeed) refresh(ctx context.Context) error {
	if f.cfg.Source == "" {
		return nil
	}
	now := f.cfg.Now()
	var doc revocations
	var err error
	if f.isURL {
		doc, err = f.fetch(ctx)
	} else {
		doc, err = f.readFile()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempted = now
	if err != nil {
		if f.lastErr == nil || f.lastErr.Error() != err.Error() {
			f.cfg.Logger.Warn("identity: revocation feed unreadable: the last good list stays in force and ages", "source", f.cfg.Source, "err", err)
		}
		f.lastErr = err
		return err
	}
	f.lastErr = nil
	f.refreshed, f.read = now, doc
	return nil
}

// readFile reads the source file; it is bounded by MaxBytes, so reading it whole at every poll
// costs little and misses no change a modification time could hide.
func (f *RevocationFeed) readFile() (revocations, error) {
	file, err := os.Open(f.cfg.Source)
	if err != nil {
		return nil, fmt.Errorf("revocation file: %w", err)
	}
	defer file.Close()
	b, err := readBounded(file, f.cfg.MaxBytes)
	if err != nil {
		return nil, fmt.Errorf("revocation file %s: %w", f.cfg.Source, err)
	}
	doc, err := parseRevocations(b)
	if err != nil {
		return nil, fmt.Errorf("revocation file %s: %w", f.cfg.Source, err)
	}
	return doc, nil
}

func (f *RevocationFeed) fetch(ctx context.Context) (revocations, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.cfg.Source, nil)
	if err != nil {
		return nil, fmt.Errorf("revocation url: %w", err)
	}
	req.Header.Set("Accept", "application/json, text/plain")
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("revocation url: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("revocation url %s: status %d", f.cfg.Source, resp.StatusCode)
	}
	b, err := readBounded(resp.Body, f.cfg.MaxBytes)
	if err != nil {
		return nil, fmt.Errorf("revocation url %s: %w", f.cfg.Source, err)
	}
	doc, err := parseRevocations(b)
	if err != nil {
		return nil, fmt.Errorf("revocation url %s: %w", f.cfg.Source, err)
	}
	return doc, nil
}

func readBounded(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
}

// Push adds the revocations of body — a document in either format — to the feed, and returns
// how many entries it held. Pushing the same document twice changes nothing the second time.
// For a feed with no Source a push counts as a successful read: it stays fresh while pushes
// keep coming (an empty document is a heartbeat); a feed with a Source ages by its reads only.
// Pushed entries are kept in memory, beside the source's.
func (f *RevocationFeed) Push(body []byte) (int, error) {
	if int64(len(body)) > f.cfg.MaxBytes {
		return 0, fmt.Errorf("revocations of %d bytes exceed %d", len(body), f.cfg.MaxBytes)
	}
	doc, err := parseRevocations(body)
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pushed.count()+doc.count() > maxRevocations {
		return 0, fmt.Errorf("the feed holds %d pushed revocations: at most %d", f.pushed.count(), maxRevocations)
	}
	for iss, ir := range doc {
		dst := f.pushed.issuer(iss)
		for j := range ir.jti {
			dst.jti[j] = true
		}
		for s, t := range ir.sub {
			dst.addSub(s, t)
		}
	}
	if f.cfg.Source == "" {
		f.refreshed = f.cfg.Now()
	}
	return doc.count(), nil
}

// Check refuses a verified credential of issuer iss, subject sub, id jti, issued at iat (zero
// when it has none) that the feed reports revoked (credential_revoked), or whose issuer it
// covers while stale (revocation_feed_stale). It reads the source first when the last read is
// older than Poll and no other read is in flight. The error is an *Error wrapping a
// *latch.IdentityError.
func (f *RevocationFeed) Check(ctx context.Context, iss, sub, jti string, iat time.Time) error {
	f.mu.RLock()
	due := f.cfg.Source != "" && (f.attempted.IsZero() || f.cfg.Now().Sub(f.attempted) >= f.cfg.Poll)
	f.mu.RUnlock()
	if due && f.refreshing.TryLock() {
		_ = f.refresh(ctx) // a failure is logged, and ages the feed
		f.refreshing.Unlock()
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, doc := range []revocations{f.read, f.pushed} {
		ir := doc[iss]
		if ir == nil {
			continue
		}
		if jti != "" && ir.jti[jti] {
			return revoked(fmt.Sprintf("the credential (jti %s) of issuer %s was revoked", quote(jti), quote(iss)))
		}
		if before, ok := ir.sub[sub]; ok && sub != "" {
			switch {
			case before.IsZero():
				return revoked(fmt.Sprintf("the credentials of subject %s of issuer %s were revoked", quote(sub), quote(iss)))
			case iat.IsZero() || !iat.After(before):
				return revoked(fmt.Sprintf("the credentials of subject %s of issuer %s issued at or before %s were revoked", quote(sub), quote(iss), stamp(before)))
			}
		}
	}
	if f.cfg.MaxStaleness > 0 && f.Covers(iss) {
		switch age := f.cfg.Now().Sub(f.refreshed); {
		case f.refreshed.IsZero():
			return stale(fmt.Sprintf("the revocation feed covering issuer %s has never been read", quote(iss)))
		case age > f.cfg.MaxStaleness:
			return stale(fmt.Sprintf("the revocation feed covering issuer %s was last read %s ago, more than its max staleness %s", quote(iss), age.Truncate(time.Millisecond), f.cfg.MaxStaleness))
		}
	}
	return nil
}

func revoked(msg string) *Error {
	return &Error{Reason: string(latch.ReasonCredentialRevoked), Msg: msg,
		Err: &latch.IdentityError{Reason: string(latch.ReasonCredentialRevoked), Detail: msg}}
}

func stale(msg string) *Error {
	return &Error{Reason: string(latch.ReasonRevocationFeedStale), Msg: msg,
		Err: &latch.IdentityError{Reason: string(latch.ReasonRevocationFeedStale), Detail: msg}}
}

// parseRevocations reads a revocation document: a JSON object (its first non-space byte is
// "{") of CAEP events, or else a plain list of lines:
//
//	# a comment
//	iss https://idp.example        the issuer of the lines that follow
//	jti 4f1c0e9a                   the credential whose jti this is
//	sub deploy-bot                 every credential of this subject
//	sub billing-bot 2026-12-05T04:00:00Z   those issued at or before this time (RFC 3339)
//
// The JSON form is {"events": [SET, …]}, each SET a Security Event Token's claims whose
// "events" member holds a session-revoked event, or a credential-change event whose
// change_type is revoke or delete; its subject ("subject" in the event, or the SET's
// "sub_id") is {"format": "iss_sub", "iss", "sub"} or {"format": "jwt_id", "iss", "jti"}. A
// subject's credentials issued at or before the event's event_timestamp (else the SET's iat)
// are revoked; with neither, all of them. Other event types and change types are ignored. An
// error names the line or the event at fault.
func parseRevocations(b []byte) (revocations, error) {
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '{' {
		return parseEvents(t)
	}
	return parseList(b)
}

func parseList(b []byte) (revocations, error) {
	doc := revocations{}
	iss := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	n := 0
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		switch {
		case fields[0] == "iss" && len(fields) == 2:
			iss = fields[1]
			continue
		case fields[0] != "jti" && fields[0] != "sub" && fields[0] != "iss":
			return nil, fmt.Errorf("line %d: %q is not iss, jti or sub", line, fields[0])
		case iss == "":
			return nil, fmt.Errorf("line %d: %s before any iss line names the issuer", line, fields[0])
		case fields[0] == "jti" && len(fields) == 2:
			doc.issuer(iss).jti[fields[1]] = true
		case fields[0] == "sub" && len(fields) == 2:
			doc.issuer(iss).addSub(fields[1], time.Time{})
		case fields[0] == "sub" && len(fields) == 3:
			t, err := time.Parse(time.RFC3339, fields[2])
			if err != nil {
				return nil, fmt.Errorf("line %d: %q is not an RFC 3339 time", line, fields[2])
			}
			doc.issuer(iss).addSub(fields[1], t)
		default:
			return nil, fmt.Errorf("line %d: want iss ISSUER, jti JTI, or sub SUBJECT [ISSUED-AT-OR-BEFORE]", line)
		}
		if n++; n > maxRevocations {
			return nil, fmt.Errorf("line %d: more than %d revocations", line, maxRevocations)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return doc, nil
}

type setSubject struct {
	Format string `json:"format"`
	Iss    string `json:"iss"`
	Sub    string `json:"sub"`
	Jti    string `json:"jti"`
}

type setEvent struct {
	Subject        *setSubject `json:"subject"`
	EventTimestamp *int64      `json:"event_timestamp"`
	ChangeType     string      `json:"change_type"`
}

type set struct {
	Iat    *int64                     `json:"iat"`
	SubID  *setSubject                `json:"sub_id"`
	Events map[string]json.RawMessage `json:"events"`
}

func parseEvents(b []byte) (revocations, error) {
	var body struct {
		Events []json.RawMessage `json:"events"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&body); err != nil {
		return nil, fmt.Errorf("revocation events: %w", err)
	}
	if len(body.Events) > maxRevocations {
		return nil, fmt.Errorf("revocation events: more than %d", maxRevocations)
	}
	doc := revocations{}
	for i, raw := range body.Events {
		var s set
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("/events/%d: %w", i, err)
		}
		for typ, rawEv := range s.Events {
			if typ != EventSessionRevoked && typ != EventCredentialChange {
				continue
			}
			var ev setEvent
			if err := json.Unmarshal(rawEv, &ev); err != nil {
				return nil, fmt.Errorf("/events/%d/events/%s: %w", i, pointerEscape(typ), err)
			}
			if typ == EventCredentialChange && ev.ChangeType != "revoke" && ev.ChangeType != "delete" {
				continue
			}
			subj := ev.Subject
			if subj == nil {
				subj = s.SubID
			}
			at := ev.EventTimestamp
			if at == nil {
				at = s.Iat
			}
			if err := addEvent(doc, subj, at); err != nil {
				return nil, fmt.Errorf("/events/%d/events/%s: %w", i, pointerEscape(typ), err)
			}
		}
	}
	return doc, nil
}

func addEvent(doc revocations, subj *setSubject, at *int64) error {
	switch {
	case subj == nil:
		return errors.New("no subject (subject, or the SET's sub_id)")
	case subj.Iss == "":
		return fmt.Errorf("subject of format %q names no iss", subj.Format)
	}
	switch subj.Format {
	case "iss_sub":
		if subj.Sub == "" {
			return errors.New(`subject of format "iss_sub" names no sub`)
		}
		var before time.Time
		if at != nil {
			before = time.Unix(*at, 0).UTC()
		}
		doc.issuer(subj.Iss).addSub(subj.Sub, before)
	case "jwt_id":
		if subj.Jti == "" {
			return errors.New(`subject of format "jwt_id" names no jti`)
		}
		doc.issuer(subj.Iss).jti[subj.Jti] = true
	default:
		return fmt.Errorf("subject format %q: want iss_sub or jwt_id", subj.Format)
	}
	return nil
}

// pointerEscape escapes s as one JSON pointer token.
func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
