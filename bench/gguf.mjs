#!/usr/bin/env node
// Converts a checkpoint folder (config.json + one model.safetensors, bf16) into a GGUF v3 file with the same
// weights, so a GGUF engine (node-llama-cpp, for bench/cpu.mjs --peer) computes on exactly what vtengine computes on.
// Two architectures:
//   - Qwen3 (model_type qwen3) → GGUF arch `qwen3`: tensors renamed only.
//   - Qwen3.5 text (model_type qwen3_5_text, Qwen3_5ForCausalLM: Gated DeltaNet + gated attention) → GGUF arch
//     `qwen35`, in llama.cpp's conventions for it (as of node-llama-cpp 3.21.1 / 3.22.1's llama.cpp; see
//     qwen35Plan below): zero-centred RMSNorm weights stored as 1 + w; A_log stored as A = -exp(A_log); dt_bias
//     as ssm_dt.bias; conv1d squeezed to [channels, kernel]; where there are more value heads than key heads, the
//     value heads reordered from grouped-by-key-head to tiled order (in in_proj_qkv's v rows, conv1d's v
//     channels, in_proj_z, in_proj_a/b, A, dt_bias and out_proj's columns); the metadata llama.cpp requires
//     (ssm.*, full_attention_interval, rope.dimension_count = the rotary dims, rope.dimension_sections).
//     1 + w and -exp(A_log) are computed from the bf16 weights and stored as F32 unrounded to bf16, as vtengine
//     computes them at load.
// Weight matrices stay BF16 byte for byte (or become F16 / F32 with --type f16 / f32: llama.cpp's CPU products round
// their activations to the weights' type, so f32 takes that rounding out of a correctness check); 1-D tensors
// (norms, A, dt bias) and qwen35's conv1d kernels become F32, as GGUF converters write them. Tensors stream a chunk
// at a time (those whose rows or columns are permuted are read whole; they are small): memory stays small for a
// 1-2 GB model.
// The tokenizer is a stand-in (the checkpoint has none): a byte-level "gpt2" vocab of vocab_size unique tokens
// (the 256 byte symbols, then filler tokens), no merges, and two control tokens at the end for BOS / EOS. Benchmarks
// feed token ids, so it only has to load.
//
//   node bench/gguf.mjs --in bench/checkpoints/qwen3-0.6b-bf16 [--out FILE.gguf] [--type bf16|f16|f32]   (default out: DIR-bf16.gguf)
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, readSync, renameSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';

// GGUF metadata value types and the ggml tensor types used here.
const T = { U32: 4, I32: 5, F32: 6, BOOL: 7, STRING: 8, ARRAY: 9, U64: 10 };
const GGML = { F32: 0, F16: 1, BF16: 30 };
const FTYPE = { bf16: 32, f16: 1, f32: 0 }; // general.file_type: LLAMA_FTYPE_MOSTLY_BF16 / _F16 / ALL_F32
const ALIGN = 32;

/** A growable little-endian byte writer for the header. */
class Out {
  constructor() { this.buf = Buffer.alloc(1 << 20); this.n = 0; }
  need(k) {
    if (this.n + k <= this.buf.length) return;
    const b = Buffer.alloc(Math.max(this.buf.length * 2, this.n + k));
    this.buf.copy(b, 0, 0, this.n);
    this.buf = b;
  }
  u32(v) { this.need(4); this.buf.writeUInt32LE(v, this.n); this.n += 4; }
  i32(v) { this.need(4); this.buf.writeInt32LE(v, this.n); this.n += 4; }
  u64(v) { this.need(8); this.buf.writeBigUInt64LE(BigInt(v), this.n); this.n += 8; }
  f32(v) { this.need(4); this.buf.writeFloatLE(v, this.n); this.n += 4; }
  u8(v) { this.need(1); this.buf[this.n++] = v; }
  str(s) { const b = Buffer.from(s, 'utf8'); this.u64(b.length); this.need(b.length); b.copy(this.buf, this.n); this.n += b.length; }
  pad(a) { while (this.n % a) this.u8(0); }
  bytes() { return this.buf.subarray(0, this.n); }
}

