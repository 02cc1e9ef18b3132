package server

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// The OpenAPI 3.1 document of the API, built from the route table so that it lists exactly
// the routes the server serves; a test holds every status code it lists to one the live
// handler answers.

type op struct {
	summary  string
	request  string // the component schema of the body, "" for none
	response string // the component schema of the 2xx answer
	statuses []int
	headers  []header // request headers the operation reads
	// lines: the body and the 200 answer are CallContentType, one JSON document a line; request
	// and response name an array schema whose items are the lines in order.
	lines bool
}

// header is a request header parameter of an operation.
type header struct {
	name, description string
	maxLength         int
	pattern           string
}

// idempotencyKeyParam is the Idempotency-Key header of POST /v1/actions.
var idempotencyKeyParam = header{IdempotencyKeyHeader,
	"The caller's key for this begin, sent again unchanged when it retries a begin whose answer it lost: the same principal, the same body and the same key are handed the same reservation (action id, attempt, tokens, lease) while its attempt holds the effect, instead of 409 in_progress. Another principal or another body under the key is 422 request_key_mismatch.",
	store.MaxRequestKey, `^[A-Za-z0-9._:~+/=-]+$`}

// ops describes each route of the table, by "METHOD PATTERN".
var ops = map[string]op{
	"GET /healthz":                    {"The process is up", "", "Status", []int{200}, nil, false},
	"GET /readyz":                     {"The store answers", "", "Status", []int{200, 503}, nil, false},
	"GET /v1/openapi.json":            {"This document", "", "", []int{200}, nil, false},
	"GET /metrics":                    {"Metrics in the Prometheus text format (no token)", "", "", []int{200}, nil, false},
	"POST /v1/actions":                {"Begin an action: normalize, decide, approve, reserve", "ActionRequest", "Action", []int{200, 202, 400, 401, 403, 409, 413, 415, 422, 429}, []header{idempotencyKeyParam}, false},
	"GET /v1/actions/{id}":            {"A begun action as it stands", "", "Action", []int{200, 401, 403, 404}, nil, false},
	"POST /v1/actions/{id}/outcome":   {"Record the outcome of a begun action, once", "OutcomeRequest", "Recorded", []int{200, 400, 401, 403, 404, 409, 429}, nil, false},
	"POST /v1/calls":                  {"Begin an action and report its outcome on one request: the action is the body's first line, the begun action the answer's first line, the outcome the body's second line, the recorded outcome (or the problem refusing it) the answer's second line", "CallLines", "CallAnswerLines", []int{200, 202, 400, 401, 403, 409, 413, 415, 422, 429}, []header{idempotencyKeyParam}, true},
	"POST /v1/actions/{id}/lease":     {"Extend the live lease of a begun action", "LeaseRequest", "Lease", []int{200, 400, 401, 403, 404, 409}, nil, false},
	"POST /v1/actions/{id}/suspend":   {"Suspend a begun action mid-execution, waiting for input; the token that resumes it is told once", "SuspendRequest", "Suspension", []int{200, 400, 401, 403, 404, 409}, nil, false},
	"POST /v1/actions/{id}/resume":    {"Resume a suspended action, once, with its exact token and the same arguments", "ResumeRequest", "Resumption", []int{200, 400, 401, 403, 404, 409, 422}, nil, false},
	"GET /v1/approvals":               {"Approval requests (approver)", "", "Approvals", []int{200, 400, 401, 403}, nil, false},
	"GET /v1/approvals/{id}":          {"One approval request", "", "Approval", []int{200, 401, 404}, nil, false},
	"POST /v1/approvals/{id}/approve": {"Grant an approval request (approver), optionally with edits", "AnswerRequest", "Approval", []int{200, 400, 401, 403, 404, 409, 422}, nil, false},
	"POST /v1/approvals/{id}/deny":    {"Deny an approval request (approver)", "AnswerRequest", "Approval", []int{200, 400, 401, 403, 404, 409}, nil, false},
	"GET /v1/standing":                {"Standing approvals by state: active, exhausted, expired, revoked or all (approver)", "", "StandingList", []int{200, 400, 401, 403}, nil, false},
	"GET /v1/standing/{id}":           {"One standing approval (approver, or the principal it admits)", "", "Standing", []int{200, 401, 404}, nil, false},
	"POST /v1/standing/{id}/revoke":   {"Revoke a standing approval (approver)", "RevokeStandingRequest", "Standing", []int{200, 400, 401, 403, 404, 409}, nil, false},
	"GET /v1/effects":                 {"Effect records by state (executing, committed, failed, ambiguous, needs_person or all), ordered by key, a page at a time: limit (1 to 1000, 100 by default) after the key after; next_after is where the next page starts, empty on the last (approver)", "", "Effects", []int{200, 400, 401, 403}, nil, false},
	"GET /v1/effects/{key}":           {"One effect record (approver)", "", "Effect", []int{200, 401, 403, 404}, nil, false},
	"POST /v1/effects/{key}/resolve":  {"Resolve an effect that needs a person (approver)", "ResolveRequest", "Effect", []int{200, 400, 401, 403, 404, 409}, nil, false},
	"POST /v1/hops":                   {"Hand part of a grant the calling agent holds to one receiving agent (a hop)", "HopRequest", "Delegation", []int{200, 400, 401, 403}, nil, false},
	"GET /v1/hops/{id}":               {"What ran under one hop: the hop, its records and each call decided under it (approver)", "", "HopTree", []int{200, 401, 403, 404}, nil, false},
	"POST /v1/break-glass":            {"Open a break-glass grant inside one of the policy's envelopes (a person)", "BreakGlassRequest", "Delegation", []int{200, 400, 401, 403, 404}, nil, false},
	"GET /v1/receipts":                {"Receipts in chain order (approver)", "", "Receipts", []int{200, 400, 401, 403}, nil, false},
	"GET /v1/events":                  {"Committed events as Server-Sent Events, resumable with Last-Event-ID (approver)", "", "", []int{200, 400, 401, 403}, nil, false},
	"GET /v1/stats":                   {"Receipts counted by action and result (approver)", "", "Stats", []int{200, 400, 401, 403}, nil, false},
	"GET /v1/coverage":                {"For each policy action and rule, the recorded calls it decided; the rules never fired, actions never called, effect templates that never produced a key (approver)", "", "Coverage", []int{200, 400, 401, 403}, nil, false},
	"GET /v1/receipts/verify":         {"Verify the receipt chain (approver)", "", "Report", []int{200, 401, 403}, nil, false},
	"GET /v1/budgets":                 {"The budgets in force: consumed, remaining, and each held charge with why (approver)", "", "Budgets", []int{200, 401, 403}, nil, false},
	"POST /v1/revocations":            {"Push revoked credentials to the JWT revocation feed (its own bearer secret, not a token)", "Revocations", "RevocationsAccepted", []int{200, 400, 401, 404, 413}, nil, false},
	"POST /v1/slack/interactions":     {"A click on a Slack approval message's Approve or Deny button, form-encoded and signed by Slack (its signing secret, not a token)", "", "", []int{200, 400, 401, 404, 413, 503}, nil, false},
}

