package server_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/latchkit/latch/identity"
	"github.com/latchkit/latch/server"
	"github.com/latchkit/latch/store"
)

// testIssuer signs JWTs with a key the verifiers it builds pin.
type testIssuer struct {
	t       *testing.T
	priv    ed25519.PrivateKey
	keyFile string
}

func newIssuer(t *testing.T) *testIssuer {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "issuer.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return &testIssuer{t: t, priv: priv, keyFile: keyFile}
}

// verifier verifies the issuer's tokens for audience latch; edit sets the approver marks.
func (iss *testIssuer) verifier(edit func(*identity.Config)) *identity.JWT {
	iss.t.Helper()
	c := &identity.Config{Issuer: "https://sso.test", Audience: "latch", KeyFiles: []string{iss.keyFile}}
	if edit != nil {
		edit(c)
	}
	v, err := identity.NewJWT(c)
	if err != nil {
		iss.t.Fatal(err)
	}
	return v
}

// sign mints a token for sub, valid for an hour from now, with extra claims.
func (iss *testIssuer) sign(sub string, extra map[string]any) string {
	iss.t.Helper()
	now := time.Now()
	c := jwt.MapClaims{"iss": "https://sso.test", "aud": "latch", "sub": sub, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	maps.Copy(c, extra)
	tok, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c).SignedString(iss.priv)
	if err != nil {
		iss.t.Fatal(err)
	}
	return tok
}

var approverRole = map[string]any{"latch_role": "approver"}

// TestJWTAgentCannotResolveItsOwnEffect: a verified JWT is an agent's credential and nothing
// more. Without approver marks configured, the agent whose attempt went ambiguous cannot resolve
// it failed (and so cannot run a second execution), cannot answer approval requests, list
// anything people list, or read another principal's request. With marks configured, its
// unmarked JWT is still an agent's. Nothing a refusal touches is written.
func TestJWTAgentCannotResolveItsOwnEffect(t *testing.T) {
	t.Parallel()
	iss := newIssuer(t)
	for _, marks := range []struct {
		name string
		edit func(*identity.Config)
	}{
		{"no marks", nil},
		{"claim mark", func(c *identity.Config) { c.ApproverClaim, c.ApproverValue = "latch_role", "approver" }},
		{"audience mark", func(c *identity.Config) { c.ApproverAudience = "latch-people" }},
	} {
		for _, backend := range backends {
			t.Run(marks.name+"/"+backend, func(t *testing.T) {
				t.Parallel()
				s := start(t, backend, &server.Config{Identity: iss.verifier(marks.edit)})
				agent := iss.sign("jwt-worker", nil)
				r := s.do("POST", "/v1/actions", agent, charge("inv_1", 100))
				if r.status != 200 || r.body["status"] != "reserved" {
					t.Fatalf("the agent's JWT proposes = %d %s", r.status, r.raw)
				}
				if o := s.do("POST", "/v1/actions/"+r.body["action_id"].(string)+"/outcome", agent, map[string]any{"outcome": "unknown"}); o.body["result"] != "ambiguous" {
					t.Fatalf("outcome unknown = %d %s", o.status, o.raw)
				}
				apr := s.do("POST", "/v1/actions", s.alice, charge("inv_2", 90000))
				if apr.status != 202 {
					t.Fatalf("a request for approval = %d %s", apr.status, apr.raw)
				}
				aprPath := "/v1/approvals/" + apr.body["approval_id"].(string)
				before := s.footprint()
				wantProblem(t, "the agent resolves its own attempt failed", s.do("POST", "/v1/effects/charge:inv_1/resolve", agent, map[string]any{"to": "failed"}), 403, "forbidden")
				wantProblem(t, "the agent resolves its own attempt committed", s.do("POST", "/v1/effects/charge:inv_1/resolve", agent, map[string]any{"to": "committed"}), 403, "forbidden")
				wantProblem(t, "the agent approves", s.do("POST", aprPath+"/approve", agent, nil), 403, "forbidden")
				wantProblem(t, "the agent denies", s.do("POST", aprPath+"/deny", agent, nil), 403, "forbidden")
				wantProblem(t, "the agent lists approvals", s.do("GET", "/v1/approvals", agent, nil), 403, "forbidden")
				wantProblem(t, "the agent lists effects", s.do("GET", "/v1/effects", agent, nil), 403, "forbidden")
				wantProblem(t, "the agent reads another's request", s.do("GET", aprPath, agent, nil), 404, "approval_not_found")
				if after := s.footprint(); after != before {
					t.Errorf("refused calls wrote: %+v → %+v", before, after)
				}
				wantProblem(t, "the agent retries", s.do("POST", "/v1/actions", agent, charge("inv_1", 100)), 409, "ambiguous")
			})
		}
	}
}

