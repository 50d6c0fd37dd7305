// Mutations of a safetensors file's bytes: cut short (an interrupted download), bits flipped in the weights (a
// valid file with other weights: must load), a tensor filled with NaN, bytes appended past the last tensor, a shard
// deleted, replaced by a folder.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { tensorEntries } from '../safetensors.mjs';

const pickShard = (m, rng) => rng.pick(m.base.shards);
const applies = (base) => base.shards.length > 0;

export const bodyMutations = [
  {
    kind: 'body/truncate',
    applies,
    apply(m, rng) {
      const file = pickShard(m, rng);
      const bytes = m.bytes(file);
      if (!bytes || bytes.length < 8) return null; // an earlier mutation already cut it
      const headerEnd = 8 + Number(bytes.readBigUInt64LE(0));
      const to = rng.pick([bytes.length - 1, rng.int(headerEnd, bytes.length - 1), headerEnd, rng.int(8, headerEnd), 7, 0]);
      m.setBytes(file, bytes.subarray(0, Math.max(0, Math.min(to, bytes.length - 1))));
      return `${file} cut from ${bytes.length} to ${Math.max(0, Math.min(to, bytes.length - 1))} bytes`;
    },
  },
  {
    kind: 'body/bitflip-data',
    applies,
    apply(m, rng) {
      const file = pickShard(m, rng);
      const st = m.st(file);
      if (!st || st.data.length === 0) return null;
      const data = Buffer.from(st.data); // never write into the base's buffer
      const n = rng.int(1, 16);
      for (let i = 0; i < n; i++) data[rng.int(0, data.length - 1)] ^= 1 << rng.int(0, 7);
      st.data = data;
      return `${file}: ${n} bit(s) flipped in the tensor data (valid file)`;
    },
  },
  {
    kind: 'body/nan-tensor',
    applies,
    apply(m, rng) {
      const file = pickShard(m, rng);
      const st = m.st(file);
      const all = st ? tensorEntries(st.entries).filter(([, e]) => Array.isArray(e?.data_offsets)) : [];
      if (all.length === 0) return null;
      const [name, e] = rng.pick(all);
      const data = Buffer.from(st.data);
      const fill = rng.pick([0xff, 0x7f, 0x00]); // NaN, NaN or a huge finite value, zero
      data.fill(fill, e.data_offsets[0], e.data_offsets[1]);
      st.data = data;
      return `${file}: every byte of ${name} = 0x${fill.toString(16)} (valid file)`;
    },
  },
  {
    kind: 'body/append',
    applies,
    apply(m, rng) {
      const file = pickShard(m, rng);
      const st = m.st(file);
      if (!st) return null;
      const n = rng.pick([1, 2, 8, 4096]);
      st.data = Buffer.concat([st.data, Buffer.alloc(n, 0xab)]);
      return `${file}: ${n} byte(s) appended after the last tensor`;
    },
  },
  {
    kind: 'body/bitflip-anywhere',
    applies,
    apply(m, rng) {
      const file = pickShard(m, rng);
      const bytes = m.bytes(file);
      if (!bytes || bytes.length === 0) return null;
      const copy = Buffer.from(bytes);
      // Mostly in the length field and header, where a flip changes the file's structure.
      const headerEnd = copy.length < 8 ? copy.length : Math.min(copy.length, 8 + Number(copy.readBigUInt64LE(0)));
      const at = rng.chance(0.8) ? rng.int(0, headerEnd - 1) : rng.int(0, copy.length - 1);
      const bit = rng.int(0, 7);
      copy[at] ^= 1 << bit;
      m.setBytes(file, copy);
      return `${file}: bit ${bit} of byte ${at} flipped`;
    },
  },
  {
    kind: 'body/delete-shard',
    applies,
    apply(m, rng) {
      const file = pickShard(m, rng);
      m.remove(file);
      return `delete ${file}`;
    },
  },
  {
    kind: 'body/not-a-file',
    applies,
    apply(m, rng) {
      const file = pickShard(m, rng);
      m.remove(file);
      m.after.push(() => mkdirSync(join(m.dir, file)));
      return `${file} is a folder`;
    },
  },
];