var pathParam = regexp.MustCompile(`\{([a-z]+)\}`)

// openAPI builds the document from the route table.
func (s *Server) openAPI() []byte {
	paths := map[string]map[string]any{}
	for _, rt := range s.table() {
		o := ops[rt.method+" "+rt.pattern]
		operation := map[string]any{
			"summary":     o.summary,
			"operationId": operationID(rt.method, rt.pattern),
			"responses":   responses(o),
		}
		if rt.auth != open {
			operation["security"] = []any{map[string]any{"bearer": []any{}}}
		} else {
			operation["security"] = []any{}
		}
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(rt.pattern, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		for _, h := range o.headers {
			params = append(params, map[string]any{"name": h.name, "in": "header", "required": false, "description": h.description,
				"schema": map[string]any{"type": "string", "minLength": 1, "maxLength": h.maxLength, "pattern": h.pattern}})
		}
		if params != nil {
			operation["parameters"] = params
		}
		if o.request != "" {
			ct := "application/json"
			if o.lines {
				ct = CallContentType
			}
			operation["requestBody"] = map[string]any{"required": true, "content": map[string]any{
				ct: map[string]any{"schema": ref(o.request)}}}
		}
		if paths[rt.pattern] == nil {
			paths[rt.pattern] = map[string]any{}
		}
		paths[rt.pattern][strings.ToLower(rt.method)] = operation
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "latch serve", "version": "v1",
			"description": "The guard's pipeline over HTTP: begin an action, act, report the outcome. Errors are application/problem+json whose type is urn:latch:problem:REASON."},
		"paths": paths,
		"components": map[string]any{
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer",
				"description": "An API token from latch token create (agent or approver), or a JWT the server verifies (latch serve --jwt-*): its principal proposes, and on the approver routes it acts as the person its agent claim names"}},
			"schemas": schemas,
		},
	}
	b, _ := json.MarshalIndent(doc, "", "  ") // maps of strings, numbers and slices always encode
	return b
}

