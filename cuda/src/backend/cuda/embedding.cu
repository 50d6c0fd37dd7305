// Entry points of the embedding family: vt_embed_<table dtype>_to_<activation dtype>, grid (T), block 256.
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
