#include "backend/cuda/cuda_decoder.h"

#include <cstdio>
#include <cstring>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

#include "backend/cuda/gemm_table.h"
#include "status.h"

namespace vt {

using cuda::CUdeviceptr;
using cuda::CUstream;

CUdeviceptr CudaDecoder::scratch(size_t elems, size_t elem_size) {
  const size_t bytes = std::max<size_t>(elems * elem_size, 16);
  cuda::DeviceBuffer buf(bytes);
  workspace_bytes_ += int64_t(bytes);
  const CUdeviceptr p = buf.ptr();
  buffers_.push_back(std::move(buf));
  return p;
}

BackendReport CudaDecoder::report() const {
  BackendReport r;
  // From the driver now, not from load: other processes (and our own growth) change what is free.
  const cuda::Context::MemInfo m = ctx_->mem_info();
  r.device = ctx_->ordinal();
  r.total_bytes = m.total_bytes >= 0 ? m.total_bytes : ctx_->total_bytes();
  r.free_bytes = m.free_bytes;
  r.unified_memory = ctx_->integrated();
  r.name = ctx_->name();
  r.graphs = graph_count();
  r.graph_bytes = graph_bytes();
  return r;
}

int32_t CudaDecoder::grow_kv(int32_t blocks) {
  ctx_->make_current();
  return kv_->grow(blocks);
}

int32_t CudaDecoder::trim_kv(int32_t blocks) {
  ctx_->make_current();
  return kv_->trim(blocks);  // (waits for the stream first)
}

int32_t CudaDecoder::grow_state_slots(int32_t slots) {
  if (!slots_) return 0;
  ctx_->make_current();
  return slots_->grow(slots);
}

int32_t CudaDecoder::trim_state_slots(int32_t slots) {
  if (!slots_) return 0;
  ctx_->make_current();
  return slots_->trim(slots);  // (waits for the stream first)
}

bool CudaDecoder::processors_on_device(const ModelConfig &c, const CudaTuning &t) {
  return t.penalties_on_device && t.sample_on_device && c.vocab_size <= cuda::Ops::kSampleMaxVocab;
}

namespace {

CudaModelOps::Params model_ops_params(const CudaDecoderParams &p, int32_t attn_rows, int32_t gemv_rows,
                                      bool fused_swiglu) {
  CudaModelOps::Params mp;
  mp.act = p.act, mp.max_tokens = p.max_tokens, mp.attn_rows = attn_rows, mp.max_context = std::max(p.max_context, 1);
  mp.gemv_rows = gemv_rows, mp.tuning = p.tuning, mp.fused_swiglu = fused_swiglu;
  return mp;
}

}  // namespace

CudaDecoder::Workspace CudaDecoder::plan_workspace(const ModelConfig &c, const CudaDecoderParams &p, int sm_count,
                                                   bool with_blas) {
  Workspace ws;
  const int64_t as = int64_t(cuda::act_size(p.act));
  const int64_t T = p.max_tokens, H = c.hidden_size, V = c.vocab_size;
  const int64_t R = std::max(p.max_logit_rows, 1), S = std::max(p.max_seqs, 1);
  ws.table_width = (std::max(p.max_context, 1) + p.block_size - 1) / p.block_size;
  // Split-K decode attention serves steps of up to max_seqs rows (every decode step).
  ws.attn_rows = int32_t(std::min<int64_t>(S, T));
  // The model's activations and the ops' scratch: the model declared over a sizing CudaModelOps.
  const ModelEntry &entry = model_entry(c);
  const Weights shapes = shape_weights(c, entry.schema(c));
  // (Our GEMMs serve every bf16 product unless the cuBLASLt A/B arm asks otherwise: every target has them.)
  const bool ours = p.act == cuda::Act::BF16 && p.tuning.gemm != "cublaslt";
  CudaModelOps sizing(c, model_ops_params(p, ws.attn_rows, 8, ours), sm_count);
  const std::unique_ptr<Model> model = entry.make(c, shapes, sizing);
  // The step's integers (meta_layout) at their largest: T rows, S sequences, 4 (T + S) prefill tiles.
  ws.meta_elems = meta_layout(size_t(R), size_t(T), size_t(S), size_t(ws.table_width)).tiles + size_t(4 * (T + S));
  // Every buffer the constructor allocates besides the model's (scratch() and the rest): the gathered lm_head rows
  // (fp32, and in the activation type for the GEMMs), logits, greedy ids and logprobs; the sampled rows' parameters
  // and top logprobs; the logits processors' staging (processors_on_device); the step's integers and the row list;
  // cuBLASLt's workspace (when it loads) and our GEMMs' split-K workspace (bf16 activations).
  const bool processors = processors_on_device(c, p.tuning);
  const auto buf = [](int64_t bytes) { return std::max<int64_t>(bytes, 16); };  // scratch()'s least
  ws.total = sizing.workspace_bytes() + buf(4 * R * H) + buf(as * R * H) + buf(R * V * 4) + 2 * buf(4 * R) +
             buf(int64_t(sizeof(cuda::SampleRow)) * R) + 2 * buf(4 * kMaxTopLogprobs * R) +
             (processors ? buf(int64_t(kProcBytes)) : 0) + int64_t(ws.meta_elems) * 4 + 4 * R +
             (with_blas ? int64_t(cuda::CublasLt::kWorkspaceBytes) : 0) +
             (p.act == cuda::Act::BF16 ? cuda::TensorGemm::kWorkspaceBytes : 0);
  // Page-locked host memory, as the constructor allocates it: the logits processors' staging, the step's
  // integers, the greedy ids and logprobs, the sampled rows' parameters and results, a chained sampled step's
  // parameters (two slots; counted whether or not the engine chains sampled steps).
  ws.pinned = (processors ? int64_t(kProcBytes) : 0) + int64_t(ws.meta_elems) * 4 + 8 * R +
              R * int64_t(kSampleStagingRowBytes) + 2 * R * int64_t(sizeof(cuda::SampleRow));
  return ws;
}

CudaDecoder::CudaDecoder(const ModelConfig &config, const Weights &w, const Checkpoint *ck, const CudaDecoderParams &p,
                         const Progress &progress, decltype(ModelEntry::make) make)
    : c_(config), p_(p) {
  const CudaTuning &t = p.tuning;
  ctx_ = std::make_unique<cuda::Context>(0, t.pdl);
  stream_ = std::make_unique<cuda::Stream>();
  ops_ = std::make_unique<cuda::Ops>(*ctx_, p.act, t.ops);
  skip_argmax_ = (t.skip & kSkipArgmax) != 0;  // timing only (experiments builds); tuning_from_env said so on stderr
  graphs_lazy_ = p.graph_first_use;
  replays_ = t.replays;
  step_advance_ = replays_ == 1;
  // Sampled rows are picked on the GPU; VT_CUDA_SAMPLE=0 sends their logits to the host sampler instead.
  sample_on_device_ = t.sample_on_device && c_.vocab_size <= cuda::Ops::kSampleMaxVocab;
  const bool penalties_on_device = processors_on_device(c_, t);
  if (!t.gemm_shapes.empty()) cuda::gemm_shapes_override(t.gemm_shapes);  // (experiments builds only)
  if (p.act == cuda::Act::BF16) {  // our tensor-core GEMMs; cuBLASLt only as the A/B's baseline or without them
    gemm_ = std::make_unique<cuda::TensorGemm>(*ctx_, stream_->get(), t.gemm_pdl_mma, t.gemm_pdl_wgmma);
    if (!gemm_->available()) gemm_.reset();
  }
  if (p.act == cuda::Act::BF16 && t.cublaslt && (!gemm_ || t.gemm == "cublaslt")) {
    blas_ = std::make_unique<cuda::CublasLt>(*ctx_);
    if (!blas_->available()) blas_.reset();
  }
  // The GEMV's rows: the selection table's (measured with our GEMMs beyond it); 4 when cuBLASLt takes the rest.
  const bool blas_first = blas_ && t.gemm == "cublaslt";
  const int32_t gemv_rows = blas_first ? 4
                          : gemm_ ? cuda::gemm_table(ctx_->compute_capability(), gemm_->has_wgmma()).gemv_rows
                                  : 8;

  const size_t as = cuda::act_size(p.act);
  const int64_t T = p.max_tokens, H = c_.hidden_size, V = c_.vocab_size;
  const int64_t KVD = int64_t(c_.n_kv_heads) * c_.head_dim;
  const int64_t R = std::max(p.max_logit_rows, 1), S = std::max(p.max_seqs, 1);
  // The KV pool's planes (K and V of each attention layer) in blocks of plane_block bytes, of which the first
  // base_blocks are mapped at load (the rest of the ceiling as requests need them: cuda::KvPool), and the state
  // slots the same way, slot_stride bytes apart, the first base_slots mapped at load.
  const int64_t plane_block = int64_t(p.block_size) * KVD * int64_t(as);
  const int32_t base_blocks = p.n_blocks_base > 0 ? std::min(p.n_blocks_base, p.n_blocks) : p.n_blocks;
  const int64_t slot_bytes = p.state.slot_elems() * int64_t(sizeof(float));
  const int64_t slot_stride = p.state_slot_stride > 0 ? p.state_slot_stride : slot_bytes;
  if (slot_stride < slot_bytes || slot_stride % int64_t(sizeof(float)) != 0)
    fail(VT_ERR_INTERNAL, "CudaDecoder: a state slot stride of " + std::to_string(slot_stride) + " bytes for slots of " +
                              std::to_string(slot_bytes));
  const int32_t n_slots = slot_bytes > 0 ? std::max(p.n_state_slots, 0) : 0;
  const int32_t base_slots = p.n_state_slots_base > 0 ? std::min(p.n_state_slots_base, n_slots) : n_slots;
  const int64_t kv_total = plane_block * 2 * p.state.n_paged() * base_blocks + slot_stride * base_slots;
  const Workspace ws = plan_workspace(c_, p, ctx_->sm_count(), blas_ != nullptr);
  table_width_ = ws.table_width, attn_rows_ = ws.attn_rows;
  meta_elems_ = ws.meta_elems;
  const int64_t work = ws.total;

  // Fail before uploading anything when it cannot fit, naming the options that change it.
  const int64_t needed = w.bytes + kv_total + work, free = ctx_->free_bytes();
  if (needed > free)
    fail(VT_ERR_OUT_OF_MEMORY, "this engine needs " + std::to_string(needed >> 20) + " MiB of GPU memory (weights " +
                                   std::to_string(w.bytes >> 20) + " MiB, KV cache " + std::to_string(kv_total >> 20) +
                                   " MiB, workspaces " + std::to_string(work >> 20) + " MiB) but " + ctx_->name() +
                                   " has " + std::to_string(free >> 20) +
                                   " MiB free; lower maxContext (or maxBatchTokens, maxSeqs)");

  // The model binds its weights as it is built: the matrices go through pinned staging slots (StagedUpload: several
  // copy threads, the transfers overlapped with them); the stager lives for the upload only, and is waited for
  // before anything else runs. Straight from the mapping when the 64 MiB of pinned host memory cannot be had (the
  // load goes on, only slower).
  std::optional<cuda::StagedUpload> stager;
  CudaModelOps::Upload up;
  try {
    up.stager = &stager.emplace(stream_->get());
  } catch (const Error &) {
    up.stager = nullptr;
  }
  up.checkpoint = ck;
  const int total_mib = int(std::max<int64_t>(w.bytes >> 20, 1));
  if (progress)
    up.uploaded = [&](int64_t bytes) { progress("weights", int(std::min<int64_t>(bytes >> 20, total_mib)), total_mib); };
  mops_ = std::make_unique<CudaModelOps>(c_, model_ops_params(p, attn_rows_, gemv_rows, gemm_ && !blas_first), *ctx_, *ops_,
                                         blas_first ? nullptr : gemm_.get(), blas_.get(),
                                         stream_->get());
  mops_->set_upload(&up);
  model_ = (make ? make : model_entry(c_).make)(c_, w, *mops_);
  mops_->set_upload(nullptr);
  if (stager) stager->finish();
  if (progress) progress("weights", total_mib, total_mib);
  // (bf16 activations only: with fp32 ones the output rows are the output tensor itself, which the fused lm_head
  // would read as it writes them.)
  head_norm_ = ops_->has_gemv_norm_head() && p.act == cuda::Act::BF16 &&
               mops_->matrix(model_->head()).dtype == DType::BF16;

  // The pool zeroes what it maps (kv_pool.h says why); so does the slots' (a fresh sequence never reads its slot:
  // only a slot a graph's padding rows would never touch, and none does, could see anything else).
  kv_ = std::make_unique<cuda::KvPool>(*ctx_, stream_->get(), 2 * p.state.n_paged(), plane_block, p.n_blocks,
                                       base_blocks, p.kv_grows);
  if (n_slots > 0) {
    // Where the device cannot map in chunks the slots are all allocated at load, as many as the plan has (never
    // cut to the base, as a KV pool's ceiling is: maxSeqs already bounds them). (The plan has seen the same device
    // attribute and made them fixed then: this only guards a caller that asks for growth regardless.)
    const bool grows = p.slots_grow && cuda::kv_pool_support(ctx_->ordinal()).vmm;
    cuda::KvPoolNames names;
    names.pool = "state slots", names.blocks = "slots", names.fixed_advice = "maxSeqs sets how many";
    names.base_advice = "lower maxContext (or maxBatchTokens, maxSeqs)";
    slots_ = std::make_unique<cuda::KvPool>(*ctx_, stream_->get(), 1, slot_stride, n_slots, grows ? base_slots : n_slots,
                                            grows, names);
  }
  mops_->set_kv(kv_->base(), kv_->plane_stride(), p.state);
  mops_->set_state_slots(slots_ ? slots_->base() : 0, slot_stride / int64_t(sizeof(float)));
  last_ = scratch(R * H, 4), last_act_ = scratch(R * H, as);
  logits_ = scratch(R * V, sizeof(float));
  ids_ = scratch(R, 4), lps_ = scratch(R, 4);
  sample_rows_ = scratch(R, sizeof(cuda::SampleRow));
  top_ids_ = scratch(R * kMaxTopLogprobs, 4), top_lps_ = scratch(R * kMaxTopLogprobs, 4);
  if (penalties_on_device) {  // counted in plan_workspace, so in Engine.estimate too
    proc_dev_ = scratch(kProcBytes, 1);
    proc_pinned_ = cuda::PinnedBuffer(kProcBytes);
  }
  meta_buf_ = cuda::DeviceBuffer(meta_elems_ * 4);
  workspace_bytes_ += int64_t(meta_buf_.bytes()) + (blas_ ? blas_->workspace_bytes() : 0) +
                      (gemm_ ? gemm_->workspace_bytes() : 0);
  meta_pinned_ = cuda::PinnedBuffer(meta_elems_ * 4);
  staged_ = std::make_unique<cuda::Event>();
  for (auto &e : picked_) e = std::make_unique<cuda::Event>();
  // Two slots of R ids (chain_begin), or ids and logprobs; mapped when the captured step writes the picks there.
  out_pinned_ = cuda::PinnedBuffer(size_t(R) * 8, step_advance_);
  for (auto &v : begun_positions_) v.resize(size_t(R));
  sample_pinned_ = cuda::PinnedBuffer(size_t(R) * kSampleStagingRowBytes);
  // (allocated either way, as plan_workspace counts it: mapped, so chains_sampled(), only where it is used)
  chain_rows_pinned_ =
      cuda::PinnedBuffer(2 * size_t(R) * sizeof(cuda::SampleRow), /*mapped=*/step_advance_ && sample_on_device_);
  pinned_bytes_ = int64_t(proc_pinned_.bytes() + meta_pinned_.bytes() + out_pinned_.bytes() + sample_pinned_.bytes() +
                          chain_rows_pinned_.bytes());
  set_meta(int32_t(T), int32_t(S));
  std::vector<int32_t> iota(static_cast<size_t>(R));
  for (int32_t i = 0; i < int32_t(R); ++i) iota[size_t(i)] = i;
  iota_ = cuda::DeviceBuffer(iota.size() * 4);
  iota_.upload(stream_->get(), iota.data(), iota.size() * 4);
  workspace_bytes_ += int64_t(iota_.bytes());
  stream_->synchronize();  // (all of the load's work is on this stream; a context-wide wait would break the
                           // graph capture of another engine loading or decoding in the process)
  if (!p.graph_buckets.empty()) {
    if (progress && !graphs_lazy_) progress("cuda graphs", 0, 1);
    capture_graphs();
    if (progress && !graphs_lazy_) progress("cuda graphs", 1, 1);
  }
}

CudaDecoder::~CudaDecoder() {
  // The buffers are freed by the members' destructors, on whatever thread destroys the engine; first the step still
  // in flight (an overlapped decode step, and its copy into out_pinned_) runs out.
  try {
    ctx_->make_current();
    cuda::synchronize(stream_->get());
  } catch (...) {
  }
}

void CudaDecoder::run_model(int32_t T, int32_t n_seqs, int32_t max_keys, bool multi_row, int32_t n_tiles,
                            bool fold_norm) {
  CudaModelOps::Step st;
  st.rows = T, st.n_seqs = n_seqs, st.max_keys = max_keys, st.multi_row = multi_row, st.n_tiles = n_tiles;
  st.tokens = meta_.tokens, st.positions = meta_.positions, st.slots = meta_.slots, st.tiles = meta_.tiles;
  st.attn = cuda::DeviceAttentionBatch{n_seqs, meta_.q_start, meta_.pos0, meta_.tables, table_width_, p_.block_size};
  st.state_slots = meta_.state_slots;
  st.fold_output_norm = fold_norm;
  mops_->begin_step(st);
  model_->forward(*mops_);
}

void CudaDecoder::head(CUdeviceptr rows, int32_t n, bool with_argmax, bool step) {
  const CUstream s = stream_->get();
  const int64_t H = c_.hidden_size, V = c_.vocab_size;
  const CudaModelOps::DMatrix &lm = mops_->matrix(model_->head());
  const CudaModelOps::OutputRows out = mops_->output_rows(model_->output());
  // Gather the rows (the embedding kernel is a row gather). Up to gemv_rows_max() rows the GEMV reads the fp32
  // rows; more go through the tensor-core GEMMs in bf16 (the lm_head is most of a large batch's arithmetic).
  if ((gemm_ || blas_) && n > mops_->gemv_rows_max() && lm.dtype == DType::BF16) {
    ops_->embed(s, out.f32, DType::F32, H, rows, n, last_act_, /*out_f32=*/false);
    mops_->product(last_act_, n, lm, logits_, /*y_f32=*/true);
  } else if (step && out.lazy) {  // the final norm here, from the last kAddNorm's xw and partials
    ops_->gemv_norm_head(s, out.xw, out.norm_ss, H, c_.rms_norm_eps, lm.ptr, V, logits_, out.residual, out.norm,
                         out.f32);
  } else if (step) {  // rows 0 .. n - 1: the gather would copy the output rows as they are
    mops_->product(out.f32, n, lm, logits_, /*y_f32=*/true, /*x_f32=*/true);
  } else {
    ops_->embed(s, out.f32, DType::F32, H, rows, n, last_, /*out_f32=*/true);
    mops_->product(last_, n, lm, logits_, /*y_f32=*/true, /*x_f32=*/true);
  }
  // A captured step also leaves its picks as the tokens of a chained next step, and with step_advance_ the picks in
  // host memory and the metadata one token on (stage() then uploads nothing, or all but the tokens).
  if (with_argmax && !skip_argmax_) {
    const cuda::StepAdvance adv = advance_args(/*moved=*/false);
    ops_->argmax(s, logits_, n, V, V, ids_, lps_, step ? meta_.tokens : 0, step && step_advance_ ? &adv : nullptr);
  }
}

void CudaDecoder::record_step(int32_t B, int32_t max_keys) {
  set_meta(B, B);  // where stage(b, B) puts a decode step of that bucket
  run_model(B, B, max_keys, false, 0, /*fold_norm=*/head_norm_ && B == 1);
  head(iota_.ptr(), B, true, /*step=*/true);
}

void CudaDecoder::capture_graphs() {
  // Buckets above what one step can hold are dropped (the scheduler never makes such a step).
  std::vector<int32_t> buckets;
  for (int32_t b : p_.graph_buckets)
    if (b >= 1 && b <= std::min({p_.max_seqs, p_.max_tokens, p_.max_logit_rows, attn_rows_})) buckets.push_back(b);
  if (buckets.empty()) return;
  // The buckets whose attention takes another form at short contexts get a second graph for those steps.
  std::vector<int32_t> short_buckets;
  const int32_t short_keys = cuda::Ops::kClusterMaxKeys;
  for (int32_t b : buckets)
    if (!ops_->attention_cluster(b, c_.n_kv_heads, c_.head_dim, p_.max_context) &&
        ops_->attention_cluster(b, c_.n_kv_heads, c_.head_dim, short_keys))
      short_buckets.push_back(b);
  if (graphs_lazy_) {  // each captured by forward() when first needed
    graphs_.plan(buckets);
    if (!short_buckets.empty()) short_graphs_.plan(short_buckets);
    return;
  }
  const ForwardBatch none{};  // every row padding
  graphs_.build(
      *ctx_, stream_->get(), buckets, p_.graph_dedup, [&](int32_t B) { record_step(B, p_.max_context); },
      [&](int32_t B) { stage(none, B); });
  if (!short_buckets.empty())
    short_graphs_.build(
        *ctx_, stream_->get(), short_buckets, p_.graph_dedup, [&](int32_t B) { record_step(B, short_keys); },
        [&](int32_t B) { stage(none, B); });
}

void CudaDecoder::forward(const ForwardBatch &b) {
  ctx_->make_current();
  graph_rows_ = 0, head_rows_ = 0;
  const int32_t T = b.n_tokens;
  if (T <= 0) return;
  if (T > p_.max_tokens) fail(VT_ERR_INTERNAL, "CudaDecoder::forward: more rows than maxBatchTokens");
  const cpu::AttentionBatch &a = b.attn;
  const bool decode = T == a.n_seqs;
  int32_t max_keys = 1;  // of any row of the step
  for (int32_t s = 0; s < a.n_seqs; ++s)
    max_keys = std::max(max_keys, a.seq_pos0[s] + a.seq_q_start[s + 1] - a.seq_q_start[s]);
  if (const int32_t bucket = decode ? graphs_.bucket_for(T) : 0) {
    // A short step replays its bucket's short graph where there is one (the graphs are right for any lengths).
    const int32_t short_keys = cuda::Ops::kClusterMaxKeys;
    const bool short_step = max_keys <= short_keys && short_graphs_.bucket_for(T) == bucket;
    cuda::DecodeGraphs &g = short_step ? short_graphs_ : graphs_;
    const int32_t keys = short_step ? short_keys : p_.max_context;
    if (!g.has(bucket))  // capture 'first-use': this bucket's first step captures it
      g.add(*ctx_, stream_->get(), bucket, p_.graph_dedup, [&](int32_t B) { record_step(B, keys); });
    stage(b, bucket);
    for (int i = 0; i < replays_; ++i) g.launch(bucket, stream_->get());
    graph_rows_ = T, head_rows_ = T;
    return;
  }
  if (b.tokens_from_picks) fail(VT_ERR_INTERNAL, "CudaDecoder::forward: picks as tokens outside a captured step");
  int32_t n_tiles = 0;
  if (mops_->prefill_tiles_wanted(T, !decode)) n_tiles = cuda::Ops::prefill_tiles(a.seq_q_start, a.n_seqs, &tiles_, a.seq_pos0);
  stage(b, T, n_tiles);
  run_model(T, a.n_seqs, max_keys, !decode, n_tiles, false);
}

}  // namespace vt
