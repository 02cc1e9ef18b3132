// The adapter conformance table the Go adapters replay (latchtest/refusals.json, read from the
// repository, not copied) replayed through this client against a real `latch serve` started with
// the table's policy, acting as the table's principal: every case once through protect(), once
// through the AI SDK tool (latchTool) and once through the OpenAI Agents SDK tool
// (latchToolOptions), the last two read back from what the model would see. A handler
// whose argument `mode` says what it does (succeed, lose_reply, not_executed) counts its runs;
// each step's outcome is compared with the table's expectation: whether the handler ran, the
// refusal's kind and reason word, its effect key, its approval request, and a duplicate's
// stored result.

import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { Client, NotExecuted, RefusalError, protect } from '../src/index.js';
import { LatchToolError, latchTool } from '../src/ai-sdk.js';
import { latchToolOptions } from '../src/openai-agents.js';
import { latchStep } from '../src/langgraph.js';
import { repo, startServe } from './support/serve.js';

const table = JSON.parse(await readFile(join(repo, 'latchtest/refusals.json'), 'utf8'));

// The fields this replay understands: a field the table gains must be understood here before
// the table passes, never silently ignored.
const STEP_FIELDS = new Set(['call', 'approve', 'expect']);
const CALL_FIELDS = new Set(['action', 'id', 'amount', 'mode']);
const EXPECT_FIELDS = new Set(['ran', 'kind', 'reason', 'effect_key', 'approval', 'other_approval_than', 'result_of']);

test('the table is one this replay reads whole', () => {
  assert.equal(table.schema, 'latch.conformance/v1');
  assert.ok(table.cases.length >= 8, `only ${table.cases.length} cases`);
  for (const c of table.cases) {
    for (const [i, s] of c.steps.entries()) {
      const at = `${c.name} step ${i}`;
      for (const k of Object.keys(s)) assert.ok(STEP_FIELDS.has(k), `${at}: field ${k} unknown to this replay`);
      assert.ok((s.call && s.expect && s.approve === undefined) || (s.approve !== undefined && !s.call), `${at}: a call with its expectation, or an approve`);
      for (const k of Object.keys(s.call ?? {})) assert.ok(CALL_FIELDS.has(k), `${at}: call field ${k} unknown to this replay`);
      for (const k of Object.keys(s.expect ?? {})) assert.ok(EXPECT_FIELDS.has(k), `${at}: expect field ${k} unknown to this replay`);
    }
  }
});

// LostReply is what the handler throws in mode lose_reply, after acting: not NotExecuted.
class LostReply extends Error {}

/** kit is the work of every call: it does what the call's mode says and counts its runs. */
function kit() {
  const runs = new Map();
  const key = (action, id) => `${action}\u0000${id}`;
  return {
    count: (call) => runs.get(key(call.action, call.id)) ?? 0,
    handler: (action) => async (args) => {
      const n = (runs.get(key(action, args.id)) ?? 0) + 1;
      runs.set(key(action, args.id), n);
      if (args.mode === 'lose_reply') throw new LostReply('connection reset after the effect (a lost reply)');
      if (args.mode === 'not_executed') throw new NotExecuted('the payment provider refused before acting');
      return { id: args.id, amount: args.amount, run: n };
    },
  };
}

const argsOf = (call) => ({ id: call.id, amount: call.amount, mode: call.mode });

// className is the error class this client throws for a refusal kind: approval_required ->
// ApprovalRequiredError. Spelled out here, not read from the client's own table, so a kind
// mapped to the wrong class fails.
const className = (kind) => `${kind.split('_').map((w) => w[0].toUpperCase() + w.slice(1)).join('')}Error`;

/**
 * Each way of making a call returns an Outcome: {result} on success, {refusal: {kind, reason,
 * effectKey, approvalId, result}} for a refusal the client surfaced, or {err} for an error that
 * carries no latch word (allowed only for not_executed: the handler's own error).
 */
const viaProtect = (k, agent) => async (call) => {
  try {
    return { result: await protect(agent, call.action, argsOf(call), k.handler(call.action)) };
  } catch (err) {
    if (!(err instanceof RefusalError)) return { err };
    assert.equal(err.name, className(err.kind), `a ${err.kind} refusal (${err.reason}) thrown as ${err.name}`);
    return {
      refusal: { kind: err.kind, reason: err.reason, effectKey: err.effectKey, approvalId: err.approvalId, result: err.result },
    };
  }
};

