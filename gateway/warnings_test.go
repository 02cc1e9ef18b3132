package gateway

import (
	"maps"
	"os"
	"strings"
	"testing"

	"github.com/latchkit/latch/policy"
)

func TestUnkeyed(t *testing.T) {
	t.Parallel()
	pol, err := policy.Parse("latch.yaml", []byte(`schema: latch.policy/v1
gateway:
  upstreams:
    p:
      url: http://127.0.0.1:1/mcp
      tools:
        reads: { read_only: true }
actions:
  mcp.p.reads: { decision: allow }
  mcp.p.keyed: { effect: "k:{id}", decision: allow }
  mcp.p.open: { decision: allow }
  mcp.p.gated:
    rules:
      - when: { amount_lte: 10 }
        decision: deny
      - decision: approve
  mcp.p.denied: { decision: deny }
`))
	if err != nil {
		t.Fatal(err)
	}
	var tools []*Tool
	for _, n := range []string{"keyed", "open", "gated", "denied", "unlisted", "reads"} {
		tools = append(tools, &Tool{Name: "p." + n, Action: "mcp.p." + n, Upstream: "p", UpstreamAs: n})
	}
	var got []string
	for _, tl := range Unkeyed(pol, tools) {
		got = append(got, tl.Name)
	}
	if g, want := strings.Join(got, ","), "p.open,p.gated"; g != want {
		t.Errorf("Unkeyed = %s, want %s", g, want)
	}
}

// `latch check --strict` (the policy's no_effect warnings) and `latch gateway --strict` (Unkeyed)
// refuse the same gateway tools, whatever the policy says of them.
func TestStrictRulesAgree(t *testing.T) {
	t.Parallel()
	const head = "schema: latch.policy/v1\ngateway:\n  upstreams:\n    p:\n      url: http://127.0.0.1:1/mcp\n"
	policies := map[string]string{
		"read_only":                 head + "      tools:\n        reads: { read_only: true }\nactions:\n  mcp.p.reads: { decision: allow }\n",
		"read_only false":           head + "      tools:\n        reads: { read_only: false }\nactions:\n  mcp.p.reads: { decision: allow }\n",
		"read_only of another tool": head + "      tools:\n        other: { read_only: true }\nactions:\n  mcp.p.reads: { decision: allow }\n",
		"errors_mean only":          head + "      tools:\n        reads: { errors_mean: not_executed }\nactions:\n  mcp.p.reads: { decision: approve }\n",
		"keyed":                     head + "actions:\n  mcp.p.write: { effect: \"w:{id}\", decision: allow }\n",
		"denied":                    head + "actions:\n  mcp.p.write: { decision: deny }\n",
		"rules":                     head + "actions:\n  mcp.p.write:\n    rules:\n      - when: { amount_lte: 10 }\n        decision: deny\n      - decision: approve\n",
		"rules all deny":            head + "actions:\n  mcp.p.write:\n    rules:\n      - when: { amount_lte: 10 }\n        decision: deny\n      - decision: deny\n",
		"dotted tool":               head + "      tools:\n        files.read: { read_only: true }\nactions:\n  mcp.p.files.read: { decision: allow }\n  mcp.p.files.write: { decision: allow }\n",
		"no gateway section":        "schema: latch.policy/v1\nactions:\n  mcp.p.reads: { decision: allow }\n",
	}
	example, err := os.ReadFile("../examples/gateway/latch.yaml")
	if err != nil {
		t.Fatal(err)
	}
	policies["example"] = string(example)
	for name, src := range policies {
		pol, err := policy.Parse("latch.yaml", []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var tools []*Tool
		check := map[string]bool{}
		for action := range pol.Actions {
			alias, tool, _ := strings.Cut(strings.TrimPrefix(action, "mcp."), ".")
			tools = append(tools, &Tool{Name: alias + "." + tool, Action: action, Upstream: alias, UpstreamAs: tool})
		}
		for _, w := range pol.Warnings() {
			if w.Code == policy.WarnNoEffect {
				check[w.Action] = true
			}
		}
		gw := map[string]bool{}
		for _, tl := range Unkeyed(pol, tools) {
			gw[tl.Action] = true
		}
		if !maps.Equal(check, gw) {
			t.Errorf("%s: latch check warns no_effect of %v, the gateway of %v", name, check, gw)
		}
	}
}
