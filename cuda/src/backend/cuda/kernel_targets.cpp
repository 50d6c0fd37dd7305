// Reads the targets out of the embedded fatbins and matches them to GPUs (contract in kernel_targets.h).
//
// The fatbin layout is not documented by NVIDIA; what is read here was checked against nvcc 13.0's output
// (-fatbin, with and without --compress-mode / -Xfatbin=-compress-all, test_kernel_targets rebuilds those
// cases whenever nvcc is present). All fields little-endian:
//   file header (16 B): u32 magic 0xBA55ED50, u16 version, u16 header size, u64 bytes of entries that follow
//   entry header:       u16 kind (1 = PTX, 2 = cubin ELF), u16 version, u32 header size, u64 payload size,
//                       ... u32 arch at +28 (90 for sm_90a), u64 flags at +40: 0x100000 = "a" (arch-specific),
//                       0x200000 = "f" (family), 0x8000 = payload compressed; the payload follows the header
// A fatbin file may hold several such headers back to back.
#include "backend/cuda/kernel_targets.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cuda/driver.h"
#include "backend/cuda/kernel_images.h"

namespace vt::cuda {

namespace {

constexpr uint32_t kFatbinMagic = 0xBA55ED50u;
constexpr uint16_t kKindPtx = 1, kKindCubin = 2;
constexpr uint64_t kFlagArchSpecific = 0x100000, kFlagFamily = 0x200000;
constexpr size_t kEntryHeaderMin = 48;  // up to and including the flags

bool refuse(std::string *error, std::string why) {
  *error = std::move(why);
  return false;
}

template <class T>
T read_le(const unsigned char *p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= T(p[i]) << (8 * i);
  return v;
}

// Cubins before PTX, then by architecture, then plain < 'a' < 'f': a stable order for lists and comparisons.
bool before(const KernelTarget &a, const KernelTarget &b) {
  if (a.ptx != b.ptx) return !a.ptx;
  if (a.arch != b.arch) return a.arch < b.arch;
  return a.suffix < b.suffix;
}

struct Embedded {
  std::vector<KernelTarget> targets;
  std::string error;
};

Embedded parse_embedded() {
  Embedded e;
  for (size_t i = 0; i < kernel_image_count; ++i) {
    std::vector<KernelTarget> t;
    std::string err;
    if (!fatbin_targets(kernel_images[i].data, kernel_images[i].size, &t, &err)) {
      e.error = std::string("kernel image ") + kernel_images[i].name + ": " + err;
      e.targets.clear();
      return e;
    }
    std::sort(t.begin(), t.end(), before);
    t.erase(std::unique(t.begin(), t.end()), t.end());
    if (i == 0) {
      e.targets = std::move(t);
    } else {  // keep what every family has: a GPU needs all of them
      std::vector<KernelTarget> both;
      std::set_intersection(e.targets.begin(), e.targets.end(), t.begin(), t.end(), std::back_inserter(both), before);
      e.targets = std::move(both);
    }
  }
  return e;
}

const Embedded &embedded() noexcept {
  static const Embedded e = [] {
    try {
      return parse_embedded();
    } catch (...) {  // bad_alloc only
      Embedded none;
      none.error = "out of memory while reading the kernel images";
      return none;
    }
  }();
  return e;
}

std::string cc_text(int cc) { return std::to_string(cc / 10) + "." + std::to_string(cc % 10); }

}  // namespace

std::string KernelTarget::name() const {
  std::string s = (ptx ? "compute_" : "sm_") + std::to_string(arch);
  if (suffix) s += suffix;
  return s;
}

bool fatbin_targets(const unsigned char *data, size_t size, std::vector<KernelTarget> *out, std::string *error) {
  out->clear();
  if (!data || size < 16) return refuse(error, "too small for a fatbin header");
  size_t off = 0;
  while (off + 16 <= size) {
    if (read_le<uint32_t>(data + off) != kFatbinMagic) {
      if (off > 0 && std::all_of(data + off, data + size, [](unsigned char c) { return c == 0; })) break;  // padding
      return refuse(error, "no fatbin magic at byte " + std::to_string(off));
    }
    const uint16_t header = read_le<uint16_t>(data + off + 6);
    const uint64_t body = read_le<uint64_t>(data + off + 8);
    if (header < 16 || header > size - off || body > size - off - header)
      return refuse(error, "fatbin header at byte " + std::to_string(off) + " runs past the end");
    size_t e = off + header;
    const size_t end = e + size_t(body);
    while (e < end) {
      if (end - e < kEntryHeaderMin) return refuse(error, "truncated entry header at byte " + std::to_string(e));
      const uint16_t kind = read_le<uint16_t>(data + e);
      const uint32_t entry_header = read_le<uint32_t>(data + e + 4);
      const uint64_t payload = read_le<uint64_t>(data + e + 8);
      if (entry_header < kEntryHeaderMin || entry_header > end - e || payload > end - e - entry_header)
        return refuse(error, "entry at byte " + std::to_string(e) + " runs past its fatbin");
      if (kind == kKindPtx || kind == kKindCubin) {
        const uint64_t flags = read_le<uint64_t>(data + e + 40);
        KernelTarget t;
        t.ptx = kind == kKindPtx;
        t.arch = int(read_le<uint32_t>(data + e + 28));
        t.suffix = flags & kFlagArchSpecific ? 'a' : flags & kFlagFamily ? 'f' : '\0';
        out->push_back(t);
      }  // other kinds (none seen from nvcc 13) carry no code we could run: skip them
      e += entry_header + size_t(payload);
    }
    off = end;
  }
  return true;
}

KernelCode kernel_code_for(int cc, const std::vector<KernelTarget> &targets) {
  // CUDA's compatibility rule: a cubin for X.y runs on X.z with z >= y, except an arch-specific one ("a"), which
  // runs on X.y alone; PTX for X.y can be JIT-compiled for any GPU of X.y or newer (an "a" PTX for X.y only). The
  // driver takes a cubin when one fits, the newest fitting one, and falls back to PTX.
  const auto fits = [cc](const KernelTarget &t) {
    if (t.suffix == 'a') return t.arch == cc;
    if (t.ptx && t.suffix != 'f') return t.arch <= cc;
    return t.arch / 10 == cc / 10 && t.arch <= cc;  // cubins, and family PTX: the same major version
  };
  KernelCode best;
  for (const KernelTarget &t : targets) {
    if (!fits(t)) continue;
    const KernelCode::Kind kind = t.ptx ? KernelCode::Ptx : KernelCode::Cubin;
    const bool better = best.kind == KernelCode::None || (kind == KernelCode::Cubin && best.kind == KernelCode::Ptx) ||
                        (kind == best.kind && (t.arch > best.target.arch || (t.arch == best.target.arch && t.suffix == 'a')));
    if (better) best = {kind, t};
  }
  return best;
}

const std::vector<KernelTarget> &embedded_kernel_targets() noexcept { return embedded().targets; }
const std::string &kernel_targets_error() noexcept { return embedded().error; }

std::string target_list(const std::vector<KernelTarget> &targets) {
  std::string s;
  for (const KernelTarget &t : targets) s += (s.empty() ? "" : " ") + t.name();
  return s;
}

std::string build_kernels_problem() {
  if (kernel_image_count == 0)
    return "this build has no CUDA kernels (built from source without nvcc or without a GPU to build for: install "
           "the prebuilt package, or set VTENGINE_CUDA_ARCH and npm install --build-from-source)";
  if (!kernel_targets_error().empty()) return "the embedded CUDA kernels could not be read: " + kernel_targets_error();
  if (embedded_kernel_targets().empty()) return "the embedded CUDA kernel images hold no target common to all of them";
  return "";
}

std::string kernel_code_problem(int ordinal, const char *name, int cc) {
  if (std::string why = build_kernels_problem(); !why.empty()) return why;
  const std::string gpu = "GPU " + std::to_string(ordinal) + " (" + name + ", compute capability " + cc_text(cc) + ")";
  if (cc < kMinComputeCapability)
    return gpu + " is too old: vtengine's CUDA kernels need compute capability " + cc_text(kMinComputeCapability) +
           " (Ampere) or newer";
  const std::vector<KernelTarget> &t = embedded_kernel_targets();
  if (kernel_code_for(cc, t).kind != KernelCode::None) return "";
  return gpu + " has no kernels in this build: it embeds " + (t.empty() ? std::string("none") : target_list(t)) +
         ", no cubin for sm_" + std::to_string(cc) + " and no PTX the driver could compile for it " +
         "(rebuild with scripts/build-cuda.mjs --arch sm_" + std::to_string(cc) + ", or all targets)";
}

}  // namespace vt::cuda
