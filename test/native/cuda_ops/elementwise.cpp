// CUDA op checks: embedding gather, the RMSNorms, RoPE (alone and fused with the KV store), SiLU·mul, the KV store.
#include "../cuda_check.h"

namespace cuda_tests {

void test_embed(Env &env, cuda::Ops &ops) {
  const Act act = ops.act();
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (int64_t dim : {1, 7, 64, 1000, 4096})
      for (int64_t T : {1, 5, 33}) {
        const int64_t vocab = 50 + below(1000);
        std::vector<uint8_t> table(size_t(vocab * dim) * dtype_size(dt));
        for (size_t i = 0; i < table.size() / dtype_size(dt); ++i) {
          const float f = float(uni(-2, 2));
          if (dt == DType::F32) std::memcpy(&table[i * 4], &f, 4);
          else {
            // f16: any finite value, subnormals included
            uint16_t h = dt == DType::BF16 ? to_bf16(f) : uint16_t(below(2) << 15 | below(31) << 10 | below(1024));
            std::memcpy(&table[i * 2], &h, 2);
          }
        }
        std::vector<int32_t> ids(static_cast<size_t>(T));
        for (auto &id : ids) id = int32_t(below(vocab));
        check_case(env, fmt("embed[%s] table %s dim %lld T %lld", cuda::act_name(act), dtype_name(dt), (long long)dim,
                            (long long)T),
                   [&](std::string &why) {
                     DeviceBuffer dtable = upload_raw(table), dids = upload_raw(ids);
                     Dev out = poisoned(size_t(T * dim), act);
                     ops.embed(env.stream.get(), dtable.ptr(), dt, dim, dids.ptr(), T, out.ptr());
                     env.stream.synchronize();
                     std::vector<float> ref(size_t(T * dim));
                     cpu::embed(table.data(), dt, dim, ids.data(), T, ref.data());
                     bool guard = false;
                     auto got = download(out, &guard);
                     // fp32 activations copy exactly; bf16 ones round once (exact for a bf16 table)
                     return close(got, ref, act == Act::F32 || dt == DType::BF16 ? 0 : 4e-3, guard, &why);
                   });
      }
}

std::vector<float> rand_weight(size_t n) {
  std::vector<float> w(n);
  for (auto &x : w) x = float(uni(0.5, 1.5));
  return w;
}

void test_norms(Env &env, cuda::Ops &ops) {
  const Act act = ops.act();
  const float eps = 1e-6f;
  for (int64_t dim : {1, 7, 64, 1000, 4096, 5120})
    for (int64_t rows : {1, 3, 17}) {
      const size_t n = size_t(rows * dim);
      check_case(env, fmt("rmsnorm[%s] rows %lld dim %lld", cuda::act_name(act), (long long)rows, (long long)dim),
                 [&](std::string &why) {
                   auto x = rand_act(n, act, -3, 3);
                   auto w = rand_weight(size_t(dim));
                   Dev dx = upload_act(x, act);
                   DeviceBuffer dw = upload_raw(w);
                   Dev out = poisoned(n, act);
                   ops.rmsnorm(env.stream.get(), dx.ptr(), rows, dim, dw.ptr(), eps, out.ptr());
                   ops.rmsnorm(env.stream.get(), dx.ptr(), rows, dim, dw.ptr(), eps, dx.ptr());  // in place
                   env.stream.synchronize();
                   auto ref = x;
                   cpu::rmsnorm(env.pool, ref.data(), rows, dim, w.data(), eps);
                   bool guard = false;
                   auto got = download(out, &guard);
                   if (!close(got, ref, tol_for(act), guard, &why)) return false;
                   if (!close(download(dx), ref, tol_for(act), true, &why)) return why = "in place: " + why, false;
                   return true;
                 });
      check_case(env, fmt("add_rmsnorm[%s] rows %lld dim %lld", cuda::act_name(act), (long long)rows, (long long)dim),
                 [&](std::string &why) {
                   auto res = rand_act(n, act, -3, 3), x = rand_act(n, act, -1, 1);
                   auto w = rand_weight(size_t(dim));
                   Dev dres = upload_act(res, act, 64), dx = upload_act(x, act);
                   DeviceBuffer dw = upload_raw(w);
                   Dev out = poisoned(n, act);
                   ops.add_rmsnorm(env.stream.get(), dres.ptr(), dx.ptr(), rows, dim, dw.ptr(), eps, out.ptr());
                   env.stream.synchronize();
                   std::vector<float> ref(n);
                   cpu::add_rmsnorm(env.pool, res.data(), x.data(), rows, dim, w.data(), eps, ref.data());
                   bool guard = false, rguard = false;
                   auto got_res = download(dres, &rguard);
                   // bf16: the residual is rounded to bf16 once (2^-9) and the norm reads that rounded value
                   if (!close(got_res, res, act == Act::F32 ? 1e-6 : 4e-3, rguard, &why)) return why = "residual: " + why, false;
                   const auto got = download(out, &guard);  // before close() reads guard
                   return close(got, ref, tol_for(act), guard, &why);
                 });
    }
}

std::vector<float> inv_freq_table(int head_dim, double theta) {
  std::vector<float> f(size_t(head_dim / 2));
  for (int i = 0; i < head_dim / 2; ++i) f[size_t(i)] = float(1.0 / std::pow(theta, 2.0 * i / head_dim));
  return f;
}

void test_rope(Env &env, cuda::Ops &ops) {
  const Act act = ops.act();
  struct Shape { int64_t T; int32_t heads, hd; };
  const Shape shapes[] = {{1, 1, 2}, {5, 3, 6}, {1, 32, 128}, {7, 8, 128}, {19, 4, 64}, {3, 2, 256}, {4, 5, 80}};
  for (const Shape &sh : shapes)
    for (int norm = 0; norm < 2; ++norm)
      for (float attn_scale : {1.0f, 1.2f}) {
        if (attn_scale != 1.0f && norm) continue;
        // fused layout: the heads sit inside wider rows (as q inside a qkv buffer); the rest must be untouched.
        // partial: RoPE over a quarter of each head (Qwen3.5's 64 of 256; rounded down to even), the rest passed
        // through as normed.
        for (int variant = 0; variant < 4; ++variant) {
          const int fused = variant & 1, partial = variant >> 1;
          const int32_t rot = partial ? sh.hd / 8 * 2 : sh.hd;
          if (partial && rot < 2) continue;
          const int64_t width = int64_t(sh.heads) * sh.hd, stride = fused ? width + 2 * sh.hd + 4 : width;
          check_case(env,
                     fmt("rope[%s] T %lld heads %d head_dim %d%s%s%s%s", cuda::act_name(act), (long long)sh.T, sh.heads,
                         sh.hd, norm ? " +qk_norm" : "", attn_scale != 1.0f ? " attn_scale 1.2" : "",
                         fused ? " strided rows" : "", partial ? fmt(" rotary_dims %d", rot).c_str() : ""),
                     [&](std::string &why) {
                       auto buf = rand_act(size_t(sh.T * stride), act, -2, 2);
                       std::vector<int32_t> pos(static_cast<size_t>(sh.T));
                       for (auto &p : pos) p = int32_t(below(4) == 0 ? below(40000) : below(64));
                       auto inv_freq = inv_freq_table(rot, 1e6);
                       auto w = rand_weight(size_t(sh.hd));
                       Dev dx = upload_act(buf, act, 64);
                       DeviceBuffer dpos = upload_raw(pos), dfreq = upload_raw(inv_freq), dw = upload_raw(w);
                       ops.rope(env.stream.get(), dx.ptr(), sh.T, sh.heads, sh.hd, stride, dpos.ptr(), dfreq.ptr(),
                                attn_scale, norm ? dw.ptr() : 0, 1e-6f, partial ? rot : 0);
                       env.stream.synchronize();
                       // reference on the contiguous heads, then scattered back into the wide rows
                       std::vector<float> heads(size_t(sh.T * width));
                       for (int64_t t = 0; t < sh.T; ++t)
                         std::copy_n(buf.begin() + t * stride, width, heads.begin() + t * width);
                       if (norm) cpu::rmsnorm(env.pool, heads.data(), sh.T * sh.heads, sh.hd, w.data(), 1e-6f);
                       cpu::rope(env.pool, heads.data(), sh.T, sh.heads, sh.hd, pos.data(), inv_freq.data(), attn_scale,
                                 rot);
                       auto ref = buf;
                       for (int64_t t = 0; t < sh.T; ++t)
                         std::copy_n(heads.begin() + t * width, width, ref.begin() + t * stride);
                       bool guard = false;
                       const auto got = download(dx, &guard);  // before close() reads guard
                       return close(got, ref, tol_for(act), guard, &why);
                     });
        }
      }
}

void test_silu_mul(Env &env, cuda::Ops &ops) {
  const Act act = ops.act();
  for (int64_t F : {1, 7, 3072, 12289})
    for (int64_t T : {1, 4, 13})
      for (int fused = 0; fused < 2; ++fused)
        check_case(env, fmt("silu_mul[%s] T %lld F %lld%s", cuda::act_name(act), (long long)T, (long long)F,
                            fused ? " gate_up fused" : ""),
                   [&](std::string &why) {
                     const int64_t ld = fused ? 2 * F : F;
                     auto g = rand_act(size_t(T * ld), act, -6, 6), u = rand_act(size_t(T * ld), act, -2, 2);
                     if (fused)  // one (T, 2F) buffer: gate = [:, :F], up = [:, F:]
                       for (int64_t t = 0; t < T; ++t) std::copy_n(u.begin() + t * ld, F, g.begin() + t * ld + F);
                     Dev dg = upload_act(g, act), du = upload_act(u, act);
                     Dev out = poisoned(size_t(T * F), act);
                     const size_t es = cuda::act_size(act);
                     const CUdeviceptr up = fused ? dg.ptr() + CUdeviceptr(F * es) : du.ptr();
                     ops.silu_mul(env.stream.get(), dg.ptr(), up, T, F, ld, out.ptr());
                     env.stream.synchronize();
                     std::vector<float> ref(size_t(T * F));
                     if (fused) {
                       cpu::silu_mul(env.pool, g.data(), g.data() + F, T, F, ref.data());
                     } else {
                       cpu::silu_mul(env.pool, g.data(), u.data(), T, F, ref.data());
                     }
                     bool guard = false;
                     const auto got = download(out, &guard);  // before close() reads guard
                     return close(got, ref, tol_for(act), guard, &why);
                   });
}


void test_kv_store(Env &env, cuda::Ops &ops) {
  const Act act = ops.act();
  for (int32_t n_kv : {1, 8})
    for (int32_t hd : {64, 72})
      check_case(env, fmt("kv_store[%s] kv_heads %d head_dim %d", cuda::act_name(act), n_kv, hd), [&](std::string &why) {
        const int64_t T = 37, n_slots = 4 * 16, row = int64_t(n_kv) * hd;
        auto k = rand_act(size_t(T * row), act), v = rand_act(size_t(T * row), act);
        std::vector<int32_t> perm(static_cast<size_t>(n_slots));
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), g_rng);
        std::vector<int32_t> slot(static_cast<size_t>(T));
        for (int64_t t = 0; t < T; ++t) slot[size_t(t)] = t % 5 == 3 ? -1 : perm[size_t(t)];  // some padding rows
        Dev dk = upload_act(k, act), dv = upload_act(v, act);
        Dev kc = poisoned(size_t(n_slots * row), act, 0), vc = poisoned(size_t(n_slots * row), act, 0);
        DeviceBuffer dslot = upload_raw(slot);
        ops.kv_store(env.stream.get(), dk.ptr(), dv.ptr(), T, n_kv, hd, dslot.ptr(), kc.ptr(), vc.ptr());
        env.stream.synchronize();
        std::vector<float> kref(size_t(n_slots * row), NAN), vref = kref;
        cpu::kv_store(k.data(), v.data(), T, n_kv, hd, slot.data(), kref.data(), vref.data());
        if (!close(download(kc), kref, 0, true, &why)) return why = "k: " + why, false;
        return close(download(vc), vref, 0, true, &why);
      });
}

