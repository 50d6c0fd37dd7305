// The teardown matrix (issue 19): each way a program can end with engines alive and no dispose(), the exit code
// Node gives that ending, and a runner that plays one in a child process (teardown-child.mjs) and times its exit.
// test/golden/teardown.test.ts runs it on the CPU; on the GPU machine, with no vitest there:
//   node test/helpers/teardown-matrix.mjs --device cuda --dir test/fixtures/llama-bf16 [--repeat N]
// prints one row per ending and exits 1 if any failed.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const child = fileURLToPath(new URL('./teardown-child.mjs', import.meta.url));

/** From the moment the program ends (the child prints "ending") to its exit: past this it is a hang. */
export const HANG_MS = 5000;

/** [scenario, expected exit code]. */
export const MATRIX = [
  ['after-load', 0],
  ['after-generate', 0],
  ['two-engines', 0],
  ['half-read-stream', 0],
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

/** What a crash, an abort or a hang prints, which no clean ending may. */
export const CRASH_TEXT = /terminate called|Segmentation|Aborted|FATAL ERROR|futex|core dumped/;

/**
 * Runs one ending; resolves with { code, signal, stderr, exitMs } (exitMs: from "ending" to the exit, -1 if it
 * never got there). A child still alive HANG_MS after ending, or 120 s after starting, is killed (SIGKILL).
 */
export function runEnding(scenario, dir, device = 'cpu') {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [child, scenario, dir, device], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    let endedAt = 0;
    let killer;
    const overall = setTimeout(() => p.kill('SIGKILL'), 120_000);
    p.stderr.setEncoding('utf8').on('data', (d) => {
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

/** Why an ending failed, or '' when it was clean. */
export function verdict(scenario, expected, r) {
  if (r.exitMs < 0) return 'never reached its end';
  if (r.signal) return `killed by ${r.signal}${r.signal === 'SIGKILL' ? ' (a hang)' : ''}`;
  if (r.code !== expected) return `exit code ${r.code}, expected ${expected}`;
  if (CRASH_TEXT.test(r.stderr)) return `crash text: ${r.stderr.match(CRASH_TEXT)[0]}`;
  if (scenario.startsWith('throw-') && !r.stderr.includes('thrown on purpose')) return 'the exception was not reported';
  return '';
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: { device: { type: 'string', default: 'cpu' }, dir: { type: 'string' }, repeat: { type: 'string', default: '1' } },
  });
  if (!values.dir) throw new Error('usage: teardown-matrix.mjs --dir <checkpoint> [--device cpu|cuda] [--repeat N]');
  let failed = 0;
  for (let i = 0; i < Number(values.repeat); ++i) {
    for (const [scenario, expected] of MATRIX) {
      const r = await runEnding(scenario, values.dir, values.device);
      const why = verdict(scenario, expected, r);
      if (why) ++failed;
      console.log(`${why ? 'FAIL' : 'ok  '} ${values.device} ${scenario.padEnd(34)} exit ${r.code ?? r.signal} ${r.exitMs} ms${why ? `  ${why}\n${r.stderr}` : ''}`);
    }
  }
  console.log(`teardown matrix on ${values.device}: ${MATRIX.length * Number(values.repeat) - failed} clean, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}
