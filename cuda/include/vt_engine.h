/* vt_engine.h — the C ABI of the vtengine native engine.
 *
 * Style follows llama.h: opaque handles, params structs passed by value with *_default_params(),
 * symmetric create/free, object_verb names, and every fallible call returns a vt_status with a
 * human-readable message written into a caller-provided buffer. Nothing here aborts the process on
 * bad input.
 *
 * Threading: an engine owns one step thread. vt_engine_submit / vt_engine_abort / vt_engine_allow_tokens /
 * vt_engine_stats may be called from any thread. The step callback runs on the step thread, once per step, with the tokens of
 * every request that produced one in that step; it must copy what it needs and return quickly.
 */
#ifndef VT_ENGINE_H
#define VT_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vt_status {
  VT_OK = 0,
  VT_ERR_MODEL_NOT_FOUND = 1,     /* the checkpoint folder does not exist */
  VT_ERR_BAD_CHECKPOINT = 2,      /* malformed or contradictory config.json, safetensors header or index; unused tensors */
  VT_ERR_UNSUPPORTED_ARCH = 3,    /* config.json names an architecture, or a variant of one (activation, RoPE type,
                                     sliding window, ...), we do not implement */
  VT_ERR_UNSUPPORTED_DTYPE = 4,   /* a tensor dtype we cannot use; a quantized checkpoint */
  VT_ERR_SHAPE_MISMATCH = 5,      /* a tensor's shape differs from what config.json implies */
  VT_ERR_INVALID_OPTION = 6,      /* a params field is out of range */
  VT_ERR_CONTEXT_OVERFLOW = 7,    /* prompt (+ max_tokens) does not fit max_context */
  VT_ERR_OUT_OF_MEMORY = 8,       /* an allocation failed or would not fit */
  VT_ERR_NO_GPU = 9,              /* device 'cuda' asked for and none is usable */
  VT_ERR_CANCELLED = 10,          /* load cancelled through params.cancel */
  VT_ERR_INTERNAL = 11,           /* a bug: please report */
  VT_ERR_MISSING_FILE = 12,       /* a file the checkpoint needs (config.json, a shard) is absent */
  VT_ERR_TRUNCATED_CHECKPOINT = 13 /* a tensor's bytes run past the end of its file */
} vt_status;

typedef enum vt_device { VT_DEVICE_AUTO = 0, VT_DEVICE_CPU = 1, VT_DEVICE_CUDA = 2 } vt_device;

/* The activation type of the CUDA backend (the CPU backend always computes in float32 and ignores it). */
typedef enum vt_dtype { VT_DTYPE_AUTO = 0, VT_DTYPE_FLOAT32 = 1, VT_DTYPE_BFLOAT16 = 2 } vt_dtype;

typedef enum vt_finish {
  VT_FINISH_NONE = 0,    /* the request goes on */
  VT_FINISH_EOS = 1,     /* it sampled one of its stop token ids */
  VT_FINISH_LENGTH = 2,  /* max_tokens reached, or the context is full */
  VT_FINISH_ABORT = 3,   /* vt_engine_abort */
  VT_FINISH_ERROR = 4    /* the engine failed while running it; see vt_step_event.message */
} vt_finish;

typedef struct vt_engine vt_engine;

/* Load progress: fraction in [0,1] and a short stage name ("config", "mapping", "weights", "kv cache" on the
 * CPU, "cuda graphs" on the GPU, "ready").
 * Called on the loading thread. */
typedef void (*vt_progress_fn)(float fraction, const char *stage, void *user);

/* CUDA graphs for decode steps (CUDA backend only; ignored on the CPU). A step whose every sequence decodes
 * one token and whose batch fits a bucket replays the graph captured for the smallest bucket that holds it
 * (the batch padded to the bucket), instead of launching each kernel. */
typedef struct vt_cuda_graphs {
  int32_t enabled;      /* -1 = default (on), 0 = off, 1 = on */
  int32_t max_batch;    /* largest batch captured; 0 = min(max_seqs, 256) */
  int32_t n_buckets;    /* 0 = powers of two up to max_batch (and max_batch itself) */
  int32_t buckets[32];  /* ascending batch sizes, each 1 .. max_seqs */
  int32_t dedup;        /* 1: buckets whose graphs differ only in launch sizes share one executable
                           (cuGraphExecUpdate before a replay switches buckets); 0 = off (default) */
  int32_t first_use;    /* 1: capture each bucket's graph at its first decode step instead of at load (a shorter
                           load; buckets never used hold no graph); 0 = at load (default) */
} vt_cuda_graphs;

