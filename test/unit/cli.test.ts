// The `vtengine` command, run as a user runs it: `node dist/cli/main.js` (build with `npm run build:ts` first),
// against the reference fixtures. Covers inspect (numbers checked against the safetensors headers read here and
// against the engine's own modelInfo), run --tokens (the transformers greedy ids), usage and checkpoint errors,
// Ctrl-C, and — once the text layer is in — run with a text prompt and chat.
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, readSync, readdirSync, rmSync, statSync, truncateSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { loadOptionsOf } from '../../lib/cli/options.js';
import { Engine, EngineError } from '../../lib/index.js';
import { copyCheckpoint, removeTempDirs, tempDir } from '../helpers/checkpoints.js';
import { decisiveSteps, fixtureDir, listFixtures, readReference } from '../helpers/fixtures.js';
// @ts-expect-error -- a plain .mjs script shared with the benchmarks
import { writeRandomCheckpoint } from '../../scripts/random-checkpoint.mjs';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MAIN = join(ROOT, 'dist/cli/main.js');
const SHARDED = fixtureDir('qwen3-bf16-sharded');
const TOK = fixtureDir('qwen3-tok');
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

type Watch = (text: string, child: ChildProcess) => void;

function cli(
  args: string[],
  options: { input?: string; onStdout?: Watch; onStderr?: Watch; npx?: boolean } = {},
): Promise<Ran> {
  return new Promise((resolve, reject) => {
    // npx: as the README runs it in this repository (`npx vtengine ...`, the package's own bin, never installed)
    const [command, argv] = options.npx ? ['npx', ['--no', '--', 'vtengine', ...args]] : [process.execPath, [MAIN, ...args]];
    const child = spawn(command, argv, { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
      options.onStdout?.(stdout, child);
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
      options.onStderr?.(stderr, child);
    });
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
    child.stdin.end(options.input ?? '');
  });
}

/** An EngineError as the CLI prints it: one line, no stack trace. */
function expectErrorLine(ran: Ran, code: string): void {
  expect(ran.code, ran.stderr).toBe(1);
  const lines = ran.stderr.trimEnd().split('\n');
  expect(lines.at(-1)).toMatch(new RegExp(`^error \\[${code}\\]: \\S`));
  expect(ran.stderr).not.toMatch(/^\s+at /m);
}

/** Parameters and tensor bytes of a checkpoint, from its safetensors headers, independently of the CLI. */
function countFromHeaders(dir: string): { parameters: number; bytes: number; files: number; fileBytes: number } {
  let parameters = 0;
  let bytes = 0;
  let fileBytes = 0;
  const files = readdirSync(dir).filter((f) => f.endsWith('.safetensors'));
  for (const f of files) {
    const fd = openSync(join(dir, f), 'r');
    const len = Buffer.alloc(8);
    readSync(fd, len, 0, 8, 0);
    const header = Buffer.alloc(Number(len.readBigUInt64LE(0)));
    readSync(fd, header, 0, header.length, 8);
    closeSync(fd);
    fileBytes += statSync(join(dir, f)).size;
    for (const [name, t] of Object.entries(JSON.parse(header.toString()) as Record<string, { shape: number[]; data_offsets: number[] }>)) {
      if (name === '__metadata__') continue;
      parameters += t.shape.reduce((a, b) => a * b, 1);
      bytes += t.data_offsets[1] - t.data_offsets[0];
    }
  }
  return { parameters, bytes, files: files.length, fileBytes };
}

async function loadError(dir: string): Promise<string> {
  try {
    const engine = await Engine.load(dir, { device: 'cpu', threads: 1 });
    await engine.dispose();
    return 'loaded';
  } catch (err) {
    return err instanceof EngineError ? err.code : String(err);
  }
}

const textLayer = existsSync(TOK) && typeof (Engine.prototype as { tokenize?: unknown }).tokenize === 'function';
const TEXT_PENDING = existsSync(TOK)
  ? '(skipped: the text layer has not landed, Engine has no tokenize())'
  : '(skipped: test/fixtures/qwen3-tok does not exist yet)';