// The cache rows named by slot[] (each row_elems wide) against ref within tol; every other row and the guard
// must still hold the poison bytes (0xff) they started with.
bool check_cache(const Dev &c, const std::vector<float> &ref, const std::vector<int32_t> &slot, int64_t row_elems,
                 double tol, std::string *why) {
  const size_t es = cuda::act_size(c.act), rows = c.n / size_t(row_elems), row_bytes = size_t(row_elems) * es;
  std::vector<uint8_t> raw((c.n + c.guard) * es);
  c.buf.download(g_stream, raw.data(), raw.size());
  std::vector<char> written(rows, 0);
  for (int32_t s : slot)
    if (s >= 0) written[size_t(s)] = 1;
  auto poisoned_at = [&](size_t from, size_t to) {
    return std::all_of(raw.begin() + long(from), raw.begin() + long(to), [](uint8_t b) { return b == 0xff; });
  };
  bool guard = poisoned_at(rows * row_bytes, raw.size());
  for (size_t r = 0; r < rows; ++r)
    if (!written[r] && !poisoned_at(r * row_bytes, (r + 1) * row_bytes)) {
      *why = "cache row " + std::to_string(r) + " was not in slot[] but was written";
      return false;
    }
  const std::vector<float> all = download(c);
  std::vector<float> got, want;
  for (size_t r = 0; r < rows; ++r)
    if (written[r]) {
      got.insert(got.end(), all.begin() + long(r * size_t(row_elems)), all.begin() + long((r + 1) * size_t(row_elems)));
      want.insert(want.end(), ref.begin() + long(r * size_t(row_elems)), ref.begin() + long((r + 1) * size_t(row_elems)));
    }
  return close(got, want, tol, guard, why);
}

