package cli_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/latchkit/latch/internal/testdb"
)

// TestRevokedTokenRefusedAcrossServers: two `latch serve` processes share one store and have
// each verified an agent's token (one holds a reservation begun with it); `latch token revoke`,
// a third process, revokes it. From the moment the revoke returns, neither server accepts the
// token on either route of a call — the outcome of the held reservation and a new begin are
// refused token_revoked, and the reservation is left as it was — on SQLite and on Postgres.
// A server that trusted a token it verified earlier (a cache not read past at revocation)
// fails this test: with --token-cache 1h given to both servers, both routes answer 200.
func TestRevokedTokenRefusedAcrossServers(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			bin, policy := latchDir(t, "schema: latch.policy/v1\nactions:\n  billing.charge:\n    effect: \"charge:{invoice_id}\"\n    decision: allow\n")
			storeURL := testdb.URL(t, backend, "latch_cli_revoke")
			out := runLatch(t, bin, nil, "--policy", policy, "--store", storeURL, "token", "create", "--agent", "billing-worker", "--json")
			var tok struct{ Token, ID string }
			if err := json.Unmarshal(out, &tok); err != nil || tok.Token == "" || tok.ID == "" {
				t.Fatalf("token create: %v %s", err, out)
			}
			var srv [2]*serveProc
			for i := range srv {
				srv[i] = startServe(t, bin, nil, "--policy", policy, "--store", storeURL, "serve", "--sweep", "0")
			}
			post := func(p *serveProc, path, body string) (int, string) {
				t.Helper()
				req, err := http.NewRequest("POST", p.base+path, strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+tok.Token)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			// Each server verifies the token on both routes, and server 0 holds a reservation.
			var held string
			for i, p := range srv {
				status, body := post(p, "/v1/actions", `{"action":"billing.charge","arguments":{"invoice_id":"inv_`+string(rune('a'+i))+`"}}`)
				var begun struct {
					Status   string `json:"status"`
					ActionID string `json:"action_id"`
				}
				if err := json.Unmarshal([]byte(body), &begun); status != 200 || err != nil || begun.Status != "reserved" {
					t.Fatalf("server %d: POST /v1/actions = %d %s, want 200 reserved", i, status, body)
				}
				if i == 1 {
					if status, body := post(p, "/v1/actions/"+begun.ActionID+"/outcome", `{"outcome":"committed"}`); status != 200 {
						t.Fatalf("server %d: POST outcome = %d %s", i, status, body)
					}
				} else {
					held = begun.ActionID
				}
			}

			runLatch(t, bin, nil, "--policy", policy, "--store", storeURL, "token", "revoke", tok.ID)

			for i, p := range srv {
				status, body := post(p, "/v1/actions", `{"action":"billing.charge","arguments":{"invoice_id":"inv_new`+string(rune('a'+i))+`"}}`)
				if status != 401 || !strings.Contains(body, "token_revoked") {
					t.Errorf("server %d after the revocation: POST /v1/actions = %d %s, want 401 token_revoked", i, status, body)
				}
			}
			status, body := post(srv[0], "/v1/actions/"+held+"/outcome", `{"outcome":"committed"}`)
			if status != 401 || !strings.Contains(body, "token_revoked") {
				t.Errorf("server 0 after the revocation: POST outcome of %s = %d %s, want 401 token_revoked", held, status, body)
			}
			// Nothing was written for the refused requests: the held reservation is still only
			// reserved, and the refused begins reserved nothing.
			effects := string(runLatch(t, bin, nil, "--policy", policy, "--store", storeURL, "effects", "--json"))
			for _, want := range []string{`"effect_key":"charge:inv_a","state":"executing"`, `"effect_key":"charge:inv_b","state":"committed"`} {
				if !strings.Contains(effects, want) {
					t.Errorf("effects lack %s: %s", want, effects)
				}
			}
			if strings.Contains(effects, "inv_new") {
				t.Errorf("a refused begin reserved an effect: %s", effects)
			}
		})
	}
}
