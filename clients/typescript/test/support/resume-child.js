// A process of its own that resumes a framework's pause another process started: it reads
// {adapter, base, token, saved} as JSON on stdin, makes its own adapter (nothing of the first
// process's memory), resumes, and prints {runs, output} as JSON: the amounts its refund ran
// with and what the framework handed back. resume-elsewhere.test.js starts it.

import { generateText, jsonSchema } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { Agent, Runner, RunState, Usage, tool } from '@openai/agents-core';

import { Client } from '../../src/index.js';
import { latchTool } from '../../src/ai-sdk.js';
import { latchToolOptions } from '../../src/openai-agents.js';

const schema = {
  type: 'object', properties: { refund_id: { type: 'string' }, amount: { type: 'integer' } },
  required: ['refund_id', 'amount'], additionalProperties: false,
};

let input = '';
for await (const chunk of process.stdin) input += chunk;
const { adapter, base, token, saved } = JSON.parse(input);
const client = new Client({ baseUrl: base, token });
const runs = [];
const execute = async (a) => { runs.push(a.amount); return { refund: `re_${a.refund_id}` }; };

let output;
if (adapter === 'ai-sdk') {
  const refund = latchTool(client, 'payments.refund', { description: 'Refund a payment', inputSchema: jsonSchema(schema), execute });
  // The model answers once the approved call ran: the SDK runs it before asking the model.
  const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
  const model = new MockLanguageModelV4({
    doGenerate: async () => ({ content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] }),
  });
  const resumed = await generateText({ model, tools: { refund }, messages: saved, maxRetries: 0 });
  output = (resumed.initialResponseMessages ?? []).filter((m) => m.role === 'tool')
    .flatMap((m) => m.content).filter((p) => p.type === 'tool-result').map((p) => p.output);
} else if (adapter === 'openai-agents') {
  const model = {
    async getResponse() {
      return { usage: new Usage(), output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }] };
    },
    async *getStreamedResponse() { throw new Error('not streamed'); },
  };
  const opts = latchToolOptions(client, 'payments.refund', { name: 'refund', description: 'Refund a payment', parameters: schema, strict: true, execute });
  const agent = new Agent({ name: 'refunds', model, tools: [tool(opts)] });
  const state = await RunState.fromString(agent, saved);
  state.approve(state.getInterruptions()[0]);
  const resumed = await new Runner({ tracingDisabled: true }).run(agent, state, { maxTurns: 10 });
  output = { finalOutput: resumed.finalOutput, interruptions: resumed.interruptions?.length ?? 0 };
} else {
  throw new Error(`resume-child: no adapter ${adapter}`);
}
process.stdout.write(JSON.stringify({ runs, output }));
