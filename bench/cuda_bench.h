// What the CUDA benchmarks share (bench/cuda-ops.cpp, bench/cuda-gemm.cpp): random bf16 device data.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cuda/context.h"

namespace vt::cuda {

// Fills `bytes` of device memory with pseudo-random bf16 in [-1, 1): one random 64 MiB tile from the host,
// repeated with device copies.
inline void fill_random(Stream &s, DeviceBuffer &b, uint64_t seed) {
  const size_t tile = std::min<size_t>(b.bytes(), 64u << 20) & ~size_t(1);
  std::vector<uint16_t> host(tile / 2);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto &h : host) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const float f = float(int64_t(x >> 40) - (int64_t(1) << 23)) / float(1 << 23);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    h = uint16_t(u >> 16);
  }
  b.upload(s.get(), host.data(), tile);
  for (size_t off = tile; off < b.bytes(); off += tile)
    check(driver().cuMemcpyDtoDAsync(b.ptr() + off, b.ptr(), std::min(tile, b.bytes() - off), s.get()), "tile copy");
  s.synchronize();
}

}  // namespace vt::cuda
