#!/usr/bin/env node
// Mutation fuzzer over checkpoint folders (issue 19, point 3): copies of the test fixtures and the default model
// with one or two mutations each (config.json, safetensors header and body, the index, tokenizer.json,
// tokenizer_config.json, generation_config.json), each loaded and run in a child process, classified as typed /
// loaded / silent / untyped / crash / hang (see scripts/fuzz/run-one.mjs). Exits 1 when any mutant is silent,
// untyped, a crash or a hang.
//
//   node scripts/fuzz-checkpoints.mjs --count 2000 --jobs 2 --seed 1 --json fuzz.json --failures fuzz-failures
//   node scripts/fuzz-checkpoints.mjs --replay fuzz-failures/seed1-m123-silent
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { BASES } from './fuzz/bases.mjs';
import { replay, runFuzz } from './fuzz/run.mjs';
import { FAILING, formatTally } from './fuzz/tally.mjs';

const { values: o } = parseArgs({
  options: {
    count: { type: 'string', default: '200' },
    seed: { type: 'string', default: '1' },
    jobs: { type: 'string', default: '2' },
    timeout: { type: 'string', default: '30' },
    bases: { type: 'string', default: Object.keys(BASES).join(',') },
    json: { type: 'string' },
    failures: { type: 'string' },
    replay: { type: 'string' },
    quiet: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});

if (o.help) {
  console.log(`usage: node scripts/fuzz-checkpoints.mjs [--count N] [--seed S] [--jobs J] [--timeout SECONDS]
       [--bases ${Object.keys(BASES).join(',')}] [--json OUT.json] [--failures DIR] [--quiet]
       node scripts/fuzz-checkpoints.mjs --replay MUTANT_DIR`);
  process.exit(0);
}

const int = (name, min) => {
  const n = Number(o[name]);
  if (!Number.isInteger(n) || n < min) {
    console.error(`--${name} must be an integer >= ${min}, got ${o[name]}`);
    process.exit(2);
  }
  return n;
};
const timeoutMs = int('timeout', 1) * 1000;

if (o.replay) {
  const { recorded, result } = await replay(o.replay, timeoutMs);
  if (recorded) console.log(`recorded: ${recorded.class} (${recorded.phase}) ${recorded.code ?? ''} ${recorded.message ?? ''}`);
  console.log(formatTally({ ...(await import('./fuzz/tally.mjs')).tally([result]) }, [result]));
  console.log(JSON.stringify(result, null, 2));
  process.exit(FAILING.has(result.class) ? 1 : 0);
}

const count = int('count', 1);
const seed = int('seed', 0);
const started = Date.now();
const { results, tally } = await runFuzz({
  count,
  seed,
  jobs: int('jobs', 1),
  bases: o.bases.split(',').filter(Boolean),
  timeoutMs,
  failuresDir: o.failures,
  onResult(r, done) {
    if (o.quiet) return;
    const flag = FAILING.has(r.class) ? ` <-- ${r.class.toUpperCase()}` : '';
    const what = r.mutations.map((m) => m.kind).join(' + ');
    process.stderr.write(`[${done}/${count}] #${r.index} ${r.base} ${what}: ${r.class}${r.code ? ` ${r.code}` : ''}${flag}\n`);
  },
});
console.log(formatTally(tally, results));
console.log(`(seed ${seed}, ${((Date.now() - started) / 1000).toFixed(0)} s)`);
if (o.json) writeFileSync(o.json, JSON.stringify({ seed, count, tally, results }, null, 2));
process.exit(tally.failing > 0 ? 1 : 0);
