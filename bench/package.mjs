// The vtengine the Node benchmarks drive: this checkout's build (dist/, whose addon node-gyp-build finds in
// build/Release or else prebuilds/), or with VT_BENCH_PACKAGE=DIR an installed package (DIR: its folder, e.g.
// app/node_modules/vtengine after `npm install vtengine-*.tgz`), so that a figure can come from what a user installs.
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const dir = process.env.VT_BENCH_PACKAGE ? resolve(process.env.VT_BENCH_PACKAGE) : null;
const from = (file) => (dir ? pathToFileURL(join(dir, 'dist', file)).href : new URL(`../dist/${file}`, import.meta.url).href);

export const { Engine } = await import(from('index.js'));
export const { createServer } = await import(from('server/index.js'));
export const packageDir = dir ?? 'this checkout (dist/)';

/** One line: which package and binary serve, and whether cuBLASLt was there to find. */
export function servedBy() {
  const info = Engine.systemInfo();
  return `vtengine from ${packageDir}: ${info.binary.kind} ${info.binary.path}; cuBLASLt ` +
    `${info.cuda.cublasLt.found ? `found (${info.cuda.cublasLt.path})` : 'not found'}`;
}
