package policy

import (
	"net/url"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Keys of the gateway section, in the order error messages list them.
var (
	gatewayKeys  = []string{"upstreams", "separator"}
	upstreamKeys = []string{"command", "url", "tools", "pin"}
	pinKeys      = []string{"tool_schema_sha256", "tls_cert_sha256"}
	toolKeys     = []string{"errors_mean", "read_only"}
)

// What a tool's isError result means (Tool.ErrorsMean).
const (
	// ErrorsMeanUnknown: an error result may come after the tool acted; the outcome is ambiguous.
	// It is the default.
	ErrorsMeanUnknown = "unknown"
	// ErrorsMeanNotExecuted: the tool reports an error only before it acts; the call failed.
	ErrorsMeanNotExecuted = "not_executed"
)

// Separators are the strings a gateway may join an upstream's alias and a tool's name with in
// the names agents see (Gateway.Separator): "." by default; "_", "__" or "-" for agents whose
// tool names may hold only letters, digits, _ and -.
var Separators = []string{".", "_", "__", "-"}

// Gateway is the policy's gateway section: the MCP servers `latch gateway` forwards tool calls
// to, by alias. A call of tool T on upstream A is the action mcp.A.T (docs/gateway.md).
type Gateway struct {
	Upstreams map[string]*Upstream
	// Separator joins an alias and a tool's name in the names agents see: payments.refund, or
	// payments__refund with separator "__". One of Separators; "." when the policy says none.
	// The action is mcp.<alias>.<tool> whatever it is.
	Separator string
	Pos       Position // of the gateway key
}

// Upstream is one MCP server of the gateway: exactly one of Command (a process spoken to over
// stdio) and URL (a streamable-HTTP endpoint) is set.
type Upstream struct {
	Alias   string
	Command []string         // argv; nil when URL is set
	URL     string           // "" when Command is set
	Tools   map[string]*Tool // per-tool settings, by the upstream's tool name; may be empty
	Pin     *Pin             // nil when the upstream is not pinned
	Pos     Position         // of the alias
}

// Pin is what an upstream must be for the gateway to call it (docs/gateway.md#pinning).
type Pin struct {
	// ToolSchemaSHA256 maps an upstream tool's own name to "sha256:" and the hex SHA-256 of the
	// canonical JSON of its whole tools/list entry. A call of a pinned tool whose definition, as
	// the gateway last listed it, hashes otherwise is refused upstream_mismatch.
	ToolSchemaSHA256 map[string]string
	// TLSCertSHA256 lists "sha256:" hashes of the DER leaf certificates an https upstream may
	// present; when set they are the only trust anchors. A list, so certificates can rotate.
	TLSCertSHA256 []string
	Pos           Position // of the pin key
}

// Tool is the per-tool setting of an upstream.
type Tool struct {
	ErrorsMean string // ErrorsMeanUnknown (default) or ErrorsMeanNotExecuted
	// ReadOnly is the policy author's statement that the tool changes nothing, so running it
	// without an effect key is intended: `latch gateway` does not warn about it.
	ReadOnly bool
	Pos      Position
}

func (p *parser) gateway(e entry) (*Gateway, *Error) {
	if e := p.mapping(e, "gateway", "a mapping with upstreams"); e != nil {
		return nil, e
	}
	g := &Gateway{Upstreams: map[string]*Upstream{}, Separator: ".", Pos: posOf(e.k)}
	for _, en := range entries(e.v) {
		switch en.k.Value {
		case "upstreams":
		case "separator":
			s, e := p.str(en, "gateway.separator")
			if e != nil {
				return nil, e
			}
			if !slices.Contains(Separators, s) {
				return nil, p.errf(en.v, "bad gateway.separator %s (expected one of %s)", quote(s), strings.Join(quoteAll(Separators), ", "))
			}
			g.Separator = s
			continue
		default:
			return nil, p.unknownKey(en.k, "in gateway", gatewayKeys)
		}
		if e := p.mapping(en, "gateway.upstreams", "a mapping from aliases to upstream servers"); e != nil {
			return nil, e
		}
		for _, un := range entries(en.v) {
			u, e := p.upstream(un)
			if e != nil {
				return nil, e
			}
			g.Upstreams[u.Alias] = u
		}
	}
	return g, nil
}

func (p *parser) upstream(e entry) (*Upstream, *Error) {
	alias := e.k.Value
	if alias == "" || !nameChars(alias) {
		return nil, p.errf(e.k, "bad upstream alias %s (expected letters, digits, _ and -, like payments)", quote(alias))
	}
	where := "in upstream " + quote(alias)
	if e.v.Kind != yaml.MappingNode {
		return nil, p.errf(at(e), "upstream %s is %s (expected a mapping with command or url)", quote(alias), describeNode(e.v))
	}
	u := &Upstream{Alias: alias, Tools: map[string]*Tool{}, Pos: posOf(e.k)}
	for _, en := range entries(e.v) {
		switch en.k.Value {
		case "command":
			if en.v.Kind != yaml.SequenceNode || len(en.v.Content) == 0 {
				return nil, p.errf(at(en), "command %s is %s (expected a non-empty list of strings: the program and its arguments)", where, describeNode(en.v))
			}
			for _, a := range en.v.Content {
				s, e := p.str(entry{en.k, a}, "command "+where+" element")
				if e != nil {
					return nil, e
				}
				u.Command = append(u.Command, s)
			}
			if u.Command[0] == "" {
				return nil, p.errf(en.v.Content[0], "empty program in command %s", where)
			}
		case "url":
			s, e := p.str(en, "url "+where)
			if e != nil {
				return nil, e
			}
			pu, err := url.Parse(s)
			if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
				return nil, p.errf(en.v, "bad url %s %s (expected an http or https URL of a streamable-HTTP MCP endpoint)", quote(s), where)
			}
			u.URL = s
		case "tools":
			if e := p.mapping(en, "tools "+where, "a mapping from the upstream's tool names to settings"); e != nil {
				return nil, e
			}
			for _, tn := range entries(en.v) {
				t, e := p.tool(tn, where)
				if e != nil {
					return nil, e
				}
				u.Tools[tn.k.Value] = t
			}
		case "pin":
			pin, e := p.pin(en, where)
			if e != nil {
				return nil, e
			}
			u.Pin = pin
		default:
			return nil, p.unknownKey(en.k, where, upstreamKeys)
		}
	}
	switch {
	case u.Command == nil && u.URL == "":
		return nil, p.errf(e.k, "upstream %s has neither command nor url (expected exactly one)", quote(alias))
	case u.Command != nil && u.URL != "":
		return nil, p.errf(e.k, "upstream %s has both command and url (expected exactly one)", quote(alias))
	}
	if u.Pin != nil && len(u.Pin.TLSCertSHA256) > 0 && !strings.HasPrefix(u.URL, "https://") {
		return nil, p.errf(e.k, "upstream %s pins tls_cert_sha256 but is not an https url (only an https upstream presents a certificate)", quote(alias))
	}
	return u, nil
}

