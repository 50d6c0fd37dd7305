// Mutations of config.json: missing and mistyped fields, edge numbers, and values the engine may not implement
// (activation, RoPE kind and parameters, attention/MLP bias, sliding window, quantization, architecture).
import { raw, show, stringify } from '../raw-json.mjs';
import { jsonEdit } from './edit.mjs';
import { edgeNumber, isObject, otherType, randomKey } from './values.mjs';

const FILE = 'config.json';

/** A config mutation: edits the parsed object in place and says what it did. */
const edit = jsonEdit(FILE);

/** Sets a top-level field and describes it. */
function set(cfg, key, value) {
  cfg[key] = value;
  return `${key} = ${show(value)}`;
}

/** The rotary settings object this config uses (transformers 5's rope_parameters, else rope_scaling). */
const ropeKey = (cfg) => (isObject(cfg.rope_parameters) ? 'rope_parameters' : 'rope_scaling');

export const configMutations = [
  edit('config/delete-field', (cfg, rng) => {
    const key = randomKey(rng, cfg);
    if (key === undefined) return null;
    delete cfg[key];
    return `delete ${key}`;
  }),
  edit('config/retype-field', (cfg, rng) => {
    const key = randomKey(rng, cfg);
    if (key === undefined) return null;
    return set(cfg, key, otherType(rng, cfg[key]));
  }),
  edit('config/edge-number', (cfg, rng) => {
    // Top-level numbers and those inside the rotary settings.
    const spots = [];
    for (const [k, v] of Object.entries(cfg)) {
      if (typeof v === 'number') spots.push([cfg, k, k]);
      if (isObject(v)) for (const [k2, v2] of Object.entries(v)) if (typeof v2 === 'number') spots.push([v, k2, `${k}.${k2}`]);
    }
    if (spots.length === 0) return null;
    const [obj, key, name] = rng.pick(spots);
    const value = edgeNumber(rng, obj[key]);
    obj[key] = value;
    return `${name} = ${show(value)}`;
  }),
  edit('config/hidden-act', (cfg, rng) =>
    set(cfg, 'hidden_act', rng.pick(['gelu', 'gelu_new', 'gelu_pytorch_tanh', 'relu', 'tanh', 'sigmoid', 'quick_gelu',
      'relu2', 'mish', 'SiLU', 'silu ', '', 'swish', 'silu', null, 5, ['silu'], {}])),
  ),
  edit('config/architectures', (cfg, rng) => {
    const now = JSON.stringify(cfg.architectures);
    const choices = [['GPT2LMHeadModel'], [], 'LlamaForCausalLM', [5], [null], ['MistralForCausalLM'], ['LlamaForCausalLM'],
      ['Qwen2ForCausalLM'], ['Qwen3ForCausalLM'], ['Qwen3MoeForCausalLM'], ['llamaforcausallm'], null,
      ['LlamaForCausalLM', 'GPT2LMHeadModel'], ['GPT2LMHeadModel', 'LlamaForCausalLM']].filter((a) => JSON.stringify(a) !== now);
    return set(cfg, 'architectures', rng.pick(choices));
  }),
  edit('config/model-type', (cfg, rng) =>
    set(cfg, 'model_type', rng.pick(['llama', 'mistral', 'qwen2', 'qwen3', 'gpt2', 'qwen3_moe', 'gemma', '', 5, null]
      .filter((t) => t !== cfg.model_type))),
  ),
  edit('config/rope-scaling', (cfg, rng) => {
    const key = ropeKey(cfg);
    const theta = (isObject(cfg.rope_parameters) ? cfg.rope_parameters.rope_theta : cfg.rope_theta) ?? 10000;
    const withTheta = (s) => (key === 'rope_parameters' && isObject(s) ? { rope_theta: theta, ...s } : s);
    const value = withTheta(rng.pick([
      { rope_type: 'dynamic', factor: 2 },
      { rope_type: 'longrope', short_factor: [1], long_factor: [1] },
      { rope_type: 'ntk', factor: 2 },
      { rope_type: 'LINEAR', factor: 2 },
      { type: 'linear', factor: 2 },
      { rope_type: 'linear', factor: 0.5 },
      { rope_type: 'linear' },
      { rope_type: 'linear', factor: 0 },
      { rope_type: 'linear', factor: -2 },
      { rope_type: 'linear', factor: '2' },
      { factor: 4 },
      { rope_type: 'default' },
      {},
      { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 1, original_max_position_embeddings: 128 },
      { rope_type: 'llama3', factor: 8, low_freq_factor: 4, high_freq_factor: 1, original_max_position_embeddings: 128 },
      { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: -128 },
      { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 0.5 },
      { rope_type: 'yarn', factor: 4, original_max_position_embeddings: -256 },
      { rope_type: 'yarn', factor: 4, original_max_position_embeddings: 256, beta_fast: 1, beta_slow: 32 },
      { rope_type: 'yarn', factor: 4, truncate: 'no' },
      { rope_type: 'yarn', factor: -4 },
      { rope_type: 5 },
      'linear',
      [],
      5,
      true,
      // transformers 5's per-layer-type form (Gemma 3, Qwen3-Next): one set of parameters per attention kind
      { full_attention: { rope_type: 'default', rope_theta: 1e6 }, sliding_attention: { rope_type: 'default', rope_theta: 1e4 } },
    ]));
    return set(cfg, key, value);
  }),
  edit('config/partial-rotary', (cfg, rng) => set(cfg, 'partial_rotary_factor', rng.pick([0.5, 0.25, 1, 0, 2, '0.5']))),
  edit('config/torch-dtype', (cfg, rng) =>
    set(cfg, 'torch_dtype' in cfg ? 'torch_dtype' : 'dtype',
      rng.pick(['float8_e4m3fn', 'int8', 'float64', '', 'auto', 'bfloat16', 'float16', 'float32', 5, null, ['bfloat16']])),
  ),
  edit('config/vocab-size', (cfg, rng) => {
    const v = typeof cfg.vocab_size === 'number' ? cfg.vocab_size : 384;
    return set(cfg, 'vocab_size', rng.pick([v - 1, v + 1, v * 2, Math.floor(v / 2), 3, 1, v + 0.5]));
  }),
  edit('config/eos-ids', (cfg, rng) => {
    const v = typeof cfg.vocab_size === 'number' ? cfg.vocab_size : 384;
    const key = rng.pick(['eos_token_id', 'eos_token_id', 'bos_token_id']);
    return set(cfg, key, rng.pick([-1, v, v + 100, 2 ** 31, 2 ** 32 + 2, raw('1e10'), '2', [2, 'x'], [], [-5, 2], 1.5, null,
      Array.from({ length: 40 }, (_, i) => i), [2, 2, 2]]));
  }),
  edit('config/quantization', (cfg, rng) =>
    set(cfg, 'quantization_config', rng.pick([
      { quant_method: 'gptq', bits: 4, group_size: 128, desc_act: false },
      { quant_method: 'awq', bits: 4, group_size: 128, zero_point: true },
      { quant_method: 'bitsandbytes', load_in_4bit: true, bnb_4bit_quant_type: 'nf4' },
      { quant_method: 'fp8', activation_scheme: 'dynamic' },
      { quant_method: 'compressed-tensors' },
      {},
      'gptq',
      null,
    ])),
  ),
  edit('config/bias', (cfg, rng) =>
    rng.chance(0.7) ? set(cfg, 'attention_bias', rng.pick([true, 'true', 1])) : set(cfg, 'mlp_bias', rng.pick([true, 1]))),
  edit('config/sliding-window', (cfg, rng) => {
    const layers = typeof cfg.num_hidden_layers === 'number' ? cfg.num_hidden_layers : 2;
    switch (rng.int(0, 5)) {
      case 0:
        Object.assign(cfg, { use_sliding_window: true, sliding_window: 16, max_window_layers: 0 });
        return 'use_sliding_window = true, sliding_window = 16, max_window_layers = 0';
      case 1:
        Object.assign(cfg, { use_sliding_window: true, sliding_window: 16 });
        return 'use_sliding_window = true, sliding_window = 16';
      case 2: {
        const types = Array.from({ length: layers }, (_, i) => (i === layers - 1 ? 'sliding_attention' : 'full_attention'));
        Object.assign(cfg, { use_sliding_window: true, sliding_window: 8, layer_types: types });
        return `use_sliding_window = true, sliding_window = 8, layer_types = ${show(types)}`;
      }
      case 3:
        return set(cfg, 'layer_types', Array.from({ length: layers + rng.pick([-1, 1]) }, () => 'full_attention'));
      case 4:
        return set(cfg, 'layer_types', Array.from({ length: layers }, (_, i) => (i === 0 ? 'chunked_attention' : 'full_attention')));
      default:
        return set(cfg, 'sliding_window', rng.pick([8, 4096, 0, -1, 'x']));
    }
  }),
  edit('config/rms-norm-eps', (cfg, rng) => set(cfg, 'rms_norm_eps', rng.pick([-1e-6, 0, 1e-300, 1e30, 1e39, '1e-6', null, -1]))),
  edit('config/head-dim', (cfg, rng) => {
    const d = typeof cfg.head_dim === 'number' ? cfg.head_dim : 16;
    return set(cfg, 'head_dim', rng.pick([d + 1, d - 1, d * 2, d / 2, 1, 0, d + 0.5]));
  }),
  edit('config/layer-count', (cfg, rng) => {
    const n = typeof cfg.num_hidden_layers === 'number' ? cfg.num_hidden_layers : 2;
    return set(cfg, 'num_hidden_layers', rng.pick([n - 1, n + 1, 1, n * 100]));
  }),
  edit('config/extra-field', (cfg, rng) => {
    const [key, value] = rng.pick([
      ['foo', 1],
      ['attn_logit_softcapping', 50],
      ['final_logit_softcapping', 30],
      ['num_experts', 8],
      ['use_qk_norm', true],
      ['layer_norm_eps', 1e-5],
      ['pretraining_tp', 2],
      ['__proto__', { hidden_act: 'gelu' }],
      ['constructor', 5],
    ]);
    // Own property even for "__proto__", as a JSON document would have it.
    Object.defineProperty(cfg, key, { value, enumerable: true, writable: true, configurable: true });
    return `add ${key} = ${show(value)}`;
  }),
  {
    kind: 'config/duplicate-key',
    applies: (base) => base.files.includes(FILE),
    apply(m, rng) {
      // A second copy of a key with another value: JSON parsers disagree on which wins (Python's json: the last).
      const cfg = m.json(FILE);
      if (!isObject(cfg)) return null;
      const key = rng.pick(['hidden_act', 'hidden_size', 'architectures', 'rope_theta', 'vocab_size']);
      const value = key === 'hidden_act' ? 'gelu' : key === 'architectures' ? ['GPT2LMHeadModel'] : key === 'hidden_size' ? 65 : 7;
      const text = stringify(cfg, 2).replace(/\n}$/, `,\n  ${JSON.stringify(key)}: ${JSON.stringify(value)}\n}`);
      m.setBytes(FILE, Buffer.from(text));
      return `second "${key}": ${show(value)} at the end`;
    },
  },
];
