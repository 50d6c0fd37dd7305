/**
 * What `vtengine inspect` reports about a checkpoint folder, read from `config.json` and the safetensors HEADERS
 * only: the first 8 bytes and the header JSON of each file, never the weights, so it is instant on any size.
 * The checks and their error codes follow the native loader's (cuda/src/loader/safetensors_header.h) for the
 * safetensors format's own rules (lengths, entries, byte lengths, offsets tiling the data, known dtypes), so
 * `inspect` rejects a malformed file as `Engine.load` would. The loader's stricter rules (no name twice, no
 * misaligned tensor) and its config.json checks show in the memory estimate's line instead, which the engine
 * computes.
 * @internal
 * @module
 */
import { open, readFile, readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import {
  BadCheckpointError,
  type EngineError,
  MissingFileError,
  ModelNotFoundError,
  TruncatedCheckpointError,
  UnsupportedDtypeError,
} from '../errors.js';

/** Bits per element of every safetensors dtype (as the native loader's table). */
const DTYPE_BITS: Readonly<Record<string, number>> = {
  F4: 4, F6_E2M3: 6, F6_E3M2: 6,
  BOOL: 8, U8: 8, I8: 8, F8_E4M3: 8, F8_E5M2: 8, F8_E8M0: 8,
  U16: 16, I16: 16, F16: 16, BF16: 16,
  U32: 32, I32: 32, F32: 32,
  U64: 64, I64: 64, F64: 64, C64: 64,
};

/** The safetensors format caps its header at 100 MB; a larger length means a corrupt or foreign file. */
const MAX_HEADER_BYTES = 100_000_000;

/** Tensors, parameters and bytes of one dtype. @internal */
export interface DtypeShare {
  tensors: number;
  parameters: number;
  bytes: number;
}

/** The report of `vtengine inspect`, as `--json` prints it. @internal */
export interface CheckpointSummary {
  path: string;
  architecture: string | null;
  modelType: string | null;
  /** The language model's parameters: every tensor but the skipped ones. */
  parameters: number;
  /** Bytes of the language model's tensor data (what the engine's weights take). */
  tensorBytes: number;
  /** Tensors the engine never reads (a vision tower, `model.visual.*`; an MTP head, `mtp.*`). */
  skipped: { tensors: number; parameters: number; bytes: number };
  /** Bytes of the safetensors files on disk (tensor data plus headers). */
  fileBytes: number;
  files: number;
  tensors: number;
  dtypes: Record<string, DtypeShare>;
  contextLength: number | null;
  layers: number | null;
  hiddenSize: number | null;
  intermediateSize: number | null;
  heads: number | null;
  kvHeads: number | null;
  headDim: number | null;
  vocabSize: number | null;
  tiedEmbeddings: boolean;
  rope: { type: string; theta: number | null; factor: number | null };
  tokenizer: { present: boolean; chatTemplate: boolean };
}

type Json = Record<string, unknown>;

/** Reads a checkpoint folder's config and safetensors headers. Rejects with an EngineError. @internal */
export async function summarizeCheckpoint(dir: string): Promise<CheckpointSummary> {
  const root = path.resolve(dir);
  const info = await stat(root).catch(() => undefined);
  if (!info?.isDirectory()) throw new ModelNotFoundError(`checkpoint folder ${root} does not exist or is not a folder`);

  const fullConfig = await readJson(path.join(root, 'config.json'), true);
  // Multimodal checkpoints keep the language model's numbers in text_config.
  const config = isObject(fullConfig.text_config) ? { ...fullConfig, ...fullConfig.text_config } : fullConfig;

  const index = await readIndex(root);
  const files = index ? [...new Set(Object.values(index))].sort() : await safetensorsFiles(root);
  const dtypes: Record<string, DtypeShare> = {};
  const names = new Set<string>();
  let parameters = 0;
  let tensorBytes = 0;
  const skipped = { tensors: 0, parameters: 0, bytes: 0 };
  let fileBytes = 0;
  for (const file of files) {
    const { size, tensors } = await readHeader(path.join(root, file));
    fileBytes += size;
    for (const t of tensors) {
      if (names.has(t.name)) throw new BadCheckpointError(`tensor ${t.name} appears in more than one file`);
      names.add(t.name);
      const share = (dtypes[t.dtype] ??= { tensors: 0, parameters: 0, bytes: 0 });
      share.tensors += 1;
      share.parameters += t.numel;
      share.bytes += t.bytes;
      if (t.name.startsWith('model.visual.') || t.name.startsWith('mtp.')) {
        skipped.tensors += 1;
        skipped.parameters += t.numel;
        skipped.bytes += t.bytes;
      } else {
        parameters += t.numel;
        tensorBytes += t.bytes;
      }
    }
  }
  for (const [name, shard] of Object.entries(index ?? {})) {
    if (!names.has(name)) throw new BadCheckpointError(`the index places ${name} in ${shard} but no shard holds it`);
  }

  const heads = int(config.num_attention_heads);
  const hiddenSize = int(config.hidden_size);
  const hasLmHead = names.has('lm_head.weight');
  const tokenizerConfig = await readJson(path.join(root, 'tokenizer_config.json'), false).catch(() => ({}) as Json);
  return {
    path: root,
    architecture: Array.isArray(fullConfig.architectures) ? String(fullConfig.architectures[0]) : null,
    modelType: typeof config.model_type === 'string' ? config.model_type : null,
    parameters,
    tensorBytes,
    skipped,
    fileBytes,
    files: files.length,
    tensors: names.size,
    dtypes: Object.fromEntries(Object.entries(dtypes).sort(([, a], [, b]) => b.bytes - a.bytes)),
    contextLength: int(config.max_position_embeddings),
    layers: int(config.num_hidden_layers),
    hiddenSize,
    intermediateSize: int(config.intermediate_size),
    heads,
    kvHeads: int(config.num_key_value_heads) ?? heads,
    headDim: int(config.head_dim) ?? (heads && hiddenSize ? hiddenSize / heads : null),
    vocabSize: int(config.vocab_size),
    tiedEmbeddings: typeof config.tie_word_embeddings === 'boolean' ? config.tie_word_embeddings : !hasLmHead,
    rope: ropeOf(config),
    tokenizer: {
      present: await exists(path.join(root, 'tokenizer.json')),
      chatTemplate:
        tokenizerConfig.chat_template !== undefined || (await exists(path.join(root, 'chat_template.jinja'))),
    },
  };
}

interface TensorHeader {
  name: string;
  dtype: string;
  numel: number;
  bytes: number;
  begin: number;
  end: number;
}

/** The first 8 bytes and the header of one safetensors file, checked as the native loader checks them. */
async function readHeader(file: string): Promise<{ size: number; tensors: TensorHeader[] }> {
  const where = path.basename(file);
  const handle = await open(file, 'r').catch((err: NodeJS.ErrnoException) => {
    throw err.code === 'ENOENT'
      ? new MissingFileError(`missing file ${file}`, { cause: err })
      : new BadCheckpointError(`cannot open ${file}: ${err.message}`, { cause: err });
  });
  try {
    const { size } = await handle.stat();
    if (size < 8) throw new TruncatedCheckpointError(`${where} is ${size} bytes: too short for a safetensors header`);
    const lengthBytes = Buffer.alloc(8);
    await handle.read(lengthBytes, 0, 8, 0);
    const headerLength = lengthBytes.readBigUInt64LE(0);
    if (headerLength > BigInt(size - 8) || headerLength > BigInt(MAX_HEADER_BYTES)) {
      throw new BadCheckpointError(
        `${where}: header length ${headerLength} runs past the end of the ${size}-byte file (corrupt or not a safetensors file)`,
      );
    }
    const headerBytes = Buffer.alloc(Number(headerLength));
    await handle.read(headerBytes, 0, headerBytes.length, 8);
    let header: unknown;
    try {
      header = JSON.parse(headerBytes.toString('utf8'));
    } catch (err) {
      throw new BadCheckpointError(`${where}: safetensors header is not valid JSON: ${(err as Error).message}`, { cause: err });
    }
    if (!isObject(header)) throw new BadCheckpointError(`${where}: safetensors header is not a JSON object`);
    const dataSize = size - 8 - headerBytes.length;
    const tensors = Object.entries(header)
      .filter(([name]) => name !== '__metadata__')
      .map(([name, entry]) => tensorOf(where, name, entry, dataSize));
    checkTiling(where, tensors, dataSize);
    return { size, tensors };
  } finally {
    await handle.close();
  }
}

function tensorOf(where: string, name: string, entry: unknown, dataSize: number): TensorHeader {
  const bad = (why: string): EngineError => new BadCheckpointError(`${where}: bad header entry for tensor ${name}: ${why}`);
  if (!isObject(entry)) throw bad('not an object');
  const { dtype, shape, data_offsets: offsets } = entry;
  if (typeof dtype !== 'string') throw bad('no dtype');
  if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) throw bad('bad shape');
  if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every((o) => Number.isSafeInteger(o) && o >= 0)) {
    throw bad('data_offsets is not a pair of offsets');
  }
  const [begin, end] = offsets as [number, number];
  if (end < begin) throw bad('data_offsets end before they begin');
  if (end > dataSize) {
    throw new TruncatedCheckpointError(
      `${where}: tensor ${name} needs bytes up to ${end} of ${dataSize} bytes of data (truncated download?)`,
    );
  }
  const bits = DTYPE_BITS[dtype];
  if (bits === undefined) {
    throw new UnsupportedDtypeError(`${where}: tensor "${name}" has dtype "${dtype}", which the safetensors format does not define`);
  }
  const numel = (shape as number[]).reduce((a, b) => a * b, 1);
  const bytes = end - begin;
  if (numel * bits !== bytes * 8) {
    throw new BadCheckpointError(`${where}: tensor ${name} has ${bytes} bytes but its shape and dtype need ${(numel * bits) / 8}`);
  }
  return { name, dtype, numel, bytes, begin, end };
}

