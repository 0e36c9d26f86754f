// Profiler and profile cost model on the CPU: harness statistics, rotation, the CPU kernels
// against plain loops, profile JSON round trip, interpolation and fallback, fits, and the
// nccl-tests import.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../sim/toy.h"
#include "profiler/backend.h"
#include "profiler/calibrate.h"
#include "profiler/fit.h"
#include "profiler/harness.h"
#include "profiler/interference_check.h"
#include "profiler/profile_run.h"
#include "profiler/sweep.h"
#include "sim/error.h"
#include "sim/profile.h"
#include "sim/profile_cost.h"
#include "validate/kernels/cpu_kernels.h"

using namespace tpo;
namespace cpu = tpo::validate::cpu;

namespace {

// An empty profile of the tiny model at TP 2, as tpo profile would name it for toy hardware.
sim::Profile toy_profile() {
  sim::Profile p;
  p.tp = 2;
  p.model = "tiny";
  p.options = {{"hardware", "toy"}};
  return p;
}
const std::string data = TPO_TEST_DATA;

sim::Op gemm_op(std::int64_t m, std::int64_t n, std::int64_t k) {
  sim::Op op;
  op.code = sim::OpCode::GateUp;
  op.kind = sim::OpKind::Gemm;
  sim::set_gemm_work(op, m, n, k, false);
  return op;
}

// Attention of q new tokens after `prefix` cached ones, 2 query heads on 1 KV head of 32.
sim::Op attention_op(std::int64_t q, std::int64_t prefix) {
  sim::Op op;
  op.code = sim::OpCode::Attention;
  op.kind = sim::OpKind::Attention;
  op.req_begin = 0;
  op.req_end = 1;
  op.seq_begin = prefix;
  op.seq_end = prefix + q;
  sim::set_attention_work(op, 1, q, prefix, 2, 1, 32);
  return op;
}
double attention_flops(std::int64_t q, std::int64_t prefix) {
  return attention_op(q, prefix).flops;
}
}  // namespace

TEST_CASE("harness statistics: median, min, max in microseconds") {
  auto t = profiler::summarize_samples({3e-6, 1e-6, 2e-6});
  CHECK(t.median_us == doctest::Approx(2.0));
  CHECK(t.min_us == doctest::Approx(1.0));
  CHECK(t.max_us == doctest::Approx(3.0));
  CHECK(t.reps == 3);
  t = profiler::summarize_samples({4e-6, 1e-6, 2e-6, 100e-6});
  CHECK(t.median_us == doctest::Approx(3.0));  // even count: mean of the middle two
}

TEST_CASE("the number of rotated input sets covers 64 MiB, between 2 and 8") {
  CHECK(profiler::rotation_sets(1 << 10) == 8);     // small ops: the most sets
  CHECK(profiler::rotation_sets(20ll << 20) == 4);  // 20 MiB: 4 sets cover 64 MiB
  CHECK(profiler::rotation_sets(1ll << 30) == 2);   // huge ops: at least two
}

TEST_CASE("CPU kernels against plain loops") {
  const std::int64_t m = 3, n = 4, k = 5;
  std::vector<float> a(m * k), b(k * n), c(m * n);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = 0.1f * static_cast<float>(i) - 0.5f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = 0.05f * static_cast<float>(i % 7) - 0.1f;
  cpu::gemm(a.data(), b.data(), c.data(), m, n, k);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      float ref = 0;
      for (std::int64_t x = 0; x < k; ++x) ref += a[i * k + x] * b[x * n + j];
      CHECK(c[i * n + j] == doctest::Approx(ref).epsilon(1e-5));
    }
  }
  // Attention: one query at position 2 (prefix 2) attends to 3 keys; with equal keys the
  // softmax is uniform and the output is the mean of the values.
  cpu::AttentionShape s;
  s.q_tokens = 1;
  s.prefix = 2;
  s.q_heads = 2;
  s.kv_heads = 1;
  s.head_dim = 2;
  s.kv_capacity = 3;
  std::vector<float> q = {1, 0, 0, 1}, kk = {1, 1, 1, 1, 1, 1}, v = {1, 2, 3, 4, 5, 6}, o(4);
  cpu::attention(q.data(), kk.data(), v.data(), o.data(), s);
  CHECK(o[0] == doctest::Approx(3.0));
  CHECK(o[1] == doctest::Approx(4.0));
  CHECK(o[2] == doctest::Approx(3.0));  // GQA: head 1 reads the same KV head
  // All-reduce over 3 rank threads.
  cpu::SharedAllReduce ar(3);
  std::vector<std::vector<float>> bufs = {
      {1, 2, 3, 4, 5}, {10, 20, 30, 40, 50}, {100, 200, 300, 400, 500}};
  std::vector<std::thread> ts;
  for (int r = 0; r < 3; ++r)
    ts.emplace_back([&, r] { ar.run(r, bufs[static_cast<std::size_t>(r)].data(), 5); });
  for (auto& t : ts) t.join();
  for (const auto& buf : bufs) CHECK(buf == std::vector<float>{111, 222, 333, 444, 555});
}

namespace {
// 2 requests of 5 queries after a prefix of 3, 4 query heads on 2 KV heads of 8.
cpu::AttentionShape small_attention(std::int64_t kv_capacity) {
  cpu::AttentionShape s;
  s.requests = 2;
  s.q_tokens = 5;
  s.prefix = 3;
  s.q_heads = 4;
  s.kv_heads = 2;
  s.head_dim = 8;
  s.kv_capacity = kv_capacity;
  return s;
}
}  // namespace

TEST_CASE("CPU attention: several queries after a prefix, GQA, against a float64 loop") {
  const cpu::AttentionShape s = small_attention(9);  // one spare row: must never be read
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  auto rnd = [&](std::size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = u(rng);
    return v;
  };
  const auto q = rnd(2 * 5 * 4 * 8), k = rnd(2 * 9 * 2 * 8), v = rnd(2 * 9 * 2 * 8);
  std::vector<float> o(q.size());
  cpu::attention(q.data(), k.data(), v.data(), o.data(), s);
  for (int b = 0; b < 2; ++b) {
    for (int i = 0; i < 5; ++i) {
      for (int h = 0; h < 4; ++h) {
        const int g = h / 2, keys = 3 + i + 1;  // causal: the prefix and queries 0..i
        std::vector<double> w(static_cast<std::size_t>(keys));
        double mx = -1e300, sum = 0;
        for (int j = 0; j < keys; ++j) {
          double dot = 0;
          for (int e = 0; e < 8; ++e) {
            dot += double(q[((b * 5 + i) * 4 + h) * 8 + e]) * k[((b * 9 + j) * 2 + g) * 8 + e];
          }
          w[static_cast<std::size_t>(j)] = dot / std::sqrt(8.0);
          mx = std::max(mx, w[static_cast<std::size_t>(j)]);
        }
        for (auto& x : w) sum += (x = std::exp(x - mx));
        for (int e = 0; e < 8; ++e) {
          double ref = 0;
          for (int j = 0; j < keys; ++j)
            ref += w[static_cast<std::size_t>(j)] / sum * v[((b * 9 + j) * 2 + g) * 8 + e];
          CHECK(o[((b * 5 + i) * 4 + h) * 8 + e] == doctest::Approx(ref).epsilon(1e-5));
        }
      }
    }
  }
}

TEST_CASE("CPU attention reads Q in place in qkv-wide rows, exactly as packed, nothing else") {
  const cpu::AttentionShape s = small_attention(8);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> q(2 * 5 * 32), k(2 * 8 * 16), v(k.size()), packed(q.size()), in(q.size());
  for (auto* x : {&q, &k, &v})
    for (auto& e : *x) e = u(rng);
  cpu::attention(q.data(), k.data(), v.data(), packed.data(), s);
  // qkv rows of (4 + 2 x 2) x 8 = 64 values: Q in the first 32, then K and V, here NaN, which
  // would reach the output if the kernel read them.
  cpu::AttentionShape t = s;
  t.q_row_stride = 64;
  CHECK(t.q_stride() == 64);
  CHECK(s.q_stride() == 32);
  CHECK(t.q_input_elements() == 9 * 64 + 32);
  std::vector<float> qkv(static_cast<std::size_t>(t.q_input_elements()), std::nanf(""));
  for (std::size_t r = 0; r < 10; ++r) std::copy_n(q.data() + r * 32, 32, qkv.data() + r * 64);
  cpu::attention(qkv.data(), k.data(), v.data(), in.data(), t);
  CHECK(in == packed);
}

