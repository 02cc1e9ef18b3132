import type { Interrupter } from './interrupt.js';

/** JSON in latch's value model: integers only (no floats), no integer beyond ±2^53. */
export type JSONValue = null | boolean | number | string | JSONValue[] | { [k: string]: JSONValue };

export interface Principal { agent: string | null; user: string | null }

/** A begun action (POST /v1/actions 200, GET /v1/actions/{id}). */
export interface Action {
  status: 'reserved' | 'allowed' | 'recorded';
  action_id: string;
  action: string;
  action_hash: string;
  /** The canonical arguments that were hashed: act on these. */
  arguments: Record<string, JSONValue>;
  resource: string | null;
  principal: Principal;
  effect_key: string | null;
  attempt: number | null;
  /** Per attempt: the remote system's idempotency key. */
  idempotency_token: string | null;
  /** The same for every attempt of the effect key. */
  effect_token: string | null;
  lease_expires_at: string | null;
  approval_id: string | null;
  decision?: string;
  reason?: string;
  would_have?: { decision: 'allow' | 'approve' | 'deny'; reason: string | null; effect: string | null };
  receipt?: Record<string, unknown>;
  receipt_hash?: string;
}

/** An approval request as every surface shows it. */
export interface Approval {
  approval_id: string;
  status: 'pending' | 'granted' | 'denied' | 'expired' | 'consumed';
  action: string;
  action_hash: string;
  arguments: Record<string, JSONValue>;
  principal: Principal;
  resource: string | null;
  created_at: string | null;
  expires_at: string | null;
  approver: string | null;
  display: { name: string; label: string | null; raw: string; human: string | null }[];
  answers: { approver: string; method: string; verified: boolean; grant: boolean; note: string | null; answered_at: string | null }[];
  required: number;
  grants: number;
  [member: string]: unknown;
}

/** The answer of a recorded outcome. */
export interface Recorded {
  status: 'recorded';
  action_id: string;
  result: 'committed' | 'failed' | 'ambiguous' | 'observed';
  error: string | null;
  receipt: Record<string, unknown>;
  receipt_hash: string;
}

/** An effect record. */
export interface Effect {
  effect_key: string;
  state: 'executing' | 'committed' | 'failed' | 'ambiguous';
  attempt: number;
  action?: string;
  action_id?: string;
  action_hash?: string;
  lease_expires_at?: string | null;
  lease_lapsed?: boolean;
  result?: JSONValue;
  error?: string | null;
  conflict?: string | null;
  resolved_by?: string | null;
  note?: string | null;
  created_at?: string | null;
  updated_at?: string | null;
}

export interface Suspension {
  action_id: string; effect_key: string; attempt: number; round: number;
  token: string; request: JSONValue; lease_expires_at: string;
}

export interface Resumption { action_id: string; round: number; request: JSONValue; lease_expires_at: string }

/** Options every request takes. */
export interface RequestOptions {
  /** A W3C traceparent for this request: the server's spans become its children. */
  traceparent?: string;
  tracestate?: string;
  signal?: AbortSignal;
}

export interface BeginOptions extends RequestOptions {
  resource?: string;
  /** Spend this granted approval (or standing approval). */
  approvalId?: string;
  /** When approval is required, wait this long for a person's answer. */
  waitSeconds?: number;
  task?: string;
  hop?: string;
  /** The begin's Idempotency-Key: a begin whose answer is lost is sent again with it. */
  requestKey?: string;
}

export interface ClientOptions {
  baseUrl: string;
  token: string;
  fetch?: typeof fetch;
  /** A traceparent for every request, or a function giving the current span's. */
  traceparent?: string | (() => string | undefined);
  timeoutMs?: number;
}

export interface AnswerRequest {
  note?: string;
  set?: Record<string, JSONValue>;
  standing?: { uses: number; for: string; max?: Record<string, number> | null; vary?: string[] | null; total?: { argument: string; limit: number } | null };
}