// readToolMessage reads back what a model sees of a refusal: "latch refused ACTION: REASON
// (KIND): advice[; its result: JSON][; approval ID]".
function readToolMessage(action, text) {
  const m = text.match(/^latch refused (\S+): (\w+) \((\w+)\): (.*)$/s);
  assert.ok(m, `the model reads ${JSON.stringify(text)}: not a latch refusal`);
  assert.equal(m[1], action);
  let rest = m[4];
  let approvalId;
  const apr = rest.match(/; approval (\S+)$/);
  if (apr) {
    approvalId = apr[1];
    rest = rest.slice(0, apr.index);
  }
  const at = rest.indexOf('; its result: ');
  const result = at < 0 ? undefined : JSON.parse(rest.slice(at + '; its result: '.length));
  return { kind: m[3], reason: m[2], result, approvalId };
}

/**
 * viaAISDK makes each call as the AI SDK does with a latchTool: needsApproval first, then (when
 * it answers false) execute; a tool call whose approval latch required stops there, as the SDK
 * stops with a tool-approval-request naming it. What the model reads of a refusal is the tool
 * error's message; the effect key it does not name is not compared.
 */
const viaAISDK = (k, agent) => {
  const tools = new Map();
  let n = 0;
  return async (call) => {
    if (!tools.has(call.action)) {
      tools.set(call.action, latchTool(agent, call.action, { description: call.action, inputSchema: {}, execute: k.handler(call.action) }));
    }
    const t = tools.get(call.action);
    const toolCallId = `call_${++n}`;
    const input = argsOf(call);
    if (await t.needsApproval(input, { toolCallId, messages: [] })) {
      const approvalId = t.latchApprovals.get(toolCallId);
      return { refusal: { kind: 'approval_required', reason: 'approval_required', approvalId, noEffectKey: true } };
    }
    try {
      return { result: await t.execute(input, { toolCallId, messages: [] }) };
    } catch (err) {
      if (!(err instanceof LatchToolError)) return { err };
      return { refusal: { ...readToolMessage(call.action, err.message), noEffectKey: true } };
    }
  };
};

/**
 * viaOpenAIAgents makes each call as the OpenAI Agents SDK does with latchToolOptions:
 * needsApproval first (an interruption naming the latch request when it answers true), then
 * execute; what the model reads of a failed call is the errorFunction's text.
 */
const viaOpenAIAgents = (k, agent) => {
  const tools = new Map();
  let n = 0;
  return async (call) => {
    if (!tools.has(call.action)) {
      tools.set(call.action, latchToolOptions(agent, call.action, {
        name: call.action.replace('.', '_'), description: call.action, parameters: {}, strict: false, execute: k.handler(call.action),
      }));
    }
    const t = tools.get(call.action);
    const callId = `call_${++n}`;
    const input = argsOf(call);
    if (await t.needsApproval({}, input, callId)) {
      return { refusal: { kind: 'approval_required', reason: 'approval_required', approvalId: t.latchApprovals.get(callId), noEffectKey: true } };
    }
    try {
      return { result: await t.execute(input, {}, { toolCall: { callId } }) };
    } catch (err) {
      if (!(err instanceof LatchToolError)) return { err };
      return { refusal: { ...readToolMessage(call.action, t.errorFunction({}, err)), noEffectKey: true } };
    }
  };
};

/**
 * viaLangGraph makes each call as a LangGraph node does with latchStep: the step runs, and a call
 * whose approval latch required pauses the graph with interrupt (which, outside a resume, throws
 * what it is given, as LangGraph's does); a refusal is the LatchToolError the node throws.
 */
const viaLangGraph = (k, agent) => {
  const steps = new Map();
  class Paused { constructor(value) { this.value = value; } }
  const interrupt = (value) => { throw new Paused(value); };
  return async (call) => {
    if (!steps.has(call.action)) steps.set(call.action, latchStep(agent, call.action, k.handler(call.action), { interrupt }));
    try {
      return { result: await steps.get(call.action)(argsOf(call)) };
    } catch (err) {
      if (err instanceof Paused) {
        return { refusal: { kind: 'approval_required', reason: 'approval_required', approvalId: err.value.approval_id, noEffectKey: true } };
      }
      if (!(err instanceof LatchToolError)) return { err };
      return { refusal: { ...readToolMessage(call.action, err.message), noEffectKey: true } };
    }
  };
};

