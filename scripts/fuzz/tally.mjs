// Counts of a fuzz run, by outcome class, by mutation kind and by the oracle's silent-load kind, as plain tables.
import { ACCEPTANCE_KINDS } from './oracle.mjs';

export const CLASSES = ['typed', 'loaded', 'silent', 'untyped', 'crash', 'hang', 'fuzzer-error'];
/** Classes that fail a run. */
export const FAILING = new Set(['silent', 'untyped', 'crash', 'hang', 'fuzzer-error']);

/** @param {object[]} results - one per mutant: { class, mutations: [{kind}], violations? } */
export function tally(results) {
  const byClass = Object.fromEntries(CLASSES.map((c) => [c, 0]));
  const byKind = new Map();
  const silentKinds = new Map();
  const codes = new Map();
  const typedPhases = new Map();
  for (const r of results) {
    byClass[r.class]++;
    for (const kind of new Set(r.mutations.map((m) => m.kind))) {
      if (!byKind.has(kind)) byKind.set(kind, Object.fromEntries(CLASSES.map((c) => [c, 0])));
      byKind.get(kind)[r.class]++;
    }
    if (r.class === 'typed') {
      codes.set(r.code, (codes.get(r.code) ?? 0) + 1);
      typedPhases.set(r.phase, (typedPhases.get(r.phase) ?? 0) + 1);
    }
    if (r.class === 'silent') for (const k of new Set(r.violations.map((x) => x.kind))) silentKinds.set(k, (silentKinds.get(k) ?? 0) + 1);
  }
  const acceptanceSilent = [...silentKinds].filter(([k]) => ACCEPTANCE_KINDS.has(k)).reduce((s, [, n]) => s + n, 0);
  return {
    total: results.length,
    byClass,
    byKind: Object.fromEntries([...byKind].sort(([a], [b]) => a.localeCompare(b))),
    silentKinds: Object.fromEntries([...silentKinds].sort(([, a], [, b]) => b - a)),
    acceptanceSilent,
    typedCodes: Object.fromEntries([...codes].sort(([, a], [, b]) => b - a)),
    typedPhases: Object.fromEntries([...typedPhases].sort(([, a], [, b]) => b - a)),
    failing: results.filter((r) => FAILING.has(r.class)).length,
  };
}

function table(header, rows) {
  const widths = header.map((h, i) => Math.max(String(h).length, ...rows.map((r) => String(r[i]).length)));
  const line = (r) => r.map((c, i) => (i === 0 ? String(c).padEnd(widths[i]) : String(c).padStart(widths[i]))).join('  ');
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

/** The tally as text: classes, kinds, silent kinds, typed codes, then one line per failing mutant. */
export function formatTally(t, results) {
  const out = [];
  out.push(`checkpoint fuzz: ${t.total} mutants`);
  out.push(table(['class', 'mutants'], CLASSES.map((c) => [c, t.byClass[c]])));
  out.push('');
  out.push(table(['mutation kind', ...CLASSES], Object.entries(t.byKind).map(([k, c]) => [k, ...CLASSES.map((x) => c[x])])));
  out.push('');
  out.push(`typed error codes: ${Object.entries(t.typedCodes).map(([c, n]) => `${c} ${n}`).join(', ') || 'none'}`);
  // A checkpoint refused only when generating (not at load) is worth a look: the loader let it through.
  out.push(`typed errors by phase: ${Object.entries(t.typedPhases).map(([c, n]) => `${c} ${n}`).join(', ') || 'none'}`);
  const silent = Object.entries(t.silentKinds);
  out.push(`silent loads by oracle kind (* = an acceptance class of issue 19): ${silent.length ? '' : 'none'}`);
  if (silent.length) out.push(table(['oracle kind', 'mutants'], silent.map(([k, n]) => [`${ACCEPTANCE_KINDS.has(k) ? '*' : ' '}${k}`, n])));
  const failing = results.filter((r) => FAILING.has(r.class));
  if (failing.length) {
    out.push('');
    out.push('failing mutants:');
    for (const r of failing) {
      const what = r.mutations.map((m) => `${m.kind}: ${m.detail}`).join(' + ');
      const why = r.class === 'silent' ? r.violations.map((x) => `${x.kind}: ${x.detail}`).join('; ') : `${r.phase}: ${r.code ?? ''} ${r.message ?? ''}`;
      out.push(`  #${r.index} ${r.base} ${r.class.toUpperCase()} | ${what} | ${why}`);
    }
  }
  return out.join('\n');
}
