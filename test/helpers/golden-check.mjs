// The golden fixtures replayed through an installed copy of the package, without vitest: for a tarball installed
// into an empty folder (scripts/package-check.sh), where the binary is the prebuild and there is no dev tree.
// The rules are test/golden/greedy.test.ts's and test/gpu/golden-cuda.test.ts's (test/helpers/golden-rules.mjs): for
// every fixture's transformers reference (test/fixtures/*/reference.json), greedy ids equal up to the first step
// whose reference margin is below 1e-3, and the top-5 logprobs within 2e-3 through that step.
//
//   node test/helpers/golden-check.mjs --package DIR [--device cpu|cuda|auto] [--dtype float32|bfloat16|auto]
// DIR is the installed package (e.g. <folder>/node_modules/vtengine). Prints one line per prompt and a tally;
// exits 1 on any miss.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

import { LOGPROB_TOL, decisiveSteps, logprobSteps, topLogprobDiffs } from './golden-rules.mjs';

const FIXTURES = fileURLToPath(new URL('../fixtures', import.meta.url));

const { values: opts } = parseArgs({
  options: {
    package: { type: 'string' },
    device: { type: 'string', default: 'auto' },
    dtype: { type: 'string', default: 'float32' },
  },
});
if (!opts.package) {
  console.error('usage: node test/helpers/golden-check.mjs --package DIR [--device cpu|cuda|auto] [--dtype float32]');
  process.exit(2);
}
const { Engine } = await import(pathToFileURL(join(opts.package, 'dist/index.js')).href);

const fixtures = readdirSync(FIXTURES).filter((n) => existsSync(join(FIXTURES, n, 'reference.json'))).sort();
let passed = 0;
const misses = [];

function topMisses(ref, step, got) {
  return topLogprobDiffs(ref, step, got)
    .filter((d) => !(d.diff <= LOGPROB_TOL))
    .map(({ id, have, want }) => `step ${step} id ${id}: ${have} vs ${want}`);
}

for (const name of fixtures) {
  const ref = JSON.parse(readFileSync(join(FIXTURES, name, 'reference.json'), 'utf8'));
  const engine = await Engine.load(join(FIXTURES, name), { device: opts.device, activationDtype: opts.dtype });
  try {
    for (const [i, p] of ref.prompts.entries()) {
      const r = await engine.generate({ tokens: p.ids },
        { maxTokens: p.greedy.length, temperature: 0, logprobs: 5, stopTokenIds: [] });
      const n = decisiveSteps(p);
      const problems = [];
      const got = r.tokenIds.slice(0, n);
      if (JSON.stringify(got) !== JSON.stringify(p.greedy.slice(0, n))) {
        problems.push(`greedy ids ${JSON.stringify(got)} vs ${JSON.stringify(p.greedy.slice(0, n))}`);
      }
      for (let s = 0; s < logprobSteps(p, n); s++) problems.push(...topMisses(p, s, r.logprobs[s]));
      const label = `${name} (${engine.modelInfo.device}) prompt ${i}: ${n} decisive steps`;
      if (problems.length) {
        misses.push(label);
        console.log(`MISS ${label}\n  ${problems.slice(0, 5).join('\n  ')}`);
      } else {
        passed++;
        console.log(`ok   ${label}`);
      }
    }
  } finally {
    await engine.dispose();
  }
}
console.log(`golden-check: ${passed} passed, ${misses.length} missed, over ${fixtures.length} fixtures`);
process.exit(misses.length || !passed ? 1 : 0);
