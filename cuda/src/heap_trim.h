// Gives the C heap's free memory back to the system when an engine is freed (vt_engine_free).
//
// Why: a load and an engine's life free their memory into the malloc arenas of the threads that did the work (the
// loader, the weight-staging threads, the step thread), and glibc hands a non-main arena's memory back only from its
// top, so each load → dispose cycle left the process larger: on the H200, 15 cycles through the public API grew RSS
// by 54 MiB after the second (MALLOC_ARENA_MAX=2: 18 MiB), and by 7.3 MiB with malloc_trim after each dispose
// (bench/lifetimes.mjs --trim; bench/RESULTS.md, session 14). A no-op where the C library has no malloc_trim.
#pragma once

namespace vt {

void return_free_heap() noexcept;

}  // namespace vt
