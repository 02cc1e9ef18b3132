// The adapter pages of docs/integrations hold code a reader copies: each page's ts blocks,
// joined in order as one module, must import only names the packages export and type-check
// (tsc, strict) against this package's declarations and the frameworks' own; each page's table
// of what the model reads must be the adapters' own words; and each test a page names as proof
// must exist. No server is needed.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { ERROR_CLASSES, REASONS } from '../src/index.js';
import { toolMessage } from '../src/ai-sdk.js';

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const repo = resolve(pkg, '../..');
const PAGES = ['ai-sdk.md', 'openai-agents-js.md', 'langgraph-js.md'];

// The SDK's tests run on @openai/agents-core, the core @openai/agents exports; a page imports
// the package a user installs.
const ALIASES = { '@openai/agents': '@openai/agents-core' };

// What a page's code may take as given: the reader's own payment service and model.
const ENVIRONMENT = `
declare const payments: { refund(args: Record<string, unknown>, opts: { idempotencyKey: string | null }): Promise<{ refund: string }> };
declare const model: import('ai').LanguageModel;
declare const process: { env: Record<string, string | undefined> };
`;

function page(name) {
  return readFileSync(join(repo, 'docs/integrations', name), 'utf8');
}

// blocks returns the fenced code blocks of lang in text, each with the line it starts on.
function blocks(text, lang) {
  const out = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].trim() !== '```' + lang) continue;
    const start = i + 1;
    let j = start;
    while (j < lines.length && lines[j].trim() !== '```') j++;
    out.push({ line: start + 1, code: lines.slice(start, j).join('\n') });
    i = j;
  }
  return out;
}

// imports returns each `import { a, b as c } from 'x'` of code as {from, names}: the values it
// imports (a name imported as a type is left to tsc).
function imports(code) {
  const out = [];
  for (const m of code.matchAll(/import\s*\{([^}]*)\}\s*from\s*'([^']+)'/g)) {
    const names = m[1].split(',').map((n) => n.trim().split(/\s+as\s+/)[0]).filter((n) => n && !n.startsWith('type '));
    out.push({ from: m[2], names });
  }
  return out;
}

test('each adapter page has code, and its imports name what the packages export', async () => {
  for (const name of PAGES) {
    const ts = blocks(page(name), 'ts');
    assert.ok(ts.length >= 2, `${name}: ${ts.length} ts blocks, want the lines to add and the resume`);
    const found = ts.flatMap((b) => imports(b.code));
    assert.ok(found.some((i) => i.from.startsWith('@latchkit/latch/')), `${name}: imports no adapter`);
    for (const { from, names } of found) {
      const mod = await import(ALIASES[from] ?? from);
      for (const n of names) assert.ok(n in mod, `${name}: '${from}' exports no ${n}`);
    }
  }
});

test('each adapter page\'s code type-checks against the package\'s declarations', async () => {
  // The files live inside the package so '@latchkit/latch' resolves to it by its own exports.
  const dir = mkdtempSync(join(pkg, '.doc-snippets-'));
  try {
    const files = [];
    for (const name of PAGES) {
      const file = name.replace(/\.md$/, '.ts');
      writeFileSync(join(dir, file), `${blocks(page(name), 'ts').map((b) => b.code).join('\n')}\nexport {};\n`);
      files.push(file);
    }
    writeFileSync(join(dir, 'environment.d.ts'), ENVIRONMENT);
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({
      compilerOptions: {
        target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true,
        skipLibCheck: true, types: [], lib: ['ES2022', 'DOM'],
        paths: Object.fromEntries(Object.entries(ALIASES).map(([a, b]) => [a, [`../node_modules/${b}/dist/index.d.ts`]])),
      },
      files: ['environment.d.ts', ...files],
    }));
    const tsc = join(pkg, 'node_modules/typescript/bin/tsc');
    const out = await promisify(execFile)(process.execPath, [tsc, '-p', join(dir, 'tsconfig.json')], { cwd: dir })
      .then(() => '', (err) => `${err.stdout}${err.stderr}`);
    assert.equal(out, '', `the pages' code does not type-check:\n${out}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('each adapter page\'s table of what the model reads is the adapters\' words', () => {
  for (const name of PAGES) {
    const text = page(name);
    const section = text.slice(text.indexOf('## What the model reads'));
    const rows = new Map([...section.matchAll(/^\| `([a-z_]+)` \| (.+) \|$/gm)].map((m) => [m[1], m[2]]));
    assert.deepEqual([...rows.keys()].sort(), Object.keys(REASONS).sort(), `${name}: the table's kinds`);
    for (const [kind, advice] of rows) {
      const reason = REASONS[kind][0];
      const refusal = new ERROR_CLASSES[kind](409, { type: `urn:latch:problem:${reason}`, reason, kind });
      assert.equal(toolMessage('payments.refund', refusal), `latch refused payments.refund: ${reason} (${kind}): ${advice}`, `${name}: ${kind}`);
    }
  }
});

// testNames returns the names of the tests a node --test file declares.
function testNames(source) {
  return [...source.matchAll(/\btest\((['"])((?:\\.|(?!\1).)*)\1/g)].map((m) => m[2].replace(/\\(.)/g, '$1'));
}

test('each test a page names as proof exists', () => {
  for (const name of [...PAGES, 'typescript.md']) {
    const refs = [...page(name).matchAll(/`(clients\/[^`\s]+)` › `([^`]+)`/g)];
    if (name !== 'typescript.md') assert.ok(refs.length >= 5, `${name}: names ${refs.length} tests`);
    for (const [, file, want] of refs) {
      const path = join(repo, file);
      assert.ok(existsSync(path), `${name}: no file ${file}`);
      const source = readFileSync(path, 'utf8');
      const names = file.endsWith('.py') ? [...source.matchAll(/def (test_\w+)\(/g)].map((m) => m[1]) : testNames(source);
      assert.ok(names.includes(want), `${name}: ${file} has no test '${want}'`);
    }
  }
});
