// examples/memory.mjs runs as a reader would run it (node, importing 'vtengine', which resolves to dist/: build
// with `npm run build:ts` first) and prints the estimate and the components that the API gives in this process.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

import { Engine } from '../../lib/index.js';
import { fixtureDir } from '../helpers/fixtures.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MiB = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

describe.skipIf(!existsSync(join(ROOT, 'dist/index.js')))('examples/memory.mjs', () => {
  it('prints the estimate, the peaks, and the components of the engine it loaded', async () => {
    const dir = fixtureDir('qwen3-bf16-sharded');
    const { stdout } = await promisify(execFile)(process.execPath, [join(ROOT, 'examples/memory.mjs'), dir], { cwd: ROOT });
    const lines = stdout.trimEnd().split('\n');

    const est = await Engine.estimate(dir, { maxContext: 1024 });
    const { hostHeapBytes, pageCacheBytes, deviceBytes } = est.totals;
    expect(lines[0]).toBe(`estimate: host heap ${MiB(hostHeapBytes)}, page cache ${MiB(pageCacheBytes)}, device ${MiB(deviceBytes)}, fits: true`);
    expect(lines[1]).toMatch(/^peaks: PSS [\d.]+ MiB, RSS [\d.]+ MiB, MemAvailable drop -?[\d.]+ MiB \(\d+ samples\)$/);

    const engine = await Engine.load(dir, { maxContext: 1024, threads: 1 });
    try {
      const held = (await engine.memory()).engine;
      const rows = held.components.map((c) => `  ${`${c.name} (${c.tier})`.padEnd(20)} ${MiB(c.bytes)}`);
      expect(lines.slice(2, 2 + rows.length)).toStrictEqual(rows);
      expect(lines[2 + rows.length]).toBe(`engine total ${MiB(held.totalBytes)}; KV blocks 0/${held.kvCache.blocksTotal}`);
      expect(lines[3 + rows.length]).toMatch(/^process: PSS [\d.]+ MiB, RSS [\d.]+ MiB$/);
    } finally {
      await engine.dispose();
    }
  });
});
