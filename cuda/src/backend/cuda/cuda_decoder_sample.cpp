// CudaDecoder, the tokens of a step that is not chained: logits to the host (project), the greedy ids of the
// captured argmax or of a gathered head (greedy), and sampling on the device (sample, with the logits processors).
#include "backend/cuda/cuda_decoder.h"

#include <algorithm>

#include "status.h"

namespace vt {

using cuda::CUdeviceptr;
using cuda::CUstream;

bool CudaDecoder::replayed(const int32_t *rows, int32_t n) const {
  if (n > head_rows_) return false;
  for (int32_t i = 0; i < n; ++i)
    if (rows[i] != i) return false;
  return true;
}

void CudaDecoder::head_of(const int32_t *rows, int32_t m, bool with_argmax) {
  cuda::check(cuda::driver().cuMemcpyHtoDAsync(meta_.rows, rows, size_t(m) * sizeof(int32_t), stream_->get()),
              "cuMemcpyHtoDAsync(rows)");
  head(meta_.rows, m, with_argmax);
}

void CudaDecoder::project(const int32_t *rows, int32_t n, float *logits) {
  if (n <= 0) return;
  ctx_->make_current();
  const CUstream s = stream_->get();
  const int64_t V = c_.vocab_size;
  if (replayed(rows, n)) {
    cuda::check(cuda::driver().cuMemcpyDtoHAsync(logits, logits_, size_t(n) * size_t(V) * sizeof(float), s),
                "cuMemcpyDtoHAsync(logits)");
    stream_->synchronize();
    return;
  }
  for (int32_t i0 = 0; i0 < n; i0 += p_.max_logit_rows) {
    const int32_t m = std::min(p_.max_logit_rows, n - i0);
    head_of(rows + i0, m, false);
    cuda::check(cuda::driver().cuMemcpyDtoHAsync(logits + int64_t(i0) * V, logits_, size_t(m) * size_t(V) * sizeof(float), s),
                "cuMemcpyDtoHAsync(logits)");
    stream_->synchronize();
  }
  head_rows_ = 0;  // logits_ now holds gathered rows
}

bool CudaDecoder::greedy(const int32_t *rows, int32_t n, int32_t *ids) {
  if (n <= 0) return true;
  ctx_->make_current();
  const CUstream s = stream_->get();
  int32_t *out = out_pinned_.as<int32_t>();
  const bool ready = replayed(rows, n);  // the greedy ids are computed already
  for (int32_t i0 = 0; i0 < n; i0 += p_.max_logit_rows) {
    const int32_t m = std::min(p_.max_logit_rows, n - i0);
    if (!ready) head_of(rows + i0, m, true);
    cuda::check(cuda::driver().cuMemcpyDtoHAsync(out, ids_, size_t(m) * sizeof(int32_t), s), "cuMemcpyDtoHAsync(ids)");
    stream_->synchronize();
    std::copy_n(out, m, ids + i0);
  }
  if (!ready) head_rows_ = 0;
  return true;
}

bool CudaDecoder::applies_processors(const ProcessorLists &lists) const {
  if (!proc_dev_) return false;
  for (int32_t i0 = 0; i0 < lists.n_rows(); i0 += p_.max_logit_rows)
    if (lists.upload_bytes(i0, std::min(p_.max_logit_rows, lists.n_rows() - i0)) > kProcBytes) return false;
  return true;
}

void CudaDecoder::sample(const int32_t *rows, int32_t n, const cuda::SampleRow *params, int32_t top_n, int32_t *ids,
                         float *logprobs, int32_t *top_ids, float *top_lps, const ProcessorLists *lists) {
  if (n <= 0) return;
  if (top_n < 0 || top_n > kMaxTopLogprobs) fail(VT_ERR_INTERNAL, "CudaDecoder::sample: top_n out of range");
  ctx_->make_current();
  const CUstream s = stream_->get();
  const int64_t V = c_.vocab_size;
  const bool ready = replayed(rows, n);
  for (int32_t i0 = 0; i0 < n; i0 += p_.max_logit_rows) {
    const int32_t m = std::min(p_.max_logit_rows, n - i0);
    if (!ready) head_of(rows + i0, m, false);
    // The previous chunk's copies have finished (synchronized below), so the staging area is free.
    std::copy_n(params + i0, m, sample_pinned_.as<cuda::SampleRow>());
    cuda::check(cuda::driver().cuMemcpyHtoDAsync(sample_rows_, sample_pinned_.as<cuda::SampleRow>(),
                                                 size_t(m) * sizeof(cuda::SampleRow), s),
                "cuMemcpyHtoDAsync(sample rows)");
    if (lists) {  // the processors first, in place on the rows' logits (applies_processors said they fit)
      if (!proc_dev_ || lists->upload_bytes(i0, m) > kProcBytes)
        fail(VT_ERR_INTERNAL, "CudaDecoder::sample: logits processors the device was not asked to take");
      size_t at[7];
      const size_t bytes = lists->pack(i0, m, proc_pinned_.as<uint8_t>(), at);
      cuda::check(cuda::driver().cuMemcpyHtoDAsync(proc_dev_, proc_pinned_.as<uint8_t>(), bytes, s),
                  "cuMemcpyHtoDAsync(logits processors)");
      const CUdeviceptr d = proc_dev_;
      ops_->apply_penalties(s, logits_, m, V, V, d + at[0], d + at[1], d + at[2], d + at[3], d + at[4], d + at[5],
                            d + at[6]);
    }
    ops_->sample(s, logits_, m, V, V, sample_rows_, ids_, lps_);
    if (top_n > 0) ops_->top_logprobs(s, logits_, m, V, V, top_n, top_ids_, top_lps_);
    // Down: ids (m) | logprobs (m) | top ids (m, top_n) | top logprobs (m, top_n), packed in the staging area
    // (the SampleRows it held went up before these copies run: same stream).
    uint8_t *out = sample_pinned_.as<uint8_t>();
    const size_t top_bytes = size_t(m) * size_t(top_n) * 4;
    cuda::check(cuda::driver().cuMemcpyDtoHAsync(out, ids_, size_t(m) * 4, s), "cuMemcpyDtoHAsync(ids)");
    cuda::check(cuda::driver().cuMemcpyDtoHAsync(out + size_t(m) * 4, lps_, size_t(m) * 4, s),
                "cuMemcpyDtoHAsync(logprobs)");
    if (top_n > 0) {
      cuda::check(cuda::driver().cuMemcpyDtoHAsync(out + size_t(m) * 8, top_ids_, top_bytes, s),
                  "cuMemcpyDtoHAsync(top ids)");
      cuda::check(cuda::driver().cuMemcpyDtoHAsync(out + size_t(m) * 8 + top_bytes, top_lps_, top_bytes, s),
                  "cuMemcpyDtoHAsync(top logprobs)");
    }
    stream_->synchronize();
    std::memcpy(ids + i0, out, size_t(m) * 4);
    std::memcpy(logprobs + i0, out + size_t(m) * 4, size_t(m) * 4);
    if (top_n > 0) {
      std::memcpy(top_ids + int64_t(i0) * top_n, out + size_t(m) * 8, top_bytes);
      std::memcpy(top_lps + int64_t(i0) * top_n, out + size_t(m) * 8 + top_bytes, top_bytes);
    }
  }
  // logits_ now holds gathered rows, or rows the processors changed: later project()s recompute theirs
  if (!ready || lists) head_rows_ = 0;
}

}  // namespace vt
