// The CUDA Driver API, loaded at run time. The types and functions we use are declared here, so the host code
// compiles with a plain g++ (or a cross g++ for aarch64) and no CUDA toolkit; libcuda.so.1 is opened with
// dlopen the first time it is needed, and a machine without it simply has no CUDA (cuda_available() says why).
// Function pointers carry the ABI of the versioned symbols (cuMemAlloc_v2, ...) that cuda.h maps names onto.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace vt::cuda {

// --- types (ABI-compatible with cuda.h) ---------------------------------------------------------------------
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;
struct CUgraphNode_st;
using CUcontext = CUctx_st *;
using CUmodule = CUmod_st *;
using CUfunction = CUfunc_st *;
using CUstream = CUstream_st *;
using CUevent = CUevent_st *;
using CUgraph = CUgraph_st *;
using CUgraphExec = CUgraphExec_st *;
using CUgraphNode = CUgraphNode_st *;

// cuLaunchKernelEx's configuration (cuda.h: CUlaunchConfig, CUlaunchAttribute with its 64-byte value union).
enum : int {
  CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2,
  CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
  CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6,
};
struct CUlaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int cooperative;
    struct {
      unsigned x, y, z;
    } clusterDim;
    int programmaticStreamSerializationAllowed;
  } value;
};
struct CUlaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute *attrs;
  unsigned numAttrs;
};
static_assert(sizeof(CUlaunchAttribute) == 72, "CUlaunchAttribute must match cuda.h");

// cuGraphExecUpdate_v2's report (cuda.h: CUgraphExecUpdateResultInfo_v1).
struct CUgraphExecUpdateResultInfo {
  int result;  // CUgraphExecUpdateResult: 0 = CU_GRAPH_EXEC_UPDATE_SUCCESS
  CUgraphNode errorNode;
  CUgraphNode errorFromNode;
};

// The constants we use, with cuda.h's values.
enum : int {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_INSUFFICIENT_DRIVER = 35,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  CUDA_ERROR_NOT_FOUND = 500,
};
enum : int {
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_INTEGRATED = 18,  // 1: the GPU shares the host's memory (GB10, Jetson Thor)
  CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
};
enum : int { CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8 };
enum : unsigned { CU_STREAM_NON_BLOCKING = 1, CU_EVENT_DEFAULT = 0 };
// CUstreamCaptureMode: thread-local capture only forbids unsafe calls (cuMemAlloc, ...) on the capturing
// thread, so a JS thread asking for memory figures during a capture is not affected.
enum : int { CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1 };
enum : unsigned { CU_MEMHOSTALLOC_PORTABLE = 1, CU_MEMHOSTALLOC_DEVICEMAP = 2 };

// Virtual memory management (the KV pool that grows: an address range reserved once, physical memory mapped into
// it in chunks). cuda.h's CUmemLocation, CUmemAllocationProp and CUmemAccessDesc, with the values we use.
using CUmemGenericAllocationHandle = unsigned long long;
enum : int { CU_MEM_LOCATION_TYPE_DEVICE = 1, CU_MEM_ALLOCATION_TYPE_PINNED = 1, CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3 };
enum : int { CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1 };
struct CUmemLocation {
  int type;
  int id;
};
struct CUmemAllocationProp {
  int type;                  // CU_MEM_ALLOCATION_TYPE_PINNED
  int requestedHandleTypes;  // 0: none
  CUmemLocation location;
  void *win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};
struct CUmemAccessDesc {
  CUmemLocation location;
  int flags;  // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
};
static_assert(sizeof(CUmemAllocationProp) == 32 && sizeof(CUmemAccessDesc) == 12, "VMM structs must match cuda.h");

// The Tensor Memory Accelerator's tensor maps (sm_90+ GEMM tiles, cp.async.bulk.tensor): an opaque 128-byte
// descriptor the host encodes and a kernel receives by value. cuda.h's enums, the values we use.
struct alignas(64) CUtensorMap {
  unsigned long long opaque[16];
};
enum : int { CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9 };
enum : int { CU_TENSOR_MAP_INTERLEAVE_NONE = 0 };
enum : int { CU_TENSOR_MAP_SWIZZLE_NONE = 0, CU_TENSOR_MAP_SWIZZLE_128B = 3 };
enum : int { CU_TENSOR_MAP_L2_PROMOTION_NONE = 0, CU_TENSOR_MAP_L2_PROMOTION_L2_128B = 2, CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3 };
enum : int { CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0 };

