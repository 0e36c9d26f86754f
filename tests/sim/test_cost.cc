// The analytical cost model's formulas on hand-made hardware where the arithmetic is exact.
#include <doctest/doctest.h>

#include <cmath>
#include <tuple>

#include "sim/cost_model.h"
#include "sim/profile.h"
#include "sim/profile_cost.h"
#include "sim/strategy.h"
#include "toy.h"

using namespace tpo::sim;

TEST_CASE("GEMM time follows wave quantization of 128x128 tiles over the SMs") {
  // 2 SMs at 1 FLOP/ns each, efficiency 1: a 128x128x1 tile takes 2*128*128 = 32768 ns.
  const AnalyticalCostModel cm(tpo::test::toy_hardware(), 2);
  CHECK(cm.gemm_ns(128, 128, 1, 0) == doctest::Approx(32768));
  CHECK(cm.gemm_ns(256, 128, 1, 0) == doctest::Approx(32768));  // 2 tiles, 1 wave
  CHECK(cm.gemm_ns(257, 128, 1, 0) == doctest::Approx(65536));  // 3 tiles, 2 waves
  CHECK(cm.gemm_ns(1, 1, 1, 0) == doctest::Approx(32768));      // a partial tile costs a tile
}

TEST_CASE("few tiles: K is split over idle SMs, and a decode GEMM is bound by its bytes") {
  auto hw = tpo::test::toy_hardware();
  hw.sms = 8;
  const AnalyticalCostModel cm(hw, 2);
  // One 128x128 tile, K = 1024: 4 splits of 256 over the 8 SMs, one wave of 2*128*128*256.
  CHECK(cm.gemm_ns(1, 128, 1024, 0) == doctest::Approx(2.0 * 128 * 128 * 256 / (0.002e3 / 8)));
  // Llama-3-70B decode qkv on an H100 (m = 1, n = 1280, k = 8192): moving its 21 MB of
  // weights at 3.35 TB/s x 0.83 takes ~7.6 us, and that is what bounds it.
  HardwareConfig h100 = hw;
  h100.sms = 132;
  h100.bf16_dense_tflops = 989.4;
  h100.gemm_max_efficiency = 0.79;
  h100.gemm_k_half = 128;
  h100.memory_bandwidth_gbps = 3350;
  h100.memory_efficiency = 0.83;
  const AnalyticalCostModel h(h100, 8);
  const double bytes = 2.0 * (8192.0 + 8192.0 * 1280 + 1280);
  CHECK(h.gemm_ns(1, 1280, 8192, bytes) == doctest::Approx(bytes / (3350 * 0.83)));
}

TEST_CASE("GEMM efficiency falls for small K, and memory bounds thin GEMMs") {
  auto hw = tpo::test::toy_hardware();
  hw.gemm_k_half = 64;
  hw.memory_bandwidth_gbps = 1;  // 1 byte/ns
  const AnalyticalCostModel cm(hw, 2);
  // K = 64: efficiency 64/(64+64) = 0.5 -> 2 * 128*128*64 / 0.5 = 4,194,304 ns.
  CHECK(cm.gemm_ns(128, 128, 64, 0) == doctest::Approx(4194304));
  CHECK(cm.gemm_ns(128, 128, 64, 1e7) == doctest::Approx(1e7));
}

TEST_CASE("GEMM: the fastest of the library's tile shapes, and stream-K spreads a partial wave") {
  auto hw = tpo::test::toy_hardware();  // 2 SMs, 1 FLOP/ns each
  // 384 x 128: 128x128 tiles -> 3 tiles, 2 waves of 32768 = 65536. A 64x128 tile at 0.75
  // efficiency: 6 tiles, 3 waves of 2*64*128/0.75 = 21845.3 -> 65536 as well; a 128x64 tile
  // at 0.9: 6 tiles, 3 waves of 16384/0.9 -> 54613.3, the fastest.
  hw.gemm_tiles = {{128, 128, 1.0}, {64, 128, 0.75}, {128, 64, 0.9}};
  const AnalyticalCostModel cm(hw, 2);
  CHECK(cm.gemm_ns(384, 128, 1, 0) == doctest::Approx(3 * 16384 / 0.9));
  // Stream-K: 3 tiles of 128x128 on 2 SMs are 1.5 waves, not 2.
  hw.gemm_tiles = {{128, 128, 1.0}};
  hw.gemm_stream_k = true;
  const AnalyticalCostModel sk(hw, 2);
  CHECK(sk.gemm_ns(384, 128, 1, 0) == doctest::Approx(1.5 * 32768));
  CHECK(sk.gemm_ns(128, 128, 1, 0) == doctest::Approx(32768));  // under one wave: a whole one
}

