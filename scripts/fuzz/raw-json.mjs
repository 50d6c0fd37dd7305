// JSON text with literal number tokens that JavaScript numbers cannot hold (2^64, 1e400, -0.0): the fuzzer needs
// to write exactly those bytes, and JSON.stringify would round or refuse them.

const RAW = Symbol('raw JSON number');

/** A number written into the JSON text verbatim, e.g. raw('18446744073709551616'). */
export function raw(text) {
  return { [RAW]: text, toString: () => text };
}

export function isRaw(value) {
  return value !== null && typeof value === 'object' && RAW in value;
}

/** JSON.stringify that writes raw() numbers verbatim. */
export function stringify(value, indent) {
  const literals = [];
  const text = JSON.stringify(
    value,
    function (_key, v) {
      if (isRaw(v)) {
        literals.push(v[RAW]);
        return `\u0000raw${literals.length - 1}\u0000`;
      }
      return v;
    },
    indent,
  );
  if (text === undefined) return 'null';
  return text.replace(/"\\u0000raw(\d+)\\u0000"/g, (_m, i) => literals[Number(i)]);
}

/** A short description of a value for the reports. */
export function show(value) {
  const text = stringify(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
