package policy

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const header = "schema: latch.policy/v1\n"

// withAction is a document whose line 4 is the first line inside action "a" (at column 5).
func withAction(body string) string {
	return header + "actions:\n  a:\n" + body
}

// withGrant is a document whose line 5 is the first line inside the grant (at column 7).
func withGrant(body string) string {
	return header + "actions: {}\nauthority:\n  grants:\n    - " + strings.TrimPrefix(body, "      ")
}

func TestParseRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		src       string
		line, col int
		msg       string // a substring of Msg
	}{
		// Text and YAML.
		{"yaml syntax", header + "actions:\n  a: [\n", 3, 0, "invalid YAML"},
		{"yaml bad indentation", header + "actions:\n  a:\n    decision: allow\n   effect: x\n", 2, 0, "invalid YAML"},
		{"invalid utf8", header + "version: \"a\xffb\"\n", 2, 12, "invalid UTF-8"},
		{"control character", header + "version: \"a\x01b\"\n", 2, 12, "control character U+0001"},
		{"empty document", "", 1, 1, "empty policy"},
		{"only comments", "# nothing here\n", 1, 1, "empty policy"},
		{"second document", header + "actions: {}\n---\nschema: latch.policy/v1\n", 3, 1, "second YAML document"},
		{"root is a list", "- schema\n", 1, 1, "expected a mapping starting with schema"},
		{"root is a string", "hello\n", 1, 1, "the policy is string \"hello\""},

		// Schema and top level.
		{"missing schema", "mode: enforce\nactions: {}\n", 1, 1, "missing schema (expected schema: latch.policy/v1)"},
		{"unknown schema", "schema: latch.policy/v2\n", 1, 9, "unknown schema \"latch.policy/v2\" (expected latch.policy/v1)"},
		{"schema not a string", "schema: 1\n", 1, 9, "schema is integer 1 (expected a string)"},
		{"schema null", "schema:\n", 1, 1, "schema is null (expected a string)"},
		{"unknown top-level key", header + "actoins: {}\n", 2, 1, `unknown key "actoins" at the top level (expected one of schema, mode, environment, version, actions, authority, gateway, approvers, retention, scopes)`},
		{"duplicate top-level key", header + "mode: enforce\nmode: observe\n", 3, 1, `duplicate key "mode" (first at line 2, column 1`},
		{"duplicate quoted and plain key", header + "\"mode\": enforce\nmode: observe\n", 3, 1, `duplicate key "mode"`},
		{"bad mode", header + "mode: permissive\n", 2, 7, `bad mode "permissive" (expected enforce or observe)`},
		{"mode capitalised", header + "mode: Enforce\n", 2, 7, `bad mode "Enforce"`},
		{"empty environment", header + "environment: \"\"\n", 2, 14, "empty environment"},
		{"version not a string", header + "version: 3\n", 2, 10, "version is integer 3 (expected a string)"},
		{"actions is a list", header + "actions: [a]\n", 2, 10, "actions is a list (expected a mapping from action names"},

		// Action names and entries.
		{"bad action name", header + "actions:\n  billing charge:\n    decision: allow\n", 3, 3, `bad action name "billing charge"`},
		{"action name empty segment", header + "actions:\n  billing..charge:\n    decision: allow\n", 3, 3, `bad action name "billing..charge"`},
		{"action name trailing dot", header + "actions:\n  billing.:\n    decision: allow\n", 3, 3, `bad action name "billing."`},
		{"action name empty", header + "actions:\n  \"\":\n    decision: allow\n", 3, 3, `bad action name ""`},
		{"action null", header + "actions:\n  a:\n", 3, 3, `action "a" is null (expected a mapping with decision or rules)`},
		{"action scalar", header + "actions:\n  a: allow\n", 3, 6, `action "a" is string "allow"`},
		{"unknown action key", withAction("    decision: allow\n    efect: \"x\"\n"), 5, 5,
			`unknown key "efect" in action "a" (expected one of effect, resource, arguments, lease, approval_ttl, max_attempts, rules, decision, approvers, budgets, precondition)`},
		{"both decision and rules", withAction("    decision: allow\n    rules:\n      - decision: deny\n"), 5, 5, `both decision and rules in action "a" (expected exactly one)`},
		{"both, rules first", withAction("    rules:\n      - decision: deny\n    decision: allow\n"), 6, 5, `both decision and rules in action "a"`},
		{"neither decision nor rules", withAction("    effect: \"x\"\n"), 3, 3, `action "a" has neither decision nor rules (expected exactly one)`},
		{"empty rules", withAction("    rules: []\n"), 4, 12, `empty rules in action "a"`},
		{"null rules", withAction("    rules:\n"), 4, 5, `empty rules in action "a"`},
		{"rules a mapping", withAction("    rules: {decision: allow}\n"), 4, 12, `rules in action "a" is a mapping (expected a list of rules)`},
		{"rule not a mapping", withAction("    rules:\n      - allow\n"), 5, 9, `rule 0 of action "a" is string "allow"`},
		{"unknown rule key", withAction("    rules:\n      - decision: allow\n        whenn: {x_eq: 1}\n"), 6, 9,
			`unknown key "whenn" in rule 0 of action "a" (expected one of when, decision)`},
		{"rule missing decision", withAction("    rules:\n      - decision: allow\n      - when: {x_eq: 1}\n"), 6, 9, `missing decision in rule 1 of action "a"`},
		{"empty when", withAction("    rules:\n      - when: {}\n        decision: allow\n"), 5, 15, `empty when in rule 0 of action "a"`},
		{"null when", withAction("    rules:\n      - when:\n        decision: allow\n"), 5, 9, `when in rule 0 of action "a" is null (expected a mapping`},
		{"when a list", withAction("    rules:\n      - when: [x_eq]\n        decision: allow\n"), 5, 15, `when in rule 0 of action "a" is a list`},

		// Decisions.
		{"bad decision", withAction("    decision: permit\n"), 4, 15, `bad decision "permit" in action "a" (expected allow, approve or deny)`},
		{"decision capitalised", withAction("    decision: Allow\n"), 4, 15, `bad decision "Allow"`},
		{"decision not a string", withAction("    decision: true\n"), 4, 15, `decision in action "a" is boolean true (expected a string)`},
		{"bad rule decision", withAction("    rules:\n      - decision: yes\n"), 5, 19, `bad decision "yes" in rule 0 of action "a"`},

		// Numbers.
		{"float operand", withAction("    rules:\n      - when: {amount_lte: 1.5}\n        decision: allow\n"), 5, 28, "float 1.5 (floats are not allowed"},
		{"float exponent", withAction("    rules:\n      - when: {amount_lte: 1e3}\n        decision: allow\n"), 5, 28, "float 1e3"},
		{"float inf", withAction("    rules:\n      - when: {amount_lte: .inf}\n        decision: allow\n"), 5, 28, "float .inf"},
		{"float nan", withAction("    rules:\n      - when: {amount_eq: .nan}\n        decision: allow\n"), 5, 27, "float .nan"},
		{"float in a list", withAction("    rules:\n      - when: {amount_in: [1, 2.0]}\n        decision: allow\n"), 5, 31, "float 2.0"},
		{"float in a nested object", withAction("    rules:\n      - when: {meta_eq: {a: [0.5]}}\n        decision: allow\n"), 5, 30, "float 0.5"},
		{"float max_attempts", withAction("    decision: allow\n    max_attempts: 2.5\n"), 5, 19, "float 2.5"},
		{"float version", header + "version: 1.0\n", 2, 10, "float 1.0"},
		{"float anywhere, even an unknown key", header + "x: 1.5\n", 2, 4, "float 1.5"},
		{"hex integer", withAction("    decision: allow\n    max_attempts: 0x10\n"), 5, 19, "integer 0x10 is not in plain decimal"},
		{"octal integer", withAction("    decision: allow\n    max_attempts: 0o7\n"), 5, 19, "integer 0o7 is not in plain decimal"},
		{"binary integer", withAction("    decision: allow\n    max_attempts: 0b11\n"), 5, 19, "integer 0b11 is not in plain decimal"},
		{"leading zero integer", withAction("    decision: allow\n    max_attempts: 010\n"), 5, 19, "integer 010 is not in plain decimal"},
		{"underscore integer", withAction("    decision: allow\n    max_attempts: 1_000\n"), 5, 19, "integer 1_000 is not in plain decimal"},
		{"plus sign integer", withAction("    decision: allow\n    max_attempts: +5\n"), 5, 19, "integer +5 is not in plain decimal"},
		{"integer above 2^53-1", withAction("    rules:\n      - when: {amount_lte: 9007199254740992}\n        decision: allow\n"), 5, 28, "integer 9007199254740992 is outside ±(2^53-1)"},
		{"integer below -(2^53-1)", withAction("    rules:\n      - when: {amount_gte: -9007199254740992}\n        decision: allow\n"), 5, 28, "is outside ±(2^53-1)"},
		{"integer beyond uint64", withAction("    rules:\n      - when: {amount_lte: 99999999999999999999}\n        decision: allow\n"), 5, 28, "integer 99999999999999999999 is outside"},

		// Conditions.
		{"unknown operator", withAction("    rules:\n      - when: {amount_foo: 1}\n        decision: allow\n"), 5, 16,
			`unknown operator in condition "amount_foo" in rule 0 of action "a" (expected <argument>_<op> with op one of eq, neq, in, not_in, lt, lte, gt, gte, prefix, suffix)`},
		{"no operator", withAction("    rules:\n      - when: {amount: 1}\n        decision: allow\n"), 5, 16, `unknown operator in condition "amount"`},
		{"operator without underscore", withAction("    rules:\n      - when: {amounteq: 1}\n        decision: allow\n"), 5, 16, `unknown operator in condition "amounteq"`},
		{"empty argument name", withAction("    rules:\n      - when: {_eq: 1}\n        decision: allow\n"), 5, 16, `empty argument name in condition "_eq"`},
		{"operator alone", withAction("    rules:\n      - when: {eq: 1}\n        decision: allow\n"), 5, 16, `unknown operator in condition "eq"`},
		{"reserved agent", withAction("    rules:\n      - when: {agent_eq: bot}\n        decision: allow\n"), 5, 16, `condition "agent_eq" tests reserved subject "agent"`},
		{"reserved user", withAction("    rules:\n      - when: {user_in: [a]}\n        decision: allow\n"), 5, 16, `reserved subject "user"`},
		{"reserved principal", withAction("    rules:\n      - when: {principal_eq: a}\n        decision: allow\n"), 5, 16, `reserved subject "principal"`},
		{"reserved principal field", withAction("    rules:\n      - when: {principal.agent_eq: a}\n        decision: allow\n"), 5, 16, `reserved subject "principal"`},
		{"reserved claims", withAction("    rules:\n      - when: {claims_eq: {}}\n        decision: allow\n"), 5, 16, `reserved subject "claims"`},
		{"reserved issuer", withAction("    rules:\n      - when: {issuer_suffix: x}\n        decision: allow\n"), 5, 16, `reserved subject "issuer"`},
		{"reserved resource", withAction("    rules:\n      - when: {resource_prefix: \"invoice:\"}\n        decision: allow\n"), 5, 16, `reserved subject "resource"`},
		{"reserved environment", withAction("    rules:\n      - when: {environment_eq: production}\n        decision: allow\n"), 5, 16, `reserved subject "environment"`},
		{"reserved action_id", withAction("    rules:\n      - when: {action_id_neq: x}\n        decision: allow\n"), 5, 16, `reserved subject "action_id"`},
		{"lt with a string", withAction("    rules:\n      - when: {amount_lt: \"5\"}\n        decision: allow\n"), 5, 27, `operand of "amount_lt" is a string "5" in rule 0 of action "a" (expected an integer)`},
		{"gte with a bool", withAction("    rules:\n      - when: {amount_gte: true}\n        decision: allow\n"), 5, 28, `operand of "amount_gte" is a boolean true in rule 0 of action "a" (expected an integer)`},
		{"gt with null", withAction("    rules:\n      - when: {amount_gt: null}\n        decision: allow\n"), 5, 27, `operand of "amount_gt" is null`},
		{"in with a scalar", withAction("    rules:\n      - when: {currency_in: EUR}\n        decision: allow\n"), 5, 29, `operand of "currency_in" is a string "EUR" in rule 0 of action "a" (expected a non-empty list)`},
		{"not_in with a mapping", withAction("    rules:\n      - when: {currency_not_in: {a: 1}}\n        decision: allow\n"), 5, 33, `operand of "currency_not_in" is an object`},
		{"in with an empty list", withAction("    rules:\n      - when: {currency_in: []}\n        decision: allow\n"), 5, 29, "(expected a non-empty list)"},
		{"prefix with an integer", withAction("    rules:\n      - when: {ref_prefix: 5}\n        decision: allow\n"), 5, 28, `operand of "ref_prefix" is an integer 5 in rule 0 of action "a" (expected a string)`},
		{"suffix with a list", withAction("    rules:\n      - when: {ref_suffix: [a]}\n        decision: allow\n"), 5, 28, `operand of "ref_suffix" is a list`},
		{"neq null", withAction("    rules:\n      - when: {ref_neq: null}\n        decision: allow\n"), 5, 25, "neq null can never hold"},
		{"implicit null operand for lt", withAction("    rules:\n      - when:\n          amount_lt:\n        decision: allow\n"), 6, 11, `operand of "amount_lt" is null`},

		// Templates.
		{"template unclosed", withAction("    decision: allow\n    effect: \"charge:{id\"\n"), 5, 13, `bad effect template in action "a" "charge:{id": unclosed { at offset 7`},
		{"template unmatched close", withAction("    decision: allow\n    effect: \"charge:id}\"\n"), 5, 13, "unmatched } at offset 9"},
		{"template empty placeholder", withAction("    decision: allow\n    effect: \"charge:{}\"\n"), 5, 13, "empty placeholder {} at offset 7"},
		{"template bad name", withAction("    decision: allow\n    effect: \"charge:{invoice-id}\"\n"), 5, 13, "bad placeholder {invoice-id} at offset 7"},
		{"template name starting with a digit", withAction("    decision: allow\n    effect: \"charge:{1id}\"\n"), 5, 13, "bad placeholder {1id}"},
		{"template nested braces", withAction("    decision: allow\n    effect: \"charge:{a{b}}\"\n"), 5, 13, "bad placeholder {a{b}"},
		{"template empty", withAction("    decision: allow\n    effect: \"\"\n"), 5, 13, "empty template"},
		{"template not a string", withAction("    decision: allow\n    effect: 5\n"), 5, 13, `effect template in action "a" is integer 5 (expected a string)`},
		{"resource template unclosed", withAction("    decision: allow\n    resource: \"invoice:{id\"\n"), 5, 15, `bad resource template in action "a"`},
		{"resource template uses resource", withAction("    decision: allow\n    resource: \"x:{resource}\"\n"), 5, 15, "uses {resource}"},

		// Durations and counts.
		{"lease bare number", withAction("    decision: allow\n    lease: 5\n"), 5, 12, `lease in action "a" is a bare number 5 (expected a duration with a unit`},
		{"lease unparsable", withAction("    decision: allow\n    lease: 5x\n"), 5, 12, `bad duration "5x" for lease in action "a"`},
		{"lease zero", withAction("    decision: allow\n    lease: 0s\n"), 5, 12, `lease in action "a" is "0s" (expected a positive duration)`},
		{"lease negative", withAction("    decision: allow\n    lease: -5m\n"), 5, 12, "expected a positive duration"},
		{"lease a list", withAction("    decision: allow\n    lease: [5m]\n"), 5, 12, "lease in action \"a\" is a list (expected a string)"},
		{"approval_ttl unparsable", withAction("    decision: allow\n    approval_ttl: 15 minutes\n"), 5, 19, `bad duration "15 minutes" for approval_ttl`},
		{"approval_ttl null", withAction("    decision: allow\n    approval_ttl:\n"), 5, 5, "approval_ttl in action \"a\" is null"},
		{"max_attempts zero", withAction("    decision: allow\n    max_attempts: 0\n"), 5, 19, `max_attempts in action "a" is 0 (expected at least 1`},
		{"max_attempts negative", withAction("    decision: allow\n    max_attempts: -1\n"), 5, 19, "expected at least 1"},
		{"max_attempts a string", withAction("    decision: allow\n    max_attempts: \"3\"\n"), 5, 19, `max_attempts in action "a" is string "3" (expected an integer)`},

		// Constructs that hide what is evaluated.
		{"anchor", header + "actions:\n  a: &base\n    decision: allow\n", 3, 6, "anchor &base (anchors are not allowed"},
		{"alias", header + "x: &v allow\nactions:\n  a:\n    decision: *v\n", 2, 4, "anchor &v"},
		{"merge key", header + "actions:\n  a:\n    <<: {decision: allow}\n", 4, 5, "merge key << (merge keys are not allowed"},
		{"integer key", header + "actions:\n  5:\n    decision: allow\n", 3, 3, "integer 5 as a mapping key (keys must be strings; quote it)"},
		{"boolean key", header + "true: 1\n", 2, 1, "boolean true as a mapping key"},
		{"null key", header + "~: 1\n", 2, 1, "null as a mapping key"},
		{"mapping key", header + "? {a: 1}\n: 1\n", 2, 3, "a mapping as a mapping key"},
		{"binary tag", header + "version: !!binary aGVsbG8=\n", 2, 10, "explicit tag !!binary (tags are not allowed"},
		{"str tag", header + "version: !!str 5\n", 2, 10, "explicit tag !!str"},
		{"custom tag", header + "version: !x 5\n", 2, 10, "explicit tag !x"},
		{"nesting too deep", withAction("    rules:\n      - when: {x_eq: " + strings.Repeat("[", 70) + strings.Repeat("]", 70) + "}\n        decision: allow\n"), 5, 80, "nesting deeper than 64 levels"},
		{"duplicate action", header + "actions:\n  a:\n    decision: allow\n  a:\n    decision: deny\n", 5, 3, `duplicate key "a" (first at line 3, column 3`},
		{"duplicate condition key", withAction("    rules:\n      - when: {x_eq: 1, x_eq: 2}\n        decision: allow\n"), 5, 25, `duplicate key "x_eq"`},
		{"duplicate key in an operand object", withAction("    rules:\n      - when: {x_eq: {k: 1, k: 2}}\n        decision: allow\n"), 5, 29, `duplicate key "k"`},
		{"duplicate rule key", withAction("    rules:\n      - decision: allow\n        decision: deny\n"), 6, 9, `duplicate key "decision"`},

		// Authority.
		{"authority a list", header + "authority: []\n", 2, 12, "authority is a list (expected a mapping with grants)"},
		{"authority unknown key", header + "authority:\n  grant: []\n", 3, 3, `unknown key "grant" in the authority section (expected one of max_delegation_depth, grants, break_glass)`},
		{"authority without grants", header + "authority:\n  max_delegation_depth: 2\n", 3, 3, "missing grants in the authority section"},
		{"max_delegation_depth negative", header + "authority:\n  max_delegation_depth: -1\n  grants: []\n", 3, 25, "max_delegation_depth is -1 (expected 0 or more)"},
		{"max_delegation_depth a string", header + "authority:\n  max_delegation_depth: three\n  grants: []\n", 3, 25, "max_delegation_depth is string \"three\" (expected an integer)"},
		{"grants a mapping", header + "authority:\n  grants: {id: g}\n", 3, 11, "grants is a mapping (expected a list of grants)"},
		{"grant not a mapping", header + "authority:\n  grants:\n    - g1\n", 4, 7, "grant 0 is string \"g1\""},
		{"grant missing id", withGrant("      subject: {agent: a}\n      actions: [x]\n"), 5, 7, "missing id in grant 0"},
		{"grant bad id", withGrant("      id: -g\n      subject: {agent: a}\n      actions: [x]\n"), 5, 11, `bad grant id "-g"`},
		{"grant id with a space", withGrant("      id: \"g 1\"\n      subject: {agent: a}\n      actions: [x]\n"), 5, 11, `bad grant id "g 1"`},
		{"grant id an integer", withGrant("      id: 7\n      subject: {agent: a}\n      actions: [x]\n"), 5, 11, "id in grant 0 is integer 7 (expected a string)"},
		{"duplicate grant id", withGrant("      id: g1\n      subject: {agent: a}\n      actions: [x]\n    - id: g1\n      subject: {agent: b}\n      actions: [x]\n"), 8, 11, `duplicate grant id "g1" (first at line 5, column 11)`},
		{"grant unknown key", withGrant("      id: g1\n      subject: {agent: a}\n      actions: [x]\n      action: [y]\n"), 8, 7,
			`unknown key "action" in grant "g1" (expected one of id, subject, actions, resources, constraints, environments, expires_at, delegable, tasks, budgets)`},
		{"grant missing subject", withGrant("      id: g1\n      actions: [x]\n"), 5, 7, `missing subject in grant "g1"`},
		{"grant empty subject", withGrant("      id: g1\n      subject: {}\n      actions: [x]\n"), 6, 16, `empty subject in grant "g1" (expected agent, user or both)`},
		{"grant subject unknown key", withGrant("      id: g1\n      subject: {agnet: a}\n      actions: [x]\n"), 6, 17, `unknown key "agnet" in the subject in grant "g1" (expected one of agent, user)`},
		{"grant subject bad pattern", withGrant("      id: g1\n      subject: {agent: \"svc::x\"}\n      actions: [x]\n"), 6, 24, `bad agent pattern "svc::x" in grant "g1": empty segment 1`},
		{"grant subject infix star", withGrant("      id: g1\n      subject: {user: \"a*b\"}\n      actions: [x]\n"), 6, 23, "* is allowed only once, at the end of a segment"},
		{"grant missing actions", withGrant("      id: g1\n      subject: {agent: a}\n"), 5, 7, `missing actions in grant "g1"`},
		{"grant empty actions", withGrant("      id: g1\n      subject: {agent: a}\n      actions: []\n"), 7, 16, `empty actions in grant "g1"`},
		{"grant actions a string", withGrant("      id: g1\n      subject: {agent: a}\n      actions: billing.*\n"), 7, 16, `actions in grant "g1" is string "billing.*" (expected a list)`},
		{"grant action pattern question mark", withGrant("      id: g1\n      subject: {agent: a}\n      actions: [\"billing.?\"]\n"), 7, 17, "? is not a pattern character"},
		{"grant action pattern infix star", withGrant("      id: g1\n      subject: {agent: a}\n      actions: [\"bill*ing.charge\"]\n"), 7, 17, "* is allowed only once, at the end"},
		{"grant action pattern double star first", withGrant("      id: g1\n      subject: {agent: a}\n      actions: [\"**\"]\n"), 7, 17, "** needs at least one literal segment"},
		{"grant action pattern double star inside", withGrant("      id: g1\n      subject: {agent: a}\n      actions: [\"a.**.b\"]\n"), 7, 17, "** is allowed only as the last segment"},
		{"grant action pattern double star after wildcard", withGrant("      id: g1\n      subject: {agent: a}\n      actions: [\"a*.**\"]\n"), 7, 17, "** is allowed only after literal segments"},
		{"grant action pattern empty segment", withGrant("      id: g1\n      subject: {agent: a}\n      actions: [\"a..b\"]\n"), 7, 17, "empty segment 1"},
		{"grant action pattern bad characters", withGrant("      id: g1\n      subject: {agent: a}\n      actions: [\"billing:charge\"]\n"), 7, 17, "characters an action name cannot have"},
		{"grant resource pattern bad", withGrant("      id: g1\n      subject: {agent: a}\n      actions: [x]\n      resources: [\"invoice::1\"]\n"), 8, 19, "empty segment 1"},
		{"grant empty resources", withGrant("      id: g1\n      subject: {agent: a}\n      actions: [x]\n      resources: []\n"), 8, 18, `empty resources in grant "g1"`},
		{"grant empty constraints", withGrant("      id: g1\n      subject: {agent: a}\n      actions: [x]\n      constraints: {}\n"), 8, 20, `empty constraints in grant "g1"`},
		{"grant reserved constraint", withGrant("      id: g1\n      subject: {agent: a}\n      actions: [x]\n      constraints: {user_eq: bob}\n"), 8, 21, `condition "user_eq" tests reserved subject "user" in grant "g1"`},
		{"grant constraint bad operand", withGrant("      id: g1\n      subject: {agent: a}\n      actions: [x]\n      constraints: {amount_lte: \"10\"}\n"), 8, 33, `operand of "amount_lte" is a string "10" in grant "g1" (expected an integer)`},
		{"grant empty environments", withGrant("      id: g1\n      subject: {agent: a}\n      actions: [x]\n      environments: []\n"), 8, 21, `empty environments in grant "g1"`},
		{"grant environment an integer", withGrant("      id: g1\n      subject: {agent: a}\n      actions: [x]\n      environments: [5]\n"), 8, 22, "is integer 5 (expected a string)"},
		{"grant expires_at date only", withGrant("      id: g1\n      subject: {agent: a}\n      actions: [x]\n      expires_at: 2026-12-31\n"), 8, 19, `bad expires_at "2026-12-31" in grant "g1" (expected an RFC 3339 time with an offset`},
		{"grant expires_at without offset", withGrant("      id: g1\n      subject: {agent: a}\n      actions: [x]\n      expires_at: \"2026-12-31T10:00:00\"\n"), 8, 19, `bad expires_at "2026-12-31T10:00:00"`},
		{"grant expires_at space separated", withGrant("      id: g1\n      subject: {agent: a}\n      actions: [x]\n      expires_at: 2026-12-31 10:00:00\n"), 8, 19, "bad expires_at"},
		{"grant expires_at before year 1 in UTC", withGrant("      id: g1\n      subject: {agent: a}\n      actions: [x]\n      expires_at: \"0001-01-01T00:30:00+01:00\"\n"), 8, 19, "bad expires_at"},
		{"grant expires_at an integer", withGrant("      id: g1\n      subject: {agent: a}\n      actions: [x]\n      expires_at: 1767225599\n"), 8, 19, "expires_at in grant \"g1\" is integer 1767225599 (expected a string)"},
		{"grant delegable without expiry", withGrant("      id: g1\n      subject: {agent: a}\n      actions: [x]\n      delegable: true\n"), 8, 18, `delegable grant "g1" has no expires_at`},
		{"grant delegable not a bool", withGrant("      id: g1\n      subject: {agent: a}\n      actions: [x]\n      delegable: yes\n"), 8, 18, `delegable in grant "g1" is string "yes" (expected true or false)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := Parse("latch.yaml", []byte(tt.src))
			if err == nil {
				t.Fatalf("Parse(%q) = %v, nil; want an error", tt.src, p)
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) error = %T %v, want *Error", tt.src, err, err)
			}
			if pe.File != "latch.yaml" || pe.Line != tt.line || pe.Column != tt.col {
				t.Errorf("Parse(%q) error at %s:%d:%d, want latch.yaml:%d:%d (%v)", tt.src, pe.File, pe.Line, pe.Column, tt.line, tt.col, err)
			}
			if !strings.Contains(pe.Msg, tt.msg) {
				t.Errorf("Parse(%q) error = %q, want it to contain %q", tt.src, pe.Msg, tt.msg)
			}
		})
	}
}

func TestErrorString(t *testing.T) {
	t.Parallel()
	src := header + "actions:\n  billing.charge:\n    decision: allow\n    efect: \"x\"\n"
	_, err := Parse("latch.yaml", []byte(src))
	want := `latch.yaml:5:5: unknown key "efect" in action "billing.charge" (expected one of effect, resource, arguments, lease, approval_ttl, max_attempts, rules, decision, approvers, budgets, precondition)`
	if err == nil || err.Error() != want {
		t.Fatalf("Parse(%q) = %v, want %v", src, err, want)
	}
	for _, tt := range []struct {
		e    *Error
		want string
	}{
		{&Error{File: "p.yaml", Msg: "read policy: open: no such file or directory"}, "p.yaml: read policy: open: no such file or directory"},
		{&Error{File: "p.yaml", Line: 3, Msg: "invalid YAML: x"}, "p.yaml:3: invalid YAML: x"},
		{&Error{File: "p.yaml", Line: 3, Column: 7, Msg: "m"}, "p.yaml:3:7: m"},
	} {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("%#v.Error() = %q, want %q", tt.e, got, tt.want)
		}
	}
}

func TestParseAccepts(t *testing.T) {
	t.Parallel()
	src := `# a full policy, exercising every key
schema: latch.policy/v1
mode: observe
environment: staging
version: 2026-11-29   # an unquoted date is its text

actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    resource: invoice:{invoice_id}
    lease: 1h30m
    approval_ttl: 90s
    max_attempts: 3
    rules:
      - when: { amount_gte: 0, amount_lte: 50000, currency_in: [EUR, "USD"] }
        decision: allow
      - when:
          amount_lte: 500000
          meta_eq: {tier: [1, -2, true, null, "x"]}
          ref_prefix: "refs/"
          ref_suffix: /main
          kind_neq: refund
          region_not_in: [mars]
          n_lt: 9007199254740991
          m_gt: -9007199254740991
          day_eq: 2026-01-01
        decision: approve
      - decision: deny
  git.merge:
    effect: "merge:{repo}:{number}:{{literal}}:{resource}"
    decision: approve
  docs.read:
    decision: deny
  a-b_c.D-9:
    decision: allow

authority:
  max_delegation_depth: 0
  grants:
    - id: billing-agents.v1
      subject: {agent: "svc:billing-*", user: "*"}
      actions: [billing.*, "git.**"]
      resources: ["invoice:*", "repo:latchkit:**"]
      constraints: {amount_lte: 100000}
      environments: [staging, production]
      expires_at: 2026-12-31T23:59:59.5+01:00
      delegable: true
    - id: "7"
      subject:
        user: alice
      actions: ["*"]
`
	p, err := Parse("latch.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	if p.File != "latch.yaml" || p.Schema != Schema || p.Mode != ModeObserve || p.Environment != "staging" || p.Version != "2026-11-29" {
		t.Errorf("Parse header = %q %q %q %q %q", p.File, p.Schema, p.Mode, p.Environment, p.Version)
	}
	mustTemplate := func(s string) *Template {
		tp, err := ParseTemplate(s)
		if err != nil {
			t.Fatalf("ParseTemplate(%q) = %v", s, err)
		}
		return tp
	}
	wantActions := map[string]*Action{
		"billing.charge": {
			Name: "billing.charge", Effect: mustTemplate("charge:{invoice_id}"), Resource: mustTemplate("invoice:{invoice_id}"),
			Lease: 90 * time.Minute, ApprovalTTL: 90 * time.Second, MaxAttempts: 3,
			Rules: []Rule{
				{When: Conditions{
					{Key: "amount_gte", Arg: "amount", Op: OpGte, Operand: int64(0), Pos: Position{15, 17}},
					{Key: "amount_lte", Arg: "amount", Op: OpLte, Operand: int64(50000), Pos: Position{15, 32}},
					{Key: "currency_in", Arg: "currency", Op: OpIn, Operand: []any{"EUR", "USD"}, Pos: Position{15, 51}},
				}, Decision: Allow, Pos: Position{15, 9}},
				{When: Conditions{
					{Key: "amount_lte", Arg: "amount", Op: OpLte, Operand: int64(500000), Pos: Position{18, 11}},
					{Key: "meta_eq", Arg: "meta", Op: OpEq, Operand: map[string]any{"tier": []any{int64(1), int64(-2), true, nil, "x"}}, Pos: Position{19, 11}},
					{Key: "ref_prefix", Arg: "ref", Op: OpPrefix, Operand: "refs/", Pos: Position{20, 11}},
					{Key: "ref_suffix", Arg: "ref", Op: OpSuffix, Operand: "/main", Pos: Position{21, 11}},
					{Key: "kind_neq", Arg: "kind", Op: OpNeq, Operand: "refund", Pos: Position{22, 11}},
					{Key: "region_not_in", Arg: "region", Op: OpNotIn, Operand: []any{"mars"}, Pos: Position{23, 11}},
					{Key: "n_lt", Arg: "n", Op: OpLt, Operand: int64(9007199254740991), Pos: Position{24, 11}},
					{Key: "m_gt", Arg: "m", Op: OpGt, Operand: int64(-9007199254740991), Pos: Position{25, 11}},
					{Key: "day_eq", Arg: "day", Op: OpEq, Operand: "2026-01-01", Pos: Position{26, 11}},
				}, Decision: Approve, Pos: Position{17, 9}},
				{Decision: Deny, Pos: Position{28, 9}},
			},
			Pos: Position{8, 3},
		},
		"git.merge": {Name: "git.merge", Effect: mustTemplate("merge:{repo}:{number}:{{literal}}:{resource}"), Decision: Approve, Pos: Position{29, 3}},
		"docs.read": {Name: "docs.read", Decision: Deny, Pos: Position{32, 3}},
		"a-b_c.D-9": {Name: "a-b_c.D-9", Decision: Allow, Pos: Position{34, 3}},
	}
	if diff := cmp.Diff(wantActions, p.Actions); diff != "" {
		t.Errorf("Parse actions mismatch (-want +got):\n%s", diff)
	}
	wantAuthority := &Authority{
		MaxDelegationDepth: 0,
		Pos:                Position{37, 1},
		Grants: []*Grant{
			{
				ID: "billing-agents.v1", Subject: Subject{Agent: "svc:billing-*", User: "*"},
				Actions: []string{"billing.*", "git.**"}, Resources: []string{"invoice:*", "repo:latchkit:**"},
				Constraints:  Conditions{{Key: "amount_lte", Arg: "amount", Op: OpLte, Operand: int64(100000), Pos: Position{44, 21}}},
				Environments: []string{"staging", "production"},
				ExpiresAt:    time.Date(2026, 12, 31, 22, 59, 59, 5e8, time.UTC),
				Delegable:    true,
				Pos:          Position{40, 7},
			},
			{ID: "7", Subject: Subject{User: "alice"}, Actions: []string{"*"}, Pos: Position{48, 7}},
		},
	}
	if diff := cmp.Diff(wantAuthority, p.Authority, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("Parse authority mismatch (-want +got):\n%s", diff)
	}
}

func TestParseDefaults(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		header,
		header + "actions:\n",
		header + "actions: {}\n",
	} {
		p, err := Parse("latch.yaml", []byte(src))
		if err != nil {
			t.Fatalf("Parse(%q) = %v", src, err)
		}
		if p.Mode != ModeEnforce || p.Environment != "" || p.Version != "" || len(p.Actions) != 0 || p.Authority != nil || p.Actions == nil {
			t.Errorf("Parse(%q) = %+v, want defaults", src, p)
		}
		if ev := p.Evaluate("anything", nil); ev.Decision != Deny || ev.Reason != ReasonUnknownAction {
			t.Errorf("Parse(%q).Evaluate = %+v, want deny unknown_action", src, ev)
		}
	}
	p, err := Parse("latch.yaml", []byte(header+"authority:\n  grants:\n"))
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	if p.Authority == nil || p.Authority.MaxDelegationDepth != DefaultMaxDelegationDepth || len(p.Authority.Grants) != 0 {
		t.Errorf("Parse authority = %+v, want depth %d and no grants", p.Authority, DefaultMaxDelegationDepth)
	}
	if _, err := Parse("", []byte("x")); err == nil || err.(*Error).File == "" {
		t.Errorf(`Parse("", "x") = %v, want an *Error with a file name`, err)
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "latch.yaml")
	if err := os.WriteFile(good, []byte(header+"actions:\n  a:\n    decision: allow\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := Load(good)
	if err != nil || p.File != good || p.Actions["a"] == nil {
		t.Fatalf("Load(%q) = %+v, %v", good, p, err)
	}

	missing := filepath.Join(dir, "missing.yaml")
	_, err = Load(missing)
	var pe *Error
	if !errors.As(err, &pe) || pe.File != missing || pe.Line != 0 || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load(%q) = %v, want *Error with Line 0 matching fs.ErrNotExist", missing, err)
	}
	if want := missing + ": read policy: open: no such file or directory"; err.Error() != want {
		t.Errorf("Load(%q) = %q, want %q", missing, err, want)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(header+"mode: loud\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); !errors.As(err, &pe) || pe.File != bad || pe.Line != 2 {
		t.Errorf("Load(%q) = %v, want *Error at line 2", bad, err)
	}
}

func TestLocate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		want    string
		wantErr bool
	}{
		{"unset", map[string]string{}, "latch.yaml", false},
		{"set", map[string]string{"LATCH_POLICY": "/etc/latch/policy.yaml"}, "/etc/latch/policy.yaml", false},
		{"set but empty", map[string]string{"LATCH_POLICY": ""}, "", true},
		{"set to spaces", map[string]string{"LATCH_POLICY": "  "}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			lookup := func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }
			got, err := LocateLookup(lookup)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("LocateLookup(%v) = %q, %v; want %q, error %v", tt.env, got, err, tt.want, tt.wantErr)
			}
			// Locate cannot see "set but empty": only its other answers are checked.
			got, err = Locate(func(k string) string { return tt.env[k] })
			switch tt.name {
			case "set but empty":
				if got != "latch.yaml" || err != nil {
					t.Errorf("Locate(%v) = %q, %v; want latch.yaml", tt.env, got, err)
				}
			default:
				if got != tt.want || (err != nil) != tt.wantErr {
					t.Errorf("Locate(%v) = %q, %v; want %q, error %v", tt.env, got, err, tt.want, tt.wantErr)
				}
			}
		})
	}
	if got, err := Locate(nil); got != "latch.yaml" || err != nil {
		t.Errorf("Locate(nil) = %q, %v; want latch.yaml", got, err)
	}
}
