// The one refusal vocabulary of latch, read from the problem documents `latch serve` answers.
// Every refusal has a reason word and a kind (what the caller has to do about it); each kind is
// one error class here, so a caller branches with `instanceof` as a Go caller does with
// errors.Is. The words are the ones docs/errors.md lists; a test checks this table against the
// Go table the server's own tests use.

/** Every reason word of a refusal, by the kind it belongs to. */
export const REASONS = Object.freeze({
  denied: [
    'denied', 'unknown_action', 'no_matching_rule', 'no_principal', 'principal_expired',
    'policy_unapproved', 'upstream_mismatch', 'upstream_unverified', 'out_of_scope',
    'scope_unavailable', 'precondition_changed', 'precondition_missing', 'precondition_unavailable',
    'budget_exhausted', 'budget_metric_missing', 'budget_metric_invalid', 'budget_needs_effect_key',
  ],
  invalid_argument: [
    'invalid_argument', 'effect_key_error', 'request_key_required', 'missing_argument', 'invalid_arguments',
  ],
  approval_required: ['approval_required'],
  approval_refused: [
    'approval_unknown', 'approval_mismatch', 'approval_consumed', 'approval_denied',
    'approval_pending', 'approval_expired', 'approval_exhausted', 'approval_revoked',
  ],
  committed: ['committed'],
  in_progress: ['in_progress'],
  ambiguous: ['ambiguous', 'outcome_conflict'],
  outcome_unknown: ['outcome_unknown', 'key_lost'],
  not_executed: ['not_executed'],
  attempts_exhausted: ['attempts_exhausted'],
  key_conflict: ['key_conflict'],
  authority: [
    'no_authority', 'authority_unreadable', 'authority_escalation', 'authority_revoked',
    'authority_expired', 'authority_constraint', 'authority_hop',
  ],
  identity: ['identity', 'credential_revoked', 'revocation_feed_stale'],
  outcome_refused: [
    'no_such_action', 'not_holder', 'already_recorded', 'lease_lost', 'no_lease', 'outcome_refused',
    'not_suspended', 'suspension_open', 'suspension_token', 'suspension_resumed', 'suspension_arguments',
  ],
  request_key_mismatch: [
    'request_key_other_principal', 'request_key_other_action', 'request_key_other_effect_key',
    'request_key_other_approval',
  ],
  internal: ['internal'],
});

const kindByReason = new Map();
for (const [kind, reasons] of Object.entries(REASONS)) {
  for (const r of reasons) kindByReason.set(r, kind);
}

/** kindOf returns the kind of a reason word, or undefined for a word that is no refusal. */
export function kindOf(reason) {
  return kindByReason.get(reason);
}

/** LatchError is every error this package throws about an answer of `latch serve`. */
export class LatchError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * ProblemError is a problem document that is not a refusal of the pipeline: a malformed
 * request, a refused credential, a route the credential may not use, a server failure.
 */
export class ProblemError extends LatchError {
  constructor(status, problem) {
    const reason = problem?.reason ?? 'not_a_problem';
    super(`latch serve: ${status} ${reason}: ${problem?.detail ?? ''}`);
    this.status = status;
    this.type = problem?.type ?? '';
    this.reason = reason;
    this.detail = problem?.detail ?? '';
    this.field = problem?.field;
    this.pointer = problem?.pointer;
    this.problem = problem;
  }
}

/**
 * LostAnswerError is a request whose answer never arrived (the connection dropped, a timeout):
 * the server may have acted on it.
 */
export class LostAnswerError extends LatchError {
  constructor(method, path, cause) {
    super(`latch serve: ${method} ${path}: no answer: ${cause?.message ?? cause}`, { cause });
  }
}

/**
 * RefusalError is a refusal of the pipeline: its kind, its reason word and the members of the
 * problem document that apply (effect key, state, attempt, stored result, approval id, …).
 */
export class RefusalError extends LatchError {
  constructor(status, problem, options) {
    super(`latch: ${problem.reason}: ${problem.detail ?? ''}`, options);
    this.status = status;
    this.kind = problem.kind ?? kindOf(problem.reason);
    this.reason = problem.reason;
    this.detail = problem.detail ?? '';
    this.rule = problem.rule;
    this.effectKey = problem.effect_key;
    this.state = problem.state;
    this.attempt = problem.attempt;
    this.result = problem.result;
    this.approvalId = problem.approval_id;
    this.actionHash = problem.action_hash;
    this.actionId = problem.action_id;
    this.argument = problem.argument;
    this.pointer = problem.pointer;
    this.dimension = problem.dimension;
    this.budget = problem.budget;
    this.metric = problem.metric;
    this.window = problem.window;
    this.approvedArguments = problem.approved_arguments;
    this.problem = problem;
  }
}