// rope_store on a fused qkv(T, (heads + 2 kv) * head_dim) against the three ops it replaces: on the CPU (the
// Qwen3 norms, cpu::rope on the q and on the k heads, cpu::kv_store), within the mode's tolerance; and on the
// GPU (rope on the q heads, rope on the k heads, the cache rows then being those k and v), bit for bit, as both
// share rope_head(). Positions up to ~33,000, random cache slots among spares, padding tokens (slot -1) whose
// rows must stay unwritten like every other spare row of the poisoned caches.
void test_rope_store(Env &env, cuda::Ops &ops) {
  const Act act = ops.act();
  const size_t es = cuda::act_size(act);
  struct Shape { int32_t heads, kv, hd; };
  const Shape shapes[] = {{16, 8, 64}, {16, 8, 128}, {32, 8, 64}, {32, 8, 128}, {4, 4, 64},
                          {4, 4, 128}, {5, 1, 80},   {6, 2, 256}, {3, 1, 6},   {4, 2, 32}};
  const float eps = 1e-6f;
  for (const Shape &sh : shapes)
    for (int64_t T : {1, 7, 300})
      for (int variant = 0; variant < 4; ++variant) {
        const int norm = variant & 1, partial = variant >> 1;
        if (g_small && T > 7) continue;
        // partial: Qwen3.5's partial RoPE, a quarter of each head rotated (rounded down to even), the rest passed
        // through as normed (and stored so in the cache)
        const int32_t rot = partial ? sh.hd / 8 * 2 : sh.hd;
        if (partial && (rot < 2 || T > 7)) continue;
        const float attn_scale = T == 7 ? 1.2f : 1.0f;
        const bool pad_single = T == 1 && norm && sh.kv == 8;  // a lone padding token stores nothing
        check_case(
            env,
            fmt("rope_store[%s] T %lld heads %d kv_heads %d head_dim %d%s%s%s%s", cuda::act_name(act), (long long)T,
                sh.heads, sh.kv, sh.hd, norm ? " +qk_norm" : "", attn_scale != 1.0f ? " attn_scale 1.2" : "",
                pad_single ? " padding" : "", partial ? fmt(" rotary_dims %d", rot).c_str() : ""),
            [&](std::string &why) {
              const int64_t width = int64_t(sh.heads + 2 * sh.kv) * sh.hd, qw = int64_t(sh.heads) * sh.hd,
                            kvw = int64_t(sh.kv) * sh.hd, n_slots = T + T / 2 + 8;
              auto qkv = rand_act(size_t(T * width), act, -2, 2);
              std::vector<int32_t> perm(static_cast<size_t>(n_slots)), pos(static_cast<size_t>(T)),
                  slot(static_cast<size_t>(T));
              std::iota(perm.begin(), perm.end(), 0);
              std::shuffle(perm.begin(), perm.end(), g_rng);
              for (int64_t t = 0; t < T; ++t) {
                pos[size_t(t)] = int32_t(below(2) ? 28000 + below(5000) : below(64));
                slot[size_t(t)] = below(4) == 0 ? -1 : perm[size_t(t)];
              }
              if (T > 1) slot[size_t(T / 2)] = -1;
              if (T == 1) slot[0] = pad_single ? -1 : perm[0];
              auto inv_freq = inv_freq_table(rot, 1e6);
              auto qn = rand_weight(size_t(sh.hd)), kn = rand_weight(size_t(sh.hd));
              Dev dqkv = upload_act(qkv, act, 64), gqkv = upload_act(qkv, act, 64);
              Dev kc = poisoned(size_t(n_slots * kvw), act), vc = poisoned(size_t(n_slots * kvw), act);
              DeviceBuffer dpos = upload_raw(pos), dslot = upload_raw(slot), dfreq = upload_raw(inv_freq),
                           dqn = upload_raw(qn), dkn = upload_raw(kn);
              const CUdeviceptr qnp = norm ? dqn.ptr() : 0, knp = norm ? dkn.ptr() : 0;
              const int32_t rot_arg = partial ? rot : 0;
              ops.rope_store(env.stream.get(), dqkv.ptr(), T, sh.heads, sh.kv, sh.hd, dpos.ptr(), dfreq.ptr(),
                             attn_scale, qnp, knp, eps, dslot.ptr(), kc.ptr(), vc.ptr(), rot_arg);
              ops.rope(env.stream.get(), gqkv.ptr(), T, sh.heads, sh.hd, width, dpos.ptr(), dfreq.ptr(), attn_scale,
                       qnp, eps, rot_arg);
              ops.rope(env.stream.get(), gqkv.ptr() + CUdeviceptr(qw * int64_t(es)), T, sh.kv, sh.hd, width,
                       dpos.ptr(), dfreq.ptr(), attn_scale, knp, eps, rot_arg);
              env.stream.synchronize();

              // the CPU's three ops on the q, k and v parts taken apart, then put back together
              std::vector<float> q(size_t(T * qw)), k(size_t(T * kvw)), v(size_t(T * kvw));
              for (int64_t t = 0; t < T; ++t) {
                const auto r = qkv.begin() + t * width;
                std::copy_n(r, qw, q.begin() + t * qw);
                std::copy_n(r + qw, kvw, k.begin() + t * kvw);
                std::copy_n(r + qw + kvw, kvw, v.begin() + t * kvw);
              }
              if (norm) {
                cpu::rmsnorm(env.pool, q.data(), T * sh.heads, sh.hd, qn.data(), eps);
                cpu::rmsnorm(env.pool, k.data(), T * sh.kv, sh.hd, kn.data(), eps);
              }
              cpu::rope(env.pool, q.data(), T, sh.heads, sh.hd, pos.data(), inv_freq.data(), attn_scale, rot);
              cpu::rope(env.pool, k.data(), T, sh.kv, sh.hd, pos.data(), inv_freq.data(), attn_scale, rot);
              auto ref = qkv;
              for (int64_t t = 0; t < T; ++t) {
                std::copy_n(q.begin() + t * qw, qw, ref.begin() + t * width);
                std::copy_n(k.begin() + t * kvw, kvw, ref.begin() + t * width + qw);
              }
              std::vector<float> kref(size_t(n_slots * kvw), NAN), vref = kref;
              cpu::kv_store(k.data(), v.data(), T, sh.kv, sh.hd, slot.data(), kref.data(), vref.data());
              bool guard = false;
              const auto got = download(dqkv, &guard);  // before close() reads guard
              if (!close(got, ref, tol_for(act), guard, &why)) return why = "qkv vs CPU: " + why, false;
              if (!check_cache(kc, kref, slot, kvw, tol_for(act), &why)) return why = "k cache vs CPU: " + why, false;
              if (!check_cache(vc, vref, slot, kvw, 0, &why)) return why = "v cache vs CPU: " + why, false;

              // the GPU's rope + rope + kv_store: the same bits
              const auto gref = download(gqkv);
              if (!close(got, gref, 0, true, &why)) return why = "qkv vs GPU rope: " + why, false;
              std::vector<float> gk(size_t(T * kvw)), gv(size_t(T * kvw));
              for (int64_t t = 0; t < T; ++t) {
                std::copy_n(gref.begin() + t * width + qw, kvw, gk.begin() + t * kvw);
                std::copy_n(gref.begin() + t * width + qw + kvw, kvw, gv.begin() + t * kvw);
              }
              std::vector<float> gkc(size_t(n_slots * kvw), NAN), gvc = gkc;
              cpu::kv_store(gk.data(), gv.data(), T, sh.kv, sh.hd, slot.data(), gkc.data(), gvc.data());
              if (!check_cache(kc, gkc, slot, kvw, 0, &why)) return why = "k cache vs GPU rope: " + why, false;
              return true;
            });
      }
}

