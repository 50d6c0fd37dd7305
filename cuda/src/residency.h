// How much of a mapping is resident in memory now: mincore over its pages. Used for the honest part of
// engine.memory(): mapped weights actually in the page cache, KV blocks actually touched.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vt {

// Bytes of [base, base + size) resident now; -1 when the kernel will not say. base must be page-aligned.
int64_t resident_bytes(const void *base, size_t size);

}  // namespace vt
