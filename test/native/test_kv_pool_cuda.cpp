// The CUDA KV pool's device memory (backend/cuda/kv_pool.h) on a real GPU, through the driver alone (no kernel):
// the ceiling's address range reserved once, chunks mapped zeroed as the pool grows (one piece per plane, at fixed
// addresses: data written before a growth is still there after it), unmapped and released by a trim (the device's
// free memory, cuMemGetInfo, follows both ways), chunks mapped again after a trim zeroed (not stale), a growth past
// what the device has stopping short without an exception, and pools made and destroyed in a loop giving all their
// memory back. Free-memory figures are compared within a slack of a few MiB (the driver's own page tables). And the
// CUDA decoder's state slots as such a pool (one plane whose blocks are slots of odd sizes, cuda::slot_layout's
// strides): chunks of whole granules, slots that straddle granules written and read back across a growth, zeroed
// when mapped again after a trim.
//
// Without a usable GPU (no driver, no device, or a build without kernels) it prints "skipped: <reason>" and exits 0.
// scripts/gpu-check.sh builds it into .gpu-out/ and runs it there.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "backend/cuda/context.h"
#include "backend/cuda/driver.h"
#include "backend/cuda/kv_pool.h"
#include "check.h"
#include "status.h"

using namespace vt;
using namespace vt::cuda;

