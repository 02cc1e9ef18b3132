package identity

import (
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/latchkit/latch"
)

// TestApproverMarks: without an approver mark every token is an agent's; with one, a token
// carrying it is a person's — Identify names the person, and Principal and Verify refuse it
// approver_token, so it can never propose — while an unmarked token stays an agent's and
// Identify names no person. A token whose audience marks it both is refused.
func TestApproverMarks(t *testing.T) {
	t.Parallel()
	k := keys()
	with := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := claims()
		edit(c)
		return c
	}
	role := func(v any) func(jwt.MapClaims) { return func(c jwt.MapClaims) { c["latch_role"] = v } }
	byClaim := func(c *Config) { c.ApproverClaim, c.ApproverValue = "latch_role", "approver" }
	byAudience := func(c *Config) { c.ApproverAudience = "latch-people" }
	tests := []struct {
		name       string
		cfg        func(*Config)
		claims     jwt.MapClaims
		wantPerson string // "" for an agent's token
		wantAgent  string
		wantReason string
	}{
		{name: "no mark configured: a role claim is an agent's", cfg: func(*Config) {}, claims: with(role("approver")), wantAgent: "agent-1"},
		{name: "claim mark, unmarked token", cfg: byClaim, claims: claims(), wantAgent: "agent-1"},
		{name: "claim mark, other value", cfg: byClaim, claims: with(role("agent")), wantAgent: "agent-1"},
		{name: "claim mark, string", cfg: byClaim, claims: with(role("approver")), wantPerson: "agent-1"},
		{name: "claim mark, list", cfg: byClaim, claims: with(role([]any{"reader", "approver"})), wantPerson: "agent-1"},
		{name: "claim mark, wrong case", cfg: byClaim, claims: with(role("Approver")), wantAgent: "agent-1"},
		{name: "nested claim mark", cfg: func(c *Config) { c.ApproverClaim, c.ApproverValue = "latch.role", "approver" },
			claims: with(func(c jwt.MapClaims) { c["latch"] = map[string]any{"role": "approver"} }), wantPerson: "agent-1"},
		{name: "audience mark, agents' audience", cfg: byAudience, claims: claims(), wantAgent: "agent-1"},
		{name: "audience mark, people's audience", cfg: byAudience,
			claims: with(func(c jwt.MapClaims) { c["aud"] = "latch-people"; c["sub"] = "dana" }), wantPerson: "dana"},
		{name: "audience mark, both audiences", cfg: byAudience,
			claims: with(func(c jwt.MapClaims) { c["aud"] = []any{testAudience, "latch-people"} }), wantReason: "role"},
		{name: "audience mark, unknown audience", cfg: byAudience,
			claims: with(func(c jwt.MapClaims) { c["aud"] = "other" }), wantReason: "audience"},
		{name: "people's audience without the mark configured", cfg: func(*Config) {},
			claims: with(func(c jwt.MapClaims) { c["aud"] = "latch-people" }), wantReason: "audience"},
		{name: "name claim", cfg: func(c *Config) { byClaim(c); c.ApproverNameClaim = "email" },
			claims: with(func(c jwt.MapClaims) { c["latch_role"] = "approver"; c["email"] = "dana@example.com" }), wantPerson: "dana@example.com"},
		{name: "name claim missing", cfg: func(c *Config) { byClaim(c); c.ApproverNameClaim = "email" },
			claims: with(role("approver")), wantReason: "approver_claim"},
		{name: "both marks, either makes a person", cfg: func(c *Config) { byClaim(c); byAudience(c) },
			claims: with(role("approver")), wantPerson: "agent-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := pinned(t)
			tt.cfg(cfg)
			j, err := NewJWT(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := latch.WithCredential(t.Context(), sign(t, jwt.SigningMethodEdDSA, k.ed, tt.claims, nil))
			p, person, err := j.Identify(ctx)
			agent, perr := j.Principal(ctx)
			switch {
			case tt.wantReason != "":
				var e *Error
				if !errors.As(err, &e) || e.Reason != tt.wantReason {
					t.Fatalf("Identify = %+v, %+v, %v; want reason %s", p, person, err, tt.wantReason)
				}
				if perr == nil {
					t.Errorf("Principal = %+v, nil; want it refused", agent)
				}
			case tt.wantPerson != "":
				if err != nil || person == nil || person.Name != tt.wantPerson || p.Agent != "" || person.Issuer != testIssuer ||
					!person.ExpiresAt.Equal(t0.Add(time.Hour)) {
					t.Fatalf("Identify = %+v, %+v, %v; want the person %s, no agent, expiring with the token", p, person, err, tt.wantPerson)
				}
				var e *Error
				if !errors.As(perr, &e) || e.Reason != "approver_token" {
					t.Errorf("Principal of a person's token = %+v, %v; want approver_token", agent, perr)
				}
			default:
				if err != nil || person != nil || p.Agent != tt.wantAgent {
					t.Fatalf("Identify = %+v, %+v, %v; want the agent %s and no person", p, person, err, tt.wantAgent)
				}
				if perr != nil || agent.Agent != tt.wantAgent {
					t.Errorf("Principal = %+v, %v; want the agent %s", agent, perr, tt.wantAgent)
				}
			}
		})
	}
}

// TestApproverExpired: a person's expired token is refused expired and names no agent for the
// pipeline to attribute a refused call to.
func TestApproverExpired(t *testing.T) {
	t.Parallel()
	cfg := pinned(t)
	cfg.ApproverClaim, cfg.ApproverValue = "latch_role", "approver"
	j, err := NewJWT(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := claims()
	c["latch_role"] = "approver"
	c["exp"] = t0.Add(-time.Hour).Unix()
	c["iat"] = t0.Add(-2 * time.Hour).Unix()
	_, _, err = j.Identify(latch.WithCredential(t.Context(), sign(t, jwt.SigningMethodEdDSA, keys().ed, c, nil)))
	var e *Error
	var expired *latch.ExpiredCredentialError
	if !errors.As(err, &e) || e.Reason != "expired" || errors.As(err, &expired) {
		t.Errorf("Identify of an expired person's token = %v; want expired, with no agent principal", err)
	}
}

// TestApproverConfig: the marks are checked when the verifier is built.
func TestApproverConfig(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"claim without value", func(c *Config) { c.ApproverClaim = "latch_role" }, `identity: approver claim "latch_role" needs the value that marks a person's token`},
		{"value without claim", func(c *Config) { c.ApproverValue = "approver" }, "identity: approver value given without an approver claim"},
		{"same audience", func(c *Config) { c.ApproverAudience = testAudience }, `identity: approver audience "latch" is the agents' audience: a person's audience must differ`},
		{"bad claim path", func(c *Config) { c.ApproverClaim, c.ApproverValue = "a..b", "x" }, `identity: approver claim: "a..b" has an empty path segment`},
		{"bad name claim", func(c *Config) { c.ApproverNameClaim = ".x" }, `identity: approver name claim: ".x" has an empty path segment`},
	} {
		cfg := pinned(t)
		tt.edit(cfg)
		if _, err := NewJWT(cfg); err == nil || err.Error() != tt.want {
			t.Errorf("%s: NewJWT = %v, want %s", tt.name, err, tt.want)
		}
	}
}
