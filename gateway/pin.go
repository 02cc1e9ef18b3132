package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/canon"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrPinMismatch is what New's error wraps when a pinned tool's definition, as the upstream
// lists it at startup, is not the pinned one: the gateway does not start (PinMismatchError
// says which tools).
var ErrPinMismatch = errors.New("gateway: an upstream's tools do not match their pins")

// ToolPin is one upstream tool's pinned and observed definition hashes.
type ToolPin struct {
	Upstream string // the alias
	Tool     string // the upstream's own name for the tool
	Pinned   string // "sha256:…", or "" when the tool is not pinned
	Observed string // "sha256:…" of its tools/list entry, or "" when the upstream did not list it
}

// Matches reports whether the tool is pinned and listed as pinned.
func (p ToolPin) Matches() bool { return p.Pinned != "" && p.Pinned == p.Observed }

// PinMismatchError lists the pinned tools whose observed definition differs from their pin.
type PinMismatchError struct {
	Tools []ToolPin
}

func (e *PinMismatchError) Error() string {
	var b strings.Builder
	b.WriteString("gateway: an upstream's tools do not match their pins (re-pin with `latch gateway pin` only after reviewing the change):")
	for _, t := range e.Tools {
		obs := t.Observed
		if obs == "" {
			obs = "(not listed)"
		}
		fmt.Fprintf(&b, "\n  upstream %s tool %s: pinned %s, observed %s", t.Upstream, t.Tool, t.Pinned, obs)
	}
	return b.String()
}

func (e *PinMismatchError) Unwrap() error { return ErrPinMismatch }

// ToolHash is "sha256:" and the hex SHA-256 of the canonical JSON of a tool's whole tools/list
// entry: what gateway.upstreams.*.pin.tool_schema_sha256 pins. Any change of its name,
// description, schemas or annotations changes it.
func ToolHash(def *mcp.Tool) (string, error) {
	raw, err := json.Marshal(def)
	if err != nil {
		return "", fmt.Errorf("gateway: hash tool %s: %w", def.Name, err)
	}
	c, err := canon.Canonicalize(raw)
	if err != nil {
		return "", fmt.Errorf("gateway: hash tool %s: %w", def.Name, err)
	}
	sum := sha256.Sum256(c)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// observations is what this process last listed of each upstream's tools: alias → tool →
// hash. It is replaced whole by every listing (at startup, on a redial, on
// notifications/tools/list_changed), so a call is checked against the latest one.
type observations struct {
	mu   sync.Mutex
	seen map[string]map[string]string
}

// record replaces what is known of alias's tools; a nil defs (a listing that failed) forgets
// them, so pinned tools are unverified until the next listing succeeds.
func (o *observations) record(alias string, defs []*mcp.Tool) {
	m := map[string]string{}
	for _, d := range defs {
		if h, err := ToolHash(d); err == nil {
			m[d.Name] = h
		}
	}
	if defs == nil {
		m = nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil {
		o.seen = map[string]map[string]string{}
	}
	o.seen[alias] = m
}

func (o *observations) get(alias, tool string) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	h, ok := o.seen[alias][tool]
	return h, ok
}

// listTools lists every tool of a session.
func listTools(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, error) {
	var defs []*mcp.Tool
	for def, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		defs = append(defs, def)
	}
	return defs, nil
}

// relist lists alias's tools anew on cs and records them; a failed listing leaves the pinned
// tools unverified.
func (g *Gateway) relist(ctx context.Context, alias string, cs *mcp.ClientSession) {
	defs, err := listTools(ctx, cs)
	if err != nil {
		g.cfg.Logger.Warn("latch gateway: re-listing an upstream's tools failed: its pinned tools are refused until a listing succeeds",
			"upstream", alias, "err", err)
		defs = nil
	}
	g.seen.record(alias, defs)
	g.notePinDrift(ctx, alias, err == nil)
}

// notePinDrift compares what this process last listed of alias's pinned tools with their pins.
// A drift is logged once per drift in this process and, when the listing succeeded (listed),
// recorded in the store and alerted (drift.go); a tool listed as pinned again after a drift is
// recorded matched.
func (g *Gateway) notePinDrift(ctx context.Context, alias string, listed bool) {
	u := g.cfg.Guard.Policy().Gateway.Upstreams[alias]
	if u == nil || u.Pin == nil {
		return
	}
	var changes []store.UpstreamPin
	for _, tool := range sortedKeys(u.Pin.ToolSchemaSHA256) {
		pinned := u.Pin.ToolSchemaSHA256[tool]
		obs, _ := g.seen.get(alias, tool)
		key := alias + "\x00" + tool
		g.driftMu.Lock()
		last, warned := g.drifted[key]
		if obs == pinned {
			delete(g.drifted, key)
		} else if !warned || last != obs {
			if g.drifted == nil {
				g.drifted = map[string]string{}
			}
			g.drifted[key] = obs
			warned = false
		}
		g.driftMu.Unlock()
		if obs != pinned && !warned {
			g.cfg.Logger.Error("latch gateway: a pinned tool's definition drifted: its calls are refused upstream_mismatch until it is re-pinned",
				"upstream", alias, "tool", tool, "pinned", pinned, "observed", obs)
		}
		if listed {
			changes = append(changes, store.UpstreamPin{Upstream: alias, Tool: tool, Pinned: pinned, Observed: obs})
		}
	}
	if len(changes) > 0 {
		g.recordPins(ctx, changes)
	}
}

