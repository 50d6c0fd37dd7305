#!/usr/bin/env node
// Turns the JSON of scripts/gpu-bench.sh (bench/cuda-engine.cpp's engine.json and engine-graphs-off.json,
// bench/cuda_hf.py's hf.json; one or both model shapes) into bench/RESULTS.md entries: a heading with date, machine
// and commit, the command, then one row per workload with our median and runs, the peer's, and the ratio.
// Printed to stdout, to be pasted by hand. Node 20, no dependencies.
//
//   node bench/cuda-report.mjs OUT/engine.json OUT/engine-graphs-off.json OUT/hf.json [more files...]
import { readFileSync } from 'node:fs';

const files = process.argv.slice(2);
if (!files.length) {
  console.error('usage: node bench/cuda-report.mjs engine.json [engine-graphs-off.json] [hf.json] ...');
  process.exit(2);
}

// Group by shape: { shape: { engine, control, hf } }.
const groups = new Map();
for (const f of files) {
  const j = JSON.parse(readFileSync(f, 'utf8'));
  const shape = j.meta?.VT_BENCH_SHAPE ?? j.model_dir ?? '?';
  const g = groups.get(shape) ?? {};
  if (j.tool === 'bench_cuda_engine') g[j.graphs === false ? 'control' : 'engine'] = j;
  else if (j.tool === 'cuda_hf') g.hf = j;
  else { console.error(`${f}: not a gpu-bench JSON (tool ${j.tool})`); process.exit(1); }
  groups.set(shape, g);
}

const num = (x, d = 1) => x.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d });
const digits = (x) => (x >= 1000 ? 0 : x >= 100 ? 1 : 2);
const get = (o, ...keys) => keys.reduce((a, k) => (a == null ? undefined : a[k]), o);

// "**1,234.5 tok/s** (1,230.1, 1,234.5, 1,240.0)": median, then every run.
function cell(s, unit, bold = false) {
  if (!s?.runs?.length) return '—';
  const m = `${num(s.median, digits(s.median))} ${unit}`;
  const runs = s.runs.length > 1 ? ` (${s.runs.map((x) => num(x, digits(s.median))).join(', ')})` : '';
  return (bold ? `**${m}**` : m) + runs;
}

// Speed-up of ours over the peer: ours/peer for rates, peer/ours for times.
function speedup(ours, peer, timeLike) {
  if (!ours?.median || !peer?.median) return null;
  return timeLike ? peer.median / ours.median : ours.median / peer.median;
}

function shapeName(s) {
  return { 'qwen3-0.6b': 'Qwen3-0.6B', 'qwen3-8b': 'Qwen3-8B' }[s] ?? s;
}

