"""Typed errors for latch's one refusal vocabulary.

Every refusal latch answers has a reason word (snake_case, stable) and a kind: what the caller
has to do about it. ``latch serve`` puts both in its problem document (``reason`` and ``kind``);
this module turns the document into the exception class of its kind, so a caller branches with
``except latch.Committed`` or ``except latch.Ambiguous`` as a Go caller branches with
``errors.Is``. The words are those of docs/errors.md; REASON_KINDS lists every one with its kind.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional, Type

# The kind of every reason word (docs/errors.md). A word the table does not know is read by the
# kind the server sent with it, so a reason added later still lands in the right class.
REASON_KINDS: Dict[str, str] = {
    # denied
    "denied": "denied", "unknown_action": "denied", "no_matching_rule": "denied",
    "no_principal": "denied", "principal_expired": "denied", "out_of_scope": "denied",
    "scope_unavailable": "denied", "policy_unapproved": "denied",
    "upstream_mismatch": "denied", "upstream_unverified": "denied",
    "precondition_changed": "denied", "precondition_missing": "denied",
    "precondition_unavailable": "denied", "budget_exhausted": "denied",
    "budget_metric_missing": "denied", "budget_metric_invalid": "denied",
    "budget_needs_effect_key": "denied",
    # invalid_argument
    "invalid_argument": "invalid_argument", "effect_key_error": "invalid_argument",
    "missing_argument": "invalid_argument", "invalid_arguments": "invalid_argument",
    "request_key_required": "invalid_argument",
    # approval_required
    "approval_required": "approval_required",
    # approval_refused
    "approval_unknown": "approval_refused", "approval_mismatch": "approval_refused",
    "approval_consumed": "approval_refused", "approval_denied": "approval_refused",
    "approval_pending": "approval_refused", "approval_expired": "approval_refused",
    "approval_exhausted": "approval_refused", "approval_revoked": "approval_refused",
    # the effect's state
    "committed": "committed", "in_progress": "in_progress",
    "ambiguous": "ambiguous", "outcome_conflict": "ambiguous",
    "attempts_exhausted": "attempts_exhausted", "key_conflict": "key_conflict",
    "outcome_unknown": "outcome_unknown", "key_lost": "outcome_unknown",
    "not_executed": "not_executed",
    # authority
    "no_authority": "authority", "authority_unreadable": "authority",
    "authority_escalation": "authority", "authority_revoked": "authority",
    "authority_expired": "authority", "authority_constraint": "authority",
    "authority_hop": "authority",
    # identity
    "identity": "identity", "credential_revoked": "identity", "revocation_feed_stale": "identity",
    # outcome_refused
    "no_such_action": "outcome_refused", "not_holder": "outcome_refused",
    "already_recorded": "outcome_refused", "lease_lost": "outcome_refused",
    "no_lease": "outcome_refused", "outcome_refused": "outcome_refused",
    "not_suspended": "outcome_refused", "suspension_open": "outcome_refused",
    "suspension_token": "outcome_refused", "suspension_resumed": "outcome_refused",
    "suspension_arguments": "outcome_refused",
    # request_key_mismatch
    "request_key_other_principal": "request_key_mismatch",
    "request_key_other_action": "request_key_mismatch",
    "request_key_other_effect_key": "request_key_mismatch",
    "request_key_other_approval": "request_key_mismatch",
    # internal
    "internal": "internal",
}


class LatchError(Exception):
    """LatchError is the base of every error this package raises."""


class ProblemError(LatchError):
    """ProblemError is a problem document (RFC 9457) that is no refusal of the pipeline: a
    malformed request, a refused credential, a route the credential may not use, a server
    failure. ``reason`` is the problem's word (``invalid_json``, ``token_revoked``, …)."""

    def __init__(self, status: int, problem: Dict[str, Any]):
        self.status = status
        self.problem = problem
        self.reason: str = str(problem.get("reason") or "")
        self.detail: str = str(problem.get("detail") or "")
        self.field: Optional[str] = problem.get("field")
        self.pointer: Optional[str] = problem.get("pointer")
        super().__init__("latch serve: %d %s: %s" % (status, self.reason, self.detail))