/** DeniedError: the policy refused the call (reason words of kind `denied`). */
export class DeniedError extends RefusalError {}
/** InvalidArgumentError: the arguments cannot form the action, or do not fit the policy. */
export class InvalidArgumentError extends RefusalError {}
/**
 * ApprovalRequiredError: a person must approve; `approvalId` names the stored request,
 * `approval` is the request as stored (from a 202 answer).
 */
export class ApprovalRequiredError extends RefusalError {
  constructor(status, problem, options) {
    super(status, problem, options);
    this.expiresAt = problem.expires_at;
    this.approval = problem.approval;
  }
}
/** ApprovalRefusedError: the presented approval cannot be spent on this call. */
export class ApprovalRefusedError extends RefusalError {}
/** CommittedError: a duplicate; the effect happened, and `result` is its stored result. */
export class CommittedError extends RefusalError {}
/** InProgressError: another attempt holds the effect key under a live lease; try later. */
export class InProgressError extends RefusalError {}
/** AmbiguousError: an earlier attempt's outcome is unknown; a person must resolve it first. */
export class AmbiguousError extends RefusalError {}
/** OutcomeUnknownError: this call's outcome is unknown: it may have run. Never a failure. */
export class OutcomeUnknownError extends RefusalError {}
/** NotExecutedError: this call failed and its executor said it did not act: it may be retried. */
export class NotExecutedError extends RefusalError {}
/** AttemptsExhaustedError: the effect failed as many times as its action allows. */
export class AttemptsExhaustedError extends RefusalError {}
/** KeyConflictError: the effect key holds an attempt with other arguments. */
export class KeyConflictError extends RefusalError {}
/** AuthorityError: no grant lets this principal propose this action. */
export class AuthorityError extends RefusalError {}
/** IdentityError: no principal could be established for the credential. */
export class IdentityError extends RefusalError {}
/** OutcomeRefusedError: a begun call's outcome, lease, suspension or resume was refused. */
export class OutcomeRefusedError extends RefusalError {}
/** RequestKeyMismatchError: the begin's Idempotency-Key names another principal's or another request. */
export class RequestKeyMismatchError extends RefusalError {}
/** InternalError: latch could not decide or record; nothing is known to have run. */
export class InternalError extends RefusalError {}

/** The error class of each kind. */
export const ERROR_CLASSES = Object.freeze({
  denied: DeniedError,
  invalid_argument: InvalidArgumentError,
  approval_required: ApprovalRequiredError,
  approval_refused: ApprovalRefusedError,
  committed: CommittedError,
  in_progress: InProgressError,
  ambiguous: AmbiguousError,
  outcome_unknown: OutcomeUnknownError,
  not_executed: NotExecutedError,
  attempts_exhausted: AttemptsExhaustedError,
  key_conflict: KeyConflictError,
  authority: AuthorityError,
  identity: IdentityError,
  outcome_refused: OutcomeRefusedError,
  request_key_mismatch: RequestKeyMismatchError,
  internal: InternalError,
});

/**
 * errorOf turns an answer that is not 2xx into the error of its kind: a RefusalError subclass
 * for a refusal, a ProblemError for any other problem.
 */
export function errorOf(status, body) {
  let problem;
  try {
    problem = typeof body === 'string' ? JSON.parse(body) : body;
  } catch {
    problem = undefined;
  }
  if (!problem || typeof problem !== 'object' || typeof problem.type !== 'string') {
    return new ProblemError(status, { reason: 'not_a_problem', detail: String(body ?? '').trim() });
  }
  // The kind the server names wins; a server older than a kind falls back to this table.
  const kind = problem.kind ?? (problem.reason === 'internal' ? undefined : kindOf(problem.reason));
  const cls = kind && ERROR_CLASSES[kind];
  if (!cls) return new ProblemError(status, problem);
  return new cls(status, problem);
}

/**
 * NotExecuted is what a protected function throws when it knows nothing happened (the card
 * was declined, the request was refused before it was sent): the outcome is reported
 * `not_executed` and the effect key may be retried. Any other throw is reported `unknown`.
 */
export class NotExecuted extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'NotExecuted';
  }
}
