// GPU test (label `gpu`): the CUDA kernels against the CPU reference kernels, in bf16
// tolerance. Without a CUDA device it prints "skipped: no CUDA device" and exits 77, which
// CTest reports as skipped.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "validate/kernels/cpu_kernels.h"
#include "validate/kernels/cuda_kernels.h"

namespace cu = tpo::validate::cuda;
namespace cpu = tpo::validate::cpu;

namespace {
int failures = 0;

// bf16 has 8 bits of mantissa: compare with a relative tolerance on the output's scale.
void expect_close(const char* what, const std::vector<float>& got, const std::vector<float>& want,
                  double tol = 2e-2) {
  double scale = 1e-6, worst = 0;
  for (float w : want) scale = std::max(scale, double(std::fabs(w)));
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const double e = std::fabs(double(got[i]) - double(want[i])) / scale;
    if (std::isnan(e)) {  // std::max would drop it, and a kernel writing NaN would pass
      worst = e;
      break;
    }
    worst = std::max(worst, e);
  }
  if (got.size() != want.size()) worst = std::numeric_limits<double>::infinity();
  std::printf("%-10s worst error %.2e of max |value| (tolerance %.0e): %s\n", what, worst, tol,
              worst <= tol ? "ok" : "WRONG");
  if (!(worst <= tol)) ++failures;
}

std::vector<float> device_values(const cu::Buffer& b, std::size_t n) {
  std::vector<float> v(n);
  cu::copy_to_host_bf16_as_float(b.get(), v.data(), n);
  return v;
}

cu::Buffer upload(const std::vector<float>& v) {
  cu::Buffer b(v.size() * 2);
  cu::copy_from_host_float_to_bf16(v.data(), b.get(), v.size());
  return b;
}

// cuDNN's fused attention against the CPU reference on one shape: `q` new tokens after
// `prefix` cached ones, `hq` query heads on `hkv` KV heads; with `in_place`, Q read from
// qkv-wide rows ((hq + 2 hkv) x d apart) as the runtimes read it.
void check_fused(cu::Context& ctx, std::int64_t requests, std::int64_t q, std::int64_t prefix,
                 std::int64_t hq, std::int64_t hkv, std::int64_t d, bool in_place = false,
                 std::int64_t window = 0, float softcap = 0, float scale = 0) {
  cu::AttentionShape sh;
  sh.window = window;
  sh.softcap = softcap;
  sh.scale = scale;
  sh.requests = requests;
  sh.q_tokens = q;
  sh.prefix = prefix;
  sh.q_heads = hq;
  sh.kv_heads = hkv;
  sh.head_dim = d;
  sh.kv_capacity = prefix + q + 3;  // the cache holds more than this call reads
  if (in_place) sh.q_row_stride = (hq + 2 * hkv) * d;
  void* s = ctx.compute_stream();
  const std::size_t qn = std::size_t(sh.q_elements()), kvn = std::size_t(sh.kv_elements());
  const std::size_t qin = std::size_t(sh.q_input_elements());
  cu::Buffer qb(qin * 2), kb(kvn * 2), vb(kvn * 2), ob(qn * 2);
  cu::fill_random_bf16(qb.get(), qin, 11, 1.0f, s);
  cu::fill_random_bf16(kb.get(), kvn, 12, 1.0f, s);
  cu::fill_random_bf16(vb.get(), kvn, 13, 1.0f, s);
  cu::attention_fused_bf16(ctx, qb.get(), kb.get(), vb.get(), ob.get(), sh, s);
  ctx.synchronize();
  std::vector<float> hq_ = device_values(qb, qin), hk = device_values(kb, kvn),
                     hv = device_values(vb, kvn), ho(qn);
  cpu::attention(hq_.data(), hk.data(), hv.data(), ho.data(), sh);
  char name[160];
  std::snprintf(name, sizeof name,
                "fused attention r%lld q%lld p%lld h%lld/%lld d%lld%s w%lld cap %g scale %g",
                (long long)requests, (long long)q, (long long)prefix, (long long)hq, (long long)hkv,
                (long long)d, in_place ? " Q in qkv" : "", (long long)window, softcap, scale);
  expect_close(name, device_values(ob, qn), ho);
}
}  // namespace

