package gateway

import (
	"fmt"
	"slices"
	"strings"

	"github.com/latchkit/latch/policy"
)

// Unkeyed returns the listed tools whose action runs without an effect key
// (policy.Policy.RunsUnkeyed: it may be allowed or approved, has no effect template and is not
// marked read_only), in listing order. Nothing holds such a call to at most once: a re-sent call
// runs again, so a tool that writes should have an effect template. `latch gateway` names them
// in a warning at startup, and a strict gateway refuses to start with any — by the same rule
// `latch check --strict` applies to the policy.
func Unkeyed(pol *policy.Policy, tools []*Tool) []*Tool {
	var out []*Tool
	for _, t := range tools {
		if pol.RunsUnkeyed(t.Action) {
			out = append(out, t)
		}
	}
	return out
}

// Warnings returns what a careful operator should hear before the gateway serves, one sentence
// each, in a stable order: every listed tool that runs without an effect key (see Unkeyed), and
// every mcp.<alias>.<tool> action of the policy whose upstream offers no such tool (a typo, or
// a tool the upstream dropped: the rule guards nothing). `latch gateway` logs them at startup;
// with --strict any of them refuses the start.
func (g *Gateway) Warnings() []string {
	pol := g.cfg.Guard.Policy()
	var out []string
	for _, t := range Unkeyed(pol, g.tools) {
		out = append(out, fmt.Sprintf("tool %s runs without an effect key (policy action %s has no effect: template): a re-sent call runs again; if it changes nothing, say so with read_only: true in gateway.upstreams.%s.tools.%s",
			t.Name, t.Action, t.Upstream, t.UpstreamAs))
	}
	offered := map[string]bool{}
	for _, t := range g.tools {
		offered[t.Action] = true
	}
	names := make([]string, 0, len(pol.Actions))
	for name := range pol.Actions {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		rest, ok := strings.CutPrefix(name, "mcp.")
		if !ok || offered[name] {
			continue
		}
		alias, tool, _ := strings.Cut(rest, ".")
		if _, listed := g.upstreams[alias]; listed {
			out = append(out, fmt.Sprintf("policy action %s names tool %q, which upstream %s does not offer", name, tool, alias))
		}
	}
	return out
}