TEST_CASE(
    "GEMM: a split-K term is charged only to tiles that split K, and the tile choice sees it") {
  auto hw = tpo::test::toy_hardware();  // 2 SMs
  // 128 x 256 x 512: a 128x256 tile is one tile on 2 SMs, so it splits K in two; 128x128 tiles
  // are two, one per SM, no split. At efficiency 1.0 against 0.9 the splitting tile is faster.
  hw.gemm_tiles = {{128, 256, 1.0}, {128, 128, 0.9}};
  const AnalyticalCostModel plain(hw, 2);
  const double split = plain.gemm_ns(128, 256, 512, 0);
  hw.gemm_tiles = {{128, 128, 0.9}};
  const double whole = AnalyticalCostModel(hw, 2).gemm_ns(128, 256, 512, 0);
  REQUIRE(split < whole);
  hw.gemm_tiles = {{128, 256, 1.0}, {128, 128, 0.9}};
  hw.gemm_split_k_us = 0.001;  // 1 ns: the splitting tile still wins, 1 ns slower
  CHECK(AnalyticalCostModel(hw, 2).gemm_ns(128, 256, 512, 0) == doctest::Approx(split + 1));
  hw.gemm_split_k_us = 1e4;  // 10 ms: the library would pick the tile that does not split
  CHECK(AnalyticalCostModel(hw, 2).gemm_ns(128, 256, 512, 0) == doctest::Approx(whole));
  // K too short to split (under two 256-deep parts): no term, even for a tile with fewer tiles
  // than SMs (the only tile here).
  hw.gemm_tiles = {{128, 256, 1.0}};
  const double unsplit = AnalyticalCostModel(hw, 2).gemm_ns(128, 256, 256, 0);
  hw.gemm_split_k_us = 0;
  CHECK(unsplit == doctest::Approx(AnalyticalCostModel(hw, 2).gemm_ns(128, 256, 256, 0)));
  // A memory-bound splitting GEMM pays the term on top of its bytes' time.
  hw.gemm_split_k_us = 1e3;      // 1e6 ns, 0.1% of the bytes' 1e9 ns
  hw.memory_bandwidth_gbps = 1;  // 1 byte/ns
  CHECK(AnalyticalCostModel(hw, 2).gemm_ns(128, 256, 512, 1e9) == doctest::Approx(1e9 + 1e6));
}

TEST_CASE("memory-bound ops: bytes that fit the L2 share at L2 speed, and too few norm rows") {
  auto hw = tpo::test::toy_hardware();
  hw.memory_bandwidth_gbps = 1;  // 1 byte/ns
  hw.l2_resident_mib = 1;
  hw.l2_gbps = 4;
  hw.norm_blocks_per_sm = 2;  // 2 SMs x 2 = 4 rows fill the GPU
  hw.kernel_overhead_us = 1;
  hw.gemm_overhead_us = 5;
  const AnalyticalCostModel cm(hw, 2);
  Op add;
  add.code = OpCode::ResidualAdd;
  add.kind = OpKind::Elementwise;
  add.m = 1;
  add.bytes = 1048576;  // fits: 1 MiB at 4 bytes/ns
  CHECK(cm.standalone_ns(add) == 1048576 / 4 + 1000);
  add.bytes = 2097152;  // does not: HBM
  CHECK(cm.standalone_ns(add) == 2097152 + 1000);
  Op norm;
  norm.code = OpCode::AttnNorm;
  norm.kind = OpKind::Norm;
  norm.m = 1;  // a quarter of the GPU's row slots: a quarter of the bandwidth
  norm.bytes = 4194304;
  CHECK(cm.standalone_ns(norm) == 4 * 4194304 + 1000);
  norm.m = 8;
  CHECK(cm.standalone_ns(norm) == 4194304 + 1000);
  // With l2_in_place_only only the in-place residual add is served from L2.
  hw.l2_in_place_only = true;
  const AnalyticalCostModel in_place(hw, 2);
  norm.bytes = 1048576;
  CHECK(cm.standalone_ns(norm) == 1048576 / 4 + 1000);
  CHECK(in_place.standalone_ns(norm) == 1048576 + 1000);
  add.bytes = 1048576;
  CHECK(in_place.standalone_ns(add) == 1048576 / 4 + 1000);
  // Too few rows slow only the rows' own bytes, not the weight vector every row shares: one row
  // of 1024 columns (4096 bytes of its own at a quarter of the bandwidth, 2048 bytes of weights)
  // takes no longer than a full wave of four rows (the old rule charged one row 24576 ns).
  Op one;
  one.code = OpCode::AttnNorm;
  one.kind = OpKind::Norm;
  one.m = 1;
  one.n = 1024;
  one.bytes = 2.0 * (2.0 * 1024 + 1024);
  CHECK(in_place.standalone_ns(one) == 4 * 4096 + 2048 + 1000);
  Op wave = one;
  wave.m = 4;
  wave.bytes = 2.0 * (2.0 * 4 * 1024 + 1024);
  CHECK(in_place.standalone_ns(wave) == 8192 * 2 + 2048 + 1000);
  CHECK(in_place.standalone_ns(one) <= in_place.standalone_ns(wave));
  Op g;
  g.code = OpCode::Qkv;
  g.kind = OpKind::Gemm;
  g.m = g.n = 128;
  g.k = 1;
  CHECK(cm.standalone_ns(g) == 32768 + 5000);  // a GEMM's own overhead
}

