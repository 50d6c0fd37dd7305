// One way a program can end with engines alive, run as its own Node process by test/golden/teardown.test.ts:
//   node teardown-child.mjs <scenario> <checkpoint dir> [device]
// It prints "ending" on stderr at the moment it ends (or triggers the end), so that the test times the exit from
// there. Nothing here calls dispose(): that is the point.
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { Engine } from '../../dist/index.js';

const [scenario, dir, device = 'cpu'] = isMainThread ? process.argv.slice(2) : workerData;
const opts = { device, threads: 1 };
const ending = () => process.stderr.write('ending\n');
const prompt = { tokens: [1, 2, 3] };
const long = { maxTokens: 100000, stopTokenIds: [] }; // capped by the context; far longer than the test waits

// A generation that ends the program from its first token, with how().
async function midGeneration(how) {
  const engine = await Engine.load(dir, opts);
  const gen = engine.generate(prompt, { ...long, maxTokens: engine.modelInfo.maxContext - 3 });
  for await (const _chunk of gen) {
    if (how !== tellParent) ending();
    how();
  }
}

// In a worker: asks the main thread (once) to terminate this worker now.
let told = false;
function tellParent() {
  if (told) return;
  told = true;
  parentPort.postMessage('terminate me');
}

function inWorker(name, then) {
  const w = new Worker(new URL(import.meta.url), { workerData: [name, dir, device] });
  w.on('error', (e) => {
    process.stderr.write(`worker error: ${e.message}\n`);
    process.exitCode = 90;
  });
  w.on('exit', (code) => {
    process.stderr.write(`worker exit ${code}\n`);
    if (!process.exitCode) process.exitCode = code;
  });
  if (then) then(w);
}

const scenarios = {
  // The script simply ends.
  'after-load': async () => {
    await Engine.load(dir, opts);
    ending();
  },
  'after-generate': async () => {
    const engine = await Engine.load(dir, opts);
    await engine.generate(prompt, { maxTokens: 4 });
    ending();
  },
  'two-engines': async () => {
    const [a, b] = await Promise.all([Engine.load(dir, opts), Engine.load(dir, opts)]);
    await Promise.all([a.generate(prompt, { maxTokens: 4 }), b.generate(prompt, { maxTokens: 4 })]);
    ending();
  },
  // A stream read in part, then forgotten: its request pauses for the reader that stopped (backpressure), and a
  // request that waits on JS alone must not keep the process alive.
  'half-read-stream': async () => {
    const engine = await Engine.load(dir, opts);
    const gen = engine.generate(prompt, { ...long, maxTokens: engine.modelInfo.maxContext - 3, highWaterMark: 16 });
    await gen[Symbol.asyncIterator]().next();
    ending();
  },
  // process.exit() and throws, at each stage.
  'exit-after-load': async () => {
    await Engine.load(dir, opts);
    ending();
    process.exit(7);
  },
  'exit-mid-generation': () => midGeneration(() => process.exit(0)),
  'exit-mid-generation-two-engines': async () => {
    const other = await Engine.load(dir, opts);
    other.generate(prompt, { ...long, maxTokens: other.modelInfo.maxContext - 3 }).catch(() => {});
    await midGeneration(() => process.exit(0));
  },
  'exit-mid-load': async () => {
    await Engine.load(dir, {
      ...opts,
      onProgress: () => {
        ending();
        process.exit(0);
      },
    });
  },
  'throw-after-load': async () => {
    await Engine.load(dir, opts);
    setImmediate(() => {
      ending();
      throw new Error('thrown on purpose');
    });
  },
  'throw-mid-generation': () =>
    midGeneration(() =>
      setImmediate(() => {
        throw new Error('thrown on purpose');
      }),
    ),
  // From a worker thread: its natural end, its process.exit(), and the main thread terminating it.
  'worker-after-generate': async () => inWorker('after-generate'),
  'worker-exit-mid-generation': async () => inWorker('worker-body-exit-mid-generation'),
  'worker-body-exit-mid-generation': () => midGeneration(() => process.exit(3)),
  'worker-terminate-mid-generation': async () =>
    inWorker('worker-body-generate-forever', (w) => w.on('message', () => (ending(), w.terminate()))),
  'worker-body-generate-forever': () => {
    // As below: the generation may end (it is capped by the context) before the terminate arrives; the worker then
    // stays alive, so that only the terminate ends it.
    setInterval(() => {}, 1 << 30);
    return midGeneration(tellParent);
  },
  'worker-terminate-mid-load': async () =>
    inWorker('worker-body-load-forever', (w) => w.on('message', () => (ending(), w.terminate()))),
  'worker-body-load-forever': async () => {
    // The parent terminates this worker at the load's first progress event. A small checkpoint may finish loading
    // before the terminate arrives: the worker then stays alive, so that only the terminate ends it (exit 1) and
    // never the worker's own end (exit 0: seen once at 8decf1e's CI).
    setInterval(() => {}, 1 << 30);
    await Engine.load(dir, { ...opts, onProgress: tellParent });
  },
};

const run = scenarios[scenario];
if (!run) {
  process.stderr.write(`unknown scenario ${scenario}\n`);
  process.exit(64);
}
await run();
