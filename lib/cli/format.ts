/**
 * Number formatting for the CLI's human-readable output.
 * @internal
 * @module
 */

/** 215680 → "215,680". @internal */
export function grouped(n: number): string {
  return n.toLocaleString('en-US');
}

/** 215680 → "215.7K", 751632384 → "751.6M". @internal */
export function compact(n: number): string {
  for (const [unit, size] of [['T', 1e12], ['B', 1e9], ['M', 1e6], ['K', 1e3]] as const) {
    if (n >= size) return `${(n / size).toFixed(1)}${unit}`;
  }
  return String(n);
}

/** 431360 → "421.3 KiB". @internal */
export function bytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${v.toFixed(1)} ${units[i]}`;
}

/** Seconds with two decimals, from milliseconds. @internal */
export function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(2)} s`;
}
