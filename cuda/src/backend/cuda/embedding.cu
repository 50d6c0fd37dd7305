// Entry points of the embedding family, grid (T), block 256: vt_embed_<table dtype>_to_<activation dtype>, and
// vt_embed_norm_<table dtype>_to_<activation dtype>(table, dim, ids, residual, norm_w, xw, ss_part) (embed_norm_row).
#include "embedding.cuh"

using namespace vtk;

#define VT_EMBED(NAME, TABLE, OUT)                                                                          \
  extern "C" __global__ void __launch_bounds__(256)                                                         \
      NAME(const TABLE *table, int dim, const int32_t *ids, OUT *out) { pdl_trigger(); pdl_wait(); embed_row<TABLE, OUT>(table, dim, ids, out); }

VT_EMBED(vt_embed_f32_to_f32, float, float)
VT_EMBED(vt_embed_f16_to_f32, f16, float)
VT_EMBED(vt_embed_bf16_to_f32, bf16, float)
VT_EMBED(vt_embed_f32_to_bf16, float, bf16)
VT_EMBED(vt_embed_f16_to_bf16, f16, bf16)
VT_EMBED(vt_embed_bf16_to_bf16, bf16, bf16)

#define VT_EMBED_NORM(NAME, TABLE, X)                                                                       \
  extern "C" __global__ void __launch_bounds__(256) NAME(const TABLE *table, int dim, const int32_t *ids,     \
                                                         float *residual, const float *norm_w, X *xw,         \
                                                         float *ss_part) {                                    \
    pdl_trigger();                                                                                           \
    pdl_wait();                                                                                              \
    embed_norm_row<TABLE, X>(table, dim, ids, residual, norm_w, xw, ss_part);                                \
  }

VT_EMBED_NORM(vt_embed_norm_f32_to_f32, float, float)
VT_EMBED_NORM(vt_embed_norm_f16_to_f32, f16, float)
VT_EMBED_NORM(vt_embed_norm_bf16_to_f32, bf16, float)
VT_EMBED_NORM(vt_embed_norm_f32_to_bf16, float, bf16)
VT_EMBED_NORM(vt_embed_norm_f16_to_bf16, f16, bf16)
VT_EMBED_NORM(vt_embed_norm_bf16_to_bf16, bf16, bf16)
