/**
 * The package's own folder, found by walking up from this module to the package.json named "vtengine". The same
 * code then works from lib/ (tests), from dist/ (the ESM build, one file per module) and from dist/index.cjs (the
 * CommonJS bundle, where every module shares one location).
 * @internal
 * @module
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let cached: string | undefined;

/** @internal */
export function packageRoot(): string {
  if (cached) return cached;
  const start = dirname(fileURLToPath(import.meta.url));
  for (let dir = start; ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) {
      try {
        if ((JSON.parse(readFileSync(manifest, 'utf8')) as { name?: string }).name === 'vtengine') return (cached = dir);
      } catch {
        // not ours (or unreadable): keep walking
      }
    }
    if (dirname(dir) === dir) throw new Error(`vtengine: cannot find the package folder above ${start}`);
  }
}