// Qwen3.5's gated attention around the attention: split_q_gate (q_proj's per-head [q | gate] and the k|v columns
// after them → [q heads | k|v] and the gates; copies, so bit for bit against the host's rearrangement) and
// sigmoid_mul (attention's output times sigmoid(gate), the CPU decoder's loop), on the fixtures' and the real
// models' shapes, rows strided by an odd k|v width.
void test_attention_gate(Env &env, cuda::Ops &ops) {
  const Act act = ops.act();
  struct Shape { int64_t T; int32_t heads, hd; int64_t rest; };
  for (const Shape &sh : {Shape{1, 4, 32, 64}, Shape{7, 4, 32, 32}, Shape{5, 3, 6, 7}, Shape{3, 16, 256, 1024},
                          Shape{130, 2, 64, 0}}) {
    const int64_t qd = int64_t(sh.heads) * sh.hd, in_w = 2 * qd + sh.rest, out_w = qd + sh.rest;
    check_case(env, fmt("split_q_gate[%s] T %lld heads %d head_dim %d rest %lld", cuda::act_name(act), (long long)sh.T,
                        sh.heads, sh.hd, (long long)sh.rest),
               [&](std::string &why) {
                 const auto src = rand_act(size_t(sh.T * in_w), act, -4, 4);
                 Dev dsrc = upload_act(src, act), qkv = poisoned(size_t(sh.T * out_w), act),
                     gate = poisoned(size_t(sh.T * qd), act);
                 ops.split_q_gate(env.stream.get(), dsrc.ptr(), sh.T, sh.heads, sh.hd, sh.rest, qkv.ptr(), gate.ptr());
                 env.stream.synchronize();
                 std::vector<float> want_qkv(size_t(sh.T * out_w)), want_gate(size_t(sh.T * qd));
                 for (int64_t t = 0; t < sh.T; ++t) {
                   const float *row = &src[size_t(t * in_w)];
                   for (int32_t h = 0; h < sh.heads; ++h) {
                     std::copy_n(row + h * 2 * sh.hd, sh.hd, &want_qkv[size_t(t * out_w + h * sh.hd)]);
                     std::copy_n(row + h * 2 * sh.hd + sh.hd, sh.hd, &want_gate[size_t(t * qd + h * sh.hd)]);
                   }
                   std::copy_n(row + 2 * qd, sh.rest, &want_qkv[size_t(t * out_w + qd)]);
                 }
                 bool gq = false, gg = false;
                 const auto got_qkv = download(qkv, &gq), got_gate = download(gate, &gg);
                 if (!close(got_qkv, want_qkv, 0, gq, &why)) return why = "q|k|v: " + why, false;
                 if (!close(got_gate, want_gate, 0, gg, &why)) return why = "gate: " + why, false;
                 return true;
               });
  }
  for (int64_t n : {1, 128, 4099, 3 * 16 * 256})
    check_case(env, fmt("sigmoid_mul[%s] n %lld", cuda::act_name(act), (long long)n), [&](std::string &why) {
      auto x = rand_act(size_t(n), act, -3, 3), g = rand_act(size_t(n), act, -12, 12);
      if (n > 2) g[0] = 60, g[1] = -60;  // saturated both ways
      Dev dx = upload_act(x, act, 64), dg = upload_act(g, act);
      ops.sigmoid_mul(env.stream.get(), dx.ptr(), dg.ptr(), n);
      env.stream.synchronize();
      for (int64_t i = 0; i < n; ++i) x[size_t(i)] *= 1.f / (1.f + std::exp(-g[size_t(i)]));  // cpu_model_ops' loop
      bool guard = false;
      const auto got = download(dx, &guard);
      return close(got, x, tol_for(act), guard, &why);
    });
}

