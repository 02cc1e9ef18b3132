// A client of the /v1 API of `latch serve`, with nothing but what Node 20 has (fetch, crypto).
// A protected call begins the action on the server (decide, approve, reserve), runs the
// caller's function with the canonical arguments the server hashed, and reports the outcome:
// a return is committed, a NotExecuted throw is not_executed (the key may be retried), anything
// else — a timeout, a lost reply — is unknown, and the effect stays ambiguous until a person
// resolves it. Routes and errors: docs/http.md.

import { randomBytes } from 'node:crypto';
import {
  ApprovalRequiredError, LostAnswerError, NotExecuted, OutcomeUnknownError, ProblemError, errorOf,
} from './errors.js';
import { RESUME, interruptible, refusalOfAnswer } from './interrupt.js';

const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/;

// A keyed begin is sent at most this many times, the pause doubling from BEGIN_BACKOFF_MS.
const BEGIN_TRIES = 6;
const BEGIN_BACKOFF_MS = 100;

/** newRequestKey returns a fresh random request key for a begin: 32 hex digits. */
export function newRequestKey() {
  return randomBytes(16).toString('hex');
}

function enc(s) {
  return encodeURIComponent(s);
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params ?? {})) {
    if (v !== undefined && v !== null) q.set(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

/** Client talks to one `latch serve` with one bearer token. */
export class Client {
  /**
   * @param {object} options
   * @param {string} options.baseUrl the server, e.g. http://127.0.0.1:7420
   * @param {string} options.token an API token from `latch token create`, or a JWT
   * @param {typeof fetch} [options.fetch] the fetch to use (globalThis.fetch by default)
   * @param {string | (() => string | undefined)} [options.traceparent] a W3C traceparent sent
   *   with every request, or a function giving the current span's (a per-call one wins)
   * @param {number} [options.timeoutMs] the longest a request may take (default: none beyond
   *   the server's own bounds)
   */
  constructor(options) {
    if (!options || typeof options.baseUrl !== 'string' || options.baseUrl === '') {
      throw new TypeError('latch: Client needs baseUrl');
    }
    if (typeof options.token !== 'string' || options.token === '') {
      throw new TypeError('latch: Client needs token');
    }
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.token = options.token;
    this.fetch = options.fetch ?? globalThis.fetch;
    this.traceparent = options.traceparent;
    this.timeoutMs = options.timeoutMs;
  }

  // traceHeaders are the W3C trace context headers of one request.
  #traceHeaders(opts) {
    let tp = opts?.traceparent ?? this.traceparent;
    if (typeof tp === 'function') tp = tp();
    const h = {};
    if (tp === undefined || tp === null || tp === '') return h;
    if (typeof tp !== 'string' || !TRACEPARENT.test(tp)) {
      throw new TypeError(`latch: traceparent ${JSON.stringify(tp)} is not a W3C traceparent (version-traceid-parentid-flags)`);
    }
    h.traceparent = tp;
    if (opts?.tracestate) h.tracestate = opts.tracestate;
    return h;
  }

  /**
   * request sends one request and returns {status, body} for a 2xx answer; any other answer is
   * thrown as the error of its kind, and a request that got no answer as a LostAnswerError.
   */
  async request(method, path, body, opts = {}) {
    const headers = { Authorization: `Bearer ${this.token}`, ...this.#traceHeaders(opts) };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (opts.requestKey) headers['Idempotency-Key'] = opts.requestKey;
    let signal = opts.signal;
    if (this.timeoutMs && !signal) signal = AbortSignal.timeout(this.timeoutMs);
    let resp;
    let text;
    try {
      resp = await this.fetch(this.baseUrl + path, {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal,
      });
      text = await resp.text();
    } catch (err) {
      throw new LostAnswerError(method, path, err);
    }
    if (resp.status < 200 || resp.status > 299) throw errorOf(resp.status, text);
    let parsed = null;
    if (text !== '') {
      try {
        parsed = JSON.parse(text);
      } catch (err) {
        throw new ProblemError(resp.status, { reason: 'not_json', detail: `answer of ${method} ${path}: ${err.message}` });
      }
    }
    return { status: resp.status, body: parsed, headers: resp.headers };
  }

  /**
   * begin begins an action: decided, approved and, with an effect key, reserved. It resolves to
   * the reservation (status `reserved`, or `allowed` without an effect key) and throws the
   * refusal's error otherwise; approval required is an ApprovalRequiredError carrying the
   * stored request. With `requestKey`, a begin whose answer is lost, or that the server could
   * not answer for now (429, 502, 503, 504), is sent again with the same key and is handed the
   * same reservation.
   */
  async begin(action, args, opts = {}) {
    const body = { action, arguments: args ?? {} };
    if (opts.resource !== undefined) body.resource = opts.resource;
    if (opts.approvalId) body.approval_id = opts.approvalId;
    if (opts.waitSeconds) body.wait_seconds = Math.ceil(opts.waitSeconds);
    if (opts.task) body.task = opts.task;
    if (opts.hop) body.hop = opts.hop;
    let pause = BEGIN_BACKOFF_MS;
    for (let attempt = 1; ; attempt++) {
      try {
        const { status, body: answer } = await this.request('POST', '/v1/actions', body, opts);
        if (status === 202) throw new ApprovalRequiredError(202, { ...answer, reason: 'approval_required', kind: 'approval_required' });
        return answer;
      } catch (err) {
        if (!opts.requestKey || attempt === BEGIN_TRIES || !retryable(err) || opts.signal?.aborted) throw err;
      }
      await new Promise((resolve) => setTimeout(resolve, pause));
      pause *= 2;
    }
  }

  /** finish reports the outcome of a begun action: committed, not_executed or unknown. */
  async finish(actionId, outcome, opts = {}) {
    const body = { outcome };
    if (opts.result !== undefined) body.result = opts.result;
    if (opts.error) body.error = opts.error;
    return (await this.request('POST', `/v1/actions/${enc(actionId)}/outcome`, body, opts)).body;
  }

  /** extend extends the lease of a begun action to `seconds` from now. */
  async extend(actionId, seconds, opts = {}) {
    return (await this.request('POST', `/v1/actions/${enc(actionId)}/lease`, { seconds }, opts)).body;
  }

  /** suspend suspends a begun action waiting for input; the answer's token resumes it, once. */
  async suspend(actionId, request, opts = {}) {
    const body = request === undefined ? {} : { request };
    return (await this.request('POST', `/v1/actions/${enc(actionId)}/suspend`, body, opts)).body;
  }

  /** resume spends a suspension with its token and the action's arguments again. */
  async resume(actionId, token, args, input, opts = {}) {
    const body = { token, arguments: args };
    if (input !== undefined) body.input = input;
    return (await this.request('POST', `/v1/actions/${enc(actionId)}/resume`, body, opts)).body;
  }

  /** getAction reads a begun action as it stands (its own principal only). */
  async getAction(actionId, opts = {}) {
    return (await this.request('GET', `/v1/actions/${enc(actionId)}`, undefined, opts)).body;
  }

  /** getApproval reads one approval request. */
  async getApproval(approvalId, opts = {}) {
    return (await this.request('GET', `/v1/approvals/${enc(approvalId)}`, undefined, opts)).body;
  }

  /** listApprovals lists approval requests by status (a person's credential). */
  async listApprovals(status, opts = {}) {
    return (await this.request('GET', `/v1/approvals${query({ status })}`, undefined, opts)).body.approvals;
  }

  /** approve grants an approval request (a person's credential), with a note, edits or standing terms. */
  async approve(approvalId, answer = {}, opts = {}) {
    const { body, headers } = await this.request('POST', `/v1/approvals/${enc(approvalId)}/approve`, answer, opts);
    const standing = headers.get('Latch-Standing-Id');
    return standing ? { ...body, standing_id: standing } : body;
  }

  /** deny denies an approval request (a person's credential). */
  async deny(approvalId, answer = {}, opts = {}) {
    return (await this.request('POST', `/v1/approvals/${enc(approvalId)}/deny`, answer, opts)).body;
  }

  /** listStanding lists standing approvals by state. */
  async listStanding(state, opts = {}) {
    return (await this.request('GET', `/v1/standing${query({ state })}`, undefined, opts)).body.standing;
  }

  /** getStanding reads one standing approval. */
  async getStanding(id, opts = {}) {
    return (await this.request('GET', `/v1/standing/${enc(id)}`, undefined, opts)).body;
  }

  /** revokeStanding revokes a standing approval. */
  async revokeStanding(id, note, opts = {}) {
    return (await this.request('POST', `/v1/standing/${enc(id)}/revoke`, note ? { note } : {}, opts)).body;
  }

  /**
   * listEffects lists effect records by state (executing, committed, failed, ambiguous,
   * needs_person, all), ordered by key: every page the server answers (opts.pageSize records a
   * request, 1,000 unless given, following next_after), or with opts.limit one page of at most
   * that many after opts.after.
   */
  async listEffects(state, opts = {}) {
    const { limit, after, pageSize = 1000, ...rest } = opts;
    if (limit !== undefined) {
      return (await this.request('GET', `/v1/effects${query({ state, limit, after })}`, undefined, rest)).body.effects;
    }
    const out = [];
    let from = after;
    for (;;) {
      const page = (await this.request('GET', `/v1/effects${query({ state, limit: pageSize, after: from })}`, undefined, rest)).body;
      out.push(...page.effects);
      if (!page.next_after) return out;
      from = page.next_after;
    }
  }

  /** getEffect reads one effect record. */
  async getEffect(key, opts = {}) {
    return (await this.request('GET', `/v1/effects/${enc(key)}`, undefined, opts)).body;
  }

  /** resolve settles an effect that needs a person: to is committed (with an optional result) or failed. */
  async resolve(key, to, opts = {}) {
    const body = { to };
    if (opts.result !== undefined) body.result = opts.result;
    if (opts.note) body.note = opts.note;
    return (await this.request('POST', `/v1/effects/${enc(key)}/resolve`, body, opts)).body;
  }

  /** createHop hands part of a grant the calling agent holds to one receiving agent. */
  async createHop(hop, opts = {}) {
    return (await this.request('POST', '/v1/hops', hop, opts)).body;
  }

  /** getHop reads what ran under one hop (a person's credential). */
  async getHop(id, opts = {}) {
    return (await this.request('GET', `/v1/hops/${enc(id)}`, undefined, opts)).body;
  }

  /** breakGlass opens a break-glass grant inside one of the policy's envelopes (a person). */
  async breakGlass(request, opts = {}) {
    return (await this.request('POST', '/v1/break-glass', request, opts)).body;
  }

  /** receipts lists receipts in chain order after `after`, at most `limit`. */
  async receipts(after, limit, opts = {}) {
    return (await this.request('GET', `/v1/receipts${query({ after, limit })}`, undefined, opts)).body;
  }

  /** verifyReceipts checks the receipt chain and the stored state against it. */
  async verifyReceipts(opts = {}) {
    return (await this.request('GET', '/v1/receipts/verify', undefined, opts)).body;
  }

  /** stats counts receipts by action and result, in a window like `24h`. */
  async stats(since, opts = {}) {
    return (await this.request('GET', `/v1/stats${query({ since })}`, undefined, opts)).body;
  }

  /**
   * coverage reads which rules of the policy the recorded calls exercised (since a time or a
   * window like `24h`, when given): per action and rule the calls it decided, the rules that
   * never fired, the actions never called.
   */
  async coverage(since, opts = {}) {
    return (await this.request('GET', `/v1/coverage${query({ since })}`, undefined, opts)).body;
  }

  /** budgets lists the budgets in force. */
  async budgets(opts = {}) {
    return (await this.request('GET', '/v1/budgets', undefined, opts)).body.budgets;
  }

  /** openapi reads the server's OpenAPI document. */
  async openapi(opts = {}) {
    return (await this.request('GET', '/v1/openapi.json', undefined, opts)).body;
  }

  /** health reads GET /healthz: {status: "ok"} while the process is up. */
  async health(opts = {}) {
    return (await this.request('GET', '/healthz', undefined, opts)).body;
  }

  /** metrics reads GET /metrics, the Prometheus text format. */
  async metrics(opts = {}) {
    let resp;
    try {
      resp = await this.fetch(`${this.baseUrl}/metrics`, { headers: this.#traceHeaders(opts), signal: opts.signal });
    } catch (err) {
      throw new LostAnswerError('GET', '/metrics', err);
    }
    const text = await resp.text();
    if (!resp.ok) throw errorOf(resp.status, text);
    return text;
  }

  /**
   * events streams the store's committed events (GET /v1/events, Server-Sent Events) after
   * event id `after`, as {id, kind, at, action_id, effect_key, approval_id, payload} objects,
   * until `signal` aborts or the server closes the stream. A `closed` event (the credential
   * was revoked or expired) ends the stream by throwing a ProblemError naming why.
   */
  async *events(opts = {}) {
    const headers = { Authorization: `Bearer ${this.token}`, Accept: 'text/event-stream', ...this.#traceHeaders(opts) };
    const path = `/v1/events${query({ after: opts.after })}`;
    let resp;
    try {
      resp = await this.fetch(this.baseUrl + path, { headers, signal: opts.signal });
    } catch (err) {
      throw new LostAnswerError('GET', path, err);
    }
    if (!resp.ok) throw errorOf(resp.status, await resp.text());
    const decoder = new TextDecoder();
    let buf = '';
    let event = { data: [] };
    for await (const chunk of resp.body) {
      buf += decoder.decode(chunk, { stream: true });
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).replace(/\r$/, '');
        buf = buf.slice(nl + 1);
        if (line === '') {
          if (event.data.length > 0) {
            const data = JSON.parse(event.data.join('\n'));
            if (event.event === 'closed') {
              throw new ProblemError(401, { type: `urn:latch:problem:${data.reason}`, reason: data.reason, detail: data.detail });
            }
            yield data;
          }
          event = { data: [] };
        } else if (!line.startsWith(':')) {
          const i = line.indexOf(':');
          const field = i < 0 ? line : line.slice(0, i);
          const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
          if (field === 'data') event.data.push(value);
          else if (field === 'event' || field === 'id') event[field] = value;
        }
      }
    }
  }

  /** ready reports whether the server's store answers. */
  async ready(opts = {}) {
    try {
      await this.request('GET', '/readyz', undefined, opts);
      return true;
    } catch (err) {
      if (err instanceof ProblemError && err.status === 503) return false;
      throw err;
    }
  }

  /**
   * waitForApproval polls an approval request until it is no longer pending, or until
   * `timeoutMs` passes, and returns the request as it then stands.
   */
  async waitForApproval(approvalId, opts = {}) {
    const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
    const every = opts.pollMs ?? 500;
    for (;;) {
      const a = await this.getApproval(approvalId, opts);
      if (a.status !== 'pending' || Date.now() >= deadline) return a;
      await new Promise((resolve) => setTimeout(resolve, every));
    }
  }
}

/**
 * ROUTES names the Client method that calls each route of the /v1 API, as the server's OpenAPI
 * document lists them ("METHOD /pattern"); null for the routes this client does not call: the two
 * no API token calls (their bearer is a push secret, or Slack's signature), and POST /v1/calls,
 * whose one full-duplex request the client makes as two (begin, then finish).
 */
export const ROUTES = Object.freeze({
  'GET /healthz': 'health',
  'GET /readyz': 'ready',
  'GET /v1/openapi.json': 'openapi',
  'GET /metrics': 'metrics',
  'POST /v1/actions': 'begin',
  'GET /v1/actions/{id}': 'getAction',
  'POST /v1/actions/{id}/outcome': 'finish',
  'POST /v1/actions/{id}/lease': 'extend',
  'POST /v1/actions/{id}/suspend': 'suspend',
  'POST /v1/actions/{id}/resume': 'resume',
  'GET /v1/approvals': 'listApprovals',
  'GET /v1/approvals/{id}': 'getApproval',
  'POST /v1/approvals/{id}/approve': 'approve',
  'POST /v1/approvals/{id}/deny': 'deny',
  'GET /v1/standing': 'listStanding',
  'GET /v1/standing/{id}': 'getStanding',
  'POST /v1/standing/{id}/revoke': 'revokeStanding',
  'GET /v1/effects': 'listEffects',
  'GET /v1/effects/{key}': 'getEffect',
  'POST /v1/effects/{key}/resolve': 'resolve',
  'POST /v1/hops': 'createHop',
  'GET /v1/hops/{id}': 'getHop',
  'POST /v1/break-glass': 'breakGlass',
  'GET /v1/receipts': 'receipts',
  'GET /v1/events': 'events',
  'GET /v1/stats': 'stats',
  'GET /v1/receipts/verify': 'verifyReceipts',
  'GET /v1/budgets': 'budgets',
  'GET /v1/coverage': 'coverage',
  'POST /v1/calls': null,
  'POST /v1/revocations': null,
  'POST /v1/slack/interactions': null,
});

// retryable reports a begin worth sending again with its key: its answer was lost, or the
// server could not answer it for now.
function retryable(err) {
  if (err instanceof LostAnswerError) return true;
  return err instanceof ProblemError && [429, 502, 503, 504].includes(err.status);
}

/**
 * protect runs `fn` at most once per effect key through latch: begin (with a fresh request key,
 * re-sent when its answer is lost), run `fn(arguments, reservation)` with the canonical
 * arguments, and report the outcome. It resolves to what `fn` returned. A refusal is thrown as
 * the error of its kind — a committed duplicate as a CommittedError whose `result` is the first
 * call's stored result; `fn` throwing NotExecuted is reported not_executed and rethrown;
 * anything else `fn` throws is reported unknown and thrown as an OutcomeUnknownError whose
 * cause is what `fn` threw.
 *
 * With `interrupter` (an Interrupter, such as a Poller), a refusal a framework can wait out
 * (approval_required, an unknown outcome: see interruptible) is routed through it: on `resume`
 * the call runs again, unchanged and presenting nothing — the server finds the granted request
 * for the exact action and spends it once — and on `denied` or `expired` protect throws the
 * ApprovalRefusedError (approval_denied, approval_expired) built from the answer; `fn` never
 * ran. An error of the interrupter itself (the wait failed) is thrown as it is.
 */
export async function protect(client, action, args, fn, opts = {}) {
  const { interrupter, ...rest } = opts;
  if (!interrupter) return protectOnce(client, action, args, fn, rest);
  if (typeof interrupter.interrupt !== 'function') throw new TypeError('latch: protect: interrupter has no interrupt method');
  for (;;) {
    try {
      return await protectOnce(client, action, args, fn, rest);
    } catch (err) {
      if (!interruptible(err)) throw err;
      const ans = await interrupter.interrupt(err);
      if (ans?.status === RESUME) continue; // each round waits on a person or a resolution
      const refused = refusalOfAnswer(ans);
      if (refused) throw refused;
      throw new TypeError(`latch: protect: the interrupter answered ${JSON.stringify(ans?.status)}; want resume, denied or expired`);
    }
  }
}

async function protectOnce(client, action, args, fn, opts) {
  const begun = await client.begin(action, args, { ...opts, requestKey: opts.requestKey ?? newRequestKey() });
  const reservation = {
    actionId: begun.action_id, effectKey: begun.effect_key, attempt: begun.attempt,
    idempotencyToken: begun.idempotency_token, effectToken: begun.effect_token,
    leaseExpiresAt: begun.lease_expires_at, approvalId: begun.approval_id, begun,
  };
  let result;
  try {
    result = await fn(begun.arguments, reservation);
  } catch (err) {
    if (err instanceof NotExecuted) {
      await client.finish(begun.action_id, 'not_executed', { error: err.message, traceparent: opts.traceparent });
      throw err;
    }
    try {
      await client.finish(begun.action_id, 'unknown', { error: String(err?.message ?? err), traceparent: opts.traceparent });
    } catch {
      // The outcome report was lost too: the lease lapses into ambiguous all the same.
    }
    throw new OutcomeUnknownError(0, {
      reason: 'outcome_unknown', kind: 'outcome_unknown', effect_key: begun.effect_key,
      attempt: begun.attempt, action_id: begun.action_id,
      detail: `the outcome of ${action} is unknown: ${err?.message ?? err}`,
    }, { cause: err });
  }
  await client.finish(begun.action_id, 'committed', {
    result: result === undefined ? null : result, traceparent: opts.traceparent,
  });
  return result;
}
