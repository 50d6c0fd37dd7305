// Throwaway checkpoint folders for tests: random tiny models (scripts/random-checkpoint.mjs) and damaged copies.
import { copyFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
// @ts-expect-error -- a plain .mjs script shared with the benchmarks
import { writeRandomCheckpoint } from '../../scripts/random-checkpoint.mjs';

const made: string[] = [];

export function tempDir(prefix = 'vtengine-test-'): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  made.push(d);
  return d;
}

export function randomCheckpoint(shape = 'tiny-qwen3', dtype = 'bfloat16'): string {
  const d = tempDir();
  (writeRandomCheckpoint as (out: string, shape: string, o: { dtype: string }) => number)(d, shape, { dtype });
  return d;
}

export function copyCheckpoint(src: string): string {
  const d = tempDir();
  for (const f of readdirSync(src)) copyFileSync(join(src, f), join(d, f));
  return d;
}

export function removeTempDirs(): void {
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
}
