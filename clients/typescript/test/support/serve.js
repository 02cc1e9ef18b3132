// Starts a real `latch serve` for the tests: the binary built from this repository, a SQLite
// store in a temporary directory, an agent token and an approver token made with the CLI.

import { execFile, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
export const repo = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');

/**
 * REFUND_POLICY is the policy the adapters' tests share: refunds up to 5000 run, larger ones
 * wait for a person, one refund per refund_id.
 */
export const REFUND_POLICY = `schema: latch.policy/v1
actions:
  payments.refund:
    effect: "refund:{refund_id}"
    rules:
      - when: { amount_lte: 5000 }
        decision: allow
      - decision: approve
`;

let built;

/**
 * latchBinary returns $LATCH_BIN (test.sh builds it once for every test file), or builds
 * cmd/latch once per test process into a temporary directory removed when the process exits.
 */
export async function latchBinary() {
  if (process.env.LATCH_BIN) return process.env.LATCH_BIN;
  built ??= (async () => {
    const dir = await mkdtemp(join(tmpdir(), 'latch-ts-bin-'));
    const bin = join(dir, 'latch');
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    await run('go', ['build', '-o', bin, './cmd/latch'], { cwd: repo, maxBuffer: 16 << 20 });
    return bin;
  })();
  return built;
}

function freePort() {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolvePort(port));
    });
  });
}

function env() {
  return { PATH: process.env.PATH, HOME: process.env.HOME ?? tmpdir() };
}

/**
 * startServe writes policy to a temporary directory and starts `latch serve` on it with a
 * SQLite store there (extraArgs after `serve`, extraEnv added to its environment); it resolves to {base, agentToken, approverToken, latch(...args), stop()}.
 * `who.agent` is the agent token's agent (default refund-bot), `who.approver` the approver
 * token's person (default alice).
 */
export async function startServe(policy, extraArgs = [], extraEnv = {}, who = {}) {
  const bin = await latchBinary();
  const dir = await mkdtemp(join(tmpdir(), 'latch-ts-'));
  const policyPath = join(dir, 'latch.yaml');
  await writeFile(policyPath, policy);
  const global = ['--policy', policyPath, '--store', `sqlite:${join(dir, 'state.db')}`];
  const latch = async (...args) => (await run(bin, [...global, ...args], { env: env() })).stdout;
  const token = async (...args) => JSON.parse(await latch('token', 'create', '--json', ...args)).token;
  const agentToken = await token('--agent', who.agent ?? 'refund-bot');
  const approverToken = await token('--approver', who.approver ?? 'alice');
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const proc = spawn(bin, [...global, 'serve', '--listen', `127.0.0.1:${port}`, ...extraArgs], {
    env: { ...env(), ...extraEnv }, stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const exited = new Promise((resolveExit) => proc.once('exit', resolveExit));
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      const r = await fetch(`${base}/readyz`);
      if (r.ok) break;
    } catch {
      // not listening yet
    }
    if (proc.exitCode !== null || Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`latch serve never became ready:\n${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    base, agentToken, approverToken, latch, dir,
    stderr: () => stderr,
    async stop() {
      if (proc.exitCode === null) {
        proc.kill('SIGTERM');
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