/** The format's tiling rule: in offset order, each tensor begins where the one before ends, the last at the end. */
function checkTiling(where: string, tensors: TensorHeader[], dataSize: number): void {
  const sorted = [...tensors].sort((a, b) => a.begin - b.begin || a.end - b.end);
  let at = 0;
  let prev = '';
  for (const t of sorted) {
    if (t.begin < at) {
      throw new BadCheckpointError(`${where}: tensor "${t.name}" (data_offsets [${t.begin}, ${t.end}]) overlaps "${prev}", which ends at ${at}; offsets must tile the data exactly`);
    }
    if (t.begin > at) {
      throw new BadCheckpointError(`${where}: ${t.begin - at} bytes before tensor "${t.name}" (data_offsets [${t.begin}, ${t.end}]) belong to no tensor; offsets must tile the data exactly`);
    }
    at = t.end;
    prev = t.name;
  }
  if (at !== dataSize) {
    throw new BadCheckpointError(`${where}: the tensors end at data offset ${at} but the file has ${dataSize} bytes of data; the last ${dataSize - at} belong to no tensor`);
  }
}

/** The safetensors files of a checkpoint without an index: model.safetensors, else every one there is. */
async function safetensorsFiles(root: string): Promise<string[]> {
  const all = (await readdir(root)).filter((f) => f.endsWith('.safetensors')).sort();
  if (all.length === 0) {
    throw new MissingFileError(
      `no model.safetensors or model.safetensors.index.json in ${root} (only safetensors checkpoints are supported; convert .bin/.pth first)`,
    );
  }
  return all.includes('model.safetensors') ? ['model.safetensors'] : all;
}

