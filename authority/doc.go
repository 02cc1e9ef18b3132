// Package authority decides who may propose what (docs/authority.md): the grants of a policy's
// `authority:` section, the delegations created beneath them, the pattern grammar both use, and
// whether a delegation stays within what it was delegated from.
//
// It is a leaf: pure functions over a parsed [policy.Authority], the delegation records a store
// read, and a request carrying its own clock. No context, no I/O, no time.Now. The store holds
// delegations (insert-only, revocation a flag) and the root package combines this axis with the
// policy's as the stricter of the two (docs/guarantees.md#the-pipeline-of-one-call).
//
// # Evaluation
//
// [Evaluate] allows a request iff some grant matches its subject, action, resource,
// environment and task, all the grant's constraints hold, it has not expired, and — for a delegation —
// every link of its chain up to a policy grant is present, unrevoked, unexpired, within
// max_delegation_depth, and still contained in its parent. When none allows, the decision
// reports the highest-precedence reason among the grants that matched everything but failed
// (authority_unreadable, authority_escalation, authority_revoked, authority_expired,
// authority_constraint), or no_authority when no grant matched at all, together with the
// dimension that failed and a trace line per grant.
//
// # Why containment is "provable subset, or refused"
//
// A delegation can only narrow: the child of a grant must allow nothing the parent does not. The
// question "is every request the child allows also allowed by the parent?" is answered here
// conservatively. [Contains] and the constraint comparison say yes only when the operands
// themselves prove it, segment by segment and operator by operator; anything they cannot
// prove is "not contained", and the delegation is refused naming the dimension. A false
// refusal costs the delegator a narrower rewrite; a false acceptance would let an agent grant
// itself more than it holds, silently and for as long as the delegation lives. So:
//
//   - `billing.**` does not contain `billing` (`**` is one or more further segments), and a
//     wildcard is never contained in a literal;
//   - a constraint of the parent must be implied by one constraint of the child on the same
//     argument (`amount_lte: 100` by `amount_lte: 50` or `amount_lt: 101` or `amount_in: [5, 10]`),
//     never by a combination of several;
//   - leaving out a dimension the parent constrains (resources, environments, a constraint, a
//     user, tasks, an expiry) is widening, not silence, and is refused.
//
// The same check runs at creation ([CheckDelegation]) and again at every evaluation, so editing
// the policy file so that a parent grant no longer contains what was delegated beneath it cuts
// those delegations (authority_escalation) without touching the store.
//
// # Choices worth knowing
//
//   - A wildcard segment matches a non-empty segment only, and a string with an empty segment
//     ("a::b", "a:") is matched by no pattern. `inv*` matches "inv" itself.
//   - The subject is the one dimension that is replaced rather than contained: a delegation
//     hands authority to a new holder. The child names one concrete agent (no `*`), which the
//     parent's agent pattern need not match — that pattern says who may delegate, and the
//     creator must be matched by the parent's subject. Requiring the delegatee to be matched
//     too would make every delegation redundant: grants are a union, so the parent would
//     already allow that agent everything the child does. What the parent restricts beyond its
//     holder stays restricted: in an agent's grant limited to users (agent and user both set)
//     the user says on whose behalf the agent acts, so the child must name a user pattern
//     contained in it, and leaving it out is widening. In a user's grant (user only) the user
//     is the holder, and the child may name a user or not: that is how a human hands part of
//     her authority to an agent that acts on its own.
//   - The depth of a delegation is the number of delegations from it up to its policy grant: a
//     delegation of a policy grant has depth 1, and max_delegation_depth 0 allows none.
//   - A delegation whose parent no longer exists (its policy grant was removed from the policy)
//     is authority_revoked on "parent".
//   - A record that is not well-formed (no id or parent, a malformed grant) is treated like an
//     unreadable row and denies everything. An id that names more than one record, or a chain
//     that loops, is authority_unreadable for the delegations whose chain runs into it.
//   - A grant that names tasks matches only a request whose Task one of its patterns matches
//     (':'-separated, as resources), and never a request with no task; a grant that names none
//     admits any task, or none. A request refused by the task alone is no_authority on "tasks".
//   - A zero Request.Now counts every grant with an expires_at as expired.
//   - An allowing decision names the policy grant at the root of the chain (GrantID) and the
//     delegation that matched (DelegationID), the pair a receipt records.
package authority