TEST_CASE("the profiled attention kernel sets how the contention model counts attention's blocks") {
  sim::Profile p;
  p.tp = 2;
  p.device = {{"backend", "cpu"}};
  CHECK(sim::profiled_attention_kernel(p) == "cpu");
  const auto hw = test::toy_hardware();
  CHECK_FALSE(sim::ProfileCostModel(p, hw, 2).contention()->attention_batched_gemm);
  // A CUDA profile from before the fused kernel: the cuBLAS batched attention.
  p.device = {{"backend", "cuda"}};
  CHECK(sim::profiled_attention_kernel(p) == "cublas-batched");
  CHECK(sim::ProfileCostModel(p, hw, 2).contention()->attention_batched_gemm);
  p.device["attention_kernel"] = "cudnn-sdpa";
  CHECK(sim::profiled_attention_kernel(p) == "cudnn-sdpa");
  CHECK_FALSE(sim::ProfileCostModel(p, hw, 2).contention()->attention_batched_gemm);
}

TEST_CASE("profile JSON round trip") {
  sim::Profile p;
  p.model = "tiny";
  p.tp = 2;
  p.date = "2026-11-29";
  p.device = {{"backend", "cpu"}};
  p.options = {{"hardware", "toy"}};
  p.gemm.push_back({"qkv", 64, 256, 128, {10, 9, 12, 5}, "tile 128x256, split-K 1"});
  p.attention.push_back({1, 64, 64, 2, 1, 32, 1e6, {20, 19, 21, 5}});
  p.rowwise.push_back({"rmsnorm", 64, 128, {1, 1, 2, 5}});
  p.allreduce.push_back({8192, 2, 32768, {30, 29, 31, 5}});
  p.interference.push_back({"gemm", "copy", 1, "64x512x128", 100, 120});
  p.interference.push_back({"comm", "gemm", 16, "64x512x128", 10, 30});
  p.interference.back().bytes = 1 << 20;  // a copy's bytes, kept (calibrate reads them)
  p.compute_slowdown_under_comm = 1.2;
  p.attention_q_row_stride = 128;
  p.attention_softcap = 50;
  p.interference_head_start_us = 30;
  const auto j = sim::profile_to_json(p);
  const sim::Profile q = sim::profile_from_json(nlohmann::json::parse(j.dump()), "mem.json");
  CHECK(q.model == "tiny");
  CHECK(q.attention_q_row_stride == 128);
  CHECK(q.attention_softcap == 50.0);
  CHECK(q.interference_head_start_us == 30.0);
  p.attention_softcap.reset();  // an older profile: no record, none written
  CHECK_FALSE(sim::profile_to_json(p).contains("attention_softcap"));
  p.interference_head_start_us.reset();  // pairs released together: no head start written
  CHECK_FALSE(sim::profile_to_json(p).at("interference").contains("head_start_us"));
  CHECK_FALSE(
      sim::profile_from_json(nlohmann::json::parse(sim::profile_to_json(p).dump()), "mem.json")
          .interference_head_start_us.has_value());
  // What the measurements belong to cannot be left out: model, TP and hardware.
  for (const char* key : {"model", "tp"}) {
    auto k = nlohmann::json::parse(j.dump());
    k.erase(key);
    const std::string expected = std::string("field '") + key + "': missing";
    CHECK_THROWS_WITH_AS(sim::profile_from_json(k, "mem.json"), doctest::Contains(expected.c_str()),
                         InputError);
  }
  // Entries a profile cannot hold: an op tpo does not measure, a timing whose median is not
  // between its min and max, all-reduce ranks other than the TP, and no measurement at all.
  for (const auto& [bend, expect] :
       std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>>{
           {[](nlohmann::json& x) { x["gemm"][0]["name"] = "foo"; }, "field 'gemm[0].name'"},
           {[](nlohmann::json& x) { x["gemm"][0]["min_us"] = 50; }, "field 'gemm[0].median_us'"},
           {[](nlohmann::json& x) { x["allreduce"][0]["ranks"] = 3; },
            "field 'allreduce[0].ranks': 3 ranks in a profile of TP 2"},
           {[](nlohmann::json& x) { x["attention"][0]["prefix"] = 1e300; },
            "field 'attention[0].prefix': 1e+300 is outside"},
           {[](nlohmann::json& x) { x["device"]["backend"] = "tpu"; },
            "field 'device.backend': 'tpu' is not"},
           {[](nlohmann::json& x) {
              for (const char* a : {"gemm", "attention", "rowwise", "allreduce"}) x.erase(a);
            },
            "holds no measurement"}}) {
    auto bent = nlohmann::json::parse(j.dump());
    bend(bent);
    CHECK_THROWS_WITH_AS(sim::profile_from_json(bent, "mem.json"),
                         doctest::Contains(expect.c_str()), InputError);
  }
  auto k = nlohmann::json::parse(j.dump());
  k["options"].erase("hardware");
  CHECK_THROWS_WITH_AS(sim::profile_from_json(k, "mem.json"),
                       doctest::Contains("field 'options.hardware': missing"), InputError);
  CHECK(q.tp == 2);
  REQUIRE(q.gemm.size() == 1);
  CHECK(q.gemm[0].n == 256);
  CHECK(q.gemm[0].t.median_us == 10);
  CHECK(q.gemm[0].kernel == "tile 128x256, split-K 1");
  CHECK(q.attention[0].prefix == 64);
  CHECK(q.rowwise[0].name == "rmsnorm");
  CHECK(q.allreduce[0].bytes == 32768);
  CHECK(q.interference[0].slowdown() == doctest::Approx(1.2));
  CHECK(q.interference[0].bytes == 0);
  CHECK(q.interference[1].bytes == 1 << 20);
  CHECK(q.compute_slowdown_under_comm == doctest::Approx(1.2));
  CHECK(sim::profile_to_json(q).dump() == j.dump());
}

TEST_CASE("a profile's interference summary stays readable when the timings are noise") {
  // Measured on a busy CI machine: a GEMM took 10x longer alone than beside the copy. Such a
  // median is noise, and tpo refuses a profile holding a factor outside [0.1, 100]; the summary is
  // kept within [1, 100] while the points keep what was measured.
  const auto point = [](profiler::ItemKind kind, double alone, double beside) {
    profiler::Measurement m;
    m.item.kind = kind;
    m.item.m = 128;
    m.item.n = 256;
    m.item.k = 128;
    m.item.workers = 1;
    m.alone = {alone, alone, alone, 2};
    m.t = {beside, beside, beside, 2};
    return m;
  };
  std::vector<profiler::Measurement> ms = {point(profiler::ItemKind::GemmBesideComm, 2239.6, 213.3),
                                           point(profiler::ItemKind::CommBesideGemm, 0.1, 50.0)};
  sim::Profile p = profiler::assemble(ms, "fp32");
  CHECK(p.compute_slowdown_under_comm == 1.0);
  CHECK(p.comm_slowdown_under_compute == 100.0);
  REQUIRE(p.interference.size() == 2);
  CHECK(p.interference[0].slowdown() == doctest::Approx(213.3 / 2239.6));
  p.model = "tiny";
  p.tp = 2;
  p.device = {{"backend", "cpu"}};
  p.options = {{"hardware", "toy"}};
  p.gemm.push_back({"qkv", 64, 256, 128, {10, 10, 10, 1}, ""});
  CHECK_NOTHROW(
      sim::profile_from_json(nlohmann::json::parse(sim::profile_to_json(p).dump()), "noisy.json"));
  // Within the bounds a measured median is kept as measured.
  ms = {point(profiler::ItemKind::GemmBesideComm, 100, 120)};
  CHECK(profiler::assemble(ms, "fp32").compute_slowdown_under_comm == doctest::Approx(1.2));
}

TEST_CASE("profile cost model: a decode norm below the measured rows keeps the measured time") {
  // The analytical model prices every norm of fewer rows than a full wave alike (rows per SM),
  // so a one-row norm extrapolated from a measured 64-row one must read back its time: the
  // ratio is taken with the op resized by the graph's formulas (the weight vector shared, not
  // scaled with the rows; scaled, it read 0.80x at 8192 columns).
  sim::Profile p;
  p.tp = 2;
  p.rowwise.push_back({"rmsnorm", 64, 8192, {3.84, 3.8, 3.9, 5}});
  p.rowwise.push_back({"rmsnorm", 128, 8192, {4.09, 4, 4.2, 5}});
  auto hw = test::toy_hardware();
  hw.norm_blocks_per_sm = 128;   // 2 SMs x 128: a full wave is 256 rows
  hw.memory_bandwidth_gbps = 1;  // 1 byte/ns: the bytes, not the per-kernel term, decide
  const sim::ProfileCostModel cm(p, hw, 2);
  sim::Op norm;
  norm.code = sim::OpCode::AttnNorm;
  norm.kind = sim::OpKind::Norm;
  sim::set_rowwise_work(norm, 1, 8192);
  CHECK(cm.origin(norm) == "extrapolated");
  CHECK(static_cast<double>(cm.standalone_ns(norm)) == doctest::Approx(3840).epsilon(1e-3));
}

