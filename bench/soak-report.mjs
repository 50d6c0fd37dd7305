// The soak's figures (bench/soak.mjs): the RSS verdict after the warm-up, and the printed tables.
const MIB = 1024 * 1024;
const mib = (b) => (b == null ? '-' : (b / MIB).toFixed(1));
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s[(s.length - 1) >> 1] + s[s.length >> 1]) / 2 : NaN;
};

// RSS from the end of the warm-up to the end of the run, over the samples taken while serving. The samples taken
// right after a load are left out of it: a fresh engine has not written its KV pages yet, so they sit ~25 MiB
// lower and would make the figure depend on where the reloads fall; they are reported apart (the load/dispose
// cycle's own trend). One sample can land mid-step, so each end is the median of 5 samples; growth = (last -
// first) / first, and the acceptance is |growth| <= 2%. Also the least-squares slope over the serving samples
// after the warm-up, per 1000 generations, and the growth over the warm-up itself.
export function rssVerdict(samples, warmupEnd, limit = 0.02) {
  const all = samples.filter((s) => s.label === '' || s.label === 'start');
  const steady = all.filter((s) => s.generations >= warmupEnd && s.label === '');
  const loads = samples.filter((s) => s.label === 'after load');
  if (steady.length < 10) return { ok: null, reason: `only ${steady.length} samples after the warm-up (need 10)` };
  const first = median(steady.slice(0, 5).map((s) => s.rssBytes));
  const last = median(steady.slice(-5).map((s) => s.rssBytes));
  const n = steady.length;
  const mx = steady.reduce((a, s) => a + s.generations, 0) / n;
  const my = steady.reduce((a, s) => a + s.rssBytes, 0) / n;
  const sxy = steady.reduce((a, s) => a + (s.generations - mx) * (s.rssBytes - my), 0);
  const sxx = steady.reduce((a, s) => a + (s.generations - mx) ** 2, 0);
  const heapFirst = median(steady.slice(0, 5).map((s) => s.heapUsedBytes));
  const heapLast = median(steady.slice(-5).map((s) => s.heapUsedBytes));
  const growth = (last - first) / first;
  // The same, less V8's heap (physical): what the engine, the addon and the runtime's fixed parts hold.
  const outside = (xs) => median(xs.map((s) => s.rssBytes - (s.v8Bytes ?? NaN)));
  const outsideFirst = outside(steady.slice(0, 5));
  const outsideLast = outside(steady.slice(-5));
  return {
    ok: Math.abs(growth) <= limit,
    limit,
    startRssBytes: all[0].rssBytes,
    warmupRssBytes: first,
    endRssBytes: last,
    growth,
    warmupGrowth: (first - all[0].rssBytes) / all[0].rssBytes,
    slopeBytesPer1000: sxx > 0 ? (1000 * sxy) / sxx : 0,
    minRssBytes: Math.min(...steady.map((s) => s.rssBytes)),
    maxRssBytes: Math.max(...steady.map((s) => s.rssBytes)),
    heapGrowth: (heapLast - heapFirst) / heapFirst,
    outsideV8First: outsideFirst,
    outsideV8Last: outsideLast,
    outsideV8Growth: (outsideLast - outsideFirst) / outsideFirst,
    arenaFirst: median(steady.slice(0, 5).map((s) => s.mallocArenaBytes ?? NaN)),
    arenaLast: median(steady.slice(-5).map((s) => s.mallocArenaBytes ?? NaN)),
    youngFirst: steady[0].youngCapacityBytes,
    youngLast: steady.at(-1).youngCapacityBytes,
    // RSS right after each reload's load: its first and last, over the reloads in between.
    afterLoad: loads.length >= 2 ? { first: loads[0].rssBytes, last: loads.at(-1).rssBytes, cycles: loads.length - 1 } : null,
  };
}

function table(head, rows) {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (r) => `| ${r.map((c, i) => String(c).padStart(widths[i])).join(' | ')} |`;
  console.log(line(head));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const r of rows) console.log(line(r));
}

