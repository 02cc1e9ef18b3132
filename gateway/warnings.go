package gateway

import (
	"fmt"
	"slices"
	"strings"

	"github.com/latchkit/latch/policy"
)

// Unkeyed returns the listed tools the policy lets run (allow or approve, by any rule) without
// an effect key and does not mark read_only, in listing order. Nothing holds such a call to at
// most once: a re-sent call runs again, so a tool that writes should have an effect template. `latch gateway` names them in a
// warning at startup; a strict gateway refuses to start with any.
func Unkeyed(pol *policy.Policy, tools []*Tool) []*Tool {
	var out []*Tool
	for _, t := range tools {
		a := pol.Actions[t.Action]
		if a == nil || a.Effect != nil {
			continue // unlisted (denied) or keyed
		}
		if readOnly(pol, t) {
			continue // the policy says it changes nothing
		}
		if runs(a) {
			out = append(out, t)
		}
	}
	return out
}

// readOnly reports whether the policy marks t read_only in its upstream's tool settings.
func readOnly(pol *policy.Policy, t *Tool) bool {
	if pol.Gateway == nil {
		return false
	}
	u := pol.Gateway.Upstreams[t.Upstream]
	if u == nil {
		return false
	}
	s := u.Tools[t.UpstreamAs]
	return s != nil && s.ReadOnly
}

func runs(a *policy.Action) bool {
	if a.Decision == policy.Allow || a.Decision == policy.Approve {
		return true
	}
	for _, r := range a.Rules {
		if r.Decision == policy.Allow || r.Decision == policy.Approve {
			return true
		}
	}
	return false
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
