// Loads and teardowns run on long-lived threads of the engine's own, the first idle one first: a process that loads
// and frees engines one after another does all of it on one thread, whichever thread calls vt_engine_load and
// vt_engine_free.
//
// Why: glibc gives each thread that allocates a malloc arena of its own, and what a load or a teardown leaves free
// in an arena stays resident there (malloc_trim gives back only whole free pages). A load and a teardown allocate
// tens of MiB from the C heap, most of it in the CUDA driver and cuBLASLt, on the thread that calls them; the
// addon called them on a new thread per load and on any of libuv's four pool threads per dispose, so a process
// that cycled engines grew one arena after another: +14.5 MiB RSS over 15 load → generate → dispose cycles on a
// 16-core H100 host, flat only after every arena had served one (bench/lifetimes.mjs --where; bench/RESULTS.md).
#pragma once

#include <type_traits>

namespace vt {

namespace detail {
void run_on_lifecycle_thread(void (*fn)(void *), void *arg);
}

// Runs f() on a lifecycle thread and returns when it has; rethrows what f throws. Inline when the caller already is
// one (a teardown inside a load), or when no thread can be had (no memory for one). Callers at the same time each get a thread, so loads never wait for each other.
template <typename F>
void on_lifecycle_thread(F &&f) {
  using Fn = std::remove_reference_t<F>;
  detail::run_on_lifecycle_thread([](void *p) { (*static_cast<Fn *>(p))(); }, &f);
}

}  // namespace vt
