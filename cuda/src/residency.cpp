#include "residency.h"

#include <sys/mman.h>
#include <unistd.h>

#include <vector>

namespace vt {

int64_t resident_bytes(const void *base, size_t size) {
  if (!base || size == 0) return 0;
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> vec((size + page - 1) / page);
  if (mincore(const_cast<void *>(base), size, vec.data()) != 0) return -1;
  int64_t pages = 0;
  for (unsigned char v : vec) pages += v & 1;
  return pages * int64_t(page);
}

}  // namespace vt
