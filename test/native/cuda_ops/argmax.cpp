// CUDA op checks: greedy argmax on the GPU (Ops::argmax, both forms, and the captured step's StepAdvance) against
// an exact reference and the host sampler.
#include "../cuda_check.h"

namespace cuda_tests {

// One row of logits of the given kind (0-7), the cases greedy sampling must get right: flat and wide
// values, exact ties (among many equal integers, planted at random ids, at neighbours and at the last id), -inf
// entries, NaN entries (never the max, no probability), rows of only -inf and NaN, +inf entries, one
// dominant value.
void fill_logits_row(float *x, int32_t vocab, int kind) {
  const float inf = INFINITY;
  for (int32_t i = 0; i < vocab; ++i) {
    switch (kind) {
      case 0: x[i] = float(uni(-1, 1)); break;
      case 1: x[i] = float(uni(-30, 30)); break;
      case 2: x[i] = float(below(17) - 8); break;
      case 5: x[i] = below(8) == 0 ? NAN : -inf; break;
      default: x[i] = float(uni(-5, 5));
    }
    if ((kind == 3 || kind == 6) && below(10) == 0) x[i] = -inf;
    if ((kind == 4 || kind == 6) && below(10) == 0) x[i] = NAN;
  }
  auto plant = [&](float value) {  // the same value at several ids, the lowest of which must win
    for (int32_t id : {int32_t(below(vocab)), int32_t(below(vocab)), vocab - 1}) {
      x[id] = value;
      if (id + 1 < vocab) x[id + 1] = value;
    }
  };
  if (kind == 3 || kind == 4) plant(7.5f);
  if (kind == 4) x[0] = NAN;
  if (kind == 6) plant(inf);
  if (kind == 7) x[below(vocab)] = 40.f;
}

struct Greedy {
  int32_t id;
  double logprob;
};

// The sampler's greedy rules, in double: the first largest value (NaN never wins); only -inf/NaN: id 0 and
// all tie; +inf entries share all the probability; otherwise -log(sum over non-NaN of exp(x - max)).
Greedy greedy_ref(const float *x, int32_t vocab) {
  float m = -INFINITY;
  int32_t id = 0;
  for (int32_t i = 0; i < vocab; ++i)
    if (x[i] > m) m = x[i], id = i;
  if (m == -INFINITY) return {0, -std::log(double(vocab))};
  double s = 0;
  for (int32_t i = 0; i < vocab; ++i) {
    if (m == INFINITY) s += x[i] == INFINITY ? 1 : 0;
    else if (!std::isnan(x[i])) s += std::exp(double(x[i]) - double(m));
  }
  return {id, -std::log(s)};
}

// A captured decode step's argmax with cuda::StepAdvance: each row's id (`want`, from the plain argmax) lands in mapped
// host memory at its position's parity, and its position, pos0 and KV slot move on by one token, the slot from the
// block tables (16-token blocks, 8 a row): positions inside a block, at a block's last token (the next is in the
// row's next block) and at the tables' end (slot -1); every 7th row is padding (slot -1), left as it was. Nothing
// else of the host slots is written.
static bool step_advance_ok(Env &env, cuda::Ops &ops, CUdeviceptr logits, int64_t n, int32_t vocab, int64_t ld,
                            const std::vector<int32_t> &want, std::string &why) {
  const int32_t bs = 16, width = 8, stride = int32_t(n) + 3;
  const size_t rows = size_t(n);
  std::vector<int32_t> pos(rows), slot(rows), pos0(rows), tables(rows * size_t(width));
  for (auto &t : tables) t = int32_t(below(1000));
  for (int64_t r = 0; r < n; ++r) {
    const int64_t k = below(4);
    const int32_t p = k == 0 ? int32_t(below(bs * width)) : k == 1 ? bs * int32_t(1 + below(width - 1)) - 1
                    : k == 2 ? bs * width - 1 : int32_t(below(bs * width - 1));
    const bool pad = r % 7 == 6;
    pos[size_t(r)] = pad ? 0 : p;
    slot[size_t(r)] = pad ? -1 : tables[size_t(r * width + p / bs)] * bs + p % bs;
    pos0[size_t(r)] = pad ? 0 : p;
  }
  DeviceBuffer dpos = upload_raw(pos), dslot = upload_raw(slot), dpos0 = upload_raw(pos0), dtab = upload_raw(tables);
  cuda::PinnedBuffer host(size_t(2 * stride) * 4, /*mapped=*/true);
  std::fill_n(host.as<int32_t>(), 2 * stride, -1);
  const auto i32 = [](CUdeviceptr p) { return reinterpret_cast<int32_t *>(p); };
  const cuda::StepAdvance adv{i32(host.device_ptr()), i32(dpos.ptr()), i32(dslot.ptr()), i32(dpos0.ptr()),
                              i32(dtab.ptr()),        width,           bs,               stride,
                              0};
  DeviceBuffer ids(size_t(n) * 4);
  ops.argmax(env.stream.get(), logits, n, vocab, ld, ids.ptr(), 0, 0, &adv);
  env.stream.synchronize();
  std::vector<int32_t> gpos(rows), gslot(rows), gpos0(rows);
  dpos.download(env.stream.get(), gpos.data(), dpos.bytes());
  dslot.download(env.stream.get(), gslot.data(), dslot.bytes());
  dpos0.download(env.stream.get(), gpos0.data(), dpos0.bytes());
  const int32_t *h = host.as<int32_t>();
  int written = 0;
  for (int32_t i = 0; i < 2 * stride; ++i) written += h[i] != -1;
  if (written != n) return why = fmt("step advance: %d host entries written for %lld rows", written, (long long)n), false;
  for (int64_t r = 0; r < n; ++r) {
    const size_t i = size_t(r);
    const int32_t p = pos[i], next = p + 1;
    if (h[(p & 1) * stride + r] != want[i])
      return why = fmt("step advance: row %lld's host pick %d, want %d", (long long)r, h[(p & 1) * stride + r], want[i]),
             false;
    const bool pad = slot[i] < 0;
    const int32_t want_slot = pad ? -1 : next / bs < width ? tables[size_t(r * width + next / bs)] * bs + next % bs : -1;
    const int32_t want_pos = pad ? p : next;
    if (gpos[i] != want_pos || gpos0[i] != want_pos || gslot[i] != want_slot)
      return why = fmt("step advance: row %lld (position %d%s): position %d, pos0 %d, slot %d; want %d, %d, %d",
                       (long long)r, p, pad ? ", padding" : "", gpos[i], gpos0[i], gslot[i], want_pos, want_pos,
                       want_slot),
             false;
  }
  return true;
}

// argmax + logprob per row against greedy_ref and against the CPU sampler itself (vt::sample, temperature 0,
// one logprob), within 1e-5. Rows ld elements apart, the gap and a tail past the last row filled with 1e30
// (it wins if read); variants take the 16-byte path (row starts aligned) and the scalar one (ld % 4 != 0, or
// the logits one element into the buffer). Outputs poisoned, with a guard.
static void argmax_cases(Env &env, cuda::Ops &ops, const char *form) {
  struct Variant { int32_t ld_extra, offset; };
  const Variant variants[] = {{0, 0}, {3, 0}, {4, 0}, {64, 1}};
  SamplerScratch scratch;
  Rng rng(1);
  SamplingParams greedy;
  greedy.logprobs = 1;
  for (int32_t vocab : {151936, 1000, 33})
    for (int64_t n : {1, 5, 128})
      for (const Variant &var : variants) {
        if (g_small && vocab * n > 1000000) continue;
        const int64_t ld = vocab + var.ld_extra;
        check_case(env,
                   fmt("argmax%s n %lld vocab %d ld %lld%s", ops.argmax_parts(n) ? form : " [one block a row]",
                       (long long)n, vocab, (long long)ld,
                       var.offset ? " (logits misaligned)" : ""),
                   [&](std::string &why) {
                     const int kind0 = int(below(8));  // rows cycle through the kinds from a random start
                     std::vector<float> host(size_t(var.offset + n * ld + 64), 1e30f);
                     float *rows = host.data() + var.offset;
                     for (int64_t r = 0; r < n; ++r) fill_logits_row(rows + r * ld, vocab, int((kind0 + r) % 8));
                     DeviceBuffer dl = upload_raw(host);
                     const size_t guard = 16;
                     DeviceBuffer ids(size_t(n + guard) * 4), lps(size_t(n + guard) * 4);
                     ids.fill_bytes(env.stream.get(), 0xff);
                     lps.fill_bytes(env.stream.get(), 0xff);
                     ops.argmax(env.stream.get(), dl.ptr() + CUdeviceptr(var.offset * 4), n, vocab, ld, ids.ptr(),
                                lps.ptr());
                     env.stream.synchronize();
                     std::vector<int32_t> got_id(size_t(n + guard));
                     std::vector<float> got_lp(size_t(n + guard));
                     ids.download(env.stream.get(), got_id.data(), ids.bytes());
                     lps.download(env.stream.get(), got_lp.data(), lps.bytes());
                     for (size_t i = size_t(n); i < size_t(n + guard); ++i) {
                       uint32_t bits;
                       std::memcpy(&bits, &got_lp[i], 4);
                       if (got_id[i] != -1 || bits != 0xffffffffu) return why = "wrote past the end of the output", false;
                     }
                     for (int64_t r = 0; r < n; ++r) {
                       const float *x = rows + r * ld;
                       const Greedy ref = greedy_ref(x, vocab);
                       const SampleResult cpu = sample(x, vocab, greedy, rng, scratch);
                       const int32_t id = got_id[size_t(r)];
                       const float lp = got_lp[size_t(r)];
                       const int kind = int((kind0 + r) % 8);
                       if (id != ref.id || id != cpu.token) {
                         why = fmt("row %lld (kind %d): id %d, want %d (CPU sampler %d)", (long long)r, kind, id, ref.id,
                                   cpu.token);
                         return false;
                       }
                       if (!(std::fabs(lp - ref.logprob) <= 1e-5 && std::fabs(lp - double(cpu.logprob)) <= 1e-5)) {
                         why = fmt("row %lld (kind %d): logprob %.9g, want %.9g (CPU sampler %.9g)", (long long)r, kind,
                                   double(lp), ref.logprob, double(cpu.logprob));
                         return false;
                       }
                     }
                     // without logprobs (out_logprobs 0), the ids also into also_ids (a chained step's tokens)
                     DeviceBuffer also(size_t(n + guard) * 4);
                     ids.fill_bytes(env.stream.get(), 0xff);
                     also.fill_bytes(env.stream.get(), 0xff);
                     ops.argmax(env.stream.get(), dl.ptr() + CUdeviceptr(var.offset * 4), n, vocab, ld, ids.ptr(), 0,
                                also.ptr());
                     env.stream.synchronize();
                     std::vector<int32_t> again(size_t(n + guard)), again_also(size_t(n + guard));
                     ids.download(env.stream.get(), again.data(), ids.bytes());
                     also.download(env.stream.get(), again_also.data(), also.bytes());
                     for (int64_t r = 0; r < n; ++r)
                       if (again[size_t(r)] != got_id[size_t(r)] || again_also[size_t(r)] != got_id[size_t(r)])
                         return why = fmt("row %lld: id %d without logprobs (also_ids %d), %d with", (long long)r,
                                          again[size_t(r)], again_also[size_t(r)], got_id[size_t(r)]),
                                false;
                     for (size_t i = size_t(n); i < size_t(n + guard); ++i)
                       if (again_also[i] != -1) return why = "also_ids: wrote past the end", false;
                     return step_advance_ok(env, ops, dl.ptr() + CUdeviceptr(var.offset * 4), n, vocab, ld, got_id,
                                            why);
                   });
      }
}

// Both forms: a row over a cluster of blocks (sm_90+, what Ops launches there for few rows) and one block a row (the
// other GPUs, larger batches, and CudaOpsTuning::argmax_parts off).
void test_argmax(Env &env, cuda::Ops &ops) {
  argmax_cases(env, ops, " [row over a cluster]");
  if (!ops.argmax_parts(1)) return;
  CudaOpsTuning one_block;
  one_block.argmax_parts = false;
  cuda::Ops single(env.ctx, ops.act(), one_block);
  argmax_cases(env, single, " [one block a row]");
}

}  // namespace cuda_tests