/** One metadata entry: [key, type, value] (arrays: [key, T.ARRAY, [itemType, values]]). */
function writeKv(o, [key, type, value]) {
  o.str(key);
  o.u32(type);
  const one = (t, v) => {
    if (t === T.U32) o.u32(v); else if (t === T.I32) o.i32(v); else if (t === T.F32) o.f32(v);
    else if (t === T.BOOL) o.u8(v ? 1 : 0); else if (t === T.STRING) o.str(v); else if (t === T.U64) o.u64(v);
    else throw new Error(`gguf: no writer for type ${t}`);
  };
  if (type === T.ARRAY) {
    const [itemType, items] = value;
    o.u32(itemType);
    o.u64(items.length);
    for (const v of items) one(itemType, v);
  } else one(type, value);
}

/** GPT-2's byte → printable-unicode-symbol table (the byte-level BPE alphabet). */
function byteSymbols() {
  const keep = [];
  for (let b = 0x21; b <= 0x7e; b++) keep.push(b);
  for (let b = 0xa1; b <= 0xac; b++) keep.push(b);
  for (let b = 0xae; b <= 0xff; b++) keep.push(b);
  const map = new Array(256);
  let extra = 0;
  for (let b = 0; b < 256; b++) map[b] = String.fromCodePoint(keep.includes(b) ? b : 256 + extra++);
  return map;
}

/** The stand-in tokenizer's metadata for a vocab of `n` tokens; BOS = n-2, EOS = n-1 (control tokens). */
function tokenizerKvs(n) {
  const tokens = byteSymbols();
  for (let i = 256; i < n - 2; i++) tokens.push(`tok${i}`);
  tokens.push('<|vt_bos|>', '<|vt_eos|>');
  const types = tokens.map((_, i) => (i >= n - 2 ? 3 : 1)); // 1 normal, 3 control
  return [
    ['tokenizer.ggml.model', T.STRING, 'gpt2'],
    ['tokenizer.ggml.pre', T.STRING, 'qwen2'],
    ['tokenizer.ggml.tokens', T.ARRAY, [T.STRING, tokens]],
    ['tokenizer.ggml.token_type', T.ARRAY, [T.I32, types]],
    ['tokenizer.ggml.merges', T.ARRAY, [T.STRING, []]],
    ['tokenizer.ggml.bos_token_id', T.U32, n - 2],
    ['tokenizer.ggml.eos_token_id', T.U32, n - 1],
    ['tokenizer.ggml.add_bos_token', T.BOOL, false],
  ];
}

/** HF tensor name → GGUF tensor name (Qwen3 / Llama layout). */
function ggufName(hf) {
  const top = { 'model.embed_tokens.weight': 'token_embd.weight', 'model.norm.weight': 'output_norm.weight',
    'lm_head.weight': 'output.weight' }[hf];
  if (top) return top;
  const m = /^model\.layers\.(\d+)\.(.+)$/.exec(hf);
  const sub = m && {
    'input_layernorm.weight': 'attn_norm.weight', 'post_attention_layernorm.weight': 'ffn_norm.weight',
    'self_attn.q_proj.weight': 'attn_q.weight', 'self_attn.k_proj.weight': 'attn_k.weight',
    'self_attn.v_proj.weight': 'attn_v.weight', 'self_attn.o_proj.weight': 'attn_output.weight',
    'self_attn.q_norm.weight': 'attn_q_norm.weight', 'self_attn.k_norm.weight': 'attn_k_norm.weight',
    'mlp.gate_proj.weight': 'ffn_gate.weight', 'mlp.up_proj.weight': 'ffn_up.weight', 'mlp.down_proj.weight': 'ffn_down.weight',
  }[m[2]];
  if (!sub) throw new Error(`gguf: no GGUF name for tensor ${hf}`);
  return `blk.${m[1]}.${sub}`;
}

/** The Qwen3 conversion: names only; metadata as llama.cpp's `qwen3` reads it. */
function qwen3Plan(cfg) {
  const H = cfg.hidden_size, heads = cfg.num_attention_heads, D = cfg.head_dim ?? H / heads;
  return {
    arch: 'qwen3',
    tensor: (hf) => ({ name: ggufName(hf) }),
    kvs: decoderKvs('qwen3', cfg,
      { layers: cfg.num_hidden_layers, hidden: H, heads, headDim: D, rotary: D, theta: cfg.rope_theta }),
  };
}

/**
 * The decoder keys both architectures write, in llama.cpp's order, with `extra` (rope sections) after the
 * rotary dims: block count, context, widths, heads, head dims, RoPE, the RMSNorm epsilon.
 */