export declare class Client {
  constructor(options: ClientOptions);
  readonly baseUrl: string;
  request(method: string, path: string, body?: unknown, opts?: RequestOptions & { requestKey?: string }): Promise<{ status: number; body: any; headers: Headers }>;
  begin(action: string, args?: Record<string, JSONValue>, opts?: BeginOptions): Promise<Action>;
  finish(actionId: string, outcome: 'committed' | 'not_executed' | 'unknown', opts?: RequestOptions & { result?: JSONValue; error?: string }): Promise<Recorded>;
  extend(actionId: string, seconds: number, opts?: RequestOptions): Promise<{ action_id: string; lease_expires_at: string }>;
  suspend(actionId: string, request?: JSONValue, opts?: RequestOptions): Promise<Suspension>;
  resume(actionId: string, token: string, args: Record<string, JSONValue>, input?: Record<string, JSONValue>, opts?: RequestOptions): Promise<Resumption>;
  getAction(actionId: string, opts?: RequestOptions): Promise<Action>;
  getApproval(approvalId: string, opts?: RequestOptions): Promise<Approval>;
  listApprovals(status?: 'pending' | 'granted' | 'denied' | 'expired' | 'consumed' | 'all', opts?: RequestOptions): Promise<Approval[]>;
  approve(approvalId: string, answer?: AnswerRequest, opts?: RequestOptions): Promise<Approval & { standing_id?: string }>;
  deny(approvalId: string, answer?: { note?: string }, opts?: RequestOptions): Promise<Approval>;
  listStanding(state?: 'active' | 'exhausted' | 'expired' | 'revoked' | 'all', opts?: RequestOptions): Promise<Record<string, unknown>[]>;
  getStanding(id: string, opts?: RequestOptions): Promise<Record<string, unknown>>;
  revokeStanding(id: string, note?: string, opts?: RequestOptions): Promise<Record<string, unknown>>;
  listEffects(state?: 'executing' | 'committed' | 'failed' | 'ambiguous' | 'needs_person' | 'all', opts?: RequestOptions & { limit?: number; after?: string; pageSize?: number }): Promise<Effect[]>;
  getEffect(key: string, opts?: RequestOptions): Promise<Effect>;
  resolve(key: string, to: 'committed' | 'failed', opts?: RequestOptions & { result?: JSONValue; note?: string }): Promise<Effect>;
  createHop(hop: { parent: string; to: { agent: string; user?: string }; grant: string }, opts?: RequestOptions): Promise<Record<string, unknown>>;
  getHop(id: string, opts?: RequestOptions): Promise<Record<string, unknown>>;
  breakGlass(request: { envelope: string; reason: string; ttl_seconds?: number; for?: { agent: string; user?: string }; grant?: string }, opts?: RequestOptions): Promise<Record<string, unknown>>;
  receipts(after?: number, limit?: number, opts?: RequestOptions): Promise<{ receipts: { seq: number; hash: string; receipt: Record<string, unknown> | null; unreadable: string | null }[]; next_after: number }>;
  verifyReceipts(opts?: RequestOptions): Promise<{ ok: boolean; verified: number; breaks: Record<string, unknown>[]; [k: string]: unknown }>;
  stats(since?: string, opts?: RequestOptions): Promise<Record<string, unknown>>;
  coverage(since?: string, opts?: RequestOptions): Promise<{ calls: number; actions: Record<string, unknown>[]; never_fired: { action: string; rule: string }[]; never_called: string[]; [k: string]: unknown }>;
  budgets(opts?: RequestOptions): Promise<Record<string, unknown>[]>;
  openapi(opts?: RequestOptions): Promise<Record<string, unknown>>;
  ready(opts?: RequestOptions): Promise<boolean>;
  health(opts?: RequestOptions): Promise<{ status: string }>;
  metrics(opts?: RequestOptions): Promise<string>;
  /** The store's committed events after `after`, until signal aborts. */
  events(opts?: RequestOptions & { after?: number }): AsyncGenerator<LatchEvent, void, undefined>;
  waitForApproval(approvalId: string, opts?: RequestOptions & { timeoutMs?: number; pollMs?: number }): Promise<Approval>;
}

/** A committed event of the store. */
export interface LatchEvent {
  id: number; kind: string; at: string; action_id: string | null; effect_key: string | null;
  approval_id: string | null; payload: JSONValue;
}

/** The Client method calling each route of the OpenAPI document (null: not an API token's route). */
export declare const ROUTES: Readonly<Record<string, string | null>>;

/** What a protected function is handed beside the canonical arguments. */
export interface Reservation {
  actionId: string;
  effectKey: string | null;
  attempt: number | null;
  idempotencyToken: string | null;
  effectToken: string | null;
  leaseExpiresAt: string | null;
  approvalId: string | null;
  begun: Action;
}

/**
 * protect runs fn at most once per effect key through latch and resolves to what it returned.
 * Refusals are thrown as the error of their kind; fn throwing NotExecuted is reported
 * not_executed; anything else fn throws is reported unknown (OutcomeUnknownError).
 */
export declare function protect<A extends Record<string, JSONValue>, R extends JSONValue | void>(
  client: Client, action: string, args: A,
  fn: (args: A, reservation: Reservation) => R | Promise<R>,
  opts?: ProtectOptions,
): Promise<R>;

/** The options of protect: a begin's, and an Interrupter to wait out approvals and unknown outcomes with. */
export interface ProtectOptions extends BeginOptions {
  interrupter?: Interrupter;
}

/** newRequestKey returns a fresh random request key: 32 hex digits. */
export declare function newRequestKey(): string;
