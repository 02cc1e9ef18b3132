// The client's reason table against the Go one: every reason word latch defines (refusal.go)
// has the kind the Go refusal table (internal/refusaltest) gives it, and the kinds are exactly
// those the server's OpenAPI document lists.

import assert from 'node:assert/strict';
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { ERROR_CLASSES, REASONS, RefusalError, errorOf, kindOf } from '../src/index.js';
import { repo, startServe } from './support/serve.js';

// goConstants reads the string constants of type typ declared in the Go files of dir:
// NAME TYPE = "word", or NAME TYPE = pkg.NAME resolved in that package's directory.
async function goConstants(dir, typ) {
  const out = new Map();
  for (const f of (await readdir(join(repo, dir))).filter((n) => n.endsWith('.go') && !n.endsWith('_test.go'))) {
    const src = await readFile(join(repo, dir, f), 'utf8');
    for (const m of src.matchAll(new RegExp(`^\\s*(\\w+)\\s+${typ}\\s*=\\s*(?:"([^"]*)"|(\\w+)\\.(\\w+))`, 'gm'))) {
      out.set(m[1], m[2] ?? { pkg: m[3], name: m[4] });
    }
  }
  for (const [name, v] of out) {
    if (typeof v === 'string') continue;
    const src = (await Promise.all((await readdir(join(repo, v.pkg))).filter((n) => n.endsWith('.go') && !n.endsWith('_test.go'))
      .map((n) => readFile(join(repo, v.pkg, n), 'utf8')))).join('\n');
    const m = src.match(new RegExp(`\\b${v.name}\\b[^=\\n]*=\\s*"([^"]*)"`));
    assert.ok(m, `${name} = ${v.pkg}.${v.name}: not found in ${v.pkg}/`);
    out.set(name, m[1]);
  }
  return out;
}

let kinds;
let reasons;

before(async () => {
  kinds = await goConstants('.', 'RefusalKind');
  reasons = await goConstants('.', 'Reason');
});

test('every reason word of the Go API has a kind here, and every word here is one of them', () => {
  const goWords = new Set(reasons.values());
  assert.ok(goWords.size > 50, `read only ${goWords.size} reason words from refusal.go`);
  for (const w of goWords) assert.ok(kindOf(w), `reason ${w} of the Go API has no kind in REASONS`);
  for (const w of Object.values(REASONS).flat()) assert.ok(goWords.has(w), `REASONS lists ${w}, which the Go API does not define`);
  assert.deepEqual(new Set(Object.keys(REASONS)), new Set(kinds.values()));
  assert.deepEqual(new Set(Object.keys(ERROR_CLASSES)), new Set(kinds.values()));
});

test('each case of the Go refusal table has the same kind here, and reads back as its class', async () => {
  const src = await readFile(join(repo, 'internal/refusaltest/refusaltest.go'), 'utf8');
  const cases = [...src.matchAll(/latch\.(Kind\w+), latch\.(Reason\w+)\}/g)];
  assert.ok(cases.length > 50, `read only ${cases.length} cases`);
  for (const [, k, r] of cases) {
    const kind = kinds.get(k);
    const reason = reasons.get(r);
    assert.ok(kind && reason, `${k} ${r} unresolved`);
    assert.equal(kindOf(reason), kind, `reason ${reason}`);
    // A problem document that carries only the reason (no kind) is read by this table.
    const err = errorOf(409, JSON.stringify({ type: `urn:latch:problem:${reason}`, reason }));
    if (kind === 'internal') continue; // internal without a kind is a plain problem
    assert.ok(err instanceof ERROR_CLASSES[kind] && err instanceof RefusalError, `${reason}: ${err.name}`);
  }
});

let srv;
before(async () => { srv = await startServe('schema: latch.policy/v1\nactions: {}\n'); });
after(async () => { await srv?.stop(); });

test('the kinds are exactly those the server\'s OpenAPI document lists', async () => {
  const doc = await (await fetch(`${srv.base}/v1/openapi.json`)).json();
  assert.deepEqual(new Set(doc.components.schemas.Problem.properties.kind.enum), new Set(Object.keys(REASONS)));
});

test('every reason word reads to a model in the adapters\' words: the reason, its kind and what to do', async () => {
  const { toolMessage } = await import('../src/ai-sdk.js');
  for (const [kind, words] of Object.entries(REASONS)) {
    for (const reason of words) {
      const err = errorOf(409, { type: `urn:latch:problem:${reason}`, reason, kind, result: { id: 1 }, approval_id: 'apr_1' });
      const m = toolMessage('payments.refund', err);
      assert.match(m, new RegExp(`^latch refused payments\\.refund: ${reason} \\(${kind}\\): [a-z]`), m);
      assert.match(m, /approval apr_1$/);
      if (kind === 'committed') assert.match(m, /its result: \{"id":1\}/);
    }
  }
});
