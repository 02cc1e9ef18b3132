package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/jsonview"
	"github.com/latchkit/latch/mcpwire"
	"github.com/latchkit/latch/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HopHeader is the HTTP header of a tool call that presents a hop (docs/agents.md): the call is
// decided by that hop's chain alone. MetaHop is the same in the call's _meta, for transports
// without headers (stdio) and for agents that set it per call.
const (
	HopHeader = mcpwire.HopHeader
	MetaHop   = mcpwire.MetaHop
)

// hopToolAlias and hopToolTool make the name of the reserved tool an agent creates a hop with:
// latch.hop, joined by the policy's gateway.separator as upstream tools are (latch__hop…).
const (
	hopToolAlias = "latch"
	hopToolTool  = "hop"
)

// HopArgs are the arguments of the reserved hop tool: the parent the sender (the session's
// principal) hands on from, the receiving agent, and the grant handed on, with the keys of a
// delegation's grant (its subject may be left out: it is the receiver), as a JSON object or as
// YAML text.
type HopArgs struct {
	Parent string          `json:"parent" jsonschema:"the policy grant id or dlg_ delegation id handed on from, which the sender holds"`
	To     HopReceiver     `json:"to" jsonschema:"the one agent the hop is addressed to"`
	Grant  json.RawMessage `json:"grant" jsonschema:"the grant handed on: an object with the keys of a grant (actions, resources, constraints, environments, tasks, budgets, expires_at; subject optional), or the same as YAML text"`
}

// HopReceiver is the receiving agent of a hop, and the user it acts for when it acts for one.
type HopReceiver struct {
	Agent string `json:"agent" jsonschema:"the receiving agent, one concrete name"`
	User  string `json:"user,omitempty" jsonschema:"the user the receiver acts for, when it acts for one"`
}

// hopToolName is the reserved tool's name as agents see it.
func (g *Gateway) hopToolName() string { return hopToolAlias + g.sep() + hopToolTool }

// addHopTool offers the reserved hop tool on s when the policy has an authority section (else
// there is nothing to hand on). An upstream tool of the same name (an upstream aliased latch
// with a tool hop) keeps its name and the reserved tool is not offered: the gateway says so
// once, and renaming that upstream's alias brings the tool back.
func (g *Gateway) addHopTool(s *mcp.Server) {
	if g.cfg.Guard.Policy().Authority == nil {
		return
	}
	name := g.hopToolName()
	for _, t := range g.tools {
		if t.Name == name {
			g.cfg.Logger.Warn("latch gateway: an upstream tool has the reserved name of the hop tool, which is not offered: rename the upstream's alias",
				"tool", name, "upstream", t.Upstream)
			return
		}
	}
	in, err := jsonschema.For[HopArgs](&jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[json.RawMessage](): {Types: []string{"object", "string"}}}})
	if err != nil {
		panic(fmt.Sprintf("gateway: schema of the hop tool: %v", err)) // HopArgs is this package's own
	}
	s.AddTool(&mcp.Tool{
		Name: name,
		Description: "Hand part of a grant you hold to one other agent, for work you pass on to it (a hop). " +
			"Nothing wider than the parent is accepted. Give the returned delegation_id to the receiver: " +
			"it presents it as _meta \"" + MetaHop + "\" (or the " + HopHeader + " header) on the calls it makes for that work, " +
			"which are then decided by the hop alone.",
		InputSchema: in,
		Annotations: &mcp.ToolAnnotations{Title: "Hand on part of a grant"},
	}, g.hopTool)
}

// hopTool creates a hop from the session's principal (Guard.Hop). A refusal is a gateway error
// in the one vocabulary: invalid_argument (code -31001) for arguments that cannot be read, the
// authority reason and dimension (code -31008) for a sender who does not hold the parent or a
// hop wider than it.
func (g *Gateway) hopTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	name := g.hopToolName()
	p, ok := g.principal(req)
	if !ok {
		return nil, wireError(CodeUnauthenticated, Refusal{Reason: "unauthenticated", Action: name,
			Detail: "the session carries no principal: send Authorization: Bearer TOKEN over HTTP, or start a stdio gateway with --agent NAME"})
	}
	args, grant, err := readHopArgs(req.Params.Arguments)
	if err != nil {
		return nil, wireError(refusal(name, nil, err))
	}
	ctx, stop := withRequest(ctx, req)
	defer stop()
	d, err := g.cfg.Guard.Hop(ctx, args.Parent, grant, latch.Principal{Agent: args.To.Agent, User: args.To.User}, p)
	var pe *policy.Error
	if errors.As(err, &pe) {
		err = &latch.InvalidArgumentError{Reason: "invalid_argument", Pointer: "/grant", Err: fmt.Errorf("the grant does not parse: %w", pe)}
	}
	if err != nil {
		return nil, wireError(refusal(name, nil, err))
	}
	v, _ := jsonview.NewDelegation(d, nil)
	return &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("hop %s to %s beneath %s: present it as _meta %q on the calls made for this work",
			d.ID, principalName(args.To), d.Parent, MetaHop)}},
		StructuredContent: v,
	}, nil
}

// readHopArgs reads the hop tool's arguments, naming the member that is missing or wrong.
func readHopArgs(raw json.RawMessage) (HopArgs, []byte, error) {
	var a HopArgs
	bad := func(pointer, msg string) (HopArgs, []byte, error) {
		return a, nil, &latch.InvalidArgumentError{Reason: "invalid_argument", Pointer: pointer, Err: errors.New(msg)}
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return bad("", "the arguments are not an object of parent, to and grant: "+err.Error())
	}
	switch {
	case a.Parent == "":
		return bad("/parent", "parent is missing: the grant or delegation id the hop is handed on from")
	case a.To.Agent == "":
		return bad("/to/agent", "to.agent is missing: the receiving agent")
	case len(a.Grant) == 0 || string(a.Grant) == "null":
		return bad("/grant", "grant is missing: the grant handed on")
	}
	switch a.Grant[0] {
	case '{':
		return a, a.Grant, nil // JSON is YAML: the grant parser reads it as it is
	case '"':
		var s string
		if err := json.Unmarshal(a.Grant, &s); err != nil || s == "" {
			return bad("/grant", "grant is an empty string: the grant handed on, as YAML text")
		}
		return a, []byte(s), nil
	}
	return bad("/grant", "grant is neither an object nor YAML text")
}

func principalName(r HopReceiver) string {
	if r.User == "" {
		return r.Agent
	}
	return r.Agent + "/" + r.User
}

// hopOf is the hop a tool call presents, "" when none: the Latch-Hop header of the HTTP request
// that carried it, or _meta latch/hop, which must agree when both are given. A header given
// twice, a _meta value that is not a string, or two different hops is refused authority_hop:
// a call presents one hop, and the gateway does not pick one.
func hopOf(req *mcp.CallToolRequest) (string, error) {
	var header []string
	if req.Extra != nil && req.Extra.Header != nil {
		header = req.Extra.Header.Values(HopHeader)
	}
	var meta map[string]any
	if req.Params != nil {
		meta = req.Params.Meta
	}
	return mcpwire.Hop(header, meta)
}
