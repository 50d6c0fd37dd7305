// Issue 22's measure of the OpenAI-compatible server: N concurrent streaming clients over HTTP against N concurrent
// streams through the in-process Node API, on one engine loaded once, in the same run. Per N: total tok/s, time to
// first token (TTFT) and inter-token latency (ITL) percentiles for both, and the HTTP / in-process tok/s ratio.
//
//   npm run build:all && node bench/serve.mjs --model DIR [--device cuda] [--batches 8,32,128] [--runs 3]
//                                             [--new-tokens 256] [--max-context N] [--json FILE] [--defaults]
// --defaults: the engine loaded with no options but the device, as `vtengine serve MODEL` loads it.
// VT_BENCH_PACKAGE=DIR: drive an installed package instead of this checkout (bench/package.mjs).
//
// The workload is bench/node-api.mjs's: N prompts of 128 splitmix64 ids below 1000, greedy (temperature 0), 256 new
// tokens, the engine configured as there (prefix caching off: the warm-up repeats the prompts). The server takes a
// prompt as an array of token ids (lib/server/completions.ts), so both sides send the same ids. Both read text, as a
// server must (its events carry text): the Qwen3 tokenizer (test/fixtures/tokenizers/qwen3) is copied into a
// checkpoint folder that has none, as node-api.mjs --text does.
//
// End of sequence is off on both sides, as in node-api.mjs: stopTokenIds: [] in-process, vLLM's ignore_eos over HTTP
// (the server maps it to the same option), so every request runs its 256 tokens; the figures count the completion
// tokens actually received (usage).
//
// In-process: N `engine.generate()` streams read with `for await`. HTTP: the server (`vtengine/server`) on the same
// engine at 127.0.0.1, port 0, and N streaming `POST /v1/completions` (stream_options.include_usage) sent at once
// from a child process (bench/serve-clients.mjs says why a process). Figures as bench/serve-stats.mjs defines them,
// the same for both sides. Per N: one warm-up of each side (16 tokens), then --runs runs that alternate in-process
// and HTTP, so that drift in the machine (clocks, heat) reaches both alike; medians over the runs.
import { fork } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { createServer, Engine, servedBy } from './package.mjs';
import { medianOfRuns, summarize } from './serve-stats.mjs';
import { ensureTokenizer, kPrompt, loadDecodeEngine, promptIds } from './workload.mjs';

const { values: opt } = parseArgs({
  options: {
    model: { type: 'string' },
    device: { type: 'string', default: 'cuda' },
    batches: { type: 'string', default: '8,32,128' },
    runs: { type: 'string', default: '3' },
    'new-tokens': { type: 'string', default: '256' },
    'max-context': { type: 'string' }, // (a smaller model's limit; node-api.mjs's default is 8448)
    defaults: { type: 'boolean', default: false },  // the engine with default load options (device only)
    json: { type: 'string' },
  },
});
if (!opt.model) {
  console.error('usage: node bench/serve.mjs --model DIR [--device cuda] [--batches 8,32,128] [--runs 3] [--new-tokens 256]');
  process.exit(64);
}
const batches = opt.batches.split(',').map(Number);
const runs = Math.max(1, Number(opt.runs));
const kNew = Number(opt['new-tokens']); // (bench/node-api.mjs's: its default)

ensureTokenizer(opt.model);
const engine = await loadDecodeEngine(Engine, opt.model, {
  device: opt.device,
  batches,
  maxContext: opt['max-context'] ? Number(opt['max-context']) : undefined,
  defaults: opt.defaults,
  newTokens: kNew,
});
console.log(servedBy());

const prompts = Array.from({ length: Math.max(...batches) }, (_, r) => promptIds(r, kPrompt, engine.modelInfo.vocabSize));

