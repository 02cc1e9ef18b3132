// The AI SDK adapter, driven by the SDK's own generateText with a scripted model (no network)
// against a real `latch serve`: a refund tool retried three times after a lost reply runs
// once; an approval latch requires stops the SDK with its tool-approval-request, a person
// approves with `latch approve`, the SDK resumes and the refund runs once; a different amount
// is refused and the model reads why.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { generateText, jsonSchema } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';

import { Client } from '../src/index.js';
import { latchTool } from '../src/ai-sdk.js';
import { REFUND_POLICY, startServe } from './support/serve.js';

let srv;
let agent;

before(async () => {
  srv = await startServe(REFUND_POLICY);
  agent = new Client({ baseUrl: srv.base, token: srv.agentToken });
});
after(async () => { await srv?.stop(); });

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

// A model that calls the refund tool once per turn with the scripted inputs, then stops.
let models = 0;
function scriptedModel(calls) {
  let turn = 0;
  const model = ++models;
  return new MockLanguageModelV4({
    doGenerate: async () => {
      const input = calls[turn++];
      if (!input) return { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
      return {
        content: [{ type: 'tool-call', toolCallId: `call_${model}_${turn}`, toolName: 'refund', input: JSON.stringify(input) }],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [],
      };
    },
  });
}

const refundSchema = jsonSchema({
  type: 'object', properties: { refund_id: { type: 'string' }, amount: { type: 'integer' } },
  required: ['refund_id', 'amount'], additionalProperties: false,
});

function approvedResults(result) {
  return (result.initialResponseMessages ?? []).filter((m) => m.role === 'tool')
    .flatMap((m) => m.content).filter((p) => p.type === 'tool-result');
}

function toolErrors(result) {
  return result.steps.flatMap((s) => s.content).filter((p) => p.type === 'tool-error').map((p) => String(p.error?.message ?? p.error));
}

test('a refund retried three times after a lost reply runs once; the model reads why', async () => {
  let refunds = 0;
  const refund = latchTool(agent, 'payments.refund', {
    description: 'Refund a payment', inputSchema: refundSchema,
    execute: async () => { refunds++; throw new Error('socket hang up: the reply was lost'); },
  });
  const args = { refund_id: 'r_ai_lost', amount: 1200 };
  const result = await generateText({
    model: scriptedModel([args, args, args]), tools: { refund }, prompt: 'refund r_ai_lost',
    stopWhen: () => false, maxRetries: 0,
  });
  const errors = toolErrors(result);
  assert.equal(errors.length, 3, errors.join('\n'));
  assert.match(errors[0], /outcome_unknown/);
  assert.match(errors[1], /latch refused payments\.refund: ambiguous \(ambiguous\)/);
  assert.match(errors[2], /ambiguous/);
  assert.equal(refunds, 1);
});

test('approval required interrupts the SDK; approved with latch approve, it resumes and runs once; another amount is refused', async () => {
  let refunds = 0;
  const refund = latchTool(agent, 'payments.refund', {
    description: 'Refund a payment', inputSchema: refundSchema,
    execute: async (args) => { refunds++; return { refund: `re_${args.refund_id}`, amount: args.amount }; },
  });
  const args = { refund_id: 'r_ai_big', amount: 25000 };
  const first = await generateText({ model: scriptedModel([args]), tools: { refund }, prompt: 'refund', maxRetries: 0 });
  const request = first.content.find((p) => p.type === 'tool-approval-request');
  assert.ok(request, `no tool-approval-request in ${JSON.stringify(first.content)}`);
  assert.equal(refunds, 0);
  const latchId = refund.latchApprovals.get(request.toolCall.toolCallId);
  assert.match(latchId, /^apr_/);

  await srv.latch('approve', latchId, '--as', 'alice');


  const messages = [
    { role: 'user', content: 'refund' },
    ...first.response.messages,
    { role: 'tool', content: [{ type: 'tool-approval-response', approvalId: request.approvalId, approved: true }] },
  ];
  const resumed = await generateText({ model: scriptedModel([]), tools: { refund }, messages, maxRetries: 0 });
  // The SDK runs the approved call before the model's next turn and hands its result back in
  // initialResponseMessages, the tool message the model then reads.
  const results = approvedResults(resumed);
  assert.equal(results.length, 1, JSON.stringify(resumed.initialResponseMessages));
  assert.deepEqual(results[0].output, { type: 'json', value: { refund: 're_r_ai_big', amount: 25000 } });
  assert.equal(refunds, 1);

  // The model asks again with the same refund: a committed duplicate, with its stored result.
  const again = await generateText({ model: scriptedModel([args]), tools: { refund }, prompt: 'refund', stopWhen: () => false, maxRetries: 0 });
  const dup = toolErrors(again);
  assert.equal(dup.length, 1, JSON.stringify(again.steps.flatMap((s) => s.content)));
  assert.match(dup[0], /committed \(committed\).*"refund":"re_r_ai_big"/);
  assert.equal(refunds, 1);

  // Approved for 30000; the model then asks for 31000 under that approval: refused.
  const other = { refund_id: 'r_ai_other', amount: 30000 };
  const ask = await generateText({ model: scriptedModel([other]), tools: { refund }, prompt: 'refund', maxRetries: 0 });
  const req2 = ask.content.find((p) => p.type === 'tool-approval-request');
  const latch2 = refund.latchApprovals.get(req2.toolCall.toolCallId);
  await srv.latch('approve', latch2, '--as', 'alice');
  // Another amount in the approved call's place.
  const tampered = ask.response.messages.map((m) => (m.role !== 'assistant' ? m : {
    ...m, content: m.content.map((p) => (p.type === 'tool-call' ? { ...p, input: { ...other, amount: 31000 } } : p)),
  }));
  const refused = await generateText({
    model: scriptedModel([]), tools: { refund }, maxRetries: 0,
    messages: [{ role: 'user', content: 'refund' }, ...tampered,
      { role: 'tool', content: [{ type: 'tool-approval-response', approvalId: req2.approvalId, approved: true }] }],
  });
  const errs = approvedResults(refused);
  assert.equal(errs.length, 1, JSON.stringify(refused.initialResponseMessages));
  assert.equal(errs[0].output.type, 'error-text');
  // 31000 is a call of its own: asked for its own approval, still pending; never run on the
  // approval given for 30000.
  assert.match(errs[0].output.value, /approval_pending \(approval_refused\)/);
  assert.doesNotMatch(errs[0].output.value, new RegExp(latch2));
  assert.equal(refunds, 1);
});