typedef struct vt_engine_params {
  vt_device device;
  int32_t n_threads;          /* CPU backend threads; 0 = number of online cores */
  int32_t max_context;        /* tokens per sequence; 0 = min(config max_position_embeddings, 8192) */
  int32_t max_seqs;           /* sequences scheduled in one step; 0 = 256 on the CUDA backend, 64 on the CPU */
  int32_t max_batch_tokens;   /* tokens in one step (decodes + prefill chunks); 0 = 512 */
  int32_t kv_block_size;      /* tokens per KV block; 0 = 16 */
  int64_t kv_cache_bytes;     /* KV pool size, in whole blocks (rounded down). CPU: the pool; 0 = room for
                                 max(max_context, 4096) tokens (rounded up to whole blocks). CUDA: the pool's
                                 ceiling; 0 = what the GPU has free at load less the weights, the workspaces, the
                                 state slots and a 256 MiB reserve (at most max_seqs x max_context tokens). The CUDA
                                 pool maps room for max(max_context, 4096) tokens at load (whole chunks, at most the
                                 ceiling), grows in chunks as requests need blocks, and gives the chunks above that
                                 back once the engine has been idle for a second. Either way it must hold max_context tokens
                                 (VT_ERR_OUT_OF_MEMORY otherwise) */
  vt_progress_fn progress;
  void *progress_user;
  const volatile int32_t *cancel; /* optional: load stops with VT_ERR_CANCELLED when *cancel != 0 */
  vt_dtype dtype;             /* CUDA activations; AUTO = bfloat16 (FLOAT32: exact against fp32 references) */
  vt_cuda_graphs cuda_graphs;
  double gpu_memory_utilization; /* 0 = unset; in (0, 1]: the share of the GPU's memory this engine may take in
                                    all (weights, workspaces, graphs, KV); the KV pool's ceiling is what the rest
                                    leaves (it grows to it with demand, as kv_cache_bytes's does).
                                    Exclusive with kv_cache_bytes; ignored on the CPU backend */
  /* Prefix caching (appended): full KV blocks are kept, by their tokens and everything before them, and reused by
   * later requests whose tokens start the same way (a shared system prompt, the earlier turns of a chat), which then
   * compute only the rest; blocks no request holds are evicted least recently used first when the pool needs room.
   * 0 = default (on), 1 = on, -1 = off. 0 is the default, as for the fields above, so that zero-initialized params
   * get it too. */
  int32_t prefix_caching;
} vt_engine_params;

vt_engine_params vt_engine_default_params(void);

/* A finished-loading engine's model facts. Strings are owned by the engine. */
typedef struct vt_model_info {
  const char *architecture;   /* e.g. "Qwen3ForCausalLM" */
  const char *device;         /* "cpu" or "cuda" */
  int32_t vocab_size;
  int32_t hidden_size;
  int32_t n_layers;
  int32_t n_heads;
  int32_t n_kv_heads;
  int32_t head_dim;
  int32_t max_context;        /* effective, after params */
  int32_t max_position_embeddings;
  int32_t bos_token_id;       /* -1 when none */
  int32_t n_eos;              /* generation_config.json eos ids (or config.json's) */
  int32_t eos_token_ids[8];
  int64_t n_params;
  int64_t weight_bytes;       /* bytes of all tensors the model uses */
  const char *dtype;          /* dominant weight dtype: "bfloat16", "float16", "float32" */
} vt_model_info;

/* Loads a Hugging Face checkpoint folder. On failure *out is NULL and err holds the reason. The work runs on a
 * long-lived thread of the engine's own (the caller waits), as does vt_engine_free's: a process that loads and
 * frees engines one after another keeps its C heap in one malloc arena, whichever threads call them. */
vt_status vt_engine_load(const char *dir, vt_engine_params params, vt_engine **out, char *err, size_t err_cap);

/* Stops the step thread (finishing every live request with VT_FINISH_ABORT through the callback),
 * then frees everything. Blocks until the step thread has exited. NULL is a no-op. */
void vt_engine_free(vt_engine *engine);

vt_status vt_engine_model_info(const vt_engine *engine, vt_model_info *out);

/* ---- requests ---- */

#define VT_MAX_TOP_LOGPROBS 20
#define VT_MAX_STOP_IDS 16