func operationID(method, pattern string) string {
	id := strings.ToLower(method)
	for _, part := range strings.Split(strings.Trim(pattern, "/"), "/") {
		part = strings.Trim(part, "{}")
		part = strings.NewReplacer(".", "_", "-", "_").Replace(part)
		id += "_" + part
	}
	return id
}

func responses(o op) map[string]any {
	out := map[string]any{}
	for _, st := range o.statuses {
		code := strconv.Itoa(st)
		switch {
		case st == 202:
			out[code] = jsonResponse("Approval required: a request is stored for a human", "ApprovalRequired")
		case st < 300 && o.response == "":
			out[code] = map[string]any{"description": http.StatusText(st)}
		case st < 300 && o.lines:
			out[code] = map[string]any{"description": "The begun action, then the recorded outcome, one a line",
				"content": map[string]any{CallContentType: map[string]any{"schema": ref(o.response)}}}
		case st < 300:
			out[code] = jsonResponse(http.StatusText(st), o.response)
		default:
			out[code] = map[string]any{"description": http.StatusText(st), "content": map[string]any{
				"application/problem+json": map[string]any{"schema": ref("Problem")}}}
		}
	}
	return out
}

func jsonResponse(desc, schema string) map[string]any {
	return map[string]any{"description": desc, "content": map[string]any{"application/json": map[string]any{"schema": ref(schema)}}}
}

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

// nullable is the object schema o, or null.
func nullable(o map[string]any) map[string]any {
	o["type"] = []string{"object", "null"}
	return o
}

func obj(required []string, props map[string]any) map[string]any {
	o := map[string]any{"type": "object", "properties": props}
	if required != nil {
		o["required"] = required
	}
	return o
}

var (
	str      = map[string]any{"type": "string"}
	nstr     = map[string]any{"type": []string{"string", "null"}}
	integer  = map[string]any{"type": "integer"}
	nint     = map[string]any{"type": []string{"integer", "null"}}
	anyJSON  = map[string]any{}
	stamp    = map[string]any{"type": []string{"string", "null"}, "format": "date-time"}
	principl = obj(nil, map[string]any{"agent": nstr, "user": nstr})
	// standingTerms are the bounds of a standing approval, as a grant states them and as a
	// listing shows them (docs/approvals.md#standing-approvals).
	standingTerms = map[string]any{"type": "object", "additionalProperties": false, "required": []string{"uses", "for"}, "properties": map[string]any{
		"uses": map[string]any{"type": "integer", "minimum": 1}, "for": map[string]any{"type": "string", "description": "a Go duration, like 1h30m"},
		"max":  map[string]any{"type": []string{"object", "null"}, "additionalProperties": integer},
		"vary": map[string]any{"type": []string{"array", "null"}, "items": str},
		"total": map[string]any{"oneOf": []any{map[string]any{"type": "null"}, map[string]any{"type": "object", "additionalProperties": false,
			"required": []string{"argument", "limit"}, "properties": map[string]any{"argument": str, "limit": integer}}}}}}
)

// refusalKinds is a problem's kind: one of latch.RefusalKinds, the classes every surface maps.
var refusalKinds = func() map[string]any {
	var kinds []string
	for _, k := range latch.RefusalKinds() {
		kinds = append(kinds, string(k))
	}
	return map[string]any{"type": "string", "enum": kinds}
}()

