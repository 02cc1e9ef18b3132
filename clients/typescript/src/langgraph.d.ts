import type { Client, JSONValue, Reservation } from './client.js';

/** What the step passes to LangGraph's interrupt when a person must approve. */
export interface LatchInterrupt {
  latch: 'approval_required';
  action: string;
  arguments: Record<string, JSONValue>;
  approval_id: string;
}

/** A step running its effect through latch; latchApprovals maps asked calls to latch requests. */
export interface LatchStep<A, R> {
  (args: A): Promise<R>;
  readonly latchApprovals: Map<string, string>;
}

/**
 * latchStep returns a function to call inside a LangGraph node: fn runs through latch as
 * action, and an approval latch requires interrupts the graph with LangGraph's interrupt
 * (resume with `new Command({ resume: { approved: true } })`).
 */
export declare function latchStep<A extends Record<string, JSONValue>, R extends JSONValue>(
  client: Client, action: string, fn: (args: A, reservation: Reservation) => R | Promise<R>,
  options: { interrupt: (value: LatchInterrupt) => unknown },
): LatchStep<A, R>;
