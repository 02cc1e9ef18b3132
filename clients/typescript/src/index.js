// @latchkit/latch: a client of `latch serve` for TypeScript and JavaScript (Node 20+), with no
// runtime dependencies. See README.md.
export { Client, ROUTES, protect, newRequestKey } from './client.js';
export * from './errors.js';
export {
  Poller, check, interruptible, refusalOfAnswer, WAITING, RESUME, DENIED, EXPIRED, DEFAULT_POLL_MS,
} from './interrupt.js';
