// Reads the reference fixtures that scripts/make_fixtures.py wrote with transformers (float64) on the GPU machine.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const FIXTURES_DIR = fileURLToPath(new URL('../fixtures', import.meta.url));

export interface ReferencePrompt {
  ids: number[];
  greedy: number[];
  top_ids: number[][];
  top_logprobs: number[][];
  margins: number[];
}

export interface Reference {
  fixture: string;
  architecture: string;
  dtype: string;
  transformers: string;
  prompts: ReferencePrompt[];
}

/** Every fixture folder that carries a reference.json, by name. */
export function listFixtures(): string[] {
  if (!existsSync(FIXTURES_DIR)) return [];
  return readdirSync(FIXTURES_DIR)
    .filter((name) => existsSync(join(FIXTURES_DIR, name, 'reference.json')))
    .sort();
}

export function fixtureDir(name: string): string {
  return join(FIXTURES_DIR, name);
}

export function readReference(name: string): Reference {
  return JSON.parse(readFileSync(join(FIXTURES_DIR, name, 'reference.json'), 'utf8')) as Reference;
}

/** The number of leading steps whose greedy choice the reference calls decisive (margin >= minMargin). */
export function decisiveSteps(p: ReferencePrompt, minMargin: number): number {
  const i = p.margins.findIndex((m) => m < minMargin);
  return i < 0 ? p.margins.length : i;
}
