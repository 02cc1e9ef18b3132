// The client against a real `latch serve` (SQLite): one execution per effect key across
// retries after a lost reply, an approval answered with `latch approve` while the call waits,
// a different amount refused, a committed duplicate answered with its stored result.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  AmbiguousError, ApprovalRefusedError, ApprovalRequiredError, Client, CommittedError,
  DeniedError, OutcomeUnknownError, ProblemError, protect,
} from '../src/index.js';
import { startServe } from './support/serve.js';

const policy = `schema: latch.policy/v1
actions:
  payments.refund:
    effect: "refund:{refund_id}"
    rules:
      - when: { amount_lte: 5000 }
        decision: allow
      - decision: approve
  payments.void:
    decision: deny
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

// A payment server that refunds, counting each refund it made by the idempotency key it got.
function paymentServer({ loseReply }) {
  const refunds = [];
  return {
    refunds,
    async refund(args, reservation) {
      refunds.push({ args, key: reservation.idempotencyToken });
      if (loseReply) throw new Error('read ECONNRESET: the reply was lost');
      return { refund: `re_${args.refund_id}`, amount: args.amount };
    },
  };
}

test('a lost reply is unknown, and retries are refused: the payment server counts one refund', async () => {
  const pay = paymentServer({ loseReply: true });
  const args = { refund_id: 'r_lost', amount: 1200 };
  await assert.rejects(protect(agent, 'payments.refund', args, pay.refund), (err) => {
    assert.ok(err instanceof OutcomeUnknownError, `first try: ${err}`);
    assert.equal(err.reason, 'outcome_unknown');
    assert.equal(err.effectKey, 'refund:r_lost');
    assert.match(err.cause.message, /ECONNRESET/);
    return true;
  });
  for (const attempt of [2, 3]) {
    await assert.rejects(protect(agent, 'payments.refund', args, pay.refund), (err) => {
      assert.ok(err instanceof AmbiguousError, `try ${attempt}: ${err}`);
      assert.equal(err.kind, 'ambiguous');
      assert.equal(err.reason, 'ambiguous');
      assert.equal(err.status, 409);
      assert.equal(err.effectKey, 'refund:r_lost');
      return true;
    });
  }
  assert.equal(pay.refunds.length, 1);
  const effect = await approver.getEffect('refund:r_lost');
  assert.equal(effect.state, 'ambiguous');
});

test('a begin whose answer is lost is sent again with its key and handed the same reservation', async () => {
  let begins = 0;
  const reservations = [];
  // A network that delivers the first begin to the server and loses the server's answer.
  const lossy = async (url, init) => {
    const resp = await fetch(url, init);
    if (init.method === 'POST' && url.endsWith('/v1/actions')) {
      begins++;
      const body = await resp.clone().json();
      reservations.push(body.action_id);
      if (begins === 1) throw new TypeError('fetch failed: socket hang up');
    }
    return resp;
  };
  const c = new Client({ baseUrl: srv.base, token: srv.agentToken, fetch: lossy });
  const pay = paymentServer({ loseReply: false });
  const got = await protect(c, 'payments.refund', { refund_id: 'r_replay', amount: 700 }, pay.refund);
  assert.deepEqual(got, { refund: 're_r_replay', amount: 700 });
  assert.equal(begins, 2);
  assert.equal(reservations[0], reservations[1], 'the re-sent begin is handed the first reservation');
  assert.equal(pay.refunds.length, 1);
});

test('a committed duplicate is refused with the stored result, and runs nothing', async () => {
  const pay = paymentServer({ loseReply: false });
  const args = { refund_id: 'r_dup', amount: 900 };
  const first = await protect(agent, 'payments.refund', args, pay.refund);
  await assert.rejects(protect(agent, 'payments.refund', args, pay.refund), (err) => {
    assert.ok(err instanceof CommittedError, String(err));
    assert.equal(err.reason, 'committed');
    assert.equal(err.state, 'committed');
    assert.deepEqual(err.result, first);
    return true;
  });
  assert.equal(pay.refunds.length, 1);
});

test('approval required, approved with latch approve while the call waits, runs once; another amount is refused', async () => {
  const pay = paymentServer({ loseReply: false });
  const args = { refund_id: 'r_big', amount: 25000 };

  // Without a wait the call is told to ask a person, and nothing runs.
  let approvalId;
  await assert.rejects(protect(agent, 'payments.refund', args, pay.refund), (err) => {
    assert.ok(err instanceof ApprovalRequiredError, String(err));
    assert.equal(err.reason, 'approval_required');
    assert.match(err.approvalId, /^apr_/);
    assert.equal(err.approval.status, 'pending');
    approvalId = err.approvalId;
    return true;
  });
  assert.equal(pay.refunds.length, 0);

  // Presented while still pending: refused, nothing runs.
  await assert.rejects(protect(agent, 'payments.refund', args, pay.refund, { approvalId }),
    (err) => err instanceof ApprovalRefusedError && err.reason === 'approval_pending');

  // The call waits; a person approves it with the CLI meanwhile.
  let settled = false;
  const waiting = protect(agent, 'payments.refund', args, pay.refund, { waitSeconds: 30 })
    .finally(() => { settled = true; });
  await new Promise((r) => setTimeout(r, 500)); // the begin is at the server, waiting
  const pending = (await approver.listApprovals('pending')).filter((a) => a.arguments?.refund_id === 'r_big');
  assert.equal(pending.length, 1, 'the waiting call asks with the pending request, not a second one');
  assert.equal(settled, false, 'the call waits for the answer');
  assert.equal(pay.refunds.length, 0);
  await srv.latch('approve', pending[0].approval_id, '--as', 'alice');
  const got = await waiting;
  assert.deepEqual(got, { refund: 're_r_big', amount: 25000 });
  assert.equal(pay.refunds.length, 1);

  // The same refund again: a duplicate, nothing runs.
  await assert.rejects(protect(agent, 'payments.refund', args, pay.refund), CommittedError);

  // An approval is bound to the exact arguments: granted for 30000, presented with 31000.
  const other = { refund_id: 'r_other', amount: 30000 };
  let otherId;
  await assert.rejects(protect(agent, 'payments.refund', other, pay.refund), (err) => {
    otherId = err.approvalId;
    return err instanceof ApprovalRequiredError;
  });
  await srv.latch('approve', otherId, '--as', 'alice');
  await assert.rejects(protect(agent, 'payments.refund', { ...other, amount: 31000 }, pay.refund, { approvalId: otherId }), (err) => {
    assert.ok(err instanceof ApprovalRefusedError, String(err));
    assert.equal(err.reason, 'approval_mismatch');
    assert.equal(err.status, 403);
    return true;
  });
  assert.equal(pay.refunds.length, 1, 'the refused amount ran nothing');
});

test('the next attempt, presenting nothing, runs on the grant once', async () => {
  // A retry cannot present the request its first attempt raised (a queue, a restarted worker):
  // once a person grants it, the same call again runs on the grant, once.
  const pay = paymentServer({ loseReply: false });
  const args = { refund_id: 'r_next', amount: 26000 };
  let approvalId;
  await assert.rejects(protect(agent, 'payments.refund', args, pay.refund), (err) => {
    assert.ok(err instanceof ApprovalRequiredError, String(err));
    assert.equal(err.effectKey, 'refund:r_next');
    approvalId = err.approvalId;
    return true;
  });
  await srv.latch('approve', approvalId, '--as', 'alice');
  await assert.rejects(protect(agent, 'payments.refund', { ...args, amount: 26001 }, pay.refund), ApprovalRequiredError);
  assert.deepEqual(await protect(agent, 'payments.refund', args, pay.refund), { refund: 're_r_next', amount: 26000 });
  await assert.rejects(protect(agent, 'payments.refund', args, pay.refund), CommittedError);
  assert.equal(pay.refunds.length, 1);
});

test('a denial and a non-refusal problem are told apart', async () => {
  await assert.rejects(agent.begin('payments.void', {}), (err) => {
    assert.ok(err instanceof DeniedError, String(err));
    assert.equal(err.kind, 'denied');
    assert.equal(err.rule, 'decision');
    return true;
  });
  // An agent's token on a person's route: a problem with no kind, not a refusal.
  await assert.rejects(agent.listApprovals('pending'), (err) => {
    assert.ok(err instanceof ProblemError, String(err));
    assert.equal(err.status, 403);
    assert.equal(err.reason, 'forbidden');
    return true;
  });
});
