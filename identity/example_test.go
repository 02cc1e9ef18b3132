package identity_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/identity"
)

// A guard whose principals come from the issuer's JWTs: pin the issuer's public key, hand the
// verifier to latch.Config, and put each request's bearer token in the call's context.
func ExampleNewJWT() {
	// The issuer's key pair. In production only the public half is here, in a file you ship.
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "identity-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		log.Fatal(err)
	}
	keyFile := filepath.Join(dir, "issuer.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		log.Fatal(err)
	}

	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	j, err := identity.NewJWT(&identity.Config{
		Issuer:    "https://auth.example.com",
		Audience:  "payments",
		KeyFiles:  []string{keyFile},
		UserClaim: "act.sub", // the user this agent acts for, from a nested claim
		Now:       func() time.Time { return now },
	})
	if err != nil {
		log.Fatal(err)
	}
	cfg := &latch.Config{Identity: j} // plus PolicyPath, StoreURL…; then latch.Open(ctx, cfg)

	// A token the issuer minted for the agent.
	token, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{
		"iss": "https://auth.example.com",
		"aud": "payments",
		"sub": "refund-agent",
		"act": map[string]any{"sub": "alice@example.com"},
		"exp": now.Add(time.Hour).Unix(),
	}).SignedString(priv)
	if err != nil {
		log.Fatal(err)
	}

	// What the guard does for each protected call.
	ctx := latch.WithCredential(context.Background(), "Bearer "+token)
	p, err := cfg.Identity.Principal(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(p.Agent, "for", p.User, "until", p.ExpiresAt.Format(time.RFC3339))

	_, err = cfg.Identity.Principal(context.Background())
	fmt.Println(err)
	// Output:
	// refund-agent for alice@example.com until 2026-11-29T10:00:00Z
	// no credential
}

// One issuer for agents and people: the people's tokens carry a claim the agents' never do, and
// the verifier is told so. Identify says whose a token is; Principal refuses a person's, so a
// person can never propose as an agent.
func ExampleJWT_Identify() {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "identity-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		log.Fatal(err)
	}
	keyFile := filepath.Join(dir, "issuer.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		log.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	j, err := identity.NewJWT(&identity.Config{
		Issuer: "https://auth.example.com", Audience: "latch", KeyFiles: []string{keyFile},
		ApproverClaim: "latch_role", ApproverValue: "approver", // the mark of a person's token
		Now: func() time.Time { return now },
	})
	if err != nil {
		log.Fatal(err)
	}
	mint := func(claims jwt.MapClaims) context.Context {
		claims["iss"], claims["aud"], claims["exp"] = "https://auth.example.com", "latch", now.Add(time.Hour).Unix()
		tok, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims).SignedString(priv)
		if err != nil {
			log.Fatal(err)
		}
		return latch.WithCredential(context.Background(), tok)
	}
	for _, ctx := range []context.Context{
		mint(jwt.MapClaims{"sub": "refund-agent"}),
		mint(jwt.MapClaims{"sub": "alice", "latch_role": "approver"}),
	} {
		p, person, err := j.Identify(ctx)
		switch {
		case err != nil:
			log.Fatal(err)
		case person != nil:
			_, perr := j.Principal(ctx)
			fmt.Println("person", person.Name, "- as an agent:", perr)
		default:
			fmt.Println("agent", p.Agent)
		}
	}
	// Output:
	// agent refund-agent
	// person alice - as an agent: the token is a person's (an approver's): people answer approval requests and resolve effects, and do not propose actions
}

// A revocation feed refuses a credential before its exp: here the feed takes a pushed plain
// list (in production it reads a file or polls the issuer's URL as well, see RevocationConfig).
func ExampleRevocationFeed() {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "identity-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		log.Fatal(err)
	}
	keyFile := filepath.Join(dir, "issuer.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		log.Fatal(err)
	}
	now := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	feed, err := identity.NewRevocationFeed(&identity.RevocationConfig{Now: clock})
	if err != nil {
		log.Fatal(err)
	}
	j, err := identity.NewJWT(&identity.Config{Issuer: "https://auth.example.com", Audience: "payments",
		KeyFiles: []string{keyFile}, Revocations: feed, Now: clock})
	if err != nil {
		log.Fatal(err)
	}
	mint := func(jti string) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{"iss": "https://auth.example.com", "aud": "payments",
			"sub": "refund-agent", "jti": jti, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}).SignedString(priv)
		if err != nil {
			log.Fatal(err)
		}
		return tok
	}
	if _, err := feed.Push([]byte("iss https://auth.example.com\njti t-1\n")); err != nil {
		log.Fatal(err)
	}
	for _, jti := range []string{"t-1", "t-2"} {
		p, err := j.Verify(context.Background(), mint(jti))
		if err != nil {
			// A guard refuses the call with this error wrapped in ErrIdentity; its reason word:
			fmt.Printf("%s: refused %s: %v\n", jti, latch.RefusalOf(err).Reason, err)
			continue
		}
		fmt.Printf("%s: %s\n", jti, p.Agent)
	}
	// Output:
	// t-1: refused credential_revoked: the credential (jti "t-1") of issuer "https://auth.example.com" was revoked
	// t-2: refund-agent
}
