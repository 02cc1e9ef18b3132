// The interrupt contract between latch and a framework that can pause a piece of work for a
// person and resume it with the answer, as package `interrupt` of the Go module defines it.
//
// A protected call refused approval_required, or whose effect's outcome is unknown, is not a
// failure to report: it waits for a person (who answers the approval request) or for a
// resolution (a person or a reconcile hook settles the effect). An Interrupter routes such a
// refusal (interruptible) through the framework's own pause and resolves to the Answer it
// resumed with: `resume` runs the call again, unchanged — the server finds the granted, unspent
// request for the exact action by itself, spends it once and runs; `denied` and `expired` stop
// with the ApprovalRefusedError refusalOfAnswer builds. check reads, once, where a wait stands;
// Poller is the Interrupter for work that can simply await. docs/integrations/interrupts.md.

import { setTimeout as sleep } from 'node:timers/promises';
import { ApprovalRefusedError } from './errors.js';

/** Statuses of a wait: where it stands (check) or how it ended (an Interrupter). */
export const WAITING = 'waiting';
export const RESUME = 'resume';
export const DENIED = 'denied';
export const EXPIRED = 'expired';

/** DEFAULT_POLL_MS is how often, by default, a Poller reads where a wait stands. */
export const DEFAULT_POLL_MS = 2000;

/**
 * interruptible reports whether err is a refusal a framework can wait out: approval_required
 * naming its request (approvalId), or an unknown outcome (kind ambiguous or outcome_unknown)
 * naming its effect (effectKey). Everything else is a refusal to report, not to wait out.
 */
export function interruptible(err) {
  if (!err || typeof err !== 'object') return false;
  if (err.kind === 'approval_required') return typeof err.approvalId === 'string' && err.approvalId !== '';
  return (err.kind === 'ambiguous' || err.kind === 'outcome_unknown')
    && typeof err.effectKey === 'string' && err.effectKey !== '';
}

/**
 * check reads, once, where the wait for the refusal err stands:
 *
 * - approval_required: GET /v1/approvals/{id} (an agent's token may read it). Pending and
 *   unexpired is waiting — unless the request records that the last answer to its exact action
 *   was a denial (the attempt after a denial asked again): that is denied, naming the denied
 *   request, with the new one in `pending`. Granted or consumed is resume; denied is denied;
 *   expired, or pending past its expiry, is expired.
 * - an unknown outcome: GET /v1/effects/{key}, which needs a person's (approver) token: with an
 *   agent's token the server answers 403 and check throws that ProblemError. Still ambiguous is
 *   waiting; resolved (committed or failed) is resume.
 *
 * A refusal that is not interruptible is a TypeError.
 */
export async function check(client, err, opts = {}) {
  if (!interruptible(err)) {
    throw new TypeError(`latch: check: ${err?.reason ?? err?.kind ?? String(err)} is not a refusal a person or a resolution answers`);
  }
  const effectKey = err.effectKey || undefined;
  if (err.kind !== 'approval_required') {
    const eff = await client.getEffect(err.effectKey, opts);
    if (eff.state === 'ambiguous') return answer(WAITING, { effect_key: effectKey });
    return answer(RESUME, { effect_key: effectKey, by: eff.resolved_by || undefined });
  }
  const a = await client.getApproval(err.approvalId, opts);
  const base = { approval_id: a.approval_id, effect_key: effectKey, by: a.approver || undefined };
  switch (a.status) {
    case 'granted':
    case 'consumed':
      return answer(RESUME, base);
    case 'denied':
      return answer(DENIED, base);
    case 'expired':
      return answer(EXPIRED, base);
    default:
      if (a.previous_denied) {
        return answer(DENIED, {
          approval_id: a.previous_denied, effect_key: effectKey,
          by: a.previous_denied_by || undefined, pending: a.approval_id,
        });
      }
      if (a.expires_at && Date.parse(a.expires_at) <= Date.now()) return answer(EXPIRED, base);
      return answer(WAITING, base);
  }
}

// answer is an Answer without the members that are absent.
function answer(status, members) {
  const a = { status };
  for (const [k, v] of Object.entries(members)) if (v !== undefined && v !== null && v !== '') a[k] = v;
  return a;
}

/**
 * refusalOfAnswer returns the error a call that stops on `ans` throws: an ApprovalRefusedError
 * approval_denied for denied, approval_expired for expired, naming the request; undefined for
 * waiting and resume.
 */
export function refusalOfAnswer(ans) {
  let reason;
  if (ans?.status === DENIED) reason = 'approval_denied';
  else if (ans?.status === EXPIRED) reason = 'approval_expired';
  else return undefined;
  let detail = `approval ${ans.approval_id ?? ''} ${ans.status}`;
  if (ans.by) detail += ` by ${ans.by}`;
  if (ans.pending) detail += `; request ${ans.pending} asks again`;
  return new ApprovalRefusedError(0, {
    type: `urn:latch:problem:${reason}`, reason, kind: 'approval_refused',
    approval_id: ans.approval_id, effect_key: ans.effect_key, detail,
  });
}

/**
 * Poller is the Interrupter for work that can simply await (an in-process tool call, a
 * request handler, a worker holding its job): interrupt reads check every `everyMs` (default
 * DEFAULT_POLL_MS) until the wait is over — resume, denied or expired — and rejects (an
 * AbortError, or the error of the read it cut short) when `signal` aborts or `timeoutMs` passes
 * first: the wait failed, nothing was decided. It is not durable: a process
 * that stops loses the wait (the request stays stored, and the call run again meets it).
 * `client` reads the approval (any token) or the effect (a person's token).
 */
export class Poller {
  constructor(client, { everyMs, timeoutMs, signal } = {}) {
    if (!client || typeof client.getApproval !== 'function') throw new TypeError('latch: Poller needs a Client');
    this.client = client;
    this.everyMs = everyMs > 0 ? everyMs : DEFAULT_POLL_MS;
    this.timeoutMs = timeoutMs;
    this.signal = signal;
  }

  async interrupt(err) {
    const signals = [];
    if (this.signal) signals.push(this.signal);
    if (this.timeoutMs > 0) signals.push(AbortSignal.timeout(this.timeoutMs));
    const signal = signals.length === 0 ? undefined : signals.length === 1 ? signals[0] : AbortSignal.any(signals);
    for (;;) {
      signal?.throwIfAborted();
      const ans = await check(this.client, err, { signal });
      if (ans.status !== WAITING) return ans;
      await sleep(this.everyMs, undefined, { signal });
    }
  }
}