// In-process: n streams at once, each one's text chunks timed as it reads them.
async function inProcess(n, maxTokens) {
  const t0 = performance.now();
  return Promise.all(prompts.slice(0, n).map(async (tokens) => {
    const sent = performance.now() - t0;
    const gen = engine.generate({ tokens }, { maxTokens, temperature: 0, stopTokenIds: [] });
    const events = [];
    for await (const chunk of gen) if (chunk.text) events.push(performance.now() - t0);
    const end = performance.now() - t0;
    return { sent, events, end, tokens: (await gen).usage.completionTokens };
  }));
}

// HTTP: the same requests from the child process; this process only serves meanwhile.
const server = createServer(engine, { port: 0 });
const { url } = await server.listen();
const clients = fork(new URL('./serve-clients.mjs', import.meta.url), { execArgv: [] });
function overHttp(n, maxTokens) {
  const body = { max_tokens: maxTokens, temperature: 0, stream: true, stream_options: { include_usage: true }, ignore_eos: true };
  return new Promise((resolve, reject) => {
    const exited = (code) => reject(new Error(`the HTTP clients' process exited (${code}) before answering`));
    clients.once('exit', exited);
    clients.once('message', (m) => {
      clients.off('exit', exited);
      if (m.error) reject(new Error(`HTTP clients: ${m.error}`));
      else resolve(m.records);
    });
    clients.send({ url, model: server.modelName, body, prompts, n });
  });
}

const rows = [];
try {
  for (const n of batches) {
    await inProcess(n, 16); // warm-up (graph buckets, caches; the server's code paths and the clients' JIT)
    await overHttp(n, 16);
    const local = [], http = [];
    for (let k = 0; k < runs; k++) {
      local.push(summarize(await inProcess(n, kNew)));
      http.push(summarize(await overHttp(n, kNew)));
    }
    const row = { batch: n, inProcess: medianOfRuns(local), http: medianOfRuns(http) };
    row.ratio = row.http.tokS / row.inProcess.tokS;
    row.steadyRatio = row.http.steadyTokS && row.inProcess.steadyTokS ? row.http.steadyTokS / row.inProcess.steadyTokS : null;
    rows.push(row);
    console.error(`N=${n}: in-process ${row.inProcess.tokS.toFixed(1)} tok/s, HTTP ${row.http.tokS.toFixed(1)} tok/s`);
  }
} finally {
  if (clients.connected) clients.disconnect();
  await server.close();
  await engine.dispose();
}

const f = (x, d = 1) => (x === null || x === undefined ? '–' : x.toFixed(d));
const p3 = ({ p50, p90, p99 }) => `${f(p50, 2)} / ${f(p90, 2)} / ${f(p99, 2)}`;
console.log(`\n${opt.model} (${opt.device}): ${kPrompt}-token prompts, ${kNew} new tokens, greedy, EOS ignored; medians of ${runs} run(s)\n`);
console.log('| N | in-process tok/s | HTTP tok/s | HTTP / in-process | steady in-process | steady HTTP | TTFT ms in-process p50 / p90 / p99 | TTFT ms HTTP | ITL ms in-process p50 / p90 / p99 | ITL ms HTTP | tokens in-process / HTTP |');
console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
for (const { batch, inProcess: a, http: b, ratio } of rows) {
  console.log(`| ${batch} | ${f(a.tokS)} | ${f(b.tokS)} | ${f(ratio, 3)} | ${f(a.steadyTokS)} | ${f(b.steadyTokS)} | ${p3(a.ttftMs)} | ${p3(b.ttftMs)} | ` +
    `${p3(a.itlMs)} | ${p3(b.itlMs)} | ${a.completionTokens} / ${b.completionTokens} |`);
}
if (opt.json) {
  writeFileSync(opt.json, JSON.stringify({ tool: 'bench/serve.mjs', date: new Date().toISOString(), node: process.version,
    model: opt.model, device: opt.device, workload: { prompt: kPrompt, newTokens: kNew, runs, ignoreEos: true, prompts: 'token ids' }, rows }, null, 2));
}
