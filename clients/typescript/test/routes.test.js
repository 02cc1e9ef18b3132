// The rest of the client against a real `latch serve`: not_executed lets the key run again,
// the approver's routes (approve and deny through the API, resolve an ambiguous effect), lease,
// suspend and resume, and the reading routes.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  AmbiguousError, ApprovalRefusedError, ApprovalRequiredError, Client, CommittedError,
  NotExecuted, OutcomeRefusedError, protect,
} from '../src/index.js';
import { REFUND_POLICY, startServe } from './support/serve.js';

let srv;
let agent;
let approver;

before(async () => {
  srv = await startServe(REFUND_POLICY);
  agent = new Client({ baseUrl: srv.base, token: srv.agentToken });
  approver = new Client({ baseUrl: srv.base, token: srv.approverToken });
});
after(async () => { await srv?.stop(); });

test('not_executed lets the effect key run again; the second attempt commits', async () => {
  let calls = 0;
  const args = { refund_id: 'r_ne', amount: 10 };
  await assert.rejects(protect(agent, 'payments.refund', args, () => { calls++; throw new NotExecuted('card declined'); }), NotExecuted);
  const got = await protect(agent, 'payments.refund', args, (a, r) => { calls++; return { attempt: r.attempt }; });
  assert.deepEqual(got, { attempt: 2 });
  assert.equal(calls, 2);
});

test('an ambiguous effect resolved committed by a person: later calls get the resolution\'s result', async () => {
  const args = { refund_id: 'r_res', amount: 10 };
  await assert.rejects(protect(agent, 'payments.refund', args, () => { throw new Error('timeout'); }));
  const needs = await approver.listEffects('needs_person');
  assert.ok(needs.some((e) => e.effect_key === 'refund:r_res'));
  const resolved = await approver.resolve('refund:r_res', 'committed', { result: { refund: 're_seen' }, note: 'seen at the processor' });
  assert.equal(resolved.state, 'committed');
  await assert.rejects(protect(agent, 'payments.refund', args, () => assert.fail('ran')), (err) =>
    err instanceof CommittedError && err.result.refund === 're_seen');
  // An agent cannot resolve: a person's route.
  await assert.rejects(agent.resolve('refund:r_res', 'failed'), (err) => err.reason === 'forbidden');
});

test('listEffects walks the pages of GET /v1/effects in key order; with a limit it reads one page', async () => {
  for (const id of ['r_p1', 'r_p2', 'r_p3']) {
    await protect(agent, 'payments.refund', { refund_id: id, amount: 10 }, () => ({ ok: true }));
  }
  const all = await approver.listEffects('all');
  const keys = all.map((e) => e.effect_key);
  assert.deepEqual(keys, [...keys].sort());
  for (const k of ['refund:r_p1', 'refund:r_p2', 'refund:r_p3']) assert.ok(keys.includes(k), k);
  const walked = await approver.listEffects('all', { pageSize: 1 });
  assert.deepEqual(walked.map((e) => e.effect_key), keys);
  const first = await approver.listEffects('all', { limit: 1 });
  assert.deepEqual(first.map((e) => e.effect_key), keys.slice(0, 1));
  const second = await approver.listEffects('all', { limit: 1, after: keys[0] });
  assert.deepEqual(second.map((e) => e.effect_key), keys.slice(1, 2));
});

test('approve and deny through the API; a denied request presented is refused approval_denied', async () => {
  const ask = async (id, amount) => {
    try {
      await agent.begin('payments.refund', { refund_id: id, amount });
    } catch (err) {
      assert.ok(err instanceof ApprovalRequiredError, String(err));
      return err.approvalId;
    }
    return assert.fail('no approval asked');
  };
  const yes = await ask('r_yes', 9000);
  const granted = await approver.approve(yes, { note: 'ok' });
  assert.equal(granted.status, 'granted');
  assert.equal((await agent.getApproval(yes)).status, 'granted');
  const got = await protect(agent, 'payments.refund', { refund_id: 'r_yes', amount: 9000 }, () => ({ ok: 1 }), { approvalId: yes });
  assert.deepEqual(got, { ok: 1 });
  assert.equal((await approver.getApproval(yes)).status, 'consumed');

  const no = await ask('r_no', 9000);
  assert.equal((await approver.deny(no, { note: 'no' })).status, 'denied');
  await assert.rejects(agent.begin('payments.refund', { refund_id: 'r_no', amount: 9000 }, { approvalId: no }),
    (err) => err instanceof ApprovalRefusedError && err.reason === 'approval_denied');
});

test('lease, suspend, resume, outcome; a second outcome is refused already_recorded', async () => {
  const begun = await agent.begin('payments.refund', { refund_id: 'r_sus', amount: 10 });
  assert.equal(begun.status, 'reserved');
  const lease = await agent.extend(begun.action_id, 120);
  assert.ok(Date.parse(lease.lease_expires_at) > Date.now() + 60_000);
  const sus = await agent.suspend(begun.action_id, { message: 'confirm?' });
  assert.match(sus.token, /^lrt_/);
  await assert.rejects(agent.resume(begun.action_id, 'lrt_wrong', begun.arguments, { confirm: true }),
    (err) => err instanceof OutcomeRefusedError && err.reason === 'suspension_token');
  const res = await agent.resume(begun.action_id, sus.token, begun.arguments, { confirm: true });
  assert.deepEqual(res.request, { message: 'confirm?' });
  const rec = await agent.finish(begun.action_id, 'committed', { result: { ok: true } });
  assert.equal(rec.result, 'committed');
  assert.equal((await agent.getAction(begun.action_id)).status, 'recorded');
  await assert.rejects(agent.finish(begun.action_id, 'committed'),
    (err) => err instanceof OutcomeRefusedError && err.reason === 'already_recorded' && err.status === 409);
});

test('the reading routes answer', async () => {
  const r = await approver.receipts(0, 2);
  assert.equal(r.receipts.length, 2);
  assert.equal(typeof r.next_after, 'number');
  const v = await approver.verifyReceipts();
  assert.equal(v.ok, true);
  assert.ok(v.verified > 0);
  const s = await approver.stats('24h');
  assert.ok(s.receipts > 0);
  assert.ok(Array.isArray(await approver.budgets()));
  const cov = await approver.coverage('24h');
  assert.ok(cov.calls > 0);
  assert.ok(cov.actions.some((a) => a.action === 'payments.refund' && a.calls > 0), JSON.stringify(cov.actions));
  assert.ok(Array.isArray(await approver.listStanding('all')));
  assert.deepEqual(await agent.health(), { status: 'ok' });
  assert.equal(await agent.ready(), true);
  assert.match(await agent.metrics(), /^latch_/m);
  assert.ok((await approver.listApprovals('all')).length > 0);
});

test('an ambiguous effect refuses a retry without a person', async () => {
  await assert.rejects(protect(agent, 'payments.refund', { refund_id: 'r_amb', amount: 10 }, () => { throw new Error('lost'); }));
  await assert.rejects(agent.begin('payments.refund', { refund_id: 'r_amb', amount: 10 }), AmbiguousError);
});
