// What the safetensors library accepts, as rules on one file (the format's own validation, which issue 19 asks the
// loader to match): an 8-byte little-endian length, a UTF-8 JSON object header with no duplicate names, entries
// with a known dtype, a shape of non-negative integers and a pair of offsets, byte length = shape x dtype size
// (in exact arithmetic), and offsets that tile the data section exactly: sorted, they start at 0, each begins
// where the previous ended, and the last ends at the end of the file. A tensor whose offset is not a multiple of
// its dtype size is also refused: the engine reads elements in place.
import { DTYPE_SIZES } from './safetensors.mjs';
import { isInteger, isObject, parseStrict } from './strict-json.mjs';

/**
 * Violation kinds: st-header, st-duplicate, st-dtype, st-size, st-offsets (overlapping, misaligned, malformed or
 * past the data: one of the two classes issue 19's acceptance names) and st-gap (bytes no tensor covers).
 */
const v = (kind, detail) => ({ kind, detail });

/**
 * @param {Buffer} bytes - the whole file
 * @param {string} where - its name, for the details
 * @returns {{ violations: {kind: string, detail: string}[], tensors: Map<string, object> }}
 */
export function checkSafetensors(bytes, where) {
  const violations = [];
  const tensors = new Map();
  if (bytes.length < 8) return { violations: [v('st-header', `${where}: ${bytes.length} bytes, no length field`)], tensors };
  const len = bytes.readBigUInt64LE(0);
  if (len > BigInt(bytes.length - 8)) {
    return { violations: [v('st-header', `${where}: header length ${len} runs past the ${bytes.length}-byte file`)], tensors };
  }
  let header;
  try {
    const parsed = parseStrict(bytes.subarray(8, 8 + Number(len)));
    header = parsed.value;
    for (const d of parsed.duplicates) violations.push(v('st-duplicate', `${where}: "${d.slice(1)}" appears twice`));
  } catch (err) {
    return { violations: [v('st-header', `${where}: header is not UTF-8 JSON (${err.message})`)], tensors };
  }
  if (!isObject(header)) return { violations: [v('st-header', `${where}: header is not a JSON object`)], tensors };

  const dataSize = BigInt(bytes.length) - 8n - len;
  const spans = [];
  for (const [name, e] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    if (!isObject(e)) {
      violations.push(v('st-header', `${where}: entry ${name} is not an object`));
      continue;
    }
    tensors.set(name, e);
    const unit = DTYPE_SIZES[e.dtype];
    if (typeof e.dtype !== 'string' || unit === undefined) violations.push(v('st-dtype', `${where}: ${name} has dtype ${JSON.stringify(e.dtype)}`));
    const shapeOk = Array.isArray(e.shape) && e.shape.every((d) => isInteger(d) && d >= 0);
    if (!shapeOk) violations.push(v('st-size', `${where}: ${name} shape ${show(e.shape)} is not a list of non-negative integers`));
    const o = e.data_offsets;
    if (!Array.isArray(o) || o.length !== 2 || !o.every((x) => isInteger(x) && x >= 0)) {
      violations.push(v('st-offsets', `${where}: ${name} data_offsets ${show(o)} is not a pair of non-negative integers`));
      continue;
    }
    const [b, en] = o.map(BigInt);
    if (en < b) violations.push(v('st-offsets', `${where}: ${name} ends (${en}) before it begins (${b})`));
    if (shapeOk && unit !== undefined) {
      const need = e.shape.reduce((p, d) => p * BigInt(d), 1n) * BigInt(unit);
      if (need !== en - b) violations.push(v('st-size', `${where}: ${name} spans ${en - b} bytes, shape x dtype needs ${need}`));
      if (b % BigInt(unit) !== 0n) violations.push(v('st-offsets', `${where}: ${name} starts at ${b}, not a multiple of its ${unit}-byte dtype (misaligned)`));
    }
    spans.push({ name, b, en });
  }

  spans.sort((x, y) => (x.b < y.b ? -1 : x.b > y.b ? 1 : x.en < y.en ? -1 : x.en > y.en ? 1 : 0));
  let at = 0n;
  let prev = '(start of data)';
  for (const s of spans) {
    if (s.b < at) violations.push(v('st-offsets', `${where}: ${s.name} [${s.b}, ${s.en}] overlaps ${prev}, which ends at ${at}`));
    else if (s.b > at) violations.push(v('st-gap', `${where}: gap of ${s.b - at} bytes before ${s.name} (after ${prev})`));
    if (s.en > at) [at, prev] = [s.en, s.name];
  }
  if (at > dataSize) violations.push(v('st-offsets', `${where}: tensors end at ${at}, past the ${dataSize}-byte data section`));
  else if (at < dataSize) violations.push(v('st-gap', `${where}: ${dataSize - at} bytes after the last tensor are not covered`));
  return { violations, tensors };
}

function show(x) {
  const t = JSON.stringify(x, (_k, val) => (typeof val === 'bigint' ? val.toString() : val));
  return t === undefined ? String(x) : t.length > 60 ? `${t.slice(0, 57)}...` : t;
}