TEST_CASE("profile cost model: prefill attention on one curve per ratio of prefix to chunk") {
  sim::Profile p;
  p.tp = 2;
  auto point = [&](std::int64_t q, std::int64_t prefix, double us) {
    p.attention.push_back({1, q, prefix, 2, 1, 32, attention_flops(q, prefix), {us, us, us, 1}});
  };
  // Ratio 0 runs at half the FLOP rate of ratio 1; ratio 3 at 1.5 times it.
  point(1024, 0, 200);
  point(4096, 0, 3200);  // x16 FLOPs (nearly), x16 time
  point(1024, 1024, 150);
  point(2048, 2048, 600);
  point(512, 1536, 40);
  point(1024, 3072, 160);
  const auto hw = test::toy_hardware();
  const sim::ProfileCostModel cm(p, hw, 2);
  auto us = [&](std::int64_t q, std::int64_t prefix) {
    return static_cast<double>(cm.standalone_ns(attention_op(q, prefix))) / 1e3;
  };
  // Log-log interpolation between two points of one curve, by hand.
  auto loglog = [](std::int64_t q0, std::int64_t p0, double y0, std::int64_t q1, std::int64_t p1,
                   double y1, double x) {
    const double x0 = attention_flops(q0, p0), x1 = attention_flops(q1, p1);
    return std::exp(std::log(y0) + (std::log(x) - std::log(x0)) / (std::log(x1) - std::log(x0)) *
                                       (std::log(y1) - std::log(y0)));
  };
  // Measured points are read back exactly, each on its own curve (times are whole
  // nanoseconds, so within 1e-5 below).
  CHECK(us(4096, 0) == doctest::Approx(3200));
  CHECK(us(2048, 2048) == doctest::Approx(600));
  CHECK(us(1024, 3072) == doctest::Approx(160));
  CHECK(cm.origin(attention_op(2048, 2048)) == "measured");
  // On a measured ratio: that ratio's curve, not pulled by the others at the same FLOPs.
  CHECK(
      us(2048, 0) ==
      doctest::Approx(loglog(1024, 0, 200, 4096, 0, 3200, attention_flops(2048, 0))).epsilon(1e-5));
  CHECK(us(1536, 1536) ==
        doctest::Approx(loglog(1024, 1024, 150, 2048, 2048, 600, attention_flops(1536, 1536)))
            .epsilon(1e-5));
  // Between ratios 0 and 1 (1536 tokens after 768: ratio 1/2, FLOPs inside both curves):
  // the two curves at its FLOPs, log times halfway.
  {
    const double f = attention_flops(1536, 768);
    const double a = loglog(1024, 0, 200, 4096, 0, 3200, f);
    const double b = loglog(1024, 1024, 150, 2048, 2048, 600, f);
    CHECK(us(1536, 768) == doctest::Approx(std::sqrt(a * b)).epsilon(1e-5));
    CHECK(cm.origin(attention_op(1536, 768)) == "interpolated");
  }
  // Between ratios 1 and 3 (1024 after 2048: ratio 2): halfway between those two curves.
  {
    const double f = attention_flops(1024, 2048);
    const double a = loglog(1024, 1024, 150, 2048, 2048, 600, f);
    const double b = loglog(512, 1536, 40, 1024, 3072, 160, f);
    CHECK(us(1024, 2048) == doctest::Approx(std::sqrt(a * b)).epsilon(1e-5));
  }
  // Just off a measured ratio (1000 after 1040: ratio 1.04) the time moves off that curve
  // by the ratio's share of the way to the next, not in a step.
  {
    const double f = attention_flops(1000, 1040);
    const double a = loglog(1024, 1024, 150, 2048, 2048, 600, f);
    const double b = loglog(512, 1536, 40, 1024, 3072, 160, f);
    const double t = (8.0 * 1040 / 1000 - 8) / 16;
    CHECK(us(1000, 1040) ==
          doctest::Approx(std::exp((1 - t) * std::log(a) + t * std::log(b))).epsilon(1e-5));
    CHECK(us(1000, 1040) != doctest::Approx(a).epsilon(1e-4));
  }
  // Beyond the measured ratios (ratio 5): the nearest ratio's curve, labelled extrapolated.
  CHECK(us(512, 2560) ==
        doctest::Approx(loglog(512, 1536, 40, 1024, 3072, 160, attention_flops(512, 2560)))
            .epsilon(1e-5));
  CHECK(cm.origin(attention_op(512, 2560)) == "extrapolated");
  // With fewer than two ratios measured in two points, an op off them reads every prefill
  // point, labelled extrapolated.
  sim::Profile one;
  one.tp = 2;
  one.attention = {p.attention[0], p.attention[1], p.attention[2]};  // ratio 0; one ratio-1 point
  const sim::ProfileCostModel cm1(one, hw, 2);
  sim::Profile all = one;
  for (auto& x : all.attention) x.prefix = 0;  // (flops kept: one curve over the three)
  CHECK(cm1.standalone_ns(attention_op(1536, 1536)) ==
        sim::ProfileCostModel(all, hw, 2).standalone_ns(attention_op(1536, 1536)));
  CHECK(cm1.origin(attention_op(1536, 1536)) == "extrapolated");
}

TEST_CASE("profile cost model: measured, interpolated in log-log, extrapolated, analytical") {
  sim::Profile p;
  p.tp = 2;
  p.gemm.push_back({"gate_up", 64, 512, 128, {100, 100, 100, 1}, ""});
  p.gemm.push_back({"gate_up", 256, 512, 128, {400, 400, 400, 1}, ""});
  const auto hw = test::toy_hardware();
  const sim::ProfileCostModel cm(p, hw, 2);
  CHECK(cm.standalone_ns(gemm_op(64, 512, 128)) == 100000);
  CHECK(cm.origin(gemm_op(64, 512, 128)) == "measured");
  // Halfway in log space between (64, 100 us) and (256, 400 us): 128 -> 200 us.
  CHECK(cm.standalone_ns(gemm_op(128, 512, 128)) == 200000);
  CHECK(cm.origin(gemm_op(128, 512, 128)) == "interpolated");
  // Beyond the range: analytical, scaled to agree with the edge measurement.
  const sim::AnalyticalCostModel a(hw, 2);
  const double scale = 400e3 / static_cast<double>(a.standalone_ns(gemm_op(256, 512, 128)));
  CHECK(static_cast<double>(cm.standalone_ns(gemm_op(1024, 512, 128))) ==
        doctest::Approx(scale * static_cast<double>(a.standalone_ns(gemm_op(1024, 512, 128))))
            .epsilon(1e-3));
  CHECK(cm.origin(gemm_op(1024, 512, 128)) == "extrapolated");
  // A shape the profile never saw: the analytical model.
  CHECK(cm.standalone_ns(gemm_op(64, 999, 128)) == a.standalone_ns(gemm_op(64, 999, 128)));
  CHECK(cm.origin(gemm_op(64, 999, 128)) == "analytical");
}

TEST_CASE("profile cost model: the rows every GEMM measured, and its leave-one-out error") {
  sim::Profile p;
  p.tp = 2;
  // gate_up at 64, 128, 256 rows: 128 read between 64 and 256 in log-log is 200 us, measured
  // 250 (-20%); 256 between 128 and 512 is sqrt(250 x 1000) = 500 us, measured 400 (+25%).
  // down at 64 and 256 only: no interior point.
  p.gemm.push_back({"gate_up", 64, 512, 128, {100, 100, 100, 1}, ""});
  p.gemm.push_back({"gate_up", 128, 512, 128, {250, 250, 250, 1}, ""});
  p.gemm.push_back({"gate_up", 256, 512, 128, {400, 400, 400, 1}, ""});
  p.gemm.push_back({"gate_up", 512, 512, 128, {1000, 1000, 1000, 1}, ""});
  p.gemm.push_back({"down", 64, 128, 256, {50, 50, 50, 1}, ""});
  p.gemm.push_back({"down", 256, 128, 256, {200, 200, 200, 1}, ""});
  const auto hw = test::toy_hardware();
  const sim::ProfileCostModel cm(p, hw, 2);
  CHECK(cm.gemm_interpolation_error() == doctest::Approx(0.225));  // median of 0.2 and 0.25
  // Rows are measured only where every GEMM has a point.
  CHECK(cm.gemm_rows_measured(64));
  CHECK(cm.gemm_rows_measured(256));
  CHECK_FALSE(cm.gemm_rows_measured(128));  // gate_up only
  CHECK_FALSE(cm.gemm_rows_measured(512));
  CHECK_FALSE(cm.gemm_rows_measured(100));
  // Too few points to read one without it: no error claimed; the analytical model none.
  sim::Profile two;
  two.tp = 2;
  two.gemm = {p.gemm[4], p.gemm[5]};
  CHECK(sim::ProfileCostModel(two, hw, 2).gemm_interpolation_error() == 0);
  const sim::AnalyticalCostModel a(hw, 2);
  CHECK(a.gemm_interpolation_error() == 0);
  CHECK(a.gemm_rows_measured(1408));
}

