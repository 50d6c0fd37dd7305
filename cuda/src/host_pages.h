// Host buffers that an engine holds for its whole life (activations, logits, sampler and kernel scratch) take
// whole pages from the kernel (mmap) and give them back when freed (munmap), instead of going through malloc.
//
// Why: glibc's malloc serves a large request (128 KiB and up) with its own mmap, but when such a chunk is freed
// it raises its mmap threshold to that size (up to 32 MiB) for the rest of the process. An engine's dispose()
// frees a dozen such buffers at once, so the NEXT engine's buffers of that size come from malloc's arenas (the
// heap of whichever thread loads it), and are left there as free but resident holes when it is disposed in
// turn: measured with the soak's load/dispose cycle, the arenas grew from 5.9 to 12.1 MiB over ten engines, and
// malloc_trim(0) gave none of it back (the holes are spread across the arenas' pages). With a fixed threshold
// (MALLOC_MMAP_THRESHOLD_) they stayed at 5.8 MiB; taking the pages here does the same without changing the
// host process's malloc settings, which belong to the application.
//
// Small requests (under kPageBufferMin) still use operator new: a page each would waste more than it saves.
// Under AddressSanitizer everything uses operator new, so ASan keeps its redzones around these buffers: an
// overflow of a workspace must still be caught by scripts/sanitize.sh.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <new>
#include <vector>

namespace vt {

inline constexpr size_t kPageBufferMin = 64 * 1024;

template <class T>
struct PageAllocator {
  using value_type = T;
  PageAllocator() = default;
  template <class U>
  PageAllocator(const PageAllocator<U> &) noexcept {}

  static bool mapped(size_t bytes) {
#if defined(__SANITIZE_ADDRESS__)
    (void)bytes;
    return false;
#else
    return bytes >= kPageBufferMin;
#endif
  }

  T *allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (!mapped(bytes)) return static_cast<T *>(::operator new(bytes, std::align_val_t(alignof(T) > 64 ? alignof(T) : 64)));
    void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return static_cast<T *>(p);
  }

  void deallocate(T *p, size_t n) noexcept {
    const size_t bytes = n * sizeof(T);
    if (!mapped(bytes)) {
      ::operator delete(p, std::align_val_t(alignof(T) > 64 ? alignof(T) : 64));
      return;
    }
    munmap(p, bytes);
  }

  template <class U>
  bool operator==(const PageAllocator<U> &) const noexcept {
    return true;
  }
};

// A std::vector whose storage, once large, is whole pages of its own (see above).
template <class T>
using PageVector = std::vector<T, PageAllocator<T>>;

// Raw bytes with the same rule, for buffers that are not vectors (the CPU kernels' per-thread scratch).
inline void *page_buffer_alloc(size_t bytes) { return PageAllocator<std::byte>().allocate(bytes); }
inline void page_buffer_free(void *p, size_t bytes) { PageAllocator<std::byte>().deallocate(static_cast<std::byte *>(p), bytes); }

}  // namespace vt
