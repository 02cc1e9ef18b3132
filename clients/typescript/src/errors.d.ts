/** A kind of refusal: what the caller has to do about it. */
export type RefusalKind =
  | 'denied' | 'invalid_argument' | 'approval_required' | 'approval_refused' | 'committed'
  | 'in_progress' | 'ambiguous' | 'outcome_unknown' | 'not_executed' | 'attempts_exhausted'
  | 'key_conflict' | 'authority' | 'identity' | 'outcome_refused' | 'request_key_mismatch' | 'internal';

/** Every reason word of a refusal, by its kind. */
export declare const REASONS: Readonly<Record<RefusalKind, readonly string[]>>;

/** kindOf returns the kind of a reason word, or undefined for a word that is no refusal. */
export declare function kindOf(reason: string): RefusalKind | undefined;

/** A problem document (RFC 9457) as latch serve answers it. */
export interface Problem {
  type: string;
  title?: string;
  status?: number;
  detail?: string;
  reason: string;
  kind?: RefusalKind;
  rule?: string;
  field?: string;
  pointer?: string;
  argument?: string;
  action_id?: string;
  approval_id?: string;
  action_hash?: string;
  effect_key?: string;
  state?: string;
  attempt?: number;
  result?: unknown;
  dimension?: string;
  budget?: string;
  metric?: string;
  window?: string;
  approved_arguments?: Record<string, unknown>;
  [member: string]: unknown;
}

/** LatchError is every error this package throws about an answer of latch serve. */
export declare class LatchError extends Error {}

/** ProblemError is a problem that is not a refusal of the pipeline (a bad request, a refused credential). */
export declare class ProblemError extends LatchError {
  constructor(status: number, problem: Partial<Problem>);
  readonly status: number;
  readonly type: string;
  readonly reason: string;
  readonly detail: string;
  readonly field?: string;
  readonly pointer?: string;
  readonly problem: Partial<Problem>;
}

/** LostAnswerError is a request whose answer never arrived: the server may have acted on it. */
export declare class LostAnswerError extends LatchError {
  constructor(method: string, path: string, cause: unknown);
}

/** RefusalError is a refusal of the pipeline, with the members of its problem that apply. */
export declare class RefusalError extends LatchError {
  constructor(status: number, problem: Problem, options?: ErrorOptions);
  readonly status: number;
  readonly kind: RefusalKind;
  readonly reason: string;
  readonly detail: string;
  readonly rule?: string;
  readonly effectKey?: string;
  readonly state?: string;
  readonly attempt?: number;
  /** The stored result of a committed effect (CommittedError). */
  readonly result?: unknown;
  readonly approvalId?: string;
  readonly actionHash?: string;
  readonly actionId?: string;
  readonly argument?: string;
  readonly pointer?: string;
  readonly dimension?: string;
  readonly budget?: string;
  readonly metric?: string;
  readonly window?: string;
  /** The arguments an edited approval binds (an approval_mismatch after an approver's edit). */
  readonly approvedArguments?: Record<string, unknown>;
  readonly problem: Problem;
}

export declare class DeniedError extends RefusalError {}
export declare class InvalidArgumentError extends RefusalError {}
/** ApprovalRequiredError: a person must approve; approvalId names the stored request. */
export declare class ApprovalRequiredError extends RefusalError {
  readonly approvalId: string;
  readonly expiresAt?: string;
  readonly approval?: Approval;
}
export declare class ApprovalRefusedError extends RefusalError {}
/** CommittedError: a duplicate; result is the first call's stored result. */
export declare class CommittedError extends RefusalError {}
export declare class InProgressError extends RefusalError {}
export declare class AmbiguousError extends RefusalError {}
export declare class OutcomeUnknownError extends RefusalError {}
export declare class NotExecutedError extends RefusalError {}
export declare class AttemptsExhaustedError extends RefusalError {}
export declare class KeyConflictError extends RefusalError {}
export declare class AuthorityError extends RefusalError {}
export declare class IdentityError extends RefusalError {}
export declare class OutcomeRefusedError extends RefusalError {}
export declare class RequestKeyMismatchError extends RefusalError {}
export declare class InternalError extends RefusalError {}

/** The error class of each kind. */
export declare const ERROR_CLASSES: Readonly<Record<RefusalKind, new (status: number, problem: Problem) => RefusalError>>;

/** errorOf turns a non-2xx answer into the error of its kind. */
export declare function errorOf(status: number, body: string | object): RefusalError | ProblemError;

/** NotExecuted is thrown by a protected function that knows nothing happened: the key may be retried. */
export declare class NotExecuted extends Error {
  constructor(message?: string, options?: ErrorOptions);
}

import type { Approval } from './client.js';
