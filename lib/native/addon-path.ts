/**
 * Which native binary this package loads, found the way node-gyp-build finds it (a local build in build/Release
 * first, then prebuilds/<platform>-<arch>/), from the package's real-file folder: in an Electron app that is the
 * `app.asar.unpacked` twin of the folder inside `app.asar`, because dlopen cannot open a file inside the archive.
 * @internal
 * @module
 */
import { createRequire } from 'node:module';
import { sep } from 'node:path';
import { packageRoot, unpackedPath } from '../package-root.js';

/** The binary node-gyp-build picks, and whether it is a prebuild or a build made on this machine. @internal */
export interface AddonBinary {
  path: string;
  kind: 'prebuild' | 'local build';
}

/** node-gyp-build's path resolver (`load.path`): where `load(dir)` would load from, without loading. */
type ResolvePath = (dir: string) => string;

/**
 * The binary for the package at `root` (default: this package): from its unpacked twin when it is inside an ASAR
 * archive and the twin holds one (an app may unpack only the model), else from `root` itself. Throws
 * node-gyp-build's error ("No native build was found for platform=...") for the first folder tried when neither
 * holds one.
 * @internal
 */
export function resolveAddon(root: string = packageRoot()): AddonBinary {
  const resolvePath = (createRequire(import.meta.url)('node-gyp-build') as { path: ResolvePath }).path;
  const dirs = [...new Set([unpackedPath(root), root])];
  let firstError: unknown;
  for (const dir of dirs) {
    let path: string;
    try {
      path = resolvePath(dir);
    } catch (err) {
      firstError ??= err;
      continue;
    }
    // node-gyp-build's own layout: prebuilds/<platform>-<arch>/<tags>.node; everything else (build/Release,
    // build/Debug) was compiled here. A VTENGINE_PREBUILD folder follows the same layout.
    return { path, kind: path.includes(`${sep}prebuilds${sep}`) ? 'prebuild' : 'local build' };
  }
  throw firstError;
}