beforeAll(() => {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run "npm run build:ts" before these tests`);
});
afterAll(() => removeTempDirs());

describe('vtengine inspect', () => {
  it('describes the sharded fixture with the numbers of its safetensors headers and of the engine', async () => {
    const ran = await cli(['inspect', SHARDED, '--json']);
    expect(ran.code, ran.stderr).toBe(0);
    const s = JSON.parse(ran.stdout);
    const independent = countFromHeaders(SHARDED);
    expect(s.parameters).toBe(independent.parameters);
    expect(s.tensorBytes).toBe(independent.bytes);
    expect(s.files).toBe(3);
    expect(s.fileBytes).toBe(independent.fileBytes);
    expect(s.dtypes).toEqual({ BF16: { tensors: 36, parameters: independent.parameters, bytes: independent.bytes } });

    const engine = await Engine.load(SHARDED, { device: 'cpu', threads: 1 });
    const info = engine.modelInfo;
    await engine.dispose();
    expect(s.parameters).toBe(info.nParams);
    expect(s.tensorBytes).toBe(info.weightBytes);
    expect(s).toMatchObject({
      architecture: info.architecture,
      modelType: 'qwen3',
      contextLength: info.maxPositionEmbeddings,
      layers: info.nLayers,
      heads: info.nHeads,
      kvHeads: info.nKvHeads,
      headDim: info.headDim,
      hiddenSize: info.hiddenSize,
      vocabSize: info.vocabSize,
      tiedEmbeddings: false,
      rope: { type: 'yarn', theta: 1e6, factor: 4 },
      tokenizer: { present: false, chatTemplate: false },
    });
    // The memory estimate: the weights the headers hold, and a KV cache of 2 (K, V) × layers × kv heads × head_dim
    // fp32 values per token, computed here from the config.
    expect(s.estimate.weights.totalBytes).toBe(independent.bytes);
    expect(s.estimate.kvCache.bytesPerToken).toBe(2 * info.nLayers * info.nKvHeads * info.headDim * 4);
    expect(s.estimate.kvCache.bytes).toBe(s.estimate.kvCache.tokens * s.estimate.kvCache.bytesPerToken);
    expect(s.estimate.fits).toBe(true);
  });

  it('prints a readable summary', async () => {
    const ran = await cli(['inspect', SHARDED]);
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toContain('Qwen3ForCausalLM');
    expect(ran.stdout).toMatch(/parameters\s+215,680 \(215\.7K\)/);
    expect(ran.stdout).toMatch(/BF16 431,360 bytes/);
    expect(ran.stdout).toMatch(/3 safetensors files/);
    expect(ran.stdout).toMatch(/context length\s+1,024/);
    expect(ran.stdout).toMatch(/heads\s+4 \(kv heads 2\), head_dim 32/);
    expect(ran.stdout).toMatch(/rope\s+yarn, factor 4/);
    expect(ran.stdout).toMatch(/tokenizer\s+no/);
    expect(ran.stdout).toMatch(/memory estimate\s+on the cpu, maxContext 1,024/);
    expect(ran.stdout).toMatch(/KV cache\s+6\.0 MiB for 4,096 tokens \(1,536 B\/token\)/);
  });

  it.each(listFixtures())('agrees with the engine on %s', async (name) => {
    const ran = await cli(['inspect', fixtureDir(name), '--json']);
    expect(ran.code, ran.stderr).toBe(0);
    const s = JSON.parse(ran.stdout);
    const engine = await Engine.load(fixtureDir(name), { device: 'cpu', threads: 1 });
    const info = engine.modelInfo;
    await engine.dispose();
    expect([s.parameters, s.tensorBytes, s.vocabSize, s.layers, s.kvHeads]).toEqual([
      info.nParams,
      info.weightBytes,
      info.vocabSize,
      info.nLayers,
      info.nKvHeads,
    ]);
    expect(s.tokenizer.present).toBe(existsSync(join(fixtureDir(name), 'tokenizer.json')));
    if (name === 'llama-f32-linear') expect(s.tiedEmbeddings).toBe(true);
  });

  it('reads headers only: a 64 GiB (sparse) checkpoint is inspected at once', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'config.json'), readFileSync(join(SHARDED, 'config.json')));
    const size = 2 ** 36;
    const header = Buffer.from(
      JSON.stringify({ 'lm_head.weight': { dtype: 'BF16', shape: [2 ** 20, 2 ** 15], data_offsets: [0, size] } }),
    );
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(header.length));
    const file = join(dir, 'model.safetensors');
    const fd = openSync(file, 'w');
    writeSync(fd, Buffer.concat([len, header]));
    closeSync(fd);
    truncateSync(file, 8 + header.length + size);
    const started = performance.now();
    const ran = await cli(['inspect', dir, '--json']);
    expect(ran.code, ran.stderr).toBe(0);
    expect(performance.now() - started).toBeLessThan(10_000);
    const s = JSON.parse(ran.stdout);
    expect(s.parameters).toBe(2 ** 35);
    expect(s.tensorBytes).toBe(size);
    rmSync(dir, { recursive: true, force: true });
  });

  describe('damaged checkpoints fail with the code Engine.load gives', () => {
    const cases: Array<[string, string, (dir: string) => string]> = [
      ['a missing folder', 'ERR_MODEL_NOT_FOUND', (dir) => join(dir, 'nope')],
      ['no config.json', 'ERR_MISSING_FILE', (dir) => (rmSync(join(dir, 'config.json')), dir)],
      ['a missing shard', 'ERR_MISSING_FILE', (dir) => (rmSync(join(dir, 'model-00002-of-00003.safetensors')), dir)],
      [
        'a truncated shard',
        'ERR_TRUNCATED_CHECKPOINT',
        (dir) => {
          const f = join(dir, 'model-00002-of-00003.safetensors');
          truncateSync(f, statSync(f).size - 100);
          return dir;
        },
      ],
      [
        'a corrupt header length',
        'ERR_BAD_CHECKPOINT',
        (dir) => {
          const fd = openSync(join(dir, 'model-00001-of-00003.safetensors'), 'r+');
          writeSync(fd, Buffer.alloc(8, 0xff), 0, 8, 0);
          closeSync(fd);
          return dir;
        },
      ],
      ['config.json that is not JSON', 'ERR_BAD_CHECKPOINT', (dir) => (writeFileSync(join(dir, 'config.json'), '{ oops'), dir)],
      [
        'a shard whose tensors overlap by 2 bytes',
        'ERR_BAD_CHECKPOINT',
        (dir) => {
          const f = join(dir, 'model-00002-of-00003.safetensors');
          const bytes = readFileSync(f);
          const n = Number(bytes.readBigUInt64LE(0));
          const header = JSON.parse(bytes.subarray(8, 8 + n).toString('utf8')) as Record<string, { data_offsets: number[] }>;
          const byOffset = Object.entries(header)
            .filter(([name]) => name !== '__metadata__')
            .map(([, t]) => t)
            .sort((a, b) => a.data_offsets[0] - b.data_offsets[0]);
          byOffset[1].data_offsets = byOffset[1].data_offsets.map((o) => o - 2);
          const text = JSON.stringify(header).padEnd(n, ' '); // same length: the data stays where it was
          expect(Buffer.byteLength(text)).toBe(n);
          writeFileSync(f, Buffer.concat([bytes.subarray(0, 8), Buffer.from(text), bytes.subarray(8 + n)]));
          return dir;
        },
      ],
      [
        'a shard with a dtype the format does not define',
        'ERR_UNSUPPORTED_DTYPE',
        (dir) => {
          const f = join(dir, 'model-00003-of-00003.safetensors');
          const bytes = readFileSync(f);
          const n = Number(bytes.readBigUInt64LE(0));
          const text = bytes.subarray(8, 8 + n).toString('utf8').replace('"dtype":"BF16"', '"dtype":"Q4KM"');
          writeFileSync(f, Buffer.concat([bytes.subarray(0, 8), Buffer.from(text), bytes.subarray(8 + n)]));
          return dir;
        },
      ],
    ];
    it.each(cases)('%s → %s', async (_what, code, damage) => {
      const dir = damage(copyCheckpoint(SHARDED));
      expect(await loadError(dir)).toBe(code);
      expectErrorLine(await cli(['inspect', dir]), code);
    });
  });
});

describe('vtengine run --tokens', () => {
  const ref = readReference('qwen3-bf16-sharded');

  it.each(ref.prompts.map((p, i) => [i, p] as const))('--json gives the transformers greedy ids (prompt %i)', async (_i, prompt) => {
    const ran = await cli(['run', '--model', SHARDED, '--json', '--tokens', prompt.ids.join(','), '--max-tokens', '24', '-q']);
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stderr).toBe('');
    const out = JSON.parse(ran.stdout);
    const n = decisiveSteps(prompt, 1e-3);
    expect(out.tokenIds.slice(0, n)).toEqual(prompt.greedy.slice(0, n));
    expect(out.finishReason).toBe('length');
    expect(out.usage).toEqual({ promptTokens: prompt.ids.length, completionTokens: 24 });
    expect(out.text).toBeNull();
    expect(Object.keys(out.timings).sort()).toEqual(['decodeMs', 'prefillMs', 'queuedMs', 'tokensPerSecond', 'totalMs']);
  });

  it('streams the ids to stdout and reports the load and the run on stderr', async () => {
    const prompt = readReference('llama-bf16').prompts[1];
    const ran = await cli(['run', '-m', fixtureDir('llama-bf16'), '--tokens', prompt.ids.join(', '), '-n', '24']);
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toBe(`${prompt.greedy.join(' ')}\n`);
    expect(ran.stderr).toMatch(/^loading .*llama-bf16\nloaded LlamaForCausalLM \(135\.5K params, bfloat16\) on cpu in /);
    expect(ran.stderr).toMatch(/24 tokens in .* \(finish: length\)\n$/);
  });

  it('--no-cuda-graphs reaches the load options and the CPU backend ignores it', async () => {
    expect(loadOptionsOf({ cudaGraphs: false })).toStrictEqual({ cudaGraphs: false });
    expect(loadOptionsOf({ cudaGraphs: true })).toStrictEqual({}); // commander's value when the flag is absent
    const prompt = readReference('llama-bf16').prompts[1];
    const ran = await cli(['run', '-q', '--device', 'cpu', '--no-cuda-graphs', '-m', fixtureDir('llama-bf16'), '--tokens', prompt.ids.join(','), '-n', '24']);
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toBe(`${prompt.greedy.join(' ')}\n`);
  });

  describe('Ctrl-C', () => {
    let dir: string;
    beforeAll(() => {
      dir = tempDir();
      // Big enough that 4000 tokens take seconds on two cores, so the signal lands mid-generation; no EOS, so
      // only the signal or the length ends it.
      (writeRandomCheckpoint as (out: string, shape: object) => number)(dir, {
        architecture: 'Qwen3ForCausalLM', vocab_size: 2048, hidden_size: 256, intermediate_size: 768,
        num_hidden_layers: 4, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 64,
        max_position_embeddings: 8192, rope_theta: 10000, rms_norm_eps: 1e-6, tie_word_embeddings: false,
      });
      const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
      delete config.eos_token_id;
      writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
      writeFileSync(join(dir, 'generation_config.json'), '{}');
    });

    it('stops the generation, prints what came and exits 130', async () => {
      let sent = false; // once: a second Ctrl-C exits at once, without the tidy end
      const ran = await cli(['run', '-m', dir, '--tokens', '5', '-n', '4000'], {
        onStdout: (_text, child) => {
          if (!sent) sent = child.kill('SIGINT');
        },
      });
      expect(ran.code, ran.stderr).toBe(130);
      const ids = ran.stdout.trim().split(' ');
      expect(ids.length).toBeGreaterThan(0);
      expect(ids.length).toBeLessThan(4000);
      expect(ran.stdout.endsWith('\n')).toBe(true);
      expect(ran.stderr).toMatch(/\(finish: abort\)\n$/);
    });

    it('with --json, prints the partial result with finishReason "abort"', async () => {
      let sent = false;
      const ran = await cli(['run', '-m', dir, '--tokens', '5', '-n', '4000', '--json'], {
        onStderr: (text, child) => {
          // At once: the run ends by the signal wherever it lands (before the generation starts, an empty 'abort').
          if (!sent && text.includes('loaded')) sent = child.kill('SIGINT');
        },
      });
      expect(ran.code, ran.stderr).toBe(130);
      const out = JSON.parse(ran.stdout);
      expect(out.finishReason).toBe('abort');
      expect(out.tokenIds.length).toBe(out.usage.completionTokens);
      expect(out.tokenIds.length).toBeLessThan(4000);
    });
  });
});

describe('usage, help and errors', () => {
  it.each([
    ['no command', [], /Usage: vtengine/],
    ['an unknown command', ['frobnicate'], /unknown command 'frobnicate'/],
    ['an unknown option', ['run', '--bogus', 'x'], /unknown option '--bogus'/],
    ['a missing prompt', ['run'], /missing required argument 'prompt'/],
    ['a missing folder argument', ['inspect'], /missing required argument 'dir'/],
    ['a non-number', ['run', '--max-tokens', 'many', 'x'], /'many' is invalid\. Expected a number/],
    ['a value out of range', ['run', '--temperature', '-1', 'x'], /"temperature" must be a number of 0 or more/],
    ['a bad top-p', ['run', '--top-p', '1.5', 'x'], /"topP" must be a number in \(0, 1\]/],
    ['zero threads', ['run', '--threads', '0', 'x'], /"threads" must be an integer from 1/],
    ['an unknown device', ['run', '--device', 'tpu', 'x'], /Allowed choices are auto, cpu, cuda/],
    ['ids that are not ids', ['run', '--tokens', '1,two', '-m', SHARDED], /comma-separated token ids/],
  ])('%s is a usage error (exit 2)', async (_what, args, message) => {
    const ran = await cli(args as string[]);
    expect(ran.code).toBe(2);
    expect(ran.stdout).toBe('');
    if (args.length > 0) expect(ran.stderr).toMatch(/^error \[ERR_USAGE\]: /);
    expect(ran.stderr).toMatch(message);
  });

  it.each([[[]], [['run']], [['chat']], [['inspect']]])('--help %j prints usage and exits 0', async (command) => {
    const ran = await cli([...command, '--help']);
    expect(ran.code).toBe(0);
    expect(ran.stdout).toContain(`Usage: vtengine ${command.join(' ')}`.trimEnd());
    if (command[0] === 'run') for (const flag of ['--model', '--max-tokens', '--temperature', '--top-k', '--top-p', '--min-p', '--seed', '--device', '--threads', '--max-context', '--json', '--tokens', '--quiet', '--echo', '--no-echo', '--stop', '--repetition-penalty', '--no-cuda-graphs']) expect(ran.stdout).toContain(flag);
    if (command[0] === 'chat') expect(ran.stdout).toContain('--system');
  });

  it('--version prints the package version', async () => {
    const ran = await cli(['--version']);
    expect(ran.code).toBe(0);
    expect(ran.stdout).toBe(`${VERSION}\n`);
  });

  it('`npx vtengine` runs in the repository, as the README says (the build leaves the command executable)', async () => {
    const ran = await cli(['--version'], { npx: true });
    expect(ran.stderr).toBe('');
    expect(ran.code).toBe(0);
    expect(ran.stdout).toBe(`${VERSION}\n`);
  });

  it('a missing model folder is ERR_MODEL_NOT_FOUND (exit 1, no stack trace)', async () => {
    const ran = await cli(['run', '--model', join(ROOT, 'no-such-model'), '--tokens', '1']);
    expectErrorLine(ran, 'ERR_MODEL_NOT_FOUND');
    expect(ran.stdout).toBe('');
  });

  it('a text prompt on a checkpoint without a tokenizer is ERR_NO_TOKENIZER, with advice', async () => {
    const ran = await cli(['run', '-q', '--model', SHARDED, 'hello']);
    expectErrorLine(ran, 'ERR_NO_TOKENIZER');
    expect(ran.stderr).toContain('--tokens');
  });

  it('an id outside the vocabulary is ERR_INVALID_OPTION', async () => {
    const ran = await cli(['run', '-q', '--model', SHARDED, '--tokens', '1,384']);
    expectErrorLine(ran, 'ERR_INVALID_OPTION');
    expect(ran.stderr).toContain('0 to 383');
  });

  const defaultModel = join(ROOT, 'models/default');
  it.runIf(!existsSync(join(defaultModel, 'config.json')))('without --model and no default model: a clear ERR_MODEL_NOT_FOUND', async () => {
    const ran = await cli(['run', '--tokens', '1']);
    expectErrorLine(ran, 'ERR_MODEL_NOT_FOUND');
    expect(ran.stderr).toContain('No --model was given');
    expect(ran.stderr).toContain(defaultModel);
  });
  it.runIf(existsSync(join(defaultModel, 'config.json')))('without --model the packaged default model runs', async () => {
    const ran = await cli(['run', '-q', '--json', '--tokens', '1', '-n', '4']);
    expect(ran.code, ran.stderr).toBe(0);
    expect(JSON.parse(ran.stdout).usage.completionTokens).toBeGreaterThan(0);
  });

  it('chat on a checkpoint without a tokenizer fails before the first prompt', async () => {
    const ran = await cli(['chat', '-q', '--model', SHARDED], { input: 'hello\n' });
    expectErrorLine(ran, 'ERR_NO_TOKENIZER');
    expect(ran.stderr).toContain('vtengine chat needs a checkpoint with a tokenizer');
    expect(ran.stdout).toBe('');
  });
});

describe('text prompts', () => {
  it.skipIf(!textLayer)(`run "hello" streams the text the API generates ${textLayer ? '' : TEXT_PENDING}`, async () => {
    const engine = await Engine.load(TOK, { device: 'cpu', threads: 1 });
    const expected = await engine.generate({ prompt: 'hello' }, { maxTokens: 12 });
    await engine.dispose();
    const streamed = await cli(['run', '-q', '--model', TOK, '-n', '12', 'hello']);
    expect(streamed.code, streamed.stderr).toBe(0);
    expect(streamed.stdout).toBe(`${expected.text}\n`);
    const json = await cli(['run', '-q', '--json', '--model', TOK, '-n', '12', 'hello']);
    expect(JSON.parse(json.stdout)).toMatchObject({ text: expected.text, tokenIds: expected.tokenIds });
  });

  it.skipIf(!textLayer)(`--echo prints the prompt first; --stop and --repetition-penalty reach generate() ${textLayer ? '' : TEXT_PENDING}`, async () => {
    const engine = await Engine.load(TOK, { device: 'cpu', threads: 1 });
    const plain = await engine.generate({ prompt: 'hello' }, { maxTokens: 12 });
    const stop = (plain.text ?? '').slice(3, 9); // a stop string that the greedy text reaches
    const stopped = await engine.generate({ prompt: 'hello' }, { maxTokens: 12, stop: [stop] });
    const penalized = await engine.generate({ prompt: 'hello' }, { maxTokens: 12, repetitionPenalty: 1.5 });
    await engine.dispose();
    const echoed = await cli(['run', '-q', '--echo', '--model', TOK, '-n', '12', 'hello']);
    expect(echoed.stdout).toBe(`hello${plain.text}\n`);
    const withStop = await cli(['run', '-q', '--json', '--model', TOK, '-n', '12', '--stop', stop, 'hello']);
    expect(JSON.parse(withStop.stdout)).toMatchObject({ text: stopped.text, finishReason: 'stop' });
    const withPenalty = await cli(['run', '-q', '--json', '--model', TOK, '-n', '12', '--repetition-penalty', '1.5', 'hello']);
    expect(JSON.parse(withPenalty.stdout).tokenIds).toEqual(penalized.tokenIds);
    expect(penalized.tokenIds).not.toEqual(plain.tokenIds);
  });

  it.skipIf(!textLayer)(`chat keeps the history, /reset clears it, /exit quits ${textLayer ? '' : TEXT_PENDING}`, async () => {
    const engine = await Engine.load(TOK, { device: 'cpu', threads: 1 });
    const system = { role: 'system', content: 'You are a terse assistant.' } as const;
    const one = (await engine.generate({ messages: [system, { role: 'user', content: 'hello' }] }, { maxTokens: 8 })).text ?? '';
    const two = (
      await engine.generate(
        { messages: [system, { role: 'user', content: 'hello' }, { role: 'assistant', content: one }, { role: 'user', content: 'again' }] },
        { maxTokens: 8 },
      )
    ).text;
    const fresh = (await engine.generate({ messages: [system, { role: 'user', content: 'again' }] }, { maxTokens: 8 })).text;
    await engine.dispose();
    const ran = await cli(['chat', '-q', '--model', TOK, '-n', '8', '--system', system.content], {
      input: 'hello\nagain\n/reset\nagain\n/exit\nnever sent\n',
    });
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toBe(`${one}\n${two}\n${fresh}\n`);
  });
});

describe('chat interrupts', () => {
  it.skipIf(!textLayer)(`Ctrl-C during a reply stops that reply only; the chat goes on ${textLayer ? '' : TEXT_PENDING}`, async () => {
    let sent = false;
    const ran = await cli(['chat', '--model', TOK, '-n', '1900'], {
      input: 'hello\n/exit\n',
      onStdout: (_text, child) => {
        if (!sent) sent = child.kill('SIGINT');
      },
    });
    expect(ran.code, ran.stderr).toBe(0); // ended by /exit, after the stopped reply
    expect(ran.stderr).toContain('(reply stopped)');
    expect(ran.stdout.endsWith('\n')).toBe(true);
  });
});
