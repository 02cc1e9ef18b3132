// The interrupt contract against a real `latch serve` (SQLite): protect with a Poller waits
// while a person approves with `latch approve` and then runs once; a person's denial stops it
// approval_denied without running; check reads waiting, resume, denied (also for the attempt
// that asks again after a denial) and expired for a request, waiting and resume for an
// unknown outcome.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  ApprovalRefusedError, ApprovalRequiredError, Client, OutcomeUnknownError, Poller, ProblemError,
  check, interruptible, protect, refusalOfAnswer,
} from '../src/index.js';
import * as sub from '@latchkit/latch/interrupt';
import { startServe } from './support/serve.js';

const policy = `schema: latch.policy/v1
actions:
  payments.refund:
    effect: "refund:{refund_id}"
    rules:
      - when: { amount_lte: 5000 }
        decision: allow
      - decision: approve
  payments.quick:
    effect: "quick:{refund_id}"
    approval_ttl: 1s
    decision: approve
`;

let srv;
let agent;
let approver;

before(async () => {
  srv = await startServe(policy);
  agent = new Client({ baseUrl: srv.base, token: srv.agentToken });
  approver = new Client({ baseUrl: srv.base, token: srv.approverToken });
});

after(async () => {
  await srv?.stop();
});

// pendingFor waits for the pending request whose arguments name refundId, as a person sees it.
async function pendingFor(refundId) {
  for (let i = 0; i < 200; i++) {
    const list = await approver.listApprovals('pending');
    const a = list.find((x) => x.arguments.refund_id === refundId);
    if (a) return a.approval_id;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`no pending request for ${refundId}`);
}

async function asked(action, refundId, amount) {
  try {
    await protect(agent, action, { refund_id: refundId, amount }, () => assert.fail('ran without approval'));
  } catch (err) {
    assert.ok(err instanceof ApprovalRequiredError, `want approval_required, got ${err}`);
    return err;
  }
  return assert.fail('no refusal');
}

test('the subpath exports the same contract', () => {
  assert.equal(sub.Poller, Poller);
  assert.equal(sub.check, check);
});

test('protect with a Poller waits while a person approves with the CLI, then runs once', async () => {
  let runs = 0;
  const done = protect(agent, 'payments.refund', { refund_id: 'r-approve', amount: 9000 }, (args, r) => {
    runs++;
    return { refunded: args.amount, approval: r.approvalId };
  }, { interrupter: new Poller(agent, { everyMs: 50, timeoutMs: 20_000 }) });
  const id = await pendingFor('r-approve');
  assert.equal(runs, 0, 'ran before the approval');
  await srv.latch('approve', id, '--as', 'alice');
  const out = await done;
  assert.equal(runs, 1);
  assert.equal(out.refunded, 9000);
  assert.equal(out.approval, id, 'the resumed call spent the granted request');
  const eff = await approver.getEffect('refund:r-approve');
  assert.equal(eff.state, 'committed');
  assert.equal((await approver.getApproval(id)).status, 'consumed');
});

test('protect with a Poller stops approval_denied when a person denies, and never runs', async () => {
  let runs = 0;
  const done = protect(agent, 'payments.refund', { refund_id: 'r-deny', amount: 9000 }, () => { runs++; },
    { interrupter: new Poller(agent, { everyMs: 50, timeoutMs: 20_000 }) });
  const id = await pendingFor('r-deny');
  await srv.latch('deny', id, '--as', 'alice');
  await assert.rejects(done, (err) => {
    assert.ok(err instanceof ApprovalRefusedError, String(err));
    assert.equal(err.reason, 'approval_denied');
    assert.equal(err.kind, 'approval_refused');
    assert.equal(err.approvalId, id);
    assert.equal(err.effectKey, 'refund:r-deny');
    return true;
  });
  assert.equal(runs, 0);
  // The attempt after the denial asks again; its wait ends denied at once, naming both.
  let seen;
  const interrupter = { async interrupt(err) { seen = await check(agent, err); return seen; } };
  await assert.rejects(protect(agent, 'payments.refund', { refund_id: 'r-deny', amount: 9000 }, () => { runs++; }, { interrupter }),
    (err) => err instanceof ApprovalRefusedError && err.reason === 'approval_denied' && err.approvalId === id);
  assert.equal(seen.status, 'denied');
  assert.equal(seen.approval_id, id);
  assert.equal(seen.by, 'alice');
  assert.ok(seen.pending && seen.pending !== id, `want the new request in pending: ${JSON.stringify(seen)}`);
  assert.equal(runs, 0);
});