function decoderKvs(arch, cfg, { layers, hidden, heads, headDim, rotary, theta, extra = [] }) {
  return [
    [`${arch}.block_count`, T.U32, layers],
    [`${arch}.context_length`, T.U32, cfg.max_position_embeddings],
    [`${arch}.embedding_length`, T.U32, hidden],
    [`${arch}.feed_forward_length`, T.U32, cfg.intermediate_size],
    [`${arch}.attention.head_count`, T.U32, heads],
    [`${arch}.attention.head_count_kv`, T.U32, cfg.num_key_value_heads],
    [`${arch}.attention.key_length`, T.U32, headDim],
    [`${arch}.attention.value_length`, T.U32, headDim],
    [`${arch}.rope.dimension_count`, T.U32, rotary],
    ...extra,
    [`${arch}.rope.freq_base`, T.F32, theta],
    [`${arch}.attention.layer_norm_rms_epsilon`, T.F32, cfg.rms_norm_eps],
  ];
}

/**
 * Row order that takes value heads from grouped-by-key-head order (HF: key head k's r value heads together, head
 * k*r + j) to llama.cpp's tiled order (position j*nk + k), each head `hd` rows; `offset` rows before them stay put.
 * Returns for each output row the input row it takes.
 */
function tiledValueRows(offset, nk, nv, hd) {
  const r = nv / nk, perm = new Int32Array(offset + nv * hd);
  for (let i = 0; i < offset; i++) perm[i] = i;
  for (let p = 0; p < nv; p++) {
    const src = (p % nk) * r + Math.floor(p / nk); // tiled position p = j * nk + k holds grouped head k * r + j
    for (let d = 0; d < hd; d++) perm[offset + p * hd + d] = offset + src * hd + d;
  }
  return perm;
}

/**
 * The Qwen3.5 text conversion to llama.cpp's `qwen35` (read in its convert_hf_to_gguf.py, gguf-py tensor tables and
 * src/models/qwen35.cpp; written here from those conventions):
 *   tensors: input_layernorm → attn_norm, post_attention_layernorm → post_attention_norm, self_attn.{q,k,v,o}_proj →
 *   attn_{q,k,v,output} (q_proj keeps its per-head [query | gate] rows), q_norm/k_norm → attn_{q,k}_norm;
 *   linear_attn.in_proj_qkv → attn_qkv, in_proj_z → attn_gate, in_proj_b → ssm_beta, in_proj_a → ssm_alpha,
 *   conv1d → ssm_conv1d (squeezed, F32), A_log → ssm_a (= -exp(A_log), F32, no ".weight"), dt_bias → ssm_dt.bias,
 *   norm → ssm_norm (a plain weight: not shifted), out_proj → ssm_out; the MLP as Qwen3's.
 *   Every other RMSNorm weight is zero-centred in HF (x · (1 + w)); llama.cpp multiplies by the stored weight, so
 *   1 + w is stored. Value heads are reordered to tiled order where nv > nk (llama.cpp pairs value head i with key
 *   head i mod nk; HF with i div (nv / nk)).
 *   metadata: ssm.conv_kernel, ssm.state_size (key head dim; llama.cpp takes the value head dim to be the same),
 *   ssm.group_count (key heads), ssm.time_step_rank (value heads), ssm.inner_size (value heads x value dim),
 *   full_attention_interval, rope.dimension_count (head_dim x partial_rotary_factor), rope.dimension_sections
 *   (interleaved M-RoPE sections covering every rotary pair: for text all three positions are the token's, so it is
 *   plain RoPE over the rotary dims, as vtengine and transformers compute it), key/value_length = head_dim.
 */
