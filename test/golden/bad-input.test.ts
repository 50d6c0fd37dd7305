// Bad input never crashes the process: each case is an EngineError with its own stable code, and the same
// process then loads and runs a good checkpoint.
import { mkdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
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

// A safetensors file's header text and the data after it.
function readHeader(file: string): { text: string; data: Buffer } {
  const bytes = readFileSync(file);
  const n = Number(bytes.readBigUInt64LE(0));
  return { text: bytes.subarray(8, 8 + n).toString('utf8'), data: bytes.subarray(8 + n) };
}

// Writes `text` as the header in front of `data`, padded with spaces to a multiple of 8 as writers do (unless
// `pad` is false), with the length prefix to match.
function writeHeader(file: string, text: string, data: Buffer, pad = true): void {
  if (pad) text += ' '.repeat((8 - (Buffer.byteLength(text) % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(text)));
  writeFileSync(file, Buffer.concat([len, Buffer.from(text), data]));
}

type Entry = { dtype: string; shape: number[]; data_offsets: [number, number] };

// A copy of the checkpoint whose header went through `edit` (given the entries by name and in offset order).
function editHeader(src: string, edit: (h: Record<string, Entry>, byOffset: Array<[string, Entry]>) => Buffer | void): string {
  const dir = copyCheckpoint(src);
  const file = join(dir, 'model.safetensors');
  const { text, data } = readHeader(file);
  const h = JSON.parse(text) as Record<string, Entry>;
  const byOffset = Object.entries(h).sort((a, b) => a[1].data_offsets[0] - b[1].data_offsets[0]);
  const extra = edit(h, byOffset);
  writeHeader(file, JSON.stringify(h), extra ? Buffer.concat([data, extra]) : data);
  return dir;
}

const base = randomCheckpoint('tiny-qwen3', 'bfloat16');
const codes = new Map<string, string>();

describe('bad input', () => {
  it('an unset folder (undefined, null, \'\') → ERR_INVALID_OPTION, never the packaged default model', async () => {
    const unset = process.env.VT_SURELY_UNSET_MODEL_DIR; // the case this guards: Engine.load(process.env.MODEL)
    for (const [dir, shown] of [[unset, 'undefined'], [null, 'null'], ['', '""']] as const) {
      for (const call of [() => Engine.load(dir as string), () => Engine.load(dir as string, { device: 'cpu' }),
        () => Engine.estimate(dir as string)]) {
        const err = (await call().catch((e: unknown) => e)) as EngineError;
        expect(err).toBeInstanceOf(EngineError);
        expect(err.code).toBe('ERR_INVALID_OPTION');
        expect(err.message).toContain(`got ${shown}: an unset variable?`);
      }
    }
    // No folder at all (or options first) is still the default model.
    const engine = await Engine.load({ device: 'cpu' });
    expect(engine.modelInfo.architecture).toBe('Qwen3ForCausalLM');
    await engine.dispose();
  });

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

// Strict checkpoints (issue 19): each malformed header or config.json field that used to load silently (or fail
// untyped) is a typed error whose message names the tensor or the field.
describe('strict checkpoints', () => {
  async function expectRefused(dir: string, code: string, ...words: Array<string | RegExp>): Promise<void> {
    const err = await loadError(dir);
    expect(err.code, err.message).toBe(code);
    for (const w of words) expect(err.message).toMatch(w);
  }

  it('data_offsets shifted by 2 bytes (overlapping their neighbour) → ERR_BAD_CHECKPOINT', async () => {
    const dir = editHeader(base, (_h, byOffset) => {
      const t = byOffset[1][1];
      t.data_offsets = [t.data_offsets[0] - 2, t.data_offsets[1] - 2];
    });
    await expectRefused(dir, 'ERR_BAD_CHECKPOINT', /overlaps/, 'model.layers.0.input_layernorm.weight');
  });

  it('a gap between tensors → ERR_BAD_CHECKPOINT', async () => {
    let name = '';
    const dir = editHeader(base, (_h, byOffset) => {
      const [n, t] = byOffset[byOffset.length - 1];
      name = n;
      t.data_offsets = [t.data_offsets[0] + 4, t.data_offsets[1] + 4];
      return Buffer.alloc(4); // the file grows with it, so only the gap is wrong
    });
    await expectRefused(dir, 'ERR_BAD_CHECKPOINT', /4 bytes before tensor/, name, /belong to no tensor/);
  });

  it('a tensor named twice → ERR_BAD_CHECKPOINT', async () => {
    const dir = copyCheckpoint(base);
    const file = join(dir, 'model.safetensors');
    const { text, data } = readHeader(file);
    const entry = text.match(/"model\.norm\.weight":\{[^}]*\}/)![0];
    writeHeader(file, text.trimEnd().replace(/\}$/, `,${entry}}`), data);
    await expectRefused(dir, 'ERR_BAD_CHECKPOINT', /"model\.norm\.weight" appears twice/);
  });

  it('a dtype the safetensors format does not define → ERR_UNSUPPORTED_DTYPE', async () => {
    const dir = editHeader(base, (h) => {
      h['model.norm.weight'].dtype = 'Q4_K';
    });
    await expectRefused(dir, 'ERR_UNSUPPORTED_DTYPE', 'Q4_K', 'model.norm.weight');
  });

  it('byte length different from shape x dtype size → ERR_BAD_CHECKPOINT', async () => {
    const dir = editHeader(base, (h) => {
      h['model.norm.weight'].shape = [63];
    });
    await expectRefused(dir, 'ERR_BAD_CHECKPOINT', 'model.norm.weight', /has 128 bytes .* need 126/);
  });

  it('tensors misaligned by an odd header length → ERR_BAD_CHECKPOINT', async () => {
    const dir = copyCheckpoint(base);
    const file = join(dir, 'model.safetensors');
    const { text, data } = readHeader(file);
    writeHeader(file, text + ' ', data, false); // valid by the format (offsets are relative), but every BF16 is odd
    await expectRefused(dir, 'ERR_BAD_CHECKPOINT', 'model.embed_tokens.weight', /not a multiple of its 2-byte/);
  });

  it('hidden_act gelu on a SiLU model → ERR_UNSUPPORTED_ARCH', async () => {
    const dir = copyCheckpoint(base);
    editJson(join(dir, 'config.json'), (j) => (j.hidden_act = 'gelu'));
    await expectRefused(dir, 'ERR_UNSUPPORTED_ARCH', 'hidden_act', 'gelu');
  });

  it('rope_scaling of a type the engine does not implement → ERR_UNSUPPORTED_ARCH', async () => {
    const dir = copyCheckpoint(base);
    editJson(join(dir, 'config.json'), (j) => (j.rope_scaling = { rope_type: 'dynamic', factor: 2 }));
    await expectRefused(dir, 'ERR_UNSUPPORTED_ARCH', 'rope_scaling.rope_type', 'dynamic');
  });

  it('rope_scaling a string → ERR_BAD_CHECKPOINT', async () => {
    const dir = copyCheckpoint(base);
    editJson(join(dir, 'config.json'), (j) => (j.rope_scaling = 'yarn'));
    await expectRefused(dir, 'ERR_BAD_CHECKPOINT', 'rope_scaling', /object or null/);
  });

  it('quantization_config present → ERR_UNSUPPORTED_DTYPE', async () => {
    const dir = copyCheckpoint(base);
    editJson(join(dir, 'config.json'), (j) => (j.quantization_config = { quant_method: 'gptq', bits: 4 }));
    await expectRefused(dir, 'ERR_UNSUPPORTED_DTYPE', 'quantization_config', 'gptq');
  });

  it('a Qwen3 checkpoint declared as Llama, leaving q_norm/k_norm unused → ERR_BAD_CHECKPOINT', async () => {
    const dir = copyCheckpoint(base);
    editJson(join(dir, 'config.json'), (j) => {
      j.architectures = ['LlamaForCausalLM'];
      j.model_type = 'llama';
    });
    await expectRefused(dir, 'ERR_BAD_CHECKPOINT', /model\.layers\.0\.self_attn\.[qk]_norm\.weight/, /does not use it/);
  });

  it('model_type disagreeing with architectures → ERR_BAD_CHECKPOINT', async () => {
    const dir = copyCheckpoint(base);
    editJson(join(dir, 'config.json'), (j) => (j.architectures = ['LlamaForCausalLM']));
    await expectRefused(dir, 'ERR_BAD_CHECKPOINT', 'model_type', 'qwen3', 'LlamaForCausalLM');
  });

  it('a size that is not an integer → ERR_BAD_CHECKPOINT', async () => {
    const dir = copyCheckpoint(base);
    editJson(join(dir, 'config.json'), (j) => (j.hidden_size = 64.5));
    await expectRefused(dir, 'ERR_BAD_CHECKPOINT', 'hidden_size', '64.5');
  });

  it('config.json or generation_config.json a directory → ERR_BAD_CHECKPOINT naming it', async () => {
    for (const name of ['config.json', 'generation_config.json']) {
      const dir = copyCheckpoint(base);
      rmSync(join(dir, name));
      mkdirSync(join(dir, name));
      await expectRefused(dir, 'ERR_BAD_CHECKPOINT', name, /is a directory/);
    }
  });

  it('the unmodified checkpoint still loads', async () => {
    const engine = await Engine.load(copyCheckpoint(base), { device: 'cpu', threads: 1 });
    await engine.dispose();
  });
});
