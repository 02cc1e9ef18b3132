package gateway

import (
	"github.com/latchkit/latch/policy"
)

// Unkeyed returns the listed tools the policy lets run (allow or approve, by any rule) without
// an effect key, in listing order. Nothing holds such a call to at most once: a re-sent call runs
// again, so a tool that writes should have an effect template. `latch gateway` names them in a
// warning at startup; a strict gateway refuses to start with any.
func Unkeyed(pol *policy.Policy, tools []*Tool) []*Tool {
	var out []*Tool
	for _, t := range tools {
		a := pol.Actions[t.Action]
		if a == nil || a.Effect != nil {
			continue // unlisted (denied) or keyed
		}
		if runs(a) {
			out = append(out, t)
		}
	}
	return out
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
