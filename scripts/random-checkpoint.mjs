#!/usr/bin/env node
// Writes a random-weight Hugging Face checkpoint folder (config.json, generation_config.json, model.safetensors)
// for a Llama / Qwen2 / Qwen3 shape, or a Qwen3.5 / Qwen3.6 (hybrid Gated DeltaNet) text model's. Used by the benchmarks (a Qwen3-0.6B-shaped bf16 model, 1.2 GB, never
// committed) and by tests that need a model but no reference outputs (batching, abort, bad-input variants).
//
//   node scripts/random-checkpoint.mjs --shape qwen3-0.6b --out bench/checkpoints/qwen3-0.6b-bf16
//   node scripts/random-checkpoint.mjs --shape tiny-qwen3 --dtype float16 --out /tmp/tiny
import { mkdirSync, openSync, writeSync, closeSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';

/** Shapes by name. `tiny-*` are for tests; the others match real models' configs. */
export const SHAPES = {
  'qwen3-0.6b': {
    architecture: 'Qwen3ForCausalLM', vocab_size: 151936, hidden_size: 1024, intermediate_size: 3072,
    num_hidden_layers: 28, num_attention_heads: 16, num_key_value_heads: 8, head_dim: 128,
    max_position_embeddings: 40960, rope_theta: 1000000, rms_norm_eps: 1e-6, tie_word_embeddings: true,
  },
  'qwen3-8b': {
    architecture: 'Qwen3ForCausalLM', vocab_size: 151936, hidden_size: 4096, intermediate_size: 12288,
    num_hidden_layers: 36, num_attention_heads: 32, num_key_value_heads: 8, head_dim: 128,
    max_position_embeddings: 40960, rope_theta: 1000000, rms_norm_eps: 1e-6, tie_word_embeddings: false,
  },
  'tiny-qwen3': {
    architecture: 'Qwen3ForCausalLM', vocab_size: 512, hidden_size: 64, intermediate_size: 128,
    num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 16,
    max_position_embeddings: 2048, rope_theta: 10000, rms_norm_eps: 1e-6, tie_word_embeddings: false,
  },
  // Qwen3.5-0.8B's text model (Qwen/Qwen3.5-0.8B's config.json, text_config) as a text-only Qwen3_5ForCausalLM:
  // three Gated DeltaNet layers then one gated attention layer, repeating.
  'qwen3.5-0.8b': {
    architecture: 'Qwen3_5ForCausalLM', model_type: 'qwen3_5_text', vocab_size: 248320, hidden_size: 1024,
    intermediate_size: 3584, num_hidden_layers: 24, num_attention_heads: 8, num_key_value_heads: 2, head_dim: 256,
    max_position_embeddings: 262144, rms_norm_eps: 1e-6, tie_word_embeddings: true, full_attention_interval: 4,
    linear_num_key_heads: 16, linear_num_value_heads: 16, linear_key_head_dim: 128, linear_value_head_dim: 128,
    linear_conv_kernel_dim: 4, rope_parameters: { rope_type: 'default', rope_theta: 10000000, partial_rotary_factor: 0.25 },
  },
  // A tiny hybrid for fast checks (bench/gguf.mjs's qwen35 conversion against llama.cpp): two blocks of three Gated
  // DeltaNet layers then one gated attention layer; 2 key / 4 value heads (so llama.cpp's value-head reorder is
  // exercised), key and value head dims equal (llama.cpp's qwen35 requires it); RoPE on 8 of 32 dims.
  'tiny-qwen3.5': {
    architecture: 'Qwen3_5ForCausalLM', model_type: 'qwen3_5_text', vocab_size: 512, hidden_size: 64,
    intermediate_size: 160, num_hidden_layers: 8, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 32,
    max_position_embeddings: 4096, rms_norm_eps: 1e-6, tie_word_embeddings: false, full_attention_interval: 4,
    linear_num_key_heads: 2, linear_num_value_heads: 4, linear_key_head_dim: 32, linear_value_head_dim: 32,
    linear_conv_kernel_dim: 4, rope_parameters: { rope_type: 'default', rope_theta: 10000000, partial_rotary_factor: 0.25 },
  },
  'tiny-llama': {
    architecture: 'LlamaForCausalLM', vocab_size: 384, hidden_size: 64, intermediate_size: 160,
    num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 16,
    max_position_embeddings: 1024, rope_theta: 10000, rms_norm_eps: 1e-5, tie_word_embeddings: true,
  },
};

const DTYPES = { bfloat16: ['BF16', 2], float16: ['F16', 2], float32: ['F32', 4] };

/** The tensors a dense decoder of this shape has, in HF names, with their shapes. */
export function tensorList(s) {
  const H = s.hidden_size, I = s.intermediate_size, V = s.vocab_size, D = s.head_dim;
  const q = s.num_attention_heads * D, kv = s.num_key_value_heads * D;
  const out = [['model.embed_tokens.weight', [V, H]]];
  const hybrid = s.architecture === 'Qwen3_5ForCausalLM';
  for (let l = 0; l < s.num_hidden_layers; l++) {
    const p = `model.layers.${l}.`;
    if (hybrid && (l + 1) % s.full_attention_interval !== 0) {  // a Gated DeltaNet layer
      const C = 2 * s.linear_num_key_heads * s.linear_key_head_dim + s.linear_num_value_heads * s.linear_value_head_dim;
      const Hv = s.linear_num_value_heads, VD = Hv * s.linear_value_head_dim, a = p + 'linear_attn.';
      out.push([p + 'input_layernorm.weight', [H]], [a + 'in_proj_qkv.weight', [C, H]], [a + 'in_proj_z.weight', [VD, H]],
        [a + 'in_proj_b.weight', [Hv, H]], [a + 'in_proj_a.weight', [Hv, H]], [a + 'conv1d.weight', [C, 1, s.linear_conv_kernel_dim]],
        [a + 'A_log', [Hv]], [a + 'dt_bias', [Hv]], [a + 'norm.weight', [s.linear_value_head_dim]], [a + 'out_proj.weight', [H, VD]],
        [p + 'post_attention_layernorm.weight', [H]], [p + 'mlp.gate_proj.weight', [I, H]], [p + 'mlp.up_proj.weight', [I, H]],
        [p + 'mlp.down_proj.weight', [H, I]]);
      continue;
    }
    out.push([p + 'input_layernorm.weight', [H]], [p + 'self_attn.q_proj.weight', [hybrid ? 2 * q : q, H]],
      [p + 'self_attn.k_proj.weight', [kv, H]], [p + 'self_attn.v_proj.weight', [kv, H]],
      [p + 'self_attn.o_proj.weight', [H, q]]);
    if (s.architecture === 'Qwen2ForCausalLM')
      out.push([p + 'self_attn.q_proj.bias', [q]], [p + 'self_attn.k_proj.bias', [kv]], [p + 'self_attn.v_proj.bias', [kv]]);
    if (s.architecture === 'Qwen3ForCausalLM' || hybrid)
      out.push([p + 'self_attn.q_norm.weight', [D]], [p + 'self_attn.k_norm.weight', [D]]);
    out.push([p + 'post_attention_layernorm.weight', [H]], [p + 'mlp.gate_proj.weight', [I, H]],
      [p + 'mlp.up_proj.weight', [I, H]], [p + 'mlp.down_proj.weight', [H, I]]);
  }
  out.push(['model.norm.weight', [H]]);
  if (!s.tie_word_embeddings) out.push(['lm_head.weight', [V, H]]);
  return out;
}

// xorshift32 → uniform in [-a, a); norms are 1 ± a small spread. Fast enough for a GB of weights.
function fill(view, n, isNorm, fanIn, rng, dtype) {
  const a = isNorm ? 0.1 : Math.sqrt(3 / fanIn);
  const base = isNorm ? 1 : 0;
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  for (let i = 0; i < n; i++) {
    rng.s ^= rng.s << 13; rng.s ^= rng.s >>> 17; rng.s ^= rng.s << 5;
    const x = base + ((rng.s >>> 0) / 4294967296 * 2 - 1) * a;
    if (dtype === 'float32') view[i] = x;
    else if (dtype === 'bfloat16') { f32[0] = x; view[i] = (u32[0] + 0x8000) >>> 16; }
    else view[i] = toHalf(x);
  }
}

function toHalf(x) {
  const f32 = new Float32Array([x]);
  const u = new Uint32Array(f32.buffer)[0];
  const sign = (u >>> 16) & 0x8000;
  const exp = ((u >>> 23) & 0xff) - 127 + 15;
  if (exp <= 0) return sign; // tiny values flush to zero: fine for random weights
  if (exp >= 31) return sign | 0x7c00;
  // round to nearest; a carry out of the mantissa correctly bumps the exponent
  return (sign | (exp << 10) | ((u >>> 13) & 0x3ff)) + ((u >>> 12) & 1);
}

/** Writes the folder; returns the total bytes of tensor data. */
export function writeRandomCheckpoint(out, shapeOrName, { dtype = 'bfloat16', seed = 1234 } = {}) {
  const shape = typeof shapeOrName === 'string' ? SHAPES[shapeOrName] : shapeOrName;
  if (!shape) throw new Error(`unknown shape ${shapeOrName}; known: ${Object.keys(SHAPES).join(', ')}`);
  const [stDtype, size] = DTYPES[dtype] ?? [];
  if (!stDtype) throw new Error(`unknown dtype ${dtype}`);
  mkdirSync(out, { recursive: true });
  const { architecture, model_type, ...cfg } = shape;
  writeFileSync(join(out, 'config.json'), JSON.stringify({
    architectures: [architecture], model_type: model_type ?? architecture.replace('ForCausalLM', '').toLowerCase(),
    ...cfg, torch_dtype: dtype, bos_token_id: 1, eos_token_id: 2, hidden_act: 'silu',
  }, null, 2));
  writeFileSync(join(out, 'generation_config.json'), JSON.stringify({ bos_token_id: 1, eos_token_id: [2, 3] }, null, 2));

  const tensors = tensorList(shape);
  const header = {};
  let offset = 0;
  for (const [name, dims] of tensors) {
    const bytes = dims.reduce((a, b) => a * b, 1) * size;
    header[name] = { dtype: stDtype, shape: dims, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8); // keep tensor data 8-byte aligned
  const fd = openSync(join(out, 'model.safetensors'), 'w');
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  writeSync(fd, len);
  writeSync(fd, Buffer.from(json));
  const rng = { s: seed >>> 0 || 1 };
  const CHUNK = 1 << 22;
  for (const [name, dims] of tensors) {
    const n = dims.reduce((a, b) => a * b, 1);
    const isNorm = dims.length === 1;
    for (let done = 0; done < n; done += CHUNK) {
      const m = Math.min(CHUNK, n - done);
      const buf = size === 4 ? new Float32Array(m) : new Uint16Array(m);
      fill(buf, m, isNorm && !name.endsWith('.bias'), dims[dims.length - 1], rng, dtype);
      writeSync(fd, new Uint8Array(buf.buffer));
    }
  }
  closeSync(fd);
  return offset;
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values } = parseArgs({ options: { shape: { type: 'string', default: 'qwen3-0.6b' }, out: { type: 'string' },
    dtype: { type: 'string', default: 'bfloat16' }, seed: { type: 'string', default: '1234' } } });
  if (!values.out) { console.error('usage: random-checkpoint.mjs --shape NAME --out DIR [--dtype bfloat16|float16|float32]'); process.exit(2); }
  const t0 = Date.now();
  const bytes = writeRandomCheckpoint(values.out, values.shape, { dtype: values.dtype, seed: Number(values.seed) });
  console.log(`wrote ${values.out}: ${(bytes / 1e9).toFixed(3)} GB of ${values.dtype} weights in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}
