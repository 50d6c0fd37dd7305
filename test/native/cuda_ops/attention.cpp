// CUDA op checks: paged attention (the simple kernel, split-K decode, tensor-core prefill) on ragged batches.
#include "../cuda_check.h"

namespace cuda_tests {

std::vector<float> inv_freq_table(int head_dim, double theta);  // elementwise.cpp
std::vector<float> rand_weight(size_t n);                        // elementwise.cpp

// The rows of one attention case: sequences given as (query rows, first query position) → the batch's
// q_start (n_seqs + 1) and pos0 (n_seqs), its T rows, the blocks each sequence's keys need (the most, at least
// min_blocks, and the sum) and the longest key count of a sequence with query rows (at least 1).
struct BatchLayout {
  std::vector<int32_t> q_start, pos0;
  int32_t T = 0, max_blocks = 0, total_blocks = 0, longest = 1;
};
BatchLayout layout_of(const std::vector<std::pair<int32_t, int32_t>> &seqs, int32_t bs, int32_t min_blocks) {
  BatchLayout b;
  const size_t n = seqs.size();
  b.q_start.assign(n + 1, 0);
  b.pos0.resize(n);
  b.max_blocks = min_blocks;
  for (size_t s = 0; s < n; ++s) {
    b.q_start[s + 1] = b.q_start[s] + seqs[s].first;
    b.pos0[s] = seqs[s].second;
    const int32_t n_keys = seqs[s].second + seqs[s].first, nb = (n_keys + bs - 1) / bs;
    b.max_blocks = std::max(b.max_blocks, nb);
    b.total_blocks += nb;
    if (seqs[s].first > 0) b.longest = std::max(b.longest, n_keys);
  }
  b.T = b.q_start.back();
  return b;
}

// The caches of one attention case: sequences given as (query rows, first query position), each owning
// ceil(keys / bs) blocks handed out in a shuffled order (so tables are not the identity), every key and value
// random, and 3 spare blocks plus every slot past a sequence's keys NaN (a kernel reading them fails the check).
struct PagedKv {
  std::vector<int32_t> tables;  // (n_seqs, max_blocks), -1 past a sequence's blocks
  std::vector<float> k, v;      // (n_blocks, bs, n_kv, hd)
  int32_t n_blocks = 0;
};
PagedKv make_paged_kv(const std::vector<std::pair<int32_t, int32_t>> &seqs, int32_t n_kv, int32_t hd, int32_t bs,
                      Act act, int32_t max_blocks, int32_t total_blocks) {
  PagedKv kv;
  const int32_t n_seqs = int32_t(seqs.size());
  kv.n_blocks = total_blocks + 3;  // spares, never handed out: NaN throughout
  std::vector<int32_t> perm(static_cast<size_t>(kv.n_blocks));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), g_rng);
  kv.tables.assign(size_t(n_seqs) * size_t(max_blocks), -1);
  const int64_t row = int64_t(n_kv) * hd;
  kv.k.assign(size_t(kv.n_blocks) * size_t(bs) * size_t(row), NAN);
  kv.v = kv.k;
  int32_t next = 0;
  for (int32_t s = 0; s < n_seqs; ++s) {
    const int32_t n_keys = seqs[size_t(s)].second + seqs[size_t(s)].first;
    for (int32_t b = 0; b < (n_keys + bs - 1) / bs; ++b) kv.tables[size_t(s * max_blocks + b)] = perm[size_t(next++)];
    for (int32_t p = 0; p < n_keys; ++p) {
      const int64_t slot = int64_t(kv.tables[size_t(s * max_blocks + p / bs)]) * bs + p % bs;
      auto kr = rand_act(size_t(row), act, -2, 2), vr = rand_act(size_t(row), act, -1, 1);
      std::copy(kr.begin(), kr.end(), kv.k.begin() + slot * row);
      std::copy(vr.begin(), vr.end(), kv.v.begin() + slot * row);
    }
  }
  return kv;
}

// cpu::attention over a case's batch and caches: the reference every attention kernel is held to.
std::vector<float> attention_reference(Env &env, const std::vector<float> &q, const BatchLayout &b, const PagedKv &kv,
                                       int32_t bs, int32_t n_heads, int32_t n_kv, int32_t hd, float scale) {
  const cpu::AttentionBatch cb{int32_t(b.pos0.size()), b.q_start.data(), b.pos0.data(), kv.tables.data(), b.max_blocks,
                               bs};
  std::vector<float> ref(q.size());
  cpu::attention(env.pool, q.data(), kv.k.data(), kv.v.data(), cb, n_heads, n_kv, hd, scale, ref.data());
  return ref;
}