class Refusal(LatchError):
    """Refusal is a refusal of latch's pipeline. ``kind`` says what to do about it, ``reason``
    is the word naming it; the members the server sent with it (``effect_key``, ``state``,
    ``attempt``, ``result``, ``approval_id``, ``action_hash``, ``rule``, ``argument``,
    ``pointer``, ``dimension``, ``budget``, ``metric``, ``window``) are attributes, None when
    absent, and the whole document is ``problem``."""

    kind = ""

    def __init__(self, reason: str, detail: str = "", status: int = 0,
                 problem: Optional[Dict[str, Any]] = None):
        self.reason = reason
        self.detail = detail
        self.status = status
        self.problem: Dict[str, Any] = dict(problem or {})
        p = self.problem
        self.effect_key: Optional[str] = p.get("effect_key")
        self.state: Optional[str] = p.get("state")
        self.attempt: Optional[int] = p.get("attempt")
        self.result: Any = p.get("result")
        self.approval_id: Optional[str] = p.get("approval_id")
        self.action_hash: Optional[str] = p.get("action_hash")
        self.action_id: Optional[str] = p.get("action_id")
        self.rule: Optional[str] = p.get("rule")
        self.argument: Optional[str] = p.get("argument")
        self.pointer: Optional[str] = p.get("pointer")
        self.dimension: Optional[str] = p.get("dimension")
        self.budget: Optional[str] = p.get("budget")
        self.metric: Optional[str] = p.get("metric")
        self.window: Optional[str] = p.get("window")
        super().__init__("latch: %s (%s)%s" % (reason, self.kind, ": " + detail if detail else ""))

    def for_model(self) -> str:
        """for_model is the refusal as a tool's error text a model can act on: the reason word,
        what it means for the call, and what to do (never "retry" where a retry could act
        twice)."""
        advice = _ADVICE.get(self.kind, "Do not retry this call.")
        text = "latch refused the call: %s (%s). %s" % (self.reason, self.kind, advice.format(
            effect_key=self.effect_key or "?", approval_id=self.approval_id or "?"))
        if self.kind == "committed" and self.result is not None:
            text += " Its stored result: " + json.dumps(self.result, sort_keys=True)
        if self.rule:
            text += " Rule: %s." % self.rule
        if self.pointer or self.argument:
            text += " Argument: %s." % (self.pointer or self.argument)
        return text


class Denied(Refusal):
    """Denied: the policy, the principal's scope, a precondition or a budget refused the call."""
    kind = "denied"


class InvalidArgument(Refusal):
    """InvalidArgument: the arguments cannot form the action, or do not fit the policy's."""
    kind = "invalid_argument"


class ApprovalRequired(Refusal):
    """ApprovalRequired: a person must approve. ``approval_id`` names the stored request,
    ``expires_at`` its expiry, ``approval`` the request as a person sees it (on a begin's 202)."""
    kind = "approval_required"

    def __init__(self, reason: str = "approval_required", detail: str = "", status: int = 0,
                 problem: Optional[Dict[str, Any]] = None):
        super().__init__(reason, detail, status, problem)
        self.expires_at: Optional[str] = self.problem.get("expires_at")
        self.approval: Optional[Dict[str, Any]] = self.problem.get("approval")


class ApprovalRefused(Refusal):
    """ApprovalRefused: the presented approval cannot be spent on this call (another action
    hash, spent, denied, pending, expired…). ``approved_arguments`` holds the arguments an
    approver's edit binds, when there was one."""
    kind = "approval_refused"

    def __init__(self, reason: str, detail: str = "", status: int = 0,
                 problem: Optional[Dict[str, Any]] = None):
        super().__init__(reason, detail, status, problem)
        self.approved_arguments: Any = self.problem.get("approved_arguments")


class Committed(Refusal):
    """Committed: a duplicate. The effect happened already; ``result`` is its stored result."""
    kind = "committed"


class InProgress(Refusal):
    """InProgress: another attempt holds the key under a live lease: try later."""
    kind = "in_progress"