// f16_to_bf16 (fp16 weights under bf16 activations, narrowed once at load): every one of the 65,536 fp16 bit
// patterns (subnormals, infinities and NaNs included), in place, bit for bit the host's exact widening
// (dtype.h's f16_to_f32) rounded to the nearest bf16 with ties to even (to_bf16); an odd count, so the grid's last
// elements and the bytes after them (left as they were) are checked too.
void test_f16_to_bf16(Env &env, cuda::Ops &ops) {
  if (ops.act() != Act::BF16) return;  // (the kernel is one, whatever the activations; run it once)
  check_case(env, "f16_to_bf16 every fp16 value, in place", [&](std::string &why) {
    const size_t n = 65536 + 3;
    std::vector<uint16_t> h(n + 5);
    for (size_t i = 0; i < h.size(); ++i) h[i] = uint16_t(i * 40503u);  // (an odd stride: every pattern once)
    DeviceBuffer d = upload_raw(h);
    ops.f16_to_bf16(env.stream.get(), d.ptr(), int64_t(n));
    std::vector<uint16_t> got(h.size());
    d.download(env.stream.get(), got.data(), got.size() * 2);
    for (size_t i = 0; i < h.size(); ++i) {
      const uint16_t want = i < n ? to_bf16(vt::f16_to_f32(h[i])) : h[i];
      const bool nan = i < n && std::isnan(vt::f16_to_f32(h[i]));
      // NaN: any NaN will do (the hardware's fp16 widening may give the canonical one, sign and payload dropped)
      const bool ok = nan ? (got[i] & 0x7f80) == 0x7f80 && (got[i] & 0x7f) : got[i] == want;
      if (!ok) {
        why = fmt("element %zu: fp16 0x%04x gave bf16 0x%04x, want 0x%04x", i, h[i], got[i], want);
        return false;
      }
    }
    return true;
  });
}

}  // namespace cuda_tests
