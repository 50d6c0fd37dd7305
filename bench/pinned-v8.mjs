// The node flags of the memory benchmarks (bench/soak.mjs, bench/lifetimes.mjs), set by each script itself so that
// its command cannot leave them out: --expose-gc (samples after a full GC) and --max-semi-space-size=1, which
// holds V8's young generation at its initial size (with node's defaults it grows and shrinks by up to 25 MiB on a
// schedule of its own: bench/RESULTS.md, "Soak"). nodeDefaults keeps V8's sizing (still with --expose-gc).
import { spawnSync } from 'node:child_process';

/** Runs this script again under the flags unless it already runs under them; returns only when it does. */
export function runUnderPinnedV8(nodeDefaults) {
  const flags = nodeDefaults ? ['--expose-gc'] : ['--expose-gc', '--max-semi-space-size=1'];
  if (flags.every((f) => process.execArgv.includes(f))) return;
  const r = spawnSync(process.execPath, [...new Set([...process.execArgv, ...flags]), ...process.argv.slice(1)],
    { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}