typedef struct vt_request_params {
  int32_t max_tokens;         /* >= 1 */
  float temperature;          /* 0 = greedy */
  int32_t top_k;              /* 0 = off */
  float top_p;                /* 1 = off */
  float min_p;                /* 0 = off */
  uint64_t seed;              /* used when has_seed; otherwise the engine draws one */
  int32_t has_seed;
  int32_t logprobs;           /* 0 = off; else report the sampled token's logprob and this many top ones */
  int32_t n_stop_ids;         /* token ids that end the request (finish EOS); -1 = the model's eos ids */
  int32_t stop_ids[VT_MAX_STOP_IDS];
  /* Logit processors, applied to the raw logits in this order before temperature and truncation (and so before
   * the logprobs reported): logit bias, repetition penalty (transformers' rule, over prompt and output),
   * presence and frequency penalties (OpenAI's rule, over the output). */
  float repetition_penalty;   /* > 0; 1 = off */
  float presence_penalty;     /* 0 = off */
  float frequency_penalty;    /* 0 = off */
  int32_t n_logit_bias;
  const int32_t *logit_bias_ids;    /* copied by vt_engine_submit */
  const float *logit_bias_values;
  /* Teacher forcing: report the logprob of every prompt token after the first, in events with token -1
   * (or on the first sampled token's event) as the prompt's chunks are computed. */
  int32_t prompt_logprobs;
  /* Backpressure from the first step: the most tokens it may generate before vt_engine_allow_tokens allows more;
   * -1 = no limit (the default). Given here, the limit holds however late the caller's first allow_tokens comes. */
  int32_t allowed_tokens;
} vt_request_params;

vt_request_params vt_request_default_params(void);

/* One event per request per step. */
typedef struct vt_step_event {
  uint64_t request_id;
  int32_t token;              /* -1 when the event only carries a finish (abort, error) */
  int32_t finish;             /* vt_finish */
  float logprob;              /* of `token`, when logprobs > 0 */
  int32_t n_top;
  int32_t top_ids[VT_MAX_TOP_LOGPROBS];
  float top_logprobs[VT_MAX_TOP_LOGPROBS];
  int32_t prompt_tokens;      /* set on the finishing event */
  int32_t completion_tokens;  /* set on the finishing event */
  const char *message;        /* VT_FINISH_ERROR only; valid during the callback */
  /* prompt_logprobs requests: logprobs of prompt tokens [prompt_logprobs_start, + n_prompt_logprobs) */
  int32_t n_prompt_logprobs;
  int32_t prompt_logprobs_start;
  const float *prompt_logprobs; /* valid during the callback */
} vt_step_event;

/* Called on the step thread with every event of one step. Events are valid only during the call. */
typedef void (*vt_step_fn)(const vt_step_event *events, int32_t n_events, void *user);

/* Installs the step callback. Call once, before the first submit. */
vt_status vt_engine_set_step_callback(vt_engine *engine, vt_step_fn fn, void *user);

/* Queues a request. Validates synchronously: an empty prompt, a token id outside the vocabulary, a prompt
 * that leaves no room for one new token in max_context, or bad params fail here and nothing is queued. */
vt_status vt_engine_submit(vt_engine *engine, const int32_t *tokens, int32_t n_tokens, vt_request_params params,
                           uint64_t *out_request_id, char *err, size_t err_cap);

/* Asks the step thread to end a request; it finishes with VT_FINISH_ABORT at the next step and its KV
 * blocks return to the pool. Unknown or finished ids are ignored. */
void vt_engine_abort(vt_engine *engine, uint64_t request_id);

/* Backpressure, for a consumer that may fall behind: the request generates at most n_tokens tokens in all, then
 * pauses until a later call allows more. A paused request leaves the batch (the others run on at full speed and
 * the step thread sleeps when every request is paused) and keeps its KV blocks, so it goes on where it stopped;
 * when the pool runs dry, paused requests give their blocks back before any running request is preempted, and are
 * recomputed when they go on. A consumer that has read r tokens and lets the engine run w ahead calls it with
 * r + w: no more than w tokens are then ever generated and not yet read. -1 = no limit. A request starts with
 * vt_request_params.allowed_tokens (default -1): give w there, since this call can only come after submit has
 * returned, when the step thread may already have run. Takes effect at the next step; a limit at or below what the request has already generated pauses it after any
 * token already in flight. A finished id is ignored, as by vt_engine_abort. VT_ERR_INVALID_OPTION for
 * n_tokens < -1 or an id this engine never issued. */
vt_status vt_engine_allow_tokens(vt_engine *engine, uint64_t request_id, int32_t n_tokens, char *err, size_t err_cap);

