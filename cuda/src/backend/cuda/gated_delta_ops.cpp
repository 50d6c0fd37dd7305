// Host side of the Gated DeltaNet ops: shape checks, launch geometry and the kernel names (gated_delta.cu's entry
// points, vt_<op>_<activation type>).
#include "backend/cuda/gated_delta_ops.h"

#include <algorithm>
#include <climits>
#include <string>

#include "status.h"

namespace vt::cuda {

namespace {

// gated_delta.cuh's launch constants.
constexpr unsigned kConvThreads = 128, kRuleThreads = 128, kRuleCols = 32, kNormRowsPerBlock = 8;

void require(bool ok, const char *what) {
  if (!ok) fail(VT_ERR_INTERNAL, std::string("CUDA Gated DeltaNet op called with bad arguments: ") + what);
}

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

}  // namespace

GatedDeltaOps::GatedDeltaOps(Context &ctx, Act act) : ctx_(ctx), act_(act) {
  const std::string a = act_name(act);
  conv_ = ctx.function("vt_causal_conv1d_silu_" + a);
  gates_ = ctx.function("vt_gdn_gates_" + a);
  rule_ = ctx.function("vt_gated_delta_rule_" + a);
  norm_ = ctx.function("vt_gated_rmsnorm_" + a);
}

// Enough blocks for ~8 per SM (32 warps of loads in flight), each thread walking as many rows as that leaves, a
// power of two up to 64: past that the GPU is full anyway, and shorter chunks even out the tail. A chunk also
// reads the W-1 rows before it: 5% more reads at 64 rows, more at fewer, which only small batches pick.
int32_t GatedDeltaOps::conv_chunk_rows(int64_t T, int64_t C, int sm_count) {
  const int64_t col_blocks = (C + kConvThreads - 1) / kConvThreads, want = int64_t(std::max(1, sm_count)) * 8;
  const int64_t fit = T * col_blocks / want;
  int32_t rows = 1;
  while (rows < 64 && 2 * int64_t(rows) <= fit) rows *= 2;
  return rows;
}

void GatedDeltaOps::causal_conv1d_silu(CUstream s, CUdeviceptr x, const DeviceRecurrentBatch &b, int64_t T, int64_t C,
                                       int32_t W, CUdeviceptr weight, CUdeviceptr conv_state, int64_t slot_stride,
                                       CUdeviceptr out, int64_t x_ld, int32_t chunk_rows) {
  if (x_ld == 0) x_ld = C;
  require(fits_int(T) && C > 0 && fits_int(C) && W >= 1 && W <= kMaxConvWidth && x_ld >= C && b.n_seqs >= 0 &&
              slot_stride >= (W - 1) * C && chunk_rows >= 0 && (C + kConvThreads - 1) / kConvThreads <= 65535,
          "causal_conv1d_silu shape");
  // T == 0 still launches: a fresh sequence with no rows has its state cleared, as on the CPU.
  if (b.n_seqs == 0) return;
  const int rows_per_chunk = chunk_rows ? chunk_rows : conv_chunk_rows(T, C, ctx_.sm_count());
  const int64_t n_chunks = std::max<int64_t>(1, (T + rows_per_chunk - 1) / rows_per_chunk);
  const int n = b.n_seqs, rows = int(T), c = int(C), w = W;
  const long long ld = x_ld, stride = slot_stride;
  ctx_.launch_pdl(conv_, {unsigned(n_chunks), unsigned((C + kConvThreads - 1) / kConvThreads)}, {kConvThreads}, 0, s,
                  x, ld, b.seq_start, b.slot, b.pos0, n, rows, c, w, weight, conv_state, stride, out, rows_per_chunk);
}

void GatedDeltaOps::gdn_gates(CUstream s, CUdeviceptr b, CUdeviceptr a, int64_t T, int32_t n_v_heads,
                              CUdeviceptr A_log, CUdeviceptr dt_bias, CUdeviceptr beta, CUdeviceptr g, int64_t ld) {
  if (ld == 0) ld = n_v_heads;
  require(T >= 0 && n_v_heads > 0 && ld >= n_v_heads, "gdn_gates shape");
  if (T == 0) return;
  const int64_t n = T * n_v_heads;
  const unsigned grid = unsigned(std::min<int64_t>((n + 255) / 256, int64_t(ctx_.sm_count()) * 16));
  const long long lda = ld, rows = T;
  const int hv = n_v_heads;
  ctx_.launch_pdl(gates_, {grid}, {256}, 0, s, b, a, lda, rows, hv, A_log, dt_bias, beta, g);
}

void GatedDeltaOps::gated_delta_rule(CUstream s, CUdeviceptr qkv, CUdeviceptr g, CUdeviceptr beta,
                                     const DeviceRecurrentBatch &b, const cpu::GdnGeometry &geo, CUdeviceptr state,
                                     int64_t slot_stride, CUdeviceptr out) {
  const int64_t col_blocks = (int64_t(geo.v_dim) + kRuleCols - 1) / kRuleCols;
  require(geo.n_k_heads > 0 && geo.n_v_heads > 0 && geo.n_v_heads % geo.n_k_heads == 0 && geo.k_dim > 0 &&
              geo.k_dim <= kMaxKeyDim && geo.v_dim > 0 && fits_int(geo.qkv_dim()) && b.n_seqs >= 0 &&
              slot_stride >= geo.state_floats() && fits_int(int64_t(b.n_seqs) * geo.n_v_heads * col_blocks),
          "gated_delta_rule shape");
  if (b.n_seqs == 0) return;
  const unsigned grid = unsigned(int64_t(b.n_seqs) * geo.n_v_heads * col_blocks);
  const int hk = geo.n_k_heads, hv = geo.n_v_heads, dk = geo.k_dim, dv = geo.v_dim;
  const long long stride = slot_stride;
  ctx_.launch_pdl(rule_, {grid}, {kRuleThreads}, 0, s, qkv, g, beta, b.seq_start, b.slot, b.pos0, hk, hv, dk, dv,
                  state, stride, out);
}

void GatedDeltaOps::gated_rmsnorm(CUstream s, CUdeviceptr x, CUdeviceptr z, int64_t rows, int64_t dim,
                                  CUdeviceptr weight, float eps, CUdeviceptr out, int64_t z_ld, int32_t heads) {
  if (z_ld == 0) z_ld = heads * dim;
  require(rows >= 0 && dim > 0 && fits_int(dim) && heads >= 1 && z_ld >= heads * dim &&
              fits_int((rows + kNormRowsPerBlock - 1) / kNormRowsPerBlock),
          "gated_rmsnorm shape");
  if (rows == 0) return;
  const long long n = rows, zld = z_ld;
  const int d = int(dim), h = heads;
  ctx_.launch_pdl(norm_, {unsigned((rows + kNormRowsPerBlock - 1) / kNormRowsPerBlock)}, {kNormRowsPerBlock * 32}, 0,
                  s, x, z, n, d, h, zld, weight, eps, out);
}

}  // namespace vt::cuda
