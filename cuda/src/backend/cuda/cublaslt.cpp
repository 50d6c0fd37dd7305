// cuBLASLt through dlopen (contract in cublaslt.h). The library stays loaded for the life of the process,
// like libcuda: handles and captured graphs point into it.
#include "backend/cuda/cublaslt.h"

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <unordered_map>
#include <vector>

#include "backend/cuda/dl_symbols.h"
#include "status.h"
#include "tuning.h"

namespace vt::cuda {

namespace {

// --- the cuBLASLt ABI we use ------------------------------------------------------------------------------------
// Checked against cublasLt.h and cublas_api.h of cuBLAS 13.4.0 (CUBLAS_VER_MAJOR 13, MINOR 4) and CUDA 13.0's
// library_types.h; the values and the heuristic result's layout are the same in the cuBLAS 12 headers. Handles
// and descriptors are opaque pointers; C enums travel as 32-bit ints. A wrong attribute size is reported by
// cuBLASLt (CUBLAS_STATUS_INVALID_VALUE), so each set_attr below passes exactly the type the header documents.
using cublasStatus_t = int;
enum : int {  // cublasStatus_t (cublas_api.h)
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
  CUBLAS_STATUS_LICENSE_ERROR = 16,
};
enum : int { CUDA_R_32F = 0, CUDA_R_16BF = 14 };      // cudaDataType_t (library_types.h)
enum : int { CUBLAS_COMPUTE_32F = 68 };               // cublasComputeType_t (cublas_api.h)
enum : int32_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };  // cublasOperation_t (cublas_api.h)
enum : int {  // cublasLtMatmulDescAttributes_t, with the type each one takes
  CUBLASLT_MATMUL_DESC_TRANSA = 3,           // int32_t
  CUBLASLT_MATMUL_DESC_TRANSB = 4,           // int32_t
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,         // uint32_t
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,     // const void *
  CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26,  // int32_t (a cudaDataType_t)
};
enum : uint32_t { CUBLASLT_EPILOGUE_BIAS = 4 };  // cublasLtEpilogue_t
enum : int {  // cublasLtMatmulPreferenceAttributes_t
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,    // uint64_t
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,  // uint32_t, each default 256
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};
struct LtAlgo {  // cublasLtMatmulAlgo_t
  uint64_t data[8];
};
struct LtHeuristicResult {  // cublasLtMatmulHeuristicResult_t
  LtAlgo algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};
static_assert(sizeof(LtAlgo) == 64 && sizeof(LtHeuristicResult) == 96, "cuBLASLt ABI");

struct Lt {
  cublasStatus_t (*cublasLtCreate)(void **handle);
  cublasStatus_t (*cublasLtDestroy)(void *handle);
  size_t (*cublasLtGetVersion)();
  const char *(*cublasLtGetStatusName)(cublasStatus_t);  // optional: our own table otherwise
  cublasStatus_t (*cublasLtMatmulDescCreate)(void **desc, int compute_type, int scale_type);
  cublasStatus_t (*cublasLtMatmulDescDestroy)(void *desc);
  cublasStatus_t (*cublasLtMatmulDescSetAttribute)(void *desc, int attr, const void *buf, size_t bytes);
  cublasStatus_t (*cublasLtMatrixLayoutCreate)(void **layout, int type, uint64_t rows, uint64_t cols, int64_t ld);
  cublasStatus_t (*cublasLtMatrixLayoutDestroy)(void *layout);
  cublasStatus_t (*cublasLtMatmulPreferenceCreate)(void **pref);
  cublasStatus_t (*cublasLtMatmulPreferenceDestroy)(void *pref);
  cublasStatus_t (*cublasLtMatmulPreferenceSetAttribute)(void *pref, int attr, const void *buf, size_t bytes);
  cublasStatus_t (*cublasLtMatmulAlgoGetHeuristic)(void *handle, void *desc, void *a, void *b, void *c, void *d,
                                                   void *pref, int requested, LtHeuristicResult *results,
                                                   int *returned);
  cublasStatus_t (*cublasLtMatmul)(void *handle, void *desc, const void *alpha, const void *a, void *a_layout,
                                   const void *b, void *b_layout, const void *beta, const void *c, void *c_layout,
                                   void *d, void *d_layout, const LtAlgo *algo, void *workspace,
                                   size_t workspace_bytes, CUstream stream);
};

// --- loading ------------------------------------------------------------------------------------------------
struct Loaded {
  Lt lt{};
  bool ok = false;
  std::string path, reason;
  int64_t version = 0;
};

// Where to look, in order: the user's choice, the loader path, then the toolkit's usual folders (which the
// loader path often lacks).
std::vector<std::string> candidates() {
  std::vector<std::string> c;
  if (std::string p = cublaslt_path_env(); !p.empty()) c.push_back(p);
  const char *names[] = {"libcublasLt.so.13", "libcublasLt.so.12"};
  std::vector<std::string> dirs = {"/usr/local/cuda/lib64"};
#if defined(__x86_64__)
  dirs.push_back("/usr/local/cuda/targets/x86_64-linux/lib");
#elif defined(__aarch64__)
  dirs.push_back("/usr/local/cuda/targets/sbsa-linux/lib");     // Grace, GB10, and Jetson Thor from CUDA 13
  dirs.push_back("/usr/local/cuda/targets/aarch64-linux/lib");  // older Jetson
#endif
  for (const char *n : names) c.push_back(n);
  for (const std::string &d : dirs)
    for (const char *n : names) c.push_back(d + "/" + n);
  return c;
}

// Resolves every function from an opened library; empty string when all are there, else the first missing one.
std::string resolve_all(void *lib, Lt &f) {
  std::string m;
  resolve(lib, f.cublasLtCreate, "cublasLtCreate", nullptr, &m);
  resolve(lib, f.cublasLtDestroy, "cublasLtDestroy", nullptr, &m);
  resolve(lib, f.cublasLtGetVersion, "cublasLtGetVersion", nullptr, &m);
  resolve(lib, f.cublasLtMatmulDescCreate, "cublasLtMatmulDescCreate", nullptr, &m);
  resolve(lib, f.cublasLtMatmulDescDestroy, "cublasLtMatmulDescDestroy", nullptr, &m);
  resolve(lib, f.cublasLtMatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute", nullptr, &m);
  resolve(lib, f.cublasLtMatrixLayoutCreate, "cublasLtMatrixLayoutCreate", nullptr, &m);
  resolve(lib, f.cublasLtMatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy", nullptr, &m);
  resolve(lib, f.cublasLtMatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate", nullptr, &m);
  resolve(lib, f.cublasLtMatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy", nullptr, &m);
  resolve(lib, f.cublasLtMatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute", nullptr, &m);
  resolve(lib, f.cublasLtMatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic", nullptr, &m);
  resolve(lib, f.cublasLtMatmul, "cublasLtMatmul", nullptr, &m);
  f.cublasLtGetStatusName = reinterpret_cast<const char *(*)(cublasStatus_t)>(dlsym(lib, "cublasLtGetStatusName"));
  return m;
}

Loaded load() {
  Loaded L;
  std::string tried, first_error;
  for (const std::string &c : candidates()) {
    tried += (tried.empty() ? "" : ", ") + c;
    void *lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char *e = dlerror();
      if (first_error.empty()) first_error = e ? e : "unknown error";
      continue;
    }
    const std::string missing = resolve_all(lib, L.lt);
    if (!missing.empty()) {
      if (first_error.empty()) first_error = c + " has no " + missing;
      L.lt = Lt{};
      dlclose(lib);
      continue;
    }
    L.ok = true;
    L.path = c;
    L.version = int64_t(L.lt.cublasLtGetVersion());
    return L;
  }
  L.reason = "cuBLASLt not found (tried " + tried + "; set VT_CUBLASLT_PATH to its file): " + first_error;
  return L;
}

// Loaded once, on first use, thread-safe (function-local static).
const Loaded &loaded() {
  static const Loaded L = load();
  return L;
}

const Lt &lt() { return loaded().lt; }

std::string status_name(cublasStatus_t st) {
  if (const auto f = lt().cublasLtGetStatusName)
    if (const char *n = f(st)) return n;
  switch (st) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "cuBLAS status " + std::to_string(st);
}

void check_lt(cublasStatus_t st, const std::string &what) {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  fail(st == CUBLAS_STATUS_ALLOC_FAILED ? VT_ERR_OUT_OF_MEMORY : VT_ERR_INTERNAL, what + ": " + status_name(st));
}

template <class T>
void set_desc(void *desc, int attr, const T &value, const char *name) {
  const cublasStatus_t st = lt().cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof value);
  if (st != CUBLAS_STATUS_SUCCESS) check_lt(st, std::string("cublasLtMatmulDescSetAttribute(") + name + ")");
}
template <class T>
void set_pref(void *pref, int attr, const T &value, const char *name) {
  const cublasStatus_t st = lt().cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof value);
  if (st != CUBLAS_STATUS_SUCCESS) check_lt(st, std::string("cublasLtMatmulPreferenceSetAttribute(") + name + ")");
}

// The largest power of two up to 256 that divides p: the alignment cuBLASLt's preferences ask about.
uint32_t alignment(CUdeviceptr p) { return p == 0 ? 256u : uint32_t(std::min<CUdeviceptr>(256, p & (~p + 1))); }

const void *host_view(CUdeviceptr p) { return reinterpret_cast<const void *>(static_cast<uintptr_t>(p)); }

std::string shape_text(int64_t M, int64_t K, int64_t N, bool y_f32, bool bias) {
  return "M=" + std::to_string(M) + " K=" + std::to_string(K) + " N=" + std::to_string(N) + ", y " +
         (y_f32 ? "f32" : "bf16") + (bias ? " + f32 bias" : "");
}

}  // namespace

// A product's descriptors and chosen algorithm, made once per shape and reused (cuBLASLt reads them on the
// host when a product is enqueued, so a captured graph does not depend on them afterwards).
struct CublasLt::Plan {
  void *desc = nullptr, *a = nullptr, *b = nullptr, *d = nullptr;
  LtAlgo algo{};
};

struct CublasLt::Plans {
  struct Key {
    int64_t M, K, N;
    bool y_f32, bias;
    uint32_t align_x, align_w, align_y, align_bias;  // an algorithm chosen for wider alignment may not run
    bool operator==(const Key &) const = default;
  };
  struct Hash {
    size_t operator()(const Key &k) const {
      uint64_t h = uint64_t(k.M) * 0x9e3779b97f4a7c15ull;
      for (uint64_t v : {uint64_t(k.K), uint64_t(k.N),
                         uint64_t(k.y_f32) | uint64_t(k.bias) << 1 | uint64_t(k.align_x) << 2 |
                             uint64_t(k.align_w) << 11 | uint64_t(k.align_y) << 20 | uint64_t(k.align_bias) << 29})
        h = (h ^ v) * 0x100000001b3ull + (h >> 29);
      return size_t(h);
    }
  };
  std::unordered_map<Key, Plan, Hash> map;

  static void destroy(Plan &p) {
    const Lt &f = lt();
    if (p.a) f.cublasLtMatrixLayoutDestroy(p.a);
    if (p.b) f.cublasLtMatrixLayoutDestroy(p.b);
    if (p.d) f.cublasLtMatrixLayoutDestroy(p.d);
    if (p.desc) f.cublasLtMatmulDescDestroy(p.desc);
    p = Plan{};
  }
};

CublasLt::CublasLt(const Context &ctx) {
  try {
    const Loaded &L = loaded();
    if (!L.ok) {
      reason_ = L.reason;
      return;
    }
    library_ = L.path;
    version_ = L.version;
    ctx.make_current();  // the handle belongs to the current device, i.e. to ctx's primary context
    void *h = nullptr;
    const cublasStatus_t st = L.lt.cublasLtCreate(&h);
    if (st != CUBLAS_STATUS_SUCCESS || !h) {
      reason_ = "cublasLtCreate failed: " + status_name(st);
      return;
    }
    try {
      workspace_ = DeviceBuffer(kWorkspaceBytes);
      plans_ = std::make_unique<Plans>();
    } catch (...) {
      L.lt.cublasLtDestroy(h);
      throw;
    }
    handle_ = h;
  } catch (const std::exception &e) {
    reason_ = std::string("cuBLASLt setup failed: ") + e.what();
  } catch (...) {
    reason_ = "cuBLASLt setup failed";
  }
}

CublasLt::~CublasLt() {
  if (!handle_) return;
  for (auto &kv : plans_->map) Plans::destroy(kv.second);
  lt().cublasLtDestroy(handle_);
}

CublasLt::Plan &CublasLt::plan_for(int64_t M, int64_t K, int64_t N, bool y_f32, CUdeviceptr x, CUdeviceptr w,
                                   CUdeviceptr y, CUdeviceptr bias) {
  const Plans::Key key{M,           K,           N,           y_f32, bias != 0, alignment(x), alignment(w),
                       alignment(y), bias ? alignment(bias) : 0u};
  if (auto it = plans_->map.find(key); it != plans_->map.end()) return it->second;

  // Row-major y = x·wᵀ is column-major yᵀ = w·xᵀ, which is what cuBLASLt computes as D = op(A)·op(B), all
  // column-major: A is w's memory read as a K x N matrix (ld K) and transposed, B is x's memory as K x M
  // (ld K), D is y's memory as N x M (ld N). The bias runs along D's rows, i.e. along N.
  const Lt &f = lt();
  Plan p;
  void *pref = nullptr;
  try {
    check_lt(f.cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    set_desc(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, int32_t(CUBLAS_OP_T), "TRANSA");
    set_desc(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, int32_t(CUBLAS_OP_N), "TRANSB");
    if (bias) {
      set_desc(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, uint32_t(CUBLASLT_EPILOGUE_BIAS), "EPILOGUE");
      set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t(CUDA_R_32F), "BIAS_DATA_TYPE");
      set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, host_view(bias), "BIAS_POINTER");  // its alignment counts
    }
    check_lt(f.cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, uint64_t(K), uint64_t(N), K),
             "cublasLtMatrixLayoutCreate(w)");
    check_lt(f.cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, uint64_t(K), uint64_t(M), K),
             "cublasLtMatrixLayoutCreate(x)");
    check_lt(f.cublasLtMatrixLayoutCreate(&p.d, y_f32 ? CUDA_R_32F : CUDA_R_16BF, uint64_t(N), uint64_t(M), N),
             "cublasLtMatrixLayoutCreate(y)");

    check_lt(f.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t(workspace_.bytes()), "MAX_WORKSPACE_BYTES");
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_w, "MIN_ALIGNMENT_A_BYTES");
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_x, "MIN_ALIGNMENT_B_BYTES");
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_y, "MIN_ALIGNMENT_C_BYTES");
    set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_y, "MIN_ALIGNMENT_D_BYTES");
    LtHeuristicResult r{};
    int found = 0;
    const cublasStatus_t st =
        f.cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.d, p.d, pref, 1, &r, &found);
    f.cublasLtMatmulPreferenceDestroy(pref);
    pref = nullptr;
    const std::string shape = shape_text(M, K, N, y_f32, bias != 0);
    if (st != CUBLAS_STATUS_SUCCESS) check_lt(st, "cublasLtMatmulAlgoGetHeuristic(" + shape + ")");
    if (found < 1 || r.state != CUBLAS_STATUS_SUCCESS)
      fail(VT_ERR_INTERNAL, "cuBLASLt has no algorithm for " + shape + (found < 1 ? "" : ": " + status_name(r.state)));
    if (r.workspaceSize > workspace_.bytes())
      fail(VT_ERR_INTERNAL, "cuBLASLt's algorithm for " + shape + " wants " + std::to_string(r.workspaceSize) +
                                " bytes of workspace");
    p.algo = r.algo;
    return plans_->map.emplace(key, p).first->second;
  } catch (...) {
    if (pref) f.cublasLtMatmulPreferenceDestroy(pref);
    Plans::destroy(p);
    throw;
  }
}