TEST_CASE("all-reduce: latency + 2(n-1)/n bytes / busbw, hierarchical across nodes") {
  auto hw = tpo::test::toy_hardware();
  hw.intra = LinkConfig{"nvlink", 2.0, 100.0, {}};  // 2 us, 100 GB/s = 100 bytes/ns
  hw.gpus_per_node = 4;
  hw.inter = LinkConfig{"infiniband", 10.0, 25.0, {}};
  const AnalyticalCostModel cm(hw, 4);
  // 4 ranks, 1 MB: 2000 + 1e6 * 1.5 / 100 = 17,000 ns.
  CHECK(cm.allreduce_ns({CollectiveKind::AllReduce, 1000000, 4}) == doctest::Approx(17000));
  CHECK(cm.allreduce_ns({CollectiveKind::AllReduce, 1000000, 1}) == 0);
  // 8 ranks on 2 nodes of 4: intra part as above (17,000) + inter: 10,000 + (1e6/4) * 2(2-1)/2
  // / 25 = 10,000 + 10,000.
  CHECK(cm.allreduce_ns({CollectiveKind::AllReduce, 1000000, 8}) == doctest::Approx(37000));
}

TEST_CASE("all-reduce from a published table: read between sizes, only at its rank count") {
  auto hw = tpo::test::toy_hardware();
  hw.intra = LinkConfig{"nvlink", 2.0, 100.0, {}};
  hw.gpus_per_node = 4;
  hw.inter = LinkConfig{"infiniband", 10.0, 25.0, {}};
  hw.kernel_overhead_us = 3;
  hw.intra.tables = {{4, {{1000, 10.0}, {100000, 40.0}}}};  // (bytes, us) on 4 ranks
  const AnalyticalCostModel cm(hw, 4);
  // At a point, its time; below the first, the first's (latency-bound).
  CHECK(cm.allreduce_ns({CollectiveKind::AllReduce, 1000, 4}) == doctest::Approx(10000));
  CHECK(cm.allreduce_ns({CollectiveKind::AllReduce, 8, 4}) == doctest::Approx(10000));
  // Half way in log size (10 kB): half way in log time, sqrt(10 x 40) = 20 us.
  CHECK(cm.allreduce_ns({CollectiveKind::AllReduce, 10000, 4}) == doctest::Approx(20000));
  // Beyond the last: its time + the extra bus bytes at the last step's bandwidth (1.5 x 99,000 B
  // in 30 us more: 4.95 GB/s; above the 3.75 the last point reached, below busbw):
  // 40,000 + 900,000 x 1.5 / 4.95.
  CHECK(cm.allreduce_ns({CollectiveKind::AllReduce, 1000000, 4}) == doctest::Approx(312727.27));
  // Another rank count (2): latency + bandwidth, 2,000 + 1e6 x 1 / 100.
  CHECK(cm.allreduce_ns({CollectiveKind::AllReduce, 1000000, 2}) == doctest::Approx(12000));
  // Across nodes: the table for the 4 ranks inside each node, the network link on top.
  CHECK(cm.allreduce_ns({CollectiveKind::AllReduce, 1000000, 8}) == doctest::Approx(332727.27));
  {
    // A table that reached more than busbw (1.5 x 1e8 B in 1,400 us: 107 GB/s) goes on at what
    // it reached, so twice its largest size costs twice its time, not more (at busbw until
    // 2026-12-05: 1,400 us + 1e8 x 1.5 / 100 = 2,900 us, above two halves' 2,800).
    auto sat = hw;
    sat.intra.tables = {{4, {{1000, 10.0}, {1e8, 1400.0}}}};
    CHECK(AnalyticalCostModel(sat, 4).allreduce_ns({CollectiveKind::AllReduce, 200000000, 4}) ==
          doctest::Approx(2800000));
    // On half the CTAs the collective needs (its bandwidth part twice as long): still twice its
    // largest size's time, not more (the extra time counted whole as bandwidth made it more).
    {
      auto half = sat;
      half.contention.enabled = true;
      half.contention.sms = 132;
      half.contention.comm_ctas_full = 16;
      half.contention.comm_ctas = 8;
      const AnalyticalCostModel m(half, 4);
      const double one = m.allreduce_ns({CollectiveKind::AllReduce, 100000000, 4});
      CHECK(one > 1400000 * 1.9);  // the budget slows it
      CHECK(m.allreduce_ns({CollectiveKind::AllReduce, 200000000, 4}) <= 2 * one * (1 + 1e-9));
    }
    // A last step slower (2.5 GB/s: 1.5 x 100,000 B in 60 us more) than the average the largest
    // size reached (3 GB/s: 1.5 x 200,000 B in 100 us) goes on at that average: 100 us +
    // 200,000 x 1.5 / 3.
    sat.intra.tables = {{4, {{1000, 10.0}, {100000, 40.0}, {200000, 100.0}}}};
    CHECK(AnalyticalCostModel(sat, 4).allreduce_ns({CollectiveKind::AllReduce, 400000, 4}) ==
          doctest::Approx(200000));
    // A table that ends latency-bound (11 us at 100 kB) goes on at busbw, not in proportion to
    // its last time: 11,000 + 900,000 x 1.5 / 100.
    sat.intra.tables = {{4, {{1000, 10.0}, {100000, 11.0}}}};
    CHECK(AnalyticalCostModel(sat, 4).allreduce_ns({CollectiveKind::AllReduce, 1000000, 4}) ==
          doctest::Approx(24500));
  }
  // A published time holds its kernel's start and drain: no per-kernel term on top of it.
  Op ar;
  ar.code = OpCode::AllReduce;
  ar.kind = OpKind::AllReduce;
  ar.bytes = 10000;
  CHECK(hw.allreduce_table(4) != nullptr);
  CHECK(hw.allreduce_table(2) == nullptr);
  CHECK(hw.allreduce_table(8) != nullptr);  // 8 ranks on 2 nodes of 4: the 4-rank table inside
  CHECK(hw.allreduce_table(1) == nullptr);  // no all-reduce
  CHECK(cm.standalone_ns(ar) == 20000);
  const AnalyticalCostModel two(hw, 2);
  CHECK(two.standalone_ns(ar) == 2000 + 100 + 3000);  // latency + bytes/busbw + kernel term
}

