// Two glibc functions that the prebuilt binaries' statically linked libstdc++ and libgcc (binding.gyp,
// VTENGINE_STATIC_RUNTIME) would otherwise import from a glibc newer than the one the prebuilds promise
// (2.34: Ubuntu 22.04, RHEL 9; scripts/check-prebuilds.mjs). Debian 12's gcc 12 was built against glibc 2.36, so:
// - libgcc's unwinder finds a frame's unwind tables with _dl_find_object (GLIBC_2.35) and has no fallback
//   compiled in: defined here over dl_iterate_phdr, as the unwinder itself did before 2.35;
// - libstdc++'s std::random_device can draw from arc4random (GLIBC_2.36): defined here over getrandom (2.25).
//   The engine never uses std::random_device; the reference comes in with libstdc++'s string instantiations.
// Both are hidden: the addon's own references bind to them at link time, and the process's other libraries keep
// glibc's. With a dynamically linked runtime (a local build) nothing references them.
#include <cstdlib>  // first: defines __GLIBC__ (through <features.h>)

#if defined(__GLIBC__)

#include <dlfcn.h>
#include <link.h>
#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#if defined(DLFO_STRUCT_HAS_EH_DBASE)  // glibc >= 2.35's <dlfcn.h> declares _dl_find_object

namespace {

struct FindObject {
  uintptr_t pc;
  dl_find_object *out;
  bool found;
};

// One loaded object: its PT_LOAD segments give its address range; when the pc falls inside, its PT_GNU_EH_FRAME
// segment is the .eh_frame_hdr the unwinder binary-searches.
int visit_object(dl_phdr_info *info, size_t, void *data) {
  auto *f = static_cast<FindObject *>(data);
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  bool contains = false;
  const void *eh_frame = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD) {
      const uintptr_t start = info->dlpi_addr + ph.p_vaddr, end = start + ph.p_memsz;
      lo = start < lo ? start : lo;
      hi = end > hi ? end : hi;
      contains = contains || (f->pc >= start && f->pc < end);
    } else if (ph.p_type == PT_GNU_EH_FRAME) {
      eh_frame = reinterpret_cast<const void *>(info->dlpi_addr + ph.p_vaddr);
    }
  }
  if (!contains) return 0;
  std::memset(f->out, 0, sizeof *f->out);
  f->out->dlfo_map_start = reinterpret_cast<void *>(lo);
  f->out->dlfo_map_end = reinterpret_cast<void *>(hi);
  f->out->dlfo_eh_frame = const_cast<void *>(eh_frame);
  Dl_info dl;
  void *map = nullptr;
  if (dladdr1(reinterpret_cast<void *>(f->pc), &dl, &map, RTLD_DL_LINKMAP)) {
    f->out->dlfo_link_map = static_cast<link_map *>(map);
  }
  f->found = true;
  return 1;
}

}  // namespace

// glibc's contract: 0 and the object's facts when pc lies in a loaded object, -1 otherwise.
extern "C" __attribute__((visibility("hidden"))) int _dl_find_object(void *pc, dl_find_object *result) noexcept {
  FindObject f{reinterpret_cast<uintptr_t>(pc), result, false};
  dl_iterate_phdr(visit_object, &f);
  return f.found ? 0 : -1;
}

#endif  // DLFO_STRUCT_HAS_EH_DBASE

extern "C" __attribute__((visibility("hidden"))) uint32_t arc4random(void) noexcept {
  uint32_t v = 0;
  for (;;) {
    const ssize_t n = getrandom(&v, sizeof v, 0);
    if (n == static_cast<ssize_t>(sizeof v)) return v;
    if (n < 0 && errno != EINTR) std::abort();  // no kernel entropy at all: arc4random cannot fail either
  }
}

#endif  // __GLIBC__
