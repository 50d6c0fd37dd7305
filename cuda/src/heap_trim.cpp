#include "heap_trim.h"

#include <cstdlib>  // (any C library header defines __GLIBC__ on glibc)

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace vt {

void return_free_heap() noexcept {
#if defined(__GLIBC__)
  malloc_trim(0);  // every arena, not just the main one (glibc >= 2.8); milliseconds
#endif
}

}  // namespace vt