int main() {
  std::string why;
  if (cu::device_count(&why) == 0) {
    std::printf("skipped: no CUDA device (%s)\n", why.c_str());
    return 77;
  }
  std::printf("device: %s\n", cu::device_info(0).dump().c_str());
  cu::Context ctx(0);
  void* s = ctx.compute_stream();
  // GEMM 96 x 80 x 136 (not multiples of the tile sizes).
  const std::int64_t m = 96, n = 80, k = 136;
  cu::Buffer a(m * k * 2), b(k * n * 2), c(m * n * 2);
  cu::fill_random_bf16(a.get(), m * k, 1, 1.0f, s);
  cu::fill_random_bf16(b.get(), k * n, 2, 1.0f, s);
  cu::gemm_bf16(ctx, a.get(), b.get(), c.get(), m, n, k, false, s);
  ctx.synchronize();
  std::vector<float> ha = device_values(a, m * k), hb = device_values(b, k * n), ref(m * n);
  cpu::gemm(ha.data(), hb.data(), ref.data(), m, n, k);
  expect_close("gemm", device_values(c, m * n), ref);
  // As the runtime calls it: accumulating (c += a b), and on rows from an offset into the
  // buffers (a 16-byte, not 256-byte, aligned start: another cuBLASLt plan).
  cu::gemm_bf16(ctx, a.get(), b.get(), c.get(), m, n, k, true, s);
  ctx.synchronize();
  std::vector<float> twice(ref);
  for (auto& x : twice) x *= 2;
  expect_close("gemm+=", device_values(c, m * n), twice);
  const std::int64_t skip = 1;  // one row of a: k * 2 = 272 bytes, 16-byte aligned
  cu::Buffer c2((m - skip) * n * 2);
  cu::gemm_bf16(ctx, static_cast<char*>(a.get()) + skip * k * 2, b.get(), c2.get(), m - skip, n, k,
                false, s);
  ctx.synchronize();
  expect_close("gemm@off", device_values(c2, (m - skip) * n),
               std::vector<float>(ref.begin() + skip * n, ref.end()));
  // With a bias (the epilogue, n values added to every row), then accumulating with it, as the
  // runtime runs a biased qkv and a parallel block's biased down projection.
  {
    cu::Buffer bias(n * 2);
    cu::fill_random_bf16(bias.get(), n, 3, 1.0f, s);
    cu::gemm_bf16(ctx, a.get(), b.get(), c.get(), m, n, k, false, s, bias.get());
    ctx.synchronize();
    const std::vector<float> hbias = device_values(bias, n);
    std::vector<float> want(ref);
    for (std::int64_t r = 0; r < m; ++r) cpu::add_inplace(want.data() + r * n, hbias.data(), n);
    expect_close("gemm+bias", device_values(c, m * n), want);
    cu::gemm_bf16(ctx, a.get(), b.get(), c.get(), m, n, k, true, s, bias.get());
    ctx.synchronize();
    for (std::int64_t r = 0; r < m; ++r) {
      for (std::int64_t j = 0; j < n; ++j)
        want[std::size_t(r * n + j)] += ref[std::size_t(r * n + j)];
      cpu::add_inplace(want.data() + r * n, hbias.data(), n);
    }
    expect_close("gemm+=bias", device_values(c, m * n), want);
    // One row (a decode token): where cuBLASLt has no bias-epilogue algorithm for it, the bias
    // is added by a kernel apart; either way the same values.
    cu::Buffer c1(n * 2);
    cu::gemm_bf16(ctx, a.get(), b.get(), c1.get(), 1, n, k, false, s, bias.get());
    ctx.synchronize();
    std::vector<float> want1(ref.begin(), ref.begin() + n);
    cpu::add_inplace(want1.data(), hbias.data(), n);
    expect_close("gemm+bias 1 row", device_values(c1, n), want1);
    std::printf("1-row bias GEMM: %s\n",
                cu::gemm_kernel(ctx, a.get(), b.get(), c1.get(), 1, n, k, true).c_str());
    // The bias by a kernel apart (forced: plans made while the variable is set), plain and
    // accumulating, on 5 rows (a shape with no plan yet).
    setenv("TPO_CUBLASLT_BIAS_APART", "1", 1);
    cu::Buffer c5(5 * n * 2);
    cu::gemm_bf16(ctx, a.get(), b.get(), c5.get(), 5, n, k, false, s, bias.get());
    cu::gemm_bf16(ctx, a.get(), b.get(), c5.get(), 5, n, k, true, s, bias.get());
    ctx.synchronize();
    const std::string apart = cu::gemm_kernel(ctx, a.get(), b.get(), c5.get(), 5, n, k, true);
    unsetenv("TPO_CUBLASLT_BIAS_APART");
    std::vector<float> want5(std::size_t(5 * n));
    for (std::int64_t r = 0; r < 5; ++r) {
      for (std::int64_t j = 0; j < n; ++j) {
        want5[std::size_t(r * n + j)] = 2 * (ref[std::size_t(r * n + j)] + hbias[std::size_t(j)]);
      }
    }
    expect_close("gemm+=bias apart", device_values(c5, 5 * n), want5);
    if (apart.find("bias by a kernel apart") == std::string::npos) {
      std::printf("gemm bias apart: the plan says \"%s\" (WRONG)\n", apart.c_str());
      ++failures;
    }
  }
  // The LM head's GEMM: A's rows `lda` apart (every 3rd row of a, in place).
  {
    const std::int64_t rows = m / 3;
    cu::Buffer c3(rows * n * 2);
    cu::gemm_bf16(ctx, a.get(), b.get(), c3.get(), rows, n, k, false, s, nullptr, 3 * k);
    ctx.synchronize();
    std::vector<float> want(std::size_t(rows * n));
    for (std::int64_t r = 0; r < rows; ++r)
      std::copy_n(ref.begin() + 3 * r * n, n, want.begin() + r * n);
    expect_close("gemm lda", device_values(c3, rows * n), want);
  }
  // The embedding lookup of a vocabulary slice (rows 40..69 of the ids' range here): a copy,
  // so exactly; zeros for ids outside it.
  {
    const std::int64_t cols = 136, vocab = 30, tokens = 50;
    std::vector<std::int32_t> ids(tokens);
    for (std::int64_t t = 0; t < tokens; ++t) ids[std::size_t(t)] = std::int32_t((t * 37) % 100);
    cu::Buffer did(tokens * 4), table(vocab * cols * 2), x(tokens * cols * 2);
    cu::copy_from_host(ids.data(), did.get(), ids.size() * 4);
    cu::fill_random_bf16(table.get(), vocab * cols, 21, 1.0f, s);
    cu::embed_bf16(did.get(), table.get(), 40, vocab, x.get(), tokens, cols, s);
    ctx.synchronize();
    const std::vector<float> ht = device_values(table, vocab * cols);
    std::vector<float> want(std::size_t(tokens * cols));
    cpu::embed(ids.data(), ht.data(), 40, vocab, want.data(), tokens, cols);
    const bool same = device_values(x, tokens * cols) == want;
    std::printf("%-10s %s\n", "embed", same ? "ok" : "WRONG (not the table's rows)");
    if (!same) ++failures;
  }
  // The final norm on every 4th row (each request's last), in place in a pitched buffer; a
  // pitch that is not a multiple of 8 takes the scalar path.
  for (const std::int64_t pitch : {std::int64_t{4 * 128}, std::int64_t{4 * 128 + 3}}) {
    const std::int64_t cols = 128, rows = 12;
    cu::Buffer xb(rows * pitch * 2), wb(cols * 2), yb(rows * pitch * 2);
    cu::fill_random_bf16(xb.get(), rows * pitch, 31, 1.0f, s);
    cu::fill_random_bf16(wb.get(), cols, 32, 1.0f, s);
    cu::fill_random_bf16(yb.get(), rows * pitch, 33, 1.0f, s);
    ctx.synchronize();  // the fill ran on a non-blocking stream; the read below does not wait
    const std::vector<float> before = device_values(yb, rows * pitch);
    cu::rmsnorm_bf16(xb.get(), wb.get(), yb.get(), rows, cols, 1e-5f, s, pitch);
    ctx.synchronize();
    const std::vector<float> hx = device_values(xb, rows * pitch), hw = device_values(wb, cols);
    std::vector<float> want = before;
    for (std::int64_t r = 0; r < rows; ++r)
      cpu::rmsnorm(hx.data() + r * pitch, hw.data(), want.data() + r * pitch, 1, cols);
    expect_close(pitch % 8 ? "rmsnorm pitched, scalar" : "rmsnorm pitched",
                 device_values(yb, rows * pitch), want);
  }
  // The KV-cache write after qkv: 8-value loads (widths multiples of 8) and single values
  // (odd widths), against the CPU kernel; a copy, so exactly.
  struct KvShape {
    const char* name;
    std::int64_t q, kv, rows;
  };
  for (const KvShape& ks : {KvShape{"store_kv8", 64, 32, 37}, KvShape{"store_kv1", 12, 6, 5}}) {
    const std::int64_t qkv_n = ks.q + 2 * ks.kv;
    cu::Buffer qkv(ks.rows * qkv_n * 2), kc(ks.rows * ks.kv * 2), vc(ks.rows * ks.kv * 2);
    cu::fill_random_bf16(qkv.get(), std::size_t(ks.rows * qkv_n), 9, 1.0f, s);
    cu::store_kv_bf16(qkv.get(), qkv_n, ks.q, ks.kv, ks.rows, kc.get(), vc.get(), s);
    ctx.synchronize();
    const std::vector<float> hq = device_values(qkv, std::size_t(ks.rows * qkv_n));
    std::vector<float> hk(std::size_t(ks.rows * ks.kv)), hv(hk.size());
    cpu::store_kv(hq.data(), qkv_n, ks.q, ks.kv, ks.rows, hk.data(), hv.data());
    std::vector<float> got = device_values(kc, hk.size()), want = hk;
    const std::vector<float> gv = device_values(vc, hv.size());
    got.insert(got.end(), gv.begin(), gv.end());
    want.insert(want.end(), hv.begin(), hv.end());
    expect_close(ks.name, got, want, 0.0);
  }
  {  // 3 requests of 5 rows into caches of 7 rows per request (the runtime's batched call).
    const std::int64_t q = 16, kv = 8, rows = 5, requests = 3, cap = 7, qkv_n = q + 2 * kv;
    cu::Buffer qkv(requests * rows * qkv_n * 2), kc(requests * cap * kv * 2),
        vc(requests * cap * kv * 2);
    const std::vector<float> zeros(std::size_t(requests * cap * kv), 0.0f);
    cu::copy_from_host_float_to_bf16(zeros.data(), kc.get(), zeros.size());
    cu::copy_from_host_float_to_bf16(zeros.data(), vc.get(), zeros.size());
    cu::fill_random_bf16(qkv.get(), std::size_t(requests * rows * qkv_n), 10, 1.0f, s);
    cu::store_kv_bf16(qkv.get(), qkv_n, q, kv, rows, kc.get(), vc.get(), s, requests, cap * kv);
    ctx.synchronize();
    const std::vector<float> hq = device_values(qkv, std::size_t(requests * rows * qkv_n));
    std::vector<float> hk(zeros), hv(zeros);
    cpu::store_kv(hq.data(), qkv_n, q, kv, rows, hk.data(), hv.data(), requests, cap * kv);
    std::vector<float> got = device_values(kc, hk.size()), want = hk;
    const std::vector<float> gv = device_values(vc, hv.size());
    got.insert(got.end(), gv.begin(), gv.end());
    want.insert(want.end(), hv.begin(), hv.end());
    expect_close("store_kvB", got, want, 0.0);
  }
  // Attention: 2 requests, 48 new tokens after a prefix of 41 (89 keys: the padded score rows),
  // 4 query heads on 2 KV heads.
  cu::AttentionShape sh;
  sh.requests = 2;
  sh.q_tokens = 48;
  sh.prefix = 41;
  sh.q_heads = 4;
  sh.kv_heads = 2;
  sh.head_dim = 64;
  sh.kv_capacity = 96;
  const std::size_t qn = 2 * 48 * 4 * 64, kvn = 2 * 96 * 2 * 64;
  cu::Buffer q(qn * 2), kk(kvn * 2), v(kvn * 2), o(qn * 2),
      scratch(cu::attention_scratch_bytes(sh));
  cu::fill_random_bf16(q.get(), qn, 3, 1.0f, s);
  cu::fill_random_bf16(kk.get(), kvn, 4, 1.0f, s);
  cu::fill_random_bf16(v.get(), kvn, 5, 1.0f, s);
  cu::attention_bf16(ctx, q.get(), kk.get(), v.get(), o.get(), scratch.get(), sh, s);
  ctx.synchronize();
  std::vector<float> hq = device_values(q, qn), hk = device_values(kk, kvn),
                     hv = device_values(v, kvn), ho(qn);
  cpu::attention(hq.data(), hk.data(), hv.data(), ho.data(), sh);
  expect_close("attention", device_values(o, qn), ho);
  {  // The same with Q read in place in qkv-wide rows ((4 + 2 x 2) x 64 apart), as the
     // runtimes call it.
    cu::AttentionShape in = sh;
    in.q_row_stride = (4 + 2 * 2) * 64;
    const std::size_t qin = std::size_t(in.q_input_elements());
    cu::Buffer qkv(qin * 2), o2(qn * 2);
    cu::fill_random_bf16(qkv.get(), qin, 14, 1.0f, s);
    cu::attention_bf16(ctx, qkv.get(), kk.get(), v.get(), o2.get(), scratch.get(), in, s);
    ctx.synchronize();
    const std::vector<float> hqkv = device_values(qkv, qin);
    std::vector<float> ho2(qn);
    cpu::attention(hqkv.data(), hk.data(), hv.data(), ho2.data(), in);
    expect_close("attn Q@qkv", device_values(o2, qn), ho2);
  }
  // Sliding windows: 20 keys per query after the 41-token prefix (the first query's window
  // starts at key 22: the GEMMs skip the keys before it), and 16 with no prefix.
  // Also: a window of 1 (each query sees itself), one no query reaches past (no effect).
  // Then Gemma's scores: its own scale and a soft cap tight enough to bite, with and without a
  // window.
  struct Variant {
    std::int64_t prefix, window;
    float scale, softcap;
  };
  for (const Variant& x :
       {Variant{41, 20, 0, 0}, Variant{0, 16, 0, 0}, Variant{41, 1, 0, 0}, Variant{41, 89, 0, 0},
        Variant{41, 0, 0.2f, 0.3f}, Variant{41, 20, 0.2f, 0.3f}}) {
    cu::AttentionShape w = sh;
    w.prefix = x.prefix;
    w.window = x.window;
    w.scale = x.scale;
    w.softcap = x.softcap;
    cu::Buffer ow(qn * 2), sw(cu::attention_scratch_bytes(w));
    cu::attention_bf16(ctx, q.get(), kk.get(), v.get(), ow.get(), sw.get(), w, s);
    ctx.synchronize();
    std::vector<float> hw(qn);
    cpu::attention(hq.data(), hk.data(), hv.data(), hw.data(), w);
    char name[64];
    std::snprintf(name, sizeof name, "attn window %lld after %lld, cap %g", (long long)x.window,
                  (long long)x.prefix, x.softcap);
    expect_close(name, device_values(ow, qn), hw);
  }
  {  // Decode past a window: one query per request after 777 cached tokens, a window of 512.
    cu::AttentionShape dw;
    dw.requests = 16;
    dw.q_tokens = 1;
    dw.prefix = 777;
    dw.q_heads = 8;
    dw.kv_heads = 1;
    dw.head_dim = 128;
    dw.kv_capacity = 780;
    dw.window = 512;
    const std::size_t dqn = std::size_t(dw.q_elements()), dkv = std::size_t(dw.kv_elements());
    cu::Buffer dq(dqn * 2), dk(dkv * 2), dv(dkv * 2), dout(dqn * 2),
        dscratch(cu::attention_scratch_bytes(dw));
    cu::fill_random_bf16(dq.get(), dqn, 15, 1.0f, s);
    cu::fill_random_bf16(dk.get(), dkv, 16, 1.0f, s);
    cu::fill_random_bf16(dv.get(), dkv, 17, 1.0f, s);
    cu::attention_bf16(ctx, dq.get(), dk.get(), dv.get(), dout.get(), dscratch.get(), dw, s);
    ctx.synchronize();
    const std::vector<float> hdq = device_values(dq, dqn), hdk = device_values(dk, dkv),
                             hdv = device_values(dv, dkv);
    std::vector<float> hdo(dqn);
    cpu::attention(hdq.data(), hdk.data(), hdv.data(), hdo.data(), dw);
    expect_close("attn decode window 512", device_values(dout, dqn), hdo);
  }
  // cuDNN's fused attention: prefix 0 and > 0, GQA ratios 1 and 8, odd lengths, decode.
  // TPO_REQUIRE_CUDNN=1 (device-check.sh, where the build found cuDNN): a skip is a failure.
  std::string no_cudnn;
  const char* require = std::getenv("TPO_REQUIRE_CUDNN");
  if (!cu::fused_attention_built() || !cu::fused_attention_available(&no_cudnn)) {
    const bool required = require && std::string(require) == "1";
    std::printf("fused attention %s: %s\n", required ? "FAILED (TPO_REQUIRE_CUDNN=1)" : "skipped",
                cu::fused_attention_built() ? no_cudnn.c_str() : "this build has no cuDNN");
    if (required) ++failures;
  } else {
    // A cuDNN error is one failed check; the other kernels' checks still run.
    const auto fused = [&](auto... args) {
      try {
        check_fused(ctx, args...);
      } catch (const std::exception& e) {
        if (std::string(e.what()).find("needs cuDNN 9.10") != std::string::npos) {
          std::printf("fused attention skipped: %s\n", e.what());  // an older cuDNN's limit
          return;
        }
        std::printf("fused attention FAILED: %s\n", e.what());
        ++failures;
      }
    };
    fused(2, 48, 41, 4, 2, 64);        // the shape above
    fused(2, 48, 41, 4, 2, 64, true);  // Q in place in the qkv rows
    fused(1, 1000, 300, 8, 1, 128, true);
    for (std::int64_t len : {1, 7, 1000}) {
      fused(1, len, 0, 8, 8, 128);    // GQA ratio 1
      fused(1, len, 300, 8, 1, 128);  // GQA ratio 8, after a prefix
    }
    fused(1, 4097, 0, 8, 1, 64);   // a long odd chunk (smaller head dim: CPU time)
    fused(16, 1, 777, 8, 1, 128);  // decode: one query per request
    // Sliding windows (Mistral, Gemma-2/3): a chunk after a prefix, one longer than its window,
    // and decode past the window.
    fused(2, 48, 41, 4, 2, 64, true, 20);
    fused(1, 1000, 0, 8, 1, 128, true, 256);
    fused(16, 1, 777, 8, 1, 128, false, 512);
    // Gemma's scores: its own scale and Gemma-2's soft cap (tight, so that it bites), with and
    // without a window, after a prefix and in decode.
    // A soft-capped graph is a score modifier, which cudnn-frontend may pair with the padding
    // mask it adds for a key count off 128 (unproven on a GPU): a cuDNN that refuses the pair is
    // a limit of that cuDNN (--attention auto then runs such a model on the cuBLAS kernel), said
    // and not counted; wrong values still fail.
    const auto capped = [&](auto... args) {
      try {
        check_fused(ctx, args...);
      } catch (const std::exception& e) {
        std::printf(
            "fused attention with a soft cap NOT SUPPORTED by this cuDNN (not counted; "
            "--attention auto uses cuBLAS for such models): %s\n",
            e.what());
      }
    };
    fused(2, 48, 41, 4, 2, 128, true, 0, 0.0f, 0.2f);  // a scale of its own alone: no modifier
    capped(2, 48, 41, 4, 2, 128, true, 0, 0.3f, 0.2f);
    capped(2, 48, 41, 4, 2, 128, true, 20, 0.3f, 0.2f);
    capped(16, 1, 777, 8, 1, 128, false, 0, 0.3f, 0.2f);
  }
  // rmsnorm, SiLU*mul and the residual add: 200 columns (the 8-wide vector paths) and 203
  // (the scalar ones).
  for (const std::int64_t cols : {std::int64_t{200}, std::int64_t{203}}) {
    const std::int64_t rows = 33;
    cu::Buffer x(rows * cols * 2), w(cols * 2), y(rows * cols * 2), gu(rows * 2 * cols * 2);
    cu::fill_random_bf16(x.get(), rows * cols, 6, 1.0f, s);
    cu::fill_random_bf16(w.get(), cols, 7, 1.0f, s);
    cu::fill_random_bf16(gu.get(), rows * 2 * cols, 8, 2.0f, s);
    cu::rmsnorm_bf16(x.get(), w.get(), y.get(), rows, cols, 1e-5f, s);
    ctx.synchronize();
    std::vector<float> hx = device_values(x, rows * cols), hw = device_values(w, cols),
                       hy(rows * cols);
    cpu::rmsnorm(hx.data(), hw.data(), hy.data(), rows, cols);
    char name[32];
    std::snprintf(name, sizeof name, "rmsnorm/%d", int(cols));
    expect_close(name, device_values(y, rows * cols), hy);
    cu::silu_mul_bf16(gu.get(), y.get(), rows, cols, s);
    ctx.synchronize();
    std::vector<float> hgu = device_values(gu, rows * 2 * cols);
    cpu::silu_mul(hgu.data(), hy.data(), rows, cols);
    std::snprintf(name, sizeof name, "silu_mul/%d", int(cols));
    expect_close(name, device_values(y, rows * cols), hy);
    cu::silu_mul_bf16(gu.get(), y.get(), rows, cols, s, /*gelu=*/true);  // GeGLU (Gemma)
    ctx.synchronize();
    cpu::silu_mul(hgu.data(), hy.data(), rows, cols, /*gelu=*/true);
    std::snprintf(name, sizeof name, "gelu_mul/%d", int(cols));
    expect_close(name, device_values(y, rows * cols), hy);
    cu::silu_mul_bf16(gu.get(), y.get(), rows, cols, s);  // the sum below adds SiLU's
    ctx.synchronize();
    std::vector<float> hsum = device_values(y, rows * cols);
    cu::add_bf16(y.get(), x.get(), rows * cols, s);
    ctx.synchronize();
    for (std::size_t i = 0; i < hsum.size(); ++i) hsum[i] += hx[i];
    std::snprintf(name, sizeof name, "add/%d", int(cols));
    expect_close(name, device_values(y, rows * cols), hsum);
    // The fused add and norm (--add-norm fused): y += x, then the normalized y into z.
    std::vector<float> hres = device_values(y, rows * cols), hz(rows * cols);
    cu::Buffer z(rows * cols * 2);
    cu::add_rmsnorm_bf16(y.get(), x.get(), w.get(), z.get(), rows, cols, 1e-5f, s);
    ctx.synchronize();
    cpu::add_rmsnorm(hres.data(), hx.data(), hw.data(), hz.data(), rows, cols);
    std::snprintf(name, sizeof name, "add_rmsnorm/%d x", int(cols));
    expect_close(name, device_values(y, rows * cols), hres);
    std::snprintf(name, sizeof name, "add_rmsnorm/%d y", int(cols));
    expect_close(name, device_values(z, rows * cols), hz);
    // Operands one value off a 16-byte boundary: the scalar fallback of the vector path.
    if (cols % 8 == 0) {
      cu::Buffer y1((rows * cols + 1) * 2), x1((rows * cols + 1) * 2), z1((rows * cols + 1) * 2);
      cu::copy_device(static_cast<char*>(y1.get()) + 2, y.get(), rows * cols * 2, s);
      cu::copy_device(static_cast<char*>(x1.get()) + 2, x.get(), rows * cols * 2, s);
      std::vector<float> hres1 = device_values(y, rows * cols), hz1(rows * cols);
      cu::add_rmsnorm_bf16(static_cast<char*>(y1.get()) + 2, static_cast<char*>(x1.get()) + 2,
                           w.get(), static_cast<char*>(z1.get()) + 2, rows, cols, 1e-5f, s);
      ctx.synchronize();
      cpu::add_rmsnorm(hres1.data(), hx.data(), hw.data(), hz1.data(), rows, cols);
      std::snprintf(name, sizeof name, "add_rmsnorm/%d misaligned", int(cols));
      std::vector<float> got(rows * cols);
      cu::copy_to_host_bf16_as_float(static_cast<char*>(z1.get()) + 2, got.data(), got.size());
      expect_close(name, got, hz1);
    }
  }
  // The norms at the block sizes they launch with (norm_threads): one row of a 70B's hidden
  // and more (1024 threads, two vector passes with a partial last one), a few rows of 16384,
  // 300 rows (256 threads, from 256 rows), and a scalar row longer than 1024 threads.
  {
    struct NormShape {
      std::int64_t rows, cols;
    };
    for (const NormShape& n :
         {NormShape{1, 8200}, NormShape{3, 16384}, NormShape{300, 4104}, NormShape{2, 8195}}) {
      const std::int64_t rows = n.rows, cols = n.cols;
      cu::Buffer x(rows * cols * 2), o(rows * cols * 2), w(cols * 2), y(rows * cols * 2);
      cu::fill_random_bf16(x.get(), rows * cols, 41, 1.0f, s);
      cu::fill_random_bf16(o.get(), rows * cols, 42, 1.0f, s);
      cu::fill_random_bf16(w.get(), cols, 43, 1.0f, s);
      ctx.synchronize();
      std::vector<float> hx = device_values(x, rows * cols), ho = device_values(o, rows * cols),
                         hw = device_values(w, cols), hy(rows * cols);
      char name[48];
      cu::rmsnorm_bf16(x.get(), w.get(), y.get(), rows, cols, 1e-5f, s);
      ctx.synchronize();
      cpu::rmsnorm(hx.data(), hw.data(), hy.data(), rows, cols);
      std::snprintf(name, sizeof name, "rmsnorm/%dx%d", int(rows), int(cols));
      expect_close(name, device_values(y, rows * cols), hy);
      cu::add_rmsnorm_bf16(x.get(), o.get(), w.get(), y.get(), rows, cols, 1e-5f, s);
      ctx.synchronize();
      cpu::add_rmsnorm(hx.data(), ho.data(), hw.data(), hy.data(), rows, cols);
      std::snprintf(name, sizeof name, "add_rmsnorm/%dx%d x", int(rows), int(cols));
      expect_close(name, device_values(x, rows * cols), hx);
      std::snprintf(name, sizeof name, "add_rmsnorm/%dx%d y", int(rows), int(cols));
      expect_close(name, device_values(y, rows * cols), hy);
    }
  }
  // The rotary kernel against the CPU one: 2 requests x 5 rows at positions 7..11, 3 heads of
  // 64 with 48 values rotated (partial), rows 224 values apart (a qkv row's K and V after
  // them stay untouched); its table in bf16 as the runtime uploads it.
  {
    const std::int64_t rows = 5, requests = 2, pitch = 224, heads = 3, hd = 64, rot = 48;
    const std::int64_t n = rows * requests * pitch;
    cu::Buffer qkv(std::size_t(n) * 2);
    cu::fill_random_bf16(qkv.get(), std::size_t(n), 14, 1.0f, s);
    const std::vector<float> table = cpu::rope_table(20, rot, 500000.0);
    const cu::Buffer tb = upload(table);
    ctx.synchronize();
    std::vector<float> want = device_values(qkv, std::size_t(n));
    const std::vector<float> tq = device_values(tb, table.size());  // the table as bf16
    cpu::rope(want.data(), pitch, heads, hd, rot, rows, 7, tq.data(), requests);
    cu::rope_bf16(qkv.get(), pitch, heads, hd, rot, rows, 7, tb.get(), s, requests);
    ctx.synchronize();
    expect_close("rope", device_values(qkv, std::size_t(n)), want);
    // Per-head norms (Qwen3's q_norm), in place on the 3 heads of each of the 10 rows.
    const std::vector<float> w = {0.5f, 1.5f, 1.0f, 2.0f};
    std::vector<float> hw(static_cast<std::size_t>(hd));
    for (std::size_t i = 0; i < hw.size(); ++i) hw[i] = w[i % w.size()];
    const cu::Buffer wb = upload(hw);
    cu::head_rmsnorm_bf16(qkv.get(), pitch, heads, hd, wb.get(), rows * requests, 1e-5f, s);
    ctx.synchronize();
    cpu::head_rmsnorm(want.data(), pitch, heads, hd, hw.data(), rows * requests);
    expect_close("head_norm", device_values(qkv, std::size_t(n)), want);
  }
  // The copy kernel on 4 CTAs, 1000002 bytes: not a multiple of 16, so the tail path runs.
  cu::Buffer src(1000003), dst(1000003);
  cu::fill_random_bf16(src.get(), 500001, 9, 1.0f, s);
  cu::copy_on_ctas(src.get(), dst.get(), 1000002, 4, s);
  ctx.synchronize();
  expect_close("copy", device_values(dst, 500001), device_values(src, 500001), 0.0);
  // NCCL with one rank: the communicator starts and the call completes (a one-rank sum is the
  // identity, so this cannot catch a wrong sum; only a machine with several GPUs can).
  try {
    cu::NcclGroup g(1);
    cu::Buffer ar = upload(std::vector<float>(1024, 0.5f));
    g.allreduce_bf16({ar.get()}, 1024);
    g.synchronize();
    expect_close("nccl-1", device_values(ar, 1024), std::vector<float>(1024, 0.5f), 0.0);
    // The in-place all-gather on its own stream, as the runtime calls it for the logits (one
    // rank: its own slice is the whole buffer, so this checks the call and the offsets only).
    std::vector<float> hv(1000);
    for (std::size_t i = 0; i < hv.size(); ++i) hv[i] = float(i % 97) / 8;
    cu::Buffer ag = upload(hv);
    g.allgather_bf16_on({ag.get()}, hv.size(), {s});
    ctx.synchronize();
    expect_close("nccl-ag-1", device_values(ag, hv.size()), hv, 0.0);
  } catch (const std::runtime_error& e) {
    if (std::string(e.what()).find("no NCCL") == std::string::npos) throw;
    std::printf("nccl-1     skipped: %s\n", e.what());
  }
  std::printf("%s\n", failures ? "FAILED" : "all GPU kernel checks passed");
  return failures ? 1 : 0;
}
