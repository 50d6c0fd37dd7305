#!/usr/bin/env node
// Converts a Qwen3 checkpoint folder (config.json + one model.safetensors, bf16) into a GGUF v3 file with the same
// weights, so a GGUF engine (node-llama-cpp, for bench/cpu.mjs --peer) computes on exactly what vtengine computes on.
// Weight matrices stay BF16 byte for byte (or become F16 with --type f16); the 1-D norm weights become F32, as GGUF
// converters write them. Tensors stream one at a time, a chunk at a time: memory stays small for a 1.2 GB model.
// The tokenizer is a stand-in (the checkpoint has none): a byte-level "gpt2" vocab of vocab_size unique tokens
// (the 256 byte symbols, then filler tokens), no merges, and two control tokens at the end for BOS / EOS. Benchmarks
// feed token ids, so it only has to load.
//
//   node bench/gguf.mjs --in bench/checkpoints/qwen3-0.6b-bf16 [--out FILE.gguf] [--type bf16|f16]   (default out: DIR-bf16.gguf)
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, readSync, renameSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';

// GGUF metadata value types and the ggml tensor types used here.
const T = { U32: 4, I32: 5, F32: 6, BOOL: 7, STRING: 8, ARRAY: 9, U64: 10 };
const GGML = { F32: 0, F16: 1, BF16: 30 };
const FTYPE = { bf16: 32, f16: 1 }; // general.file_type: LLAMA_FTYPE_MOSTLY_BF16 / _F16
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
  if (cfg.model_type !== 'qwen3') throw new Error(`gguf: only qwen3 checkpoints are supported, not ${cfg.model_type}`);
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
      if (t.dtype !== 'BF16') throw new Error(`gguf: ${name} is ${t.dtype}; only BF16 checkpoints are supported`);
      const n = t.shape.reduce((a, b) => a * b, 1);
      const isNorm = t.shape.length === 1;
      const gtype = isNorm ? GGML.F32 : type === 'f16' ? GGML.F16 : GGML.BF16;
      return { hf: name, name: ggufName(name), shape: t.shape, n, src: dataStart + t.data_offsets[0], gtype,
        bytes: n * (gtype === GGML.F32 ? 4 : 2) };
    });

  const H = cfg.hidden_size, heads = cfg.num_attention_heads, D = cfg.head_dim ?? H / heads;
  const kvs = [
    ['general.architecture', T.STRING, 'qwen3'],
    ['general.name', T.STRING, `random ${dir.split('/').filter(Boolean).pop()}`],
    ['general.alignment', T.U32, ALIGN],
    ['general.file_type', T.U32, FTYPE[type]],
    ['qwen3.block_count', T.U32, cfg.num_hidden_layers],
    ['qwen3.context_length', T.U32, cfg.max_position_embeddings],
    ['qwen3.embedding_length', T.U32, H],
    ['qwen3.feed_forward_length', T.U32, cfg.intermediate_size],
    ['qwen3.attention.head_count', T.U32, heads],
    ['qwen3.attention.head_count_kv', T.U32, cfg.num_key_value_heads],
    ['qwen3.attention.key_length', T.U32, D],
    ['qwen3.attention.value_length', T.U32, D],
    ['qwen3.rope.dimension_count', T.U32, D],
    ['qwen3.rope.freq_base', T.F32, cfg.rope_theta],
    ['qwen3.attention.layer_norm_rms_epsilon', T.F32, cfg.rms_norm_eps],
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
    for (let done = 0; done < t.n; done += CHUNK) {
      const m = Math.min(CHUNK, t.n - done);
      const got = readSync(fd, inBuf, 0, m * 2, t.src + done * 2);
      if (got !== m * 2) throw new Error(`gguf: ${t.hf} is truncated`);
      let chunk;
      if (t.gtype === GGML.BF16) chunk = inBuf.subarray(0, m * 2);
      else if (t.gtype === GGML.F32) {
        for (let i = 0; i < m; i++) outBuf.writeUInt32LE((inBuf.readUInt16LE(i * 2) << 16) >>> 0, i * 4);
        chunk = outBuf.subarray(0, m * 4);
      } else {
        for (let i = 0; i < m; i++) outBuf.writeUInt16LE(bf16ToF16(inBuf.readUInt16LE(i * 2)), i * 2);
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

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values } = parseArgs({ options: { in: { type: 'string' }, out: { type: 'string' },
    type: { type: 'string', default: 'bf16' }, force: { type: 'boolean', default: false } } });
  if (!values.in || !['bf16', 'f16'].includes(values.type)) {
    console.error('usage: gguf.mjs --in CHECKPOINT_DIR [--out FILE.gguf] [--type bf16|f16] [--force]');
    process.exit(2);
  }
  const out = values.out ?? `${values.in.replace(/\/+$/, "")}-${values.type}.gguf`;
  const t0 = Date.now();
  const r = convertToGguf(values.in, out, { type: values.type, force: values.force });
  console.log(r.cached ? `${out} is up to date`
    : `wrote ${out}: ${r.tensors} tensors, ${(r.bytes / 1e9).toFixed(3)} GB of data in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}
