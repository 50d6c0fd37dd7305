#!/usr/bin/env node
// Writes the fuzz targets' seed corpora (scripts/fuzz-parsers.sh calls it) from the checkpoints in the repository,
// so nothing big is committed: test/fixtures/*/ and models/default, plus the configs random-checkpoint.mjs writes.
//
//   node scripts/fuzz-seeds.mjs OUT_DIR
//
// OUT_DIR/safetensors_header/: every shard under 1 MB as it is, and every shard shrunk (the same names, dtypes and
//   header layout, each dimension at most 2, offsets recomputed, zero data) so most runs are a few KB.
// OUT_DIR/config/: each config.json followed by 0x1e and its generation_config.json, and each config.json alone.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { SHAPES } from './random-checkpoint.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = process.argv[2];
if (!out) {
  console.error('usage: fuzz-seeds.mjs OUT_DIR');
  process.exit(2);
}
const headerDir = join(out, 'safetensors_header');
const configDir = join(out, 'config');
for (const d of [headerDir, configDir]) {
  rmSync(d, { recursive: true, force: true });
  mkdirSync(d, { recursive: true });
}

const checkpoints = [
  ...readdirSync(join(root, 'test/fixtures')).map((d) => join(root, 'test/fixtures', d)),
  join(root, 'models/default'),
].filter((d) => existsSync(join(d, 'config.json')));

const BYTES = { F64: 8, I64: 8, U64: 8, F32: 4, I32: 4, U32: 4, F16: 2, BF16: 2, I16: 2, U16: 2 };

// The shard with every tensor cut to at most 2 along each dimension, laid out as the original (entry order kept).
function shrink(file) {
  const n = Number(file.readBigUInt64LE(0));
  const header = JSON.parse(file.subarray(8, 8 + n).toString('utf8'));
  const byOffset = Object.entries(header)
    .filter(([k]) => k !== '__metadata__')
    .sort((a, b) => a[1].data_offsets[0] - b[1].data_offsets[0]);
  let at = 0;
  for (const [, t] of byOffset) {
    t.shape = t.shape.map((d) => Math.min(d, 2));
    const bytes = t.shape.reduce((a, b) => a * b, 1) * (BYTES[t.dtype] ?? 1);
    t.data_offsets = [at, at + bytes];
    at += bytes;
  }
  let text = JSON.stringify(header);
  text += ' '.repeat((8 - (text.length % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(text)));
  return Buffer.concat([len, Buffer.from(text), Buffer.alloc(at)]);
}

let headers = 0;
let configs = 0;
for (const dir of checkpoints) {
  const name = dir.split('/').pop();
  for (const f of readdirSync(dir).filter((f) => f.endsWith('.safetensors'))) {
    const path = join(dir, f);
    const bytes = readFileSync(path);
    if (statSync(path).size < 1 << 20) writeFileSync(join(headerDir, `${name}-${f}`), bytes), headers++;
    writeFileSync(join(headerDir, `${name}-${f}.small`), shrink(bytes)), headers++;
  }
  const config = readFileSync(join(dir, 'config.json'));
  writeFileSync(join(configDir, `${name}.json`), config), configs++;
  const gen = join(dir, 'generation_config.json');
  if (existsSync(gen)) writeFileSync(join(configDir, `${name}+gen.json`), Buffer.concat([config, Buffer.from([0x1e]), readFileSync(gen)])), configs++;
}
// random-checkpoint.mjs's shapes, as it writes their config.json
for (const [shape, { architecture, ...cfg }] of Object.entries(SHAPES)) {
  const text = JSON.stringify({ architectures: [architecture], model_type: architecture.replace('ForCausalLM', '').toLowerCase(),
    ...cfg, torch_dtype: 'bfloat16', bos_token_id: 1, eos_token_id: 2, hidden_act: 'silu' }, null, 2);
  writeFileSync(join(configDir, `random-${shape}.json`), text), configs++;
}
console.log(`fuzz seeds: ${headers} safetensors files, ${configs} configs in ${out}`);
