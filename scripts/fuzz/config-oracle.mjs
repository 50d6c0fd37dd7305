// Rules for config.json: what a loaded checkpoint's config must say for the engine's arithmetic to be the one
// transformers would run. A checkpoint that breaks one and still loads is a silent load of that kind. The rules
// follow transformers' config classes (defaults, which fields each architecture reads); 'config-activation' is one
// of the two classes issue 19's acceptance names.
import { isInteger, isObject } from './strict-json.mjs';

/** architectures[0] -> the family whose config class and modelling code transformers uses. */
const ARCH_FAMILY = { LlamaForCausalLM: 'llama', MistralForCausalLM: 'mistral', Qwen2ForCausalLM: 'qwen2', Qwen3ForCausalLM: 'qwen3' };
/** Families the engine computes identically (it runs Mistral as Llama). */
const ENGINE_FAMILY = { llama: 'llama', mistral: 'llama', qwen2: 'qwen2', qwen3: 'qwen3' };
const ROPE_TYPES = ['default', 'linear', 'llama3', 'yarn'];
const REQUIRED_INTS = ['vocab_size', 'hidden_size', 'intermediate_size', 'num_hidden_layers', 'num_attention_heads', 'max_position_embeddings'];
const OPTIONAL_INTS = ['num_key_value_heads', 'head_dim'];

const has = (o, k) => Object.hasOwn(o, k) && o[k] !== null;
/** JSON numbers past 2^53 arrive as BigInt (strict-json keeps them exact). */
const num = (x) => (typeof x === 'bigint' ? Number(x) : x);
const positive = (x) => typeof num(x) === 'number' && Number.isFinite(num(x)) && num(x) > 0;
/** The engine keeps token ids in int32; a JSON integer outside that range changes value on the way in. */
const INT32 = 2 ** 31;
const isInt32 = (x) => isInteger(x) && num(x) >= -INT32 && num(x) < INT32;
const positiveInt = (x) => isInteger(x) && x > 0;
const show = (x) => JSON.stringify(x, (_k, val) => (typeof val === 'bigint' ? val.toString() : val)) ?? String(x);

/**
 * @param {unknown} cfg - config.json as parseStrict read it
 * @param {Set<string>|null} tensorNames - every tensor of the checkpoint, or null when the headers did not parse
 * @returns {{kind: string, detail: string}[]}
 */