for (const [shape, { engine: e = {}, control: c = {}, hf: h = {} }] of groups) {
  const meta = e.meta ?? h.meta ?? {};
  const date = (e.date ?? h.date ?? '????-??-??').slice(0, 10);
  const gpu = meta.VT_BENCH_GPU || h.gpu || 'GPU ?';
  const commit = meta.VT_BENCH_COMMIT ?? '?';
  const runs = e.workload?.runs ?? h.workload?.runs ?? '?';
  const limit = h.bandwidth_limit_tok_s;
  const out = [];
  out.push(`### ${date} — ${gpu}; commit ${commit}; ${shapeName(shape)} shape`, '');
  out.push(
    `Command: \`scripts/gpu-check.sh prepare --arch sm_90a\` here, then on the GPU machine \`bash scripts/gpu-bench.sh ${shape}\`` +
      ` (random bf16 weights from \`scripts/random_checkpoint.py\`` +
      (e.model ? `, ${num(e.model.weight_bytes / 1e9, 2)} GB` : '') +
      `). vtengine: ${e.dtype ?? '?'} activations, CUDA graphs on` +
      (e.params ? `, max_seqs ${e.params.max_seqs}, max_batch_tokens ${e.params.max_batch_tokens}` : '') +
      `. Peer in the same run: transformers ${h.transformers ?? '?'}, torch ${h.torch ?? '?'}, bf16, sdpa attention.` +
      ` Median of ${runs} runs (the runs in parentheses); 128-token prompts (ids < 1000, the same on both sides), 256 new` +
      ` tokens, greedy. Decode tok/s is steady state: ours counts the tokens after every request's first token over the` +
      ` time from the last first token to the end; HF's is B × 255 / (generate(256) − generate(1)).` +
      (limit
        ? ` Bandwidth limit at batch 1: ${num(h.copy_gbps, 0)} GB/s (1 GiB device copy, read + write) / ` +
          `${num(h.weight_bytes_per_token / 1e9, 3)} GB read per decode step = ${num(limit, 1)} tok/s.`
        : ''),
    '',
  );
  out.push('| metric | vtengine | HF eager | HF static cache + torch.compile | ours vs peer (× faster) |');
  out.push('| --- | --- | --- | --- | --- |');
  const pct = (s) => (limit && s?.median ? ` = ${Math.round((100 * s.median) / limit)}% of the limit` : '');
  const ratios = (ours, eager, compiled, timeLike) => {
    const parts = [];
    const re = speedup(ours, eager, timeLike);
    const rc = speedup(ours, compiled, timeLike);
    if (re != null) parts.push(`**${num(re, 2)}×** eager`);
    if (rc != null) parts.push(`**${num(rc, 2)}×** compiled`);
    return parts.join(', ') || '—';
  };
  const batches = [...new Set([...Object.keys(e.decode ?? {}), ...Object.keys(get(h, 'decode', 'eager') ?? {})])]
    .map(Number).sort((a, b) => a - b);
  for (const b of batches) {
    const ours = get(e, 'decode', String(b), 'tok_s');
    const eager = get(h, 'decode', 'eager', String(b), 'tok_s');
    const comp = get(h, 'decode', 'compiled', String(b));
    const compCell = comp?.tok_s
      ? cell(comp.tok_s, 'tok/s') + (comp.compile_s != null ? ` (compile ${num(comp.compile_s, 0)} s)` : '') + (b === 1 ? pct(comp.tok_s) : '')
      : '—';
    out.push(`| decode, batch ${b}${b > 1 ? ' (aggregate)' : ''} | ${cell(ours, 'tok/s', true)}${b === 1 ? pct(ours) : ''} | ` +
      `${cell(eager, 'tok/s')} | ${compCell} | ${ratios(ours, eager, comp?.tok_s, false)} |`);
    if (b === 1) {
      const ctl = get(c, 'decode', '1', 'tok_s');
      if (ctl) out.push(`| decode, batch 1, CUDA graphs off (null control) | ${cell(ctl, 'tok/s')} | — | — | — |`);
      const itl = get(e, 'decode', '1', 'itl_ms');
      if (itl) out.push(`| inter-token interval, batch 1 | ${cell(itl, 'ms')} | — | — | — |`);
    }
  }
  const prefills = [...new Set([...Object.keys(e.prefill ?? {}), ...Object.keys(h.prefill ?? {})])].map(Number).sort((a, b) => a - b);
  for (const p of prefills) {
    const ours = get(e, 'prefill', String(p), 'tok_s');
    const peer = get(h, 'prefill', String(p), 'tok_s');
    out.push(`| prefill, ${p} tokens | ${cell(ours, 'tok/s', true)} | ${cell(peer, 'tok/s')} (one forward) | — | ${ratios(ours, peer, null, false)} |`);
  }
  for (const p of prefills) {
    const ours = get(e, 'prefill', String(p), 'ttft_ms');
    const peer = get(h, 'prefill', String(p), 'ttft_ms');
    out.push(`| time to first token, ${p}-token prompt | ${cell(ours, 'ms', true)} | ${cell(peer, 'ms')} (generate, 1 token) | — | ${ratios(ours, peer, null, true)} |`);
  }
  const lo = get(e, 'load', 'to_first_token_ms');
  const lp = get(h, 'load', 'to_first_token_ms');
  if (lo || lp)
    out.push(`| load → first token (page cache warm) | ${cell(lo, 'ms', true)} | ${cell(lp, 'ms')} (from_pretrained + generate) | — | ${ratios(lo, lp, null, true)} |`);
  const mem = e.memory;
  if (mem) {
    const mib = (x) => `${num(x / 1048576, 0)} MiB`;
    out.push('', `Our GPU memory after load: weights ${mib(mem.weight_device_bytes)}, KV cache ${mib(mem.kv_cache_bytes)}, ` +
      `workspaces ${mib(mem.workspace_bytes)}, ${mem.graphs_count} CUDA graphs` +
      (mem.graphs_bytes > 0 ? ` (${mib(mem.graphs_bytes)})` : '') +
      (mem.host_pinned_bytes > 0 ? `; pinned host memory ${num(mem.host_pinned_bytes / 1048576, 1)} MiB` : '') + '.');
  }
  const notes = [...(h.notes ?? []).map((n) => `HF: ${n}`), ...[e, c, h].flatMap((j) => (j.errors ?? []).map((x) => `error (${j.tool}${j.graphs === false ? ', graphs off' : ''}): ${x}`))];
  if (notes.length) out.push('', ...notes.map((n) => `- ${n}`));
  console.log(out.join('\n') + '\n');
}
