// The engine's switches: environment variables read in one place (tuning.cpp holds the engine's only getenv),
// resolved there, and passed explicitly: an engine's MemoryPlan carries the Tuning it was planned with, so the
// estimate, the plan and the constructors see the same values. The defaults are the product; a switch exists
// for a user or a bug report, or, in experiments builds only (VT_EXPERIMENTS: scripts/gpu-check.sh prepare's
// binaries), for timing. The A/B tests that once had null-control switches are settled; their figures are in
// bench/RESULTS.md, and a variable that is no longer read is named on stderr when an engine loads.
#pragma once

#include <cstdint>
#include <string>

namespace vt {

// Timing-only: launches the CUDA backend's ops leave out (VT_CUDA_SKIP=norm+rope+attn+qkv+o+mlp+argmax), named by
// op: norm, a kAddNorm's norm (not the output's); rope, RoPE with the KV store; attn, attention; qkv, a kRopeStore
// linear's product; o, a kAddNorm linear's product (o_proj and down_proj); mlp, a kSwiGLU linear (gate|up with
// SiLU·mul); argmax, the captured step's. Products fused with a norm (the lazily normed inputs) are never left out.
// The results are wrong, and the engine says so.
enum CudaSkip : unsigned {
  kSkipNorm = 1, kSkipRope = 2, kSkipAttn = 4, kSkipQkv = 8, kSkipO = 16, kSkipMlp = 32, kSkipArgmax = 64
};

// The kernel forms the CUDA backend's Ops picks. The product picks by itself from the GPU (each is on where the GPU has what it
// needs); the op tests turn one off to check the other form, which is what older GPUs run.
struct CudaOpsTuning {
  bool early_loads = true;        // the GEMVs' early weight loads (under PDL)
  bool attention_cluster = true;  // decode attention's splits merged in a thread-block cluster (sm_90+, bf16)
  bool argmax_parts = true;       // greedy argmax split over a cluster (sm_90+)
  int split_keys = 64;            // the shortest decode-attention split (VT_CUDA_SPLIT_KEYS, experiments builds)
};

struct CudaTuning {
  CudaOpsTuning ops;
  bool pdl = true;                  // programmatic dependent launch where the GPU has it (sm_90+)
  bool cublaslt = true;             // VT_CUDA_CUBLASLT=0: cuBLASLt is never loaded
  // VT_CUDA_GEMM=cublaslt: cuBLASLt serves the products it can take and the GEMV the rows it did before our
  // tensor-core GEMMs (the A/B baseline of issue 30); "" (the product): our GEMMs, cuBLASLt not even loaded
  // unless this build's kernel image lacks them.
  std::string gemm;
  bool sample_on_device = true;     // VT_CUDA_SAMPLE=0: sampled rows picked by the host sampler
  bool penalties_on_device = true;  // VT_CUDA_PENALTIES=0: rows with penalties or a logit bias sampled on the host
  std::string attention;            // VT_CUDA_ATTN=simple|noprefill (debugging); "" = the product's choice
  bool sublayer_f32 = false;        // VT_CUDA_SUBLAYER_F32=1: o/down outputs in fp32 (debugging; bf16 activations)
  unsigned skip = 0;                // VT_CUDA_SKIP (experiments builds): CudaSkip bits
  int replays = 1;                  // VT_CUDA_REPLAY=N (experiments builds): each captured step's graph run N times
  // VT_CUDA_GEMM_SHAPES=FILE (experiments builds): the GEMM table's Hopper shapes from bench_cuda_gemm's printed
  // entries in FILE (gemm_table.h's gemm_shapes_override), so one device call measures and times the engine on them
  std::string gemm_shapes;
  // VT_CUDA_GEMM_PDL=0 | mma (experiments builds): our tensor-core GEMMs launched without programmatic dependent
  // launch (their early weight loads off), or only the mma.sync tiles with it (the A/B of session 21)
  bool gemm_pdl_mma = true, gemm_pdl_wgmma = true;
};

struct Tuning {
  CudaTuning cuda;
};

// The switches as the environment sets them now. Bad values are ignored with a warning on stderr; switches that
// are not at their default, and VT_CUDA_* / VT_CPU_* variables that are no longer read, are named on stderr, once
// per process and variable.
Tuning tuning_from_env();

// The CPU backend's process-wide knobs, read where they are used (at first use, or when a pool starts):
// VT_CPU_ISA=scalar|avx2|avx512|neon (the matmul path: tests and comparisons), VT_CPU_SPIN_US (the thread pool's
// spin before sleeping; default 200), VT_CPU_KC (the matmul's k-block; 0 = its default). Empty / -1 when unset.
std::string cpu_isa_env();
int cpu_spin_us_env();
int cpu_kc_env();

// VT_CUBLASLT_PATH: the cuBLASLt library to open first (a user's toolkit outside the default paths); "" if unset.
std::string cublaslt_path_env();

}  // namespace vt
