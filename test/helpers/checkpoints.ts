// Throwaway checkpoint folders for tests: random tiny models (scripts/random-checkpoint.mjs) and damaged copies.
import { closeSync, copyFileSync, mkdtempSync, openSync, readdirSync, readSync, rmSync } from 'node:fs';
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

/** Every tensor of a folder's safetensors files, from their headers alone: name, data bytes. */
export function headerTensors(dir: string): Array<{ name: string; bytes: number }> {
  const out: Array<{ name: string; bytes: number }> = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.safetensors'))) {
    const fd = openSync(join(dir, file), 'r');
    try {
      const len = Buffer.alloc(8);
      readSync(fd, len, 0, 8, 0);
      const header = Buffer.alloc(Number(len.readBigUInt64LE()));
      readSync(fd, header, 0, header.length, 8);
      const tensors = JSON.parse(header.toString('utf8')) as Record<string, { data_offsets?: [number, number] }>;
      for (const [name, t] of Object.entries(tensors))
        if (name !== '__metadata__' && t.data_offsets) out.push({ name, bytes: t.data_offsets[1] - t.data_offsets[0] });
    } finally {
      closeSync(fd);
    }
  }
  return out;
}