TEST_CASE("profile cost model: qkv's KV-cache write added only where the profile did not time it") {
  const auto hw = test::byte_per_ns_hardware();
  sim::Profile p = toy_profile();
  p.gemm.push_back({"qkv", 64, 48, 128, {100, 100, 100, 1}, ""});
  sim::Op qkv = gemm_op(64, 48, 128);
  qkv.code = sim::OpCode::Qkv;
  qkv.kv_width = 8;
  const sim::AnalyticalCostModel a(hw, 2);
  const double store_ns = a.kv_store_ns(qkv);  // 64 x 8 x 2 x 2 x 2 bytes at 1 byte/ns, + 1 us
  CHECK(store_ns == doctest::Approx(4096 + 1000));
  // A profile of the GEMM alone (made before 2026-12-02): the write from the analytical model.
  CHECK(sim::ProfileCostModel(p, hw, 2).standalone_ns(qkv) == std::llround(100000 + store_ns));
  // Timed with the write: the measurement alone.
  p.qkv_kv_store_width = 8;
  CHECK(sim::ProfileCostModel(p, hw, 2).standalone_ns(qkv) == 100000);
  // Round trip, and a bad width is refused naming the field.
  auto j = nlohmann::json::parse(sim::profile_to_json(p).dump());
  CHECK(sim::profile_from_json(j, "p.json").qkv_kv_store_width == 8);
  j["qkv_kv_store_width"] = -3;
  CHECK_THROWS_AS(sim::profile_from_json(j, "p.json"), InputError);
}

TEST_CASE("profile cost model: communication's slowdown beside a GEMM depends on its length") {
  sim::Profile p;
  p.tp = 2;
  // All-reduce times measured at three sizes (bf16 elements -> us).
  p.allreduce.push_back({1000, 2, 2000, {10, 10, 10, 1}});
  p.allreduce.push_back({10000, 2, 20000, {100, 100, 100, 1}});
  p.allreduce.push_back({100000, 2, 200000, {1000, 1000, 1000, 1}});
  // The series at 16 workers: a short transfer waits, a long one shares (factor 5, 2, 1.1);
  // a single point at 8 workers is not a series.
  p.interference.push_back({"comm", "gemm", 16, "", 10, 50});
  p.interference.push_back({"comm", "gemm", 16, "", 100, 200});
  p.interference.push_back({"comm", "gemm", 16, "", 1000, 1100});
  p.interference.push_back({"comm", "gemm", 8, "", 10, 80});
  p.interference.push_back({"gemm", "copy", 16, "", 100, 125});
  p.compute_slowdown_under_comm = 1.25;
  p.comm_slowdown_under_compute = 5;
  const sim::ProfileCostModel cm(p, test::toy_hardware(), 2);
  auto ar = [](double elements) {
    sim::Op op;
    op.code = sim::OpCode::AllReduce;
    op.kind = sim::OpKind::AllReduce;
    op.bytes = 2 * elements;
    return op;
  };
  CHECK(cm.overlap_slowdown(ar(1000), sim::OpKind::Gemm) == doctest::Approx(5));
  CHECK(cm.overlap_slowdown(ar(10000), sim::OpKind::Gemm) == doctest::Approx(2));
  CHECK(cm.overlap_slowdown(ar(100000), sim::OpKind::Gemm) == doctest::Approx(1.1));
  // Between two lengths: linear in log(duration); 316 us is halfway from 100 to 1000 us.
  CHECK(cm.overlap_slowdown(ar(31623), sim::OpKind::Gemm) == doctest::Approx(1.55).epsilon(1e-3));
  // Beyond the measured lengths: the nearest one's factor.
  CHECK(cm.overlap_slowdown(ar(100), sim::OpKind::Gemm) == doctest::Approx(5));
  CHECK(cm.overlap_slowdown(ar(1e7), sim::OpKind::Gemm) == doctest::Approx(1.1));
  // Compute beside communication keeps its single factor.
  CHECK(cm.overlap_slowdown(gemm_op(64, 512, 128), sim::OpKind::AllReduce) ==
        doctest::Approx(1.25));
  // A profile with one length per worker count uses the summary factor.
  sim::Profile q = p;
  q.interference.resize(1);
  q.interference.push_back({"comm", "gemm", 8, "", 10, 80});
  const sim::ProfileCostModel cq(q, test::toy_hardware(), 2);
  CHECK(cq.overlap_slowdown(ar(100000), sim::OpKind::Gemm) == doctest::Approx(5));
}

TEST_CASE(
    "profile cost model: a CTA budget below full slows a measured all-reduce's bandwidth term") {
  sim::Profile p;
  p.tp = 2;
  p.allreduce.push_back({1000, 2, 2000, {10, 10, 10, 1}});
  p.allreduce.push_back({100000, 2, 200000, {1000, 1000, 1000, 1}});
  const auto hw = test::toy_hardware();
  sim::ProfileCostModel cm(p, hw, 2);
  sim::Op ar;
  ar.code = sim::OpCode::AllReduce;
  ar.kind = sim::OpKind::AllReduce;
  ar.bytes = 2 * 100000;
  const auto full = cm.standalone_ns(ar);
  sim::ContentionParams c = *cm.contention();
  c.enabled = true;
  c.sms = 100;
  c.comm_ctas_full = 8;
  c.comm_ctas = 2;  // factor 4: three more bandwidth terms, the latency once
  cm.set_contention(c);
  const double bw = sim::AnalyticalCostModel(hw, 2).allreduce_bandwidth_ns(
      {sim::CollectiveKind::AllReduce, static_cast<std::int64_t>(ar.bytes), 2});
  REQUIRE(bw > 0);
  CHECK(static_cast<double>(cm.standalone_ns(ar) - full) == doctest::Approx(3 * bw).epsilon(1e-3));
  CHECK(cm.standalone_ns(ar) < 4 * full);  // not the whole measured time times 4
}

TEST_CASE("profile cost model: communication beside attention or a norm uses its own points") {
  sim::Profile p;
  p.tp = 2;
  p.allreduce.push_back({1000, 2, 2000, {10, 10, 10, 1}});
  p.allreduce.push_back({100000, 2, 200000, {1000, 1000, 1000, 1}});
  p.interference.push_back({"comm", "gemm", 16, "", 10, 50});
  p.interference.push_back({"comm", "gemm", 16, "", 1000, 1200});
  p.interference.push_back({"comm", "attention", 16, "", 10, 12});
  p.interference.push_back({"comm", "attention", 16, "", 1000, 1010});
  p.comm_slowdown_under_compute = 3;
  const sim::ProfileCostModel cm(p, test::toy_hardware(), 2);
  sim::Op ar;
  ar.code = sim::OpCode::AllReduce;
  ar.kind = sim::OpKind::AllReduce;
  ar.bytes = 2 * 1000;  // 10 us alone
  CHECK(cm.overlap_slowdown(ar, sim::OpKind::Gemm) == doctest::Approx(5));
  CHECK(cm.overlap_slowdown(ar, sim::OpKind::Attention) == doctest::Approx(1.2));
  // Nothing measured beside a norm: the GEMM's curve.
  CHECK(cm.overlap_slowdown(ar, sim::OpKind::Norm) == doctest::Approx(5));
  ar.bytes = 2 * 100000;  // 1000 us alone
  CHECK(cm.overlap_slowdown(ar, sim::OpKind::Attention) == doctest::Approx(1.01));
  CHECK(cm.overlap_slowdown(ar, sim::OpKind::Gemm) == doctest::Approx(1.2));
}

namespace {
// A small shard: 4 query heads over 2 KV heads of 32, hidden 128, FFN 256.
sim::ShardDims tiny_shard() {
  sim::ShardDims d;
  d.q_heads = 4;
  d.kv_heads = 2;
  d.head_dim = 32;
  d.hidden = 128;
  d.ffn = 256;
  return d;
}
}  // namespace

TEST_CASE("sweep: a GeGLU model's gated activation is measured as GELU, a SwiGLU one's as SiLU") {
  auto m = test::toy_model();
  const sim::ShardDims d = tiny_shard();
  profiler::SweepOptions o;
  o.max_tokens = 128;
  o.quick = true;
  for (const auto act : {sim::ModelConfig::Activation::Silu, sim::ModelConfig::Activation::Gelu}) {
    m.activation = act;
    int gated = 0;
    for (const auto& it : profiler::make_sweep(m, d, 2, o)) {
      const bool silu_mul = it.kind == profiler::ItemKind::Rowwise && it.name == "silu_mul";
      gated += silu_mul;
      CHECK(it.gelu == (silu_mul && act == sim::ModelConfig::Activation::Gelu));
    }
    CHECK(gated > 0);
  }
}

