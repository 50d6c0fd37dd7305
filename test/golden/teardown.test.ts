// Programs that end with engines alive and no dispose() — the script simply ends, process.exit(), an uncaught
// exception, a worker thread ending or terminated — each in its own Node process (test/helpers/teardown-*.mjs),
// on the CPU. Each must exit with its own code, promptly, without a crash: before binding/live_set.h, most of these
// ended in SIGSEGV or SIGABRT at exit, or hung in Node's teardown.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

import { fixtureDir } from '../helpers/fixtures.js';
// @ts-expect-error -- a plain .mjs helper (the GPU machine runs it without vitest); its exports are typed below
import * as teardown from '../helpers/teardown-matrix.mjs';

interface Ended {
  code: number | null;
  signal: string | null;
  stderr: string;
  exitMs: number;
}
const { MATRIX, runEnding, verdict } = teardown as {
  MATRIX: Array<[string, number]>;
  runEnding: (scenario: string, dir: string, device?: string) => Promise<Ended>;
  verdict: (scenario: string, expected: number, r: Ended) => string;
};

const built = existsSync(fileURLToPath(new URL('../../dist/index.js', import.meta.url)));

describe.skipIf(!built)('ending without dispose()', () => {
  it.each(MATRIX)('%s exits with %i, without a crash or a hang', async (scenario, expected) => {
    const r = await runEnding(scenario, fixtureDir('llama-bf16'), 'cpu');
    expect(verdict(scenario, expected, r), `${r.exitMs} ms after ending\n${r.stderr}`).toBe('');
  });
});
