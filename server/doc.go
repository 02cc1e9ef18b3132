// Package server is the HTTP API behind `latch serve`: the guard's pipeline as a network service,
// so that programs in any language, and services without database credentials, propose actions,
// report outcomes and answer approvals through the same code a Go program calls in process.
//
// A remote executor begins an action (POST /v1/actions: normalize, decide, approve, reserve),
// acts, and reports what happened (POST /v1/actions/{id}/outcome). The handlers call
// latch.Guard.Begin and latch.Guard.Finish — the two halves of latch.Guard.Execute — so the
// decisions, refusals, receipts and write counts are those of an in-process call.
//
// Callers authenticate with a bearer token: an API token created by `latch token create`
// (only its SHA-256 is stored) or, when Config.Identity is set, a credential it verifies (a JWT
// from the identity package). The token's principal is the call's principal. Each credential is
// an agent's, which proposes, or a person's, which answers and resolves — never both: a JWT is a
// person's only when the identity provider names one for it (auth.PeopleProvider). Errors are
// application/problem+json documents (RFC 9457) whose type names the reason. Every route, with
// examples, is in docs/http.md; the OpenAPI document is served at /v1/openapi.json.
//
// With Config.Slack, people also answer from Slack: POST /v1/slack/interactions takes the
// clicks on the Approve and Deny buttons of the approval messages package notify posts,
// verifies Slack's signature, maps the Slack user to an approver explicitly, and answers through
// latch.Guard.Answer as every other surface does (docs/approvals.md#slack).
package server
