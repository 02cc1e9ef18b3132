package policy

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Keys of the scopes section, in the order error messages list them.
var scopesKeys = []string{"static", "url", "timeout", "actions"}

// Bounds of scopes.timeout: how long a call waits for the scope service before it is refused
// scope_unavailable. Every call the section applies to waits for the service, so a long timeout
// is a long stall of every such call when the service is down.
const (
	DefaultScopeTimeout = 2 * time.Second
	MinScopeTimeout     = 100 * time.Millisecond
	MaxScopeTimeout     = 30 * time.Second
)

// ScopeFor returns the resource patterns the static map assigns to the principal agent/user:
// the entry "agent/user" when there is one, else the entry "agent", else none (an empty scope:
// nothing is in it). The second result says whether an entry was found.
func (s *Scopes) ScopeFor(agent, user string) ([]string, bool) {
	if user != "" {
		if l, ok := s.Static[agent+"/"+user]; ok {
			return l, true
		}
	}
	l, ok := s.Static[agent]
	return l, ok
}

func (p *parser) scopes(e entry) (*Scopes, *Error) {
	if e := p.mapping(e, "scopes", "a mapping with static or url"); e != nil {
		return nil, e
	}
	s := &Scopes{Pos: posOf(e.k)}
	var staticN, urlN, timeoutN *yaml.Node
	for _, en := range entries(e.v) {
		var err *Error
		switch en.k.Value {
		case "static":
			staticN = en.k
			s.Static, err = p.staticScopes(en)
		case "url":
			urlN = en.k
			s.URL, err = p.scopeURL(en)
		case "timeout":
			timeoutN = en.k
			s.Timeout, err = p.scopeTimeout(en, "scopes.timeout")
		case "actions":
			s.Actions, err = p.patterns(en, "scopes.actions", checkActionPattern)
		default:
			err = p.unknownKey(en.k, "in scopes", scopesKeys)
		}
		if err != nil {
			return nil, err
		}
	}
	switch {
	case staticN != nil && urlN != nil:
		later := staticN
		if urlN.Line > staticN.Line || urlN.Line == staticN.Line && urlN.Column > staticN.Column {
			later = urlN
		}
		return nil, p.errf(later, "both static and url in scopes (expected exactly one: a map of principals to resources, or the scope service to ask)")
	case staticN == nil && urlN == nil:
		return nil, p.errf(e.k, "scopes has neither static nor url (expected exactly one)")
	case timeoutN != nil && urlN == nil:
		return nil, p.errf(timeoutN, "scopes.timeout without url (a static scope is not waited for; leave timeout out)")
	}
	if s.URL != "" && s.Timeout == 0 {
		s.Timeout = DefaultScopeTimeout
	}
	return s, nil
}

// staticScopes reads scopes.static: principal ("agent" or "agent/user") → resource patterns.
// An empty list is allowed and says, as leaving the principal out does, that nothing is in its
// scope.
func (p *parser) staticScopes(e entry) (map[string][]string, *Error) {
	if e := p.mapping(e, "scopes.static", `a mapping from principals ("agent" or "agent/user") to lists of resource patterns`); e != nil {
		return nil, e
	}
	m := make(map[string][]string, len(e.v.Content)/2)
	for _, en := range entries(e.v) {
		who := en.k.Value
		agent, user, hasUser := strings.Cut(who, "/")
		if agent == "" || hasUser && user == "" || strings.TrimSpace(who) != who {
			return nil, p.errf(en.k, `bad principal %s in scopes.static (expected "agent" or "agent/user")`, quote(who))
		}
		what := "scopes.static." + quote(who)
		if en.v.Kind != yaml.SequenceNode {
			return nil, p.errf(at(en), "%s is %s (expected a list of resource patterns; [] for nothing in scope)", what, describeNode(en.v))
		}
		l := make([]string, 0, len(en.v.Content))
		for _, n := range en.v.Content {
			pat, err := p.str(entry{n, n}, "entry of "+what)
			if err != nil {
				return nil, err
			}
			if cerr := CheckPattern(pat, ':'); cerr != nil {
				return nil, p.errf(n, "bad resource pattern %s in %s: %v", quote(pat), what, cerr)
			}
			l = append(l, pat)
		}
		m[who] = l
	}
	return m, nil
}

// scopeURL reads scopes.url (CheckScopeURL).
func (p *parser) scopeURL(e entry) (string, *Error) {
	s, err := p.str(e, "scopes.url")
	if err != nil {
		return "", err
	}
	if cerr := CheckScopeURL(s); cerr != nil {
		return "", p.errf(e.v, "bad scopes.url %s: %v", quote(s), cerr)
	}
	return s, nil
}

// CheckScopeURL validates the URL of a scope service: https, or http when the host is a
// loopback address (a service on the same machine), with no credentials and no fragment. A
// scope sent in clear over a network could be forged, and a forged scope widens what an agent
// may touch.
func CheckScopeURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "":
		return errors.New("expected an absolute https URL, like https://scopes.internal/v1/scope")
	case u.User != nil:
		return errors.New("it holds credentials (a policy file is not the place for a secret)")
	case u.Fragment != "":
		return errors.New("it has a fragment (expected none)")
	case u.Scheme == "https":
	case u.Scheme == "http" && loopbackHost(u.Hostname()):
	case u.Scheme == "http":
		return errors.New("http to a host that is not loopback (expected https, or http only to localhost, 127.0.0.1 or ::1)")
	default:
		return fmt.Errorf("scheme %s (expected https)", quote(u.Scheme))
	}
	return nil
}

// loopbackHost reports whether host names this machine: localhost, or a loopback IP address.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// scopeTimeout reads how long a call waits for a service latch asks (what names the key): a
// duration from MinScopeTimeout to MaxScopeTimeout.
func (p *parser) scopeTimeout(e entry, what string) (time.Duration, *Error) {
	if e.v.Kind == yaml.ScalarNode && e.v.Tag == tagInt {
		return 0, p.errf(e.v, "%s is a bare number %s (expected a duration with a unit, like 2s or 500ms)", what, e.v.Value)
	}
	s, err := p.str(e, what)
	if err != nil {
		return 0, err
	}
	d, perr := time.ParseDuration(s)
	if perr != nil {
		return 0, p.errf(e.v, "bad duration %s for %s (expected a duration like 2s or 500ms)", quote(s), what)
	}
	if d < MinScopeTimeout || d > MaxScopeTimeout {
		return 0, p.errf(e.v, "%s is %s (expected from %s to %s)", what, quote(s), MinScopeTimeout, MaxScopeTimeout)
	}
	return d, nil
}

// normalizeScopes is the scopes section's part of the policy hash: each principal's patterns
// in document order (the hash is of the document, as for grants), the URL and timeout, the
// action patterns.
func normalizeScopes(s *Scopes) map[string]any {
	var static any
	if s.Static != nil {
		m := make(map[string]any, len(s.Static))
		for who, l := range s.Static {
			m[who] = stringList(append([]string{}, l...))
		}
		static = m
	}
	return map[string]any{
		"static":  static,
		"url":     orNull(s.URL),
		"timeout": durationString(s.Timeout),
		"actions": stringList(s.Actions),
	}
}

// String describes where the section's scopes come from, for logs.
func (s *Scopes) String() string {
	if s.URL != "" {
		return fmt.Sprintf("url %s (timeout %s)", s.URL, s.Timeout)
	}
	return fmt.Sprintf("static (%d principals)", len(s.Static))
}
