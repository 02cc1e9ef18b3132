package jsonview

import (
	"strings"
	"testing"

	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// TestNewEventRedactsEdits: an answer's edit member is shown with every argument some action
// redacts masked; one that does not read as expected is dropped, never shown in full.
func TestNewEventRedactsEdits(t *testing.T) {
	t.Parallel()
	pol, err := policy.Parse("p.yaml", []byte(`schema: latch.policy/v1
actions:
  a:
    effect: "a:{id}"
    arguments:
      id: { type: string }
      card: { type: string, redact: last4 }
      amount: { type: integer, editable: { decrease: true } }
    decision: approve
`))
	if err != nil {
		t.Fatal(err)
	}
	const card = "4242424242424242"
	for _, tt := range []struct{ payload, want string }{
		{`{"approver":"alice","edit":{"action_hash":"sha256:1","arguments":{"amount":{"from":5,"to":4}},"from_action_hash":"sha256:0","requested_arguments":{"amount":5,"card":"` + card + `","id":"x"}}}`,
			`"requested_arguments":{"amount":5,"card":"••••4242","id":"x"}`},
		{`{"approver":"alice","edit":{"requested_arguments":"` + card + `"}}`, `"edit":null`},
		{`{"approver":"alice","note":"` + card + `"}`, card}, // no edit: a note is the approver's own words
	} {
		got := string(NewEvent(pol, &store.Event{Kind: store.EventApprovalGranted, Payload: []byte(tt.payload)}).Payload)
		if !strings.Contains(got, tt.want) || (strings.Contains(tt.payload, `"edit"`) && strings.Contains(got, card)) {
			t.Errorf("NewEvent(%s).Payload = %s, want it to hold %s and no card number in an edit", tt.payload, got, tt.want)
		}
	}
	if got := string(NewEvent(nil, &store.Event{Payload: []byte(`{"edit":{"requested_arguments":{"card":"` + card + `"}}}`)}).Payload); !strings.Contains(got, card) {
		t.Errorf("NewEvent without a policy = %s, want the payload as it is", got)
	}
}
