// Internal to the CPU backend: a per-thread, 64-byte aligned scratch buffer that only grows, for kernels that
// need a little workspace per call (packed weight strips, permuted activations, attention state) without
// allocating in the step loop. Large ones take pages of their own (host_pages.h): the pool's threads end with
// their engine, and their scratch must not be freed into malloc's arenas as it goes.
#pragma once

#include <cstddef>
#include <new>

#include "host_pages.h"

namespace vt::cpu {

class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  ~Scratch() {
    if (p_) page_buffer_free(p_, cap_ * sizeof(float));
  }

  // At least n floats; the contents are not kept when it grows.
  float *floats(size_t n) {
    if (n > cap_) {
      if (p_) page_buffer_free(p_, cap_ * sizeof(float));
      p_ = nullptr;
      cap_ = 0;
      size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
      p_ = static_cast<float *>(page_buffer_alloc(bytes));  // 64-byte aligned at least; throws bad_alloc
      cap_ = bytes / sizeof(float);
    }
    return p_;
  }

 private:
  float *p_ = nullptr;
  size_t cap_ = 0;
};

}  // namespace vt::cpu
