package notify

import (
	"encoding/json"
	"fmt"

	"github.com/latchkit/latch/store"
)

// KindUpstreamDrift: a gateway listed a pinned tool of an upstream otherwise than its pin, or
// not at all (docs/gateway.md#pinning): the gateway refuses the tool's calls until an operator
// reviews the change and re-pins it. One alert per drift, however many gateway processes see it.
const KindUpstreamDrift = "upstream_drift"

// upstreamRender is the text of an upstream drift alert. The tool's name and hashes came from
// the upstream, so each is passed through q.
func upstreamRender(e store.Event) func(q func(string) string) string {
	var p store.UpstreamPin
	_ = json.Unmarshal(e.Payload, &p) // an undecodable payload alerts without its details
	return func(q func(string) string) string {
		observed := q(p.Observed)
		if p.Observed == "" {
			observed = "nothing (the upstream no longer lists it)"
		}
		return fmt.Sprintf("Upstream %s tool %s no longer matches its pin (pinned %s, observed %s): the gateway refuses its calls "+
			"until an operator reviews the change (latch gateway pin --diff) and re-pins it", q(p.Upstream), q(p.Tool), q(p.Pinned), observed)
	}
}
