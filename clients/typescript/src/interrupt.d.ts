import type { Client, RequestOptions } from './client.js';
import type { ApprovalRefusedError, RefusalError } from './errors.js';

/** Where a wait for a person or a resolution stands, or how it ended. */
export type InterruptStatus = 'waiting' | 'resume' | 'denied' | 'expired';

export declare const WAITING: 'waiting';
export declare const RESUME: 'resume';
export declare const DENIED: 'denied';
export declare const EXPIRED: 'expired';
/** How often, by default, a Poller reads where a wait stands. */
export declare const DEFAULT_POLL_MS: number;

/** How an interrupt ended, or where it stands: what the framework resumes with. */
export interface Answer {
  status: InterruptStatus;
  /** The request the answer is about (with denied, the request a person denied). */
  approval_id?: string;
  /** The effect the call is for. */
  effect_key?: string;
  /** Who answered, or who resolved the effect. */
  by?: string;
  /** With denied: a request for the same action asked after the denial. */
  pending?: string;
}

/** A refusal to wait out: a RefusalError, or the members of one that check reads. */
export type Waitable = RefusalError | { kind: string; approvalId?: string; effectKey?: string; reason?: string };

/**
 * Interrupter routes a refusal a framework can wait out through the framework's own pause and
 * resolves to the answer it resumed with: resume, denied or expired (never waiting). A
 * rejection means the wait itself failed; nothing was decided.
 */
export interface Interrupter {
  interrupt(refusal: RefusalError): Promise<Answer>;
}

/** interruptible: approval_required naming its request, or an unknown outcome naming its effect. */
export declare function interruptible(err: unknown): boolean;

/** check reads, once, where the wait for err stands (an unknown outcome needs a person's token). */
export declare function check(client: Client, err: Waitable, opts?: RequestOptions): Promise<Answer>;

/** refusalOfAnswer: approval_denied / approval_expired for denied / expired, else undefined. */
export declare function refusalOfAnswer(ans: Answer): ApprovalRefusedError | undefined;

export interface PollerOptions {
  /** How often to read (default DEFAULT_POLL_MS). */
  everyMs?: number;
  /** Give up waiting after this long (the promise rejects). */
  timeoutMs?: number;
  /** Give up waiting when this aborts (the promise rejects). */
  signal?: AbortSignal;
}

/** Poller is the Interrupter for work that can simply await: it reads check until the wait is over. */
export declare class Poller implements Interrupter {
  constructor(client: Client, options?: PollerOptions);
  readonly client: Client;
  readonly everyMs: number;
  interrupt(refusal: Waitable): Promise<Answer>;
}
