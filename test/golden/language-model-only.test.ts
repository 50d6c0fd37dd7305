// A multimodal checkpoint's language model alone (issue 31): the vision tower's tensors are never read. The engine
// reads the files only where the language model's tensors lie and drops the tower's pages, so none of them is in
// memory after a load and a generation (the mapping's resident pages, mincore, as memory() reports them), its bytes
// are listed as skipped by memory() and Engine.estimate() (the reference: the safetensors headers), and the tokens
// are transformers' with and without `languageModelOnly`.
import { closeSync, fsyncSync, openSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { Engine } from '../../lib/index.js';
import { copyCheckpoint, headerTensors, removeTempDirs } from '../helpers/checkpoints.js';
import { decisiveSteps, fixtureDir, listFixtures, readReference } from '../helpers/fixtures.js';

/** Bytes of the tensors under model.visual. in a folder's safetensors headers. */
function towerBytes(dir: string): number {
  return headerTensors(dir)
    .filter((t) => t.name.startsWith('model.visual.'))
    .reduce((sum, t) => sum + t.bytes, 0);
}

const withTower = listFixtures().filter((n) => towerBytes(fixtureDir(n)) > 0);

afterAll(() => removeTempDirs());

describe.skipIf(withTower.length === 0)('languageModelOnly', () => {
  it.each(withTower)('%s: no tower byte resident, its bytes listed as skipped, the same tokens', async (name) => {
    // A fresh copy, written back to disk: its pages, the tower's among them, are in the page cache and clean, so the
    // engine can (and must) drop the tower's.
    const dir = copyCheckpoint(fixtureDir(name));
    for (const f of readdirSync(dir)) {
      const fd = openSync(join(dir, f), 'r+');
      fsyncSync(fd);
      closeSync(fd);
    }
    const tower = towerBytes(dir);
    const ref = readReference(name);
    const prompt = ref.prompts.reduce((a, b) => (b.ids.length > a.ids.length ? b : a));
    const steps = decisiveSteps(prompt);
    const tokens: number[][] = [];
    for (const languageModelOnly of [true, false]) {
      const engine = await Engine.load(dir, { device: 'cpu', threads: 2, languageModelOnly });
      try {
        const r = await engine.generate({ tokens: prompt.ids }, { maxTokens: prompt.greedy.length, stopTokenIds: [] });
        tokens.push(r.tokenIds.slice(0, steps));
        const { weights } = (await engine.memory()).engine;
        expect(weights.skippedBytes).toBe(tower);
        expect(weights.skippedResidentBytes).toBe(0);
        expect(weights.mappedResidentBytes).toBeGreaterThan(0); // (the language model's pages are)
      } finally {
        await engine.dispose();
      }
    }
    expect(tokens[0]).toEqual(prompt.greedy.slice(0, steps));
    expect(tokens[1]).toEqual(tokens[0]);
    const est = await Engine.estimate(dir, { device: 'cpu', languageModelOnly: true });
    expect(est.weights.skippedBytes).toBe(tower);
  });

  it('is a boolean', async () => {
    await expect(Engine.load(fixtureDir(withTower[0]!), { languageModelOnly: 1 as unknown as boolean })).rejects.toMatchObject({
      code: 'ERR_INVALID_OPTION',
    });
  });
});
