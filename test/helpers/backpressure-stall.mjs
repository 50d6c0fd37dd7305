// Backpressure from a request's first step, and dispose()'s drain, on any device through the public API: what
// test/golden/backpressure.test.ts checks on the CPU, for the GPU machine (which has no vitest). Exit 1 on a miss.
//   node test/helpers/backpressure-stall.mjs <checkpoint dir> [cpu|cuda]
import { Engine } from '../../dist/index.js';
const [dir, device = 'cpu'] = process.argv.slice(2);
const stall = (ms) => { for (const end = performance.now() + ms; performance.now() < end; ); };
const until = async (f) => { for (let i = 0; i < 20000 && !f(); ++i) await new Promise((r) => setTimeout(r, 1)); };
const engine = await Engine.load(dir, { device });
const noEos = { stopTokenIds: [] };
let bad = 0;
const check = (what, ok) => { console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`); if (!ok) ++bad; };
for (let r = 0; r < 5; ++r) {
  const gen = engine.generate({ tokens: [1, 2, 3] }, { maxTokens: 500, highWaterMark: 8, ...noEos });
  stall(100);
  gen[Symbol.asyncIterator]();
  await until(() => engine.stats().requestsPaused === 1);
  await new Promise((res) => setTimeout(res, 20));
  gen.abort();
  const n = (await gen).tokenIds.length;
  check(`stalled 100 ms before its loop: paused at ${n} of a mark of 8`, n === 8);
}
const awaited = await engine.generate({ tokens: [1, 2, 3] }, { maxTokens: 300, highWaterMark: 8, ...noEos });
check(`an awaited generation is never paused: ${awaited.tokenIds.length} of 300`, awaited.tokenIds.length === 300);
const other = await Engine.load(dir, { device });
const gens = [0, 1, 2].map(() => other.generate({ tokens: [1, 2, 3] }, { maxTokens: 900, ...noEos }));
const held = other.generate({ tokens: [4, 5, 6] }, { maxTokens: 500, highWaterMark: 8, ...noEos });
held[Symbol.asyncIterator]();
await until(() => other.stats().requestsPaused === 1);
await other.dispose();
const results = await Promise.all([...gens, held]);
check(`dispose mid-run: ${results.map((r) => `${r.finishReason}/${r.tokenIds.length}/${r.usage.completionTokens}`).join(' ')}`,
  results.every((r) => r.tokenIds.length === r.usage.completionTokens) && results[3].tokenIds.length === 8);
await engine.dispose();
console.log(bad ? `race: ${bad} failed` : 'race: all passed');
process.exitCode = bad ? 1 : 0;