TEST_CASE(
    "a CTA budget below comm_ctas_full slows an all-reduce's bandwidth term, not its latency") {
  auto hw = tpo::test::toy_hardware();
  hw.intra = LinkConfig{"nvlink", 2.0, 100.0, {}};
  hw.gpus_per_node = 4;
  hw.inter = LinkConfig{"infiniband", 10.0, 25.0, {}};
  AnalyticalCostModel cm(hw, 4);
  tpo::sim::ContentionParams p;
  p.enabled = true;
  p.sms = 132;
  p.comm_ctas_full = 8;
  p.comm_ctas = 2;  // a quarter of the CTAs: the bandwidth term takes 4x
  cm.set_contention(p);
  // 4 ranks, 1 MB: 2,000 + 4 x 15,000.
  CHECK(cm.allreduce_ns({CollectiveKind::AllReduce, 1000000, 4}) == doctest::Approx(62000));
  // Across 2 nodes: (2,000 + 10,000) + 4 x (15,000 + 10,000).
  CHECK(cm.allreduce_ns({CollectiveKind::AllReduce, 1000000, 8}) == doctest::Approx(112000));
  // From a table: the published time + 3 x the part of it that grows with the bytes (the bytes
  // over the segment's own bandwidth: 30 us more for 99,000 B more), not 4 x the whole of it.
  // 10 kB: 20 us, of which 10,000 x 30 / 99,000 = 3.03 us grow with the bytes.
  hw.intra.tables = {{4, {{1000, 10.0}, {100000, 40.0}}}};
  AnalyticalCostModel tab(hw, 4);
  tab.set_contention(p);
  CHECK(tab.allreduce_ns({CollectiveKind::AllReduce, 10000, 4}) ==
        doctest::Approx(20000 + 3 * 10000 * 30000.0 / 99000));
  // Beyond the table: 312,727 ns (above), of which 30.3 us at the last size and all the extra
  // 272.7 us grow with the bytes.
  CHECK(tab.allreduce_ns({CollectiveKind::AllReduce, 1000000, 4}) ==
        doctest::Approx(312727.27 + 3 * (100000 * 30000.0 / 99000 + 272727.27)));
  // Below the table's smallest size the time is all latency: no slower on a small budget.
  CHECK(tab.allreduce_ns({CollectiveKind::AllReduce, 500, 4}) == doctest::Approx(10000));
  {
    // A time that dips between two sizes has no part that grows there: no slower either.
    auto dip = hw;
    dip.intra.tables = {{4, {{1000, 10.0}, {2000, 9.0}, {100000, 40.0}}}};
    AnalyticalCostModel d(dip, 4);
    const double full = d.allreduce_ns({CollectiveKind::AllReduce, 1500, 4});
    d.set_contention(p);
    CHECK(d.allreduce_ns({CollectiveKind::AllReduce, 1500, 4}) == doctest::Approx(full));
  }
  p.comm_ctas = 8;  // a full budget changes nothing
  tab.set_contention(p);
  CHECK(tab.allreduce_ns({CollectiveKind::AllReduce, 10000, 4}) == doctest::Approx(20000));
}

TEST_CASE("all-reduce tables at several rank counts: each read at its own, none at another") {
  auto hw = tpo::test::toy_hardware();
  hw.intra = LinkConfig{"nvlink", 2.0, 100.0, {}};
  hw.gpus_per_node = 4;
  hw.intra.tables = {{2, {{1000, 5.0}, {100000, 20.0}}}, {4, {{1000, 10.0}, {100000, 40.0}}}};
  CHECK(AnalyticalCostModel(hw, 2).allreduce_ns({CollectiveKind::AllReduce, 1000, 2}) ==
        doctest::Approx(5000));
  CHECK(AnalyticalCostModel(hw, 4).allreduce_ns({CollectiveKind::AllReduce, 1000, 4}) ==
        doctest::Approx(10000));
  CHECK(AnalyticalCostModel(hw, 3).allreduce_ns({CollectiveKind::AllReduce, 1000000, 3}) ==
        doctest::Approx(2000 + 1e6 * 4.0 / 3 / 100));  // latency + 2(3-1)/3 bytes / busbw
  CHECK(tpo::sim::allreduce_cost_line(hw, 2).find("the allreduce_table's times for 2 ranks") !=
        std::string::npos);
  CHECK(tpo::sim::allreduce_cost_line(hw, 3).find(
            "its allreduce_table is for 2, 4 ranks and does not apply at TP 3") !=
        std::string::npos);
}