namespace {

constexpr int64_t kMiB = int64_t(1) << 20;
constexpr int64_t kSlack = 8 * kMiB;  // what the driver may take or give beside the pieces (page tables)

// The bytes of plane p's blocks [b0, b1) of the pool, read back.
std::vector<unsigned char> read(const KvPool &pool, CUstream s, int32_t p, int32_t b0, int32_t b1, int64_t block) {
  std::vector<unsigned char> out(size_t((b1 - b0) * block));
  const CUdeviceptr at = pool.base() + CUdeviceptr(p) * pool.plane_stride() + CUdeviceptr(b0 * block);
  check(driver().cuMemcpyDtoHAsync(out.data(), at, out.size(), s), "cuMemcpyDtoHAsync");
  synchronize(s);
  return out;
}

bool all(const std::vector<unsigned char> &v, unsigned char x) {
  return std::all_of(v.begin(), v.end(), [x](unsigned char c) { return c == x; });
}

void fill(const KvPool &pool, CUstream s, int32_t p, int32_t b0, int32_t b1, int64_t block, unsigned char x) {
  const CUdeviceptr at = pool.base() + CUdeviceptr(p) * pool.plane_stride() + CUdeviceptr(b0 * block);
  check(driver().cuMemsetD8Async(at, x, size_t((b1 - b0) * block), s), "cuMemsetD8Async");
  synchronize(s);
}

// Grows, writes, grows again, copies across chunks, trims, grows again: data, zeros and free memory at each step.
void grow_and_trim(const Context &ctx, CUstream s) {
  const KvPoolSupport support = kv_pool_support(ctx.ordinal());
  std::printf("%s: virtual memory management %s, granularity %lld KiB\n", ctx.name().c_str(),
              support.vmm ? "yes" : "no", (long long)(support.granularity >> 10));
  CHECK(support.vmm && support.granularity > 0);
  if (!support.vmm) return;
  // Qwen3's plane block (16 tokens x 8 KV heads x 128, bf16): 32 KiB, 64 blocks a chunk at 2 MiB granules.
  const int64_t block = 16 * 8 * 128 * 2;
  const int32_t planes = 6, ceiling = 1000;
  const int32_t chunk = kv_chunk_blocks(block, support.granularity);
  const int64_t chunk_bytes = int64_t(chunk) * block * planes;
  const int64_t free0 = ctx.free_bytes();
  {
    KvPool pool(ctx, s, planes, block, ceiling, 100, /*grows=*/true);
    synchronize(s);
    const int32_t base = (100 + chunk - 1) / chunk * chunk;
    CHECK(pool.chunk_blocks() == chunk && pool.n_blocks() == ceiling && pool.mapped_blocks() == base);
    CHECK(pool.mapped_bytes() == int64_t(base / chunk) * chunk_bytes);
    CHECK(pool.reserved_bytes() == int64_t((ceiling + chunk - 1) / chunk) * chunk * block * planes);
    CHECK(pool.plane_stride() % CUdeviceptr(support.granularity) == 0);
    const int64_t used1 = free0 - ctx.free_bytes();
    CHECK(used1 >= pool.mapped_bytes() && used1 <= pool.mapped_bytes() + kSlack);
    const CUdeviceptr base_ptr = pool.base();
    for (int32_t p = 0; p < planes; ++p) CHECK(all(read(pool, s, p, 0, base, block), 0));  // zeroed when mapped
    for (int32_t p = 0; p < planes; ++p) fill(pool, s, p, 0, base, block, static_cast<unsigned char>(0x10 + p));

    // Growth: the new chunks are zero, the old ones keep what was written, the addresses stay.
    CHECK(pool.grow(300) == std::min(ceiling, (300 + chunk - 1) / chunk * chunk));
    const int32_t grown = pool.mapped_blocks();
    CHECK(pool.base() == base_ptr && pool.mapped_bytes() == int64_t(grown / chunk) * chunk_bytes);
    const int64_t used2 = free0 - ctx.free_bytes();
    CHECK(used2 >= pool.mapped_bytes() && used2 <= pool.mapped_bytes() + kSlack);
    for (int32_t p = 0; p < planes; ++p) {
      CHECK(all(read(pool, s, p, 0, base, block), static_cast<unsigned char>(0x10 + p)));
      CHECK(all(read(pool, s, p, base, grown, block), 0));
    }
    // A block of chunk 0 copied into the last mapped block (another chunk's piece) of another plane.
    const CUdeviceptr from = pool.base() + 3 * block, to = pool.base() + pool.plane_stride() * 5 + CUdeviceptr(grown - 1) * block;
    check(driver().cuMemcpyDtoDAsync(to, from, size_t(block), s), "cuMemcpyDtoDAsync");
    synchronize(s);
    CHECK(all(read(pool, s, 5, grown - 1, grown, block), 0x10));
    fill(pool, s, 2, base, grown, block, 0x77);

    // The ceiling is not a whole number of chunks: the last chunk is mapped whole, the blocks stop at the ceiling.
    CHECK(pool.grow(ceiling) == ceiling && pool.mapped_bytes() == int64_t((ceiling + chunk - 1) / chunk) * chunk_bytes);
    CHECK(pool.grow(ceiling + 500) == ceiling);

    // Trim: back to the base; free memory comes back; what is kept is intact.
    CHECK(pool.trim(100) == base && pool.mapped_bytes() == int64_t(base / chunk) * chunk_bytes);
    const int64_t used3 = free0 - ctx.free_bytes();
    CHECK(used3 >= pool.mapped_bytes() && used3 <= pool.mapped_bytes() + kSlack);
    for (int32_t p = 0; p < planes; ++p) CHECK(all(read(pool, s, p, 0, base, block), static_cast<unsigned char>(0x10 + p)));
    // Grown again: fresh, zeroed memory where 0x77 was.
    CHECK(pool.grow(grown) == grown);
    CHECK(all(read(pool, s, 2, base, grown, block), 0));
    CHECK(pool.trim(0) == 0 && pool.mapped_bytes() == 0);  // (the engine never goes below its base; the pool may)
    CHECK(pool.grow(1) == chunk);
  }
  const int64_t leaked = free0 - ctx.free_bytes();
  CHECK(leaked <= kSlack && leaked >= -kSlack);
}

// A growth past what the device has stops where the memory ends, without an exception, and a trim gives it all back.
void out_of_memory(const Context &ctx, CUstream s) {
  const KvPoolSupport support = kv_pool_support(ctx.ordinal());
  if (!support.vmm) return;
  const int64_t block = 64 * kMiB;  // a chunk of one block: 64 MiB a plane
  const int64_t total = ctx.total_bytes(), free0 = ctx.free_bytes();
  const int32_t ceiling = int32_t(total / (2 * block)) + 16;  // two planes: more than the whole device
  {
    KvPool pool(ctx, s, 2, block, ceiling, 1, /*grows=*/true);
    int32_t got = -1;
    bool threw = false;
    try {
      got = pool.grow(ceiling);
    } catch (const Error &e) {
      threw = true;
      std::printf("  grow past the device threw: %s\n", e.what());
    }
    CHECK(!threw && got > 1 && got < ceiling && got == pool.mapped_blocks());
    CHECK(pool.mapped_bytes() <= free0 && pool.mapped_bytes() >= free0 / 2);
    std::printf("out of memory: mapped %lld MiB of %lld MiB free before (%d of %d blocks)\n",
                (long long)(pool.mapped_bytes() >> 20), (long long)(free0 >> 20), got, ceiling);
    CHECK(pool.trim(1) == 1);
    CHECK(ctx.free_bytes() >= free0 - pool.mapped_bytes() - kSlack);
    DeviceBuffer after(size_t(64) * kMiB);  // the device works on
    CHECK(after.ptr() != 0);
  }
  const int64_t leaked = free0 - ctx.free_bytes();
  CHECK(leaked <= kSlack && leaked >= -kSlack);
}

// What mapping and unmapping cost, printed for the chunk-size decision (nothing asserted on time): the pool of
// Qwen3-0.6B's shape (56 planes of 32 KiB blocks; a chunk is 1024 tokens, 112 MiB) grown by 64 chunks and trimmed.
void timing(const Context &ctx, CUstream s) {
  const KvPoolSupport support = kv_pool_support(ctx.ordinal());
  if (!support.vmm) return;
  const int64_t block = 16 * 8 * 128 * 2;
  const int32_t chunk = kv_chunk_blocks(block, support.granularity);
  KvPool pool(ctx, s, 56, block, 80 * chunk, chunk, /*grows=*/true);
  synchronize(s);
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const int32_t got = pool.grow(65 * chunk);
  synchronize(s);  // (the zeroing too)
  const auto t1 = clock::now();
  pool.trim(chunk);
  const auto t2 = clock::now();
  const double grow_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  const double trim_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  CHECK(got == 65 * chunk && pool.mapped_blocks() == chunk);
  std::printf("timing: 64 chunks of %d blocks x 56 planes (%lld MiB each): mapped and zeroed in %.1f ms (%.3f ms a "
              "chunk), unmapped in %.1f ms (%.3f ms a chunk)\n",
              chunk, (long long)(int64_t(chunk) * block * 56 >> 20), grow_ms, grow_ms / 64, trim_ms, trim_ms / 64);
}

// Pools made, grown and destroyed in a loop, growing and fixed ones alike: nothing stays behind.
void cycles(const Context &ctx, CUstream s) {
  const int64_t free0 = ctx.free_bytes();
  for (int i = 0; i < 20; ++i) {
    const bool grows = i % 4 != 3;
    KvPool pool(ctx, s, 8, 32 * 1024, 10000, 64 * (1 + i % 3), grows);
    CHECK(pool.grow(2000 + 300 * i) >= (grows ? 2000 : 10000));
    if (!grows) CHECK(pool.chunk_blocks() == 0 && pool.mapped_bytes() == int64_t(10000) * 32 * 1024 * 8);
    if (i % 2) pool.trim(64);
    synchronize(s);
  }
  const int64_t leaked = free0 - ctx.free_bytes();
  std::printf("20 pools made and freed: free memory %+lld KiB\n", (long long)(-leaked >> 10));
  CHECK(leaked <= kSlack && leaked >= -kSlack);
}

// State slots: a pool of one plane whose blocks are slots, at the strides slot_layout gives Qwen3.5-0.8B's slot
// (20,201,472 bytes) at 256 seats (padded to 512 KiB: 4 slots a chunk) and at 16 (whole granules: 1 a chunk), and a
// tiny unpadded one (31,488 bytes at a stride of its own: thousands a chunk, mapped whole below the ceiling).
void slot_regions(const Context &ctx, CUstream s) {
  const KvPoolSupport support = kv_pool_support(ctx.ordinal());
  if (!support.vmm) return;
  const int64_t g = support.granularity, free0 = ctx.free_bytes();
  struct Case {
    int64_t stride;
    int32_t ceiling, base;
  };
  const Case cases[] = {{slot_layout(20201472, 256, g).stride, 40, 1},
                        {slot_layout(20201472, 16, g).stride, 16, 1},
                        {31488, 100, 1}};
  for (const Case &c : cases) {
    KvPool pool(ctx, s, 1, c.stride, c.ceiling, c.base, /*grows=*/true);
    synchronize(s);
    const int32_t chunk = kv_chunk_blocks(c.stride, g);
    const int32_t first = std::min(c.ceiling, chunk);
    std::printf("slots of %lld bytes: %d a chunk (%lld MiB)\n", (long long)c.stride, chunk,
                (long long)(int64_t(chunk) * c.stride >> 20));
    CHECK(pool.chunk_blocks() == chunk && (int64_t(chunk) * c.stride) % g == 0);
    CHECK(pool.mapped_blocks() == first && pool.mapped_bytes() == int64_t(chunk) * c.stride);
    CHECK(pool.ceiling_bytes() == int64_t(c.ceiling) * c.stride);
    CHECK(all(read(pool, s, 0, 0, first, c.stride), 0));
    fill(pool, s, 0, 0, first, c.stride, 0x5a);
    if (first == c.ceiling) {  // one chunk holds them all: nothing to grow
      CHECK(pool.grow(c.ceiling) == c.ceiling && pool.trim(1) == c.ceiling);
      continue;
    }
    // The next chunks: new slots zero, the old ones as written, across the granules they straddle.
    const int32_t grown = std::min(c.ceiling, 3 * chunk);
    CHECK(pool.grow(grown) == grown && pool.mapped_bytes() == int64_t(grown / chunk) * chunk * c.stride);
    CHECK(all(read(pool, s, 0, 0, first, c.stride), 0x5a) && all(read(pool, s, 0, first, grown, c.stride), 0));
    fill(pool, s, 0, first, grown, c.stride, 0x6b);
    CHECK(all(read(pool, s, 0, grown - 1, grown, c.stride), 0x6b));
    // Trimmed to the first chunk and grown again: what stays is intact, what comes back is zeroed.
    CHECK(pool.trim(1) == first && pool.mapped_bytes() == int64_t(chunk) * c.stride);
    CHECK(pool.grow(grown) == grown);
    CHECK(all(read(pool, s, 0, 0, first, c.stride), 0x5a) && all(read(pool, s, 0, first, grown, c.stride), 0));
  }
  const int64_t leaked = free0 - ctx.free_bytes();
  CHECK(leaked <= kSlack && leaked >= -kSlack);
}

// A fixed pool: one allocation, zeroed, the plane stride its n_blocks blocks.
void fixed_pool(const Context &ctx, CUstream s) {
  const int64_t block = 4096;
  KvPool pool(ctx, s, 4, block, 300, 10, /*grows=*/false);
  synchronize(s);
  CHECK(pool.chunk_blocks() == 0 && pool.mapped_blocks() == 300 && pool.plane_stride() == CUdeviceptr(300 * block));
  CHECK(pool.mapped_bytes() == 4 * 300 * block && pool.grow(1000) == 300 && pool.trim(0) == 300);
  for (int32_t p = 0; p < 4; ++p) CHECK(all(read(pool, s, p, 0, 300, block), 0));
}

}  // namespace

int main() {
  const Availability a = cuda_available();
  if (!a.ok) {
    std::printf("skipped: %s\n0 passed, 0 failed\n", a.reason.c_str());
    return 0;
  }
  try {
    Context ctx(0);
    Stream stream;
    grow_and_trim(ctx, stream.get());
    fixed_pool(ctx, stream.get());
    slot_regions(ctx, stream.get());
    cycles(ctx, stream.get());
    timing(ctx, stream.get());
    out_of_memory(ctx, stream.get());
  } catch (const Error &e) {
    if (e.status() == VT_ERR_NO_GPU) {
      std::printf("skipped: %s\n0 passed, 0 failed\n", e.what());
      return 0;
    }
    record(false, std::string("unexpected error: ") + e.what());
  }
  std::printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
