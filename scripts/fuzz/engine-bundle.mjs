// The fuzz worker runs the engine's current TypeScript (lib/), not a dist/ that may be stale: this bundles
// lib/index.ts with esbuild (a dev dependency) into build/fuzz/, inside the package, so that the bundle finds the
// package root, the native addon in build/Release and the npm dependencies exactly as lib/ would.
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * Builds the bundle (about a second) and returns its path: one file per process, so that a run in progress never
 * picks up another run's build halfway. The caller removes it.
 */
export async function bundleEngine() {
  const outfile = join(ROOT, 'build', 'fuzz', `vtengine-${process.pid}.mjs`);
  mkdirSync(dirname(outfile), { recursive: true });
  await build({
    entryPoints: [join(ROOT, 'lib', 'index.ts')],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    logLevel: 'warning',
  });
  return outfile;
}