TEST_CASE(
    "the GPU-side kernel overhead is added once per kernel, the host launch cost never, and "
    "slowdowns come from the hardware file") {
  auto hw = tpo::test::toy_hardware();
  hw.kernel_overhead_us = 3;
  hw.launch_overhead_us = 7;  // host-side: charged by the eager execution mode, not here
  hw.compute_under_comm = {1.1, 1.2, 1.3};
  hw.comm_under_compute = {1.4, 1.5, 1.6};
  const AnalyticalCostModel cm(hw, 2);
  Op norm;
  norm.code = OpCode::AttnNorm;
  norm.kind = OpKind::Norm;
  norm.bytes = 0;
  CHECK(cm.standalone_ns(norm) == 3000);
  CHECK(cm.overlap_slowdown(norm, OpKind::AllReduce) == doctest::Approx(1.3));
  Op ar;
  ar.code = OpCode::AllReduce;
  ar.kind = OpKind::AllReduce;
  CHECK(cm.overlap_slowdown(ar, OpKind::Gemm) == doctest::Approx(1.4));
  CHECK(cm.overlap_slowdown(ar, OpKind::Attention) == doctest::Approx(1.5));
  CHECK(cm.overlap_slowdown(ar, OpKind::Norm) == doctest::Approx(1.6));
}

TEST_CASE("attention: causal FLOPs at the attention efficiency, fewer tiles than SMs idle SMs") {
  auto hw = tpo::test::toy_hardware();
  hw.sms = 4;
  hw.bf16_dense_tflops = 0.004;  // 4 FLOP/ns
  const AnalyticalCostModel cm(hw, 2);
  Op a;
  a.code = OpCode::Attention;
  a.kind = OpKind::Attention;
  a.seq_begin = 0;
  a.seq_end = 128;
  a.req_begin = 0;
  a.req_end = 1;
  a.n = 2;  // 2 heads -> 2 tiles on 4 SMs: half the GPU idle
  a.flops = 4000;
  CHECK(cm.attention_ns(a) == doctest::Approx(2000));
  a.n = 4;
  CHECK(cm.attention_ns(a) == doctest::Approx(1000));
}

TEST_CASE("attention: one wave lasts as long as its busiest block (a causal chunk's last)") {
  // The busiest 128-query block, against a sum over its rows of the keys each sees.
  auto rows_pairs = [](std::int64_t lo, std::int64_t hi, std::int64_t prefix, std::int64_t w) {
    double n = 0;
    for (std::int64_t i = lo; i < hi; ++i) {
      const std::int64_t seen = prefix + i + 1;
      n += static_cast<double>(w > 0 ? std::min(seen, w) : seen);
    }
    return n;
  };
  Op a;
  a.code = OpCode::Attention;
  a.kind = OpKind::Attention;
  a.req_begin = 0;
  a.req_end = 1;
  for (const auto& [q, prefix, window] :
       {std::tuple<std::int64_t, std::int64_t, std::int64_t>{256, 0, 0},
        {200, 0, 0},
        {256, 1000, 0},
        {100, 0, 0},
        {300, 500, 200}}) {
    CAPTURE(q);
    CAPTURE(prefix);
    CAPTURE(window);
    a.seq_begin = prefix;
    a.seq_end = prefix + q;
    a.window = window;
    const std::int64_t blocks = (q + 127) / 128;
    double want = 0;
    for (std::int64_t b = 0; b < blocks; ++b) {
      want = std::max(want, rows_pairs(b * 128, std::min(q, b * 128 + 128), prefix, window));
    }
    CHECK(attention_busiest_block_pairs(a, 128) == doctest::Approx(want));
  }
  // 1 head of 64 values, 256 queries, no prefix: 2 blocks on 4 SMs, one wave. The last block
  // holds 24640 of the 32896 pairs: it sets the time, on one SM's share of the rate.
  auto hw = tpo::test::toy_hardware();
  hw.sms = 4;
  hw.bf16_dense_tflops = 0.004;  // 4 FLOP/ns, 1 per SM
  const AnalyticalCostModel cm(hw, 2);
  set_attention_work(a, 1, 256, 0, 1, 1, 64);
  a.seq_begin = 0;
  a.seq_end = 256;
  CHECK(cm.attention_ns(a) == doctest::Approx(4.0 * 64 * 24640 / 1.0));
  // Many blocks (8 heads: 16 blocks, 4 waves): the average again.
  set_attention_work(a, 1, 256, 0, 8, 1, 64);
  CHECK(cm.attention_ns(a) == doctest::Approx(a.flops / 4.0));
}

TEST_CASE("attention: a chunk after a prefix is not priced above the whole prompt uncut") {
  // Gemma-2-9B's shard at TP 8 on an H100 (2 query heads of 256: fewer blocks than SMs). The
  // model spread a launch's work evenly over its blocks until 2026-12-04, which priced the
  // uncut prompt at its average block and 2048 tokens after 2048 cached (three quarters of
  // the FLOPs) at 1.44x it.
  HardwareConfig h = tpo::test::toy_hardware();
  h.sms = 132;
  h.bf16_dense_tflops = 989.4;
  h.attention_max_efficiency = 0.584;
  h.attention_kv_half = 192;
  const AnalyticalCostModel cm(h, 8);
  Op whole, chunk;
  whole.code = chunk.code = OpCode::Attention;
  whole.kind = chunk.kind = OpKind::Attention;
  set_attention_work(whole, 1, 4096, 0, 2, 1, 256);
  whole.seq_begin = 0;
  whole.seq_end = 4096;
  whole.req_end = chunk.req_end = 1;
  set_attention_work(chunk, 1, 2048, 2048, 2, 1, 256);
  chunk.seq_begin = 2048;
  chunk.seq_end = 4096;
  CHECK(chunk.flops < whole.flops);
  CHECK(cm.attention_ns(chunk) <= cm.attention_ns(whole));
}