/** The index's weight_map (tensor name → shard file), or undefined when there is no index. */
async function readIndex(root: string): Promise<Record<string, string> | undefined> {
  const file = path.join(root, 'model.safetensors.index.json');
  if (!(await exists(file))) return undefined;
  const index = await readJson(file, true);
  const map = index.weight_map;
  if (!isObject(map)) throw new BadCheckpointError(`${file} has no weight_map object`);
  for (const [name, shard] of Object.entries(map)) {
    if (typeof shard !== 'string') throw new BadCheckpointError(`${file}: weight_map entry for ${name} is not a file name`);
    if (shard.includes('/') || shard.includes('..')) {
      throw new BadCheckpointError(`${file}: shard name ${shard} must be a plain file name`);
    }
  }
  if (Object.keys(map).length === 0) throw new BadCheckpointError(`${file} names no shards`);
  return map as Record<string, string>;
}

function ropeOf(config: Json): CheckpointSummary['rope'] {
  const params = isObject(config.rope_parameters) ? config.rope_parameters : undefined;
  const scaling = isObject(config.rope_scaling) ? config.rope_scaling : params;
  const type = scaling?.rope_type ?? scaling?.type;
  const theta = num(config.rope_theta) ?? num(params?.rope_theta);
  return { type: typeof type === 'string' ? type : 'default', theta, factor: num(scaling?.factor) };
}

async function readJson(file: string, required: boolean): Promise<Json> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if (!required) throw err;
    throw new MissingFileError(`missing ${path.basename(file)} in ${path.dirname(file)}`, { cause: err });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new BadCheckpointError(`${file} is not valid JSON: ${(err as Error).message}`, { cause: err });
  }
  if (!isObject(value)) throw new BadCheckpointError(`${file} is not a JSON object`);
  return value;
}

async function exists(file: string): Promise<boolean> {
  return stat(file).then(
    () => true,
    () => false,
  );
}

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function int(value: unknown): number | null {
  return Number.isSafeInteger(value) ? (value as number) : null;
}

function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}
