// CudaDecoder, a step's edges: its integers staged for the device (the metadata layout, the upload, or nothing when
// the previous captured step moved them on itself), and the overlapped decode's picks (chain_begin / chain_end).
#include "backend/cuda/cuda_decoder.h"

#include <algorithm>

#include "status.h"

namespace vt {

using cuda::CUdeviceptr;
using cuda::CUstream;

cuda::StepAdvance CudaDecoder::advance_args(bool moved) const {
  const auto i32 = [](CUdeviceptr p) { return reinterpret_cast<int32_t *>(p); };  // the kernels' view of an address
  return cuda::StepAdvance{i32(out_pinned_.device_ptr()), i32(meta_.positions), i32(meta_.slots), i32(meta_.pos0),
                           i32(meta_.tables),             table_width_,        p_.block_size,   p_.max_logit_rows,
                           moved ? 1 : 0};
}

CudaDecoder::MetaLayout CudaDecoder::meta_layout(size_t max_rows, size_t t, size_t s, size_t table_width) {
  MetaLayout m{};
  m.rows = 0;
  m.tokens = max_rows;
  m.positions = m.tokens + t;
  m.slots = m.positions + t;
  m.q_start = m.slots + t;
  m.pos0 = m.q_start + s + 1;
  m.state_slots = m.pos0 + s;
  m.tables = m.state_slots + s;
  m.tiles = m.tables + s * table_width;
  return m;
}

void CudaDecoder::set_meta(int32_t t, int32_t s) {
  layout_ = meta_layout(size_t(std::max(p_.max_logit_rows, 1)), size_t(t), size_t(s), size_t(table_width_));
  const auto at = [&](size_t off) { return meta_buf_.ptr() + 4 * CUdeviceptr(off); };
  meta_ = Meta{at(layout_.tokens),      at(layout_.positions), at(layout_.slots), at(layout_.q_start), at(layout_.pos0),
               at(layout_.state_slots), at(layout_.tables),    at(layout_.tiles), at(layout_.rows)};
}

void CudaDecoder::stage(const ForwardBatch &b, int32_t n_pad, int32_t n_tiles) {
  const int32_t T = b.n_tokens, n_seqs = b.attn.n_seqs;
  const int64_t Tm = p_.max_tokens, S = std::max(p_.max_seqs, 1);
  const int32_t seqs_pad = T == n_seqs ? n_pad : n_seqs;  // only a decode step (one row per sequence) is padded
  if (n_pad > Tm || seqs_pad > S) fail(VT_ERR_INTERNAL, "CudaDecoder: a step larger than its buffers");
  if (n_tiles > 0 && tiles_.size() > size_t(4 * (Tm + S)))
    fail(VT_ERR_INTERNAL, "CudaDecoder: more prefill tiles than room for them");
  set_meta(n_pad, seqs_pad);
  int32_t *h = meta_pinned_.as<int32_t>();
  staged_->synchronize();  // the previous step's copy out of this staging area has finished
  int32_t *tokens = h + layout_.tokens, *positions = h + layout_.positions, *slots = h + layout_.slots;
  int32_t *q_start = h + layout_.q_start, *pos0 = h + layout_.pos0, *tables = h + layout_.tables;
  int32_t *state_slots = h + layout_.state_slots;
  if (b.tokens_from_picks && step_advance_ && advanced_on_device(b, n_pad)) {  // nothing to upload: the mirror only
    std::copy_n(b.positions, T, positions);
    std::copy_n(b.slots, T, slots);
    std::copy_n(b.attn.seq_pos0, n_seqs, pos0);
    return;
  }
  staged_pad_ = n_pad, staged_rows_ = T;
  std::copy_n(b.tokens, T, tokens);
  std::copy_n(b.positions, T, positions);
  std::copy_n(b.slots, T, slots);
  for (int32_t t = T; t < n_pad; ++t) tokens[t] = 0, positions[t] = 0, slots[t] = -1;  // padding: nothing stored
  q_start[0] = 0;  // (an all-padding step, as when warming up the graphs, has no arrays at all)
  if (n_seqs > 0) std::copy_n(b.attn.seq_q_start + 1, n_seqs, q_start + 1);
  std::copy_n(b.attn.seq_pos0, n_seqs, pos0);
  if (b.state_slots) std::copy_n(b.state_slots, n_seqs, state_slots);
  else std::fill_n(state_slots, n_seqs, -1);
  // padding: a row each, from position 0, no state slot (the recurrent layers keep nothing of it)
  for (int32_t s = n_seqs; s < seqs_pad; ++s) q_start[s + 1] = s + 1, pos0[s] = 0, state_slots[s] = -1;
  const int32_t wb = b.attn.max_blocks_per_seq;
  for (int32_t s = 0; s < n_seqs; ++s) {
    std::copy_n(b.attn.block_tables + int64_t(s) * wb, std::min(wb, table_width_), tables + int64_t(s) * table_width_);
    if (wb < table_width_) std::fill_n(tables + int64_t(s) * table_width_ + wb, table_width_ - wb, 0);
  }
  std::fill_n(tables + int64_t(n_seqs) * table_width_, int64_t(seqs_pad - n_seqs) * table_width_, 0);
  size_t end = layout_.tiles;
  if (n_tiles > 0) {
    std::copy(tiles_.begin(), tiles_.end(), h + layout_.tiles);
    end += tiles_.size();
  }
  // A chained step's tokens are the previous step's picks, which its graph's argmax left in meta_.tokens: the rest only.
  const size_t begin = b.tokens_from_picks ? layout_.positions : layout_.tokens;
  cuda::check(cuda::driver().cuMemcpyHtoDAsync(meta_buf_.ptr() + begin * 4, h + begin, (end - begin) * 4, stream_->get()),
              "cuMemcpyHtoDAsync(step)");
  staged_->record(stream_->get());
}

bool CudaDecoder::advanced_on_device(const ForwardBatch &b, int32_t n_pad) const {
  const int32_t T = b.n_tokens;
  if (n_pad != staged_pad_ || T != staged_rows_ || T != b.attn.n_seqs) return false;
  // (layout_ is the last staged step's: the same rows and sequences)
  const int32_t *h = meta_pinned_.as<int32_t>();
  const int32_t *positions = h + layout_.positions, *slots = h + layout_.slots, *tables = h + layout_.tables;
  const int32_t *state_slots = h + layout_.state_slots;
  const int32_t bs = p_.block_size;
  // What step_advance (sample.cuh) computed from the mirrored values must be this step's: when a sequence has just
  // been given a new block, the tables uploaded last lack it and the step is uploaded as a whole.
  for (int32_t s = 0; s < T; ++s) {
    const int32_t next = positions[s] + 1, block = next / bs;
    if (slots[s] < 0 || block >= table_width_ || b.positions[s] != next || b.attn.seq_pos0[s] != next ||
        b.slots[s] != tables[int64_t(s) * table_width_ + block] * bs + next % bs ||
        (b.state_slots ? b.state_slots[s] : -1) != state_slots[s])  // (the same sequences: never differs)
      return false;
  }
  return true;
}

// A captured decode step (its argmax is in the graph, and a replayed step's rows are 0 .. n - 1), one read in flight
// per slot, and not while timing replays (VT_CUDA_REPLAY).
bool CudaDecoder::chains(int32_t n) const {
  return replays_ == 1 && n >= 1 && n <= p_.max_logit_rows && graphs_.bucket_for(n) != 0;
}

void CudaDecoder::chain_begin(int32_t n, const cuda::SampleRow *params) {
  if (begun_.size() >= 2 || n < 1 || n > p_.max_logit_rows || n > graph_rows_ || n > head_rows_)
    fail(VT_ERR_INTERNAL, "CudaDecoder::chain_begin: not after a captured decode step, or a third read");
  ctx_->make_current();
  if (params && !chains_sampled()) fail(VT_ERR_INTERNAL, "CudaDecoder::chain_begin: sampled rows cannot chain here");
  const int slot = next_slot_;
  next_slot_ ^= 1;
  const CUstream s = stream_->get();
  if (params) {  // the rows sampled where the step's argmax picked: the tokens and picks become the sampler's
    const int64_t R = p_.max_logit_rows;
    std::copy_n(params, n, chain_rows_pinned_.as<cuda::SampleRow>() + slot * R);
    const cuda::StepAdvance adv = advance_args(/*moved=*/true);  // the step's argmax moved the positions on
    ops_->sample(s, logits_, n, c_.vocab_size, c_.vocab_size,
                 chain_rows_pinned_.device_ptr() + CUdeviceptr(slot * R) * sizeof(cuda::SampleRow), ids_, 0,
                 meta_.tokens, &adv);
  }
  if (step_advance_) {  // the step's argmax writes the picks (a row's slot: its position's parity); stage's mirror
    const int32_t *positions = meta_pinned_.as<int32_t>() + layout_.positions;
    std::copy_n(positions, n, begun_positions_[slot].begin());
  } else {
    int32_t *out = out_pinned_.as<int32_t>() + int64_t(slot) * p_.max_logit_rows;
    cuda::check(cuda::driver().cuMemcpyDtoHAsync(out, ids_, size_t(n) * sizeof(int32_t), s), "cuMemcpyDtoHAsync(picks)");
  }
  picked_[slot]->record(s);
  begun_.push_back({slot, n});
}

void CudaDecoder::chain_end(int32_t *ids) {
  if (begun_.empty()) fail(VT_ERR_INTERNAL, "CudaDecoder::chain_end: no read begun");
  const auto [slot, n] = begun_.front();
  begun_.erase(begun_.begin());
  picked_[slot]->synchronize();
  const int32_t *out = out_pinned_.as<int32_t>();
  if (step_advance_)
    for (int32_t r = 0; r < n; ++r) ids[r] = out[int64_t(begun_positions_[slot][size_t(r)] & 1) * p_.max_logit_rows + r];
  else
    std::copy_n(out + int64_t(slot) * p_.max_logit_rows, n, ids);
}

}  // namespace vt
