// GPU benchmark (run by validate/device-check.sh): attention TFLOP/s on one rank's heads of
// Llama-2-70B at TP 8 (8 query heads on 1 KV head, head dim 128), for prompts of 1k to 16k
// tokens with and without a prefix of the same length, cuDNN's fused kernel and the cuBLAS one
// side by side, and off the 8-token grid. FLOPs are counted exactly for causal attention with a
// prefix (4 x heads x d x (q x prefix + q (q + 1) / 2)). Prints a table and writes JSON to the
// path given (optional). Q is read in place in qkv-wide rows ((8 + 2) x 128 apart), as the
// runtimes read it. Without a CUDA device: "skipped: no CUDA device", exit 77.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "validate/kernels/cuda_kernels.h"

namespace cu = tpo::validate::cuda;

namespace {

double time_us(cu::Context& ctx, bool fused, const cu::AttentionShape& s, const cu::Buffer& q,
               const cu::Buffer& k, const cu::Buffer& v, cu::Buffer& o, cu::Buffer& scratch) {
  void* st = ctx.compute_stream();
  auto once = [&] {
    if (fused) {
      cu::attention_fused_bf16(ctx, q.get(), k.get(), v.get(), o.get(), s, st);
    } else {
      cu::attention_bf16(ctx, q.get(), k.get(), v.get(), o.get(), scratch.get(), s, st);
    }
  };
  once();  // plans, workspaces, clocks
  ctx.synchronize();
  std::vector<double> runs;
  for (int r = 0; r < 7; ++r) {
    cu::spin(st, 200);  // the host queues the launches while the GPU waits
    cu::Event a, b;
    a.record(st);
    for (int i = 0; i < 5; ++i) once();
    b.record(st);
    b.synchronize();
    runs.push_back(cu::Event::seconds_between(a, b) * 1e6 / 5);
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string why;
  if (cu::device_count(&why) == 0) {
    std::printf("skipped: no CUDA device (%s)\n", why.c_str());
    return 77;
  }
  cu::Context ctx(0);
  const bool have_fused = cu::fused_attention_built() && cu::fused_attention_available(&why);
  if (!have_fused) std::printf("cuDNN fused attention unavailable: %s\n", why.c_str());
  nlohmann::json out = nlohmann::json::array();
  std::printf("%-8s %-8s %-16s %10s %10s\n", "tokens", "prefix", "kernel", "time_us", "TFLOP/s");
  std::vector<std::pair<std::int64_t, std::int64_t>> shapes;
  for (std::int64_t q : {1024, 2048, 4096, 8192, 16384}) {
    shapes.emplace_back(q, 0);
    shapes.emplace_back(q, q);
  }
  shapes.emplace_back(8191, 0);  // off the 8-token grid
  shapes.emplace_back(8193, 0);
  for (const auto& [q, prefix] : shapes) {
    cu::AttentionShape s;
    s.requests = 1;
    s.q_tokens = q;
    s.prefix = prefix;
    s.q_heads = 8;
    s.kv_heads = 1;
    s.head_dim = 128;
    s.kv_capacity = prefix + q;
    s.q_row_stride = (8 + 2 * 1) * 128;
    void* st = ctx.compute_stream();
    cu::Buffer qb(std::size_t(s.q_input_elements()) * 2), kb(std::size_t(s.kv_elements()) * 2),
        vb(std::size_t(s.kv_elements()) * 2), ob(std::size_t(s.q_elements()) * 2);
    cu::fill_random_bf16(qb.get(), std::size_t(s.q_input_elements()), 1, 1.0f, st);
    cu::fill_random_bf16(kb.get(), std::size_t(s.kv_elements()), 2, 1.0f, st);
    cu::fill_random_bf16(vb.get(), std::size_t(s.kv_elements()), 3, 1.0f, st);
    const double flops =
        4.0 * 8 * 128 * (double(q) * double(prefix) + double(q) * double(q + 1) / 2.0);
    for (bool fused : {true, false}) {
      if (fused && !have_fused) continue;
      cu::Buffer scratch(fused ? 256 : cu::attention_scratch_bytes(s));
      const double us = time_us(ctx, fused, s, qb, kb, vb, ob, scratch);
      const double tflops = flops / (us * 1e-6) / 1e12;
      std::printf("%-8lld %-8lld %-16s %10.1f %10.1f\n", (long long)q, (long long)prefix,
                  cu::attention_kernel_name(fused), us, tflops);
      out.push_back({{"q_tokens", q},
                     {"prefix", prefix},
                     {"q_heads", 8},
                     {"kv_heads", 1},
                     {"head_dim", 128},
                     {"q_row_stride", s.q_row_stride},
                     {"kernel", cu::attention_kernel_name(fused)},
                     {"time_us", us},
                     {"flops", flops},
                     {"tflops", tflops}});
    }
  }
  if (argc > 1) std::ofstream(argv[1]) << out.dump(1) << "\n";
  return 0;
}