class Ambiguous(Refusal):
    """Ambiguous: an earlier attempt's outcome is unknown. Retries are refused until a person
    (``latch resolve``) or a reconcile hook resolves it."""
    kind = "ambiguous"


class OutcomeUnknown(Refusal):
    """OutcomeUnknown: this call's outcome is unknown — it may have run. Never treat it as
    failed: the effect stays ambiguous until someone resolves it."""
    kind = "outcome_unknown"


class NotExecutedRefusal(Refusal):
    """NotExecutedRefusal: the call failed and its executor said it did not act."""
    kind = "not_executed"


class AttemptsExhausted(Refusal):
    """AttemptsExhausted: the effect failed as many times as its action allows."""
    kind = "attempts_exhausted"


class KeyConflict(Refusal):
    """KeyConflict: the effect key holds an attempt of other arguments."""
    kind = "key_conflict"


class AuthorityRefused(Refusal):
    """AuthorityRefused: no grant lets this principal propose this action."""
    kind = "authority"


class IdentityRefused(Refusal):
    """IdentityRefused: no principal could be established from the credential."""
    kind = "identity"


class OutcomeRefused(Refusal):
    """OutcomeRefused: a begun call's outcome, lease extension or resume was refused."""
    kind = "outcome_refused"


class RequestKeyMismatch(Refusal):
    """RequestKeyMismatch: the begin's request key names another principal's or another
    request."""
    kind = "request_key_mismatch"


class Internal(Refusal):
    """Internal: latch could not decide or record; nothing is known to have run."""
    kind = "internal"


# _ADVICE is what a model should do about each kind of refusal.
_ADVICE: Dict[str, str] = {
    "denied": "The policy does not allow this call; do not retry it.",
    "invalid_argument": "The arguments do not fit the action; correct them before calling again.",
    "approval_required": "A person must approve it first (request {approval_id}); do not call again until they answer.",
    "approval_refused": "The approval presented cannot be used for this call; do not retry with it.",
    "committed": "It already happened (effect {effect_key}); do not do it again.",
    "in_progress": "Another attempt of the same effect is running; try again later.",
    "ambiguous": "An earlier attempt's outcome is unknown; a person must resolve effect {effect_key} before any retry.",
    "outcome_unknown": "This call may have happened; do not retry: a person must resolve effect {effect_key}.",
    "not_executed": "It did not happen; it may be tried again.",
    "attempts_exhausted": "It failed as many times as allowed; do not retry.",
    "key_conflict": "Effect {effect_key} was attempted with other arguments; do not retry with these.",
    "authority": "No grant lets this agent do this; do not retry.",
    "identity": "The agent's credential was refused; do not retry.",
    "outcome_refused": "The outcome could not be recorded for this call; do not retry.",
    "request_key_mismatch": "The request key names another request; do not retry with it.",
    "internal": "latch could not decide or record; nothing is known to have run; it may be tried again.",
}

# KIND_CLASSES is the exception class of every kind.
KIND_CLASSES: Dict[str, Type[Refusal]] = {
    c.kind: c for c in (
        Denied, InvalidArgument, ApprovalRequired, ApprovalRefused, Committed, InProgress,
        Ambiguous, OutcomeUnknown, NotExecutedRefusal, AttemptsExhausted, KeyConflict,
        AuthorityRefused, IdentityRefused, OutcomeRefused, RequestKeyMismatch, Internal)
}


def refusal_class(reason: str, kind: str = "") -> Optional[Type[Refusal]]:
    """refusal_class is the exception class of a refusal: by the kind the server sent, else by
    the reason's kind in REASON_KINDS; None for a word that is neither."""
    return KIND_CLASSES.get(kind or REASON_KINDS.get(reason, ""))


def error_of(status: int, problem: Dict[str, Any]) -> LatchError:
    """error_of turns a problem document into the exception of its refusal kind, or a
    ProblemError when it is no refusal of the pipeline (it carries no kind)."""
    reason = str(problem.get("reason") or "")
    kind = str(problem.get("kind") or "")
    cls = KIND_CLASSES.get(kind) if kind else None
    if cls is None:
        return ProblemError(status, problem)
    return cls(reason, str(problem.get("detail") or ""), status, problem)
