/**
 * The package's own folder, found by walking up from this module to the package.json named "vtengine". The same
 * code then works from lib/ (tests), from dist/ (the ESM build, one file per module) and from dist/index.cjs (the
 * CommonJS bundle, where every module shares one location). In an Electron app packed into an ASAR archive the
 * folder lies inside the archive; {@link unpackedPath} finds the real files the addon and the model need.
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

/** The package's version, from its package.json. @internal */
export function packageVersion(): string {
  return (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
}

/** `…/app.asar/…` (any `*.asar` archive), not `…/app.asar.unpacked/…`. */
const ASAR_SEGMENT = /\.asar(?=[\\/]|$)/;

/**
 * The real-file twin of `path` when it lies inside an Electron ASAR archive: `…/app.asar/node_modules/vtengine` →
 * `…/app.asar.unpacked/node_modules/vtengine`, where electron-builder's `asarUnpack` and Electron Forge's
 * `asar.unpack` put the files that must stay files. Electron's fs reads the JavaScript out of the archive, but
 * dlopen (the addon) and mmap (a model's weights) need a path on disk. Returns `path` unchanged when it is not
 * in an archive or its twin does not exist (then Electron's own fallback, a temporary copy, is all there is).
 * @internal
 */
export function unpackedPath(path: string, exists: (p: string) => boolean = existsSync): string {
  if (!ASAR_SEGMENT.test(path)) return path;
  const twin = path.replace(ASAR_SEGMENT, '.asar.unpacked');
  return exists(twin) ? twin : path;
}