// pin parses an upstream's pin section.
func (p *parser) pin(e entry, where string) (*Pin, *Error) {
	where = "in pin " + where
	if e := p.mapping(e, "pin "+where, "a mapping with tool_schema_sha256 or tls_cert_sha256"); e != nil {
		return nil, e
	}
	pin := &Pin{ToolSchemaSHA256: map[string]string{}, Pos: posOf(e.k)}
	for _, en := range entries(e.v) {
		switch en.k.Value {
		case "tool_schema_sha256":
			if e := p.mapping(en, "tool_schema_sha256 "+where, "a mapping from the upstream's tool names to sha256:HEX"); e != nil {
				return nil, e
			}
			for _, tn := range entries(en.v) {
				name := tn.k.Value
				if name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") != "" {
					return nil, p.errf(tn.k, "bad tool name %s in tool_schema_sha256 %s (expected letters, digits, _, - and .)", quote(name), where)
				}
				h, e := p.sha256Pin(tn, "tool_schema_sha256 of tool "+quote(name)+" "+where)
				if e != nil {
					return nil, e
				}
				pin.ToolSchemaSHA256[name] = h
			}
		case "tls_cert_sha256":
			if en.v.Kind != yaml.SequenceNode || len(en.v.Content) == 0 {
				return nil, p.errf(at(en), "tls_cert_sha256 %s is %s (expected a non-empty list of sha256:HEX leaf certificate hashes)", where, describeNode(en.v))
			}
			for _, c := range en.v.Content {
				h, e := p.sha256Pin(entry{en.k, c}, "tls_cert_sha256 "+where+" element")
				if e != nil {
					return nil, e
				}
				pin.TLSCertSHA256 = append(pin.TLSCertSHA256, h)
			}
		default:
			return nil, p.unknownKey(en.k, where, pinKeys)
		}
	}
	if len(pin.ToolSchemaSHA256) == 0 && len(pin.TLSCertSHA256) == 0 {
		return nil, p.errf(e.k, "pin %s pins nothing (expected tool_schema_sha256 or tls_cert_sha256)", where)
	}
	return pin, nil
}

