// A LangGraph.js step whose effect goes through latch, with the graph's own interrupt for an
// approval. It imports nothing from LangGraph: the caller passes its `interrupt` function, so
// the package keeps no runtime dependency.
//
// latchStep(client, action, fn, { interrupt }) returns an async (args) => result to call inside
// a node. When latch requires an approval, it calls interrupt({...}) with the latch request's
// id: the graph stops (it needs a checkpointer). A person answers the latch request; the
// program resumes the graph with new Command({ resume: { approved: true } }) (or
// `{ approved: false }`), and the node runs again from its start, as LangGraph runs a resumed
// node: the step finds the request it asked, interrupt() now returns the answer, and the call
// presents the granted request and runs once. A refusal is thrown as a LatchToolError; a
// ToolNode hands its message to the model.
//
// The interrupt contract (./interrupt.js): LangGraph's interrupt() IS this adapter's pause, and
// Command({ resume }) its resume. interrupt() pauses by unwinding — it throws, the graph
// checkpoints, and the node runs again from its start on resume — so there is no promise inside
// the step to await an Answer on, and this module exports no Interrupter. The program decides
// the resume value with check(client, { kind: 'approval_required', approvalId }) on the
// interrupt's approval_id: resume → { approved: true }, denied or expired → { approved: false },
// waiting → not yet. Awaiting a Poller inside a node instead would block the graph in-process
// and lose the wait with the process, which the checkpointer exists to avoid.

import { protect } from './client.js';
import { ApprovalRequiredError, RefusalError } from './errors.js';
import { LatchToolError } from './ai-sdk.js';
import { canonical } from './callkey.js';

/**
 * latchStep returns a function running `fn(args, reservation)` through latch as `action`,
 * interrupting the graph with `interrupt` when a person must approve. `latchApprovals` maps each
 * asked call (its canonical arguments) to the latch request's id.
 */
export function latchStep(client, action, fn, { interrupt }) {
  if (typeof interrupt !== 'function') throw new TypeError('latch: latchStep needs LangGraph\'s interrupt function');
  const approvals = new Map();
  const step = async (args) => {
    const asked = canonical(args);
    let approvalId = approvals.get(asked);
    let granted = false;
    if (approvalId) {
      // The node runs again on resume: the request is asked already. Beginning again without
      // its id would ask a second one rather than spend the granted first. A granted request
      // needs no pause: the call presents it and runs.
      const { status } = await client.getApproval(approvalId);
      granted = status === 'granted';
      if (status !== 'pending' && !granted) {
        approvals.delete(asked);
        approvalId = undefined;
      }
    }
    if (!approvalId) {
      try {
        return await protect(client, action, args, fn);
      } catch (err) {
        if (!(err instanceof ApprovalRequiredError)) throw refusal(action, err);
        approvalId = err.approvalId;
        approvals.set(asked, approvalId);
      }
    }
    const answer = granted ? undefined : interrupt({ latch: 'approval_required', action, arguments: args, approval_id: approvalId });
    if (answer && answer.approved === false) {
      approvals.delete(asked);
      throw new Error(`${action} was not approved (${approvalId})`);
    }
    try {
      return await protect(client, action, args, fn, { approvalId });
    } catch (err) {
      throw refusal(action, err);
    } finally {
      approvals.delete(asked);
    }
  };
  step.latchApprovals = approvals;
  return step;
}

function refusal(action, err) {
  return err instanceof RefusalError ? new LatchToolError(action, err) : err;
}
