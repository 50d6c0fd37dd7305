// Entry points of the sample family:
//   vt_argmax_f32: grid (n), block kArgmaxThreads (1024)
#include "sample.cuh"

using namespace vtk;

extern "C" __global__ void __launch_bounds__(kArgmaxThreads)
    vt_argmax_f32(const float *logits, long long ld, int vocab, int vec, int32_t *out_ids, float *out_logprobs) { pdl_trigger();
  argmax_row(logits, ld, vocab, vec, out_ids, out_logprobs);
}
