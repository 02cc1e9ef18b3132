package gateway

import (
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
