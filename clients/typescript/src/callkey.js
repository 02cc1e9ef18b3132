// How the adapters name one tool call: a model's call id alone does not, since a model server
// may number its calls anew in every conversation (`call_0`, …) and a later, different call
// would then meet the first one's request key and approval. The arguments, canonically, are
// part of the name: the same call retried has the same name; another call, the same id reused,
// has another.

import { createHash } from 'node:crypto';

/**
 * canonical is a JSON text of v with object members in key order: the same arguments give the
 * same text whatever order they were written in.
 */
export function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

// argsOf reads a call's arguments, given as the model's JSON text or already parsed, so that the
// same call names itself the same whichever an SDK hands over.
function argsOf(input) {
  if (typeof input !== 'string') return input;
  try {
    return JSON.parse(input);
  } catch {
    return input;
  }
}

/** callName is the map key of one call: its id and its canonical arguments. */
export function callName(callId, input) {
  return `${callId}\u0000${canonical(argsOf(input))}`;
}

/**
 * requestKey is the request key (Idempotency-Key) of one call: prefix, the call's id and the
 * first 32 hex digits of the SHA-256 of its canonical arguments, within the characters and
 * length a request key may have.
 */
export function requestKey(prefix, callId, input) {
  const digest = createHash('sha256').update(canonical(argsOf(input))).digest('hex').slice(0, 32);
  const id = String(callId).replace(/[^A-Za-z0-9._:~+/=-]/g, '_').slice(0, 200);
  return `${prefix}.${id}.${digest}`;
}
