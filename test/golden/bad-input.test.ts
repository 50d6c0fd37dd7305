// Bad input never crashes the process: each case is an EngineError with its own stable code, and the same
// process then loads and runs a good checkpoint.
import { readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { Engine, EngineError } from '../../lib/index.js';
import { copyCheckpoint, randomCheckpoint, removeTempDirs, tempDir } from '../helpers/checkpoints.js';

afterAll(removeTempDirs);

async function loadError(dir: string, options: Record<string, unknown> = {}): Promise<EngineError> {
  try {
    const e = await Engine.load(dir, { device: 'cpu', threads: 1, ...options });
    await e.dispose();
  } catch (err) {
    expect(err).toBeInstanceOf(EngineError);
    return err as EngineError;
  }
  throw new Error('load succeeded but should have failed');
}

function editJson(path: string, edit: (j: Record<string, unknown>) => void): void {
  const j = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  edit(j);
  writeFileSync(path, JSON.stringify(j));
}

const base = randomCheckpoint('tiny-qwen3', 'bfloat16');
const codes = new Map<string, string>();

describe('bad input', () => {
  it('missing folder → ERR_MODEL_NOT_FOUND', async () => {
    const err = await loadError(join(tempDir(), 'does-not-exist'));
    expect(err.code).toBe('ERR_MODEL_NOT_FOUND');
    codes.set('missing folder', err.code);
  });

  it('missing config.json → ERR_MISSING_FILE', async () => {
    const dir = copyCheckpoint(base);
    rmSync(join(dir, 'config.json'));
    const err = await loadError(dir);
    expect(err.code).toBe('ERR_MISSING_FILE');
    expect(err.message).toContain('config.json');
    codes.set('missing config', err.code);
  });

  it('unknown architecture → ERR_UNSUPPORTED_ARCH', async () => {
    const dir = copyCheckpoint(base);
    editJson(join(dir, 'config.json'), (j) => (j.architectures = ['GPTNeoXForCausalLM']));
    const err = await loadError(dir);
    expect(err.code).toBe('ERR_UNSUPPORTED_ARCH');
    expect(err.message).toContain('GPTNeoXForCausalLM');
    codes.set('unknown arch', err.code);
  });

  it('truncated safetensors → ERR_TRUNCATED_CHECKPOINT', async () => {
    const dir = copyCheckpoint(base);
    const file = join(dir, 'model.safetensors');
    truncateSync(file, readFileSync(file).length - 1000);
    const err = await loadError(dir);
    expect(err.code).toBe('ERR_TRUNCATED_CHECKPOINT');
    codes.set('truncated', err.code);
  });

  it('header length past the end of the file → ERR_BAD_CHECKPOINT', async () => {
    const dir = copyCheckpoint(base);
    const file = join(dir, 'model.safetensors');
    const bytes = readFileSync(file);
    bytes.writeBigUInt64LE(BigInt(bytes.length + 4096), 0);
    writeFileSync(file, bytes);
    const err = await loadError(dir);
    expect(err.code).toBe('ERR_BAD_CHECKPOINT');
    expect(err.message).toMatch(/header length/);
    codes.set('header past end', err.code);
  });

  it('tensor shape different from the config → ERR_SHAPE_MISMATCH', async () => {
    const dir = copyCheckpoint(base);
    editJson(join(dir, 'config.json'), (j) => (j.intermediate_size = 96));
    const err = await loadError(dir);
    expect(err.code).toBe('ERR_SHAPE_MISMATCH');
    expect(err.message).toContain('mlp.gate_proj.weight');
    codes.set('shape', err.code);
  });

  it('unsupported dtype → ERR_UNSUPPORTED_DTYPE', async () => {
    const dir = copyCheckpoint(base);
    const file = join(dir, 'model.safetensors');
    const bytes = readFileSync(file);
    const n = Number(bytes.readBigUInt64LE(0));
    const header = bytes.subarray(8, 8 + n).toString('utf8');
    // Same byte length, so the offsets stay valid: the first weight becomes 16-bit integers.
    const patched = header.replace('"dtype":"BF16"', '"dtype":"I16" ');
    expect(patched).not.toBe(header);
    bytes.write(patched, 8, 'utf8');
    writeFileSync(file, bytes);
    const err = await loadError(dir);
    expect(err.code).toBe('ERR_UNSUPPORTED_DTYPE');
    expect(err.message).toContain('I16');
    codes.set('dtype', err.code);
  });

  it('prompt longer than maxContext → ERR_CONTEXT_OVERFLOW; invalid options → ERR_INVALID_OPTION', async () => {
    const engine = await Engine.load(base, { device: 'cpu', threads: 1, maxContext: 64 });
    try {
      const tooLong = Array.from({ length: 64 }, (_, i) => i + 4);
      let err: unknown;
      try {
        engine.generate({ tokens: tooLong });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(EngineError);
      expect((err as EngineError).code).toBe('ERR_CONTEXT_OVERFLOW');
      codes.set('context', (err as EngineError).code);

      for (const bad of [{ temperature: -1 }, { topP: 0 }, { maxTokens: 1.5 }, { logprobs: 50 }, { bogus: 1 }]) {
        let e2: unknown;
        try {
          engine.generate({ tokens: [5, 6, 7] }, bad as never);
        } catch (e) {
          e2 = e;
        }
        expect(e2, JSON.stringify(bad)).toBeInstanceOf(EngineError);
        expect((e2 as EngineError).code).toBe('ERR_INVALID_OPTION');
      }
      const loadErr = await loadError(base, { threads: -2 });
      expect(loadErr.code).toBe('ERR_INVALID_OPTION');
      codes.set('options', loadErr.code);

      // After all of that, the process and the engine still work.
      const ok = await engine.generate({ tokens: [5, 6, 7] }, { maxTokens: 4, stopTokenIds: [] });
      expect(ok.tokenIds).toHaveLength(4);
    } finally {
      await engine.dispose();
    }
  });

  it('gives every case its own code', () => {
    expect(codes.size).toBe(9);
    expect(new Set(codes.values()).size).toBe(9);
  });
});