TEST_CASE("attention: the efficiency rises with the keys each query block streams") {
  auto hw = tpo::test::toy_hardware();
  hw.sms = 4;
  hw.bf16_dense_tflops = 0.004;  // 4 FLOP/ns
  Op a;
  a.code = OpCode::Attention;
  a.kind = OpKind::Attention;
  a.req_begin = 0;
  a.req_end = 1;
  a.n = 4;  // 4 tiles on 4 SMs
  a.flops = 4000;
  a.seq_begin = 0;
  a.seq_end = 127;  // causal, no prefix: 64 keys per query on average
  const double flat = AnalyticalCostModel(hw, 2).attention_ns(a);
  hw.attention_kv_half = 64;
  const AnalyticalCostModel cm(hw, 2);
  CHECK(cm.attention_ns(a) == doctest::Approx(2 * flat));  // kv = half: half the efficiency
  a.seq_begin = 4096 - 127;                                // after a prefix: 3969 + 64 keys
  a.seq_end = 4096;
  CHECK(cm.attention_ns(a) == doctest::Approx(flat * (4033.0 + 64) / 4033.0));
}

TEST_CASE("qkv: the KV-cache write after its GEMM is one kernel moving K and V of its rows") {
  auto hw = tpo::test::byte_per_ns_hardware();
  hw.gemm_overhead_us = 5;
  const AnalyticalCostModel cm(hw, 2);
  Op qkv = tpo::test::qkv_op(4, 48, 64, 0);
  const std::int64_t gemm_alone = cm.standalone_ns(qkv);
  qkv.kv_width = 8;
  // K and V: 4 rows x 8 values x 2 bytes each, read and written: 256 bytes, 256 ns, + 1 us.
  CHECK(kv_store_bytes(qkv) == 256);
  CHECK(cm.kv_store_ns(qkv) == doctest::Approx(256 + 1000));
  CHECK(cm.standalone_ns(qkv) == gemm_alone + 256 + 1000);
  Op o = qkv;  // no other op writes the cache
  o.code = OpCode::OProj;
  CHECK(kv_store_bytes(o) == 0);
  CHECK(cm.standalone_ns(o) == gemm_alone);
  // The graph gives every qkv op the shard's KV width (toy: 2 KV heads of 16 at TP 2: 16),
  // and no other op one.
  const Schedule s = build_schedule(tpo::test::toy_workload(64, 2), {StrategyKind::None});
  int qkvs = 0;
  for (const Op& op : s.ops) {
    if (op.code == OpCode::Qkv) {
      ++qkvs;
      CHECK(op.kv_width == 16);
    } else {
      CHECK(op.kv_width == 0);
    }
  }
  CHECK(qkvs == 2);
}

TEST_CASE("qkv: the rotary kernel between its GEMM and its KV-cache write, and --rope none") {
  const AnalyticalCostModel cm(tpo::test::byte_per_ns_hardware(), 2);
  Op qkv = tpo::test::qkv_op(4, 64, 64, 16);
  const std::int64_t without = cm.standalone_ns(qkv);
  CHECK(rope_bytes(qkv) == 0);
  CHECK(cm.rope_ns(qkv) == 0);
  qkv.rope_dim = 16;
  qkv.rope_heads = 3;
  // 4 rows x 3 heads x 16 values read and written in bf16 (768 bytes) and each row's 16 cosine
  // and sine values (128 bytes): 896 ns at 1 byte/ns, + 1 us for the kernel.
  CHECK(rope_bytes(qkv) == 896);
  CHECK(cm.rope_ns(qkv) == doctest::Approx(896 + 1000));
  CHECK(cm.standalone_ns(qkv) == without + 896 + 1000);
  Op o = qkv;  // only qkv runs one
  o.code = OpCode::OProj;
  CHECK(rope_bytes(o) == 0);
  // The graph: every qkv op rotates the shard's query and K heads (toy at TP 2: 2 + 1 heads of
  // 16), no other op; --rope none, none; a model read without rotary dims, none.
  auto w = tpo::test::toy_workload(64, 2);
  for (const bool rope : {true, false}) {
    w.rope = rope;
    const Schedule s = build_schedule(w, {StrategyKind::None});
    for (const Op& op : s.ops) {
      const bool rotated = rope && op.code == OpCode::Qkv;
      CHECK(op.rope_dim == (rotated ? 16 : 0));
      CHECK(op.rope_heads == (rotated ? 3 : 0));
    }
  }
  w.rope = true;
  w.model.rotary_dim = 0;
  for (const Op& op : build_schedule(w, {StrategyKind::None}).ops) CHECK(op.rope_dim == 0);
}

