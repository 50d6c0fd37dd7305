#include "backend/cuda/graphs.h"

#include <algorithm>
#include <string>

#include "status.h"

namespace vt::cuda {

DecodeGraphs::~DecodeGraphs() {
  for (Exec &e : execs_) driver().cuGraphExecDestroy(e.exec);
  for (Entry &e : entries_) driver().cuGraphDestroy(e.graph);
}

void DecodeGraphs::capture(CUstream s, int32_t b, const std::function<void(int32_t)> &record) {
  const Driver &d = driver();
  check(d.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
  CUgraph g = nullptr;
  try {
    record(b);
  } catch (...) {
    d.cuStreamEndCapture(s, &g);  // leave the stream usable; the partial graph is dropped
    if (g) d.cuGraphDestroy(g);
    throw;
  }
  check(d.cuStreamEndCapture(s, &g), "cuStreamEndCapture(bucket " + std::to_string(b) + ")");
  entries_.push_back({b, g, 0});
}

void DecodeGraphs::instantiate(size_t i, bool dedup) {
  const Driver &d = driver();
  Entry &e = entries_[i];
  if (dedup)
    for (size_t x = 0; x < execs_.size(); ++x) {
      CUgraphExecUpdateResultInfo info{};
      if (d.cuGraphExecUpdate(execs_[x].exec, e.graph, &info) == CUDA_SUCCESS) {
        e.exec = x, execs_[x].current = i;
        return;
      }
    }
  CUgraphExec exec = nullptr;
  check(d.cuGraphInstantiate(&exec, e.graph, 0), "cuGraphInstantiate(bucket " + std::to_string(e.bucket) + ")");
  execs_.push_back({exec, i});
  e.exec = execs_.size() - 1;
  n_execs_.store(int32_t(execs_.size()), std::memory_order_relaxed);
}

void DecodeGraphs::build(const Context &ctx, CUstream s, const std::vector<int32_t> &buckets, bool dedup,
                         const std::function<void(int32_t)> &record, const std::function<void(int32_t)> &warm_up) {
  plan(buckets);
  for (int32_t b : buckets) capture(s, b, record);
  synchronize(s);
  const int64_t free_before = ctx.free_bytes();
  for (size_t i = 0; i < entries_.size(); ++i) instantiate(i, dedup);
  for (const Entry &e : entries_) {
    warm_up(e.bucket);
    launch(e.bucket, s);
  }
  synchronize(s);
  bytes_.store(std::max<int64_t>(0, free_before - ctx.free_bytes()), std::memory_order_relaxed);
}

bool DecodeGraphs::has(int32_t b) const {
  return std::any_of(entries_.begin(), entries_.end(), [b](const Entry &e) { return e.bucket == b; });
}

void DecodeGraphs::add(const Context &ctx, CUstream s, int32_t b, bool dedup,
                       const std::function<void(int32_t)> &record) {
  synchronize(s);  // (so that the free-memory difference below is this graph's, other engines aside)
  const int64_t free_before = ctx.free_bytes();
  capture(s, b, record);
  instantiate(entries_.size() - 1, dedup);
  bytes_.fetch_add(std::max<int64_t>(0, free_before - ctx.free_bytes()), std::memory_order_relaxed);
}

int32_t DecodeGraphs::bucket_for(int32_t n) const {
  for (int32_t b : bucket_list_)
    if (b >= n) return b;
  return 0;
}

void DecodeGraphs::launch(int32_t b, CUstream s) {
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].bucket != b) continue;
    Exec &x = execs_[entries_[i].exec];
    if (x.current != i) {
      CUgraphExecUpdateResultInfo info{};
      check(driver().cuGraphExecUpdate(x.exec, entries_[i].graph, &info),
            "cuGraphExecUpdate(bucket " + std::to_string(b) + ")");
      x.current = i;
    }
    check(driver().cuGraphLaunch(x.exec, s), "cuGraphLaunch(bucket " + std::to_string(b) + ")");
    return;
  }
  fail(VT_ERR_INTERNAL, "DecodeGraphs::launch: no graph for batch " + std::to_string(b));
}

}  // namespace vt::cuda
