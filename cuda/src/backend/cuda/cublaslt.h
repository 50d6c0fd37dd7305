// cuBLASLt, loaded at run time, for the tensor-core products of prefill and batched decode (M >= ~16 rows),
// where our own kernels are the fallback (DESIGN.md, GEMM). Like the Driver API (driver.h), nothing links
// against it: the library is opened with dlopen the first time a CublasLt is built, the few functions and
// constants we use are declared by hand in cublaslt.cpp, and a machine without it simply has available() false.
//
// Contexts: cuBLASLt runs on the CUDA runtime (built into the library), and the runtime works in whatever
// context is current on the calling thread; for device 0 that is its primary context, the one our Context
// retains and makes current. So cuBLASLt, its kernels and ours share one context: DeviceBuffer pointers are
// valid inside it, and its work is ordered with ours on the same stream (test_cublaslt checks both).
//
// Threads and streams: one CublasLt serves one thread at a time (its plan cache is unguarded), with its
// Context current there, and one stream at a time (all products share one workspace).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "backend/cuda/context.h"

namespace vt::cuda {

// The library as loading it found it: needs no context and no GPU, so vt_system_info can ask on any machine. Loads
// it (once per process, as CublasLt's constructor does) if that was not tried yet. Never throws.
struct CublasLtLibrary {
  bool found = false;
  std::string path;     // the name or path that loaded
  int64_t version = 0;  // cublasLtGetVersion(), e.g. 130100 for 13.1.0
  std::string reason;   // why not found; empty when found
};
CublasLtLibrary cublaslt_library() noexcept;

class CublasLt {
 public:
  // All products may use this much scratch; 32 MiB is what cuBLAS asks for on Hopper.
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;

  // Loads the library (once per process: VT_CUBLASLT_PATH when set, then libcublasLt.so.13 / .so.12 on the
  // loader path and under /usr/local/cuda), creates a handle on ctx (made current here) and allocates the
  // workspace. Never throws: when any of that fails, available() is false and reason() says why.
  explicit CublasLt(const Context &ctx);
  ~CublasLt();  // must run before the Context's destructor (declare the CublasLt after it)
  CublasLt(const CublasLt &) = delete;
  CublasLt &operator=(const CublasLt &) = delete;

  bool available() const { return handle_ != nullptr; }
  const std::string &reason() const { return reason_; }  // empty when available
  const std::string &library() const { return library_; }  // the name or path that loaded
  int64_t version() const { return version_; }  // cublasLtGetVersion(), e.g. 130100 for 13.1.0
  // Device memory this object holds (the workspace; 0 when unavailable), for the engine's accounting.
  int64_t workspace_bytes() const { return int64_t(workspace_.bytes()); }

  // y(M, N) = x(M, K) · w(N, K)ᵀ (+ bias(N)), all row-major: x and w bf16, fp32 accumulation, y bf16 or fp32
  // (y_f32). bias is fp32 or 0, added in cuBLASLt's epilogue, with an fp32 y only (cuBLASLt 13.1 on the H200
  // answers CUBLAS_STATUS_INVALID_VALUE to an fp32 bias with a bf16 y; callers keep biased bf16 products on
  // their own kernels). Any shape and any element
  // alignment of the pointers. Enqueues on s and returns: it neither allocates device memory nor synchronizes,
  // so it can be captured into a CUDA graph, whose replays then use this object's workspace (keep it alive).
  // The first product of each shape (and alignment of its pointers) also chooses an algorithm, on the host
  // only, and cuBLASLt may load kernels then; test_cublaslt checks that this works inside a capture too.
  // Throws vt::Error with the cuBLAS status name on failure (VT_ERR_INTERNAL; VT_ERR_OUT_OF_MEMORY for
  // CUBLAS_STATUS_ALLOC_FAILED).
  void matmul(CUstream s, CUdeviceptr x, int64_t M, int64_t K, CUdeviceptr w, int64_t N, CUdeviceptr y, bool y_f32,
              CUdeviceptr bias = 0);

 private:
  struct Plan;
  struct Plans;
  Plan &plan_for(int64_t M, int64_t K, int64_t N, bool y_f32, CUdeviceptr x, CUdeviceptr w, CUdeviceptr y,
                 CUdeviceptr bias);

  void *handle_ = nullptr;  // cublasLtHandle_t
  DeviceBuffer workspace_;
  std::unique_ptr<Plans> plans_;
  std::string reason_, library_;
  int64_t version_ = 0;
};

}  // namespace vt::cuda