typedef struct vt_engine_stats {
  int32_t kv_blocks_total;
  int32_t kv_blocks_used;
  int32_t kv_block_size;
  int64_t kv_cache_bytes;
  int32_t requests_waiting;
  int32_t requests_running;
  int64_t steps;
  int64_t tokens_generated;
  int64_t preemptions;        /* running requests sent back to the queue, and paused ones whose KV blocks were taken back */
  int32_t requests_paused;    /* waiting for their consumers (vt_engine_allow_tokens); appended */
  /* Prefix caching (appended; all 0 when it is off). kv_blocks_used counts the blocks requests hold; a cached block
   * no request holds counts as free (a new request's KV takes it, evicting it, when no block is truly free). */
  int64_t prefix_cache_queries;     /* admissions that looked their tokens up: a request's first, and each one after
                                       its KV was taken back (preemption, a paused request's eviction); not a request
                                       for prompt logprobs before they are all reported, which computes its whole prompt */
  int64_t prefix_cache_query_tokens; /* the tokens those admissions had (prompt, plus what was generated before) */
  int64_t prefix_cache_hit_tokens;  /* of those, the tokens whose KV was found cached and not computed */
  int32_t prefix_cache_blocks;      /* blocks in the cache now, held by requests or not */
  int64_t prefix_cache_evictions;   /* cached blocks taken for new KV since load */
  /* The KV pool as it is now (appended). kv_blocks_total and kv_cache_bytes are its ceiling, as reserved; a CUDA
   * pool maps device memory for kv_blocks_mapped of those blocks, growing in chunks as requests need them and giving
   * the chunks above its load-time size back when the engine is idle (the CPU's pool is fixed: all its blocks are
   * mapped, its pages committed as they are written). */
  int32_t kv_blocks_mapped;         /* blocks usable now without mapping more */
  int64_t kv_cache_resident_bytes;  /* memory the pool (and the state slots) hold now: CUDA, the mapped chunks; CPU,
                                       the pages ever written (mincore) */
  /* The state slots of a model whose recurrent layers keep a fixed-size state per request (appended; all 0 for
   * models without): a slot per seat at most; on CUDA the slots' memory is mapped in chunks as requests take them
   * and the chunks above the load's given back when the engine is idle (the CPU's are all mapped). */
  int32_t state_slots_total;        /* the ceiling: one per seat (maxSeqs) */
  int32_t state_slots_mapped;       /* usable now without mapping more */
  int32_t state_slots_held;         /* held by requests: running, or paused with their state */
} vt_engine_stats;

vt_status vt_engine_stats_get(vt_engine *engine, vt_engine_stats *out);

/* ---- memory ---- */