// One attention case: sequences given as (query rows, first query position).
void test_attention_case(Env &env, cuda::Ops &ops, int32_t n_heads, int32_t n_kv, int32_t hd, int32_t bs,
                         const std::vector<std::pair<int32_t, int32_t>> &seqs, const char *label) {
  const Act act = ops.act();
  check_case(env,
             fmt("attention[%s] %s heads %d kv_heads %d head_dim %d block %d seqs %zu", cuda::act_name(act), label,
                 n_heads, n_kv, hd, bs, seqs.size()),
             [&](std::string &why) {
               const int32_t n_seqs = int32_t(seqs.size());
               const BatchLayout b = layout_of(seqs, bs, 0);
               const int32_t T = b.T, max_blocks = b.max_blocks;
               const PagedKv kv = make_paged_kv(seqs, n_kv, hd, bs, act, max_blocks, b.total_blocks);
               auto q = rand_act(size_t(T) * size_t(n_heads) * size_t(hd), act, -2, 2);
               const float scale = 1.0f / std::sqrt(float(hd));

               Dev dq = upload_act(q, act), dk = upload_act(kv.k, act), dv = upload_act(kv.v, act);
               DeviceBuffer dstart = upload_raw(b.q_start), dpos = upload_raw(b.pos0), dtab = upload_raw(kv.tables);
               Dev out = poisoned(q.size(), act);
               cuda::DeviceAttentionBatch db{n_seqs, dstart.ptr(), dpos.ptr(), dtab.ptr(), max_blocks, bs};
               ops.attention(env.stream.get(), dq.ptr(), dk.ptr(), dv.ptr(), db, T, n_heads, n_kv, hd, scale, out.ptr());
               env.stream.synchronize();

               const std::vector<float> ref = attention_reference(env, q, b, kv, bs, n_heads, n_kv, hd, scale);
               bool guard = false;
               // fp32 sums over thousands of keys in different orders: the error scales with the values summed
               // (|v| < 1), not with the result, which shrinks like 1/sqrt(keys); bf16 is bounded by its rounding
               const auto got = download(out, &guard);  // before close() reads guard
               return close(got, ref, tol_for(act), guard, &why, act == Act::F32 ? 0.05 : 0);
             });
}

void test_attention(Env &env, cuda::Ops &ops) {
  // decode batches: one query per sequence, positions on, just before and just after block boundaries
  std::vector<std::pair<int32_t, int32_t>> decode;
  for (int32_t p : {0, 1, 14, 15, 16, 17, 31, 32, 33, 100, 255, 256, 1000}) decode.push_back({1, p});
  std::shuffle(decode.begin(), decode.end(), g_rng);
  test_attention_case(env, ops, 32, 8, 128, 16, decode, "decode ragged");
  test_attention_case(env, ops, 16, 2, 64, 16, decode, "decode ragged");
  test_attention_case(env, ops, 8, 8, 256, 32, decode, "decode ragged");
  test_attention_case(env, ops, 4, 1, 80, 7, decode, "decode ragged, odd block");
  test_attention_case(env, ops, 6, 3, 70, 5, {{1, 0}, {1, 9}, {1, 10}, {1, 11}}, "head_dim not a multiple of 4");
  test_attention_case(env, ops, 2, 2, 16, 1, {{1, 0}, {1, 1}, {1, 2}}, "block size 1");
  if (g_small) return;
  // random ragged decode batch of 64
  std::vector<std::pair<int32_t, int32_t>> big;
  for (int i = 0; i < 64; ++i) big.push_back({1, int32_t(below(3000))});
  test_attention_case(env, ops, 32, 8, 128, 16, big, "64 random decodes");
  // prefill rows (causal within the chunk) next to decodes
  test_attention_case(env, ops, 8, 2, 64, 16, {{5, 0}, {1, 13}, {20, 6}, {1, 0}, {33, 31}}, "mixed prefill/decode");
  // long contexts
  test_attention_case(env, ops, 32, 8, 128, 16, {{1, 16383}, {1, 8191}}, "long context");
  test_attention_case(env, ops, 8, 1, 128, 256, {{1, 32767}}, "long context 32k, big blocks");
}

// ---------------------------------------------------------------------------------------------------------------
// Split-K decode attention (attention_split.cuh) against cpu::attention: the same ragged batches over shuffled
// block tables with every slot outside the batch's keys NaN, a NaN-poisoned output with a guard, and a workspace
// whose scratch part is NaN (only the tickets zero), so a partial the merge reads without its block having
// written it shows. Each case runs twice on the same workspace: the tickets must be back at zero after each
// call and the second output bitwise equal to the first (the merge order is fixed). The split count follows
// from the GPU's SM count, so a batch of a few rows runs most rows in several splits (batch 1 at 4096 keys:
// 32 on an H200) and a batch of 64 in one.

struct DecodeCase {
  int32_t max_keys_extra = 0;  // max_keys = the longest row + this (the graph case: a bound, not the length)
  int32_t max_keys_cut = 0;    // max_keys = the longest row - this (past the contract's bound: still right)
  int64_t q_pad = 0;           // extra (NaN) elements per q row, as q inside a fused qkv buffer
  int64_t cache_offset = 0;    // caches start this many elements into their buffers (misaligned when odd)
};

