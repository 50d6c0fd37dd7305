// Runs the worker on one checkpoint folder in a child process and classifies what happened:
//   typed    an EngineError with a code other than ERR_INTERNAL (the checkpoint was refused, or a generation was)
//   loaded   load and generations succeeded, and the oracle finds nothing wrong with the checkpoint
//   silent   load and generations succeeded on a checkpoint the oracle says should have been refused
//   crash    the process died (signal, nonzero exit, no verdict) - whatever it reported before
//   hang     no verdict within the timeout (the process is killed)
//   untyped  anything else thrown: a plain Error, a TypeError, ERR_INTERNAL, ids outside the vocabulary
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { judge } from './oracle.mjs';

const WORKER = join(dirname(fileURLToPath(import.meta.url)), 'worker.mjs');
const MARK = '@@fuzz ';

/** Spawns the worker and collects its reports. */
function spawnWorker(bundle, dir, timeoutMs) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [WORKER, bundle, dir], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const reports = stdout.split('\n').filter((l) => l.startsWith(MARK)).map((l) => JSON.parse(l.slice(MARK.length)));
      resolve({ code, signal, timedOut, reports, stderr });
    });
  });
}

/**
 * @returns {Promise<{ class: string, phase: string, code?: string, message?: string, violations?: object[], ms: number }>}
 */
export async function runOne(bundle, dir, timeoutMs) {
  const started = Date.now();
  const r = await spawnWorker(bundle, dir, timeoutMs);
  const ms = Date.now() - started;
  const phase = r.reports.filter((x) => x.phase && !x.outcome).at(-1)?.phase ?? 'start';
  const verdict = r.reports.find((x) => x.outcome);
  const tail = r.stderr.trim().split('\n').slice(-6).join('\n');
  if (r.timedOut) return { class: 'hang', phase, message: `no verdict after ${timeoutMs} ms (last phase: ${phase})`, ms };
  if (r.signal || r.code !== 0 || !verdict) {
    const how = r.signal ? `signal ${r.signal}` : `exit code ${r.code}`;
    const said = verdict ? ` after reporting ${verdict.outcome}${verdict.code ? ` ${verdict.code}` : ''}` : '';
    return { class: 'crash', phase, message: `${how}${said}; stderr: ${tail}`, ms };
  }
  if (verdict.outcome === 'error') {
    const typed = verdict.engineError && verdict.code !== 'ERR_INTERNAL';
    return { class: typed ? 'typed' : 'untyped', phase: verdict.phase, code: verdict.code ?? verdict.name, message: verdict.message, ms };
  }
  const violations = judge(dir);
  return { class: violations.length ? 'silent' : 'loaded', phase: 'done', violations, ms };
}
