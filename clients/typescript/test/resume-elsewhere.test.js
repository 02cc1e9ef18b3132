// Resuming where the adapter that asked is gone. The AI SDK's messages and the Agents SDK's run
// state go through JSON to another OS process (support/resume-child.js), which makes its own
// adapter and resumes; a LangGraph graph is made anew with a new step on the same checkpointer
// (a checkpointer shared between processes is LangGraph's, not latch's). None presents the
// approval id: latch finds the granted, unspent request for the same action and principal, and
// the refund runs once. Against a real `latch serve`, each framework's own run loop.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { generateText, jsonSchema } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { Agent, Runner, Usage, tool } from '@openai/agents-core';
import { Annotation, Command, END, MemorySaver, START, StateGraph, interrupt } from '@langchain/langgraph';

import { Client } from '../src/index.js';
import { latchTool } from '../src/ai-sdk.js';
import { latchToolOptions } from '../src/openai-agents.js';
import { latchStep } from '../src/langgraph.js';
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

// resumeElsewhere resumes saved in another node process with its own adapter; it resolves to
// {runs, output}: the amounts that process's refund ran with and what the framework returned.
function resumeElsewhere(adapter, saved) {
  const child = fileURLToPath(new URL('./support/resume-child.js', import.meta.url));
  return new Promise((resolveRun, reject) => {
    const p = execFile(process.execPath, [child], { timeout: 30_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`resume-child ${adapter}: ${err.message}\n${stderr}`));
      else resolveRun(JSON.parse(stdout));
    });
    p.stdin.end(JSON.stringify({ adapter, base: srv.base, token: srv.agentToken, saved }));
  });
}

// requestsFor lists the latch requests asked for a refund id, with their status.
async function requestsFor(refundId) {
  return (await approver.listApprovals('all')).filter((a) => a.arguments.refund_id === refundId).map((a) => a.status);
}

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

let calls = 0; // tool call ids are unique, as a provider's are
function aiModel(inputs) {
  let turn = 0;
  return new MockLanguageModelV4({
    doGenerate: async () => {
      const input = inputs[turn++];
      if (!input) return { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
      return {
        content: [{ type: 'tool-call', toolCallId: `call_elsewhere_${++calls}`, toolName: 'refund', input: JSON.stringify(input) }],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [],
      };
    },
  });
}

const schema = {
  type: 'object', properties: { refund_id: { type: 'string' }, amount: { type: 'integer' } },
  required: ['refund_id', 'amount'], additionalProperties: false,
};

test('AI SDK: resumed in another process, the approved call runs on the grant, once', async () => {
  const runs = [];
  const asking = latchTool(agent, 'payments.refund', {
    description: 'Refund a payment', inputSchema: jsonSchema(schema),
    execute: async (a) => { runs.push(a.amount); return { refund: `re_${a.refund_id}` }; },
  });
  const args = { refund_id: 'r_else_ai', amount: 26000 };
  const first = await generateText({ model: aiModel([args]), tools: { refund: asking }, prompt: 'refund', maxRetries: 0 });
  const request = first.content.find((p) => p.type === 'tool-approval-request');
  assert.ok(request, JSON.stringify(first.content));
  await srv.latch('approve', asking.latchApprovals.get(request.toolCall.toolCallId), '--as', 'alice');

  const elsewhere = await resumeElsewhere('ai-sdk', [
    { role: 'user', content: 'refund' }, ...first.response.messages,
    { role: 'tool', content: [{ type: 'tool-approval-response', approvalId: request.approvalId, approved: true }] },
  ]);
  assert.deepEqual(elsewhere.output, [{ type: 'json', value: { refund: 're_r_else_ai' } }]);
  assert.deepEqual(elsewhere.runs, [26000]);
  assert.deepEqual(runs, []);
  assert.deepEqual(await requestsFor('r_else_ai'), ['consumed']);
});

function agentsModel(inputs) {
  let turn = 0;
  return {
    async getResponse() {
      const input = inputs[turn++];
      if (!input) return { usage: new Usage(), output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }] };
      return { usage: new Usage(), output: [{ type: 'function_call', callId: 'call_elsewhere_oa', name: 'refund', arguments: JSON.stringify(input), status: 'completed' }] };
    },
    async *getStreamedResponse() { throw new Error('not streamed'); },
  };
}