void test_attention_decode_case(Env &env, cuda::Ops &ops, int32_t n_heads, int32_t n_kv, int32_t hd, int32_t bs,
                                const std::vector<std::pair<int32_t, int32_t>> &seqs, const char *label,
                                DecodeCase opt = {}) {
  const Act act = ops.act();
  const int32_t n_seqs = int32_t(seqs.size());
  const BatchLayout b = layout_of(seqs, bs, 1);
  const std::vector<int32_t> &q_start = b.q_start, &pos0 = b.pos0;
  const int32_t T = b.T, max_blocks = b.max_blocks, total_blocks = b.total_blocks, longest = b.longest;
  const int32_t max_keys = std::max(1, longest + opt.max_keys_extra - opt.max_keys_cut);
  const int32_t splits = ops.attention_splits(T, n_kv, max_keys);
  check_case(env,
             fmt("attention_decode[%s] %s heads %d kv_heads %d head_dim %d block %d seqs %zu max_keys %d splits %d%s%s",
                 cuda::act_name(act), label, n_heads, n_kv, hd, bs, seqs.size(), max_keys, splits,
                 opt.q_pad ? " strided q" : "", opt.cache_offset ? " offset caches" : ""),
             [&](std::string &why) {
               const PagedKv kv = make_paged_kv(seqs, n_kv, hd, bs, act, max_blocks, total_blocks);
               const std::vector<int32_t> &tables = kv.tables;
               const std::vector<float> &kc = kv.k, &vc = kv.v;
               const int64_t width = int64_t(n_heads) * hd, stride = width + opt.q_pad;
               auto q = rand_act(size_t(T) * size_t(width), act, -2, 2);
               std::vector<float> q_rows(size_t(T) * size_t(stride), NAN);  // columns past the heads: not to be read
               for (int32_t t = 0; t < T; ++t) std::copy_n(q.begin() + t * width, width, q_rows.begin() + t * stride);
               const float scale = 1.0f / std::sqrt(float(hd));
               std::vector<float> kc_dev(size_t(opt.cache_offset), NAN), vc_dev = kc_dev;
               kc_dev.insert(kc_dev.end(), kc.begin(), kc.end());
               vc_dev.insert(vc_dev.end(), vc.begin(), vc.end());

               Dev dq = upload_act(q_rows, act), dk = upload_act(kc_dev, act), dv = upload_act(vc_dev, act);
               DeviceBuffer dstart = upload_raw(q_start), dpos = upload_raw(pos0), dtab = upload_raw(tables);
               const size_t ws_bytes = ops.attention_workspace_bytes(T, n_heads, n_kv, hd, max_keys);
               const size_t ticket_bytes = cuda::Ops::attention_tickets_bytes(T, n_kv);
               if ((splits == 1) != (ws_bytes == 0))
                 return why = fmt("workspace of %zu bytes for %d splits", ws_bytes, splits), false;
               DeviceBuffer ws = upload_raw(std::vector<uint8_t>(ws_bytes, 0xff));  // scratch NaN (one byte when empty)
               DeviceBuffer tk = upload_raw(std::vector<uint8_t>(ticket_bytes, 0));
               const CUdeviceptr ws_ptr = ws_bytes ? ws.ptr() : 0;
               const CUdeviceptr off = CUdeviceptr(opt.cache_offset * int64_t(cuda::act_size(act)));
               cuda::DeviceAttentionBatch db{n_seqs, dstart.ptr(), dpos.ptr(), dtab.ptr(), max_blocks, bs};

               const std::vector<float> ref = attention_reference(env, q, b, kv, bs, n_heads, n_kv, hd, scale);

               std::vector<float> first;
               for (int run = 0; run < 2; ++run) {
                 Dev out = poisoned(q.size(), act);
                 ops.attention_decode(env.stream.get(), dq.ptr(), opt.q_pad ? stride : 0, dk.ptr() + off,
                                      dv.ptr() + off, db, T, n_heads, n_kv, hd, scale, max_keys, tk.ptr(), ws_ptr,
                                      ws_bytes, out.ptr());
                 env.stream.synchronize();
                 if (ws_bytes) {
                   std::vector<uint32_t> tickets(size_t(T) * size_t(n_kv));
                   tk.download(env.stream.get(), tickets.data(), ticket_bytes);
                   if (!std::all_of(tickets.begin(), tickets.end(), [](uint32_t x) { return x == 0; }))
                     return why = fmt("run %d left a ticket non-zero", run + 1), false;
                 }
                 bool guard = false;
                 const auto got = download(out, &guard);  // before close() reads guard
                 if (run == 1) {
                   if (!guard) return why = "run 2 wrote past the end of the output", false;
                   return std::memcmp(got.data(), first.data(), got.size() * sizeof(float)) == 0 ||
                          (why = "a second run on the same workspace gave different bits", false);
                 }
                 // fp32: sums over thousands of keys in different orders, an error that scales with the values
                 // summed (|v| < 1), not with the result (~1/sqrt(keys)). bf16: the weights are rounded to bf16
                 // for the tensor cores (within 2^-9 each, attention_mma.cuh), so the error is at most
                 // 2^-9 * sum_i w_i |v_i| <= 2e-3 whatever the result's size; on the H200 the 64-sequence case
                 // (~3000 keys, one split) erred up to 5.9e-4 on results of ~0.002, 1.01x and 1.06x a bound
                 // without floor in two runs. The floor 0.1 (1e-3 at tol 1e-2) holds the worst case seen with
                 // margin; a key too many or too few is caught by the exact-weights case below, not here.
                 if (!close(got, ref, tol_for(act), guard, &why, act == Act::F32 ? 0.05 : 0.1)) return false;
                 first = got;
               }
               return true;
             });
}

