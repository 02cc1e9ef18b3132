// Package policy reads, evaluates and hashes latch policy documents (schema latch.policy/v1,
// usually latch.yaml): the list of actions that may run and how much autonomy each one gets.
//
// It is a leaf: pure functions over bytes and values, no I/O beyond [Load] and [LoadContext]
// reading one regular file of at most [MaxFileSize] bytes, no clock. Everything that decides —
// [Policy.Evaluate], [Action.CheckArguments], [Conditions.Eval], [Template.Render] — is
// deterministic and safe for concurrent use. The user reference is docs/policy.md.
//
// # Why it is strict
//
// A policy is an allow-list, and every way a loader can be lenient is a way a typo can widen what
// runs. An unknown key that is silently ignored turns `desicion: deny` into "no decision"; a
// duplicate key where the last one silently wins lets a reviewer read one value while the parser
// uses another; an anchor, an alias or a merge key makes the text a reviewer approves differ from
// the structure that is evaluated; a float compares unexpectedly with the integer money amounts it
// guards (0.1 and 0.10 are the same money and different values), and `0x10` or `010` are numbers
// nobody reads correctly at review time. So [Parse] refuses all of them, and every refusal is an
// [*Error] naming the file, the 1-based line and column of the offending node, and what was
// expected. Nothing is coerced: a bare `5` is not a duration, `yes` is not a boolean, an integer
// is not a string.
//
// The same check refuses explicit tags (`!!binary`, `!!str`), non-string keys, a second YAML
// document in the file, text that is not UTF-8 or holds control characters, and nesting deeper
// than 64 levels.
//
// Some choices worth knowing:
//
//   - An empty or missing `actions` map is allowed. It lists nothing, so every action is denied
//     (`unknown_action`); a policy that denies everything cannot widen anything.
//   - An empty `authority.grants` list is allowed for the same reason: with an authority section
//     every action needs a grant, so no grants means nothing is authorized. The `grants` key itself
//     is required.
//   - Action names are non-empty, `.`-separated segments of ASCII letters, digits, `_` and `-`
//     (`billing.charge`, `mcp.github.create_issue`). Names are matched exactly; the literal parts
//     of action patterns in grants use the same alphabet.
//   - Integers must be written in plain decimal (`-12`, `0`, `500`) within ±(2^53-1), the range every
//     JSON implementation represents exactly. Strings may be quoted or plain; an unquoted date
//     such as `2026-11-29` is read as its text.
//   - `in: []`, `not_in: []` and `neq: null` are refused: each is a condition that can never hold,
//     which is never what the author meant.
//   - A condition cannot name a reserved subject (agent, user, principal, claims, issuer, resource,
//     environment, action_id), nor an argument that starts with one followed by `.`, `/` or `[`:
//     `principal.agent_eq` would otherwise read like a check on the principal while testing an
//     argument the caller controls.
//   - In a pattern, `**` may end the pattern only when every segment before it is a plain literal
//     (`repo:latchkit:**`, not `repo:*:**`), which keeps containment between patterns decidable
//     segment by segment.
//   - `expires_at` is parsed from its text with time.RFC3339Nano (an offset or `Z` is required),
//     even when YAML would read the unquoted value as a timestamp.
//   - [ParseGrant] reads one grant on its own (a delegation's, for `latch delegate --file`) under
//     the same rules, and refuses an `id`: the store assigns a delegation its id.
//   - A condition (or an `arguments:` declaration) cannot name a nested path: an argument name
//     with `.`, `/`, `[` or `]` is refused, because there is no path syntax and such a
//     condition would silently test a top-level key that never exists.
//   - Bidirectional formatting characters (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F,
//     U+061C) are refused anywhere in the text, comments included.
//   - `lease` is bounded to [MinDuration]…[MaxLease] and `approval_ttl` to
//     [MinDuration]…[MaxApprovalTTL].
//   - With an `arguments:` section, every condition and template must name a declared argument
//     whose type fits the operator; `additional` inside it is always the flag for undeclared
//     arguments, never a declaration.
//   - Syntax errors found by the YAML parser carry the parser's line (which can be where the
//     enclosing block starts rather than the offending character) and no column: their
//     [Error.Column] is 0.
//
// # Evaluation
//
// [Policy.Evaluate] decides as docs/policy.md describes: an unlisted action is denied
// (`unknown_action`); arguments that do not fit what the action needs are denied
// (`missing_argument`: every argument a condition or template names is required unless declared
// optional; `invalid_arguments`: a declared argument of the wrong type or out of bounds, or an
// undeclared one under `additional: false`); a bare decision is returned as is (`decision`);
// otherwise the first rule whose conditions all hold wins (`rule[i]`, zero-based) and no match
// is a deny (`no_matching_rule`). Conditions are type-strict: an absent (optional) argument, or
// an argument of a type the operator does not apply to, makes
// the condition false for every operator, `neq` and `not_in` included, and the trace says why
// (string values in traces are quoted with non-ASCII escaped, so look-alike text reads
// differently). Everything that does not depend on the call is prepared at parse time.
// [Conditions.Holds] gives the verdict of [Conditions.Eval] without the explanations and without
// allocating, deciding through the same code.
//
// # Hash
//
// [Policy.Hash] is `sha256:` over the canonical JSON (package canon) of the parsed document, not
// of its bytes: comments, formatting, quoting, key order and equivalent spellings (`300s` and
// `5m`, an omitted `mode` and `mode: enforce`) do not change it, and every change to what the
// policy decides does. `version` is deliberately not hashed: it is a free label copied onto
// receipts next to the hash, so relabelling a policy does not make it a different policy; display
// hints are presentation and are not hashed either. A policy without `arguments:` sections hashes
// as it did before they existed.
//
// # Warnings and display
//
// [Policy.Warnings] lists what `latch check` warns about, with codes and positions.
// [Policy.View] and [FormatMoney] render a call's arguments as the display hints say a person
// should read them, for every approver surface.
package policy
