// A fuzz run: draws mutants, runs them `jobs` at a time, keeps the failing ones if asked, and tallies. Used by
// scripts/fuzz-checkpoints.mjs and by the bounded test (test/golden/fuzz-checkpoints.test.ts).
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleEngine } from './engine-bundle.mjs';
import { BASES, loadBase } from './bases.mjs';
import { applyMutations, planBase } from './catalogue.mjs';
import { Mutant, linkTree } from './mutant.mjs';
import { runOne } from './run-one.mjs';
import { FAILING, tally } from './tally.mjs';

/** The description a kept (or replayed) mutant folder carries. */
export const META = 'fuzz-mutant.json';

/** Builds mutant `index` in `dir`; returns its base name and mutations. */
export function buildMutant(bases, seed, index, dir) {
  const base = planBase(bases, seed, index);
  linkTree(base.dir, dir);
  const mutant = new Mutant(base, dir);
  const mutations = applyMutations(mutant, seed, index);
  mutant.flush();
  return { base: base.name, mutations };
}

/**
 * @param {object} o
 * @param {number} o.count
 * @param {number} o.seed
 * @param {number} [o.jobs]
 * @param {string[]} [o.bases] - base names (default: all)
 * @param {number} [o.timeoutMs] - a run without a verdict after this long is a hang
 * @param {string} [o.failuresDir] - failing mutants are copied here, with their description
 * @param {(r: object, done: number) => void} [o.onResult]
 */
export async function runFuzz({ count, seed, jobs = 2, bases = Object.keys(BASES), timeoutMs = 30_000, failuresDir, onResult }) {
  const bundle = await bundleEngine();
  const loaded = bases.map(loadBase);
  const work = mkdtempSync(join(tmpdir(), 'vtengine-fuzz-'));
  const results = new Array(count);
  let next = 0;
  let done = 0;
  const one = async (index) => {
    const dir = join(work, `m${index}`);
    let r;
    try {
      const { base, mutations } = buildMutant(loaded, seed, index, dir);
      r = { index, base, mutations, ...(await runOne(bundle, dir, timeoutMs)) };
    } catch (err) {
      r = { index, base: '?', mutations: [], class: 'fuzzer-error', phase: 'mutate', message: err.stack };
    }
    if (failuresDir && FAILING.has(r.class) && existsSync(dir)) {
      const keep = join(failuresDir, `seed${seed}-m${index}-${r.class}`);
      mkdirSync(failuresDir, { recursive: true });
      rmSync(keep, { recursive: true, force: true });
      cpSync(dir, keep, { recursive: true });
      writeFileSync(join(keep, META), JSON.stringify({ seed, ...r }, null, 2));
    }
    rmSync(dir, { recursive: true, force: true });
    results[index] = r;
    onResult?.(r, ++done);
  };
  try {
    await Promise.all(Array.from({ length: Math.max(1, jobs) }, async () => {
      while (next < count) await one(next++);
    }));
  } finally {
    rmSync(work, { recursive: true, force: true });
    rmSync(bundle, { force: true });
  }
  return { results, tally: tally(results) };
}

/** Runs a kept mutant folder again (as it is on disk) and returns the new result beside the recorded one. */
export async function replay(dir, timeoutMs = 30_000) {
  const bundle = await bundleEngine();
  const meta = existsSync(join(dir, META)) ? JSON.parse(readFileSync(join(dir, META), 'utf8')) : undefined;
  const r = await runOne(bundle, dir, timeoutMs).finally(() => rmSync(bundle, { force: true }));
  return { recorded: meta, result: { index: meta?.index ?? 0, base: meta?.base ?? '?', mutations: meta?.mutations ?? [], ...r } };
}
