// A tool of the Vercel AI SDK (package `ai`) whose every call goes through latch. It imports
// nothing from the SDK: the object it returns is the shape `tool()` returns (description,
// inputSchema, needsApproval, execute), so the package keeps no runtime dependency.
//
// An approval latch requires becomes the SDK's own tool approval: needsApproval begins the
// call at latch, and when latch answers approval_required it keeps the latch request's id and
// answers true, so the SDK stops with a tool-approval-request. A person answers the latch
// request (`latch approve`, the console, the API); the application then sends the SDK's
// tool-approval-response, and execute begins the call again presenting the granted request.
// A refusal becomes a tool error the model reads: the reason word, what to do, and for a
// committed duplicate the stored result.
//
// The interrupt contract (./interrupt.js): the SDK's tool-approval-request IS this adapter's
// pause, and the tool-approval-response its resume — approved, execute runs the call again
// presenting the request; not approved, the call stops. The SDK pauses by unwinding: generateText
// returns with the request pending and the program answers it in a later call, so there is no
// promise inside the tool to await an Answer on, and this module exports no Interrupter. The
// program decides the response with check(client, { kind: 'approval_required', approvalId })
// on the request `latchApprovals` names: resume → approved, denied or expired → not approved,
// waiting → not yet.

import { protect } from './client.js';
import { ApprovalRequiredError, CommittedError, RefusalError } from './errors.js';
import { callName, requestKey } from './callkey.js';

/** LatchToolError is what a latch tool throws for a refusal: the model reads its message. */
export class LatchToolError extends Error {
  constructor(action, refusal) {
    super(toolMessage(action, refusal), { cause: refusal });
    this.name = 'LatchToolError';
    this.refusal = refusal;
  }
}

const advice = {
  denied: 'the policy does not allow this call; do not retry it',
  invalid_argument: 'the arguments do not fit the action; fix them before calling again',
  approval_required: 'a person must approve this call first',
  approval_refused: 'the approval cannot be spent on this call',
  committed: 'this effect already happened; do not do it again',
  in_progress: 'another attempt of this effect is running; try again later',
  ambiguous: 'an earlier attempt may have run; a person must resolve it before any retry',
  outcome_unknown: 'this call may have run; do not retry it: a person must resolve it',
  not_executed: 'the call did not run; it may be retried',
  attempts_exhausted: 'this effect failed as often as allowed; do not retry it',
  key_conflict: 'this effect was attempted with other arguments',
  authority: 'no grant allows this call',
  identity: 'the caller has no usable identity',
  outcome_refused: 'the outcome could not be recorded',
  request_key_mismatch: 'the request key names another request',
  internal: 'latch could not decide; try again later',
};

/** toolMessage is the text a model reads for a refusal of `action`. */
export function toolMessage(action, refusal) {
  let m = `latch refused ${action}: ${refusal.reason} (${refusal.kind}): ${advice[refusal.kind] ?? ''}`;
  if (refusal instanceof CommittedError && refusal.result !== undefined) {
    m += `; its result: ${JSON.stringify(refusal.result)}`;
  }
  if (refusal.approvalId) m += `; approval ${refusal.approvalId}`;
  return m;
}

/**
 * latchTool returns an AI SDK tool running `execute(input, reservation)` through latch as
 * `action`. The returned tool's `latchApprovals` maps each tool call id whose approval latch
 * required to the latch request's id, for the person who answers it.
 */
export function latchTool(client, action, { description, inputSchema, execute, title }) {
  const approvals = new Map(); // call id → the latch request asked for it (for people)
  const asked = new Map(); // call id and arguments (callName) → the latch request asked
  // One tool call, one request key: needsApproval's begin and execute's are the same request,
  // so execute is handed the reservation needsApproval made instead of meeting it in_progress.
  // The arguments are part of the key: a call id a model server reuses names another call.
  const key = (toolCallId, input) => requestKey('ai-sdk', toolCallId, input);
  const t = {
    description, title, inputSchema,
    async needsApproval(input, { toolCallId }) {
      // Asked again when the SDK resumes the call: the request is asked already, and beginning
      // again without its id would ask a second one instead of spending the granted first.
      // A request spent, denied or expired is for an earlier call that reused the id.
      const name = callName(toolCallId, input);
      if (asked.has(name)) {
        const { status } = await client.getApproval(asked.get(name));
        if (status === 'pending' || status === 'granted') return true;
        asked.delete(name);
      }
      try {
        await client.begin(action, input, { requestKey: key(toolCallId, input) });
        return false; // reserved: execute continues this reservation
      } catch (err) {
        if (err instanceof ApprovalRequiredError) {
          asked.set(name, err.approvalId);
          approvals.set(toolCallId, err.approvalId);
          return true;
        }
        return false; // execute meets the same refusal and reports it to the model
      }
    },
    async execute(input, { toolCallId }) {
      const approvalId = asked.get(callName(toolCallId, input));
      try {
        return await protect(client, action, input, execute, { approvalId, requestKey: approvalId ? undefined : key(toolCallId, input) });
      } catch (err) {
        if (err instanceof RefusalError) throw new LatchToolError(action, err);
        throw err;
      }
    },
    latchApprovals: approvals,
  };
  return t;
}