TEST_CASE("sweep: qkv timed as the runtime runs it, and a biased GEMM with its bias") {
  auto m = test::toy_model();  // rotary on the whole head of 16
  const sim::ShardDims d = tiny_shard();
  profiler::SweepOptions o;
  o.max_tokens = 128;
  o.quick = true;
  for (const int variant : {0, 1, 2}) {
    m.qk_norm = variant >= 1;
    m.qkv_bias = variant == 2;
    m.mlp_bias = variant == 2;
    CAPTURE(variant);
    int qkv = 0, biased = 0;
    std::set<std::string> keys;
    for (const auto& it : profiler::make_sweep(m, d, 2, o)) {
      if (it.kind != profiler::ItemKind::Gemm) continue;
      CHECK(keys.insert(it.key).second);
      const bool is_qkv = it.name == "qkv";
      qkv += is_qkv;
      CHECK(it.rope_dim == (is_qkv ? 16 : 0));
      CHECK(it.qk_norm == (is_qkv && m.qk_norm));
      const bool want_bias = variant == 2 && it.name != "o_proj";
      CHECK(it.bias == want_bias);
      biased += it.bias;
      CHECK((it.key.find("+bias") != std::string::npos) == want_bias);
      if (is_qkv) CHECK((it.key.find("+qk_norm+rope+kv_store") != std::string::npos) == m.qk_norm);
    }
    CHECK(qkv > 0);
    CHECK((biased > 0) == (variant == 2));
  }
  // A GEMM point's bias round-trips through the profile file; a bad one names its field.
  sim::Profile p = toy_profile();
  p.gemm.push_back({"qkv", 64, 48, 128, {100, 100, 100, 1}, "", true});
  p.gemm.push_back({"o_proj", 64, 32, 16, {50, 50, 50, 1}, ""});
  auto j = nlohmann::json::parse(sim::profile_to_json(p).dump());
  CHECK_FALSE(j.at("gemm").at(1).contains("bias"));
  const sim::Profile back = sim::profile_from_json(j, "p.json");
  CHECK(back.gemm.at(0).bias);
  CHECK_FALSE(back.gemm.at(1).bias);
  j["gemm"][0]["bias"] = "yes";
  CHECK(test::error_of([&] { sim::profile_from_json(j, "p.json"); }).find("bias") !=
        std::string::npos);
}

TEST_CASE("the LM head: timed at batch sizes, read off its own curve, not a layer GEMM's rows") {
  // The sweep: rows 1 and 8 (decode), then 64 and 128 (the grid's first, up to 4 x align and
  // --max-tokens); with --quick the grid's first alone. This rank's vocabulary slice x hidden.
  auto m = test::toy_model();
  sim::ShardDims d = tiny_shard();
  d.vocab = 500;
  profiler::SweepOptions o;
  o.max_tokens = 128;
  o.decode_rows = {1, 8};
  for (const bool quick : {false, true}) {
    o.quick = quick;
    std::vector<std::int64_t> rows;
    for (const auto& it : profiler::make_sweep(m, d, 2, o)) {
      if (it.name != "lm_head") continue;
      CHECK(it.kind == profiler::ItemKind::Gemm);
      CHECK(it.n == 500);
      CHECK(it.k == 128);
      CHECK_FALSE(it.held_back);
      CHECK(it.key == "gemm/lm_head/m" + std::to_string(it.m));
      rows.push_back(it.m);
    }
    CHECK(rows ==
          (quick ? std::vector<std::int64_t>{1, 8, 64} : std::vector<std::int64_t>{1, 8, 64, 128}));
  }
  d.vocab = 0;  // a model without a vocabulary: none
  for (const auto& it : profiler::make_sweep(m, d, 2, o)) CHECK(it.name != "lm_head");
  // The profile model: the LM head read off its curve; the rows every layer GEMM was measured
  // at, and their interpolation error, are the layer GEMMs' alone.
  sim::Profile p;
  p.tp = 2;
  p.gemm.push_back({"gate_up", 64, 512, 128, {100, 100, 100, 1}, ""});
  p.gemm.push_back({"gate_up", 128, 512, 128, {200, 200, 200, 1}, ""});
  p.gemm.push_back({"lm_head", 1, 500, 128, {10, 10, 10, 1}, ""});
  p.gemm.push_back({"lm_head", 64, 500, 128, {40, 40, 40, 1}, ""});
  p.gemm.push_back({"lm_head", 256, 500, 128, {160, 160, 160, 1}, ""});
  const auto hw = test::toy_hardware();
  const sim::ProfileCostModel cm(p, hw, 2);
  CHECK(cm.gemm_rows_measured(128));  // the LM head's rows {1, 64, 256} do not narrow them
  CHECK_FALSE(cm.gemm_rows_measured(1));
  CHECK(cm.gemm_interpolation_error() == 0);  // gate_up has no interior point; 64 is the LM head's
  sim::Op head = gemm_op(8, 500, 128);
  head.code = sim::OpCode::LmHead;
  CHECK(cm.origin(head) == "interpolated");
  // 8 rows between 1 (10 us) and 64 (40 us) in log-log: 10 x 4^(log 8 / log 64) = 20 us.
  CHECK(cm.standalone_ns(head) == 20000);
  // An LM-head op is not a layer GEMM whose rows went unmeasured (its rows are batch sizes).
  sim::Schedule s;
  s.ops.push_back(head);
  CHECK_FALSE(sim::has_unmeasured_gemm_rows(s, cm));
  s.ops[0] = gemm_op(8, 512, 128);
  CHECK(sim::has_unmeasured_gemm_rows(s, cm));
  // A vocabulary slice of a layer GEMM's shape: each read off its own curve (qkv's times hold
  // its rotary kernel and KV-cache write, the LM head's do not).
  sim::Profile clash;
  clash.tp = 2;
  clash.gemm.push_back({"gate_up", 64, 512, 128, {100, 100, 100, 1}, ""});
  clash.gemm.push_back({"gate_up", 128, 512, 128, {200, 200, 200, 1}, ""});
  clash.gemm.push_back({"lm_head", 64, 512, 128, {70, 70, 70, 1}, ""});
  clash.gemm.push_back({"lm_head", 128, 512, 128, {90, 90, 90, 1}, ""});
  const sim::ProfileCostModel both(clash, hw, 2);
  sim::Op lm = gemm_op(64, 512, 128);
  lm.code = sim::OpCode::LmHead;
  CHECK(both.standalone_ns(lm) == 70000);
  CHECK(both.standalone_ns(gemm_op(64, 512, 128)) == 100000);
  CHECK(both.standalone_ns(gemm_op(128, 512, 128)) == 200000);
  // The GEMM-efficiency fit leaves it out: the same fit without its rows.
  sim::Profile q = p;
  profiler::fit_profile(q);
  sim::Profile r = p;
  r.gemm.resize(2);
  profiler::fit_profile(r);
  CHECK(q.gemm_m_half == r.gemm_m_half);
}

TEST_CASE("sweep: the GPU sweep measures the comm victim at three lengths and beside three kinds") {
  const auto m = test::toy_model();
  const sim::ShardDims d = tiny_shard();
  profiler::SweepOptions o;
  o.max_tokens = 256;
  o.quick = true;
  o.comm_workers = profiler::comm_workers("cuda");
  o.comm_lengths = profiler::comm_lengths("cuda");
  o.comm_beside_more = profiler::comm_beside_more("cuda");
  std::set<std::string> keys;
  for (const auto& it : profiler::make_sweep(m, d, 2, o)) {
    if (it.kind == profiler::ItemKind::CommBesideGemm) {
      keys.insert(it.key);
      CHECK(it.elements > 0);
      if (it.beside == "attention") CHECK((it.q_tokens > 0 && it.prefix == it.q_tokens));
      if (it.beside == "rowwise") CHECK((it.m > 0 && it.n == d.hidden));
    }
  }
  for (const char* k :
       {"interference/comm_beside_gemm/p16", "interference/comm_beside_gemm/p16/x8",
        "interference/comm_beside_gemm/p16/x64", "interference/comm_beside_attention/p16/x1",
        "interference/comm_beside_attention/p16/x8", "interference/comm_beside_rowwise/p16/x1",
        "interference/comm_beside_rowwise/p16/x8"}) {
    CHECK_MESSAGE(keys.count(k) == 1, k);
  }
  // A fine grid (--align 4) once put held-back sizes on the grid: keys must stay unique.
  o.align = 4;
  o.max_tokens = 64;
  o.accuracy = true;
  std::set<std::string> all;
  for (const auto& it : profiler::make_sweep(m, d, 2, o)) {
    CHECK_MESSAGE(all.insert(it.key).second, it.key);
  }
  // The CPU sweep keeps one length beside the GEMM.
  CHECK(profiler::comm_lengths("cpu") == std::vector<std::int64_t>{1});
  CHECK(profiler::comm_beside_more("cpu").empty());
}

