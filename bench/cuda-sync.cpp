// What one dependency between two steps of the decode costs on the GPU: as a launch boundary (the engine today:
// one kernel per op, programmatic dependent launch between them, the chain captured in a CUDA graph) and as a
// grid-wide barrier inside one persistent kernel (what a persistent decode kernel would pay instead). Each step
// is nearly empty (one value read from another block, one written), so the figures are the synchronization's
// own cost. Kernels: cuda/src/backend/cuda/sync_bench.cu (--experiments builds only).
//
//   bench_cuda_sync [--steps N] [--reps N]   prints a table; exit 0 when it ran (or "skipped"), 1 on an error or a
//                                           wrong count (a barrier that let a block read a stale value)
// Built by `scripts/gpu-check.sh prepare`; run on the GPU machine.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/context.h"
#include "backend/cuda/driver.h"

using namespace vt;
using namespace vt::cuda;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Every slot of the G floats at `p` equals `want`.
bool all_equal(const DeviceBuffer &p, CUstream s, int G, float want, std::string *why) {
  std::vector<float> h(static_cast<size_t>(G));
  p.download(s, h.data(), h.size() * 4);
  for (int i = 0; i < G; ++i)
    if (h[size_t(i)] != want) {
      *why = "slot " + std::to_string(i) + " holds " + std::to_string(h[size_t(i)]) + ", want " + std::to_string(want);
      return false;
    }
  return true;
}

}  // namespace

int main(int argc, char **argv) {
  int steps = 256, reps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--steps") steps = std::max(2, std::atoi(argv[i + 1]) / 2 * 2);
    else if (a == "--reps") reps = std::max(1, std::atoi(argv[i + 1]));
  }
  const auto avail = cuda_available();
  if (!avail.ok) {
    std::printf("skipped: %s\n", avail.reason.c_str());
    return 0;
  }
  try {
    Context ctx;
    Stream stream;
    const CUstream s = stream.get();
    const CUfunction chain = ctx.find_function("vt_bench_chain_step"),
                     barrier = ctx.find_function("vt_bench_barrier_steps");
    if (!chain || !barrier) {
      std::printf("skipped: a build without the experiments' kernels (scripts/build-cuda.mjs --experiments)\n");
      return 0;
    }
    const Driver &d = driver();
    int per_sm = 0;
    check(d.cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, barrier, 256, 0), "occupancy");
    std::printf("bench_cuda_sync: %s, %d SMs, PDL %s, %d steps a run, median of %d runs\n", ctx.name().c_str(),
                ctx.sm_count(), ctx.pdl() ? "on" : "off", steps, reps);
    std::printf("%-52s %8s %14s\n", "dependency", "blocks", "us per step");
    bool ok = true;
    const int max_g = ctx.sm_count() * 4;
    DeviceBuffer a(size_t(max_g) * 4), b(size_t(max_g) * 4), counters(256);

    // Launch boundaries: `steps` launches captured into one graph, with PDL (as the engine launches) and without.
    for (int pdl = ctx.pdl() ? 1 : 0; pdl >= 0; --pdl)
      for (int k : {1, 2}) {
        const int G = ctx.sm_count() * k;
        check(d.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
        for (int i = 0; i < steps; ++i) {
          const CUdeviceptr src = i % 2 ? b.ptr() : a.ptr(), dst = i % 2 ? a.ptr() : b.ptr();
          if (pdl) ctx.launch_pdl(chain, {unsigned(G)}, {256}, 0, s, src, dst);
          else ctx.launch(chain, {unsigned(G)}, {256}, 0, s, src, dst);
        }
        CUgraph g = nullptr;
        CUgraphExec x = nullptr;
        check(d.cuStreamEndCapture(s, &g), "cuStreamEndCapture");
        check(d.cuGraphInstantiate(&x, g, 0), "cuGraphInstantiate");
        std::vector<double> us;
        for (int r = 0; r <= reps; ++r) {  // run 0 warms up
          a.fill_bytes(s, 0), b.fill_bytes(s, 0);
          Event e0, e1;
          e0.record(s);
          check(d.cuGraphLaunch(x, s), "cuGraphLaunch");
          e1.record(s);
          const double ms = Event::elapsed_ms(e0, e1);
          if (r) us.push_back(ms * 1000 / steps);
        }
        std::string why;
        if (!all_equal(a, s, G, float(steps), &why)) ok = false, std::printf("FAIL chain: %s\n", why.c_str());
        d.cuGraphExecDestroy(x), d.cuGraphDestroy(g);
        std::printf("%-52s %8d %14.3f\n",
                    pdl ? "launch boundary, PDL, in a graph" : "launch boundary, no PDL, in a graph", G, median(us));
      }

    // Grid barriers: one persistent kernel, every block resident (at most per_sm blocks an SM).
    for (int k : {1, 2, 4}) {
      if (k > per_sm) continue;
      const int G = ctx.sm_count() * k;
      std::vector<double> us;
      for (int r = 0; r <= reps; ++r) {
        a.fill_bytes(s, 0), b.fill_bytes(s, 0), counters.fill_bytes(s, 0);
        Event e0, e1;
        e0.record(s);
        ctx.launch(barrier, {unsigned(G)}, {256}, 0, s, a.ptr(), b.ptr(), counters.ptr(), counters.ptr() + 128, steps);
        e1.record(s);
        const double ms = Event::elapsed_ms(e0, e1);
        if (r) us.push_back(ms * 1000 / steps);
      }
      std::string why;
      if (!all_equal(a, s, G, float(steps), &why)) ok = false, std::printf("FAIL barrier: %s\n", why.c_str());
      std::printf("%-52s %8d %14.3f\n", "grid barrier in one persistent kernel", G, median(us));
    }
    return ok ? 0 : 1;
  } catch (const std::exception &e) {
    std::printf("bench_cuda_sync: %s\n", e.what());
    return 1;
  }
}
