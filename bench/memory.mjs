#!/usr/bin/env node
// The memory benchmark (issue 5): one checkpoint, one fixed workload — load, then N concurrent requests of fixed
// lengths (P prompt tokens, exactly K new tokens each, greedy), then ~1 s idle — for vtengine and for HF
// transformers in the same run, each in its own child process under the same EXTERNAL sampler (bench/memory.py,
// every 100 ms over the child's process tree: PSS and RSS from /proc/<pid>/smaps_rollup, MemAvailable from
// /proc/meminfo, GPU bytes from NVML). Peaks are split by phase (load, serving, idle, whole window), with the
// ratio peer / ours; a null control (each runtime started, nothing loaded) is measured first. The checkpoint is
// read through before each run, so both start with it in the page cache.
//
// Here (CPU, no torch; the peer column then says "not measured" and why):
//   npm run build:ts && node bench/memory.mjs --engine vtengine
// On the CPU of the GPU machine, both sides in one run (needs Node there, and python3 with torch + transformers):
//   node bench/memory.mjs --engine both --hf-device cpu --json $OUT/memory.json
// On the GPU (issue 5's GPU run): scripts/gpu-memory.sh there measures both sides in one run, ours through the C
// ABI (bench/memory-engine.cpp, no Node needed), and prints the table; bench/memory_table.py --markdown turns its
// JSON into bench/RESULTS.md rows.
// On the GPU machine's CPU without Node: measure the peer alone there, then merge its result into the table here
// (it is then from another run, and the table says so):
//   there (carrying only the checkpoint's config.json and generation_config.json; --make writes random weights):
//          C=bench/checkpoints/qwen3-0.6b-bf16; W="--checkpoint $C --device cpu --requests 4 --prompt 512 --new 128"
//          python3 bench/memory_hf.py --make --checkpoint $C && cat $C/*.safetensors > /dev/null &&
//          python3 bench/memory.py --label 'hf (control)' --out $OUT/hf-control.json -- python3 bench/memory_hf.py $W --control &&
//          python3 bench/memory.py --label hf --out $OUT/hf.json -- python3 bench/memory_hf.py $W
//   here:  node bench/memory.mjs --engine vtengine --peer-json <files_at>/hf.json --peer-control-json <files_at>/hf-control.json
// Options: --checkpoint DIR (default bench/checkpoints/<shape>-bf16, made on first use), --shape qwen3-0.6b,
// --requests 4, --prompt 512, --new 128, --idle-ms 1000, --interval-ms 100, --threads N (default: all cores),
// --hf-device cpu|cuda, --python python3, --no-control, --json FILE.
import { execFileSync, spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, readSync, readdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = fileURLToPath(new URL('..', import.meta.url));
const { values: o } = parseArgs({
  options: {
    engine: { type: 'string', default: 'both' },
    checkpoint: { type: 'string' },
    shape: { type: 'string', default: 'qwen3-0.6b' },
    requests: { type: 'string', default: '4' },
    prompt: { type: 'string', default: '512' },
    new: { type: 'string', default: '128' },
    'idle-ms': { type: 'string', default: '1000' },
    'interval-ms': { type: 'string', default: '100' },
    threads: { type: 'string', default: '0' },
    'hf-device': { type: 'string', default: 'cpu' },
    python: { type: 'string', default: 'python3' },
    'peer-json': { type: 'string' },
    'peer-control-json': { type: 'string' },
    'no-control': { type: 'boolean', default: false },
    json: { type: 'string' },
    worker: { type: 'boolean', default: false }, // internal: run vtengine's side in this process
    control: { type: 'boolean', default: false }, // internal, with --worker
  },
});
const N = Number(o.requests), P = Number(o.prompt), K = Number(o.new), idleMs = Number(o['idle-ms']);
const dir = o.checkpoint ?? join(root, 'bench/checkpoints', `${o.shape}-bf16`);

/** The same ids as bench/memory_hf.py's prompt(). */
const prompt = (n, vocab, salt) => Array.from({ length: n }, (_, i) => ((i + salt) * 7919 + salt * 104729) % (vocab - 10) + 5);

if (o.worker) await worker();
else await main();

// ---- vtengine's side, in the child the sampler watches ----
async function worker() {
  const lines = process.env.MEMORY_SAMPLER_ACK === '1' ? createInterface({ input: process.stdin })[Symbol.asyncIterator]() : undefined;
  // After each mark the sampler takes the sample that closes the phase before, then answers with a line.
  const mark = async (phase, info) => {
    console.log(JSON.stringify(info ? { phase, info } : { phase }));
    if (lines && phase !== 'end') await lines.next();
  };
  const { Engine } = await import('../dist/index.js');
  const threads = Number(o.threads) || undefined;
  const info = { engine: 'vtengine', threads: threads ?? cpus().length, control: o.control };
  if (o.control) {
    await mark('serve');
    await mark('idle');
    await new Promise((r) => setTimeout(r, idleMs));
    await mark('end', info);
    process.exit(0);
  }
  const options = { device: 'cpu', threads, maxContext: P + K };
  await mark('load');
  const t0 = performance.now();
  info.estimate = await Engine.estimate(dir, options); // reads headers only; part of what a careful caller does
  const engine = await Engine.load(dir, options);
  info.loadSeconds = (performance.now() - t0) / 1000;
  await mark('serve');
  const t1 = performance.now();
  const vocab = engine.modelInfo.vocabSize;
  const results = await Promise.all(
    Array.from({ length: N }, (_, r) => engine.generate({ tokens: prompt(P, vocab, r) }, { maxTokens: K, stopTokenIds: [] })),
  );
  info.serveSeconds = (performance.now() - t1) / 1000;
  info.generatedTokens = results.reduce((s, r) => s + r.usage.completionTokens, 0);
  await mark('idle');
  info.memory = (await engine.memory()).engine; // the engine's own accounting, serving done
  await new Promise((r) => setTimeout(r, idleMs));
  await mark('end', info);
  await engine.dispose();
  process.exit(0); // stdin, read for the sampler's answers, would keep the process up
}

// ---- the orchestrator ----
async function main() {
  const engines = o.engine === 'both' ? ['vtengine', 'hf'] : [o.engine];
  if (!engines.every((e) => e === 'vtengine' || e === 'hf')) throw new Error('--engine must be vtengine, hf or both');
  if (!existsSync(join(dir, 'config.json'))) {
    if (o.checkpoint) throw new Error(`no checkpoint at ${dir}`);
    mkdirSync(dir, { recursive: true });
    console.error(`making ${dir} (random weights)...`);
    const { writeRandomCheckpoint } = await import('../scripts/random-checkpoint.mjs');
    writeRandomCheckpoint(dir, o.shape, { dtype: 'bfloat16' });
  }
  const files = readdirSync(dir).filter((f) => f.endsWith('.safetensors')).map((f) => join(dir, f));
  const checkpointBytes = files.reduce((s, f) => s + tensorBytes(f), 0);
  const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));

  const title =
    `memory benchmark: ${dir} (${config.architectures?.[0]}, ${fmt(checkpointBytes)} of tensors), ${N} concurrent requests ` +
    `× ${P} prompt + ${K} new tokens, then ${idleMs} ms idle; external sampler every ${o['interval-ms']} ms over the process tree`;
  console.log(title);
  // Declared before any figure of this run exists (issue 5's targets); a row's verdict is read against them.
  console.log('targets (issue 5): peak PSS over the whole window ≤ 0.25× HF; peak PSS while serving ≤ 0.6× HF; ' +
    'GPU ≤ weights + KV + 1 GiB; no host copy of the weights after load (GPU only)');

  const runs = {};
  for (const engine of engines) {
    const why = unavailable(engine);
    if (why) {
      runs[engine] = { notMeasured: why };
      console.error(`${engine}: not measured (${why})`);
      continue;
    }
    if (!o['no-control']) runs[`${engine}-control`] = measure(engine, true);
    runs[engine] = measure(engine, false);
  }
  if (o['peer-json']) {
    if (runs.hf && !runs.hf.notMeasured) throw new Error('--peer-json and a measured HF run: pick one');
    runs.hf = { ...JSON.parse(readFileSync(o['peer-json'], 'utf8')), separateRun: o['peer-json'] };
    if (o['peer-control-json']) runs['hf-control'] = { ...JSON.parse(readFileSync(o['peer-control-json'], 'utf8')), separateRun: o['peer-control-json'] };
  }
  runs.hf ??= { notMeasured: 'not asked for (--engine vtengine)' };

  printTable(runs, checkpointBytes);
  const out = {
    date: new Date().toISOString(),
    machine: `${cpus()[0]?.model} (${cpus().length} cores)`,
    commit: git('rev-parse', '--short', 'HEAD'),
    checkpoint: dir,
    workload: { requests: N, prompt: P, new: K, idleMs, intervalMs: Number(o['interval-ms']) },
    runs,
  };
  if (o.json) writeFileSync(o.json, JSON.stringify(out, null, 1) + '\n');
  console.log(JSON.stringify(out));
}