test('OpenAI Agents SDK: a run state resumed in another process runs on the grant, once', async () => {
  const runs = [];
  const runner = new Runner({ tracingDisabled: true });
  const opts = latchToolOptions(agent, 'payments.refund', {
    name: 'refund', description: 'Refund a payment', parameters: schema, strict: true,
    execute: async (a) => { runs.push(a.amount); return { refund: `re_${a.refund_id}` }; },
  });
  const asking = new Agent({ name: 'refunds', model: agentsModel([{ refund_id: 'r_else_oa', amount: 27000 }]), tools: [tool(opts)] });
  const first = await runner.run(asking, 'refund r_else_oa', { maxTurns: 10 });
  assert.equal(first.interruptions.length, 1);
  assert.equal(first.interruptions[0].rawItem.type, 'function_call'); // as openai-agents-js.md reads it
  await srv.latch('approve', opts.latchApprovals.get(first.interruptions[0].rawItem.callId), '--as', 'alice');

  const elsewhere = await resumeElsewhere('openai-agents', first.state.toString());
  assert.deepEqual(elsewhere.output, { finalOutput: 'done', interruptions: 0 });
  assert.deepEqual(elsewhere.runs, [27000]);
  assert.deepEqual(runs, []);
  assert.deepEqual(await requestsFor('r_else_oa'), ['consumed']);
});

test('LangGraph.js: a graph resumed with a new step runs on the grant, once', async () => {
  const runs = [];
  const State = Annotation.Root({ refund: Annotation(), result: Annotation() });
  const checkpointer = new MemorySaver(); // the store a graph resumed elsewhere shares
  const make = () => {
    const step = latchStep(agent, 'payments.refund', (a) => { runs.push(a.amount); return { refund: `re_${a.refund_id}` }; }, { interrupt });
    return new StateGraph(State).addNode('pay', async (s) => ({ result: await step(s.refund) }))
      .addEdge(START, 'pay').addEdge('pay', END).compile({ checkpointer });
  };
  const thread = { configurable: { thread_id: 'elsewhere' } };
  const asking = make();
  const first = await asking.invoke({ refund: { refund_id: 'r_else_lg', amount: 28000 } }, thread);
  const approvalId = first.__interrupt__?.[0]?.value?.approval_id;
  assert.match(approvalId ?? '', /^apr_/, JSON.stringify(first));
  // The thread's state holds the same interrupt, as langgraph-js.md reads it.
  const paused = await asking.getState(thread);
  assert.equal(paused.tasks.flatMap((t) => t.interrupts)[0]?.value?.approval_id, approvalId);
  await srv.latch('approve', approvalId, '--as', 'alice');

  const done = await make().invoke(new Command({ resume: { approved: true } }), thread);
  assert.deepEqual(done.result, { refund: 're_r_else_lg' });
  assert.deepEqual(runs, [28000]);
  assert.deepEqual(await requestsFor('r_else_lg'), ['consumed']);
});

test('AI SDK: resumed before the person answers, nothing runs; the model\'s next call after the grant runs on it, once', async () => {
  const runs = [];
  const refund = latchTool(agent, 'payments.refund', {
    description: 'Refund a payment', inputSchema: jsonSchema(schema),
    execute: async (a) => { runs.push(a.amount); return { refund: `re_${a.refund_id}` }; },
  });
  const args = { refund_id: 'r_early_ai', amount: 26500 };
  const first = await generateText({ model: aiModel([args]), tools: { refund }, prompt: 'refund', maxRetries: 0 });
  const request = first.content.find((p) => p.type === 'tool-approval-request');
  const latchId = refund.latchApprovals.get(request.toolCall.toolCallId);
  const early = await generateText({
    model: aiModel([]), tools: { refund }, maxRetries: 0,
    messages: [{ role: 'user', content: 'refund' }, ...first.response.messages,
      { role: 'tool', content: [{ type: 'tool-approval-response', approvalId: request.approvalId, approved: true }] }],
  });
  const out = (early.initialResponseMessages ?? []).filter((m) => m.role === 'tool').flatMap((m) => m.content).filter((p) => p.type === 'tool-result');
  assert.equal(out.length, 1, JSON.stringify(early.initialResponseMessages));
  assert.equal(out[0].output.type, 'error-text');
  assert.match(out[0].output.value, new RegExp(`approval_pending \\(approval_refused\\).*${latchId}`));
  assert.deepEqual(runs, []);

  await srv.latch('approve', latchId, '--as', 'alice');
  // The model asks again, a new tool call with the same arguments: it runs on the grant.
  const again = await generateText({ model: aiModel([args]), tools: { refund: latchTool(agent, 'payments.refund', {
    description: 'Refund a payment', inputSchema: jsonSchema(schema),
    execute: async (a) => { runs.push(a.amount); return { refund: `re_${a.refund_id}` }; },
  }) }, prompt: 'refund', stopWhen: () => false, maxRetries: 0 });
  assert.equal(again.content.filter((p) => p.type === 'tool-approval-request').length, 0, JSON.stringify(again.content));
  assert.deepEqual(runs, [26500]);
  assert.deepEqual(await requestsFor('r_early_ai'), ['consumed']);
});