TEST_CASE("residual add: Gemma's post-norm first, a norm kernel of its own, in the graph") {
  const AnalyticalCostModel cm(tpo::test::byte_per_ns_hardware(), 2);
  Op add;
  add.code = OpCode::ResidualAdd;
  add.kind = OpKind::Elementwise;
  set_rowwise_work(add, 8, 64);
  const std::int64_t alone = cm.standalone_ns(add);
  CHECK(alone == 3 * 2 * 8 * 64 + 1000);  // residual and output read, residual written
  add.post_norm = 2;
  const Op norm = post_norm_op(add);
  CHECK(norm.kind == OpKind::Norm);
  CHECK(norm.post_norm == 0);
  // The norm: rows read and written (2048 bytes) and its weight (128 bytes), + 1 us.
  CHECK(cm.standalone_ns(norm) == 2048 + 128 + 1000);
  CHECK(cm.standalone_ns(add) == alone + 2048 + 128 + 1000);
  // The graph: every residual add of a model with post-norms, the attention's weight (1) or the
  // MLP's (2); a parallel block's add the attention's; none without them.
  auto w = tpo::test::toy_workload(64, 2);
  for (const bool post : {true, false}) {
    w.model.post_norms = post;
    for (auto kind : {StrategyKind::None, StrategyKind::Ladder, StrategyKind::ParallelBlock}) {
      int adds = 0, mlp = 0;
      for (const Op& op : build_schedule(w, {kind}).ops) {
        if (op.code != OpCode::ResidualAdd) {
          CHECK(op.post_norm == 0);
          continue;
        }
        ++adds;
        CHECK((op.post_norm > 0) == post);
        mlp += op.post_norm == 2;
      }
      CHECK(adds == (kind == StrategyKind::ParallelBlock ? 2 : 4));
      CHECK(mlp == (post && kind != StrategyKind::ParallelBlock ? 2 : 0));
    }
  }
}

TEST_CASE("residual add with the next norm fused: its write and weight, no read, no kernel") {
  const AnalyticalCostModel cm(tpo::test::byte_per_ns_hardware(), 2);
  Op add;
  add.code = OpCode::ResidualAdd;
  add.kind = OpKind::Elementwise;
  set_rowwise_work(add, 8, 64);
  const std::int64_t alone = cm.standalone_ns(add);
  Op norm;
  norm.code = OpCode::MlpNorm;
  norm.kind = OpKind::Norm;
  set_rowwise_work(norm, 8, 64);
  const std::int64_t apart = alone + cm.standalone_ns(norm);
  add.norm_after = 2;
  const Op kernel = fused_norm_op(add);
  CHECK(kernel.code == OpCode::MlpNorm);
  CHECK(kernel.kind == OpKind::Norm);
  CHECK(kernel.norm_after == 0);
  // The add's bytes, the normalized rows written and the weight read.
  CHECK(kernel.bytes == add.bytes + 1024 + 128);
  add.norm_after = 1;
  CHECK(fused_norm_op(add).code == OpCode::AttnNorm);
  // One kernel: the residual's second read (1024 bytes) and the norm's kernel term (1 us) saved.
  CHECK(cm.standalone_ns(add) == alone + 1024 + 128);
  CHECK(apart - cm.standalone_ns(add) == 1024 + 1000);
  // Gemma: the post-norm, a kernel of its own, then the fused add and norm.
  add.post_norm = 1;
  CHECK(cm.standalone_ns(add) == alone + 1024 + 128 + 2048 + 128 + 1000);
  // The bytes its time covers, as reports give them (the add's own 3 x 1024 alone before
  // 2026-12-05): the fused kernel's and the post-norm's.
  CHECK(hbm_bytes(add) == add.bytes + 1024 + 128 + 2048 + 128);
  add.post_norm = 0;
  CHECK(hbm_bytes(add) == kernel.bytes);
  // One block per row, as a norm: with fewer rows than a wave (4 SMs x 1 block here, 2 rows)
  // all its row bytes are slowed, the add's too; the weight is not.
  auto h = tpo::test::byte_per_ns_hardware();
  h.sms = 4;
  h.norm_blocks_per_sm = 1;
  Op two = add;
  set_rowwise_work(two, 2, 64);
  two.norm_after = 1;
  const double row_bytes = fused_norm_op(two).bytes - 128;
  CHECK(AnalyticalCostModel(h, 2).standalone_ns(two) == std::llround(row_bytes / 0.5 + 128 + 1000));
  // The L2 rule for in-place updates only (h200x8): the add alone is served from L2, the fused
  // kernel, which writes the normalized rows elsewhere, is not.
  h = tpo::test::byte_per_ns_hardware();
  h.l2_resident_mib = 1;
  h.l2_gbps = 1000;
  h.l2_in_place_only = true;
  const AnalyticalCostModel l2(h, 2);
  Op plain = add;
  plain.norm_after = 0;
  CHECK(l2.standalone_ns(plain) == std::llround(add.bytes / 1000 + 1000));
  CHECK(l2.standalone_ns(add) == std::llround(fused_norm_op(add).bytes + 1000));
}

TEST_CASE("an all-reduce that adds and normalizes: its add and norm's bytes, no kernel term") {
  const AnalyticalCostModel cm(tpo::test::byte_per_ns_hardware(), 2);
  Op ar;
  ar.code = OpCode::AllReduce;
  ar.kind = OpKind::AllReduce;
  ar.stream = StreamKind::Comm;
  ar.req_end = 1;
  ar.seq_end = 8;
  set_allreduce_work(ar, 8 * 64);
  const std::int64_t alone = cm.standalone_ns(ar);
  ar.residual_of = 3;
  const Op add = allreduce_add_op(ar);
  CHECK(add.code == OpCode::ResidualAdd);
  CHECK(add.m == 8);
  CHECK(add.n == 64);
  CHECK(add.residual_of == 3);
  CHECK(cm.standalone_ns(ar) == alone + 3 * 2 * 8 * 64);  // the add's bytes at 1 byte/ns
  ar.norm_after = 2;
  CHECK(cm.standalone_ns(ar) == alone + 3 * 2 * 8 * 64 + 1024 + 128);
  // A profile prices the add as the residual add kernel it timed, after its all-reduce.
  tpo::sim::Profile p;
  p.tp = 2;
  p.rowwise.push_back({kAddNormName, 8, 64, {5, 5, 5, 5}});
  const ProfileCostModel pm(p, tpo::test::byte_per_ns_hardware(), 2);
  CHECK(pm.standalone_ns(ar) == alone + 5000);
}