// One tickets buffer and one workspace shared by calls of different row counts, as an engine's steps share them
// (CudaModelOps): a call of few rows in several splits, then one of more rows, then both again, each against the
// reference and each leaving the tickets at zero. When the tickets sat at the start of the workspace and the
// partials after them, the few-row call's partials lay where the many-row call counted its tickets (from 64
// (row, kv head) pairs on): their merges never happened, and the tickets stayed spoilt for every later call.
// many_rows: rows whose (row, kv head) pairs pass 64 (more than 256 bytes of tickets) but stay under 2 SMs' worth,
// so that the call still splits its rows.
void test_attention_decode_shared(Env &env, cuda::Ops &ops, int32_t n_heads, int32_t n_kv, int32_t hd, int many_rows) {
  const Act act = ops.act();
  std::vector<std::pair<int32_t, int32_t>> few = {{1, 700}, {1, 900}}, many;
  for (int i = 0; i < many_rows; ++i) many.push_back({1, 200 + int32_t(below(1300))});
  int32_t t_max = 0;
  size_t ws_bytes = 0;
  for (const auto *seqs : {&few, &many}) {
    const BatchLayout b = layout_of(*seqs, 16, 1);
    t_max = std::max(t_max, b.T);
    ws_bytes = std::max(ws_bytes, ops.attention_workspace_bytes(b.T, n_heads, n_kv, hd, b.longest));
  }
  const size_t ticket_bytes = cuda::Ops::attention_tickets_bytes(t_max, n_kv);
  DeviceBuffer ws = upload_raw(std::vector<uint8_t>(ws_bytes, 0xff)), tk = upload_raw(std::vector<uint8_t>(ticket_bytes, 0));
  int call = 0;
  for (const auto *seqs : {&few, &many, &few, &many}) {
    ++call;
    const BatchLayout b = layout_of(*seqs, 16, 1);
    check_case(env,
               fmt("attention_decode[%s] shared tickets and workspace, call %d: %d rows, heads %d kv_heads %d head_dim %d",
                   cuda::act_name(act), call, b.T, n_heads, n_kv, hd),
               [&](std::string &why) {
                 const PagedKv kv = make_paged_kv(*seqs, n_kv, hd, 16, act, b.max_blocks, b.total_blocks);
                 const auto q = rand_act(size_t(b.T) * size_t(n_heads) * size_t(hd), act, -2, 2);
                 const float scale = 1.0f / std::sqrt(float(hd));
                 Dev dq = upload_act(q, act), dk = upload_act(kv.k, act), dv = upload_act(kv.v, act);
                 DeviceBuffer dstart = upload_raw(b.q_start), dpos = upload_raw(b.pos0), dtab = upload_raw(kv.tables);
                 const cuda::DeviceAttentionBatch db{int32_t(seqs->size()), dstart.ptr(), dpos.ptr(), dtab.ptr(), b.max_blocks, 16};
                 Dev out = poisoned(q.size(), act);
                 ops.attention_decode(env.stream.get(), dq.ptr(), 0, dk.ptr(), dv.ptr(), db, b.T, n_heads, n_kv, hd, scale,
                                      b.longest, tk.ptr(), ws.ptr(), ws_bytes, out.ptr());
                 env.stream.synchronize();
                 std::vector<uint32_t> tickets(ticket_bytes / 4);
                 tk.download(env.stream.get(), tickets.data(), ticket_bytes);
                 if (!std::all_of(tickets.begin(), tickets.end(), [](uint32_t x) { return x == 0; }))
                   return why = "a ticket left non-zero", false;
                 bool guard = false;
                 const auto got = download(out, &guard);
                 const std::vector<float> ref = attention_reference(env, q, b, kv, 16, n_heads, n_kv, hd, scale);
                 return close(got, ref, tol_for(act), guard, &why, act == Act::F32 ? 0.05 : 0.1);
               });
  }
}

