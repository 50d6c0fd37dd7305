// The API reference builds from the TSDoc comments with no warning (typedoc.json treats warnings as errors and
// validates links, exports and that every public item is documented), so an undocumented export fails here.
import { execFile } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

it('npm run docs builds the typedoc site without warnings', async () => {
  const out = join(tmpdir(), `vtengine-docs-${process.pid}`);
  const typedoc = join(ROOT, 'node_modules/typedoc/bin/typedoc');
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [typedoc, '--out', out], { cwd: ROOT });
    expect(`${stdout}${stderr}`).not.toMatch(/warning|error/i);
    expect(existsSync(join(out, 'classes/Engine.html'))).toBe(true);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
