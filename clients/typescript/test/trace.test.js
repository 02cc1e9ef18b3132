// traceparent propagation: the spans `latch serve` exports for a call the client made are
// children of the caller's span. The server exports to a collector this test runs (OTLP/HTTP
// with JSON bodies), and the test reads the trace and parent span ids back from what it got.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { test } from 'node:test';

import { Client, protect } from '../src/index.js';
import { startServe } from './support/serve.js';

test('the server\'s spans of a protected call are children of the caller\'s traceparent', async () => {
  const bodies = [];
  const collector = createServer((req, res) => {
    let b = '';
    req.on('data', (d) => { b += d; });
    req.on('end', () => {
      bodies.push({ path: req.url, body: b });
      res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}');
    });
  });
  await new Promise((r) => collector.listen(0, '127.0.0.1', r));
  const srv = await startServe(`schema: latch.policy/v1
actions:
  payments.refund:
    effect: "refund:{refund_id}"
    decision: allow
`, ['--otel-endpoint', `http://127.0.0.1:${collector.address().port}`],
  { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_BSP_SCHEDULE_DELAY: '100' });
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  try {
    const c = new Client({ baseUrl: srv.base, token: srv.agentToken, traceparent: () => `00-${traceId}-${spanId}-01` });
    const got = await protect(c, 'payments.refund', { refund_id: 'r_t', amount: 5 }, () => ({ ok: true }));
    assert.deepEqual(got, { ok: true });

    // A traceparent that is not one is refused before anything is sent.
    const bad = new Client({ baseUrl: srv.base, token: srv.agentToken, traceparent: 'not-a-traceparent' });
    await assert.rejects(bad.begin('payments.refund', { refund_id: 'r_u', amount: 5 }), /not a W3C traceparent/);
  } finally {
    await srv.stop(); // SIGTERM: the server sends what is queued
    collector.close();
  }
  const spans = [];
  for (const { body } of bodies) {
    for (const rs of JSON.parse(body).resourceSpans ?? []) {
      for (const ss of rs.scopeSpans ?? []) spans.push(...(ss.spans ?? []));
    }
  }
  const ours = spans.filter((s) => s.traceId.toLowerCase() === traceId);
  assert.ok(spans.length > 0, 'the collector got no span');
  assert.ok(ours.length >= 2, `spans in the caller's trace: ${ours.length} of ${spans.length}`);
  const children = ours.filter((s) => s.parentSpanId?.toLowerCase() === spanId);
  assert.ok(children.length >= 2, 'the begin and the outcome are each a child of the caller\'s span');
});
