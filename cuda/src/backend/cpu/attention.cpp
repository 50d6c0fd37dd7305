// Paged causal GQA attention over one layer's KV cache (contract in cpu_ops.h).
//
// Work item = (sequence, kv head, block of up to kQueryBlock query rows). One item carries every query head
// that shares the kv head (GQA group) for every row of the block, so each key and value vector is fetched
// from the cache once per item and used group × rows times while it sits in L1. Keys are walked in chunks of
// kKeyChunk positions with an online softmax in fp32 (running max m, running sum l, unnormalised output acc):
// no T × context score matrix is ever stored, whatever the context length.
//
// Items differ a lot in cost (a 1-token decode next to a 512-token prefill chunk, and causal rows that see
// more keys the later they are), so they are sorted by cost, largest first, and handed out one at a time from
// an atomic counter instead of split into equal contiguous ranges.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/scratch.h"

namespace vt::cpu {

namespace {

constexpr int kQueryBlock = 16;  // query rows per work item
constexpr int kKeyChunk = 32;    // 32 keys + 32 values of head_dim 128: 32 KiB, about L1

struct Item {
  int32_t seq, kv_head, row0, rows;  // query rows [row0, row0 + rows) of the flattened batch
  int64_t cost;                      // ≈ rows × keys seen
};

struct Job {
  const float *q, *k_cache, *v_cache;
  const AttentionBatch *b;
  int32_t n_heads, n_kv_heads, head_dim;
  float scale;
  float *out;
  const AttentionKernels *kern;
};

// State of one (query row, head) of an item, in the thread's scratch:
//   acc (rows * group, head_dim) | m (rows * group) | l (rows * group) | s (kKeyChunk).
void run_item(const Job &j, const Item &it) {
  const AttentionBatch &b = *j.b;
  const int group = j.n_heads / j.n_kv_heads, hd = j.head_dim;
  const int n_states = it.rows * group;
  // When many states share a chunk, its keys and values are first copied side by side: in the cache they sit
  // n_kv_heads * head_dim floats apart (4 KiB for 8 × 128), so a chunk's vectors all fall into the same few
  // L1 sets and evict each other while the states sweep them. A decode row uses each key once per group
  // head and reads them in place.
  const bool gather = n_states >= 4;
  thread_local Scratch scratch;
  float *acc = scratch.floats(size_t(n_states) * (hd + 2) + kKeyChunk + (gather ? 2 * kKeyChunk * size_t(hd) : 0));
  float *m = acc + size_t(n_states) * hd, *l = m + n_states, *s = l + n_states;
  float *kbuf = s + kKeyChunk, *vbuf = kbuf + size_t(kKeyChunk) * hd;  // (kKeyChunk, head_dim) each
  const float *kp[kKeyChunk], *vp[kKeyChunk];  // this chunk's key and value vectors of the item's kv head

  std::fill(acc, acc + size_t(n_states) * hd, 0.f);
  std::fill(m, m + n_states, -std::numeric_limits<float>::infinity());
  std::fill(l, l + n_states, 0.f);

  const int32_t first_row = b.seq_q_start[it.seq];
  const int32_t pos0 = b.seq_pos0[it.seq] + (it.row0 - first_row);  // position of the item's first row
  const int32_t n_keys = pos0 + it.rows;                              // the last row sees keys 0 .. pos0 + rows - 1
  const int32_t *table = b.block_tables + int64_t(it.seq) * b.max_blocks_per_seq;
  const int64_t kv_row = int64_t(j.n_kv_heads) * hd;  // floats per cache slot

  for (int32_t c0 = 0; c0 < n_keys; c0 += kKeyChunk) {
    const int nc = std::min<int32_t>(kKeyChunk, n_keys - c0);
    for (int i = 0; i < nc; ++i) {
      const int32_t p = c0 + i;
      const int64_t slot = int64_t(table[p / b.block_size]) * b.block_size + p % b.block_size;
      kp[i] = j.k_cache + slot * kv_row + int64_t(it.kv_head) * hd;
      vp[i] = j.v_cache + slot * kv_row + int64_t(it.kv_head) * hd;
      if (gather) {
        std::memcpy(kbuf + size_t(i) * hd, kp[i], size_t(hd) * sizeof(float));
        std::memcpy(vbuf + size_t(i) * hd, vp[i], size_t(hd) * sizeof(float));
        kp[i] = kbuf + size_t(i) * hd;
        vp[i] = vbuf + size_t(i) * hd;
      }
    }
    for (int r = 0; r < it.rows; ++r) {
      const int32_t pos = pos0 + r;
      if (pos < c0) continue;                             // this row sees none of the chunk
      const int n = std::min<int32_t>(nc, pos - c0 + 1);  // causal: keys at positions <= pos
      for (int g = 0; g < group; ++g) {
        const int st = r * group + g;
        const int head = it.kv_head * group + g;
        const float *qh = j.q + (int64_t(it.row0 + r) * j.n_heads + head) * hd;
        j.kern->scores(qh, kp, n, hd, s);
        float mx = -std::numeric_limits<float>::infinity();
        for (int i = 0; i < n; ++i) mx = std::max(mx, s[i] *= j.scale);
        const float m_new = std::max(m[st], mx);
        const float alpha = std::exp(m[st] - m_new);  // 0 on the first chunk (m = -inf)
        float sum = 0.f;
        for (int i = 0; i < n; ++i) sum += (s[i] = std::exp(s[i] - m_new));
        l[st] = l[st] * alpha + sum;
        m[st] = m_new;
        j.kern->accumulate(s, vp, n, hd, alpha, acc + size_t(st) * hd);
      }
    }
  }

  for (int r = 0; r < it.rows; ++r)
    for (int g = 0; g < group; ++g) {
      const int st = r * group + g;
      const int head = it.kv_head * group + g;
      const float inv = 1.f / l[st];
      const float *a = acc + size_t(st) * hd;
      float *o = j.out + (int64_t(it.row0 + r) * j.n_heads + head) * hd;
      for (int d = 0; d < hd; ++d) o[d] = a[d] * inv;
    }
}

}  // namespace

void attention(ThreadPool &pool, const float *q, const float *k_cache, const float *v_cache, const AttentionBatch &b,
               int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float scale, float *out) {
  thread_local std::vector<Item> items;  // reused across calls: no allocation per layer once warm
  items.clear();
  for (int32_t s = 0; s < b.n_seqs; ++s) {
    const int32_t r0 = b.seq_q_start[s], r1 = b.seq_q_start[s + 1];
    for (int32_t kvh = 0; kvh < n_kv_heads; ++kvh)
      for (int32_t r = r0; r < r1; r += kQueryBlock) {
        const int32_t rows = std::min(kQueryBlock, r1 - r);
        const int64_t keys = int64_t(b.seq_pos0[s]) + (r - r0) + rows;
        items.push_back({s, kvh, r, rows, int64_t(rows) * keys});
      }
  }
  std::stable_sort(items.begin(), items.end(), [](const Item &a, const Item &c) { return a.cost > c.cost; });

  const Job job{q, k_cache, v_cache, &b, n_heads, n_kv_heads, head_dim, scale, out, &attention_kernels(isa_active())};
  std::atomic<size_t> next{0};
  const size_t n_items = items.size();
  const Item *list = items.data();
  const int64_t workers = std::min<int64_t>(pool.size(), int64_t(n_items));
  pool.run(workers, 1, [&](int64_t, int64_t, int) {
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n_items;) run_item(job, list[i]);
  });
}

}  // namespace vt::cpu