export function checkConfig(cfg, tensorNames) {
  const out = [];
  const v = (kind, detail) => out.push({ kind, detail });
  if (!isObject(cfg)) return v('config-json', 'config.json is not a JSON object'), out;

  // Architecture: the model transformers builds is the config class's (model_type), which must agree.
  const arch = Array.isArray(cfg.architectures) ? cfg.architectures[0] : undefined;
  const archFamily = ARCH_FAMILY[arch];
  if (!archFamily) v('config-arch', `architectures ${show(cfg.architectures)} is not one the engine implements`);
  let family = archFamily;
  if (has(cfg, 'model_type')) {
    const typeFamily = Object.hasOwn(ENGINE_FAMILY, cfg.model_type) ? cfg.model_type : undefined;
    if (!typeFamily) v('config-arch', `model_type ${show(cfg.model_type)} is not one the engine implements`);
    else if (archFamily && ENGINE_FAMILY[typeFamily] !== ENGINE_FAMILY[archFamily])
      v('config-arch', `model_type ${show(cfg.model_type)} (transformers builds that model) but architectures says ${arch}`);
    family = typeFamily ?? family;
  }

  for (const k of REQUIRED_INTS) if (!positiveInt(cfg[k])) v('config-field', `${k} = ${show(cfg[k])} is not a positive integer`);
  for (const k of OPTIONAL_INTS) if (has(cfg, k) && !positiveInt(cfg[k])) v('config-field', `${k} = ${show(cfg[k])} is not a positive integer`);
  if (has(cfg, 'tie_word_embeddings') && typeof cfg.tie_word_embeddings !== 'boolean')
    v('config-field', `tie_word_embeddings = ${show(cfg.tie_word_embeddings)} is not a boolean`);

  // The MLP computes SiLU(gate) * up; "swish" is transformers' other name for SiLU.
  if (Object.hasOwn(cfg, 'hidden_act') && cfg.hidden_act !== 'silu' && cfg.hidden_act !== 'swish')
    v('config-activation', `hidden_act = ${show(cfg.hidden_act)}, but the engine computes SiLU`);

  // A value is computed with as transformers would (even a negative or an overflowing one, into the same NaN or
  // infinity); null is not: transformers fails on it, the engine would take its default.
  if (Object.hasOwn(cfg, 'rms_norm_eps') && typeof num(cfg.rms_norm_eps) !== 'number')
    v('config-norm', `rms_norm_eps = ${show(cfg.rms_norm_eps)} is not a number`);

  if (has(cfg, 'quantization_config')) v('config-quantization', `quantization_config = ${show(cfg.quantization_config)}: the weights are not plain floats`);

  for (const k of ['eos_token_id', 'bos_token_id']) {
    const x = cfg[k];
    if (has(cfg, k) && !isInt32(x) && !(k === 'eos_token_id' && Array.isArray(x) && x.every(isInt32)))
      v('config-eos', `${k} = ${show(x)} is not an int32 token id${k === 'eos_token_id' ? ' or a list of them' : ''}`);
  }

  checkRope(cfg, v);
  if (family) {
    checkSliding(cfg, family, v);
    if (tensorNames) checkBias(cfg, family, tensorNames, v);
  }
  return out;
}

function checkRope(cfg, v) {
  if (has(cfg, 'rope_theta') && !positive(cfg.rope_theta)) v('config-rope', `rope_theta = ${show(cfg.rope_theta)}`);
  for (const k of ['rope_parameters', 'rope_scaling'])
    if (has(cfg, k) && !isObject(cfg[k])) v('config-rope', `${k} = ${show(cfg[k])} is not an object`);
  if (has(cfg, 'partial_rotary_factor') && cfg.partial_rotary_factor !== 1)
    v('config-rope', `partial_rotary_factor = ${show(cfg.partial_rotary_factor)}: the engine rotates every dimension`);
  const s = isObject(cfg.rope_parameters) ? cfg.rope_parameters : isObject(cfg.rope_scaling) ? cfg.rope_scaling : undefined;
  if (!s) return;
  const where = isObject(cfg.rope_parameters) ? 'rope_parameters' : 'rope_scaling';
  if (Object.values(s).some(isObject)) return v('config-rope', `${where} is per layer type ${show(Object.keys(s))}`);
  const type = s.rope_type ?? s.type;
  if (type === undefined || type === null) {
    if (Object.keys(s).some((k) => k !== 'rope_theta')) v('config-rope', `${where} ${show(s)} has parameters but no rope_type`);
    return;
  }
  if (!ROPE_TYPES.includes(type)) return v('config-rope', `${where}.rope_type = ${show(type)} is not implemented`);
  if (has(s, 'rope_theta') && !positive(s.rope_theta)) v('config-rope', `${where}.rope_theta = ${show(s.rope_theta)}`);
  const num = (k) => !has(s, k) || typeof s[k] === 'number';
  for (const k of ['factor', 'low_freq_factor', 'high_freq_factor', 'beta_fast', 'beta_slow', 'mscale', 'mscale_all_dim', 'attention_factor'])
    if (!num(k)) v('config-rope', `${where}.${k} = ${show(s[k])} is not a number`);
  if (has(s, 'original_max_position_embeddings') && !positiveInt(s.original_max_position_embeddings))
    v('config-rope', `${where}.original_max_position_embeddings = ${show(s.original_max_position_embeddings)} is not a positive integer`);
  if (has(s, 'truncate') && typeof s.truncate !== 'boolean') v('config-rope', `${where}.truncate = ${show(s.truncate)}`);
  if ((type === 'linear' || type === 'llama3') && !positive(s.factor)) v('config-rope', `${type} RoPE with factor ${show(s.factor)}`);
  if (type === 'yarn' && has(s, 'factor') && !positive(s.factor)) v('config-rope', `yarn RoPE with factor ${show(s.factor)}`);
  if (type === 'llama3') {
    const low = s.low_freq_factor ?? 1, high = s.high_freq_factor ?? 4;
    if (typeof low === 'number' && low === high) v('config-rope', `llama3 RoPE with low_freq_factor = high_freq_factor = ${low} (divides by zero)`);
  }
}