test('a Poller gives up when its timeout passes; nothing was decided', async () => {
  const err = await asked('payments.refund', 'r-timeout', 9000);
  const started = Date.now();
  await assert.rejects(new Poller(agent, { everyMs: 20, timeoutMs: 200 }).interrupt(err));
  assert.ok(Date.now() - started < 5000);
  assert.equal((await check(agent, err)).status, 'waiting');
});

test('check reads waiting, resume and denied for a request', async () => {
  const err = await asked('payments.refund', 'r-check', 9000);
  assert.ok(interruptible(err));
  assert.deepEqual(await check(agent, err), { status: 'waiting', approval_id: err.approvalId, effect_key: 'refund:r-check' });
  await srv.latch('approve', err.approvalId, '--as', 'alice');
  assert.deepEqual(await check(agent, err), { status: 'resume', approval_id: err.approvalId, effect_key: 'refund:r-check', by: 'alice' });
  assert.equal(refusalOfAnswer({ status: 'resume' }), undefined);

  const err2 = await asked('payments.refund', 'r-check2', 9000);
  await srv.latch('deny', err2.approvalId, '--as', 'alice');
  const ans = await check(agent, err2);
  assert.deepEqual(ans, { status: 'denied', approval_id: err2.approvalId, effect_key: 'refund:r-check2', by: 'alice' });
  assert.equal(refusalOfAnswer(ans).reason, 'approval_denied');
});

test('check reads expired for a request nobody answered in time', async () => {
  const err = await asked('payments.quick', 'r-expire', 1);
  assert.equal((await check(agent, err)).status, 'waiting');
  await new Promise((r) => setTimeout(r, 1300));
  const ans = await check(agent, err);
  assert.equal(ans.status, 'expired');
  const refused = refusalOfAnswer(ans);
  assert.ok(refused instanceof ApprovalRefusedError);
  assert.equal(refused.reason, 'approval_expired');
  assert.equal(refused.approvalId, err.approvalId);
});

test('check reads an unknown outcome waiting until a person resolves it (a person\'s token)', async () => {
  let err;
  try {
    await protect(agent, 'payments.refund', { refund_id: 'r-unknown', amount: 10 }, () => { throw new Error('timeout'); });
  } catch (e) {
    err = e;
  }
  assert.ok(err instanceof OutcomeUnknownError, String(err));
  assert.ok(interruptible(err));
  assert.deepEqual(await check(approver, err), { status: 'waiting', effect_key: 'refund:r-unknown' });
  // An agent's token may not read effects: check says so rather than guess.
  await assert.rejects(check(agent, err), (e) => e instanceof ProblemError && e.status === 403);
  await approver.resolve('refund:r-unknown', 'failed', { note: 'never reached the bank' });
  assert.deepEqual(await check(approver, err), { status: 'resume', effect_key: 'refund:r-unknown', by: 'http:alice' });
});

test('interruptible is false for refusals to report, and check refuses them', async () => {
  assert.equal(interruptible(new Error('x')), false);
  assert.equal(interruptible({ kind: 'denied', reason: 'denied' }), false);
  assert.equal(interruptible({ kind: 'approval_required' }), false);
  await assert.rejects(check(agent, { kind: 'denied', reason: 'denied' }), TypeError);
});

test('an adapter\'s program reads the request it kept with check, to answer the framework\'s pause', async () => {
  const { latchTool } = await import('../src/ai-sdk.js');
  const tool = latchTool(agent, 'payments.refund', {
    description: 'refund', inputSchema: {}, execute: () => assert.fail('ran without approval'),
  });
  const input = { refund_id: 'r-adapter', amount: 9000 };
  assert.equal(await tool.needsApproval(input, { toolCallId: 'call-1' }), true);
  const approvalId = tool.latchApprovals.get('call-1');
  const pause = { kind: 'approval_required', approvalId };
  assert.equal((await check(agent, pause)).status, 'waiting');
  await srv.latch('approve', approvalId, '--as', 'alice');
  assert.equal((await check(agent, pause)).status, 'resume');
});