void test_attention_decode(Env &env, cuda::Ops &ops) {
  // the engine's steps share their tickets and workspace: calls of different row counts one after the other
  test_attention_decode_shared(env, ops, 4, 2, 16, 48);
  test_attention_decode_shared(env, ops, 32, 8, 128, 12);
  // one decode row per context, around block boundaries and long: most run in several splits
  std::vector<int32_t> contexts = {1, 15, 16, 17, 384};
  if (!g_small) contexts.push_back(4096);
  std::vector<std::pair<int32_t, int32_t>> decode;
  for (int32_t c : contexts) decode.push_back({1, c - 1});
  std::shuffle(decode.begin(), decode.end(), g_rng);
  // GQA 1, 2, 4, 8; head dims on tensor cores (64, 128, 256 in bf16) and off them (80, and everything in fp32)
  struct Heads {
    int32_t n_heads, n_kv;
  };
  for (Heads hh : {Heads{8, 8}, Heads{16, 8}, Heads{32, 8}, Heads{32, 4}})
    for (int32_t hd : {64, 128, 256, 80})
      test_attention_decode_case(env, ops, hh.n_heads, hh.n_kv, hd, 16, decode, "decode ragged");
  test_attention_decode_case(env, ops, 12, 4, 64, 16, decode, "decode ragged, GQA 3");
  test_attention_decode_case(env, ops, 6, 3, 70, 5, decode, "head_dim not a multiple of 4, odd block");
  test_attention_decode_case(env, ops, 4, 1, 128, 7, decode, "odd block");
  test_attention_decode_case(env, ops, 2, 2, 16, 1, {{1, 0}, {1, 1}, {1, 2}, {1, 40}}, "block size 1");
  // batch 1: the most splits
  for (int32_t c : contexts) {
    test_attention_decode_case(env, ops, 32, 8, 128, 16, {{1, c - 1}}, "batch 1");
    test_attention_decode_case(env, ops, 16, 8, 128, 16, {{1, c - 1}}, "batch 1");
  }
  for (int32_t c : {63, 64, 65, 128, 129, 1000})  // split lengths are multiples of 64 keys
    test_attention_decode_case(env, ops, 32, 8, 128, 32, {{1, c - 1}}, "batch 1, split boundaries");
  {  // splits of at least 256 keys (VT_CUDA_SPLIT_KEYS=200, rounded up): fewer, longer splits; the same contract
    CudaOpsTuning t;
    t.split_keys = 256;
    cuda::Ops longer(env.ctx, ops.act(), t);
    for (int32_t c : {200, 256, 257, 384, 1000, 5000})
      test_attention_decode_case(env, longer, 16, 8, 128, 16, {{1, c - 1}}, "batch 1, splits of >= 256 keys");
    test_attention_decode_case(env, longer, 32, 8, 128, 16, decode, "splits of >= 256 keys, graph bound", {40960});
  }
  // a captured graph's bound: max_keys far above the rows; and a bound the rows exceed
  test_attention_decode_case(env, ops, 32, 8, 128, 16, {{1, 383}, {1, 16}}, "graph bound", {40960 - 384});
  test_attention_decode_case(env, ops, 32, 8, 64, 16, decode, "graph bound", {40960});
  test_attention_decode_case(env, ops, 32, 8, 128, 16, decode, "bound below the rows", {0, 300});
  // q inside a fused qkv buffer; caches at misaligned addresses (bf16: off the tensor-core path)
  test_attention_decode_case(env, ops, 32, 8, 128, 16, decode, "fused qkv", {0, 0, 2 * 8 * 128});
  test_attention_decode_case(env, ops, 16, 2, 64, 16, decode, "fused qkv", {0, 0, 2 * 2 * 64 + 8});
  test_attention_decode_case(env, ops, 32, 8, 128, 16, decode, "misaligned caches", {0, 0, 0, 1});
  test_attention_decode_case(env, ops, 16, 8, 64, 16, decode, "aligned cache offset", {0, 0, 0, 8});
  // prefill rows (causal inside the chunk) next to decodes, in several splits and in one
  test_attention_decode_case(env, ops, 8, 2, 64, 16, {{5, 0}, {1, 13}, {20, 6}, {1, 0}, {33, 31}, {40, 100}},
                             "mixed prefill/decode");
  test_attention_decode_case(env, ops, 32, 8, 128, 16, {{3, 500}, {1, 1000}, {2, 62}, {1, 0}}, "mixed prefill/decode");
  if (g_small) return;
  test_attention_decode_case(env, ops, 32, 8, 128, 16, {{5, 0}, {1, 13}, {20, 6}, {1, 4000}, {33, 31}, {40, 100}},
                             "mixed prefill/decode");
  // a batch of 64 (one split each, no workspace) and of 4 (several)
  std::vector<std::pair<int32_t, int32_t>> big, four;
  for (int i = 0; i < 64; ++i) big.push_back({1, int32_t(below(3000))});
  for (int i = 0; i < 4; ++i) four.push_back({1, int32_t(below(5000))});
  test_attention_decode_case(env, ops, 32, 8, 128, 16, big, "64 random decodes");
  test_attention_decode_case(env, ops, 32, 8, 128, 16, four, "4 random decodes");
  test_attention_decode_case(env, ops, 16, 8, 128, 16, four, "4 random decodes");
  // long contexts
  test_attention_decode_case(env, ops, 32, 8, 128, 16, {{1, 16383}, {1, 8191}}, "long context");
  test_attention_decode_case(env, ops, 8, 1, 128, 256, {{1, 32767}}, "long context 32k, big blocks");
}