TEST_CASE(
    "sweep: GEMMs at every multiple of --gemm-step, the other tables on the grid, decode rows") {
  sim::ModelConfig m;
  const sim::ShardDims d = tiny_shard();
  profiler::SweepOptions o;
  o.max_tokens = 1024;
  o.align = 64;
  o.accuracy = true;
  auto rows_of = [&](profiler::ItemKind kind, const std::string& name, bool held) {
    std::set<std::int64_t> r;
    for (const auto& it : profiler::make_sweep(m, d, 2, o)) {
      if (it.kind == kind && it.name == name && it.held_back == held) r.insert(it.m);
    }
    return r;
  };
  const auto grid_gemm = rows_of(profiler::ItemKind::Gemm, "down", false);
  CHECK(grid_gemm.count(640) == 0);  // 10 x 64: between the grid's 512 and 768
  o.gemm_step = 64;
  o.gemm_dense_to = 768;
  const auto dense = rows_of(profiler::ItemKind::Gemm, "down", false);
  for (std::int64_t t = 64; t <= 768; t += 64) CHECK_MESSAGE(dense.count(t) == 1, t);
  CHECK(dense.count(1024) == 1);  // the grid beyond gemm_dense_to
  CHECK(dense.count(832) == 0);
  const auto rows = profiler::gemm_rows(o);
  CHECK(dense == std::set<std::int64_t>(rows.begin(), rows.end()));
  // Held-back GEMM sizes stay off the measured rows; norms keep the grid.
  for (auto t : rows_of(profiler::ItemKind::Gemm, "down", true)) CHECK(dense.count(t) == 0);
  CHECK(rows_of(profiler::ItemKind::Rowwise, "rmsnorm", false) == grid_gemm);
  // A step of 1 puts every held-back size up to gemm_dense_to on the measured rows: those
  // are left out of the held-back set, the ones beyond it stay.
  o.gemm_step = 1;
  const auto held = rows_of(profiler::ItemKind::Gemm, "down", true);
  REQUIRE_FALSE(held.empty());
  for (auto t : held) CHECK(t > 768);
  CHECK(rows_of(profiler::ItemKind::Rowwise, "rmsnorm", true).size() > held.size());
  // Decode rows below the grid: none unless asked; then every GEMM and row-wise op is measured
  // at them (GEMMs back on the grid alone, no --gemm-step).
  o.gemm_step = 0;
  auto below_grid = [&](profiler::ItemKind kind, const std::string& name) {
    std::set<std::int64_t> r;
    for (auto t : rows_of(kind, name, false))
      if (t < o.align) r.insert(t);
    return r;
  };
  CHECK(below_grid(profiler::ItemKind::Gemm, "down").empty());
  CHECK(below_grid(profiler::ItemKind::Rowwise, "rmsnorm").empty());
  o.decode_rows = {8, 1, 32, 8};  // unsorted, repeated: still one item per row
  const std::set<std::int64_t> decode{1, 8, 32};
  for (const char* g : {"qkv", "o_proj", "gate_up", "down"})
    CHECK(below_grid(profiler::ItemKind::Gemm, g) == decode);
  for (const char* r : {"rmsnorm", "silu_mul", "residual_add", sim::kAddNormName})
    CHECK(below_grid(profiler::ItemKind::Rowwise, r) == decode);
  CHECK(profiler::gemm_rows(o).front() == 1);
  // Keys stay unique with the dense rows and the decode rows.
  std::set<std::string> all;
  for (const auto& it : profiler::make_sweep(m, d, 2, o)) {
    CHECK_MESSAGE(all.insert(it.key).second, it.key);
  }
}

TEST_CASE("fits: alpha-beta of the all-reduce, GEMM efficiency against M") {
  sim::Profile p;
  for (std::int64_t b : {1000, 2000, 4000, 8000}) {  // t = 5 + 0.01 b exactly
    p.allreduce.push_back({b / 4, 2, b, {5 + 0.01 * static_cast<double>(b), 0, 0, 1}});
  }
  // eff(m) = m / (m + 64): time = flops / (rate * eff)
  for (std::int64_t m : {64, 128, 256, 1024}) {
    const double flops = 2.0 * static_cast<double>(m) * 256 * 256;
    const double eff = static_cast<double>(m) / static_cast<double>(m + 64);
    p.gemm.push_back({"x", m, 256, 256, {flops / (1e6 * eff), 0, 0, 1}, ""});
  }
  profiler::fit_profile(p);
  REQUIRE(p.allreduce_fit.size() == 2);
  for (const auto& f : p.allreduce_fit) {
    CHECK(f.alpha_us == doctest::Approx(5.0).epsilon(1e-6));
    CHECK(f.beta_us_per_byte == doctest::Approx(0.01).epsilon(1e-6));
  }
  // The best measured rate is at m = 1024 (eff 0.94), so the fitted m_half is a bit below 64.
  CHECK(p.gemm_m_half > 50);
  CHECK(p.gemm_m_half < 70);
}

TEST_CASE("nccl-tests all_reduce_perf output is imported") {
  const auto pts = profiler::parse_nccl_tests(data + "/all_reduce_perf_sample.txt", 0);
  REQUIRE(pts.size() == 7);
  CHECK(pts[0].bytes == 8);
  CHECK(pts[0].t.median_us == doctest::Approx(42.14));  // out-of-place time
  const auto in_place = profiler::parse_nccl_tests(data + "/all_reduce_perf_sample.txt", 0, true);
  REQUIRE(in_place.size() == 7);
  CHECK(in_place[0].t.median_us == doctest::Approx(40.06));
  CHECK(in_place[1].t.median_us == doctest::Approx(41.90));
  CHECK(pts[0].ranks == 8);  // from "nGpus 8"
  CHECK(pts.back().bytes == 134217728);
  CHECK(pts.back().elements == 134217728 / 2);  // read as bf16 values
  CHECK_THROWS_AS(profiler::parse_nccl_tests(data + "/hf_llama_config.json", 0), InputError);
  // Rows a user must not get silently: wrong results, another collective, impossible numbers.
  std::ifstream in(data + "/all_reduce_perf_sample.txt");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string good = ss.str();
  const std::string row =
      "        8192          2048     float     sum      -1    60.20    0.14    0.24      0";
  REQUIRE(good.find(row) != std::string::npos);
  const std::string scratch_file = (std::filesystem::temp_directory_path() /
                                    ("tpo_nccl_rows_" + std::to_string(::getpid()) + ".txt"))
                                       .string();
  for (const auto& [bad, field] : std::vector<std::pair<std::string, std::string>>{
           {"        8192          2048     float     sum      -1    60.20    0.14    0.24      3",
            "#wrong"},
           {"        8192          2048     float    none      -1    60.20    0.14    0.24      0",
            "redop"},
           {"        8192          2048     float     sum      -1     0.00    0.14    0.24      0",
            "time"},
           {"           0          2048     float     sum      -1    60.20    0.14    0.24      0",
            "size"},
           // Its time edited, its algbw not: the row's columns disagree.
           {"        8192          2048     float     sum      -1     6.02    0.14    0.24      0",
            "algbw"},
           // Consistent columns, but faster than half the fastest smaller message (42.14 us).
           {"        8192          2048     float     sum      -1    20.00    0.41    0.72      0",
            "time"},
           // A second run's row (sizes start again), a line cut off (the row's in-place half
           // follows each), a column too many.
           {"          32             8     float     sum      -1    42.50    0.00    0.00      0",
            "size"},
           {"        8192          2048     float     sum      -1    60.20    0.14", "row"},
           {"        8192          2048     float     sum      -1    60.20    0.14    0.24      0  "
            " 7",
            "row"}}) {
    std::string text = good;
    text.replace(text.find(row), row.size(), bad);
    std::ofstream(scratch_file) << text;
    CHECK_THROWS_WITH_AS(profiler::parse_nccl_tests(scratch_file, 0),
                         doctest::Contains(("field '" + field + "'").c_str()), InputError);
  }
  // nccl-tests before 2.13 (no root column): the check column is the largest relative error.
  const std::string old_format =
      "# nThread 1 nGpus 2 minBytes 8 maxBytes 8192 step: 2(factor) warmup iters: 5 iters: 20\n"
      "#       size         count      type   redop     time   algbw   busbw  error     time   "
      "algbw   busbw  error\n"
      "           8             2     float     sum    12.50    0.00    0.00  0e+00    12.40    "
      "0.00    0.00  0e+00\n"
      "        8192          2048     float     sum    15.10    0.54    0.54  2e-07    15.00    "
      "0.55    0.55  2e-07\n";
  std::ofstream(scratch_file) << old_format;
  const auto old_pts = profiler::parse_nccl_tests(scratch_file, 0);
  REQUIRE(old_pts.size() == 2);
  CHECK(old_pts[1].t.median_us == doctest::Approx(15.10));
  std::string wrong = old_format;
  wrong.replace(wrong.find("2e-07"), 5, "5e-01");
  std::ofstream(scratch_file) << wrong;
  CHECK_THROWS_WITH_AS(profiler::parse_nccl_tests(scratch_file, 0),
                       doctest::Contains("field 'error'"), InputError);
  // Logs labelled by their launcher (srun --label, mpirun --tag-output) read as the bare run.
  for (const std::string label : {"0: ", "[1,0]<stdout>:"}) {
    std::istringstream lines(good);
    std::string labelled;
    for (std::string l; std::getline(lines, l);) labelled += label + l + "\n";
    std::ofstream(scratch_file) << labelled;
    const auto lp = profiler::parse_nccl_tests(scratch_file, 0, true);
    REQUIRE(lp.size() == in_place.size());
    CHECK(lp.back().t.median_us == in_place.back().t.median_us);
    CHECK(lp[0].ranks == 8);
  }
  // Slow warm-up rows first (a run started at 32 B, whose first row is NVIDIA's 68 us outlier):
  // the real rows after them are read, not refused as impossibly fast.
  const std::string head =
      "# nThread 1 nGpus 8 minBytes 32 maxBytes 512 step: 2(factor) warmup iters: 5 iters: 20\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong     "
      "time   algbw   busbw #wrong\n";
  std::ofstream(scratch_file)
      << head
      << "          32             8     float     sum      -1    68.14    0.00    0.00      0    "
         "13.52    0.00    0.00      0\n"
         "          64            16     float     sum      -1    14.92    0.00    0.01      0    "
         "14.72    0.00    0.01      0\n"
         "         128            32     float     sum      -1    15.87    0.01    0.01      0    "
         "15.79    0.01    0.01      0\n"
         "         256            64     float     sum      -1    16.10    0.02    0.03      0    "
         "15.77    0.02    0.03      0\n";
  REQUIRE(profiler::parse_nccl_tests(scratch_file, 0).size() == 4);
  // Two slow rows first: still read.
  std::ofstream(scratch_file)
      << head
      << "          32             8     float     sum      -1    68.10    0.00    0.00      0    "
         "13.52    0.00    0.00      0\n"
         "          64            16     float     sum      -1    60.30    0.00    0.00      0    "
         "14.72    0.00    0.00      0\n"
         "         128            32     float     sum      -1    20.40    0.01    0.01      0    "
         "15.79    0.01    0.01      0\n"
         "         256            64     float     sum      -1    20.50    0.01    0.02      0    "
         "15.77    0.02    0.03      0\n";
  REQUIRE(profiler::parse_nccl_tests(scratch_file, 0).size() == 4);
  // Two runs in one log (their ranks would add up), and a run that timed the CPU (-C 1).
  {
    std::ifstream f(scratch_file);
    std::stringstream twice;
    twice << f.rdbuf();
    const std::string one = twice.str();
    std::ofstream(scratch_file) << one << one;
    CHECK_THROWS_WITH_AS(profiler::parse_nccl_tests(scratch_file, 0),
                         doctest::Contains("field 'nThread'"), InputError);
    std::string cpu = one;
    const std::string col = "root     time";
    cpu.replace(cpu.find(col), col.size(), "root  cputime");
    std::ofstream(scratch_file) << cpu;
    CHECK_THROWS_WITH_AS(profiler::parse_nccl_tests(scratch_file, 0),
                         doctest::Contains("field 'cputime'"), InputError);
  }
  // Newer layouts read by the header's column names: per-iteration statistics after each
  // half, and a time stamp after the row (-S 1).
  std::ofstream(scratch_file)
      << "# nThread 1 nGpus 2 minBytes 8 maxBytes 8192 step: 2(factor)\n"
         "#       size         count      type   redop    root     time   algbw   busbw #wrong  "
         "i_min  i_max  i_p99  i_cv%     time   algbw   busbw #wrong  i_min  i_max  i_p99  "
         "i_cv%\n"
         "        8192          2048     float     sum      -1    15.10    0.54    0.54      0  "
         "14.0  16.0  15.9  1.2    15.00    0.55    0.55      0  14.1  15.8  15.7  1.1  "
         "2026-12-03 08:00:01\n";
  const auto wide = profiler::parse_nccl_tests(scratch_file, 0, /*in_place=*/true);
  REQUIRE(wide.size() == 1);
  CHECK(wide[0].t.median_us == doctest::Approx(15.00));
  std::remove(scratch_file.c_str());
}

