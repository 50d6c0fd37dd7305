// A JSON parser for the oracle, stricter than JSON.parse where a checkpoint's meaning depends on it: it reports
// duplicate keys (JSON.parse silently keeps the last), keeps integers past 2^53 exact as BigInt, and refuses
// bytes that are not UTF-8 (decoding with replacement characters would change names silently).

const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * @param {Buffer|string} input
 * @returns {{ value: unknown, duplicates: string[] }} duplicates: paths of keys that appear twice in one object
 * @throws Error for bytes that are not UTF-8 or text that is not one JSON value
 */
export function parseStrict(input) {
  const text = typeof input === 'string' ? input : decoder.decode(input);
  const duplicates = [];
  let i = 0;

  const fail = (what) => {
    throw new Error(`${what} at offset ${i}`);
  };
  const ws = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i])) i++;
  };
  const string = () => {
    const m = /^"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/.exec(text.slice(i, i + 1_000_000));
    if (!m) fail('bad string');
    i += m[0].length;
    return JSON.parse(m[0]);
  };
  const number = () => {
    const m = /^-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i, i + 400));
    if (!m) fail('bad value');
    i += m[0].length;
    if (m[1] === undefined && m[2] === undefined) {
      const n = BigInt(m[0]);
      return n >= BigInt(Number.MIN_SAFE_INTEGER) && n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n;
    }
    return Number(m[0]);
  };
  const value = (path) => {
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const obj = {};
      const seen = new Set();
      ws();
      if (text[i] === '}') return i++, obj;
      for (;;) {
        ws();
        if (text[i] !== '"') fail('expected a key');
        const key = string();
        if (seen.has(key)) duplicates.push(`${path}/${key}`);
        seen.add(key);
        ws();
        if (text[i++] !== ':') fail('expected ":"');
        Object.defineProperty(obj, key, { value: value(`${path}/${key}`), enumerable: true, writable: true, configurable: true });
        ws();
        if (text[i] === ',') i++;
        else if (text[i] === '}') return i++, obj;
        else fail('expected "," or "}"');
      }
    }
    if (c === '[') {
      i++;
      const arr = [];
      ws();
      if (text[i] === ']') return i++, arr;
      for (;;) {
        arr.push(value(`${path}/${arr.length}`));
        ws();
        if (text[i] === ',') i++;
        else if (text[i] === ']') return i++, arr;
        else fail('expected "," or "]"');
      }
    }
    if (c === '"') return string();
    for (const [word, v] of [['true', true], ['false', false], ['null', null]]) {
      if (text.startsWith(word, i)) return (i += word.length), v;
    }
    return number();
  };

  const result = value('');
  ws();
  if (i !== text.length) fail('trailing characters');
  return { value: result, duplicates };
}

/** A plain JSON object (not an array or null). */
export const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/** A JSON integer (a Number or a BigInt past 2^53). */
export const isInteger = (v) => typeof v === 'bigint' || Number.isInteger(v);
