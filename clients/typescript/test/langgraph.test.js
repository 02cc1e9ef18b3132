// The LangGraph.js step, in a real graph with a checkpointer against a real `latch serve`: a
// refund retried three times after a lost reply runs once; an approval latch requires
// interrupts the graph, a person approves with `latch approve`, the graph resumes and the refund
// runs once; a different amount under the approval is refused.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { Annotation, Command, END, MemorySaver, START, StateGraph, interrupt } from '@langchain/langgraph';

import { Client } from '../src/index.js';
import { latchStep } from '../src/langgraph.js';
import { REFUND_POLICY, startServe } from './support/serve.js';

let srv;
let agent;

before(async () => {
  srv = await startServe(REFUND_POLICY);
  agent = new Client({ baseUrl: srv.base, token: srv.agentToken });
});
after(async () => { await srv?.stop(); });

const State = Annotation.Root({
  refund: Annotation(),
  result: Annotation(),
  error: Annotation(),
});

// A graph of one node that refunds through the step, keeping a refusal's words in the state.
function graph(step) {
  return new StateGraph(State)
    .addNode('pay', async (s) => {
      try {
        return { result: await step(s.refund), error: null };
      } catch (err) {
        if (err?.name === 'LatchToolError') return { result: null, error: err.message };
        throw err;
      }
    })
    .addEdge(START, 'pay').addEdge('pay', END)
    .compile({ checkpointer: new MemorySaver() });
}

test('a refund retried three times after a lost reply runs once', async () => {
  let refunds = 0;
  const g = graph(latchStep(agent, 'payments.refund', () => { refunds++; throw new Error('socket hang up'); }, { interrupt }));
  const args = { refund_id: 'r_lg_lost', amount: 1200 };
  const errors = [];
  for (const n of [1, 2, 3]) {
    const out = await g.invoke({ refund: args }, { configurable: { thread_id: `lost-${n}` } });
    errors.push(out.error);
  }
  assert.match(errors[0], /outcome_unknown/);
  assert.match(errors[1], /ambiguous \(ambiguous\)/);
  assert.match(errors[2], /ambiguous \(ambiguous\)/);
  assert.equal(refunds, 1);
});

test('approval interrupts the graph; latch approve; resume runs once; another amount is refused', async () => {
  let refunds = 0;
  const step = latchStep(agent, 'payments.refund', (a) => { refunds++; return { refund: `re_${a.refund_id}` }; }, { interrupt });
  const g = graph(step);
  const thread = { configurable: { thread_id: 'big' } };
  const args = { refund_id: 'r_lg_big', amount: 25000 };
  const first = await g.invoke({ refund: args }, thread);
  const intr = first.__interrupt__;
  assert.equal(intr?.length, 1, JSON.stringify(first));
  const approvalId = intr[0].value.approval_id;
  assert.match(approvalId, /^apr_/);
  assert.equal(refunds, 0);

  await srv.latch('approve', approvalId, '--as', 'alice');
  const done = await g.invoke(new Command({ resume: { approved: true } }), thread);
  assert.deepEqual(done.result, { refund: 're_r_lg_big' });
  assert.equal(refunds, 1);
  // One request was asked, not a second on resume.
  const approver = new Client({ baseUrl: srv.base, token: srv.approverToken });
  const asked = (await approver.listApprovals('all')).filter((a) => a.arguments.refund_id === 'r_lg_big');
  assert.equal(asked.length, 1, JSON.stringify(asked.map((a) => [a.approval_id, a.status])));

  // The same refund on a new thread: the committed result, nothing runs.
  const dup = await g.invoke({ refund: args }, { configurable: { thread_id: 'big-again' } });
  assert.match(dup.error, /committed \(committed\).*re_r_lg_big/);
  assert.equal(refunds, 1);

  // Approved for 30000, presented for 31000: refused.
  const other = { refund_id: 'r_lg_other', amount: 30000 };
  const t2 = { configurable: { thread_id: 'other' } };
  const o1 = await g.invoke({ refund: other }, t2);
  const id2 = o1.__interrupt__[0].value.approval_id;
  await srv.latch('approve', id2, '--as', 'alice');
  await assert.rejects(agent.begin('payments.refund', { ...other, amount: 31000 }, { approvalId: id2 }), (err) => err.reason === 'approval_mismatch');
  const o2 = await g.invoke(new Command({ resume: { approved: true } }), t2);
  assert.deepEqual(o2.result, { refund: 're_r_lg_other' });
  assert.equal(refunds, 2);
});
