package identity

import "github.com/latchkit/latch"

// Error is a credential that does not establish a principal. Reason is a stable snake_case code
// for logs and process boundaries:
//
//	no_credential     the context carries no credential
//	malformed         not a well-formed JWS compact token
//	algorithm         the token's alg is not one this verifier accepts
//	unknown_key       the token names a key id no configured key has
//	no_key            no configured key fits the token's algorithm (or its named key does not)
//	signature         the signature does not verify
//	issuer            iss is missing or not the configured issuer
//	audience          aud is missing or does not contain the configured audience
//	no_expiry         exp is missing (or not a number)
//	expired           exp, plus the leeway, has passed
//	not_yet_valid     nbf, minus the leeway, is still to come
//	issued_in_future  iat, minus the leeway, is still to come
//	agent_claim       the agent claim is missing or not a non-empty string
//	user_claim        the user claim is present but not a string
//	approver_token    a person's token (it carries an approver mark) where an agent's is needed
//	approver_claim    a person's token whose name claim is missing or not a non-empty string
//	role              the token's audience marks it both an agent's and a person's
//	keys_unavailable  the JWKS could not be fetched or read
//	credential_revoked     the revocation feed reports the token revoked (Err: a *latch.IdentityError)
//	revocation_feed_stale  the revocation feed covering the issuer is older than its max staleness (likewise)
//
// Msg never quotes the credential; it may quote claim values, but only from a token whose
// signature verified.
type Error struct {
	Reason string
	Msg    string
	Err    error // the underlying cause (for keys_unavailable), or nil
}

func (e *Error) Error() string {
	switch e.Err.(type) {
	case nil, *latch.ExpiredCredentialError, *latch.IdentityError: // they say what Msg says
		return e.Msg
	}
	return e.Msg + ": " + e.Err.Error()
}

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.Err }

func refuse(reason, msg string) *Error { return &Error{Reason: reason, Msg: msg} }