TEST_CASE("qkv: Qwen3's per-head query and key norms, two kernels before the rotary one") {
  const AnalyticalCostModel cm(tpo::test::byte_per_ns_hardware(), 2);
  Op qkv = tpo::test::qkv_op(4, 64, 64, 16);  // 2 query heads, 1 K and 1 V head of 16
  const std::int64_t without = cm.standalone_ns(qkv);
  CHECK(qk_norm_bytes(qkv) == 0);
  qkv.qk_norm = true;
  // The 48 query and K values of each of 4 rows read and written in bf16: 768 bytes, + 2 us.
  CHECK(qk_norm_bytes(qkv) == 768);
  CHECK(cm.qk_norm_ns(qkv) == doctest::Approx(768 + 2000));
  CHECK(cm.standalone_ns(qkv) == without + 768 + 2000);
  // The graph gives it to a model that has the norms, on qkv ops only.
  auto w = tpo::test::toy_workload(64, 2);
  for (const bool norms : {true, false}) {
    w.model.qk_norm = norms;
    for (const Op& op : build_schedule(w, {StrategyKind::None}).ops) {
      CHECK(op.qk_norm == (norms && op.code == OpCode::Qkv));
    }
  }
}

TEST_CASE("the LM head's logits gathered over the ranks: a collective after it, only under TP") {
  auto w = tpo::test::toy_workload(64, 1);  // vocab 100 over TP 2: 50 per rank
  w.embed_head = true;
  w.batch = 3;
  for (const std::int64_t tp : {2, 1}) {
    w.tp = tp;
    const Schedule s = build_schedule(w, {StrategyKind::None});
    std::int32_t head = -1, gathers = 0;
    for (std::size_t i = 0; i < s.ops.size(); ++i) {
      const Op& op = s.ops[i];
      if (op.code == OpCode::LmHead) head = static_cast<std::int32_t>(i);
      if (op.code != OpCode::LogitsGather) continue;
      ++gathers;
      CHECK(op.kind == OpKind::AllReduce);
      CHECK(op.stream == StreamKind::Comm);
      CHECK(op.deps.size() == 1);
      CHECK(op.deps[0] == head);
      // 3 requests x 100 logits in bf16 (600 bytes) gathered: priced as an all-reduce of half.
      CHECK(op.bytes == 300);
    }
    CHECK(head >= 0);
    CHECK(gathers == (tp > 1 ? 1 : 0));
  }
  CHECK(std::string(op_code_name(OpCode::LogitsGather)) == "logits_gather");
  // --vocab replicated (gpt-fast): every rank runs the whole LM head and embedding, with no
  // collective after either.
  w.tp = 2;
  w.vocab_replicated = true;
  CHECK(validate_workload(w).vocab == 100);
  for (const Op& op : build_schedule(w, {StrategyKind::None}).ops) {
    CHECK(op.code != OpCode::LogitsGather);
    CHECK((op.code != OpCode::AllReduce || op.layer >= 0));  // no embedding all-reduce
    if (op.code == OpCode::LmHead) CHECK(op.n == 100);
  }
  w.vocab_replicated = false;
  CHECK(validate_workload(w).vocab == 50);
}

TEST_CASE("a profile's attention beyond its sizes scales with the FLOPs, busiest block or not") {
  // Few SMs, so that the analytical model's busiest-block bound sets every one-wave launch
  // here. The profile's ratio between sizes of one curve resizes the op by its FLOPs only; the
  // bound, which follows the chunk, is left out of that ratio (with it, the ratio went flat and
  // a chunk twice the largest measured one was priced at about the measured time).
  auto hw = tpo::test::toy_hardware();
  hw.sms = 64;
  hw.bf16_dense_tflops = 0.064;
  tpo::sim::Profile p;
  p.tp = 2;
  for (const std::int64_t q : {64, 128}) {
    Op a;
    set_attention_work(a, 1, q, 0, 2, 1, 64);
    p.attention.push_back({1, q, 0, 2, 1, 64, a.flops, {a.flops / 1000.0, 1, 1, 5}});
  }
  const ProfileCostModel pm(p, hw, 2);
  auto at = [&](std::int64_t q) {
    Op a;
    a.code = OpCode::Attention;
    a.kind = OpKind::Attention;
    a.req_end = 1;
    a.seq_begin = 0;
    a.seq_end = q;
    set_attention_work(a, 1, q, 0, 2, 1, 64);
    return static_cast<double>(pm.standalone_ns(a));
  };
  // 512 queries: about 16x the FLOPs of the largest measured chunk (128), so about 16x its
  // time (the analytical model's efficiency changes a little with the keys per block).
  const double r = at(512) / at(128);
  CHECK(r > 10);
  CHECK(r < 20);
}