/** Windowed attention, which the engine does not implement, as each config class decides whether it is on. */
function checkSliding(cfg, family, v) {
  const maxPos = cfg.max_position_embeddings;
  const reaches = (w) => typeof w === 'number' && (typeof maxPos !== 'number' || w < maxPos);
  if (family === 'mistral') {
    const w = Object.hasOwn(cfg, 'sliding_window') ? cfg.sliding_window : 4096; // MistralConfig's default
    if (reaches(w)) v('config-sliding-window', `Mistral with sliding_window = ${show(w)} < max_position_embeddings ${show(maxPos)}`);
    return;
  }
  if (family !== 'qwen2' && family !== 'qwen3') return;
  const n = cfg.num_hidden_layers;
  const types = cfg.layer_types;
  if (has(cfg, 'layer_types')) {
    const ok = Array.isArray(types) && types.length === n && types.every((t) => t === 'full_attention' || t === 'sliding_attention');
    if (!ok) v('config-sliding-window', `layer_types ${show(types)} is not one of full/sliding_attention per layer (${show(n)} layers)`);
  }
  if (cfg.use_sliding_window !== true || !reaches(cfg.sliding_window)) return;
  const sliding = Array.isArray(types) ? types.includes('sliding_attention') : typeof n === 'number' && n > (cfg.max_window_layers ?? 28);
  if (sliding) v('config-sliding-window', `use_sliding_window with sliding_window = ${show(cfg.sliding_window)} on some layers`);
}

/** Bias tensors present must be the ones the config class builds (transformers drops others, random-inits missing). */
function checkBias(cfg, family, names, v) {
  const any = (re) => [...names].some((n) => re.test(n));
  const attn = (p) => any(new RegExp(`\\.self_attn\\.${p}_proj\\.bias$`));
  const mlp = any(/\.mlp\.(gate|up|down)_proj\.bias$/);
  // Only the fields the family's config class reads (Llama: both; Qwen3: attention_bias; Qwen2, Mistral: neither).
  const reads = { llama: ['attention_bias', 'mlp_bias'], qwen3: ['attention_bias'] }[family] ?? [];
  for (const k of reads)
    if (has(cfg, k) && typeof cfg[k] !== 'boolean') v('config-bias', `${k} = ${show(cfg[k])} is not a boolean`);
  const attnBias = family === 'qwen2' ? { q: true, k: true, v: true, o: false }
    : family === 'mistral' ? { q: false, k: false, v: false, o: false }
    : Object.fromEntries(['q', 'k', 'v', 'o'].map((p) => [p, cfg.attention_bias === true]));
  for (const [p, want] of Object.entries(attnBias))
    if (attn(p) !== want) v('config-bias', `${p}_proj bias tensors ${attn(p) ? 'present' : 'absent'}, but ${family}'s config says ${want ? 'with' : 'no'} bias`);
  const mlpWant = family === 'llama' && cfg.mlp_bias === true;
  if (mlp !== mlpWant) v('config-bias', `MLP bias tensors ${mlp ? 'present' : 'absent'}, but the config says ${mlpWant ? 'mlp_bias' : 'none'}`);
}