// rope_store then attention_decode back to back, as a decode step runs them (PDL: the attention's blocks may start
// while rope_store runs, and load their first keys before their wait; attention_split.cuh), against the same two
// launches with the stream synchronized between them. Each row's new key and value are NaN in the cache until
// rope_store writes them, so an attention that read its row's new slot too early gives NaN or other bits; the
// output must match the synchronized run to the bit, three times over (the overlap is a race: each run is a chance).
// One decode row per context; `pad`: that row is a padding row (slot -1: nothing stored, its output still computed;
// its own key then stays NaN, so it is left out of the comparison).
void test_rope_then_attention_case(Env &env, cuda::Ops &ops, int32_t n_heads, int32_t n_kv, int32_t hd, int32_t bs,
                                   const std::vector<int32_t> &contexts, bool norm, const char *label,
                                   int32_t pad = -1) {
  const Act act = ops.act();
  std::vector<std::pair<int32_t, int32_t>> seqs;
  for (int32_t c : contexts) seqs.push_back({1, c - 1});
  const int32_t n_seqs = int32_t(seqs.size());
  const BatchLayout b = layout_of(seqs, bs, 1);
  const int32_t T = b.T, max_keys = b.longest;
  check_case(env,
             fmt("rope_store -> attention_decode[%s] %s heads %d kv_heads %d head_dim %d block %d rows %d splits %d%s%s",
                 cuda::act_name(act), label, n_heads, n_kv, hd, bs, T, ops.attention_splits(T, n_kv, max_keys),
                 norm ? " +qk_norm" : "", pad >= 0 ? " with a padding row" : ""),
             [&](std::string &why) {
               PagedKv kv = make_paged_kv(seqs, n_kv, hd, bs, act, b.max_blocks, b.total_blocks);
               const int64_t width = int64_t(n_heads + 2 * n_kv) * hd, slot_elems = int64_t(n_kv) * hd;
               const auto qkv = rand_act(size_t(T) * size_t(width), act, -2, 2);
               std::vector<int32_t> pos(static_cast<size_t>(T)), slot(static_cast<size_t>(T));
               for (int32_t t = 0; t < T; ++t) {
                 pos[size_t(t)] = contexts[size_t(t)] - 1;
                 const int32_t s = kv.tables[size_t(t * b.max_blocks + pos[size_t(t)] / bs)] * bs + pos[size_t(t)] % bs;
                 slot[size_t(t)] = t == pad ? -1 : s;
                 std::fill_n(kv.k.begin() + s * slot_elems, slot_elems, NAN);  // the new key: rope_store's to write
                 std::fill_n(kv.v.begin() + s * slot_elems, slot_elems, NAN);
               }
               const auto inv_freq = inv_freq_table(hd, 1e6);
               const auto qn = rand_weight(size_t(hd)), kn = rand_weight(size_t(hd));
               const float eps = 1e-6f, scale = 1.0f / std::sqrt(float(hd)), attn_scale = 1.0f;
               DeviceBuffer dstart = upload_raw(b.q_start), dpos0 = upload_raw(b.pos0), dtab = upload_raw(kv.tables);
               DeviceBuffer dpos = upload_raw(pos), dslot = upload_raw(slot), dfreq = upload_raw(inv_freq),
                            dqn = upload_raw(qn), dkn = upload_raw(kn);
               const CUdeviceptr qnp = norm ? dqn.ptr() : 0, knp = norm ? dkn.ptr() : 0;
               const cuda::DeviceAttentionBatch db{n_seqs, dstart.ptr(), dpos0.ptr(), dtab.ptr(), b.max_blocks, bs};
               const size_t ws_bytes = ops.attention_workspace_bytes(T, n_heads, n_kv, hd, max_keys);
               DeviceBuffer ws = upload_raw(std::vector<uint8_t>(ws_bytes, 0xff));
               DeviceBuffer tk = upload_raw(std::vector<uint8_t>(cuda::Ops::attention_tickets_bytes(T, n_kv), 0));
               const auto s = env.stream.get();
               // synced: the stream waits between the launches (the reference); else they overlap as in a step.
               auto run = [&](bool synced, bool &guard) {
                 Dev dqkv = upload_act(qkv, act), k = upload_act(kv.k, act), v = upload_act(kv.v, act);
                 Dev out = poisoned(size_t(T) * size_t(n_heads) * hd, act);
                 ops.rope_store(s, dqkv.ptr(), T, n_heads, n_kv, hd, dpos.ptr(), dfreq.ptr(), attn_scale, qnp, knp, eps,
                                dslot.ptr(), k.ptr(), v.ptr());
                 if (synced) env.stream.synchronize();
                 ops.attention_decode(s, dqkv.ptr(), width, k.ptr(), v.ptr(), db, T, n_heads, n_kv, hd, scale,
                                      max_keys, tk.ptr(), ws_bytes ? ws.ptr() : 0, ws_bytes, out.ptr());
                 return download(out, &guard);
               };
               bool guard = false;
               auto want = run(true, guard);
               if (!guard) return why = "the synchronized run wrote past the end of the output", false;
               if (pad >= 0)  // its own key is NaN: its output is too, whichever way
                 std::fill_n(want.begin() + int64_t(pad) * n_heads * hd, int64_t(n_heads) * hd, 0.f);
               for (float x : want)
                 if (std::isnan(x)) return why = "the synchronized run gave NaN", false;
               for (int r = 0; r < 3; ++r) {
                 auto got = run(false, guard);
                 if (!guard) return why = fmt("overlapped run %d wrote past the end of the output", r + 1), false;
                 if (pad >= 0) std::fill_n(got.begin() + int64_t(pad) * n_heads * hd, int64_t(n_heads) * hd, 0.f);
                 if (std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) != 0)
                   return why = fmt("overlapped run %d differs from the synchronized one", r + 1), false;
               }
               return true;
             });
}

void test_rope_then_attention(Env &env, cuda::Ops &ops) {
  // Contexts around split and block boundaries (a row's new key is the first or the last of its split, or its
  // split's only one) and long; head dims on tensor cores (64, 128, 256 in bf16) and off them (80; all of fp32).
  std::vector<int32_t> contexts = {1, 2, 16, 17, 64, 65, 128, 129, 384};
  if (!g_small) contexts.insert(contexts.end(), {4096, 3001});
  std::shuffle(contexts.begin(), contexts.end(), g_rng);
  struct Heads { int32_t n_heads, n_kv; };
  for (Heads hh : {Heads{16, 8}, Heads{32, 8}, Heads{8, 8}, Heads{32, 4}})
    for (int32_t hd : {64, 128, 256, 80})
      for (int norm = 0; norm < 2; ++norm)
        test_rope_then_attention_case(env, ops, hh.n_heads, hh.n_kv, hd, 16, contexts, norm, "decode ragged");
  for (int32_t c : {1, 64, 65, 383, 384, 385, 1000})
    test_rope_then_attention_case(env, ops, 16, 8, 128, 16, {c}, true, "batch 1");
  test_rope_then_attention_case(env, ops, 32, 8, 128, 16, {384, 17, 1}, true, "decode", 1);
  test_rope_then_attention_case(env, ops, 6, 3, 70, 5, {9, 33, 70}, true, "odd head_dim and block");
}

