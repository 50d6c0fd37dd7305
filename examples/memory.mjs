// Memory: what a model would take before loading it (Engine.estimate), what the engine holds once loaded
// (engine.memory()), and the peaks while it generates (engine.trackMemory()).
//
//   node examples/memory.mjs ./Qwen3-0.6B        (no folder: the packaged default model)
import { Engine } from 'vtengine';

const where = process.argv[2] ? [process.argv[2]] : [];
const options = { maxContext: 1024 };
const MiB = (bytes) => (bytes === null ? 'n/a' : `${(bytes / 2 ** 20).toFixed(1)} MiB`);

// 1. Before loading: bytes by tier, from config.json and the safetensors headers.
const est = await Engine.estimate(...where, options);
const { hostHeapBytes, pageCacheBytes, deviceBytes } = est.totals;
console.log(`estimate: host heap ${MiB(hostHeapBytes)}, page cache ${MiB(pageCacheBytes)}, device ${MiB(deviceBytes)}, fits: ${est.fits}`);
if (!est.fits) {
  console.log(est.suggestion); // names the option to change, e.g. "lower maxContext to 8192 or less"
  process.exit(1);
}

const engine = await Engine.load(...where, options);
try {
  // 2. While generating: peaks of this process, sampled every 50 ms.
  const tracker = engine.trackMemory({ intervalMs: 50 });
  await engine.generate({ tokens: [1, 2, 3, 4] }, { maxTokens: 64, stopTokenIds: [] });
  const peaks = tracker.stop();
  console.log(`peaks: PSS ${MiB(peaks.pssBytes)}, RSS ${MiB(peaks.rssBytes)}, MemAvailable drop ${MiB(peaks.availableDropBytes)} (${peaks.samples} samples)`);

  // 3. Now: the engine's own accounting, and what the kernel says about the process.
  const { engine: held, process: proc } = await engine.memory();
  for (const c of held.components) console.log(`  ${`${c.name} (${c.tier})`.padEnd(20)} ${MiB(c.bytes)}`);
  console.log(`engine total ${MiB(held.totalBytes)}; KV blocks ${held.kvCache.blocksUsed}/${held.kvCache.blocksTotal}`);
  console.log(`process: PSS ${MiB(proc?.pssBytes ?? null)}, RSS ${MiB(proc?.rssBytes ?? null)}`);
} finally {
  await engine.dispose();
}
