// The checkpoint fuzzer's oracle (scripts/fuzz/oracle.mjs) decides which loaded mutants are silent loads, so it is
// tested on its own: every base checkpoint is clean, the mutations the acceptance names are caught, and the valid
// mutations (weights' bits flipped, offsets swapped between same-size tensors, entries reordered) are not. Also:
// a mutant depends on (seed, index) alone.
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

// @ts-expect-error -- plain .mjs scripts of the fuzzer
import { BASES, loadBase } from '../../scripts/fuzz/bases.mjs';
// @ts-expect-error -- idem
import { Mutant, linkTree } from '../../scripts/fuzz/mutant.mjs';
// @ts-expect-error -- idem
import { judge } from '../../scripts/fuzz/oracle.mjs';
// @ts-expect-error -- idem
import { raw } from '../../scripts/fuzz/raw-json.mjs';
// @ts-expect-error -- idem
import { buildMutant } from '../../scripts/fuzz/run.mjs';

interface Violation {
  kind: string;
  detail: string;
}
type Entry = [string, { dtype: string; shape: unknown[]; data_offsets: [number, number] }];

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** A mutant of `base` edited by hand, and the oracle's verdict on it. */
function judged(base: string, edit: (m: { json(f: string): Record<string, unknown>; st(f: string): { entries: Entry[]; data: Buffer } }) => void): Violation[] {
  const dir = join(mkdtempSync(join(tmpdir(), 'vt-oracle-')), 'ck');
  dirs.push(dir);
  const b = loadBase(base);
  linkTree(b.dir, dir);
  const m = new Mutant(b, dir);
  edit(m);
  m.flush();
  return judge(dir) as Violation[];
}
const kinds = (v: Violation[]): string[] => [...new Set(v.map((x) => x.kind))].sort();

describe('fuzz oracle', () => {
  it.each(Object.keys(BASES))('finds nothing wrong with base %s', (name) => {
    expect(judge(loadBase(name).dir)).toEqual([]);
  });

  it('a tensor shifted by 2 bytes overlaps its neighbour and is misaligned: st-offsets', () => {
    const v = judged('llama-f32-linear', (m) => {
      const [, e] = m.st('model.safetensors').entries.find(([n]) => n === 'model.layers.0.self_attn.k_proj.weight')!;
      e.data_offsets = [e.data_offsets[0] + 2, e.data_offsets[1] + 2];
    });
    expect(kinds(v)).toEqual(['st-gap', 'st-offsets']);
    expect(v.map((x) => x.detail).join('\n')).toMatch(/misaligned/);
  });

  it('two tensors over the same bytes: st-offsets', () => {
    const v = judged('llama-bf16', (m) => {
      const entries = m.st('model.safetensors').entries;
      const k = entries.find(([n]) => n === 'model.layers.0.self_attn.k_proj.weight')!;
      const vproj = entries.find(([n]) => n === 'model.layers.0.self_attn.v_proj.weight')!;
      vproj[1].data_offsets = [...k[1].data_offsets];
    });
    expect(kinds(v)).toEqual(['st-gap', 'st-offsets']);
  });

  it.each(['gelu', 'gelu_pytorch_tanh', 'relu', 'SiLU', null])('hidden_act %j: config-activation', (act) => {
    expect(kinds(judged('qwen2-f16', (m) => (m.json('config.json').hidden_act = act)))).toEqual(['config-activation']);
  });

  it('checks attention_bias / mlp_bias only where the config class reads them', () => {
    expect(kinds(judged('default', (m) => (m.json('config.json').attention_bias = 1)))).toEqual(['config-bias']);
    expect(judged('default', (m) => (m.json('config.json').mlp_bias = 1))).toEqual([]); // Qwen3 has no mlp_bias
    expect(judged('qwen2-f16', (m) => (m.json('config.json').attention_bias = 'x'))).toEqual([]); // nor Qwen2 either
    expect(kinds(judged('llama-bf16', (m) => (m.json('config.json').mlp_bias = true)))).toEqual(['config-bias']);
  });

  it('accepts silu, swish and a missing hidden_act (transformers defaults to silu)', () => {
    expect(judged('qwen2-f16', (m) => (m.json('config.json').hidden_act = 'swish'))).toEqual([]);
    expect(judged('qwen2-f16', (m) => delete m.json('config.json').hidden_act)).toEqual([]);
  });

  it('valid files stay clean: bits flipped in the weights, offsets swapped, entries reordered', () => {
    const v = judged('qwen3-bf16-sharded', (m) => {
      const st = m.st('model-00001-of-00003.safetensors');
      st.data = Buffer.from(st.data);
      st.data[100] ^= 0x80;
      const same = st.entries.filter(([n]) => /layers\.[01]\.self_attn\.k_proj\.weight$/.test(n));
      [same[0][1].data_offsets, same[1][1].data_offsets] = [same[1][1].data_offsets, same[0][1].data_offsets];
      st.entries.reverse();
    });
    expect(v).toEqual([]);
  });

  it('bytes past the last tensor: st-gap; a duplicate name: st-duplicate; a size past 2^64: st-size', () => {
    expect(kinds(judged('qwen2-f16', (m) => {
      const st = m.st('model.safetensors');
      st.data = Buffer.concat([st.data, Buffer.alloc(8)]);
    }))).toEqual(['st-gap']);
    expect(kinds(judged('qwen2-f16', (m) => {
      const st = m.st('model.safetensors');
      st.entries.push([st.entries[1][0], { ...st.entries[1][1] }]);
    }))).toEqual(['st-duplicate']);
    // (2^62 + 4) * 4 bytes wraps to 16 in 64-bit arithmetic.
    expect(kinds(judged('qwen2-f16', (m) => {
      const st = m.st('model.safetensors');
      const end = st.data.length;
      st.data = Buffer.concat([st.data, Buffer.alloc(16)]);
      st.entries.push(['extra', { dtype: 'F32', shape: [raw('4611686018427387908')], data_offsets: [end, end + 16] }]);
    }))).toEqual(['st-size']);
  });
});

describe('fuzz mutants', () => {
  it('mutant i of a seed is the same every time, whatever was drawn before it', () => {
    const bases = Object.keys(BASES).filter((b) => b !== 'qwen3-tok').map(loadBase);
    const build = (index: number): { base: string; mutations: unknown; files: Record<string, string> } => {
      const dir = join(mkdtempSync(join(tmpdir(), 'vt-mutant-')), 'ck');
      dirs.push(dir);
      const r = buildMutant(bases, 5, index, dir) as { base: string; mutations: unknown };
      const files = Object.fromEntries(readdirSync(dir).map((f) => [f, readFileSync(join(dir, f)).toString('base64').slice(0, 4000)]));
      return { ...r, files };
    };
    const first = [0, 1, 2, 3].map(build);
    const again = [3, 2, 1, 0].map(build).reverse();
    expect(again).toEqual(first);
    expect(new Set(first.map((x) => JSON.stringify(x.mutations))).size).toBeGreaterThan(1);
  });
});
