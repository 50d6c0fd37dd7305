#include "kv_cache.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "residency.h"
#include "status.h"

namespace vt {

KvCache::KvCache(int32_t n_layers, int32_t n_blocks, int32_t block_size, int32_t n_kv_heads, int32_t head_dim)
    : n_blocks_(n_blocks), block_size_(block_size) {
  layer_floats_ = int64_t(n_blocks) * block_size * n_kv_heads * head_dim;
  bytes_ = layer_floats_ * 2 * n_layers * int64_t(sizeof(float));
  void *p = mmap(nullptr, size_t(bytes_), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    fail(VT_ERR_OUT_OF_MEMORY, "cannot reserve " + std::to_string(bytes_) + " bytes for the KV cache: " + std::strerror(errno) +
                                   " (lower kvCacheBytes or maxContext)");
  base_ = static_cast<float *>(p);
}

int64_t KvCache::resident_bytes() const { return vt::resident_bytes(base_, size_t(bytes_)); }

KvCache::~KvCache() {
  if (base_) munmap(base_, size_t(bytes_));
}

}  // namespace vt