void CublasLt::matmul(CUstream s, CUdeviceptr x, int64_t M, int64_t K, CUdeviceptr w, int64_t N, CUdeviceptr y,
                      bool y_f32, CUdeviceptr bias) {
  if (!available()) fail(VT_ERR_INTERNAL, "cuBLASLt is not available: " + reason_);
  if (M < 0 || M > INT_MAX || K <= 0 || K > INT_MAX || N <= 0 || N > INT_MAX)
    fail(VT_ERR_INTERNAL, "CublasLt::matmul called with a bad shape (" + shape_text(M, K, N, y_f32, bias != 0) + ")");
  if (M == 0) return;
  if (!x || !w || !y) fail(VT_ERR_INTERNAL, "CublasLt::matmul called with a null pointer");
  if (bias && !y_f32) fail(VT_ERR_INTERNAL, "CublasLt::matmul: an fp32 bias needs an fp32 output");
  Plan &p = plan_for(M, K, N, y_f32, x, w, y, bias);
  if (bias) set_desc(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, host_view(bias), "BIAS_POINTER");
  const float alpha = 1.0f, beta = 0.0f;  // host scalars in the scale type (fp32); beta 0: C is not read
  void *const yp = const_cast<void *>(host_view(y)), *const ws = const_cast<void *>(host_view(workspace_.ptr()));
  const cublasStatus_t st = lt().cublasLtMatmul(handle_, p.desc, &alpha, host_view(w), p.a, host_view(x), p.b, &beta,
                                                yp, p.d, yp, p.d, &p.algo, ws, workspace_.bytes(), s);
  if (st != CUBLAS_STATUS_SUCCESS) check_lt(st, "cublasLtMatmul(" + shape_text(M, K, N, y_f32, bias != 0) + ")");
}

CublasLtLibrary cublaslt_library() noexcept {
  try {
    const Loaded &L = loaded();
    CublasLtLibrary out;
    out.found = L.ok;
    out.path = L.path;
    out.version = L.version;
    out.reason = L.reason;
    return out;
  } catch (...) {  // bad_alloc only
    CublasLtLibrary none;
    none.reason = "looking for cuBLASLt failed (out of memory)";
    return none;
  }
}

}  // namespace vt::cuda
