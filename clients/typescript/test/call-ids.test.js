// The adapters key each tool call's begin by the call's id and its canonical arguments (one
// request key for needsApproval's begin and execute's). A model server that numbers its calls
// anew in every conversation (`call_0`, …) gives a later, different call an id already used:
// its other arguments give it another key, so it runs, once. Against a real `latch serve`, the
// SDKs' own run loops.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { generateText, jsonSchema } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { Agent, Runner, Usage, tool } from '@openai/agents-core';

import { Client } from '../src/index.js';
import { latchTool } from '../src/ai-sdk.js';
import { latchToolOptions } from '../src/openai-agents.js';
import { REFUND_POLICY, startServe } from './support/serve.js';

let srv;
let agent;

before(async () => {
  srv = await startServe(REFUND_POLICY);
  agent = new Client({ baseUrl: srv.base, token: srv.agentToken });
});
after(async () => { await srv?.stop(); });

const schema = {
  type: 'object', properties: { refund_id: { type: 'string' }, amount: { type: 'integer' } },
  required: ['refund_id', 'amount'], additionalProperties: false,
};
const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

// A model that calls the refund tool once, always with the id call_0, then stops.
function aiModel(input) {
  let turn = 0;
  return new MockLanguageModelV4({
    doGenerate: async () => (turn++ > 0
      ? { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] }
      : { content: [{ type: 'tool-call', toolCallId: 'call_0', toolName: 'refund', input: JSON.stringify(input) }], finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [] }),
  });
}

test('AI SDK: a tool call id used again for another call runs that call, once', async () => {
  const runs = [];
  const refund = latchTool(agent, 'payments.refund', {
    description: 'Refund a payment', inputSchema: jsonSchema(schema),
    execute: async (a) => { runs.push(a.refund_id); return { refund: `re_${a.refund_id}` }; },
  });
  const errors = [];
  for (const refundId of ['r_id_a', 'r_id_b']) {
    const r = await generateText({ model: aiModel({ refund_id: refundId, amount: 100 }), tools: { refund }, prompt: 'refund', maxRetries: 0 });
    errors.push(...r.steps.flatMap((s) => s.content).filter((p) => p.type === 'tool-error').map((p) => String(p.error?.message ?? p.error)));
  }
  assert.deepEqual(runs, ['r_id_a', 'r_id_b']);
  assert.deepEqual(errors, []);
});

test('OpenAI Agents SDK: a call id used again for another call runs that call, once', async () => {
  const runs = [];
  const seen = [];
  const opts = latchToolOptions(agent, 'payments.refund', {
    name: 'refund', description: 'Refund a payment', parameters: schema, strict: true,
    execute: async (a) => { runs.push(a.refund_id); return { refund: `re_${a.refund_id}` }; },
  });
  const runner = new Runner({ tracingDisabled: true });
  for (const refundId of ['r_id_c', 'r_id_d']) {
    let turn = 0;
    const model = {
      async getResponse(request) {
        for (const item of Array.isArray(request.input) ? request.input : []) {
          if (item.type === 'function_call_result') seen.push(String(item.output?.text ?? item.output));
        }
        if (turn++ > 0) return { usage: new Usage(), output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }] };
        return { usage: new Usage(), output: [{ type: 'function_call', callId: 'call_0', name: 'refund', arguments: JSON.stringify({ refund_id: refundId, amount: 100 }), status: 'completed' }] };
      },
      async *getStreamedResponse() { throw new Error('not streamed'); },
    };
    await runner.run(new Agent({ name: 'refunds', model, tools: [tool(opts)] }), 'refund', { maxTurns: 5 });
  }
  assert.deepEqual(runs, ['r_id_c', 'r_id_d']);
  assert.equal(seen.length, 2, JSON.stringify(seen));
  assert.doesNotMatch(seen.join('\n'), /latch refused/);
});
