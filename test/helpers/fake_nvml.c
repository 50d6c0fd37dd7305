/* A stand-in for libnvidia-ml.so.1 with the four NVML entry points lib/memory/nvml.ts binds, under their C
 * signatures (nvml.h), so test/unit/memory-nvml.test.ts can run the real koffi binding on a machine without a
 * driver: the opaque handle out-parameter, the in/out record count and the record layout all cross the FFI.
 *
 * The process list: FAKE_NVML_COUNT entries (default 3), the calling process last, holding FAKE_NVML_BYTES
 * (default 5000000000, above 2^32) or, with FAKE_NVML_BYTES=na, NVML_VALUE_NOT_AVAILABLE. FAKE_NVML_INIT is the
 * status nvmlInit_v2 returns (default 0). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;

/* What lib/memory/nvml.ts parses (PROCESS_INFO_BYTES and the offsets). */
_Static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_t is 24 bytes");
_Static_assert(offsetof(nvmlProcessInfo_t, usedGpuMemory) == 8, "usedGpuMemory at 8");

static int device_token;

static unsigned env_uint(const char *name, unsigned fallback) {
  const char *v = getenv(name);
  return v ? (unsigned)strtoul(v, NULL, 10) : fallback;
}

int nvmlInit_v2(void) { return (int)env_uint("FAKE_NVML_INIT", 0); }

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device) {
  if (index != 0) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
  *device = &device_token;
  return 0;
}

int nvmlDeviceGetComputeRunningProcesses_v3(void *device, unsigned int *count, nvmlProcessInfo_t *infos) {
  if (device != &device_token || !count) return 2;
  const unsigned n = env_uint("FAKE_NVML_COUNT", 3);
  if (*count < n) {
    *count = n;
    return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
  }
  const char *bytes = getenv("FAKE_NVML_BYTES");
  for (unsigned i = 0; i < n; ++i) {
    const int mine = i + 1 == n;
    infos[i].pid = mine ? (unsigned)getpid() : 1000000 + i;
    infos[i].usedGpuMemory = !mine ? 1000ull * (i + 1)
                             : bytes && strcmp(bytes, "na") == 0 ? ~0ull
                             : bytes ? strtoull(bytes, NULL, 10) : 5000000000ull;
    infos[i].gpuInstanceId = infos[i].computeInstanceId = 0xFFFFFFFFu;
  }
  *count = n;
  return 0;
}

const char *nvmlErrorString(int result) {
  switch (result) {
    case 2: return "Invalid Argument";
    case 7: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}
