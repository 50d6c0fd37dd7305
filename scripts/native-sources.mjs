// Lists the engine's C++ sources (cuda/src/**/*.cpp) for binding.gyp and the native test build, so a new
// file needs no edit of either.
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
function walk(dir) {
  return readdirSync(dir).sort().flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? walk(p) : p.endsWith('.cpp') ? [p] : [];
  });
}
console.log(walk(join(root, 'cuda/src')).map((p) => relative(root, p)).join(' '));
