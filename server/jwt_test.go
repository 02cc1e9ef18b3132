package server_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/latchkit/latch/identity"
	"github.com/latchkit/latch/server"
)

// TestJWTApprovers: a JWT the identity provider verifies answers approval requests as the person
// its subject names — a verified answer with method jwt, held to the same entitlement,
// self-approval and count-once rules as an approver token — and resolves as that person, while
// an agent token is refused and a JWT signed by another key is refused 401. A refused answer
// writes nothing.
func TestJWTApprovers(t *testing.T) {
	t.Parallel()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	_, forged, _ := ed25519.GenerateKey(rand.Reader)
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "issuer.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	idp, err := identity.NewJWT(&identity.Config{Issuer: "https://sso.test", Audience: "latch", KeyFiles: []string{keyFile}})
	if err != nil {
		t.Fatal(err)
	}
	sign := func(key ed25519.PrivateKey, sub string) string {
		now := time.Now()
		tok, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{"iss": "https://sso.test", "aud": "latch",
			"sub": sub, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			s := startWith(t, backend, approversPolicy, &server.Config{Identity: idp})
			dave, erin, self := sign(priv, "dave"), sign(priv, "erin"), sign(priv, "Billing-Worker")
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

			wantProblem(t, "an agent token", s.do("POST", path+"/approve", s.bob, nil), 403, "forbidden")
			wantProblem(t, "a JWT signed by another key", s.do("POST", path+"/approve", sign(forged, "dave"), nil), 401, "invalid_token")
			wantProblem(t, "a JWT outside the roles", s.do("POST", path+"/approve", erin, nil), 403, "approver_not_entitled")
			wantProblem(t, "a JWT for the requester", s.do("POST", path+"/approve", self, nil), 403, "self_approval")
			if n := answers(); n != 0 {
				t.Fatalf("refused answers wrote %d answers", n)
			}

			// A verified person reads the pending requests, as with an approver token.
			if l := s.do("GET", "/v1/approvals?status=pending", dave, nil); l.status != 200 || len(l.body["approvals"].([]any)) != 1 {
				t.Fatalf("dave lists pending = %d %s", l.status, l.raw)
			}
			// and reads any one request, not only those its own principal made (docs/http.md).
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
			wantProblem(t, "dave again with a fresh JWT", s.do("POST", path+"/deny", sign(priv, "DAVE"), nil), 409, "already_answered")
			if n := answers(); n != 1 {
				t.Fatalf("after a repeated answer: %d answers, want 1", n)
			}

			if b := s.do("POST", path+"/approve", s.approver, nil); b.status != 200 || b.body["status"] != "granted" {
				t.Fatalf("carol's grant = %d %s, want granted", b.status, b.raw)
			}
			ok := s.do("POST", "/v1/actions", s.alice, map[string]any{"action": "billing.charge",
				"arguments": map[string]any{"invoice_id": "inv_1", "amount": 100}, "approval_id": apr})
			if ok.status != 200 || ok.body["status"] != "reserved" {
				t.Fatalf("with 2 of 2 = %d %s", ok.status, ok.raw)
			}
			// The same person resolves what became ambiguous, recorded under the JWT's name.
			s.do("POST", "/v1/actions/"+ok.body["action_id"].(string)+"/outcome", s.alice, map[string]any{"outcome": "unknown"})
			wantProblem(t, "an agent token resolving", s.do("POST", "/v1/effects/charge:inv_1/resolve", s.bob, map[string]any{"to": "committed"}), 403, "forbidden")
			res := s.do("POST", "/v1/effects/charge:inv_1/resolve", dave, map[string]any{"to": "committed", "note": "seen"})
			if res.status != 200 || res.body["state"] != "committed" || res.body["resolved_by"] != "http:dave" {
				t.Fatalf("dave resolves = %d %s, want committed by http:dave", res.status, res.raw)
			}
		})
	}
}