// pinRefusal is the refusal of a call of t when its upstream pins it and what this process
// last listed of it is not the pinned definition; nil when the call may proceed.
func (g *Gateway) pinRefusal(t *Tool) error {
	u := g.cfg.Guard.Policy().Gateway.Upstreams[t.Upstream]
	if u == nil || u.Pin == nil {
		return nil
	}
	pinned, ok := u.Pin.ToolSchemaSHA256[t.UpstreamAs]
	if !ok {
		return nil
	}
	obs, ok := g.seen.get(t.Upstream, t.UpstreamAs)
	switch {
	case !ok:
		return &latch.DeniedError{Action: t.Action, Reason: string(latch.ReasonUpstreamUnverified),
			Detail: fmt.Sprintf("upstream %s tool %s is pinned (%s) but its definition has not been verified: the upstream did not list it when last asked", t.Upstream, t.UpstreamAs, pinned)}
	case obs != pinned:
		return &latch.DeniedError{Action: t.Action, Reason: string(latch.ReasonUpstreamMismatch),
			Detail: fmt.Sprintf("upstream %s tool %s is pinned %s but the upstream now defines it as %s: an operator must review and re-pin it", t.Upstream, t.UpstreamAs, pinned, obs)}
	}
	return nil
}

// checkPins is the startup check of alias's pins against what it listed.
func (g *Gateway) checkPins(u *policy.Upstream) error {
	if u.Pin == nil {
		return nil
	}
	var bad []ToolPin
	for _, tool := range sortedKeys(u.Pin.ToolSchemaSHA256) {
		pinned := u.Pin.ToolSchemaSHA256[tool]
		if obs, _ := g.seen.get(u.Alias, tool); obs != pinned {
			bad = append(bad, ToolPin{Upstream: u.Alias, Tool: tool, Pinned: pinned, Observed: obs})
		}
	}
	if len(bad) > 0 {
		return &PinMismatchError{Tools: bad}
	}
	return nil
}

// Observe connects to every upstream of cfg's policy, lists its tools and returns, in alias then
// tool order, each listed tool's hash beside its pin, and each pinned tool the upstream did not
// list (Observed ""). Unlike New it does not refuse a mismatch: it is how `latch gateway pin`
// shows what to pin and what changed. It closes what it opened.
func Observe(ctx context.Context, cfg *Config) ([]ToolPin, error) {
	if cfg == nil || cfg.Guard == nil {
		return nil, errors.New("gateway: observe: Config.Guard is required")
	}
	sec := cfg.Guard.Policy().Gateway
	if sec == nil || len(sec.Upstreams) == 0 {
		return nil, ErrNoUpstreams
	}
	g := &Gateway{cfg: *cfg, nonce: "observe"}
	if g.cfg.Stderr == nil {
		g.cfg.Stderr = io.Discard
	}
	if g.cfg.MaxAnswer <= 0 {
		g.cfg.MaxAnswer = DefaultMaxAnswer
	}
	var out []ToolPin
	for _, alias := range sortedKeys(sec.Upstreams) {
		u := sec.Upstreams[alias]
		cs, err := g.dial(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("gateway: observe: connect upstream %s: %w", alias, err)
		}
		defs, err := listTools(ctx, cs)
		_ = cs.Close()
		if err != nil {
			return nil, fmt.Errorf("gateway: observe: list tools of upstream %s: %w", alias, err)
		}
		var pins map[string]string
		if u.Pin != nil {
			pins = u.Pin.ToolSchemaSHA256
		}
		listed := map[string]bool{}
		var rows []ToolPin
		for _, d := range defs {
			h, err := ToolHash(d)
			if err != nil {
				return nil, err
			}
			listed[d.Name] = true
			rows = append(rows, ToolPin{Upstream: alias, Tool: d.Name, Pinned: pins[d.Name], Observed: h})
		}
		for name, h := range pins {
			if !listed[name] {
				rows = append(rows, ToolPin{Upstream: alias, Tool: name, Pinned: h})
			}
		}
		slices.SortFunc(rows, func(a, b ToolPin) int { return strings.Compare(a.Tool, b.Tool) })
		out = append(out, rows...)
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// listChanged re-lists alias's tools when the upstream announces that they changed. It runs
// apart from the SDK's notification handler, which must not wait on a request of its session.
func (g *Gateway) listChanged(alias string, cs *mcp.ClientSession) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), g.cfg.CallTimeout)
		defer cancel()
		g.relist(ctx, alias, cs)
	}()
}

// pinnedTLS is a transport whose TLS handshakes accept only a leaf certificate whose DER
// SHA-256 is one of pins: the pinned leaves are the only trust anchors, with no fallback to
// the system's certificate authorities. A server presenting another certificate fails the
// handshake, before any request is sent.
func pinnedTLS(pins []string) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The chain is not verified against certificate authorities: VerifyConnection, which
		// runs on every handshake (resumed ones too), accepts the pinned leaves and nothing else.
		InsecureSkipVerify: true, //nolint:gosec // replaced by the leaf pin check below
		VerifyConnection: func(st tls.ConnectionState) error {
			if len(st.PeerCertificates) == 0 {
				return errors.New("gateway: the upstream presented no certificate")
			}
			sum := sha256.Sum256(st.PeerCertificates[0].Raw)
			got := "sha256:" + hex.EncodeToString(sum[:])
			if !slices.Contains(pins, got) {
				return &CertMismatchError{Observed: got, Pinned: slices.Clone(pins)}
			}
			return nil
		},
	}
	return tr
}

// CertMismatchError is the handshake error of an https upstream whose leaf certificate is not
// one of its pinned ones.
type CertMismatchError struct {
	Observed string
	Pinned   []string
}

func (e *CertMismatchError) Error() string {
	return fmt.Sprintf("gateway: the upstream's certificate %s is not pinned (pinned: %s)", e.Observed, strings.Join(e.Pinned, ", "))
}