// TestJWTPeople: with an approver mark configured (a claim, or an audience of the people's own),
// a JWT carrying it is a person's: it lists, answers (method jwt, verified; held to the
// entitlement, self-approval and count-once rules of approver tokens) and resolves as the person
// its subject names — and it cannot propose or report outcomes. An agent token is refused where
// people act, and a JWT signed by another key is refused 401. A refused answer writes nothing.
func TestJWTPeople(t *testing.T) {
	t.Parallel()
	iss := newIssuer(t)
	forged := newIssuer(t)
	for _, mark := range []struct {
		name   string
		edit   func(*identity.Config)
		person func(iss *testIssuer, sub string) string
	}{
		{"claim", func(c *identity.Config) { c.ApproverClaim, c.ApproverValue = "latch_role", "approver" },
			func(iss *testIssuer, sub string) string { return iss.sign(sub, approverRole) }},
		{"audience", func(c *identity.Config) { c.ApproverAudience = "latch-people" },
			func(iss *testIssuer, sub string) string { return iss.sign(sub, map[string]any{"aud": "latch-people"}) }},
	} {
		for _, backend := range backends {
			t.Run(mark.name+"/"+backend, func(t *testing.T) {
				t.Parallel()
				s := startWith(t, backend, approversPolicy, &server.Config{Identity: iss.verifier(mark.edit)})
				dave, erin, self := mark.person(iss, "dave"), mark.person(iss, "erin"), mark.person(iss, "Billing-Worker")
				r := s.do("POST", "/v1/actions", s.alice, charge("inv_1", 100))
				if r.status != 202 {
					t.Fatalf("charge = %d %s", r.status, r.raw)
				}
				apr := r.body["approval_id"].(string)
				path := "/v1/approvals/" + apr
				answers := func() int {
					t.Helper()
					g := s.do("GET", path, s.approver, nil)
					if g.status != 200 {
						t.Fatalf("GET %s = %d %s", path, g.status, g.raw)
					}
					return len(g.body["answers"].([]any))
				}

				before := s.footprint()
				wantProblem(t, "a person's JWT proposes", s.do("POST", "/v1/actions", dave, charge("inv_3", 100)), 403, "forbidden")
				wantProblem(t, "a person's JWT reports an outcome", s.do("POST", "/v1/actions/"+"act_00000000000000000000000000000000"+"/outcome", dave, map[string]any{"outcome": "committed"}), 403, "forbidden")
				if after := s.footprint(); after != before {
					t.Errorf("a person's refused proposal wrote: %+v → %+v", before, after)
				}
				wantProblem(t, "an agent token", s.do("POST", path+"/approve", s.bob, nil), 403, "forbidden")
				wantProblem(t, "a JWT signed by another key", s.do("POST", path+"/approve", mark.person(forged, "dave"), nil), 401, "invalid_token")
				wantProblem(t, "a JWT outside the roles", s.do("POST", path+"/approve", erin, nil), 403, "approver_not_entitled")
				wantProblem(t, "a JWT for the requester", s.do("POST", path+"/approve", self, nil), 403, "self_approval")
				if n := answers(); n != 0 {
					t.Fatalf("refused answers wrote %d answers", n)
				}
				if l := s.do("GET", "/v1/approvals?status=pending", dave, nil); l.status != 200 || len(l.body["approvals"].([]any)) != 1 {
					t.Fatalf("dave lists pending = %d %s", l.status, l.raw)
				}
				if g := s.do("GET", path, dave, nil); g.status != 200 || g.body["approval_id"] != apr {
					t.Fatalf("dave reads %s = %d %s, want 200", path, g.status, g.raw)
				}
				a := s.do("POST", path+"/approve", dave, map[string]any{"note": "checked"})
				if a.status != 200 || a.body["status"] != "pending" || a.body["grants"] != float64(1) {
					t.Fatalf("dave's grant = %d %s, want pending 1 of 2", a.status, a.raw)
				}
				ans := a.body["answers"].([]any)[0].(map[string]any)
				if ans["approver"] != "dave" || ans["method"] != "jwt" || ans["verified"] != true || ans["note"] != "checked" {
					t.Errorf("dave's answer = %v, want dave, jwt, verified, the note", ans)
				}
				wantProblem(t, "dave again with a fresh JWT", s.do("POST", path+"/deny", mark.person(iss, "DAVE"), nil), 409, "already_answered")
				if b := s.do("POST", path+"/approve", s.approver, nil); b.status != 200 || b.body["status"] != "granted" {
					t.Fatalf("carol's grant = %d %s, want granted", b.status, b.raw)
				}
				ok := s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "billing.charge",
					"arguments": map[string]any{"invoice_id": "inv_1", "amount": 100}, "approval_id": apr})
				if ok.status != 200 || ok.body["status"] != "reserved" {
					t.Fatalf("with 2 of 2 = %d %s", ok.status, ok.raw)
				}
				s.do("POST", "/v1/actions/"+ok.body["action_id"].(string)+"/outcome", s.alice, map[string]any{"outcome": "unknown"})
				wantProblem(t, "an agent token resolving", s.do("POST", "/v1/effects/charge:inv_1/resolve", s.bob, map[string]any{"to": "committed"}), 403, "forbidden")
				wantProblem(t, "the requester's person resolving", s.do("POST", "/v1/effects/charge:inv_1/resolve", self, map[string]any{"to": "failed"}), 403, "self_resolution")
				wantProblem(t, "a person outside the roles resolving", s.do("POST", "/v1/effects/charge:inv_1/resolve", erin, map[string]any{"to": "failed"}), 403, "approver_not_entitled")
				res := s.do("POST", "/v1/effects/charge:inv_1/resolve", dave, map[string]any{"to": "committed", "note": "seen"})
				if res.status != 200 || res.body["state"] != "committed" || res.body["resolved_by"] != "http:dave" {
					t.Fatalf("dave resolves = %d %s, want committed by http:dave", res.status, res.raw)
				}
			})
		}
	}
}

// keep the store import used by helpers shared with other files.
var _ = store.TokenAgent
