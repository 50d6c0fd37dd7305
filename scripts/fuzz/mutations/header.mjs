// Mutations of a safetensors header: offsets that no longer tile the data section (shifted, overlapping, with
// gaps), dtypes, shapes, duplicate names, the length field, JSON that is cut, not UTF-8 or not an object. Some
// are valid files (offsets swapped between same-size tensors, entries reordered, an unused tensor appended) and
// must load.
import { raw, show } from '../raw-json.mjs';
import { DTYPE_SIZES, encodeSafetensors, headerText, tensorEntries } from '../safetensors.mjs';
import { isObject } from './values.mjs';

const size = ([, e]) => e.data_offsets[1] - e.data_offsets[0];

/** A header mutation on one shard (chosen at random): fn gets that shard's structured state. */
const onHeader = (kind, fn) => ({
  kind,
  applies: (base) => base.shards.length > 0,
  apply(m, rng) {
    const file = rng.pick(m.base.shards);
    const st = m.st(file);
    if (!st || tensors(st).length === 0) return null;
    const detail = fn(st, rng, m, file);
    return detail === null ? null : `${file}: ${detail}`;
  },
});

/** Tensor entries whose offsets are still a pair of numbers (earlier mutations may have broken some). */
const tensors = (st) => tensorEntries(st.entries).filter(([, e]) => isObject(e) && Array.isArray(e.data_offsets) &&
  typeof e.data_offsets[0] === 'number' && typeof e.data_offsets[1] === 'number');

/** The header bytes as they are now (for mutations that go below JSON). */
const headerBytes = (st) => Buffer.from(headerText(st.entries));

/** Replaces the shard with raw bytes built from header bytes and the data. */
function writeRaw(m, file, st, header, lengthField) {
  m.setBytes(file, encodeSafetensors(header, st.data, lengthField));
}