/* What the engine holds now, by kind. Bytes of mappings are split into what is mapped and what is resident. */
typedef struct vt_memory_report {
  int64_t weight_device_bytes;          /* weights in GPU memory (0 on the CPU backend) */
  int64_t weight_host_bytes;            /* weights copied into host heap memory (fp32 norms and biases) */
  int64_t weight_mapped_bytes;          /* weights used in place from the checkpoint's file mapping */
  int64_t weight_mapped_resident_bytes; /* of the checkpoint files' mappings, the bytes in memory now */
  int64_t kv_cache_bytes;               /* the KV pool as reserved: its ceiling (and the state slots' ceiling, a
                                           slot per seat, for models whose recurrent layers keep a fixed-size state
                                           per request). On the CUDA backend this is address space: device memory
                                           is mapped for the blocks and slots in use (kv_cache_resident_bytes) */
  int64_t kv_cache_resident_bytes;      /* of it, the memory held now: CUDA, the mapped chunks of the pool and of
                                           the state slots (both grow with demand and shrink when the engine is
                                           idle); CPU, the pages ever written (-1 if unknown) */
  int32_t kv_blocks_total;              /* the ceiling: blocks the pool may hold at most */
  int32_t kv_blocks_used;               /* held by requests; cached blocks no request holds count as free */
  int32_t kv_block_size;
  int64_t workspace_bytes;              /* activations, logits and sampler scratch, sized at load */
  int32_t graphs_count;                 /* CUDA graphs (0 on the CPU backend) */
  int64_t graphs_bytes;                 /* -1 when not measurable */
  /* The GPU, read from the driver at the time of the call (appended: the fields above keep their offsets). */
  int32_t gpu_device;                   /* CUDA ordinal of the engine's GPU; -1 on the CPU backend */
  int64_t gpu_total_bytes;              /* the device's memory (cuMemGetInfo); -1 on the CPU backend */
  int64_t gpu_free_bytes;               /* free on the device now, all processes; -1 on the CPU or if the driver fails */
  int32_t gpu_unified_memory;           /* 1: an integrated GPU that shares the host's memory (GB10, Jetson Thor) */
  char gpu_name[96];                    /* "NVIDIA H200"; empty on the CPU backend */
  /* Page-locked host memory the CUDA backend stages each step through (the step's integers, sampled ids and
   * logprobs, logits-processor lists); 0 on the CPU backend. (Appended.) */
  int64_t host_pinned_bytes;
  /* Of kv_blocks_total, the blocks usable now: the mapped chunks of a CUDA pool; all of them on the CPU. (Appended.) */
  int32_t kv_blocks_mapped;
  /* The state slots' memory held now: the fixed-size per-request state of a model's recurrent layers (Qwen3.5's
   * Gated DeltaNet); 0 for models without. On the CUDA backend the mapped chunks of slots (of
   * kv_cache_resident_bytes): the first chunk from the load on, more as requests take slots, given back when the
   * engine is idle, so at most kv_cache_bytes' share of them, a slot per seat. On the CPU all of them, a slot per
   * seat, in the pool's mapping (of kv_cache_bytes; their pages are committed as written). (Appended.) */
  int64_t state_slot_bytes;
  /* Tensors in the checkpoint the text model knowingly never reads (a vision tower, an MTP head): neither copied nor
   * uploaded, and counted in no figure above. (Appended.) */
  int64_t weight_skipped_bytes;
  /* Of those, the bytes in memory now (whole pages only, mincore): 0 unless another process reads them. (Appended.) */
  int64_t weight_skipped_resident_bytes;
} vt_memory_report;

/* Callable from any thread, also while the step thread runs (the JS thread asks between steps). */
vt_status vt_engine_memory(vt_engine *engine, vt_memory_report *out);

/* What vt_engine_load(dir, params) would take, computed from config.json and the safetensors headers without
 * loading anything. */
typedef struct vt_memory_estimate {
  int64_t weight_bytes;          /* every tensor the model uses, as stored */
  int64_t weight_device_bytes;   /* of those, in GPU memory */
  int64_t weight_host_bytes;     /* host heap copies */
  int64_t weight_mapped_bytes;   /* read in place from the files (page cache) */
  int64_t kv_cache_bytes;        /* the KV pool's ceiling (and the state slots): what it may hold at most */
  int64_t kv_cache_tokens;       /* tokens the ceiling holds, over all sequences */
  int64_t workspace_bytes;
  int32_t max_context;           /* effective, after params */
  int64_t host_available_bytes;  /* MemAvailable now, -1 if unknown */
  int64_t host_pinned_bytes;     /* page-locked host staging of the CUDA backend (0 on the CPU); appended */
  /* What the load maps of the pool (and of the state slots), and keeps when the engine is idle: on the CUDA backend
   * room for max(max_context, 4096) tokens in whole chunks, at most the ceiling, and the slots' first chunk; on the
   * CPU (a fixed pool) the same as kv_cache_bytes / kv_cache_tokens. (Appended.) */
  int64_t kv_cache_initial_bytes;
  int64_t kv_cache_initial_tokens;
  int64_t state_slot_bytes;      /* of kv_cache_bytes, the state slots: a slot per seat (as laid out: padded on the
                                    CUDA backend, whose slots are mapped in chunks as requests take them); appended */
  int64_t weight_skipped_bytes;  /* tensors the text model never reads (a vision tower, an MTP head); appended */
  int64_t state_slot_initial_bytes; /* of kv_cache_initial_bytes, the state slots the load maps and keeps when idle:
                                       on the CUDA backend their first chunk, on the CPU all of them; appended */
} vt_memory_estimate;

vt_status vt_engine_estimate(const char *dir, vt_engine_params params, vt_memory_estimate *out, char *err, size_t err_cap);

/* ---- the machine, without a model ---- */

#define VT_SYSINFO_MAX_GPUS 16
#define VT_SYSINFO_MAX_TARGETS 32

/* What the driver would run for one GPU from the kernels embedded in this binary. */
typedef enum vt_gpu_code {
  VT_GPU_CODE_NONE = 0,   /* nothing embedded runs on it (or this build has no kernels) */
  VT_GPU_CODE_CUBIN = 1,  /* a cubin built for its architecture */
  VT_GPU_CODE_PTX = 2     /* PTX only: the driver JIT-compiles it at the first load (slow once, then cached) */
} vt_gpu_code;