function qwen35Plan(cfg) {
  const H = cfg.hidden_size, heads = cfg.num_attention_heads, D = cfg.head_dim ?? H / heads, L = cfg.num_hidden_layers;
  const nk = cfg.linear_num_key_heads, nv = cfg.linear_num_value_heads;
  const Dk = cfg.linear_key_head_dim, Dv = cfg.linear_value_head_dim;
  if (Dk !== Dv) throw new Error(`gguf: llama.cpp's qwen35 needs linear_key_head_dim (${Dk}) = linear_value_head_dim (${Dv})`);
  if (nv % nk) throw new Error(`gguf: linear_num_value_heads ${nv} is not a multiple of linear_num_key_heads ${nk}`);
  const rope = cfg.rope_parameters ?? cfg.rope_scaling ?? {};
  const factor = rope.partial_rotary_factor ?? cfg.partial_rotary_factor ?? 0.25; // as vtengine's config reader
  const rot = Math.round(D * factor);
  const theta = rope.rope_theta ?? cfg.rope_theta;
  if (theta == null) throw new Error('gguf: no rope_theta in config.json');
  // Sections s_r = the number of rotary pairs i with i mod 3 = r: llama.cpp's interleaved M-RoPE then gives every
  // pair a position (a pair outside them would get the 4th, always-0 position: no rotation).
  const pairs = rot / 2, sections = [0, 1, 2].map((r) => Math.ceil((pairs - r) / 3)).concat(0);
  if (rope.mrope_section && rope.mrope_section.some((v, i) => v !== sections[i]))
    throw new Error(`gguf: mrope_section ${JSON.stringify(rope.mrope_section)} does not cover the ${pairs} rotary pairs as ${sections}`);
  const interval = cfg.full_attention_interval ?? 4;
  const linear = (l) => (l + 1) % interval !== 0;
  if (cfg.layer_types && cfg.layer_types.some((t, l) => (t === 'linear_attention') !== linear(l)))
    throw new Error('gguf: layer_types that are not the full_attention_interval pattern are not supported here');
  const tiled = nv !== nk;
  const vRows = (offset, hd) => (tiled ? tiledValueRows(offset, nk, nv, hd) : null);
  const plusOne = (x) => 1 + x;
  const negExp = (x) => -Math.exp(x);

  const tensor = (hf) => {
    const name = hf.replace(/^model\.language_model\./, 'model.');
    if (name === 'model.embed_tokens.weight') return { name: 'token_embd.weight' };
    if (name === 'model.norm.weight') return { name: 'output_norm.weight', map: plusOne };
    if (name === 'lm_head.weight') return { name: 'output.weight' };
    if (/^(model\.)?mtp\./.test(name)) return null; // multi-token-prediction layers: not used by either engine
    const m = /^model\.layers\.(\d+)\.(.+)$/.exec(name);
    if (!m) throw new Error(`gguf: no GGUF name for tensor ${hf}`);
    const b = `blk.${m[1]}.`, C = 2 * nk * Dk; // C: the q and k channels ahead of v in qkv / conv1d
    const t = {
      'input_layernorm.weight': { name: 'attn_norm.weight', map: plusOne },
      'post_attention_layernorm.weight': { name: 'post_attention_norm.weight', map: plusOne },
      'self_attn.q_proj.weight': { name: 'attn_q.weight' },
      'self_attn.k_proj.weight': { name: 'attn_k.weight' },
      'self_attn.v_proj.weight': { name: 'attn_v.weight' },
      'self_attn.o_proj.weight': { name: 'attn_output.weight' },
      'self_attn.q_norm.weight': { name: 'attn_q_norm.weight', map: plusOne },
      'self_attn.k_norm.weight': { name: 'attn_k_norm.weight', map: plusOne },
      'linear_attn.in_proj_qkv.weight': { name: 'attn_qkv.weight', rowPerm: vRows(C, Dv) },
      'linear_attn.in_proj_z.weight': { name: 'attn_gate.weight', rowPerm: vRows(0, Dv) },
      'linear_attn.in_proj_b.weight': { name: 'ssm_beta.weight', rowPerm: vRows(0, 1) },
      'linear_attn.in_proj_a.weight': { name: 'ssm_alpha.weight', rowPerm: vRows(0, 1) },
      'linear_attn.conv1d.weight': { name: 'ssm_conv1d.weight', rowPerm: vRows(C, Dv), squeeze: true, f32: true },
      'linear_attn.A_log': { name: 'ssm_a', rowPerm: vRows(0, 1), map: negExp },
      'linear_attn.dt_bias': { name: 'ssm_dt.bias', rowPerm: vRows(0, 1) },
      'linear_attn.norm.weight': { name: 'ssm_norm.weight' },
      'linear_attn.out_proj.weight': { name: 'ssm_out.weight', colPerm: vRows(0, Dv) },
      'mlp.gate_proj.weight': { name: 'ffn_gate.weight' },
      'mlp.up_proj.weight': { name: 'ffn_up.weight' },
      'mlp.down_proj.weight': { name: 'ffn_down.weight' },
    }[m[2]];
    if (!t) throw new Error(`gguf: no GGUF name for tensor ${hf}`);
    return { ...t, name: b + t.name };
  };
  return {
    arch: 'qwen35',
    tensor,
    kvs: [
      ...decoderKvs('qwen35', cfg, { layers: L, hidden: H, heads, headDim: D, rotary: rot, theta,
        extra: [['qwen35.rope.dimension_sections', T.ARRAY, [T.I32, sections]]] }),
      ['qwen35.ssm.conv_kernel', T.U32, cfg.linear_conv_kernel_dim],
      ['qwen35.ssm.state_size', T.U32, Dk],
      ['qwen35.ssm.group_count', T.U32, nk],
      ['qwen35.ssm.time_step_rank', T.U32, nv],
      ['qwen35.ssm.inner_size', T.U32, nv * Dv],
      ['qwen35.full_attention_interval', T.U32, interval],
    ],
  };
}

