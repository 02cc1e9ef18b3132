import type { Client, JSONValue, Reservation } from './client.js';

/** The options of an Agents SDK function tool (pass them to `tool()`), its calls going through latch. */
export interface LatchToolOptions<A, R> {
  name: string;
  description: string;
  parameters: any;
  strict?: boolean;
  needsApproval(runContext: unknown, input: A, callId?: string): Promise<boolean>;
  execute(input: A, runContext?: unknown, details?: { toolCall?: { callId?: string } }): Promise<R>;
  errorFunction(runContext: unknown, error: unknown): string;
  /** The latch approval request of each call id whose approval latch required. */
  readonly latchApprovals: Map<string, string>;
}

/**
 * latchToolOptions returns the options of an Agents SDK function tool running execute through
 * latch as action: latch's approval becomes the run's interruption, refusals the tool's error
 * output the model reads.
 */
export declare function latchToolOptions<A extends Record<string, JSONValue>, R extends JSONValue>(
  client: Client, action: string,
  options: { name: string; description: string; parameters: any; strict?: boolean; execute: (args: A, reservation: Reservation) => R | Promise<R> },
): LatchToolOptions<A, R>;
