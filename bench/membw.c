// Measures this machine's memory read bandwidth the way a batch-1 decode reads weights: every thread streams
// its share of a buffer far larger than the caches, once per pass. Prints GB/s (median of the passes) as JSON.
// Built by bench/cpu.mjs with the host compiler; not part of the package.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <immintrin.h>

typedef struct { const __m256 *p; size_t n; float out; } Job;

// Four independent streams per thread (its share cut in four), as a GEMV reads several weight rows at once:
// one sequential stream per core under-reads this machine's memory by about 30%, which would flatter the decode.
static void *reader(void *arg) {
  Job *j = (Job *)arg;
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  const size_t q = j->n / 4;
  const __m256 *s0 = j->p, *s1 = j->p + q, *s2 = j->p + 2 * q, *s3 = j->p + 3 * q;
  for (size_t i = 0; i < q; ++i) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps((const float *)(s0 + i)));
    a1 = _mm256_add_ps(a1, _mm256_load_ps((const float *)(s1 + i)));
    a2 = _mm256_add_ps(a2, _mm256_load_ps((const float *)(s2 + i)));
    a3 = _mm256_add_ps(a3, _mm256_load_ps((const float *)(s3 + i)));
  }
  float t[8];
  _mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  j->out = t[0] + t[7];
  return NULL;
}

static double now(void) { struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts); return ts.tv_sec + ts.tv_nsec * 1e-9; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 2;
  size_t bytes = (size_t)1 << 30;
  __m256 *buf = aligned_alloc(64, bytes);
  memset(buf, 1, bytes);  // touch every page: measure memory, not page faults
  size_t n = bytes / sizeof(__m256);
  enum { PASSES = 9 };
  double gbs[PASSES];
  for (int pass = 0; pass < PASSES; ++pass) {
    pthread_t th[64];
    Job jobs[64];
    double t0 = now();
    for (int t = 0; t < threads; ++t) {
      jobs[t].p = buf + n / threads * t;
      jobs[t].n = n / threads;
      pthread_create(&th[t], NULL, reader, &jobs[t]);
    }
    for (int t = 0; t < threads; ++t) pthread_join(th[t], NULL);
    gbs[pass] = bytes / (now() - t0) / 1e9;
  }
  qsort(gbs, PASSES, sizeof(double), cmp);
  printf("{\"threads\":%d,\"readGBs\":%.2f,\"bestGBs\":%.2f}\n", threads, gbs[PASSES / 2], gbs[PASSES - 1]);
  free(buf);
  return 0;
}