namespace {
// The interference checks' machine: 132 SMs, GEMM blocks of 256 x 256 filling every SM.
tpo::sim::HardwareConfig pair_hardware() {
  auto hw = tpo::test::toy_hardware();
  hw.sms = 132;
  return hw;
}
tpo::sim::ContentionParams pair_params() {
  tpo::sim::ContentionParams c;
  c.enabled = true;
  c.sms = 132;
  c.gemm_cta_m = 256;
  c.gemm_cta_n = 256;
  return c;
}
}  // namespace

TEST_CASE("interference check: a measured pair rebuilt as a schedule, predicted by both models") {
  // A one-wave GEMM (1024 x 1024 tiles of 256 x 256: 16 tiles, filling all 132 SMs) beside
  // the copy on 16 CTAs: it arrives 30 us after the copy and runs its wave on 116 SMs, so
  // twice as long (2 waves). Alone 100 us: a batch of 2 launches, 200 us each beside.
  tpo::sim::Profile p;
  p.model = "toy";
  p.tp = 2;
  p.compute_slowdown_under_comm = 1.2;
  tpo::sim::InterferencePoint x;
  x.victim = "gemm";
  x.beside = "copy";
  x.workers = 16;
  x.shape = "1024x1024x1024";
  x.alone_us = 100;
  x.beside_us = 150;
  p.interference.push_back(x);
  x.shape = "not a shape";  // skipped: nothing to rebuild
  p.interference.push_back(x);
  const auto hw = pair_hardware();
  tpo::sim::ContentionParams c = pair_params();
  const auto rows = tpo::profiler::check_interference(p, hw, c);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].measured_us == 150);
  CHECK(rows[0].contention_us == doctest::Approx(200));
  CHECK(rows[0].fixed_us == doctest::Approx(120));  // the profile's 1.2 beside comm
  // Stream-K with the tiles only: 16 blocks fit on the 116 SMs left, no slowdown.
  c.gemm_fill = false;
  c.stream_k = true;
  CHECK(tpo::profiler::check_interference(p, hw, c)[0].contention_us == doctest::Approx(100));
  // The in-schedule fragment: attention and o_proj (100 us alone in all) from the moment the
  // copy (50 us alone) starts. Fixed factors: 50 us at 1/1.2 of the rate do 41.7 us of the
  // work; the other 58.3 run alone: 108.3 us.
  tpo::sim::InterferencePoint f;
  f.victim = "fragment";
  f.beside = "copy";
  f.workers = 16;
  f.shape = "q128/p128/o128x64x64";
  f.alone_us = 100;
  f.beside_us = 110;
  f.other_us = 50;
  p.interference = {f};
  tpo::sim::AttentionPoint a;
  a.q_heads = 4;
  a.kv_heads = 2;
  a.head_dim = 16;
  p.attention = {a};
  const auto fr = tpo::profiler::check_interference(p, hw, c);
  REQUIRE(fr.size() == 1);
  CHECK(fr[0].label == "fragment beside copy p16 q128/p128/o128x64x64");
  CHECK(fr[0].fixed_us == doctest::Approx(100 + 50 - 50 / 1.2).epsilon(1e-4));
  f.other_us = 0;  // the copy's time alone was not measured: nothing to rebuild
  p.interference = {f};
  CHECK(tpo::profiler::check_interference(p, hw, c).empty());
}

TEST_CASE("interference check: the copy beside a GEMM victim is the profiler's train of copies") {
  // The profiler runs the copy as back-to-back launches, each copying the GEMM's m x n output;
  // the profile's copy beside the GEMM on the same CTAs (m x k per launch, 40 us alone) gives
  // each launch's time: 40 us here (n = k). The one-wave GEMM (16 tiles of 256 x 256 filling
  // 132 SMs; 100 us alone, 2 launches) from 30 us:
  //   copy 1 runs 0-40; GEMM 1 arrives at 30 beside it: 2 waves, half rate, 5 us done by 40;
  //   copy 2 arrives at 40 while GEMM 1 holds every SM: it waits for the wave (95 us), so
  //   GEMM 1 runs alone and ends at 135; copy 2 then runs 135-175 and GEMM 2 beside it at
  //   half rate (20 us done); copy 3 waits for GEMM 2's wave: GEMM 2 ends at 255.
  // Per launch (255 - 30) / 2 = 112.5 us, against 200 us beside one copy that never ends.
  tpo::sim::Profile p;
  p.model = "toy";
  p.tp = 2;
  tpo::sim::InterferencePoint g;
  g.victim = "gemm";
  g.beside = "copy";
  g.workers = 16;
  g.shape = "1024x1024x1024";
  g.alone_us = 100;
  g.beside_us = 110;
  tpo::sim::InterferencePoint cp = g;
  cp.victim = "comm";
  cp.beside = "gemm";
  cp.alone_us = 40;
  cp.beside_us = 140;
  tpo::sim::InterferencePoint longer = cp;  // a longer copy of the series: not the launch's
  longer.alone_us = 320;
  longer.beside_us = 400;
  p.interference = {g, cp, longer};
  const auto hw = pair_hardware();
  tpo::sim::ContentionParams c = pair_params();
  const auto rows = tpo::profiler::check_interference(p, hw, c);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].label == "gemm beside copy p16 1024x1024x1024");
  CHECK(rows[0].contention_us == doctest::Approx(112.5));
  // Another CTA count's copy is not this one's: one long copy again (2 waves throughout).
  p.interference[1].workers = 8;
  p.interference[2].workers = 8;
  CHECK(tpo::profiler::check_interference(p, hw, c)[0].contention_us == doctest::Approx(200));
}

