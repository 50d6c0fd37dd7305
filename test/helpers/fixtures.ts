// Reads the reference fixtures that scripts/make_fixtures.py wrote with transformers (float64) on the GPU machine.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

// @ts-expect-error -- a plain .mjs helper (golden-check.mjs runs it with node alone); its exports are typed below
import * as rules from './golden-rules.mjs';

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

/**
 * Whether a fixture's model has recurrent layers (config.json's layer_types names linear_attention: Qwen3.5's
 * Gated DeltaNet), which keep a per-sequence state that cached K/V blocks cannot restore: no prefix caching.
 */
export function hasRecurrentLayers(name: string): boolean {
  const config = JSON.parse(readFileSync(join(FIXTURES_DIR, name, 'config.json'), 'utf8')) as Record<string, unknown>;
  const text = (config.text_config as Record<string, unknown> | undefined) ?? config;
  return ((text.layer_types as string[] | undefined) ?? []).includes('linear_attention');
}

export function fixtureDir(name: string): string {
  return join(FIXTURES_DIR, name);
}

export function readReference(name: string): Reference {
  return JSON.parse(readFileSync(join(FIXTURES_DIR, name, 'reference.json'), 'utf8')) as Reference;
}

/** One of the reference's top ids at a step against ours: `have` is undefined when it is not in our top list. */
export interface TopLogprobDiff {
  id: number;
  want: number;
  have: number | undefined;
  diff: number;
}

/**
 * The golden rules, typed; defined (and explained) in golden-rules.mjs. decisiveSteps: the number of leading steps
 * whose greedy choice the reference calls decisive (margin >= minMargin, default MIN_MARGIN).
 */
export const { MIN_MARGIN, LOGPROB_TOL, decisiveSteps, logprobSteps, topLogprobDiffs } = rules as {
  MIN_MARGIN: number;
  LOGPROB_TOL: number;
  decisiveSteps: (p: ReferencePrompt, minMargin?: number) => number;
  logprobSteps: (p: ReferencePrompt, n: number) => number;
  topLogprobDiffs: (
    p: ReferencePrompt,
    step: number,
    got: { top: Array<{ tokenId: number; logprob: number }> },
  ) => TopLogprobDiff[];
};
