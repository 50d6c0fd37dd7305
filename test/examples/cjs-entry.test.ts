// The CommonJS entry point (dist/index.cjs, built by `npm run build:ts`): `require('vtengine')` from a CommonJS
// program gives the same API, loads the native addon and the default model, and decodes the reference tokens.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

import { fixtureDir, readReference } from '../helpers/fixtures.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const built = existsSync(`${root}/dist/index.cjs`);

describe.skipIf(!built)('require("vtengine")', () => {
  it('works from CommonJS and decodes the reference greedy ids', () => {
    const ref = readReference('llama-bf16').prompts[2];
    const program = `
      const { Engine, EngineError, DEFAULT_MODEL_DIR } = require('vtengine');
      (async () => {
        const engine = await Engine.load(${JSON.stringify(fixtureDir('llama-bf16'))}, { device: 'cpu', threads: 1 });
        const r = await engine.generate({ tokens: ${JSON.stringify(ref.ids)} }, { maxTokens: 24, stopTokenIds: [] });
        await engine.dispose();
        let code;
        try { await Engine.load('/nonexistent-vtengine-folder'); } catch (e) { code = e instanceof EngineError && e.code; }
        console.log(JSON.stringify({ ids: r.tokenIds, code, defaultDir: DEFAULT_MODEL_DIR }));
      })();`;
    const out = JSON.parse(execFileSync(process.execPath, ['-e', program], { cwd: root, encoding: 'utf8' }));
    expect(out.ids).toEqual(ref.greedy);
    expect(out.code).toBe('ERR_MODEL_NOT_FOUND');
    expect(out.defaultDir).toBe(`${root}models/default`.replace(/\/$/, ''));
  });
});