// ---------------------------------------------------------------------------------------------------------------
// Prefill attention on tensor cores (attention_prefill.cuh; bf16 activations, head_dim 64, 128 and 256) against
// cpu::attention on the same bf16 values: paged caches with shuffled block tables and every slot outside the
// batch's keys NaN, q optionally read from wider rows (as inside a fused qkv buffer) whose other columns are NaN,
// a poisoned output with a guard. Also checks that prefill_tiles covers every row once, inside its sequence.

// One case: sequences given as (query rows, first query position); q_pad extra elements per q row (0: none).
// uniform: q = 0, so every visible key gets probability exactly 1 (2^0, exact in bf16) and the result is the mean
// of the visible values with nothing rounded before P·V: held to the plain bf16 bound, this sees one key too
// many or too few in rows of hundreds, which the random cases' looser bound (below) may not.
void test_attention_prefill_case(Env &env, cuda::Ops &ops, int32_t n_heads, int32_t n_kv, int32_t hd, int32_t bs,
                                 const std::vector<std::pair<int32_t, int32_t>> &seqs, int64_t q_pad,
                                 const char *label, bool uniform = false) {
  const Act act = Act::BF16;
  check_case(env,
             fmt("attention_prefill[bf16] %s heads %d kv_heads %d head_dim %d block %d seqs %zu%s%s", label, n_heads,
                 n_kv, hd, bs, seqs.size(), q_pad ? " strided q" : "", uniform ? " uniform (q = 0)" : ""),
             [&](std::string &why) {
               const int32_t n_seqs = int32_t(seqs.size());
               const BatchLayout b = layout_of(seqs, bs, 1);
               const int32_t T = b.T, max_blocks = b.max_blocks;
               const PagedKv kv = make_paged_kv(seqs, n_kv, hd, bs, act, max_blocks, b.total_blocks);
               const int64_t width = int64_t(n_heads) * hd, stride = width + q_pad;
               auto q = rand_act(size_t(T) * size_t(width), act, -2, 2);
               if (uniform) std::fill(q.begin(), q.end(), 0.f);
               std::vector<float> q_rows(size_t(T) * size_t(stride), NAN);  // columns past the heads: not to be read
               for (int32_t t = 0; t < T; ++t) std::copy_n(q.begin() + t * width, width, q_rows.begin() + t * stride);
               const float scale = 1.0f / std::sqrt(float(hd));

               std::vector<int32_t> tiles;
               const int32_t n_tiles = cuda::Ops::prefill_tiles(b.q_start.data(), n_seqs, &tiles, b.pos0.data());
               std::vector<int> covered(static_cast<size_t>(T), 0);
               if (tiles.size() != size_t(n_tiles) * 3) return why = "prefill_tiles: size mismatch", false;
               for (int32_t i = 0; i < n_tiles; ++i) {
                 const int32_t s = tiles[size_t(3 * i)], r0 = tiles[size_t(3 * i + 1)], n = tiles[size_t(3 * i + 2)];
                 if (s < 0 || s >= n_seqs || n < 1 || n > cuda::Ops::kPrefillTileRows || r0 < b.q_start[size_t(s)] ||
                     r0 + n > b.q_start[size_t(s) + 1])
                   return why = fmt("prefill_tiles: bad tile (%d, %d, %d)", s, r0, n), false;
                 for (int32_t r = r0; r < r0 + n; ++r) ++covered[size_t(r)];
               }
               if (!std::all_of(covered.begin(), covered.end(), [](int c) { return c == 1; }))
                 return why = "prefill_tiles: a row not covered exactly once", false;

               Dev dq = upload_act(q_rows, act), dk = upload_act(kv.k, act), dv = upload_act(kv.v, act);
               DeviceBuffer dstart = upload_raw(b.q_start), dpos = upload_raw(b.pos0), dtab = upload_raw(kv.tables);
               DeviceBuffer dtiles = upload_raw(tiles);
               Dev out = poisoned(q.size(), act);
               cuda::DeviceAttentionBatch db{n_seqs, dstart.ptr(), dpos.ptr(), dtab.ptr(), max_blocks, bs};
               ops.attention_prefill(env.stream.get(), dq.ptr(), q_pad ? stride : 0, dk.ptr(), dv.ptr(), db, T,
                                     n_heads, n_kv, hd, scale, dtiles.ptr(), n_tiles, out.ptr());
               env.stream.synchronize();

               const std::vector<float> ref = attention_reference(env, q, b, kv, bs, n_heads, n_kv, hd, scale);
               bool guard = false;
               // The probabilities are rounded to bf16 before P·V (the tensor cores' input, as in every flash
               // attention): an error of ~2^-9 of the values summed (|v| < 1), whatever the result's size, which
               // is what scale_floor is for. Without it, a float64 model of this kernel's rounding misses the
               // 2048-row case by 1.4-1.5x (errors up to ~1e-3 where rms(ref) is ~0.07); with 0.25, 0.40-0.45 of
               // the bound. A wrong key, row, head or mask still errs by far more.
               const auto got = download(out, &guard);  // before close() reads guard
               return close(got, ref, tol_for(act), guard, &why, uniform ? 0 : 0.25);
             });
}