// wouldHave is what enforcement would have done with an observed call: the would_have member of
// its receipt (receipt.WouldHave), an empty member null.
var wouldHave = obj([]string{"decision", "reason", "effect"}, map[string]any{
	"decision": map[string]any{"enum": []string{"allow", "approve", "deny"}}, "reason": nstr, "effect": nstr})

// revocationSubject is a CAEP subject identifier: iss_sub or jwt_id.
var revocationSubject = obj([]string{"format", "iss"}, map[string]any{
	"format": map[string]any{"type": "string", "enum": []string{"iss_sub", "jwt_id"}}, "iss": str, "sub": str, "jti": str})

var schemas = map[string]any{
	"Problem": obj([]string{"type", "title", "status", "reason"}, map[string]any{
		"type": str, "title": str, "status": integer, "detail": str, "reason": str, "kind": refusalKinds, "rule": str,
		"field": str, "pointer": str, "argument": str, "action_id": str, "approval_id": str, "action_hash": str, "effect_key": str, "state": str, "attempt": integer, "result": anyJSON, "dimension": str,
		"budget": str, "metric": str, "window": str, "approved_arguments": map[string]any{"type": "object", "additionalProperties": anyJSON}}),
	"Status": obj([]string{"status"}, map[string]any{"status": str}),
	"ActionRequest": map[string]any{"type": "object", "additionalProperties": false, "required": []string{"action"}, "properties": map[string]any{
		"action": str, "arguments": map[string]any{"type": "object"}, "resource": str, "approval_id": str,
		"wait_seconds": map[string]any{"type": "integer", "minimum": 0},
		"task":         map[string]any{"type": "string", "description": "The task the call is part of (a job, a ticket, a workflow): matched against the tasks a grant names and recorded on the receipt, never part of the action hash. At most 512 bytes, no control or format characters."},
		"hop":          map[string]any{"type": "string", "description": "The id of a hop (a delegation handed to the calling agent by another) the call acts under: the call is then decided on the authority axis by that hop's chain alone, and refused 403 authority_hop when the hop is missing, not live or addressed to another agent."}}},
	"Action": obj([]string{"status", "action_id", "action", "action_hash"}, map[string]any{
		"status": map[string]any{"enum": []string{"reserved", "allowed", "recorded"}}, "action_id": str, "action": str, "action_hash": str,
		"arguments": map[string]any{"type": "object"}, "resource": nstr, "principal": principl, "effect_key": nstr, "attempt": nint,
		"idempotency_token": nstr, "effect_token": nstr, "lease_expires_at": stamp, "approval_id": nstr, "decision": str, "reason": str,
		"would_have": wouldHave, "receipt": map[string]any{"type": "object"}, "receipt_hash": str}),
	"ApprovalRequired": obj([]string{"status", "approval_id", "action_hash", "expires_at"}, map[string]any{
		"status": map[string]any{"const": "approval_required"}, "approval_id": str, "action_hash": str, "effect_key": nstr, "expires_at": stamp, "approval": ref("Approval")}),
	"OutcomeRequest": map[string]any{"type": "object", "additionalProperties": false, "required": []string{"outcome"}, "properties": map[string]any{
		"outcome": map[string]any{"enum": []string{"committed", "not_executed", "unknown"}}, "result": anyJSON, "error": str}},
	"Recorded": obj([]string{"status", "action_id", "result", "receipt", "receipt_hash"}, map[string]any{
		"status": map[string]any{"const": "recorded"}, "action_id": str,
		"result": map[string]any{"enum": []string{"committed", "failed", "ambiguous", "observed"}}, "error": nstr,
		"receipt": map[string]any{"type": "object"}, "receipt_hash": str}),
	// POST /v1/calls: the lines of the body and of its 200 answer, in order.
	"CallLines": map[string]any{"type": "array", "items": false, "minItems": 1, "prefixItems": []any{ref("ActionRequest"), ref("OutcomeRequest")},
		"description": "One JSON document a line: the action (as POST /v1/actions takes it), then, once the begun action's line has arrived and the effect ran, its outcome (as POST /v1/actions/{id}/outcome takes it), the last line: the body ends after it. Each line at most the server's largest body."},
	"CallAnswerLines": map[string]any{"type": "array", "items": false, "minItems": 1, "prefixItems": []any{ref("Action"),
		map[string]any{"oneOf": []any{ref("Recorded"), ref("Problem")}}},
		"description": "One JSON document a line: the begun action (as POST /v1/actions answers it), then the recorded outcome (as POST /v1/actions/{id}/outcome answers it) or the problem refusing the outcome, which then recorded nothing: the effect stays executing under its lease (outcome_missing, outcome_timeout, or the outcome route's own problems). A refused begin (a problem) and an approval required (202) are answered as POST /v1/actions answers them, and end the exchange."},
	"LeaseRequest": map[string]any{"type": "object", "additionalProperties": false, "required": []string{"seconds"}, "properties": map[string]any{
		"seconds": map[string]any{"type": "integer", "minimum": 1, "maximum": maxLeaseSeconds}}},
	// A revocation document: CAEP events as JSON (a plain text list is accepted too).
	"Revocations": obj([]string{"events"}, map[string]any{"events": map[string]any{"type": "array", "items": obj([]string{"events"}, map[string]any{
		"iss": str, "iat": integer, "jti": str,
		"sub_id": revocationSubject,
		// By event type URI: session-revoked, or credential-change with change_type revoke or delete.
		"events": map[string]any{"type": "object", "additionalProperties": obj(nil, map[string]any{
			"subject": revocationSubject, "event_timestamp": integer, "change_type": str, "credential_type": str})},
	})}}),
	"RevocationsAccepted": obj([]string{"accepted", "refreshed_at"}, map[string]any{"accepted": integer, "refreshed_at": stamp}),
	"Lease":               obj([]string{"action_id", "lease_expires_at"}, map[string]any{"action_id": str, "lease_expires_at": stamp}),
	"SuspendRequest": map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{
		"request": map[string]any{"description": "What the executor asks for (any JSON, at most 64 KiB), handed back on resume."}}},
	"Suspension": obj([]string{"action_id", "effect_key", "attempt", "round", "token", "request", "lease_expires_at"}, map[string]any{
		"action_id": str, "effect_key": str, "attempt": integer, "round": integer,
		"token":   map[string]any{"type": "string", "description": "Resumes this round, once. Only its SHA-256 is kept: it is told here and never again."},
		"request": anyJSON, "lease_expires_at": stamp}),
	"ResumeRequest": map[string]any{"type": "object", "additionalProperties": false, "required": []string{"token", "arguments"}, "properties": map[string]any{
		"token": str, "arguments": map[string]any{"type": "object", "description": "The action's arguments, again: canonically the ones it was suspended with."},
		"input": map[string]any{"type": "object", "additionalProperties": anyJSON, "description": "What the suspension asked for, by name (at most 1 MiB). The store records its keys and a SHA-256 digest, never its values."}}},
	"Resumption": obj([]string{"action_id", "round", "request", "lease_expires_at"}, map[string]any{
		"action_id": str, "round": integer, "request": anyJSON, "lease_expires_at": stamp}),
	"Approval": obj([]string{"approval_id", "status", "action", "action_hash"}, map[string]any{
		"approval_id": str, "status": map[string]any{"enum": []string{"pending", "granted", "denied", "expired", "consumed"}},
		"action": str, "action_hash": str, "arguments": anyJSON, "principal": principl, "resource": nstr,
		"created_at": stamp, "expires_at": stamp, "approver": nstr, "previous_denied": nstr, "previous_denied_by": nstr,
		"precondition": map[string]any{"oneOf": []any{map[string]any{"type": "null"},
			obj([]string{"hash", "captured_at"}, map[string]any{"hash": nstr, "captured_at": stamp})}},
		"required": integer, "grants": integer, "on_expiry": map[string]any{"enum": []string{"expire", "deny"}},
		"reminders": map[string]any{"oneOf": []any{map[string]any{"type": "null"},
			obj([]string{"remind_at", "reminded_at", "escalate_at", "escalated_at", "escalate_to"}, map[string]any{
				"remind_at": stamp, "reminded_at": stamp, "escalate_at": stamp, "escalated_at": stamp,
				"escalate_to": map[string]any{"oneOf": []any{map[string]any{"type": "null"},
					obj([]string{"roles", "people"}, map[string]any{"roles": map[string]any{"type": "array", "items": str}, "people": map[string]any{"type": "array", "items": str}})}}})}},
		"display": map[string]any{"type": "array", "items": obj([]string{"name", "raw"}, map[string]any{
			"name": str, "label": nstr, "raw": str, "human": nstr})},
		"answers": map[string]any{"type": "array", "items": obj([]string{"approver", "method", "verified", "grant"}, map[string]any{
			"approver": str, "method": map[string]any{"enum": store.Methods}, "verified": map[string]any{"type": "boolean"},
			"grant": map[string]any{"type": "boolean"}, "note": nstr, "answered_at": stamp})},
		"edit": map[string]any{"oneOf": []any{map[string]any{"type": "null"},
			obj([]string{"requested_action_hash", "requested_arguments", "edits"}, map[string]any{
				"requested_action_hash": str, "requested_arguments": map[string]any{"type": "object", "additionalProperties": anyJSON},
				"edits": map[string]any{"type": "array", "items": obj([]string{"approver", "method", "arguments"}, map[string]any{
					"approver": str, "method": map[string]any{"enum": store.Methods}, "at": stamp,
					"arguments": map[string]any{"type": "object", "additionalProperties": obj([]string{"from", "to"}, map[string]any{
						"from": anyJSON, "to": anyJSON})}})}})}}}),
	"AnswerRequest": map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{"note": str,
		"set":      map[string]any{"type": "object", "additionalProperties": anyJSON, "description": "Approve with edits: the arguments the approver changes and the values they take; only arguments the policy marks editable, only narrowed (docs/approvals.md#approve-with-edits)."},
		"standing": standingTerms}},
	"RevokeStandingRequest": map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{"note": str}},
	"Standing": obj([]string{"standing_id", "state", "from", "action", "action_hash", "terms", "uses"}, map[string]any{
		"standing_id": str, "state": map[string]any{"enum": []string{"active", "exhausted", "expired", "revoked"}}, "from": str,
		"action": str, "action_hash": str, "arguments": anyJSON, "principal": principl, "resource": nstr,
		"display": map[string]any{"type": "array", "items": obj([]string{"name", "raw"}, map[string]any{
			"name": str, "label": nstr, "raw": str, "human": nstr})},
		"terms": standingTerms, "uses": integer, "spent": nint,
		"granted_by": map[string]any{"type": "array", "items": str}, "created_at": stamp, "expires_at": stamp,
		"last_used_by": nstr, "last_used_at": stamp, "revoked_by": nstr, "revoked_at": stamp, "note": nstr}),
	"StandingList": obj([]string{"standing"}, map[string]any{"standing": map[string]any{"type": "array", "items": ref("Standing")}}),
	"Approvals":    obj([]string{"approvals"}, map[string]any{"approvals": map[string]any{"type": "array", "items": ref("Approval")}}),
	"Effect": obj([]string{"effect_key", "state", "attempt"}, map[string]any{
		"effect_key": str, "state": map[string]any{"enum": []string{"executing", "committed", "failed", "ambiguous"}}, "attempt": integer,
		"action": str, "action_id": str, "action_hash": str, "lease_expires_at": stamp, "lease_lapsed": map[string]any{"type": "boolean"},
		"result": anyJSON, "error": nstr, "conflict": nstr, "resolved_by": nstr, "note": nstr, "created_at": stamp, "updated_at": stamp}),
	"Effects": obj([]string{"effects", "next_after"}, map[string]any{
		"effects":    map[string]any{"type": "array", "items": ref("Effect")},
		"next_after": str}),
	"BreakGlassRequest": map[string]any{"type": "object", "additionalProperties": false, "required": []string{"envelope", "reason"}, "properties": map[string]any{
		"envelope": str, "reason": str, "grant": str,
		"ttl_seconds": map[string]any{"type": "integer", "minimum": 0, "maximum": int64(policy.MaxBreakGlassTTL / time.Second)},
		"for": map[string]any{"type": "object", "additionalProperties": false, "required": []string{"agent"}, "properties": map[string]any{
			"agent": str, "user": str}}}},
	"HopRequest": map[string]any{"type": "object", "additionalProperties": false, "required": []string{"parent", "to", "grant"}, "properties": map[string]any{
		"parent": str, "grant": str,
		"to": map[string]any{"type": "object", "additionalProperties": false, "required": []string{"agent"}, "properties": map[string]any{
			"agent": str, "user": str}}}},
	// A delegation as latch delegations --json prints it; a break-glass grant has via break-glass.
	"Delegation": obj([]string{"delegation_id", "parent", "subject", "actions", "expires_at", "created_by", "via", "reason"}, map[string]any{
		"delegation_id": str, "parent": str, "subject": principl, "actions": map[string]any{"type": "array", "items": str},
		"resources":    map[string]any{"type": []string{"array", "null"}, "items": str},
		"constraints":  map[string]any{"type": []string{"object", "null"}, "additionalProperties": anyJSON},
		"environments": map[string]any{"type": []string{"array", "null"}, "items": str},
		"tasks":        map[string]any{"type": []string{"array", "null"}, "items": str},
		"budgets": map[string]any{"type": []string{"array", "null"}, "items": obj([]string{"metric", "limit", "window"}, map[string]any{
			"metric": str, "limit": integer, "window": str})},
		"expires_at": stamp, "delegable": map[string]any{"type": "boolean"}, "created_by": str, "created_at": stamp,
		"revoked": map[string]any{"type": "boolean"}, "revoked_at": stamp, "revoked_by": nstr, "cut_by": nstr, "grant": str,
		"via": nstr, "reason": nstr}),
	// What ran under one hop, as latch inspect --hop --json prints it.
	"HopTree": obj([]string{"hop", "delegation", "state", "records", "calls", "receipts"}, map[string]any{
		"hop": str, "delegation": map[string]any{"oneOf": []any{map[string]any{"type": "null"}, ref("Delegation")}},
		"state":   map[string]any{"enum": []string{"live", "revoked", "expired", ""}},
		"records": map[string]any{"type": "array", "items": ref("Receipt")},
		"calls": map[string]any{"type": "array", "items": obj([]string{"action_id", "action", "principal", "result", "reason", "effect_key", "effect", "receipts"}, map[string]any{
			"action_id": str, "action": str, "principal": principl, "result": str, "reason": nstr, "effect_key": nstr,
			"effect":   map[string]any{"oneOf": []any{map[string]any{"type": "null"}, ref("Effect")}},
			"receipts": map[string]any{"type": "array", "items": ref("Receipt")}})},
		"receipts": map[string]any{"type": "array", "items": ref("Receipt")}}),
	"ResolveRequest": map[string]any{"type": "object", "additionalProperties": false, "required": []string{"to"}, "properties": map[string]any{
		"to": map[string]any{"enum": []string{"committed", "failed"}}, "result": anyJSON, "note": str}},
	"Receipts": obj([]string{"receipts", "next_after"}, map[string]any{
		"receipts":   map[string]any{"type": "array", "items": ref("Receipt")},
		"next_after": integer}),
	// A receipt as every surface lists it: the document exactly as stored; a row that does
	// not read as a receipt says so in unreadable.
	"Receipt": obj([]string{"seq", "hash", "receipt", "unreadable"}, map[string]any{
		"seq": integer, "hash": str, "receipt": map[string]any{"type": []string{"object", "null"}}, "unreadable": nstr}),
	"Stats": obj([]string{"since", "until", "receipts", "counts", "observed", "would_have_blocked"}, map[string]any{
		"since": stamp, "until": stamp, "receipts": integer, "observed": integer,
		"counts": map[string]any{"type": "array", "items": obj([]string{"action", "result", "count"}, map[string]any{
			"action": str, "result": str, "count": integer})},
		"would_have_blocked": map[string]any{"type": "array", "items": obj([]string{"action", "would_have", "reason", "count"}, map[string]any{
			"action": str, "would_have": str, "reason": str, "count": integer})}}),
	// How much of the policy the recorded calls exercised (docs/coverage.md).
	"Coverage": obj([]string{"policy_hash", "policy_version", "since", "until", "calls", "other_policies", "actions", "never_fired",
		"never_called", "templates_without_key", "unlisted"}, map[string]any{
		"policy_hash": str, "policy_version": nstr, "since": stamp, "until": stamp, "calls": integer, "other_policies": integer,
		"actions":               map[string]any{"type": "array", "items": ref("CoverageAction")},
		"never_fired":           map[string]any{"type": "array", "items": ref("CoverageRule")},
		"never_called":          map[string]any{"type": "array", "items": str},
		"templates_without_key": map[string]any{"type": "array", "items": str},
		"unlisted":              map[string]any{"type": "array", "items": ref("CoverageCount")}}),
	"CoverageAction": obj([]string{"action", "calls", "rules", "no_matching_rule", "other_reasons", "effect", "effect_keys"}, map[string]any{
		"action": str, "calls": integer, "rules": map[string]any{"type": "array", "items": ref("CoverageRule")},
		"no_matching_rule": integer, "other_reasons": map[string]any{"type": "array", "items": ref("CoverageCount")},
		"effect": nstr, "effect_keys": integer}),
	"CoverageRule": obj([]string{"action", "rule", "line", "decision", "calls"}, map[string]any{
		"action": str, "rule": str, "line": integer, "decision": map[string]any{"enum": []string{"allow", "approve", "deny"}}, "calls": integer}),
	"CoverageCount": obj([]string{"name", "count"}, map[string]any{"name": str, "count": integer}),
	// A budget in force and what it holds (docs/budgets.md); remaining is for operators only.
	"Budget": obj([]string{"budget", "kind", "grant", "action", "per", "who", "metric", "limit", "window", "window_seconds",
		"consumed", "remaining", "ratio", "held"}, map[string]any{
		"budget": str, "kind": map[string]any{"enum": []string{"grant", "delegation", "envelope", "action"}}, "grant": nstr, "action": nstr,
		"per": map[string]any{"enum": []any{"agent", "user", "principal", nil}}, "who": nstr, "metric": str,
		"limit": integer, "window": str, "window_seconds": integer, "consumed": integer, "remaining": integer,
		"ratio": map[string]any{"type": "number", "minimum": 0},
		"held": map[string]any{"type": "array", "items": obj([]string{"effect_key", "attempt", "action_id", "amount", "consumed_at",
			"state", "needs_person", "why"}, map[string]any{
			"effect_key": str, "attempt": integer, "action_id": nstr, "amount": integer, "consumed_at": stamp,
			"state":        map[string]any{"enum": []any{"executing", "committed", "failed", "ambiguous", nil}},
			"needs_person": map[string]any{"type": "boolean"}, "why": str})}}),
	"Budgets": obj([]string{"budgets"}, map[string]any{"budgets": map[string]any{"type": "array", "items": ref("Budget")}}),
	"Report": obj([]string{"ok", "verified", "breaks", "state", "start", "checkpoints"}, map[string]any{
		"ok": map[string]any{"type": "boolean"}, "verified": integer,
		"breaks": map[string]any{"type": "array", "items": obj([]string{"kind", "seq", "detail", "subject", "chain", "table"}, map[string]any{
			"kind": str, "seq": integer, "detail": str, "subject": nstr, "chain": nstr, "table": nstr})},
		"state": nullable(obj([]string{"effects", "approvals", "delegations", "unchained"}, map[string]any{
			"effects": integer, "approvals": integer, "delegations": integer, "unchained": integer})),
		// A pruned chain: where it starts and why (docs/retention.md).
		"start": nullable(obj([]string{"seq", "hash", "reason"}, map[string]any{"seq": integer, "hash": str, "reason": str})),
		// The signed checkpoints, checked with the server's --checkpoint-pubkey; null without it.
		"checkpoints": nullable(obj([]string{"held", "below"}, map[string]any{"held": integer, "below": integer}))}),
}

// openAPIDoc is GET /v1/openapi.json.
func (s *Server) openAPIDoc(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(s.doc)
}
