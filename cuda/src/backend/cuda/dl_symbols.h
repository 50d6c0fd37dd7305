// Looking up functions of a library opened with dlopen, shared by the two we load at run time (libcuda in
// driver.cpp and device_probe.cpp, cuBLASLt in cublaslt.cpp): each fills a table of typed function pointers and
// reports the first one missing, so a too-old library is refused with its name instead of crashing on a null call
// later.
#pragma once

#include <dlfcn.h>

#include <string>

namespace vt::cuda {

// Looks up `name`, else `fallback` (an older export of the same ABI; may be null), into `out`. When neither is
// there, `out` is null and `*missing` gets `name` unless it already names an earlier one.
template <class F>
bool resolve(void *lib, F *&out, const char *name, const char *fallback, std::string *missing) {
  void *p = dlsym(lib, name);
  if (!p && fallback) p = dlsym(lib, fallback);
  out = reinterpret_cast<F *>(p);
  if (!p && missing->empty()) *missing = name;
  return p != nullptr;
}

}  // namespace vt::cuda
