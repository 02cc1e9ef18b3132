// Package identity turns a request credential into a latch.Principal.
//
// latch consumes identity; it never issues credentials. A JWT verifier is built from a Config
// naming the one issuer and audience it accepts and where the issuer's public keys come from:
// PEM files pinned on disk, or a JWKS URL fetched lazily and cached. The verifier implements
// latch.IdentityProvider, so it plugs into latch.Config{Identity: j}: each call's credential
// (placed in its context by latch.WithCredential, as a bare JWT or "Bearer <jwt>") is verified
// and mapped to the principal's agent and, optionally, user.
//
// Only asymmetric signatures are accepted (RS256, ES256, EdDSA), each only with a key of its
// own type and strength, so a token cannot pick the algorithm its key is checked with. A
// refusal is an *Error whose message names what failed and never quotes the credential.
package identity
