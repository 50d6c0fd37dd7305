// Internal to the CPU backend: a per-thread, 64-byte aligned scratch buffer that only grows, for kernels that
// need a little workspace per call (packed weight strips, permuted activations, attention state) without
// allocating in the step loop.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

namespace vt::cpu {

class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  ~Scratch() { std::free(p_); }

  // At least n floats; the contents are not kept when it grows.
  float *floats(size_t n) {
    if (n > cap_) {
      std::free(p_);
      size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
      p_ = static_cast<float *>(std::aligned_alloc(64, bytes));
      if (!p_) throw std::bad_alloc();
      cap_ = bytes / sizeof(float);
    }
    return p_;
  }

 private:
  float *p_ = nullptr;
  size_t cap_ = 0;
};

}  // namespace vt::cpu
