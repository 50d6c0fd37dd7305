// Entry points of the sample family:
//   vt_argmax_f32:       grid (n), block kArgmaxThreads (1024); also_ids (may be null): the ids again; adv: a
//                        captured decode step's StepAdvance (positions null: none)
//   vt_argmax_parts_f32: the same, grid (n, kArgmaxParts), clusters of kArgmaxParts along y (sm_90+ only)
//   vt_sample_f32:       grid (n), block kSampleThreads (1024); also_ids and adv as vt_argmax_f32's
//   vt_top_logprobs_f32: grid (n), block kSampleThreads (1024)
//   vt_penalties_f32:    grid (n), block kPenaltyThreads (256)
#include "penalties.cuh"
#include "sample.cuh"
#include "sampler.cuh"
#include "top_logprobs.cuh"

using namespace vtk;

extern "C" __global__ void __launch_bounds__(kArgmaxThreads)
    vt_argmax_f32(const float *logits, long long ld, int vocab, int vec, int32_t *out_ids, float *out_logprobs,
                  int32_t *also_ids, vt::cuda::StepAdvance adv) { pdl_trigger(); pdl_wait();
  argmax_row(logits, ld, vocab, vec, out_ids, out_logprobs);
  // (thread 0 wrote the row's id: the same thread reads it back)
  if (threadIdx.x == 0) {
    const int32_t id = out_ids[blockIdx.x];
    if (also_ids) also_ids[blockIdx.x] = id;
    if (adv.positions) step_advance(adv, blockIdx.x, id);
  }
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
extern "C" __global__ void __launch_bounds__(kArgmaxThreads) __cluster_dims__(1, kArgmaxParts, 1)
    vt_argmax_parts_f32(const float *logits, long long ld, int vocab, int vec, int32_t *out_ids, float *out_logprobs,
                        int32_t *also_ids, vt::cuda::StepAdvance adv) {
  pdl_trigger();
  pdl_wait();
  argmax_row_parts(logits, ld, vocab, vec, out_ids, out_logprobs, also_ids, adv);
}
#endif

extern "C" __global__ void __launch_bounds__(kSampleThreads)
    vt_sample_f32(const float *logits, long long ld, int vocab, int vec, const vt::cuda::SampleRow *rows,
                  int32_t *out_ids, float *out_logprobs, int32_t *also_ids, vt::cuda::StepAdvance adv) {
  pdl_trigger(); pdl_wait();
  sample_row(logits, ld, vocab, vec, rows, out_ids, out_logprobs);
  // (thread 0 wrote the row's id: the same thread reads it back)
  if (threadIdx.x == 0 && (also_ids || adv.positions)) {
    const int32_t id = out_ids[blockIdx.x];
    if (also_ids) also_ids[blockIdx.x] = id;
    if (adv.positions) step_advance(adv, blockIdx.x, id);
  }
}

extern "C" __global__ void __launch_bounds__(kPenaltyThreads)
    vt_penalties_f32(float *logits, long long ld, int vocab, const vt::cuda::PenaltyRow *rows,
                     const int32_t *seen_offsets, const int32_t *seen_ids, const int32_t *seen_counts,
                     const int32_t *bias_offsets, const int32_t *bias_ids, const float *bias_values) {
  pdl_trigger(); pdl_wait();
  penalties_row(logits, ld, vocab, rows, seen_offsets, seen_ids, seen_counts, bias_offsets, bias_ids, bias_values);
}

extern "C" __global__ void __launch_bounds__(kSampleThreads)
    vt_top_logprobs_f32(const float *logits, long long ld, int vocab, int vec, int top_n, int32_t *out_ids,
                        float *out_logprobs) {
  pdl_trigger(); pdl_wait();
  top_logprobs_row(logits, ld, vocab, vec, top_n, out_ids, out_logprobs);
}
