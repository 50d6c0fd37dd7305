// CUDA graphs for decode steps, one per batch-size bucket. A decode step of n sequences is padded to the
// smallest bucket b >= n and replays b's graph: one cuGraphLaunch instead of a few hundred kernel launches,
// which is what lets a small model's step run at the GPU's pace rather than the CPU's.
//
// The recorded work must depend on host values only through the bucket size: everything that changes from
// step to step (tokens, positions, slots, block tables, sequence lengths) lives in device buffers at fixed
// addresses, written before each replay.
//
// Dedup (off by default): buckets whose captured graphs have the same topology and differ only in launch sizes
// and parameters share one executable; replaying another bucket first rewrites the executable's parameters with
// cuGraphExecUpdate. Fewer executables, a little host work per bucket switch. Whether it saves device memory
// beyond run-to-run noise is measured (bench/cuda-engine), not assumed.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "backend/cuda/context.h"

namespace vt::cuda {

class DecodeGraphs {
 public:
  DecodeGraphs() = default;
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs &) = delete;
  DecodeGraphs &operator=(const DecodeGraphs &) = delete;

  // Captures record(b) on stream s for every bucket b (ascending), instantiates (sharing executables when
  // dedup), then replays each once through warm_up(b) + launch so first-use costs are paid at load. The
  // device bytes the executables took are measured around instantiation and the warm-up replays.
  void build(const Context &ctx, CUstream s, const std::vector<int32_t> &buckets, bool dedup,
             const std::function<void(int32_t)> &record, const std::function<void(int32_t)> &warm_up);
  // Lazy capture (cudaGraphs.capture 'first-use'): plan() only takes the buckets; a bucket's graph is
  // captured and instantiated by add() when a step first needs it (CudaDecoder::forward), so a load captures
  // nothing and an engine that only ever decodes one sequence holds one graph. add() waits for the stream.
  void plan(const std::vector<int32_t> &buckets) { bucket_list_ = buckets; }
  bool has(int32_t b) const;
  void add(const Context &ctx, CUstream s, int32_t b, bool dedup, const std::function<void(int32_t)> &record);

  bool empty() const { return bucket_list_.empty(); }
  // The smallest bucket holding n sequences, or 0 when n is larger than every bucket.
  int32_t bucket_for(int32_t n) const;
  // Replays bucket b (captured: build, or add) on s.
  void launch(int32_t b, CUstream s);

  // Read from any thread (engine.memory() asks while the step thread may be adding a graph).
  int32_t executables() const { return n_execs_.load(std::memory_order_relaxed); }
  int64_t device_bytes() const { return bytes_.load(std::memory_order_relaxed); }
  const std::vector<int32_t> &buckets() const { return bucket_list_; }

 private:
  struct Entry {
    int32_t bucket;
    CUgraph graph;
    size_t exec;  // index into execs_
  };
  struct Exec {
    CUgraphExec exec;
    size_t current;  // the entry whose parameters the executable holds now
  };
  std::vector<Entry> entries_;
  std::vector<Exec> execs_;
  std::vector<int32_t> bucket_list_;  // planned, ascending (all captured unless lazy)
  std::atomic<int64_t> bytes_{0};
  std::atomic<int32_t> n_execs_{0};
  // Captures record(b) into a new entry (the stream left usable if record throws).
  void capture(CUstream s, int32_t b, const std::function<void(int32_t)> &record);
  // Instantiates entry i, or (dedup) lets an executable of the same topology take it.
  void instantiate(size_t i, bool dedup);
};

}  // namespace vt::cuda
