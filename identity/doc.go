// Package identity turns a request credential into a latch.Principal.
//
// latch consumes identity; it never issues credentials. A JWT verifier is built from a Config
// naming the one issuer and audience it accepts and where the issuer's public keys come from:
// PEM files pinned on disk, or a JWKS URL fetched lazily and cached. The verifier implements
// latch.IdentityProvider, so it plugs into latch.Config{Identity: j}: each call's credential
// (placed in its context by latch.WithCredential, as a bare JWT or "Bearer <jwt>") is verified
// and mapped to the principal's agent and, optionally, user.
//
// Every token a verifier accepts is an agent's, unless its Config gives the mark of a person's
// token (a claim value, or an audience of people's own). A token carrying the mark is a
// person's — an approver, who answers approval requests and resolves effects — and never an
// agent's: Identify names the person, and Principal refuses the token.
//
// A RevocationFeed (Config.Revocations) refuses a token its issuer revoked before its exp — by
// jti, or a subject's tokens — read from a file, a polled URL or pushes, as a plain list or CAEP
// events; past its max staleness it refuses every token of the issuers it covers.
//
// Only asymmetric signatures are accepted (RS256, ES256, EdDSA), each only with a key of its
// own type and strength, so a token cannot pick the algorithm its key is checked with. A
// refusal is an *Error whose message names what failed and never quotes the credential.
package identity