// check compares one step's outcome with its expectation, as latchtest does in Go.
function check(e, out, outs, ran, errs) {
  assert.ok(ran === 0 || ran === 1, `the handler ran ${ran} times in one attempt`);
  const seen = out.refusal ? `refused ${out.refusal.reason} (${out.refusal.kind})` : out.err ? `error ${out.err}` : 'success';
  assert.equal(ran === 1, e.ran, `the handler ran = ${ran === 1}, want ${e.ran} (outcome ${seen})`);
  if (!e.kind) {
    assert.ok(!out.refusal && !out.err, `outcome ${seen}, want success`);
    return;
  }
  const r = out.refusal;
  if (e.kind === 'committed' && !r && !out.err) {
    // A duplicate reported as success (its stored result): compared below.
  } else if (e.kind === 'not_executed' && !r && out.err) {
    // The handler's own error, rethrown as it was: not_executed is no refusal.
    assert.ok(errs.includes(out.err), `outcome ${seen}: not the handler's own error`);
    return;
  } else {
    assert.ok(r, `outcome ${seen}, want the refusal ${e.reason} (${e.kind})`);
    assert.equal(`${r.reason} (${r.kind})`, `${e.reason} (${e.kind})`, 'surfaced reason (kind)');
    if (e.effect_key && !r.noEffectKey) assert.equal(r.effectKey, e.effect_key, 'surfaced effect key');
    if (e.approval) assert.ok(r.approvalId, 'surfaced no approval id: a person cannot find the request to answer');
    if (e.other_approval_than !== undefined) {
      assert.notEqual(r.approvalId, outs[e.other_approval_than].refusal?.approvalId,
        `surfaced the approval granted for other arguments (step ${e.other_approval_than})`);
    }
  }
  if (e.result_of !== undefined) {
    const got = r ? r.result : out.result;
    const want = outs[e.result_of].result;
    assert.notEqual(want, undefined, `step ${e.result_of} handed back no result`);
    assert.deepEqual(got, want, `the stored result of step ${e.result_of}`);
  }
}

/**
 * replay runs every case of the table on a latch serve of its own, started with the table's
 * policy, the agent token acting as the table's principal and the approver token as its
 * approver; each step's call is made by the invoke makeInvoke returns.
 */
function replay(name, makeInvoke) {
  describe(name, () => {
    let srv;
    let approver;
    const k = kit();
    // The errors the handler threw, to tell its own error from one the client made up.
    const errs = [];
    const handler = k.handler;
    k.handler = (action) => async (args) => {
      try {
        return await handler(action)(args);
      } catch (err) {
        errs.push(err);
        throw err;
      }
    };
    let invoke;
    before(async () => {
      srv = await startServe(table.policy, [], {}, { agent: table.principal, approver: table.approver });
      approver = new Client({ baseUrl: srv.base, token: srv.approverToken });
      invoke = makeInvoke(k, new Client({ baseUrl: srv.base, token: srv.agentToken }));
    });
    after(async () => { await srv?.stop(); });
    for (const c of table.cases) {
      test(`${c.name}: ${c.about}`, async () => {
        const outs = [];
        for (const [i, s] of c.steps.entries()) {
          if (s.approve !== undefined) {
            const id = outs[s.approve]?.refusal?.approvalId;
            assert.ok(id, `step ${i}: step ${s.approve} named no approval request to grant`);
            const granted = await approver.approve(id);
            assert.equal(granted.status, 'granted', `step ${i}: approve ${id}`);
            outs.push({});
            continue;
          }
          const runsBefore = k.count(s.call);
          const out = await invoke(s.call);
          outs.push(out);
          const at = `step ${i} (${s.call.action} ${s.call.id} amount ${s.call.amount}, ${s.call.mode})`;
          try {
            check(s.expect, out, outs, k.count(s.call) - runsBefore, errs);
          } catch (err) {
            err.message = `${at}: ${err.message}`;
            throw err;
          }
        }
      });
    }
  });
}

replay('through protect()', viaProtect);
replay('through the AI SDK tool, as the model reads it', viaAISDK);
replay('through the OpenAI Agents SDK tool, as the model reads it', viaOpenAIAgents);
replay('through a LangGraph.js step, as the graph reads it', viaLangGraph);