function unavailable(engine) {
  if (engine === 'vtengine') return existsSync(join(root, 'dist/index.js')) ? undefined : 'dist/ is missing: run "npm run build:ts"';
  const r = spawnSync(o.python, ['-c', 'import torch, transformers; print(torch.__version__, transformers.__version__)'], { encoding: 'utf8' });
  if (r.error) return `${o.python} cannot be run: ${r.error.message}`;
  if (r.status !== 0) return `${o.python} has no torch + transformers: ${(r.stderr.trim().split('\n').at(-1) ?? '').slice(0, 120)}`;
  return undefined;
}

function measure(engine, control) {
  warm(); // both sides start with the checkpoint in the page cache
  const common = ['--checkpoint', dir, '--requests', String(N), '--prompt', String(P), '--new', String(K), '--idle-ms', String(idleMs)];
  const threads = Number(o.threads) > 0 ? ['--threads', o.threads] : [];
  const cmd =
    engine === 'vtengine'
      ? [process.execPath, fileURLToPath(import.meta.url), '--worker', ...common, ...threads, ...(control ? ['--control'] : [])]
      : [o.python, join(root, 'bench/memory_hf.py'), ...common, ...threads, '--device', o['hf-device'], ...(control ? ['--control'] : [])];
  const label = `${engine}${control ? ' (control)' : ''}`;
  console.error(`measuring ${label}...`);
  const sampler = ['bench/memory.py', '--interval-ms', o['interval-ms'], '--label', label, '--', ...cmd];
  const r = spawnSync(o.python, sampler, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 26 });
  const last = r.stdout.trim().split('\n').at(-1);
  if (r.status !== 0 || !last) throw new Error(`the ${label} run failed (exit ${r.status})`);
  return JSON.parse(last);
}