// bf16 → f16 with round-to-nearest-even (for --type f16); subnormals flushed (irrelevant for these weights).
function bf16ToF16(h) {
  const u = h << 16;
  const sign = (u >>> 16) & 0x8000;
  const exp = ((u >>> 23) & 0xff) - 127 + 15;
  if (exp <= 0) return sign;
  if (exp >= 31) return sign | 0x7c00;
  const mant = (u >>> 13) & 0x3ff, rest = u & 0x1fff;
  let r = sign | (exp << 10) | mant;
  if (rest > 0x1000 || (rest === 0x1000 && (mant & 1))) r++;
  return r;
}

/** Converts `dir` into `out`; returns { out, tensors, bytes }. Skips the work when `out` is newer than the checkpoint. */
export function convertToGguf(dir, out, { type = 'bf16', force = false } = {}) {
  const st = join(dir, 'model.safetensors');
  if (!force && existsSync(out) && statSync(out).mtimeMs > statSync(st).mtimeMs) return { out, cached: true };
  const cfg = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
  const plan = cfg.model_type === 'qwen3' ? qwen3Plan(cfg) : cfg.model_type === 'qwen3_5_text' ? qwen35Plan(cfg) : null;
  if (!plan) throw new Error(`gguf: only qwen3 and qwen3_5_text checkpoints are supported, not ${cfg.model_type}`);
  const fd = openSync(st, 'r');
  const lenBuf = Buffer.alloc(8);
  readSync(fd, lenBuf, 0, 8, 0);
  const hlen = Number(lenBuf.readBigUInt64LE());
  const hbuf = Buffer.alloc(hlen);
  readSync(fd, hbuf, 0, hlen, 8);
  const header = JSON.parse(hbuf.toString('utf8'));
  delete header.__metadata__;
  const dataStart = 8 + hlen;

  const tensors = Object.entries(header)
    .sort((a, b) => a[1].data_offsets[0] - b[1].data_offsets[0])
    .map(([name, t]) => {
      const p = plan.tensor(name);
      if (!p) return null;
      if (t.dtype !== 'BF16') throw new Error(`gguf: ${name} is ${t.dtype}; only BF16 checkpoints are supported`);
      const n = t.shape.reduce((a, b) => a * b, 1);
      const shape = p.squeeze ? t.shape.filter((d) => d !== 1) : t.shape;
      const gtype = shape.length === 1 || p.f32 || type === 'f32' ? GGML.F32 : type === 'f16' ? GGML.F16 : GGML.BF16;
      if (p.map && gtype !== GGML.F32) throw new Error(`gguf: ${name}: a value map needs an F32 tensor`);
      return { ...p, hf: name, shape, n, src: dataStart + t.data_offsets[0], gtype, bytes: n * (gtype === GGML.F32 ? 4 : 2) };
    })
    .filter(Boolean);

  const kvs = [
    ['general.architecture', T.STRING, plan.arch],
    ['general.name', T.STRING, `random ${dir.split('/').filter(Boolean).pop()}`],
    ['general.alignment', T.U32, ALIGN],
    ['general.file_type', T.U32, FTYPE[type]],
    ...plan.kvs,
    ...tokenizerKvs(cfg.vocab_size),
  ];

  const o = new Out();
  o.u32(0x46554747); // "GGUF"
  o.u32(3);
  o.u64(tensors.length);
  o.u64(kvs.length);
  for (const kv of kvs) writeKv(o, kv);
  let off = 0;
  for (const t of tensors) {
    o.str(t.name);
    o.u32(t.shape.length);
    for (const d of [...t.shape].reverse()) o.u64(d); // ne[0] is the innermost (fastest) dimension
    o.u32(t.gtype);
    o.u64(off);
    t.off = off;
    off += t.bytes;
    off += (ALIGN - (off % ALIGN)) % ALIGN;
  }
  o.pad(ALIGN);

  const tmp = `${out}.tmp`;
  const wfd = openSync(tmp, 'w');
  writeSync(wfd, o.bytes());
  let written = 0;
  const CHUNK = 1 << 24; // elements per read (32 MB of bf16)
  const inBuf = Buffer.alloc(CHUNK * 2), outBuf = Buffer.alloc(CHUNK * 4);
  for (const t of tensors) {
    if (written !== t.off) throw new Error('gguf: internal offset mismatch');
    // A tensor with permuted rows or columns is read whole and permuted (as bf16 elements) first.
    let whole = null;
    if (t.rowPerm || t.colPerm) {
      const raw = Buffer.alloc(t.n * 2);
      if (readSync(fd, raw, 0, raw.length, t.src) !== raw.length) throw new Error(`gguf: ${t.hf} is truncated`);
      const rows = t.shape[0], cols = t.n / rows, a = new Uint16Array(raw.buffer, raw.byteOffset, t.n);
      const b = new Uint16Array(t.n);
      if (t.rowPerm && t.rowPerm.length !== rows) throw new Error(`gguf: ${t.hf}: row order of ${t.rowPerm.length} for ${rows} rows`);
      if (t.colPerm && t.colPerm.length !== cols) throw new Error(`gguf: ${t.hf}: column order of ${t.colPerm.length} for ${cols} columns`);
      for (let r = 0; r < rows; r++) {
        const from = (t.rowPerm ? t.rowPerm[r] : r) * cols;
        for (let c = 0; c < cols; c++) b[r * cols + c] = a[from + (t.colPerm ? t.colPerm[c] : c)];
      }
      whole = Buffer.from(b.buffer);
    }
    for (let done = 0; done < t.n; done += CHUNK) {
      const m = Math.min(CHUNK, t.n - done);
      let src;
      if (whole) src = whole.subarray(done * 2, (done + m) * 2);
      else {
        const got = readSync(fd, inBuf, 0, m * 2, t.src + done * 2);
        if (got !== m * 2) throw new Error(`gguf: ${t.hf} is truncated`);
        src = inBuf.subarray(0, m * 2);
      }
      let chunk;
      if (t.gtype === GGML.BF16) chunk = src;
      else if (t.gtype === GGML.F32) {
        for (let i = 0; i < m; i++) {
          const bits = (src.readUInt16LE(i * 2) << 16) >>> 0;
          if (t.map) { outBuf.writeUInt32LE(bits, i * 4); outBuf.writeFloatLE(t.map(outBuf.readFloatLE(i * 4)), i * 4); }
          else outBuf.writeUInt32LE(bits, i * 4);
        }
        chunk = outBuf.subarray(0, m * 4);
      } else {
        for (let i = 0; i < m; i++) outBuf.writeUInt16LE(bf16ToF16(src.readUInt16LE(i * 2)), i * 2);
        chunk = outBuf.subarray(0, m * 2);
      }
      writeSync(wfd, chunk);
      written += chunk.length;
    }
    const pad = (ALIGN - (written % ALIGN)) % ALIGN;
    if (pad) { writeSync(wfd, Buffer.alloc(pad)); written += pad; }
  }
  fsyncSync(wfd); // finish the write-back now, not under the first benchmark's page faults
  closeSync(wfd);
  closeSync(fd);
  renameSync(tmp, out);
  return { out, tensors: tensors.length, bytes: written, cached: false };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values } = parseArgs({ options: { in: { type: 'string' }, out: { type: 'string' },
    type: { type: 'string', default: 'bf16' }, force: { type: 'boolean', default: false } } });
  if (!values.in || !['bf16', 'f16', 'f32'].includes(values.type)) {
    console.error('usage: gguf.mjs --in CHECKPOINT_DIR [--out FILE.gguf] [--type bf16|f16|f32] [--force]');
    process.exit(2);
  }
  const out = values.out ?? `${values.in.replace(/\/+$/, "")}-${values.type}.gguf`;
  const t0 = Date.now();
  const r = convertToGguf(values.in, out, { type: values.type, force: values.force });
  console.log(r.cached ? `${out} is up to date`
    : `wrote ${out}: ${r.tensors} tensors, ${(r.bytes / 1e9).toFixed(3)} GB of data in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}