typedef struct vt_gpu_info {
  char name[128];         /* "NVIDIA H200"; "?" when the driver did not say */
  int32_t cc_major;       /* compute capability, e.g. 9.0 */
  int32_t cc_minor;
  int64_t total_bytes;    /* device memory */
  int32_t integrated;     /* 1: shares the host's memory (GB10, Jetson Thor) */
  vt_gpu_code code;
  char code_target[16];   /* the embedded target it would run: "sm_90a", "compute_80"; "" with VT_GPU_CODE_NONE */
  int32_t usable;         /* the driver and the embedded kernels can run the engine on it */
  char reason[512];       /* why not, in words a user can act on; "" when usable */
} vt_gpu_info;

/* Strings are NUL-terminated (cut short if longer than their buffer). Lists are space-separated. */
typedef struct vt_system_info {
  /* The CPU backend */
  char cpu_arch[16];                 /* "x86_64", "aarch64" */
  char cpu_features[256];            /* the checked features this CPU has, /proc/cpuinfo spelling: "avx2 fma f16c" */
  char cpu_features_absent[256];     /* the checked features it lacks */
  char cpu_matmul[16];               /* the SIMD path in use: "avx512", "avx2", "neon", "scalar" (VT_CPU_ISA can force one) */
  char cpu_matmul_paths[64];         /* the paths compiled in: "scalar avx2 avx512" */
  int32_t cpu_threads;               /* what n_threads = 0 means: the online cores */
  /* The CUDA kernels embedded in this binary (none in a build made without nvcc) */
  int32_t n_kernel_images;           /* op families (fatbins) */
  int32_t n_cuda_targets;            /* targets every family holds, cubins first: "sm_80" ... then PTX "compute_80" */
  char cuda_targets[VT_SYSINFO_MAX_TARGETS][16];
  char kernels_problem[256];         /* why no GPU can run them (none embedded, unreadable); "" otherwise */
  int32_t min_driver_version;        /* the CUDA version a driver must support for them, e.g. 13000 for 13.0 */
  /* The NVIDIA driver */
  int32_t driver_found;              /* libcuda.so.1 loaded */
  int32_t driver_version;            /* cuDriverGetVersion, e.g. 13000; 0 when unknown */
  char driver_problem[512];          /* why it lists no GPU (not installed, cuInit failed...); "" when it does */
  int32_t n_gpus;                    /* as the driver counts them; gpus[] holds the first VT_SYSINFO_MAX_GPUS */
  vt_gpu_info gpus[VT_SYSINFO_MAX_GPUS];
  /* Libraries the CUDA backend uses when present */
  int32_t cublaslt_found;
  int64_t cublaslt_version;          /* e.g. 130100 for 13.1.0; 0 when not found */
  char cublaslt_path[256];
  char cublaslt_problem[512];        /* why not found; "" when found */
  /* What device 'auto' picks: the same check vt_engine_load makes (the CUDA backend runs on GPU 0) */
  int32_t cuda_usable;
  char auto_device[8];               /* "cuda" or "cpu" */
  char auto_reason[512];             /* why: the GPU it takes, or why CUDA cannot be used */
  /* The matrix products on GPU 0 ("" without a usable GPU): the selection table the CUDA backend consults (its GPU
   * family and where it was measured, "" when it was not), and its rules: "1-8 rows: gemv; 9-16 rows: mma_m16n128,
   * split-K to 2 blocks/SM; ...". cuBLASLt serves none of them unless VT_CUDA_GEMM=cublaslt. */
  char gemm_family[64];
  char gemm_measured[128];
  char gemm_rules[512];
} vt_system_info;

/* Fills *out without loading a model: probes the CPU, reads the embedded kernels' headers, and opens the driver and
 * cuBLASLt libraries if present (they stay loaded, as for an engine). Nothing missing is an error: it is reported
 * in the fields. Thread-safe; the driver is asked once per process. Returns VT_OK, or VT_ERR_INVALID_OPTION for a
 * NULL out, VT_ERR_INTERNAL if probing itself failed (err says why). */
vt_status vt_system_info_get(vt_system_info *out, char *err, size_t err_cap);

const char *vt_status_name(vt_status status); /* "ERR_BAD_CHECKPOINT", ... (stable; JS uses them as codes) */

#ifdef __cplusplus
}
#endif

#endif /* VT_ENGINE_H */
