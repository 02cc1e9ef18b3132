// The client against the server's own OpenAPI document: every route it lists has a Client
// method (or is named as no API token's route), and the body each method sends holds only
// members the route's request schema defines, with the required ones present.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { Client, ROUTES } from '../src/index.js';
import { startServe } from './support/serve.js';

let srv;
let doc;

before(async () => {
  srv = await startServe(`schema: latch.policy/v1
actions:
  payments.refund:
    effect: "refund:{refund_id}"
    decision: allow
`);
  doc = await new Client({ baseUrl: srv.base, token: srv.agentToken }).openapi();
});
after(async () => { await srv?.stop(); });

test('every route of the OpenAPI document has a Client method', () => {
  const listed = new Set();
  for (const [path, ops] of Object.entries(doc.paths)) {
    for (const method of Object.keys(ops)) listed.add(`${method.toUpperCase()} ${path}`);
  }
  assert.deepEqual(new Set(Object.keys(ROUTES)), listed);
  for (const [route, name] of Object.entries(ROUTES)) {
    if (name !== null) assert.equal(typeof Client.prototype[name], 'function', `${route}: Client.${name}`);
  }
});

test('each body the client sends fits its route\'s request schema', async () => {
  const sent = [];
  // Records what would be sent and answers as the server's 2xx would, without a server: this
  // test is about the request's shape only (the other tests talk to the real server).
  const recording = async (url, init) => {
    sent.push({ method: init.method, path: new URL(url).pathname, body: init.body ? JSON.parse(init.body) : undefined });
    return new Response(JSON.stringify({ approvals: [], effects: [], standing: [], budgets: [] }), { status: 200 });
  };
  const c = new Client({ baseUrl: srv.base, token: 't', fetch: recording });
  await c.begin('payments.refund', { refund_id: 'r', amount: 1 }, {
    resource: 'customer:1', approvalId: 'apr_1', waitSeconds: 2.5, task: 'T-1', hop: 'dlg_1', requestKey: 'k',
  });
  await c.finish('act_1', 'committed', { result: { ok: true }, error: 'e' });
  await c.extend('act_1', 60);
  await c.suspend('act_1', { message: 'ok?' });
  await c.resume('act_1', 'lrt_1', { refund_id: 'r' }, { confirm: true });
  await c.approve('apr_1', { note: 'n', set: { amount: 1 }, standing: { uses: 2, for: '1h' } });
  await c.deny('apr_1', { note: 'n' });
  await c.revokeStanding('sta_1', 'n');
  await c.resolve('k:1', 'committed', { result: { ok: true }, note: 'n' });
  await c.createHop({ parent: 'g', to: { agent: 'b' }, grant: 'actions: [a]' });
  await c.breakGlass({ envelope: 'e', reason: 'r', ttl_seconds: 60, for: { agent: 'a' }, grant: 'actions: [a]' });
  const withBody = sent.filter((s) => s.body !== undefined);
  assert.equal(withBody.length, 11);
  for (const s of withBody) {
    const pattern = Object.keys(doc.paths).find((p) => new RegExp(`^${p.replace(/\{[a-z]+\}/g, '[^/]+')}$`).test(s.path));
    assert.ok(pattern, `${s.path}: no route`);
    const ref = doc.paths[pattern][s.method.toLowerCase()].requestBody.content['application/json'].schema.$ref;
    const schema = doc.components.schemas[ref.split('/').pop()];
    for (const k of Object.keys(s.body)) assert.ok(k in schema.properties, `${s.method} ${pattern}: member ${k} is not in ${ref}`);
    for (const k of schema.required ?? []) assert.ok(k in s.body, `${s.method} ${pattern}: required member ${k} missing`);
    for (const [k, v] of Object.entries(s.body)) {
      const t = schema.properties[k].type;
      if (t === 'integer') assert.ok(Number.isInteger(v), `${pattern}: ${k} ${v} is not an integer`);
    }
  }
});

test('events streams the store\'s committed events', async () => {
  const agent = new Client({ baseUrl: srv.base, token: srv.agentToken });
  const begun = await agent.begin('payments.refund', { refund_id: 'r_ev', amount: 3 });
  await agent.finish(begun.action_id, 'committed', { result: { ok: true } });
  const approver = new Client({ baseUrl: srv.base, token: srv.approverToken });
  const ac = new AbortController();
  const kinds = [];
  try {
    for await (const ev of approver.events({ after: 0, signal: ac.signal })) {
      if (ev.action_id === begun.action_id) kinds.push(ev.kind);
      if (ev.kind === 'execution_committed' && ev.action_id === begun.action_id) ac.abort();
    }
  } catch (err) {
    if (err.name !== 'AbortError') throw err;
  }
  assert.ok(kinds.includes('effect_reserved'), kinds.join(','));
  assert.equal(kinds.at(-1), 'execution_committed');
});
