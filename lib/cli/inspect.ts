/**
 * `vtengine inspect DIR`: what a checkpoint is, from its config and safetensors headers, without loading it.
 * @internal
 * @module
 */
import type { Command } from 'commander';
import { Engine } from '../engine/engine.js';
import type { MemoryEstimate } from '../memory/types.js';
import { type CheckpointSummary, summarizeCheckpoint } from './checkpoint.js';
import { bytes, compact, grouped } from './format.js';

/** Adds the `inspect` command to the program. @internal */
export function addInspectCommand(program: Command): void {
  program
    .command('inspect')
    .description('describe a checkpoint folder (config.json + safetensors headers; reads no weights)')
    .argument('<dir>', 'Hugging Face checkpoint folder')
    .option('--json', 'print one JSON object')
    .option('--max-context <n>', 'size the memory estimate for this context length', (v) => Number.parseInt(v, 10))
    .action(async (dir: string, opts: { json?: boolean; maxContext?: number }) => {
      const summary = await summarizeCheckpoint(dir);
      const estimate = await memoryEstimate(dir, opts.maxContext);
      process.stdout.write(
        opts.json ? `${JSON.stringify({ ...summary, estimate }, null, 2)}\n` : describe(summary) + describeEstimate(estimate),
      );
    });
}

/** What loading it on the CPU would take (Engine.estimate); null when the engine cannot size this checkpoint. */
async function memoryEstimate(dir: string, maxContext?: number): Promise<MemoryEstimate | { error: string; code?: string }> {
  try {
    return await Engine.estimate(dir, { device: 'cpu', ...(maxContext ? { maxContext } : {}) });
  } catch (err) {
    const e = err as { message?: string; code?: string };
    return { error: e.message ?? String(err), code: e.code };
  }
}

function describeEstimate(e: MemoryEstimate | { error: string; code?: string }): string {
  if ('error' in e) return `  ${'memory estimate'.padEnd(17)}unavailable: ${e.error}\n`;
  const rows: Array<[string, string]> = [
    ['memory estimate', `on the ${e.device}, maxContext ${grouped(e.maxContext)}${e.fits ? '' : ' — does NOT fit now'}`],
    ['  weights', `${bytes(e.weights.totalBytes)} (${bytes(e.weights.mappedBytes)} read in place from the files)`],
    ['  KV cache', `${bytes(e.kvCache.bytes)} for ${grouped(e.kvCache.tokens)} tokens (${grouped(e.kvCache.bytesPerToken)} B/token)`],
    ['  workspaces', bytes(e.workspaceBytes)],
    [
      '  host heap',
      `${bytes(e.totals.hostHeapBytes)}${e.pinnedHostBytes > 0 ? ` (${bytes(e.pinnedHostBytes)} of it pinned for the GPU)` : ''}` +
        `${e.hostAvailableBytes !== null ? ` of ${bytes(e.hostAvailableBytes)} available` : ''}`,
    ],
  ];
  const out = rows.map(([k, v]) => `  ${k.padEnd(17)}${v}`).join('\n') + '\n';
  return e.suggestion ? out + `  ${''.padEnd(17)}${e.suggestion}\n` : out;
}

function describe(s: CheckpointSummary): string {
  const or = (v: number | null): string => (v === null ? '?' : grouped(v));
  const dtypes = Object.entries(s.dtypes).map(
    ([dtype, d]) =>
      `${dtype} ${grouped(d.bytes)} bytes (${bytes(d.bytes)}, ${grouped(d.parameters)} params, ${d.tensors} tensors)`,
  );
  const rope = [s.rope.type, s.rope.factor !== null ? `factor ${s.rope.factor}` : '', s.rope.theta !== null ? `theta ${s.rope.theta}` : '']
    .filter(Boolean)
    .join(', ');
  const rows: Array<[string, string]> = [
    ['architecture', `${s.architecture ?? '?'}${s.modelType ? ` (${s.modelType})` : ''}`],
    ['parameters', `${grouped(s.parameters)} (${compact(s.parameters)})`],
    ['weights', `${grouped(s.tensorBytes)} bytes (${bytes(s.tensorBytes)}) in ${s.tensors - s.skipped.tensors} tensors`],
    ...(s.skipped.tensors > 0
      ? [['not read', `${grouped(s.skipped.bytes)} bytes (${bytes(s.skipped.bytes)}) in ${s.skipped.tensors} tensors: a vision tower or MTP head`] as [string, string]]
      : []),
    ['dtypes', dtypes.join('\n' + ' '.repeat(19))],
    ['files', `${s.files} safetensors file${s.files === 1 ? '' : 's'}, ${grouped(s.fileBytes)} bytes (${bytes(s.fileBytes)})`],
    ['context length', or(s.contextLength)],
    ['layers', or(s.layers)],
    ['hidden', `${or(s.hiddenSize)} (MLP ${or(s.intermediateSize)})`],
    ['heads', `${or(s.heads)} (kv heads ${or(s.kvHeads)}), head_dim ${or(s.headDim)}`],
    ['vocab', or(s.vocabSize)],
    ['tied embeddings', s.tiedEmbeddings ? 'yes' : 'no'],
    ['rope', rope],
    ['tokenizer', s.tokenizer.present ? `yes${s.tokenizer.chatTemplate ? ', with a chat template' : ''}` : 'no'],
  ];
  return `${s.path}\n${rows.map(([k, v]) => `  ${k.padEnd(17)}${v}`).join('\n')}\n`;
}
