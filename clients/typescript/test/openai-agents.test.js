// The OpenAI Agents SDK adapter, driven by the SDK's own run loop with a scripted model (no
// network) against a real `latch serve`: a refund retried three times after a lost reply runs
// once; an approval latch requires interrupts the run, a person approves with `latch approve`,
// the run resumes and the refund runs once; the same refund again is refused with its stored
// result.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { Agent, Runner, Usage, tool } from '@openai/agents-core';

import { Client } from '../src/index.js';
import { latchToolOptions } from '../src/openai-agents.js';
import { REFUND_POLICY, startServe } from './support/serve.js';

let srv;
let agent;

before(async () => {
  srv = await startServe(REFUND_POLICY);
  agent = new Client({ baseUrl: srv.base, token: srv.agentToken });
});
after(async () => { await srv?.stop(); });

let calls = 0;
// A model that calls the refund tool once per turn with the scripted inputs, then answers; it
// records each tool output it was shown, once (every turn shows the whole history).
function scriptedModel(inputs, seen) {
  let turn = 0;
  const shown = new Set();
  return {
    async getResponse(request) {
      for (const item of Array.isArray(request.input) ? request.input : []) {
        if (item.type === 'function_call_result' && !shown.has(item.callId)) {
          shown.add(item.callId);
          seen.push(item.output?.text ?? item.output);
        }
      }
      const input = inputs[turn++];
      if (!input) {
        return { usage: new Usage(), output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }] };
      }
      return { usage: new Usage(), output: [{ type: 'function_call', callId: `call_${++calls}`, name: 'refund', arguments: JSON.stringify(input), status: 'completed' }] };
    },
    async *getStreamedResponse() { throw new Error('not streamed'); },
  };
}

const parameters = {
  type: 'object', properties: { refund_id: { type: 'string' }, amount: { type: 'integer' } },
  required: ['refund_id', 'amount'], additionalProperties: false,
};

const runner = new Runner({ tracingDisabled: true });

test('a refund retried three times after a lost reply runs once; the model reads why', async () => {
  let refunds = 0;
  const refund = tool(latchToolOptions(agent, 'payments.refund', {
    name: 'refund', description: 'Refund a payment', parameters, strict: true,
    execute: async () => { refunds++; throw new Error('socket hang up: the reply was lost'); },
  }));
  const args = { refund_id: 'r_oa_lost', amount: 1200 };
  const seen = [];
  const a = new Agent({ name: 'refunds', model: scriptedModel([args, args, args], seen), tools: [refund] });
  const result = await runner.run(a, 'refund r_oa_lost', { maxTurns: 10 });
  assert.equal(result.finalOutput, 'done');
  assert.equal(seen.length, 3, JSON.stringify(seen));
  assert.match(String(seen[0]), /outcome_unknown/);
  assert.match(String(seen[1]), /latch refused payments\.refund: ambiguous \(ambiguous\)/);
  assert.match(String(seen[2]), /ambiguous/);
  assert.equal(refunds, 1);
});

test('approval required interrupts the run; approved with latch approve, it resumes and runs once; another amount is refused', async () => {
  let refunds = 0;
  const opts = latchToolOptions(agent, 'payments.refund', {
    name: 'refund', description: 'Refund a payment', parameters, strict: true,
    execute: async (args) => { refunds++; return { refund: `re_${args.refund_id}`, amount: args.amount }; },
  });
  const refund = tool(opts);
  const args = { refund_id: 'r_oa_big', amount: 25000 };
  const seen = [];
  const a = new Agent({ name: 'refunds', model: scriptedModel([args], seen), tools: [refund] });
  const first = await runner.run(a, 'refund r_oa_big', { maxTurns: 10 });
  assert.equal(first.interruptions.length, 1, 'the run stops for the approval');
  assert.equal(refunds, 0);
  const item = first.interruptions[0];
  const latchId = opts.latchApprovals.get(item.rawItem.callId);
  assert.match(latchId, /^apr_/);

  await srv.latch('approve', latchId, '--as', 'alice');
  first.state.approve(item);
  const resumed = await runner.run(a, first.state, { maxTurns: 10 });
  assert.equal(resumed.interruptions?.length ?? 0, 0);
  assert.equal(resumed.finalOutput, 'done');
  assert.equal(refunds, 1);
  assert.ok(seen.some((s) => /re_r_oa_big/.test(String(s))), JSON.stringify(seen));

  // The same refund again: a committed duplicate, the model reads the stored result.
  const seen2 = [];
  const again = new Agent({ name: 'refunds', model: scriptedModel([args], seen2), tools: [refund] });
  const r2 = await runner.run(again, 'refund r_oa_big again', { maxTurns: 10 });
  assert.equal(r2.interruptions?.length ?? 0, 0);
  assert.equal(seen2.length, 1, JSON.stringify(seen2));
  assert.match(String(seen2[0]), /committed \(committed\).*re_r_oa_big/);
  assert.equal(refunds, 1);

  // Approved for 30000, the approved call's id presented with 31000 (the SDK refuses to run
  // changed arguments itself, so the adapter's execute is called directly): nothing runs, and
  // 31000 is a call of its own that needs its own approval, never the one given for 30000.
  const other = { refund_id: 'r_oa_other', amount: 30000 };
  const seen3 = [];
  const a3 = new Agent({ name: 'refunds', model: scriptedModel([other], seen3), tools: [refund] });
  const asked = await runner.run(a3, 'refund r_oa_other', { maxTurns: 10 });
  const item3 = asked.interruptions[0];
  const granted3 = opts.latchApprovals.get(item3.rawItem.callId);
  await srv.latch('approve', granted3, '--as', 'alice');
  await assert.rejects(opts.execute({ ...other, amount: 31000 }, undefined, { toolCall: item3.rawItem }), (err) => {
    assert.equal(err.name, 'LatchToolError');
    assert.match(err.message, /approval_required \(approval_required\)/);
    assert.doesNotMatch(err.message, new RegExp(granted3));
    assert.match(opts.errorFunction(undefined, err), /approval_required/);
    return true;
  });
  assert.equal(refunds, 1);
  asked.state.approve(item3);
  const r3 = await runner.run(a3, asked.state, { maxTurns: 10 });
  assert.equal(r3.finalOutput, 'done');
  assert.match(String(seen3[0]), /re_r_oa_other/);
  assert.equal(refunds, 2);
});