export const headerMutations = [
  onHeader('header/shift-offsets', (st, rng) => {
    const t = rng.pick(tensors(st));
    const [name, e] = t;
    const unit = DTYPE_SIZES[e.dtype] ?? 1;
    const row = Array.isArray(e.shape) && e.shape.length > 1 ? e.shape[e.shape.length - 1] * unit : unit;
    const delta = rng.pick([1, 2, 4, 8, unit, row]) * rng.pick([1, -1]);
    const [b, en] = e.data_offsets;
    if (b + delta < 0) return null;
    e.data_offsets = [b + delta, en + delta];
    return `${name} data_offsets [${b}, ${en}] -> [${b + delta}, ${en + delta}]`;
  }),
  onHeader('header/shift-one-end', (st, rng) => {
    const [name, e] = rng.pick(tensors(st));
    const i = rng.int(0, 1);
    const before = [...e.data_offsets];
    e.data_offsets[i] += rng.pick([1, 2, -1, -2, 4]);
    if (e.data_offsets[i] < 0) return null;
    return `${name} data_offsets ${show(before)} -> ${show(e.data_offsets)}`;
  }),
  onHeader('header/overlap', (st, rng) => {
    // Point tensor b at a's bytes: same size if possible (every size check still passes), else a's start.
    const all = tensors(st);
    const b = rng.pick(all);
    const same = all.filter((a) => a !== b && size(a) === size(b) && a[1].dtype === b[1].dtype);
    const a = same.length ? rng.pick(same) : rng.pick(all.filter((x) => x !== b).length ? all.filter((x) => x !== b) : all);
    const start = a[1].data_offsets[0];
    b[1].data_offsets = [start, start + size(b)];
    return `${b[0]} now reads ${a[0]}'s bytes from ${start} (${same.length ? 'same size' : 'different size'})`;
  }),
  onHeader('header/swap-offsets', (st, rng) => {
    const all = tensors(st);
    const b = rng.pick(all);
    const same = all.filter((a) => a !== b && size(a) === size(b) && a[1].dtype === b[1].dtype);
    if (same.length === 0) return null;
    const a = rng.pick(same);
    [a[1].data_offsets, b[1].data_offsets] = [b[1].data_offsets, a[1].data_offsets];
    return `swap the offsets of ${a[0]} and ${b[0]} (valid: the file still tiles)`;
  }),
  onHeader('header/reorder', (st, rng) => {
    for (let i = st.entries.length - 1; i > 0; i--) {
      const j = rng.int(0, i);
      [st.entries[i], st.entries[j]] = [st.entries[j], st.entries[i]];
    }
    return 'entries shuffled (valid)';
  }),
  onHeader('header/gap', (st, rng) => {
    // Move one tensor's bytes to the end of the data: its old range becomes a hole nothing covers.
    const [name, e] = rng.pick(tensors(st));
    const [b, en] = e.data_offsets;
    const at = st.data.length;
    st.data = Buffer.concat([st.data, st.data.subarray(b, en)]);
    e.data_offsets = [at, at + (en - b)];
    return `${name} moved from [${b}, ${en}] to [${at}, ${at + en - b}], leaving a hole`;
  }),
  onHeader('header/drop-tensor', (st, rng) => {
    const victim = rng.pick(tensors(st));
    st.entries = st.entries.filter((x) => x !== victim);
    return `remove ${victim[0]} (its bytes stay, uncovered)`;
  }),
  onHeader('header/extra-tensor', (st, rng) => {
    const end = st.data.length;
    switch (rng.int(0, 3)) {
      case 0: {
        // Valid: an unused tensor whose bytes are appended.
        st.data = Buffer.concat([st.data, Buffer.alloc(16)]);
        st.entries.push(['extra.unused.weight', { dtype: 'F32', shape: [4], data_offsets: [end, end + 16] }]);
        return 'add unused F32[4] extra.unused.weight on 16 appended bytes (valid)';
      }
      case 1: {
        const [name, e] = rng.pick(tensors(st));
        st.entries.push(['extra.alias.weight', { dtype: e.dtype, shape: e.shape, data_offsets: [...e.data_offsets] }]);
        return `add extra.alias.weight over ${name}'s bytes`;
      }
      case 2: {
        // numel * 4 wraps to 16 in 64 bits: only overflow-safe arithmetic sees that the shape does not fit 16 bytes.
        st.data = Buffer.concat([st.data, Buffer.alloc(16)]);
        st.entries.push(['extra.overflow.weight', { dtype: 'F32', shape: [raw('4611686018427387908')], data_offsets: [end, end + 16] }]);
        return 'add extra.overflow.weight F32[2^62 + 4] on 16 appended bytes (the size wraps around in 64 bits)';
      }
      default: {
        st.data = Buffer.concat([st.data, Buffer.alloc(8)]);
        st.entries.push(['extra.bad.weight', { dtype: 'Q4_K', shape: [8], data_offsets: [end, end + 8] }]);
        return 'add unused extra.bad.weight of unknown dtype Q4_K';
      }
    }
  }),
  onHeader('header/dtype', (st, rng) => {
    const [name, e] = rng.pick(tensors(st));
    const before = e.dtype;
    const sameSize = Object.keys(DTYPE_SIZES).filter((d) => d !== before && DTYPE_SIZES[d] === DTYPE_SIZES[before]);
    e.dtype = rng.pick([...sameSize, ...sameSize, 'Q4_K', 'bf16', 'F128', '', 5, null, 'F64', 'F8_E4M3', 'BOOL']);
    return `${name} dtype ${before} -> ${show(e.dtype)}`;
  }),
  onHeader('header/shape', (st, rng) => {
    const [name, e] = rng.pick(tensors(st));
    const before = show(e.shape);
    const s = Array.isArray(e.shape) ? [...e.shape] : [];
    const i = rng.int(0, Math.max(0, s.length - 1));
    switch (rng.int(0, 7)) {
      case 0: s.reverse(); break;
      case 1: s[i] += rng.pick([1, -1]); break;
      case 2: s[i] += 0.5; break;
      case 3: s[i] = -s[i]; break;
      case 4: s.push(1); break;
      case 5: e.shape = [s.reduce((a, b) => a * b, 1)]; return `${name} shape ${before} -> ${show(e.shape)}`;
      case 6: e.shape = rng.pick([[], 'x', null, [String(s[0])], {}]); return `${name} shape ${before} -> ${show(e.shape)}`;
      default: s[i] = raw('18446744073709551616'); break;
    }
    e.shape = s;
    return `${name} shape ${before} -> ${show(s)}`;
  }),
  onHeader('header/offsets-type', (st, rng) => {
    const [name, e] = rng.pick(tensors(st));
    const [b, en] = e.data_offsets;
    e.data_offsets = rng.pick([[b], [b, en, en], 'x', null, {}, [b + 0.5, en + 0.5], [String(b), String(en)], [-1, en],
      [b, raw('18446744073709551615')], [raw('18446744073709551616'), raw('18446744073709551616')], [en, b]]);
    return `${name} data_offsets [${b}, ${en}] -> ${show(e.data_offsets)}`;
  }),
  onHeader('header/duplicate-name', (st, rng) => {
    const all = tensors(st);
    const [name, e] = rng.pick(all);
    const other = rng.pick(all);
    const dup = rng.chance(0.5) ? { ...e } : { ...other[1], dtype: e.dtype, shape: e.shape };
    st.entries.push([name, dup]);
    return `a second "${name}" entry ${dup.data_offsets === e.data_offsets ? '(identical)' : `with ${other[0]}'s offsets`}`;
  }),
  onHeader('header/metadata', (st, rng) => {
    const value = rng.pick([{ format: 'pt' }, { format: 'pt', extra: 'x' }, 5, [], { n: 5 }, null, 'x']);
    st.entries = st.entries.filter(([k]) => k !== '__metadata__');
    st.entries.unshift(['__metadata__', value]);
    return `__metadata__ = ${show(value)}`;
  }),
  onHeader('header/non-object', (st, rng, m, file) => {
    const text = rng.pick(['[]', '5', '"x"', 'null', '{"w": 5}', '{"w": []}', '{}']);
    writeRaw(m, file, st, Buffer.from(text));
    return `header = ${text}`;
  }),
  onHeader('header/cut-json', (st, rng, m, file) => {
    const h = headerBytes(st);
    const at = rng.int(1, h.length - 1);
    // The length field says `at`: the JSON ends early and the rest of the header is read as data.
    m.setBytes(file, Buffer.concat([lengthBytes(BigInt(at)), h, st.data]));
    return `length field ${h.length} -> ${at} (JSON cut short)`;
  }),
  onHeader('header/length-field', (st, rng) => {
    const real = BigInt(Math.ceil(headerBytes(st).length / 8) * 8);
    const fileSize = 8n + real + BigInt(st.data.length);
    st.lengthField = rng.pick([0n, 1n, 7n, real - 1n, real + 1n, real + 8n, fileSize - 8n, fileSize - 7n, fileSize,
      2n ** 32n, 2n ** 63n, 2n ** 64n - 1n, 2n ** 64n - 8n]);
    return `length field ${real} -> ${st.lengthField}`;
  }),
  onHeader('header/non-utf8', (st, rng, m, file) => {
    const h = headerBytes(st);
    const text = h.toString('latin1');
    // Inside the string of a tensor name or dtype, so the JSON is otherwise well-formed.
    const quotes = [...text.matchAll(/"/g)].map((x) => x.index);
    const pos = rng.pick(quotes) + 1;
    const bad = rng.pick([[0xff], [0xc3, 0x28], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0x00], [0x0a]]);
    writeRaw(m, file, st, Buffer.concat([h.subarray(0, pos), Buffer.from(bad), h.subarray(pos)]));
    return `bytes ${bad.map((b) => b.toString(16)).join(' ')} inserted at header byte ${pos}`;
  }),
  onHeader('header/padding', (st, rng, m, file) => {
    const h = headerBytes(st);
    const pad = rng.pick([Buffer.alloc(8, 0x20), Buffer.alloc(8, 0x00), Buffer.from('\n\t\r \n\t\r ')]);
    const lead = rng.chance(0.5);
    writeRaw(m, file, st, lead ? Buffer.concat([pad, h]) : Buffer.concat([h, pad]));
    return `${lead ? 'leading' : 'trailing'} padding ${show([...pad])}`;
  }),
];

function lengthBytes(n) {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(n);
  return b;
}