TEST_CASE(
    "profile cost model: a residual add's post-norm priced on the norm's curve, then the add") {
  sim::Profile p = toy_profile();
  p.rowwise.push_back({"rmsnorm", 64, 128, {7, 7, 7, 5}});
  p.rowwise.push_back({"residual_add", 64, 128, {3, 3, 3, 5}});
  const sim::ProfileCostModel cm(p, test::toy_hardware(), 2);
  sim::Op add;
  add.code = sim::OpCode::ResidualAdd;
  add.kind = sim::OpKind::Elementwise;
  sim::set_rowwise_work(add, 64, 128);
  CHECK(cm.standalone_ns(add) == 3000);
  CHECK(cm.origin(add) == std::string("measured"));
  add.post_norm = 1;
  CHECK(cm.standalone_ns(add) == 10000);
  CHECK(cm.origin(add) == std::string("measured"));
}

TEST_CASE(
    "profile cost model: a fused add and norm on its own curve, else the add and the norm's "
    "part") {
  sim::Profile p = toy_profile();
  p.rowwise.push_back({"rmsnorm", 64, 128, {7, 7, 7, 5}});
  p.rowwise.push_back({"residual_add", 64, 128, {3, 3, 3, 5}});
  const auto hw = test::byte_per_ns_hardware();
  sim::Op add;
  add.code = sim::OpCode::ResidualAdd;
  add.kind = sim::OpKind::Elementwise;
  sim::set_rowwise_work(add, 64, 128);
  add.norm_after = 2;
  // A profile without the fused kernel (made before it): the add as measured, and the norm's
  // measured time scaled by what fusing adds to the add in the analytical model against the
  // norm alone.
  const sim::AnalyticalCostModel a(hw, 2);
  sim::Op plain = add, norm = add;
  plain.norm_after = 0;
  norm = sim::fused_norm_op(add);
  sim::set_rowwise_work(norm, 64, 128);
  const double kept = static_cast<double>(a.standalone_ns(add) - a.standalone_ns(plain)) /
                      static_cast<double>(a.standalone_ns(norm));
  CHECK(kept > 0.1);
  CHECK(kept < 0.9);
  const sim::ProfileCostModel old(p, hw, 2);
  CHECK(old.standalone_ns(add) == std::llround(3000 + 7000 * kept));
  CHECK(old.origin(add) == std::string("measured"));
  // Timed fused: its own entry, which a profile file may hold.
  p.rowwise.push_back({sim::kAddNormName, 64, 128, {8, 8, 8, 5}});
  const sim::Profile back = sim::profile_from_json(sim::profile_to_json(p), "p.json");
  const sim::ProfileCostModel timed(back, hw, 2);
  CHECK(timed.standalone_ns(add) == 8000);
  CHECK(timed.origin(add) == std::string("measured"));
  add.norm_after = 0;
  CHECK(timed.standalone_ns(add) == 3000);
  // From two parts, the less measured one's label: the add measured at 64 rows, the norm read
  // off a curve that starts at 128 (extrapolated).
  sim::Profile q = toy_profile();
  q.rowwise.push_back({"rmsnorm", 128, 128, {14, 14, 14, 5}});
  q.rowwise.push_back({"rmsnorm", 256, 128, {28, 28, 28, 5}});
  q.rowwise.push_back({"residual_add", 64, 128, {3, 3, 3, 5}});
  add.norm_after = 1;
  CHECK(sim::ProfileCostModel(q, hw, 2).origin(add) == std::string("extrapolated"));
  add.norm_after = 0;
  add.post_norm = 1;
  CHECK(sim::ProfileCostModel(q, hw, 2).origin(add) == std::string("extrapolated"));
}

TEST_CASE(
    "profile cost model: qkv's rotary kernel added where not timed, taken off where not run") {
  const auto hw = test::byte_per_ns_hardware();
  sim::Profile p = toy_profile();
  p.qkv_kv_store_width = 8;
  p.gemm.push_back({"qkv", 64, 48, 128, {100, 100, 100, 1}, ""});
  sim::Op qkv = gemm_op(64, 48, 128);
  qkv.code = sim::OpCode::Qkv;
  qkv.kv_width = 8;
  sim::Op rotated = qkv;
  rotated.rope_dim = 8;
  rotated.rope_heads = 3;
  const sim::AnalyticalCostModel a(hw, 2);
  const double rope_ns = a.rope_ns(rotated);  // (64 x 3 x 8 x 4 + 64 x 8 x 2) bytes, + 1 us
  CHECK(rope_ns == doctest::Approx(6144 + 1024 + 1000));
  // A profile without the kernel (made before 2026-12-04): added for a graph that runs it.
  CHECK(sim::ProfileCostModel(p, hw, 2).standalone_ns(qkv) == 100000);
  CHECK(sim::ProfileCostModel(p, hw, 2).standalone_ns(rotated) == std::llround(100000 + rope_ns));
  // Timed with it: the measurement alone, and --rope none takes it off.
  p.qkv_rope_dim = 8;
  p.qkv_rope_heads = 3;
  CHECK(sim::ProfileCostModel(p, hw, 2).standalone_ns(rotated) == 100000);
  CHECK(sim::ProfileCostModel(p, hw, 2).standalone_ns(qkv) == std::llround(100000 - rope_ns));
  // Another GEMM's curve is not touched.
  p.gemm.push_back({"o_proj", 64, 32, 64, {50, 50, 50, 1}, ""});
  sim::Op o = gemm_op(64, 32, 64);
  o.code = sim::OpCode::OProj;
  CHECK(sim::ProfileCostModel(p, hw, 2).standalone_ns(o) == 50000);
  // Round trip; half of the pair is refused, naming the field.
  auto j = nlohmann::json::parse(sim::profile_to_json(p).dump());
  const sim::Profile back = sim::profile_from_json(j, "p.json");
  CHECK(back.qkv_rope_dim == 8);
  CHECK(back.qkv_rope_heads == 3);
  j["qkv_rope_heads"] = 0;
  CHECK(test::error_of([&] {
          sim::profile_from_json(j, "p.json");
        }).find("field 'qkv_rope_heads'") != std::string::npos);
  // Qwen3's per-head norms: added where not timed, taken off where timed and not run.
  sim::Op normed = rotated;
  normed.qk_norm = true;
  const double norms_ns = a.qk_norm_ns(normed);  // 64 x 40 values x 4 bytes, + 2 us
  CHECK(norms_ns == doctest::Approx(64 * 40 * 4 + 2000));
  CHECK(sim::ProfileCostModel(p, hw, 2).standalone_ns(normed) == std::llround(100000 + norms_ns));
  p.qkv_qk_norm = true;
  CHECK(sim::ProfileCostModel(p, hw, 2).standalone_ns(normed) == 100000);
  CHECK(sim::ProfileCostModel(p, hw, 2).standalone_ns(rotated) == std::llround(100000 - norms_ns));
  auto k = nlohmann::json::parse(sim::profile_to_json(p).dump());
  CHECK(sim::profile_from_json(k, "p.json").qkv_qk_norm);
  k["qkv_qk_norm"] = 1;
  CHECK(test::error_of([&] {
          sim::profile_from_json(k, "p.json");
        }).find("field 'qkv_qk_norm': must be true or false") != std::string::npos);
}

TEST_CASE("calibrate: the comm kernel's HBM draw per CTA measured from a profile's long copies") {
  sim::Profile p;
  auto copy = [&](std::int64_t ctas, std::int64_t bytes, double us) {
    p.interference.push_back({"comm", "gemm", ctas, "", us, 2 * us});
    p.interference.back().bytes = bytes;
  };
  CHECK(profiler::comm_hbm_from_profile(p, 16) == 0);  // no copy with its bytes
  copy(16, 8'000'000, 100);
  // One copy: its bytes read and written over its time, per CTA: 2 x 8e6 B / 100 us / 16.
  CHECK(profiler::comm_hbm_from_profile(p, 16) == doctest::Approx(10.0));
  // A short copy (L2-resident, faster per byte) and one on other CTAs change nothing; a longer
  // one gives the slope between the two longest: 2 x 56e6 B / 700 us / 16 = 10 GB/s.
  copy(16, 1'000'000, 5);
  copy(8, 64'000'000, 300);
  copy(16, 64'000'000, 800);
  CHECK(profiler::comm_hbm_from_profile(p, 16) == doctest::Approx(10.0));
  // The fixed time of a kernel cancels in the slope: 20 us more on each.
  for (auto& x : p.interference) x.alone_us += 20;
  CHECK(profiler::comm_hbm_from_profile(p, 16) == doctest::Approx(10.0));
  CHECK(profiler::comm_hbm_from_profile(p, 32) == 0);
}
