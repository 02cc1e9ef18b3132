import type { Client, JSONValue, Reservation } from './client.js';
import type { RefusalError } from './errors.js';

/** LatchToolError is what a latch tool throws for a refusal: the model reads its message. */
export declare class LatchToolError extends Error {
  constructor(action: string, refusal: RefusalError);
  readonly refusal: RefusalError;
}

/** toolMessage is the text a model reads for a refusal of action. */
export declare function toolMessage(action: string, refusal: RefusalError): string;

/**
 * A tool of the AI SDK (the shape `tool()` returns), its calls going through latch. S is the
 * type of the input schema given, kept so the tool fits the SDK's `tools` (typed by schema).
 */
export interface LatchTool<A, R, S = unknown> {
  description?: string;
  title?: string;
  inputSchema: S;
  needsApproval(input: A, options: { toolCallId: string }): Promise<boolean>;
  execute(input: A, options: { toolCallId: string }): Promise<R>;
  /** The latch approval request of each tool call whose approval latch required. */
  readonly latchApprovals: Map<string, string>;
}

/**
 * latchTool returns an AI SDK tool running execute through latch as action: latch's approval
 * becomes the SDK's tool approval, refusals become tool errors the model reads.
 */
export declare function latchTool<A extends Record<string, JSONValue>, R extends JSONValue, S = unknown>(
  client: Client, action: string,
  options: { description?: string; title?: string; inputSchema: S; execute: (args: A, reservation: Reservation) => R | Promise<R> },
): LatchTool<A, R, S>;
