// Which GPUs the embedded kernels can run on: the targets read from the fatbins' own entry headers (so the answer
// is what this binary holds, whatever script or flags built it), and the CUDA rule that picks, for one GPU, the
// cubin the driver would load, else the PTX it would JIT-compile, else nothing. No driver is needed for either.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace vt::cuda {

// One entry of a fatbin: a cubin ("sm_90a") or PTX ("compute_80") for one architecture.
struct KernelTarget {
  bool ptx = false;
  int arch = 0;        // 90 for sm_90a; major * 10 + minor, as compute capabilities are written here
  char suffix = '\0';  // 'a' (arch-specific: that exact GPU only), 'f' (family), or none

  std::string name() const;  // "sm_90a", "compute_80"
  bool operator==(const KernelTarget &o) const { return ptx == o.ptx && arch == o.arch && suffix == o.suffix; }
};

// The entries of one fatbin image, in file order; false (with *error set) when the bytes are not a fatbin we can
// read. Only the headers are read, so compressed entries are fine.
bool fatbin_targets(const unsigned char *data, size_t size, std::vector<KernelTarget> *out, std::string *error);

// What the driver would load for a GPU of compute capability `cc` (e.g. 90) from `targets`.
struct KernelCode {
  enum Kind { None, Cubin, Ptx } kind = None;
  KernelTarget target;  // the one chosen; meaningless when None
};
KernelCode kernel_code_for(int cc, const std::vector<KernelTarget> &targets);

// The targets every embedded image holds (a GPU is only usable when every op family has code for it), sorted
// cubins first, then PTX, each by architecture. Empty when this build has no kernels. Parsed once; never throws
// (an image that cannot be read counts as holding nothing, and kernel_targets_error() says why).
const std::vector<KernelTarget> &embedded_kernel_targets() noexcept;
const std::string &kernel_targets_error() noexcept;

// "sm_80 sm_90a compute_80"
std::string target_list(const std::vector<KernelTarget> &targets);

// Why this build can run no CUDA kernel on any GPU (none embedded, or unreadable); empty when it has some.
std::string build_kernels_problem();

// Why the embedded kernels cannot run on GPU `ordinal` (`name`, compute capability `cc`), in words a user can act
// on; empty when they can (cubin or PTX). Shared by cuda_available() and vt_system_info_get so the two agree.
std::string kernel_code_problem(int ordinal, const char *name, int cc);

}  // namespace vt::cuda
