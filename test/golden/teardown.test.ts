// Programs that end with engines alive and no dispose() — the script simply ends, process.exit(), an uncaught
// exception, a worker thread ending or terminated — each in its own Node process (test/helpers/teardown-child.mjs),
// on the CPU. Each must exit with its own code, promptly, without a crash: before binding/live_set.h, most of these
// ended in SIGSEGV or SIGABRT at exit, or hung in Node's teardown.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

import { fixtureDir } from '../helpers/fixtures.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const child = fileURLToPath(new URL('../helpers/teardown-child.mjs', import.meta.url));
const built = existsSync(`${root}/dist/index.js`);
const dir = fixtureDir('llama-bf16');

// From the moment the program ends (it prints "ending") to the process's exit: past this it counts as a hang.
const HANG_MS = 5000;

interface Ended {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
  exitMs: number; // from "ending" to the exit
}

function runChild(scenario: string): Promise<Ended> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [child, scenario, dir, 'cpu'], { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    let endedAt = 0;
    let killer: NodeJS.Timeout | undefined;
    const overall = setTimeout(() => p.kill('SIGKILL'), 60_000); // a load that never ends
    p.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
      if (!endedAt && stderr.includes('ending\n')) {
        endedAt = Date.now();
        killer = setTimeout(() => p.kill('SIGKILL'), HANG_MS);
      }
    });
    p.on('error', reject);
    p.on('close', (code, signal) => {
      clearTimeout(overall);
      clearTimeout(killer);
      resolve({ code, signal, stderr, exitMs: endedAt ? Date.now() - endedAt : -1 });
    });
  });
}

// scenario -> the exit code Node gives that ending with no engine involved.
const matrix: Array<[string, number]> = [
  ['after-load', 0],
  ['after-generate', 0],
  ['two-engines', 0],
  ['exit-after-load', 7],
  ['exit-mid-generation', 0],
  ['exit-mid-generation-two-engines', 0],
  ['exit-mid-load', 0],
  ['throw-after-load', 1],
  ['throw-mid-generation', 1],
  ['worker-after-generate', 0],
  ['worker-exit-mid-generation', 3], // the worker's process.exit(3) is its exit code, which the main thread returns
  ['worker-terminate-mid-generation', 1], // a terminated worker exits with 1
  ['worker-terminate-mid-load', 1],
];

describe.skipIf(!built)('ending without dispose()', () => {
  it.each(matrix)('%s exits with %i, without a crash or a hang', async (scenario, expected) => {
    const r = await runChild(scenario);
    const context = `${scenario}: code ${r.code}, signal ${r.signal}, ${r.exitMs} ms after ending\n${r.stderr}`;
    expect(r.exitMs, context).toBeGreaterThanOrEqual(0); // it got as far as ending
    expect(r.signal, context).toBeNull(); // SIGSEGV, SIGABRT, or our SIGKILL after HANG_MS
    expect(r.code, context).toBe(expected);
    expect(r.stderr, context).not.toMatch(/terminate called|Segmentation|Aborted|FATAL ERROR|futex/);
    if (scenario.startsWith('throw-')) expect(r.stderr).toContain('thrown on purpose');
  });
});
