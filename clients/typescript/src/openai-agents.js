// A function tool of the OpenAI Agents SDK (`@openai/agents`) whose every call goes through
// latch. It imports nothing from the SDK: latchToolOptions returns the options `tool()` takes,
// so the package keeps no runtime dependency.
//
// An approval latch requires becomes the SDK's own human-in-the-loop interruption: needsApproval
// begins the call at latch, and when latch answers approval_required it keeps the latch
// request's id and answers true, so the run stops with an interruption. A person answers the
// latch request; the program approves the interruption (`result.state.approve(item)`) and runs
// the state again, and execute begins the call presenting the granted request. A refusal
// becomes the tool's error output the model reads.
//
// The interrupt contract (./interrupt.js): the run's interruption IS this adapter's pause, and
// `result.state.approve(item)` / `reject(item)` with the state run again its resume. The SDK
// pauses by unwinding: run() returns with the interruption and the program resumes it in a
// later call, so there is no promise inside the tool to await an Answer on, and this module
// exports no Interrupter. The program decides approve or reject with check(client, { kind:
// 'approval_required', approvalId }) on the request `latchApprovals` names: resume → approve,
// denied or expired → reject, waiting → not yet.

import { protect } from './client.js';
import { ApprovalRequiredError, RefusalError } from './errors.js';
import { LatchToolError, toolMessage } from './ai-sdk.js';
import { callName, requestKey } from './callkey.js';

/**
 * latchToolOptions returns the options of an Agents SDK function tool running
 * `execute(input, reservation)` through latch as `action`; pass them to `tool()`. The returned
 * `latchApprovals` maps each call id whose approval latch required to the latch request's id.
 */
export function latchToolOptions(client, action, { name, description, parameters, strict, execute }) {
  const approvals = new Map(); // call id → the latch request asked for it (for people)
  const asked = new Map(); // call id and arguments (callName) → the latch request asked
  // The arguments are part of a call's request key: a call id a model server reuses names
  // another call.
  const key = (callId, input) => requestKey('openai-agents', callId, input);
  const callIdOf = (details) => details?.toolCall?.callId;
  return {
    name, description, parameters, strict,
    async needsApproval(_runContext, input, callId) {
      if (!callId) return false;
      // Asked again when the run resumes: keep the asked request while it can still be spent.
      const name = callName(callId, input);
      if (asked.has(name)) {
        const { status } = await client.getApproval(asked.get(name));
        if (status === 'pending' || status === 'granted') return true;
        asked.delete(name);
      }
      try {
        await client.begin(action, input, { requestKey: key(callId, input) });
        return false; // reserved: execute continues this reservation
      } catch (err) {
        if (err instanceof ApprovalRequiredError) {
          asked.set(name, err.approvalId);
          approvals.set(callId, err.approvalId);
          return true;
        }
        return false; // execute meets the same refusal and reports it to the model
      }
    },
    async execute(input, _runContext, details) {
      const callId = callIdOf(details);
      const approvalId = callId ? asked.get(callName(callId, input)) : undefined;
      const reqKey = !approvalId && callId ? key(callId, input) : undefined;
      try {
        return await protect(client, action, input, execute, { approvalId, requestKey: reqKey });
      } catch (err) {
        if (err instanceof RefusalError) throw new LatchToolError(action, err);
        throw err;
      }
    },
    // The model reads a refusal's words rather than the SDK's generic failure text.
    errorFunction(_runContext, error) {
      if (error instanceof LatchToolError) return error.message;
      if (error?.cause instanceof LatchToolError) return error.cause.message;
      if (error instanceof RefusalError) return toolMessage(action, error);
      return `${action} failed: ${error?.message ?? error}`;
    },
    latchApprovals: approvals,
  };
}
