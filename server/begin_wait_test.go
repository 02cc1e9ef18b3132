package server_test

import (
	"testing"
	"time"

	"github.com/latchkit/latch/store"
)

// TestBeginWaitReplay: a keyed begin that waited for its approval (wait_seconds), was granted
// and reserved, and whose answer was lost, is retried with the same key and the same body — no
// approval_id, which the caller never saw — and gets the same reservation back at once, without
// a second approval request; another caller's call under the key is not handed it.
func TestBeginWaitReplay(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := start(t, backend, nil)
			const key = "3c2b7f1a-0d4e-4f6a-9b21-5e8d7c6a1f00"
			body := map[string]any{"action": "billing.charge",
				"arguments": map[string]any{"invoice_id": "inv_w", "amount": 90000}, "wait_seconds": 20}
			got := make(chan *response, 1)
			go func() { got <- s.doKeyed("POST", "/v1/actions", s.alice, key, body) }()
			var apr string
			for deadline := time.Now().Add(10 * time.Second); apr == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				list, err := s.g.Store().Approvals(t.Context(), store.ApprovalFilter{Status: store.Pending})
				if err != nil {
					t.Fatal(err)
				}
				if len(list) == 1 {
					apr = list[0].ID
				}
			}
			if apr == "" {
				t.Fatal("no approval request appeared")
			}
			if a := s.do("POST", "/v1/approvals/"+apr+"/approve", s.approver, nil); a.status != 200 {
				t.Fatalf("approve = %d %s", a.status, a.raw)
			}
			first := <-got
			if first.status != 200 || first.body["status"] != "reserved" || first.body["approval_id"] != apr {
				t.Fatalf("waiting begin = %d %s", first.status, first.raw)
			}
			// The answer was lost: the same request again, with the same key.
			short := map[string]any{"action": "billing.charge",
				"arguments": map[string]any{"invoice_id": "inv_w", "amount": 90000}, "wait_seconds": 1}
			sameReservation(t, "retry of a begin that waited", s.doKeyed("POST", "/v1/actions", s.alice, key, short), first)
			all, err := s.g.Store().Approvals(t.Context(), store.ApprovalFilter{})
			if err != nil || len(all) != 1 {
				t.Errorf("approval requests after the retry = %d, %v; want the one", len(all), err)
			}
			// Another caller under the key is not handed the reservation (nor its approval): its
			// call meets the attempt that holds the effect.
			wantProblem(t, "another caller", s.doKeyed("POST", "/v1/actions", s.bob, key, short), 409, "in_progress")
		})
	}
}
