/**
 * `vtengine inspect DIR`: what a checkpoint is, from its config and safetensors headers, without loading it.
 * @internal
 * @module
 */
import type { Command } from 'commander';
import { type CheckpointSummary, summarizeCheckpoint } from './checkpoint.js';
import { bytes, compact, grouped } from './format.js';

/** Adds the `inspect` command to the program. @internal */
export function addInspectCommand(program: Command): void {
  program
    .command('inspect')
    .description('describe a checkpoint folder (config.json + safetensors headers; reads no weights)')
    .argument('<dir>', 'Hugging Face checkpoint folder')
    .option('--json', 'print one JSON object')
    .action(async (dir: string, opts: { json?: boolean }) => {
      const summary = await summarizeCheckpoint(dir);
      process.stdout.write(opts.json ? `${JSON.stringify(summary, null, 2)}\n` : describe(summary));
    });
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
    ['weights', `${grouped(s.tensorBytes)} bytes (${bytes(s.tensorBytes)}) in ${s.tensors} tensors`],
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