void test_attention_prefill(Env &env, cuda::Ops &ops) {
  if (!ops.has_attention_prefill(64) || !ops.has_attention_prefill(128)) return;  // fp32 activations
  // one sequence from position 0: a single row, under, exactly and just over one tile, several, many
  for (int32_t rows : {1, 15, 64, 65, 200, 2048}) {
    if (rows == 2048 && g_small) continue;
    test_attention_prefill_case(env, ops, 32, 8, 128, 16, {{rows, 0}}, 0, "one sequence");
    test_attention_prefill_case(env, ops, 16, 8, 64, 32, {{rows, 0}}, 0, "one sequence");
  }
  // chunked prefill: the earlier chunks' keys already in the cache
  test_attention_prefill_case(env, ops, 32, 8, 128, 16, {{37, 100}}, 0, "chunked prefill");
  test_attention_prefill_case(env, ops, 8, 8, 64, 32, {{37, 100}}, 2 * 8 * 64, "chunked prefill");
  test_attention_prefill_case(env, ops, 32, 8, 128, 16, {{512, 512}}, 2 * 8 * 128, "chunked prefill");
  test_attention_prefill_case(env, ops, 16, 8, 64, 32, {{512, 512}}, 0, "chunked prefill");
  // ragged batches: prefill chunks of different lengths and positions next to a decode row
  const std::vector<std::pair<int32_t, int32_t>> ragged = {{70, 0}, {1, 300}, {130, 17}, {64, 64}, {5, 1000}};
  struct Heads {
    int32_t n_heads, n_kv;
  };
  for (Heads hh : {Heads{32, 8}, Heads{16, 8}, Heads{8, 8}, Heads{28, 4}})
    for (int32_t hd : {64, 128})
      for (int32_t bs : {16, 32})
        test_attention_prefill_case(env, ops, hh.n_heads, hh.n_kv, hd, bs, ragged,
                                    (hd == 64) == (bs == 16) ? 2 * int64_t(hh.n_kv) * hd : 0, "ragged batch");
  // first positions and lengths on and around key-tile (64) and block boundaries; an empty sequence; blocks of 8
  test_attention_prefill_case(env, ops, 8, 2, 128, 16, {{64, 63}, {63, 1}, {129, 128}, {1, 64}, {2, 126}}, 0,
                              "tile boundaries");
  test_attention_prefill_case(env, ops, 4, 2, 64, 8, {{70, 0}, {0, 40}, {33, 5}, {1, 7}}, 0,
                              "empty sequence, block 8");
  // which keys each row sees, exactly (see uniform above)
  test_attention_prefill_case(env, ops, 8, 2, 128, 16, {{64, 63}, {63, 1}, {129, 128}, {1, 64}, {2, 126}}, 0,
                              "tile boundaries", true);
  test_attention_prefill_case(env, ops, 8, 2, 64, 32, ragged, 2 * 2 * 64, "ragged batch", true);
  test_attention_prefill_case(env, ops, 32, 8, 128, 16, {{512, 512}}, 0, "chunked prefill", true);
  if (!g_small) test_attention_prefill_case(env, ops, 32, 8, 128, 16, {{2048, 0}}, 0, "one sequence", true);

  // head_dim 256 (Qwen3.5's gated attention: 24 q heads over 4 kv heads at 27B, 8 over 2 at 0.8B): Q in shared memory,
  // 32-key tiles, so the key-tile boundaries fall at multiples of 32 here
  if (!ops.has_attention_prefill(256)) {
    record(false, "attention_prefill head_dim 256 available with bf16 activations", "has_attention_prefill(256) false");
    return;
  }
  for (int32_t rows : {1, 31, 32, 33, 64, 65, 300})
    test_attention_prefill_case(env, ops, 8, 2, 256, 16, {{rows, 0}}, 0, "one sequence, head_dim 256");
  test_attention_prefill_case(env, ops, 24, 4, 256, 16, {{37, 100}}, 2 * 4 * 256, "chunked prefill, head_dim 256");
  test_attention_prefill_case(env, ops, 8, 2, 256, 32, ragged, 0, "ragged batch, head_dim 256");
  test_attention_prefill_case(env, ops, 8, 2, 256, 16, {{32, 31}, {31, 1}, {65, 64}, {1, 32}, {2, 62}}, 0,
                              "tile boundaries, head_dim 256", true);
  test_attention_prefill_case(env, ops, 24, 4, 256, 16, {{512, 512}}, 0, "chunked prefill, head_dim 256", true);
  if (!g_small) test_attention_prefill_case(env, ops, 24, 4, 256, 16, {{2048, 0}}, 0, "one sequence, head_dim 256");
}


}  // namespace cuda_tests