// --- the function table ----------------------------------------------------------------------------------------
struct Driver {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int *version);
  CUresult (*cuGetErrorString)(CUresult, const char **);
  CUresult (*cuGetErrorName)(CUresult, const char **);
  CUresult (*cuDeviceGetCount)(int *count);
  CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
  CUresult (*cuDeviceGetName)(char *name, int len, CUdevice dev);
  CUresult (*cuDeviceGetAttribute)(int *value, int attribute, CUdevice dev);
  CUresult (*cuDeviceTotalMem)(size_t *bytes, CUdevice dev);                  // _v2
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice dev);                        // _v2
  CUresult (*cuCtxSetCurrent)(CUcontext ctx);
  CUresult (*cuCtxGetCurrent)(CUcontext *ctx);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadData)(CUmodule *mod, const void *image);
  CUresult (*cuModuleUnload)(CUmodule mod);
  CUresult (*cuModuleGetFunction)(CUfunction *fn, CUmodule mod, const char *name);
  CUresult (*cuFuncSetAttribute)(CUfunction fn, int attribute, int value);
  CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *blocks, CUfunction fn, int block_size,
                                                          size_t dynamic_smem);
  CUresult (*cuMemGetInfo)(size_t *free, size_t *total);                      // _v2
  CUresult (*cuMemAlloc)(CUdeviceptr *p, size_t bytes);                       // _v2
  CUresult (*cuMemFree)(CUdeviceptr p);                                       // _v2
  CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void *src, size_t bytes);   // _v2
  CUresult (*cuMemcpyDtoH)(void *dst, CUdeviceptr src, size_t bytes);         // _v2
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s);  // _v2
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t bytes, CUstream s);  // _v2
  CUresult (*cuMemcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t bytes, CUstream s);        // _v2
  CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t n, CUstream s);
  CUresult (*cuStreamCreate)(CUstream *s, unsigned flags);
  CUresult (*cuStreamDestroy)(CUstream s);                                    // _v2
  CUresult (*cuStreamSynchronize)(CUstream s);
  CUresult (*cuEventCreate)(CUevent *e, unsigned flags);
  CUresult (*cuEventDestroy)(CUevent e);                                      // _v2
  CUresult (*cuEventRecord)(CUevent e, CUstream s);
  CUresult (*cuEventSynchronize)(CUevent e);
  CUresult (*cuEventElapsedTime)(float *ms, CUevent start, CUevent end);      // _v2 where the driver has it
  // CUDA graphs (decode steps) and pinned host memory (the step's metadata staging)
  CUresult (*cuStreamBeginCapture)(CUstream s, int mode);                     // _v2
  CUresult (*cuStreamEndCapture)(CUstream s, CUgraph *graph);
  CUresult (*cuGraphInstantiate)(CUgraphExec *exec, CUgraph graph, unsigned long long flags);  // WithFlags
  CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream s);
  CUresult (*cuGraphExecUpdate)(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo *info);  // _v2
  CUresult (*cuGraphExecDestroy)(CUgraphExec exec);
  CUresult (*cuGraphDestroy)(CUgraph graph);
  CUresult (*cuGraphGetNodes)(CUgraph graph, CUgraphNode *nodes, size_t *n);
  CUresult (*cuMemHostAlloc)(void **p, size_t bytes, unsigned flags);
  CUresult (*cuMemFreeHost)(void *p);
  CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr *dptr, void *p, unsigned flags);  // _v2
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig *config, CUfunction fn, void **params, void **extra);
  // How many clusters of config's shape can be resident at once (CUDA 12.0, as cuLaunchKernelEx).
  CUresult (*cuOccupancyMaxActiveClusters)(int *clusters, CUfunction fn, const CUlaunchConfig *config);
  CUresult (*cuLaunchKernel)(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned shared_bytes, CUstream s, void **params, void **extra);
  // Virtual memory management (every driver we accept has it; CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
  // says whether a device does)
  CUresult (*cuMemAddressReserve)(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                                  unsigned long long flags);
  CUresult (*cuMemAddressFree)(CUdeviceptr ptr, size_t size);
  CUresult (*cuMemCreate)(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                          unsigned long long flags);
  CUresult (*cuMemRelease)(CUmemGenericAllocationHandle handle);
  CUresult (*cuMemMap)(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                       unsigned long long flags);
  CUresult (*cuMemUnmap)(CUdeviceptr ptr, size_t size);
  CUresult (*cuMemSetAccess)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count);
  CUresult (*cuMemGetAllocationGranularity)(size_t *granularity, const CUmemAllocationProp *prop, int option);
  // Tensor maps (host only: encodes a descriptor, touches no device)
  CUresult (*cuTensorMapEncodeTiled)(CUtensorMap *map, int data_type, unsigned rank, void *global_address,
                                     const unsigned long long *global_dim, const unsigned long long *global_strides,
                                     const unsigned *box_dim, const unsigned *element_strides, int interleave,
                                     int swizzle, int l2_promotion, int oob_fill);
};

// The oldest driver the embedded kernels are built for: nvcc 13.0's cubins and PTX need a CUDA 13.0 driver.
constexpr int kMinDriverVersion = 13000;
// The oldest GPU generation the fatbin has code for (Ampere, sm_80).
constexpr int kMinComputeCapability = 80;

struct Availability {
  bool ok = false;
  std::string reason;       // why not, in words a user can act on; empty when ok
  int driver_version = 0;   // e.g. 13000 for CUDA 13.0; 0 when the library is absent
  int device_count = 0;
};

// Whether this process can run the CUDA backend on device 0: libcuda.so.1 loads, cuInit succeeds, the driver
// is new enough, a device exists, and this build embeds kernels that run on device 0 (a cubin for it, or PTX the
// driver can compile; kernel_targets.h). Never throws;
// the answer is computed once and cached (thread-safe).
Availability cuda_available() noexcept;

// Multiprocessors and memory of device `ordinal`, asked of the driver without a context (for estimates before
// loading). Throw like driver() when CUDA is not usable.
int device_sm_count(int ordinal);
int64_t device_total_bytes(int ordinal);

// The loaded function table. Throws vt::Error(VT_ERR_NO_GPU) with cuda_available()'s reason when CUDA is not
// usable here.
const Driver &driver();

// "cuMemAlloc(bytes=...): CUDA_ERROR_OUT_OF_MEMORY: out of memory" — cuGetErrorName and cuGetErrorString text.
std::string error_text(CUresult r);

// Throws vt::Error when r != CUDA_SUCCESS: VT_ERR_OUT_OF_MEMORY for CUDA_ERROR_OUT_OF_MEMORY, VT_ERR_NO_GPU for
// missing devices or binaries, VT_ERR_INTERNAL otherwise. `what` names the call (and its arguments).
void check(CUresult r, const char *what);
void check(CUresult r, const std::string &what);

}  // namespace vt::cuda