export function printReport(r) {
  // About 20 rows of the samples, evenly spaced, plus every load (the RSS a fresh engine starts from).
  const every = Math.max(1, Math.ceil(r.samples.length / 20));
  const shown = r.samples.filter((s, i) => i % every === 0 || s.label || i === r.samples.length - 1);
  console.log('\nmemory samples (MiB). resident: the engine\'s KV pages written + checkpoint pages resident + host ' +
    'weights + workspaces (engine.memory()); V8: physical bytes of every V8 space, young: of the young generation ' +
    '(its capacity after the slash); arenas / in use: glibc malloc (mallinfo2); heap: JS heap used after a full GC');
  table(
    ['generations', 's', 'reloads', 'VmRSS', 'resident', 'V8', 'young', 'arenas', 'in use', 'heap', ''],
    shown.map((s) => [s.generations, s.seconds.toFixed(0), s.reloads, mib(s.rssBytes), mib(s.engineResidentBytes),
      mib(s.v8Bytes), `${mib(s.youngBytes)}/${mib(s.youngCapacityBytes)}`, mib(s.mallocArenaBytes),
      mib(s.mallocInUseBytes), mib(s.heapUsedBytes), s.label]),
  );
  const v = r.verdict;
  const pct = (x) => `${x >= 0 ? '+' : ''}${(100 * x).toFixed(2)}%`;
  console.log('\nsoak summary');
  table(['figure', 'value'], [
    ['generations (settled)', r.generations],
    ['tokens generated', r.tokens],
    ['wall time', `${r.seconds.toFixed(0)} s (${(r.generations / r.seconds).toFixed(1)} gen/s)`],
    ['engine reloads', r.reloads],
    ['finish: eos / length / stop', `${r.counts.eos} / ${r.counts.length} / ${r.counts.stop}`],
    ['finish: abort by signal / by reload', `${r.counts.abortSignal} / ${r.counts.abortReload}`],
    ['errors / broken results', `${r.counts.errors} / ${r.counts.bad}`],
    ['hangs / lost', `${r.problems.filter((p) => p.startsWith('hang')).length} / ${r.problems.filter((p) => p.startsWith('lost')).length}`],
    ['warm-up', `the first ${r.warmupEnd} generations`],
    ...(v.ok === null
      ? [['RSS verdict', v.reason]]
      : [
          ['RSS at start', `${mib(v.startRssBytes)} MiB`],
          ['RSS after warm-up (median of 5)', `${mib(v.warmupRssBytes)} MiB (${pct(v.warmupGrowth)} over the warm-up)`],
          ['RSS at end (median of 5)', `${mib(v.endRssBytes)} MiB`],
          ['RSS growth after warm-up', `${pct(v.growth)} (limit ±${100 * v.limit}%): ${v.ok ? 'FLAT' : 'NOT FLAT'}`],
          ['RSS slope after warm-up', `${mib(v.slopeBytesPer1000)} MiB per 1000 generations`],
          ['RSS min / max after warm-up', `${mib(v.minRssBytes)} / ${mib(v.maxRssBytes)} MiB`],
          ['RSS less V8\'s heap, after warm-up / end', Number.isFinite(v.outsideV8Growth)
            ? `${mib(v.outsideV8First)} / ${mib(v.outsideV8Last)} MiB (${pct(v.outsideV8Growth)})` : '-'],
          ['JS heap growth after warm-up', pct(v.heapGrowth)],
          ['malloc arenas after warm-up, first / last', `${mib(v.arenaFirst)} / ${mib(v.arenaLast)} MiB`],
          ['V8 young generation capacity, first / last', `${mib(v.youngFirst)} / ${mib(v.youngLast)} MiB`],
          ['RSS right after a load, first / last', v.afterLoad
            ? `${mib(v.afterLoad.first)} / ${mib(v.afterLoad.last)} MiB (${v.afterLoad.cycles} cycles between)` : '-'],
        ]),
  ]);
  for (const p of r.problems.slice(0, 20)) console.log(`PROBLEM ${p}`);
  if (r.problems.length > 20) console.log(`... and ${r.problems.length - 20} more`);
  console.log(r.problems.length ? `soak: FAIL (${r.problems.length} problems)` : 'soak: PASS (no hang, no lost request, no error)');
}
