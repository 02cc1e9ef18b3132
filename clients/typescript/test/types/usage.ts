// Compiled by `npm run typecheck` (tsc, no output): the declarations describe the package as a
// TypeScript caller uses it, and a misuse is a compile error.
import {
  Client, CommittedError, ApprovalRequiredError, NotExecuted, RefusalError, protect, kindOf,
  type Action, type RefusalKind,
} from '@latchkit/latch';

const c = new Client({ baseUrl: 'http://127.0.0.1:7420', token: 'latch_x' });

export async function refund(id: string, amount: number): Promise<{ refund: string } | undefined> {
  try {
    return await protect(c, 'payments.refund', { refund_id: id, amount }, async (args, r) => {
      if (r.idempotencyToken === null) throw new NotExecuted('no key');
      return { refund: `re_${String(args.refund_id)}` };
    }, { waitSeconds: 30 });
  } catch (err) {
    if (err instanceof CommittedError) return err.result as { refund: string };
    if (err instanceof ApprovalRequiredError) console.log(err.approvalId, err.approval?.status);
    if (err instanceof RefusalError) {
      const k: RefusalKind = err.kind;
      console.log(k, err.reason, kindOf(err.reason));
    }
    throw err;
  }
}

export async function begin(): Promise<string | null> {
  const a: Action = await c.begin('payments.refund', { refund_id: 'r', amount: 1 }, { requestKey: 'k1' });
  await c.finish(a.action_id, 'committed', { result: { ok: true } });
  // @ts-expect-error an outcome that is not one of the three
  await c.finish(a.action_id, 'failed');
  return a.effect_key;
}

import { latchTool } from '@latchkit/latch/ai-sdk';

export const refundTool = latchTool<{ refund_id: string; amount: number }, { refund: string }>(c, 'payments.refund', {
  description: 'Refund a payment', inputSchema: {},
  execute: async (args, r) => ({ refund: `re_${args.refund_id}_${r.attempt ?? 0}` }),
});

import { latchToolOptions } from '@latchkit/latch/openai-agents';

export const refundOptions = latchToolOptions<{ refund_id: string; amount: number }, { refund: string }>(c, 'payments.refund', {
  name: 'refund', description: 'Refund a payment', parameters: {}, strict: true,
  execute: (args) => ({ refund: `re_${args.refund_id}` }),
});

import { latchStep } from '@latchkit/latch/langgraph';

export const refundStep = latchStep<{ refund_id: string }, { refund: string }>(c, 'payments.refund',
  (args) => ({ refund: `re_${args.refund_id}` }), { interrupt: (v) => v.approval_id });

import { Poller, check, interruptible, refusalOfAnswer, type Answer, type Interrupter, type InterruptStatus } from '@latchkit/latch/interrupt';

// A framework's own pause implements Interrupter; protect takes it.
const approvedAtOnce: Interrupter = { interrupt: async (r) => ({ status: 'resume', approval_id: r.approvalId }) };

export async function waited(): Promise<InterruptStatus> {
  await protect(c, 'payments.refund', { refund_id: 'r', amount: 9000 }, () => ({ ok: true }),
    { interrupter: new Poller(c, { everyMs: 500, timeoutMs: 60_000 }) });
  await protect(c, 'payments.refund', { refund_id: 'r', amount: 9000 }, () => ({ ok: true }), { interrupter: approvedAtOnce });
  try {
    await c.begin('payments.refund', { refund_id: 'r', amount: 9000 });
  } catch (err) {
    if (err instanceof RefusalError && interruptible(err)) {
      const a: Answer = await check(c, err);
      const refused = refusalOfAnswer(a);
      if (refused) throw refused;
      return a.status;
    }
  }
  // @ts-expect-error an interrupter resolves to an Answer
  await protect(c, 'payments.refund', { refund_id: 'r', amount: 1 }, () => null, { interrupter: { interrupt: async () => 'resume' } });
  // @ts-expect-error not a status of a wait
  const s: InterruptStatus = 'granted';
  return s;
}
