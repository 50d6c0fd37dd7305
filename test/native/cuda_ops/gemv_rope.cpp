// CUDA op checks: the q|k|v product with RoPE, the q/k norm and the KV store in its epilogue (Ops::gemv_norm_rope,
// gemv_rope.cuh) against the two launches it replaces, gemv_norm then rope_store (each checked against the CPU's
// ops in gemv_fused.cpp and elementwise.cpp): the q|k|v rows and both caches within the op tolerance (the head norm
// sums its squares in another order), the cache rows of padding tokens (slot -1) and every other slot untouched. And
// its *_early kernels (the default under PDL) against the plain ones: the same bits.
#include <cstdlib>
#include <numeric>

#include "../cuda_check.h"

namespace cuda_tests {

std::vector<uint16_t> rand_bf16_weights(size_t n);                                                  // gemv.cpp
std::vector<float> inv_freq_table(int head_dim, double theta);                                      // elementwise.cpp
std::vector<float> rand_weight(size_t n);                                                           // elementwise.cpp
std::vector<float> cpu_xw(const std::vector<float> &x, int64_t M, int64_t K, const std::vector<float> &w, Act act);
std::vector<float> cpu_ss_parts(const std::vector<float> &x, int64_t M, int64_t K);                // gemv_fused.cpp

void test_gemv_norm_rope(Env &env, cuda::Ops &ops) {
  const Act act = ops.act();
  cuda::Ops plain(env.ctx, act, plain_loads());
  // (heads, kv heads, head_dim, hidden): Qwen3-0.6B's and 8B's attention, head_dim 64 (clusters of 4), hidden 64, a
  // hidden size that is not a multiple of 8 (the scalar path), GQA 1 and 4.
  struct Shape { int32_t heads, kv, hd; int64_t K; };
  const Shape shapes[] = {{16, 8, 128, 1024}, {32, 8, 128, 4096}, {8, 4, 64, 256}, {4, 4, 64, 64},
                          {2, 1, 128, 67},    {8, 2, 128, 512}};
  const float eps = 1e-6f;
  for (const Shape &sh : shapes) {
    if (!ops.has_gemv_norm_rope(sh.hd)) {
      std::printf("skip gemv_norm_rope[%s] head_dim %d: not in this kernel image (sm_90 and newer)\n",
                  cuda::act_name(act), sh.hd);
      continue;
    }
    for (int64_t M : {1, 2, 3, 8, 13})
      for (int variant = 0; variant < 3; ++variant) {  // 0: q/k norm, 1: q/k norm + bias, 2: neither (Llama)
        if (g_small && (M > 3 || sh.K > 1024)) continue;
        const bool norm = variant < 2, bias = variant == 1;
        const float attn_scale = M == 3 ? 1.2f : 1.0f;
        check_case(
            env,
            fmt("gemv_norm_rope[%s] M %lld heads %d kv_heads %d head_dim %d hidden %lld%s%s%s", cuda::act_name(act),
                (long long)M, sh.heads, sh.kv, sh.hd, (long long)sh.K, norm ? " +qk_norm" : "", bias ? " +bias" : "",
                attn_scale != 1.f ? " attn_scale 1.2" : ""),
            [&](std::string &why) {
              const int64_t K = sh.K, N = int64_t(sh.heads + 2 * sh.kv) * sh.hd, kvw = int64_t(sh.kv) * sh.hd;
              const int64_t n_slots = 2 * M + 5;
              const auto res = rand_act(size_t(M * K), Act::F32, -3, 3);
              const auto nw = rand_act(size_t(K), Act::F32, 0.5, 1.5);
              const auto w = rand_bf16_weights(size_t(N * K));
              const auto b = rand_act(size_t(N), Act::F32);
              std::vector<int32_t> perm(static_cast<size_t>(n_slots)), pos(static_cast<size_t>(M)),
                  slot(static_cast<size_t>(M));
              std::iota(perm.begin(), perm.end(), 0);
              std::shuffle(perm.begin(), perm.end(), g_rng);
              for (int64_t m = 0; m < M; ++m) {  // positions small and large (the double angle), some padding rows
                pos[size_t(m)] = int32_t(below(2) ? 28000 + below(5000) : below(64));
                slot[size_t(m)] = m > 0 && below(4) == 0 ? -1 : perm[size_t(m)];
              }
              const auto inv_freq = inv_freq_table(sh.hd, 1e6);
              const auto qn = rand_weight(size_t(sh.hd)), kn = rand_weight(size_t(sh.hd));
              DeviceBuffer dw = upload_raw(w), db = upload_raw(b), dss = upload_raw(cpu_ss_parts(res, M, K));
              DeviceBuffer dpos = upload_raw(pos), dslot = upload_raw(slot), dfreq = upload_raw(inv_freq),
                           dqn = upload_raw(qn), dkn = upload_raw(kn);
              Dev dxw = upload_act(cpu_xw(res, M, K, nw, act), act);
              const CUdeviceptr bp = bias ? db.ptr() : 0, qnp = norm ? dqn.ptr() : 0, knp = norm ? dkn.ptr() : 0;
              const auto s = env.stream.get();
              // qkv, k cache, v cache after one way or the other (the caches start as NaN: what is not stored stays)
              auto run = [&](bool fused, cuda::Ops &o, std::vector<std::vector<float>> &out) {
                Dev qkv = poisoned(size_t(M * N), act), kc = poisoned(size_t(n_slots * kvw), act),
                    vc = poisoned(size_t(n_slots * kvw), act);
                if (fused) {
                  o.gemv_norm_rope(s, dxw.ptr(), dss.ptr(), M, K, eps, dw.ptr(), bp, qkv.ptr(), sh.heads, sh.kv, sh.hd,
                                   dpos.ptr(), dfreq.ptr(), attn_scale, qnp, knp, dslot.ptr(), kc.ptr(), vc.ptr());
                } else {
                  o.gemv_norm(s, dxw.ptr(), dss.ptr(), M, K, eps, dw.ptr(), N, bp, qkv.ptr());
                  o.rope_store(s, qkv.ptr(), M, sh.heads, sh.kv, sh.hd, dpos.ptr(), dfreq.ptr(), attn_scale, qnp, knp,
                               eps, dslot.ptr(), kc.ptr(), vc.ptr());
                }
                bool all = true;
                for (const Dev *d : {&qkv, &kc, &vc}) {
                  bool guard = false;
                  out.push_back(download(*d, &guard));
                  all = all && guard;
                }
                return all;
              };
              std::vector<std::vector<float>> got, apart, early_off;
              if (!run(true, ops, got) || !run(false, ops, apart) || !run(true, plain, early_off))
                return why = "wrote past the end of an output", false;
              const char *names[] = {"q|k|v", "k cache", "v cache"};
              for (size_t i = 0; i < got.size(); ++i) {
                // relative to the rms of what was written (the caches' other rows are NaN: close() leaves them out of
                // its own rms), since a rotated element can cancel to near zero
                double ss = 0;
                size_t n = 0;
                for (float x : apart[i])
                  if (!std::isnan(x)) ss += double(x) * x, ++n;
                const double rms = n ? std::sqrt(ss / double(n)) : 0;
                if (!close(got[i], apart[i], tol_for(act), true, &why, rms))
                  return why = std::string(names[i]) + " vs gemv_norm + rope_store: " + why, false;
                if (!close(got[i], early_off[i], 0, true, &why))
                  return why = std::string(names[i]) + " vs the plain (not early) kernel: " + why, false;
              }
              return true;
            });
      }
  }
}

}  // namespace cuda_tests