function warm() {
  const buf = Buffer.alloc(16 << 20);
  for (const f of readdirSync(dir).map((n) => join(dir, n))) {
    const fd = openSync(f, 'r');
    while (readSync(fd, buf, 0, buf.length, null) > 0);
    closeSync(fd);
  }
}

function printTable(runs, checkpointBytes) {
  const ours = runs.vtengine, peer = runs.hf;
  const cell = (run, phase, key) => {
    if (!run || run.notMeasured) return { text: 'not measured', v: null };
    const p = phase === 'whole' ? run.whole : run.phases?.[phase];
    let v = p?.[key] ?? null;
    if (key === 'gpuBytes' && v === null && p?.gpuDeviceDeltaBytes != null) v = p.gpuDeviceDeltaBytes;
    if (v === null) return { text: key.startsWith('gpu') ? `n/a${run.gpuReason ? ' (no NVML)' : ''}` : 'n/a', v };
    return { text: fmt(v), v };
  };
  const rows = [['axis', 'phase', 'vtengine', 'HF transformers', 'HF / vtengine']];
  for (const [axis, key] of [['peak PSS', 'pssBytes'], ['peak RSS', 'rssBytes'], ['peak GPU memory', 'gpuBytes'], ['peak MemAvailable drop', 'availableDropBytes']]) {
    for (const phase of ['whole', 'load', 'serve', 'idle']) {
      const a = cell(ours, phase, key), b = cell(peer, phase, key);
      const ratio = a.v > 0 && b.v !== null ? `${(b.v / a.v).toFixed(2)}x` : 'n/a';
      rows.push([axis, phase === 'serve' ? 'serving' : phase, a.text, b.text, ratio]);
    }
  }
  const control = (e) => (runs[`${e}-control`] ? { run: runs[`${e}-control`] } : { run: { notMeasured: 'no control run' } });
  if (runs['vtengine-control'] || runs['hf-control']) {
    for (const [axis, key] of [['null control (runtime only): peak PSS', 'pssBytes'], ['null control (runtime only): peak RSS', 'rssBytes']]) {
      const a = cell(control('vtengine').run, 'whole', key), b = cell(control('hf').run, 'whole', key);
      rows.push([axis, 'whole', a.text, b.text, a.v > 0 && b.v !== null ? `${(b.v / a.v).toFixed(2)}x` : 'n/a']);
    }
  }
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  const line = (r) => `| ${r.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  console.log([line(rows[0]), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.slice(1).map(line)].join('\n'));

  const verdict = (phase, limit) => {
    const a = cell(ours, phase, 'pssBytes').v, b = cell(peer, phase, 'pssBytes').v;
    if (a === null || b === null) return 'not measured';
    return `ours ${(a / b).toFixed(2)}× HF's (target ≤ ${limit}×): ${a / b <= limit ? 'MET' : 'NOT MET'}`;
  };
  const notes = [
    `against the targets: peak PSS over the whole window ${verdict('whole', 0.25)}; peak PSS while serving ${verdict('serve', 0.6)}; ` +
      'GPU targets: not measured (vtengine has no CUDA backend yet).',
  ];
  if (peer?.notMeasured) notes.push(`HF transformers: not measured: ${peer.notMeasured}.`);
  if (peer?.separateRun) {
    notes.push(`HF transformers: from ${peer.separateRun}, a SEPARATE run (another time, maybe another machine).`);
    const w = peer.info?.workload;
    if (!w || w.requests !== N || w.prompt !== P || w.new !== K) notes.push(`WARNING: the peer's workload ${JSON.stringify(w)} is not this one (${N} × ${P} + ${K}).`);
  }
  if (ours && !ours.notMeasured) {
    const i = ours.info ?? {};
    const m = i.memory, est = i.estimate;
    if (est) notes.push(`vtengine's Engine.estimate before load: host heap ${fmt(est.totals.hostHeapBytes)}, page cache ${fmt(est.totals.pageCacheBytes)} (checkpoint tensors ${fmt(checkpointBytes)}).`);
    if (m) notes.push(`vtengine's engine.memory() after serving: mapped weights resident ${fmt(m.weights.mappedResidentBytes)}, KV pool ${fmt(m.kvCache.bytes)} reserved / ${fmt(m.kvCache.residentBytes)} written (fp32 on the CPU), workspaces ${fmt(m.workspaceBytes)}.`);
    notes.push(`vtengine: load ${i.loadSeconds?.toFixed(1)} s, serving ${i.serveSeconds?.toFixed(1)} s, ${i.generatedTokens} tokens, ${i.threads} threads.`);
  }
  if (peer && !peer.notMeasured) {
    const i = peer.info ?? {};
    notes.push(`HF: transformers ${i.transformers}, torch ${i.torch} on ${i.device}; load ${i.loadSeconds?.toFixed(1)} s, serving ${i.serveSeconds?.toFixed(1)} s, ${i.generatedTokens} tokens, ${i.threads} threads${i.cudaMaxAllocatedBytes ? `; torch.cuda.max_memory_allocated ${fmt(i.cudaMaxAllocatedBytes)}` : ''}.`);
  }
  notes.push('Phases come from marks the child prints; at each mark the child waits until the sampler has taken the sample that closes the phase. ' +
    'RSS sums the tree\'s processes (shared pages counted once per process); PSS does not. MemAvailable is machine-wide: other processes move it (a negative drop is memory others freed).');
  console.log(notes.map((n) => `- ${n}`).join('\n'));
}

function tensorBytes(file) {
  const fd = openSync(file, 'r');
  const len = Buffer.alloc(8);
  readSync(fd, len, 0, 8, 0);
  const text = Buffer.alloc(Number(len.readBigUInt64LE()));
  readSync(fd, text, 0, text.length, 8);
  closeSync(fd);
  return Object.values(JSON.parse(text.toString('utf8'))).reduce((s, t) => s + (t.data_offsets ? t.data_offsets[1] - t.data_offsets[0] : 0), 0);
}

function fmt(bytes) {
  if (bytes === null || bytes === undefined) return 'n/a';
  const a = Math.abs(bytes);
  if (a >= 2 ** 30) return `${(bytes / 2 ** 30).toFixed(2)} GiB`;
  if (a >= 2 ** 20) return `${(bytes / 2 ** 20).toFixed(1)} MiB`;
  return `${(bytes / 2 ** 10).toFixed(0)} KiB`;
}

function git(...args) {
  try {
    return execFileSync('git', args, { cwd: root, encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}