// sha256Pin parses one "sha256:" and 64 lowercase hex digits.
func (p *parser) sha256Pin(e entry, what string) (string, *Error) {
	s, err := p.str(e, what)
	if err != nil {
		return "", err
	}
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		return "", p.errf(e.v, "bad %s: %s (expected sha256: and 64 lowercase hex digits)", what, quote(s))
	}
	return s, nil
}

func (p *parser) tool(e entry, where string) (*Tool, *Error) {
	name := e.k.Value
	if name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") != "" {
		return nil, p.errf(e.k, "bad tool name %s %s (expected letters, digits, _, - and .)", quote(name), where)
	}
	where = "in tool " + quote(name) + " " + where
	if e.v.Kind != yaml.MappingNode {
		return nil, p.errf(at(e), "tool %s is %s (expected a mapping with errors_mean or read_only)", quote(name), describeNode(e.v))
	}
	t := &Tool{ErrorsMean: ErrorsMeanUnknown, Pos: posOf(e.k)}
	for _, en := range entries(e.v) {
		switch en.k.Value {
		case "errors_mean":
		case "read_only":
			b, err := p.bool(en, "read_only "+where)
			if err != nil {
				return nil, err
			}
			t.ReadOnly = b
			continue
		default:
			return nil, p.unknownKey(en.k, where, toolKeys)
		}
		s, err := p.str(en, "errors_mean "+where)
		if err != nil {
			return nil, err
		}
		if !slices.Contains([]string{ErrorsMeanUnknown, ErrorsMeanNotExecuted}, s) {
			return nil, p.errf(en.v, "bad errors_mean %s %s (expected unknown or not_executed)", quote(s), where)
		}
		t.ErrorsMean = s
	}
	return t, nil
}

// normalizeGateway is the gateway section's part of the policy hash: which program or endpoint
// an mcp.* action reaches is part of what the policy allows.
func normalizeGateway(g *Gateway) map[string]any {
	ups := make(map[string]any, len(g.Upstreams))
	for alias, u := range g.Upstreams {
		var cmd any
		if u.Command != nil {
			c := make([]any, len(u.Command))
			for i, s := range u.Command {
				c[i] = s
			}
			cmd = c
		}
		var u2 any
		if u.URL != "" {
			u2 = u.URL
		}
		tools := make(map[string]any, len(u.Tools))
		for name, t := range u.Tools {
			tm := map[string]any{"errors_mean": t.ErrorsMean}
			if t.ReadOnly {
				tm["read_only"] = true // only when set: older policies hash as before
			}
			tools[name] = tm
		}
		um := map[string]any{"command": cmd, "url": u2, "tools": tools}
		if u.Pin != nil {
			// Only when set: an unpinned upstream hashes as it did before pins existed.
			tp := make(map[string]any, len(u.Pin.ToolSchemaSHA256))
			for name, h := range u.Pin.ToolSchemaSHA256 {
				tp[name] = h
			}
			certs := make([]any, len(u.Pin.TLSCertSHA256))
			for i, h := range u.Pin.TLSCertSHA256 {
				certs[i] = h
			}
			um["pin"] = map[string]any{"tool_schema_sha256": tp, "tls_cert_sha256": certs}
		}
		ups[alias] = um
	}
	out := map[string]any{"upstreams": ups}
	if g.Separator != "." && g.Separator != "" {
		// Only when set: a policy that names none hashes as it did before separators existed.
		out["separator"] = g.Separator
	}
	return out
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = quote(s)
	}
	return out
}
