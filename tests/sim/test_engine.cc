// The event engine on small hand-built graphs, with exact expected start and end times.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <stdexcept>

#include "sim/contention.h"
#include "sim/engine.h"
#include "sim/error.h"
#include "sim/launch.h"
#include "sim/simulate.h"
#include "sim/workload.h"

using namespace tpo::sim;

namespace {
Op make(OpCode code, std::vector<std::int32_t> deps = {}) {
  Op op;
  op.code = code;
  op.kind = op_code_kind(code);
  op.stream = code == OpCode::AllReduce ? StreamKind::Comm : StreamKind::Compute;
  op.deps = std::move(deps);
  return op;
}
// Two runs of one graph gave the same timeline and statistics, bit for bit.
void check_same(const Timeline& a, const Timeline& b) {
  CHECK(a.start_ns == b.start_ns);
  CHECK(a.end_ns == b.end_ns);
  CHECK(a.total_ns == b.total_ns);
  CHECK(a.hidden_comm_ns == b.hidden_comm_ns);
  CHECK(a.exposed_comm_ns == b.exposed_comm_ns);
  CHECK(a.compute_busy_ns == b.compute_busy_ns);
  CHECK(a.comm_busy_ns == b.comm_busy_ns);
  CHECK(a.overlap_efficiency == b.overlap_efficiency);
}
OpCosts costs(std::vector<std::int64_t> ns, std::vector<double> slow) {
  OpCosts c;
  c.standalone_ns = std::move(ns);
  for (double f : slow) c.slowdown.push_back({f, f, f});
  return c;
}
}  // namespace

TEST_CASE("engine: stream order and cross-stream dependencies, no interference") {
  // compute: G0 (100) -> G1 (50) -> R (10, waits for AR)   comm: AR (80, waits for G0)
  Schedule s;
  s.ops = {make(OpCode::Qkv), make(OpCode::OProj), make(OpCode::AllReduce, {0}),
           make(OpCode::ResidualAdd, {2})};
  Engine e;
  const Timeline& tl = e.run(s, costs({100, 50, 80, 10}, {1, 1, 1, 1}));
  CHECK(tl.start_ns == std::vector<std::int64_t>{0, 100, 100, 180});
  CHECK(tl.end_ns == std::vector<std::int64_t>{100, 150, 180, 190});
  CHECK(tl.total_ns == 190);
  CHECK(tl.compute_busy_ns == 160);
  CHECK(tl.comm_busy_ns == 80);
  CHECK(tl.hidden_comm_ns == 50);  // AR [100,180) overlaps G1 [100,150)
  CHECK(tl.exposed_comm_ns == 30);
  CHECK(tl.overlap_efficiency == doctest::Approx(50.0 / 80.0));
}

TEST_CASE("engine: an op with more successors than the inline lists hold") {
  // G0 (100) feeds five ops: compute G1 (50), G2 (20), R (10, also waits for AR2);
  // comm AR1 (40), AR2 (30). The engine keeps up to three successors inline, so this graph
  // runs on its CSR lists; the times are those of the graph's order either way.
  Schedule s;
  s.ops = {make(OpCode::Qkv),         make(OpCode::AllReduce, {0}),
           make(OpCode::OProj, {0}),  make(OpCode::AllReduce, {0}),
           make(OpCode::GateUp, {0}), make(OpCode::ResidualAdd, {0, 3})};
  Engine e;
  const Timeline& tl = e.run(s, costs({100, 40, 50, 30, 20, 10}, {1, 1, 1, 1, 1, 1}));
  CHECK(tl.start_ns == std::vector<std::int64_t>{0, 100, 100, 140, 150, 170});
  CHECK(tl.end_ns == std::vector<std::int64_t>{100, 140, 150, 170, 170, 180});
  CHECK(tl.total_ns == 180);
  // A graph with short lists loaded next into the same engine runs on its inline lists.
  Schedule t;
  t.ops = {make(OpCode::Qkv), make(OpCode::AllReduce, {0}), make(OpCode::ResidualAdd, {1})};
  const Timeline& tt = e.run(t, costs({100, 40, 10}, {1, 1, 1}));
  CHECK(tt.end_ns == std::vector<std::int64_t>{100, 140, 150});
}

TEST_CASE("engine: two ranks re-rate apart (the multi-rank event loop)") {
  // Rank 0: G (200, x2 beside comm) and AR (100, after nothing); rank 1: G alone (200). The
  // ranks share nothing: rank 0 overlaps for 100 ns at half rate each, rank 1 runs alone.
  Schedule s;
  s.num_ranks = 2;
  s.ops = {make(OpCode::Qkv), make(OpCode::AllReduce), make(OpCode::Qkv)};
  s.ops[2].rank = 1;
  Engine e;
  const Timeline& tl = e.run(s, costs({200, 100, 200}, {2, 2, 2}));
  // Rank 0: both at half speed until AR ends at 200 (100 of work); G has done 100 by then and
  // runs its last 100 alone: 300. Rank 1's G is not slowed by rank 0's comm.
  CHECK(tl.start_ns == std::vector<std::int64_t>{0, 0, 0});
  CHECK(tl.end_ns == std::vector<std::int64_t>{300, 200, 200});
  CHECK(tl.total_ns == 300);
}

TEST_CASE("engine: steady-state skipping on a graph that needs the CSR successor lists") {
  // Eight layers, each: G0 feeding five ops (two all-reduces, three compute ops), the last of
  // which also waits for both all-reduces; the next layer's G0 waits for it. With fixed
  // slowdowns so the streams interfere.
  Schedule s;
  const int layers = 8;
  for (int l = 0; l < layers; ++l) {
    const auto b = static_cast<std::int32_t>(s.ops.size());
    std::vector<Op> ops = {
        make(OpCode::Qkv, l > 0 ? std::vector<std::int32_t>{b - 1} : std::vector<std::int32_t>{}),
        make(OpCode::AllReduce, {b}),
        make(OpCode::OProj, {b}),
        make(OpCode::AllReduce, {b}),
        make(OpCode::GateUp, {b}),
        make(OpCode::ResidualAdd, {b, b + 1, b + 3, b + 4})};
    for (Op& op : ops) {
      op.layer = l;
      s.ops.push_back(op);
    }
  }
  s.num_layers = layers;
  std::vector<std::int64_t> ns;
  std::vector<double> slow;
  for (int l = 0; l < layers; ++l) {
    for (std::int64_t t : {100, 40, 50, 30, 20, 10}) ns.push_back(t);
    for (double f : {1.5, 1.25, 1.5, 1.25, 1.5, 1.5}) slow.push_back(f);
  }
  const OpCosts c = costs(ns, slow);
  Engine full, fast;
  fast.set_skip_steady_state(true);
  const Timeline a = full.run(s, c);
  const Timeline& b = fast.run(s, c);
  CHECK(fast.ops_skipped() > 0);
  CHECK(a.start_ns == b.start_ns);
  CHECK(a.end_ns == b.end_ns);
  CHECK(a.total_ns == b.total_ns);
  CHECK(a.hidden_comm_ns == b.hidden_comm_ns);
  CHECK(full.events_pushed() == fast.events_pushed());
}

TEST_CASE("engine: fluid interference re-rates both ops when the running set changes") {
  // G0 (200) then G1 (1000, x1.25 beside comm); AR (600, x2 beside compute) after G0.
  // At 200 both start: AR at rate 1/2 ends at 200 + 1200 = 1400. G1 has done 1200/1.25 = 960
  // by then; its last 40 run alone: 1440.
  Schedule s;
  s.ops = {make(OpCode::Qkv), make(OpCode::GateUp), make(OpCode::AllReduce, {0})};
  Engine e;
  const Timeline& tl = e.run(s, costs({200, 1000, 600}, {1.25, 1.25, 2.0}));
  CHECK(tl.start_ns == std::vector<std::int64_t>{0, 200, 200});
  CHECK(tl.end_ns == std::vector<std::int64_t>{200, 1440, 1400});
  CHECK(tl.total_ns == 1440);
  CHECK(tl.hidden_comm_ns == 1200);
  CHECK(tl.exposed_comm_ns == 0);
}

TEST_CASE("engine: when one overlapped op ends, the other speeds up from that moment") {
  // Compute C (1000, x1.5) and comm AR (300, x1.5) both start at 0. AR ends at 450; C has
  // done 300 by then, and its remaining 700 run alone: it ends at 1150.
  Schedule s;
  s.ops = {make(OpCode::Down), make(OpCode::AllReduce)};
  Engine e;
  const Timeline& tl = e.run(s, costs({1000, 300}, {1.5, 1.5}));
  CHECK(tl.end_ns == std::vector<std::int64_t>{1150, 450});
}

TEST_CASE("engine: ties keep insertion order, zero-cost ops are fine, runs repeat exactly") {
  Schedule s;
  s.ops = {make(OpCode::Qkv), make(OpCode::AllReduce, {0}), make(OpCode::OProj, {0}),
           make(OpCode::ResidualAdd, {1, 2})};
  const OpCosts c = costs({0, 0, 5, 0}, {1, 1, 1, 1});
  Engine e;
  const Timeline a = e.run(s, c);
  const Timeline b = e.run(s, c);
  CHECK(a.end_ns == std::vector<std::int64_t>{0, 0, 5, 5});
  CHECK(a.end_ns == b.end_ns);
  CHECK(a.start_ns == b.start_ns);
}

TEST_CASE("engine: a dependency cycle or a dependency on a later op of the stream is reported") {
  Schedule s;
  s.ops = {make(OpCode::Qkv, {1}), make(OpCode::OProj)};  // op 0 waits for op 1 behind it
  Engine e;
  CHECK_THROWS_AS(e.run(s, costs({1, 1}, {1, 1})), std::logic_error);
  Schedule bad;
  bad.ops = {make(OpCode::Qkv, {7})};
  CHECK_THROWS_AS(e.run(bad, costs({1}, {1})), std::logic_error);
}

namespace {
// Costs with the contention model on: S = 100 SMs, comm kernels hold 20, HBM 4000 GB/s.
OpCosts contended(std::vector<std::int64_t> ns, std::vector<OpResources> res) {
  OpCosts c = costs(ns, std::vector<double>(ns.size(), 1.0));
  c.resources = std::move(res);
  c.contention.enabled = true;
  c.contention.sms = 100;
  c.contention.comm_ctas = 20;
  c.contention.hbm_gbps = 4000;
  return c;
}
OpResources sm_bound(float waves) {
  OpResources r;
  r.waves = waves;
  return r;
}
OpResources comm(float gbps = 0) {
  OpResources r;
  r.comm = true;
  r.hbm_gbps = gbps;
  return r;
}
}  // namespace

TEST_CASE("contention: a one-wave kernel beside a comm kernel on 20 of 100 SMs needs two waves") {
  // Both start at 0 (the comm kernel takes its SMs first). G needs 100 blocks on 80 SMs:
  // 2 waves, 2 x 300 = 600. AR holds its own SMs and draws no HBM: 1000 alone.
  Schedule s;
  s.ops = {make(OpCode::Qkv), make(OpCode::AllReduce)};
  Engine e;
  const Timeline& tl = e.run(s, contended({300, 1000}, {sm_bound(1.0f), comm()}));
  CHECK(tl.end_ns == std::vector<std::int64_t>{600, 1000});
  CHECK(wave_factor(1.0, 100, 20) == 2.0);
  CHECK(wave_factor(4.0, 100, 20) == 5.0 / 4.0);  // 400 blocks: 4 waves alone, 5 on 80 SMs
  CHECK(wave_factor(0.0, 100, 20) == 1.0);        // memory-bound: no waves to lose
}

TEST_CASE("contention: a comm kernel arriving while a kernel holds every SM waits for its wave") {
  // G: 400 of work in 2 waves (200 each). AR0 (150) beside it from 0: G runs its 2 waves on 80
  // SMs (3 waves: x1.5), so at 150 it has done 100. AR1 arrives at 150 and waits for G's first
  // wave to retire: 100 more of G alone, until 250. Then both run: G's last 200 at x1.5 end at
  // 550; AR1's 300 alone-rate work ends at 550 too.
  Schedule s;
  s.ops = {make(OpCode::GateUp), make(OpCode::AllReduce), make(OpCode::AllReduce)};
  Engine e;
  const Timeline& tl = e.run(s, contended({400, 150, 300}, {sm_bound(2.0f), comm(), comm()}));
  CHECK(tl.start_ns == std::vector<std::int64_t>{0, 0, 150});
  CHECK(tl.end_ns == std::vector<std::int64_t>{550, 150, 550});
  // The same graph with fixed factors of 1: no wait, no slowdown.
  const Timeline& plain = e.run(s, costs({400, 150, 300}, {1, 1, 1}));
  CHECK(plain.end_ns == std::vector<std::int64_t>{400, 150, 450});
}

TEST_CASE("contention: memory-bound ops and a copy share HBM bandwidth") {
  // Norm draws 3000 GB/s, the comm kernel 2000: 5000 on a 4000 GB/s HBM, both at 1/1.25.
  // The norm's 400 take 500; by then AR did 400 of its 1000, and the last 600 run alone: 1100.
  Schedule s;
  s.ops = {make(OpCode::AttnNorm), make(OpCode::AllReduce)};
  OpResources norm;
  norm.hbm_gbps = 3000;
  Engine e;
  const Timeline& tl = e.run(s, contended({400, 1000}, {norm, comm(2000)}));
  CHECK(tl.end_ns == std::vector<std::int64_t>{500, 1100});
}

TEST_CASE("execution modes: release times of eager (per launch call, in order) and graph") {
  // Rank 0: Qkv, AllReduce, ResidualAdd; rank 1: Qkv. Eager costs: gemm 5 us, all-reduce 9 us,
  // norm 3 us, elementwise 2 us; the ranks' host threads run in parallel.
  Schedule s;
  s.num_ranks = 2;
  s.ops = {make(OpCode::Qkv), make(OpCode::AllReduce, {0}), make(OpCode::ResidualAdd, {1}),
           make(OpCode::Qkv)};
  s.ops[3].rank = 1;
  LaunchCosts c;
  c.eager_us = {5, 4, 3, 2, 9};
  c.graph_launch_us = 6.5;
  CHECK(release_times(s, ExecMode::Queued, c).empty());
  CHECK(release_times(s, ExecMode::Eager, c) ==
        std::vector<std::int64_t>{5000, 14000, 16000, 5000});
  CHECK(release_times(s, ExecMode::Graph, c) == std::vector<std::int64_t>{6500, 6500, 6500, 6500});
  Schedule g = s;  // a residual add's post-norm: its norm's launch call (3 us) first
  g.ops[2].post_norm = 1;
  CHECK(release_times(g, ExecMode::Eager, c) ==
        std::vector<std::int64_t>{5000, 14000, 19000, 5000});
  g.ops.push_back(make(OpCode::ResidualAdd, {2}));
  CHECK(release_times(g, ExecMode::Eager, c).back() == 21000);
  // A qkv op's own kernels after its GEMM are launch calls too: its KV-cache write and rotary
  // kernel (elementwise, 2 us each) and per-head norms (two norms, 3 us each) delay the next
  // op's launch by 2, 4 and 10 us.
  for (const auto& [extra, what] : {std::pair{2, "kv"}, {4, "rope"}, {10, "qk_norm"}}) {
    CAPTURE(what);
    Schedule q = s;
    Op& qkv = q.ops[0];
    set_gemm_work(qkv, 16, 64, 32, false);
    qkv.kv_width = 16;
    if (extra >= 4) qkv.rope_dim = qkv.rope_heads = 2;
    if (extra == 10) qkv.qk_norm = true;
    const auto r = release_times(q, ExecMode::Eager, c);
    CHECK(r[0] == 5000);
    CHECK(r[1] == 14000 + extra * 1000);
  }
  CHECK(parse_exec_mode("eager") == ExecMode::Eager);
  CHECK_THROWS_AS(parse_exec_mode("lazy"), tpo::FieldError);
}

TEST_CASE("engine: an op waits for its launch, and the host runs ahead of long kernels") {
  // compute: G0 (100) -> G1 (50) -> R (10, waits for AR); comm: AR (80, waits for G0).
  // Launched at 30, 60, 90, 120: G0 runs [30,130); G1 was launched at 60, runs [130,180); AR
  // (launched 90) [130,210); R (launched 120) after AR: [210,220).
  Schedule s;
  s.ops = {make(OpCode::Qkv), make(OpCode::OProj), make(OpCode::AllReduce, {0}),
           make(OpCode::ResidualAdd, {2})};
  OpCosts c = costs({100, 50, 80, 10}, {1, 1, 1, 1});
  c.release_ns = {30, 60, 90, 120};
  Engine e;
  const Timeline& tl = e.run(s, c);
  CHECK(tl.start_ns == std::vector<std::int64_t>{30, 130, 130, 210});
  CHECK(tl.end_ns == std::vector<std::int64_t>{130, 180, 210, 220});
  // Short kernels wait for the host: launches every 40, kernels of 10.
  c = costs({10, 10, 10, 10}, {1, 1, 1, 1});
  c.release_ns = {40, 80, 120, 160};
  const Timeline& t2 = e.run(s, c);
  CHECK(t2.start_ns == std::vector<std::int64_t>{40, 80, 120, 160});
  CHECK(t2.total_ns == 170);
  // An op waiting for its launch slows nothing beside it: G1 alone at rate 1 while the
  // unlaunched AR holds the comm stream (slowdowns 2x when both run).
  Schedule s2;
  s2.ops = {make(OpCode::Qkv), make(OpCode::AllReduce)};
  c = costs({100, 50}, {2, 2});
  c.release_ns = {0, 60};
  const Timeline& t3 = e.run(s2, c);
  // G alone [0,60): 60 done; both at 1/2 from 60: G's last 40 take 80 -> 140, while AR does
  // 40 of its 50; AR's last 10 alone -> 150.
  CHECK(t3.end_ns == std::vector<std::int64_t>{140, 150});
}

TEST_CASE("contention: the extra-wave rule, one wave more beside a comm kernel, at least S/(S-P)") {
  CHECK(wave_factor(1.0, 100, 20, false, true) == 2.0);  // one wave becomes two
  CHECK(wave_factor(0.5, 100, 20, false, true) == 1.0);  // 50 blocks fit on the 80 SMs left
  CHECK(wave_factor(1.5, 100, 20, false, true) == doctest::Approx(2.5 / 1.5));
  CHECK(wave_factor(4.0, 100, 20, false, true) == 1.25);   // (4 + 1) / 4 = 100 / 80
  CHECK(wave_factor(10.0, 100, 20, false, true) == 1.25);  // the SMs' share: 100 / 80 > 1.1
  CHECK(wave_factor(0.0, 100, 20, false, true) == 1.0);    // memory-bound: no waves
  CHECK(wave_factor(0.8, 100, 20, false, true) == 1.0);    // 80 blocks fit on the 80 SMs left
  CHECK(wave_factor(0.81, 100, 20, false, true) == 2.0);   // 81 do not: the last waits
  CHECK(wave_factor(1.5, 100, 20, true, true) == wave_factor(1.5, 100, 20, false, true));
  // Read from a contention block; a non-boolean is refused naming the field.
  const ContentionParams p =
      contention_from_json(nlohmann::json{{"extra_wave", true}}, "h.json", "contention", {});
  CHECK(p.extra_wave);
  CHECK(contention_json(p).at("extra_wave") == true);
  CHECK_THROWS_AS(
      contention_from_json(nlohmann::json{{"extra_wave", 1}}, "h.json", "contention", {}),
      tpo::InputError);
}

TEST_CASE(
    "contention: stream-K waves are fractional, and a kernel smaller than the free SMs never "
    "blocks a comm kernel") {
  CHECK(wave_factor(1.0, 100, 20, true) == doctest::Approx(1.25));  // 100 blocks on 80 SMs
  CHECK(wave_factor(0.5, 100, 20, true) == 1.0);                    // 50 blocks fit in 80
  CHECK(wave_factor(3.2, 100, 20, true) == doctest::Approx(4.0 / 3.2));
  // 0.6 waves (60 blocks) leave 40 SMs free, more than the comm kernel's 20: AR0 starts at
  // once and G is not slowed (60 blocks fit on the 80 SMs left).
  Schedule s;
  s.ops = {make(OpCode::GateUp), make(OpCode::AllReduce)};
  Engine e;
  OpCosts c = contended({400, 150}, {sm_bound(0.6f), comm()});
  c.release_ns = {0, 100};
  const Timeline& tl = e.run(s, c);
  CHECK(tl.start_ns == std::vector<std::int64_t>{0, 100});
  CHECK(tl.end_ns == std::vector<std::int64_t>{400, 250});
  // 1.0 wave holds every SM: AR0, launched at 100, waits for the wave to end at 400.
  c = contended({400, 150}, {sm_bound(1.0f), comm()});
  c.release_ns = {0, 100};
  const Timeline& t2 = e.run(s, c);
  CHECK(t2.end_ns == std::vector<std::int64_t>{400, 550});
}

namespace {
// The contention model on a GPU of 100 SMs with GEMM thread-block tiles of m x n.
ContentionParams hundred_sms(std::int64_t tile_m, std::int64_t tile_n) {
  ContentionParams p;
  p.enabled = true;
  p.sms = 100;
  p.gemm_cta_m = tile_m;
  p.gemm_cta_n = tile_n;
  return p;
}
// Attention of `q` queries after `prefix` cached tokens, `heads` query heads over one KV head
// (head dim 128), one request.
Op attention_at(std::int64_t q, std::int64_t prefix, std::int64_t heads) {
  Op a = make(OpCode::Attention);
  set_attention_work(a, 1, q, prefix, heads, 1, 128);
  a.seq_begin = prefix;
  a.seq_end = prefix + q;
  a.req_begin = 0;
  a.req_end = 1;
  return a;
}
}  // namespace

TEST_CASE(
    "contention: op_resources counts a GEMM's tiles, filling every SM unless gemm_fill is "
    "off") {
  ContentionParams p = hundred_sms(128, 128);
  Op g = make(OpCode::GateUp);
  set_gemm_work(g, 256, 1280, 64, false);  // 2 x 10 = 20 tiles
  CHECK(op_resources(g, 1000, p).waves == doctest::Approx(1.0));
  p.gemm_fill = false;
  CHECK(op_resources(g, 1000, p).waves == doctest::Approx(0.2));
}

TEST_CASE(
    "contention: attention's blocks, a fused kernel's (128 query rows per head) or the batched "
    "GEMMs' score tiles (keys x queries per head)") {
  ContentionParams p = hundred_sms(128, 256);
  Op a = attention_at(1000, 1000, 8);  // a chunk of 1000 queries after 1000 cached tokens
  // Fused: ceil(1000 / 128) = 8 blocks per head, 64 in all: fewer than the SMs, which it holds
  // alone; beside a comm kernel on 20 SMs they still all run at once, under either rule.
  CHECK(op_resources(a, 1000, p).waves == doctest::Approx(0.64));
  p.comm_ctas = 20;
  CHECK(op_resources(a, 1000, p).beside_comm == 1.0);
  p.extra_wave = true;
  CHECK(op_resources(a, 1000, p).beside_comm == 1.0);
  // Exactly the 80 SMs left (10 heads): they still all run at once (waves, a float, comes out
  // a hair above 0.8; it took a second wave until 2026-12-05).
  Op fits = a;
  fits.n = 10;
  CHECK(op_resources(fits, 1000, p).beside_comm == 1.0);
  p.extra_wave = false;
  CHECK(op_resources(fits, 1000, p).beside_comm == 1.0);
  p.extra_wave = true;
  // 96 blocks (12 heads) on the 80 left: one wave more under extra_wave, two re-quantized.
  Op wide = a;
  wide.n = 12;
  CHECK(op_resources(wide, 1000, p).waves == doctest::Approx(0.96));
  CHECK(op_resources(wide, 1000, p).beside_comm == 2.0);
  p.extra_wave = false;
  CHECK(op_resources(wide, 1000, p).beside_comm == 2.0);
  // Batched GEMMs: ceil(2000 / 128) x ceil(1000 / 256) = 16 x 4 tiles per head, 512 in all.
  p.attention_batched_gemm = true;
  CHECK(op_resources(a, 1000, p).waves == doctest::Approx(5.12));
  a.req_end = 2;  // two requests: twice the heads
  CHECK(op_resources(a, 1000, p).waves == doctest::Approx(10.24));
}

TEST_CASE(
    "contention: a GEMM or attention kernel that nearly saturates HBM alone is memory-bound: no "
    "extra wave beside a comm kernel, only HBM shared, and its blocks still hold the SMs") {
  ContentionParams p = hundred_sms(128, 128);
  p.extra_wave = true;
  p.comm_ctas = 20;
  p.hbm_gbps = 4000;  // bytes/ns
  p.memory_bound_share = 0.75;
  Op decode = make(OpCode::GateUp);
  set_gemm_work(decode, 1, 4096, 4096, false);      // ~33.6 MB
  const double at_hbm = decode.bytes / p.hbm_gbps;  // ns to move them at the HBM's rate
  // At 90% of the HBM's rate alone: memory-bound.
  const OpResources d = op_resources(decode, std::llround(at_hbm / 0.9), p);
  CHECK(d.waves == doctest::Approx(1.0));  // split-K fills every SM: it holds them all
  CHECK(d.beside_comm == 1.0);
  CHECK(d.hbm_gbps == doctest::Approx(0.9 * p.hbm_gbps).epsilon(1e-4));
  // At 60%: SM-bound, one wave more beside the comm kernel (as the H200 runs' 256-row GEMMs).
  CHECK(op_resources(decode, std::llround(at_hbm / 0.6), p).beside_comm == 2.0);
  // Just above and just below the share.
  CHECK(op_resources(decode, std::llround(at_hbm / 0.76), p).beside_comm == 1.0);
  CHECK(op_resources(decode, std::llround(at_hbm / 0.74), p).beside_comm == 2.0);
  // A prefill GEMM far from the HBM's rate keeps its wave factor.
  Op prefill = make(OpCode::GateUp);
  set_gemm_work(prefill, 4096, 4096, 4096, false);
  const OpResources f = op_resources(prefill, 200000, p);
  CHECK(f.waves == doctest::Approx(10.24));  // 32 x 32 tiles on 100 SMs
  CHECK(f.beside_comm == doctest::Approx(1.25));
  // qkv's KV-cache write is in its time and its bytes: at 70% of the HBM's rate for the GEMM's
  // bytes, plus a KV write of 10% more bytes, it draws 77% and is memory-bound.
  Op qkv = make(OpCode::Qkv);
  set_gemm_work(qkv, 1, 4096, 4096, false);
  qkv.kv_width = static_cast<std::int64_t>(qkv.bytes * 0.1 / 8.0);  // kv_store_bytes: 8 x width
  const OpResources kv = op_resources(qkv, std::llround(qkv.bytes / p.hbm_gbps / 0.7), p);
  CHECK(kv.hbm_gbps == doctest::Approx(0.77 * p.hbm_gbps).epsilon(1e-3));
  CHECK(kv.beside_comm == 1.0);
  // Decode attention streaming its KV cache near the HBM's rate is memory-bound too: 96 heads'
  // blocks, more than the 80 SMs the comm kernel leaves (8 heads' would fit beside it anyway).
  const Op a = attention_at(1, 4096, 96);
  CHECK(op_resources(a, std::llround(a.bytes / p.hbm_gbps / 0.8), p).beside_comm == 1.0);
  // The rule off (share 0): every such kernel loses its wave.
  p.memory_bound_share = 0;
  CHECK(op_resources(decode, std::llround(at_hbm / 0.9), p).beside_comm == 2.0);
  CHECK(op_resources(a, std::llround(a.bytes / p.hbm_gbps / 0.8), p).beside_comm == 2.0);
  // Written with a fit and read back; a share above 1 is refused, naming the field.
  for (double share : {0.0, 0.75}) {
    p.memory_bound_share = share;
    CHECK(contention_from_json(nlohmann::json::parse(contention_json(p).dump()), "f", "c", {})
              .memory_bound_share == share);
  }
  CHECK_THROWS_AS(
      contention_from_json(nlohmann::json{{"memory_bound_share", 1.5}}, "h.json", "contention", {}),
      tpo::InputError);
}

TEST_CASE(
    "contention: a memory-bound GEMM beside a comm kernel runs at its HBM share, and a comm "
    "kernel arriving while it holds every SM waits for its blocks") {
  // G: a one-wave memory-bound GEMM (beside_comm 1), 400 alone, drawing 3000 GB/s. AR0 (100,
  // 2000 GB/s) beside it from 0: 5000 on a 4000 GB/s HBM, both at 1/1.25: AR0 ends at 125, G
  // has done 100. AR1 (100) arrives at 125 and waits for G's one wave: G's last 300 alone end
  // at 425, then AR1 runs alone to 525.
  Schedule s;
  s.ops = {make(OpCode::GateUp), make(OpCode::AllReduce), make(OpCode::AllReduce)};
  OpResources g = sm_bound(1.0f);
  g.hbm_gbps = 3000;
  g.beside_comm = 1.0;
  Engine e;
  const Timeline& tl = e.run(s, contended({400, 100, 100}, {g, comm(2000), comm(2000)}));
  CHECK(tl.start_ns == std::vector<std::int64_t>{0, 0, 125});
  CHECK(tl.end_ns == std::vector<std::int64_t>{425, 125, 525});
  // SM-bound (one wave more beside comm, x2) instead: AR0 ends at 125 (x1.25 from HBM), G has
  // done 62.5 at x2; AR1 waits for the wave (337.5 alone), to 462.5; G ends there, AR1 at 562.5.
  g.beside_comm = 2.0;
  const Timeline& sm = e.run(s, contended({400, 100, 100}, {g, comm(2000), comm(2000)}));
  CHECK(sm.end_ns[0] == 463);
  CHECK(sm.end_ns[2] == 563);
}

TEST_CASE("engine: a graph loaded once runs with new costs as run() does") {
  Schedule s;
  s.ops = {make(OpCode::Qkv), make(OpCode::OProj), make(OpCode::AllReduce, {0}),
           make(OpCode::ResidualAdd, {2})};
  Engine loaded, fresh;
  loaded.load(s);
  for (const auto& [ns, slow] :
       {std::pair{std::vector<std::int64_t>{100, 50, 80, 10}, std::vector<double>{1, 1, 1, 1}},
        std::pair{std::vector<std::int64_t>{30, 500, 80, 7}, std::vector<double>{1.5, 1.2, 2, 1}},
        std::pair{std::vector<std::int64_t>{1, 2, 3, 4}, std::vector<double>{3, 3, 3, 3}}}) {
    const OpCosts c = costs(ns, slow);
    const Timeline want = fresh.run(s, c);
    const Timeline& got = loaded.run_loaded(c);
    CHECK(got.start_ns == want.start_ns);
    CHECK(got.end_ns == want.end_ns);
    CHECK(got.total_ns == want.total_ns);
  }
  Engine unloaded;
  CHECK_THROWS_AS(unloaded.run_loaded(costs({1, 1, 1, 1}, {1, 1, 1, 1})), std::logic_error);
}

TEST_CASE("engine: steady-state skipping gives exactly the full run's timeline") {
  // Every strategy on several machines, models and prompts, with fixed factors and with the
  // contention model: starts, ends, totals, statistics and event counts must be identical,
  // and the skipping must have skipped ops somewhere (so this test can fail on both counts).
  struct Case {
    const char* model;
    const char* hardware;
    std::int64_t tp, seq, batch, context;
    bool embed_head = false;
  };
  const Case cases[] = {{"llama2-70b", "rtx4090x8", 8, 4096, 1, -1},
                        {"llama3-70b", "h200x8", 8, 8192, 1, -1},
                        {"llama3.1-8b", "a800x8", 8, 2048, 2, -1},
                        {"qwen2.5-72b", "h100x8", 8, 3000, 1, 1024},
                        {"llama-30b", "h100x8-nop2p", 4, 16384, 1, -1, true}};
  std::size_t skipped = 0, runs = 0;
  for (const Case& c : cases) {
    WorkloadOptions o;
    o.model = c.model;
    o.hardware = c.hardware;
    o.tp = c.tp;
    o.seq = c.seq;
    o.batch = c.batch;
    o.context = c.context;
    o.embed_head = c.embed_head;
    const Workload w = make_workload(o);
    const AnalyticalCostModel cm(w.hardware, w.tp);
    for (const StrategyKind kind : all_strategies()) {
      for (std::int64_t chunks : {2, 3}) {
        StrategyOptions so;
        so.chunks = chunks;
        const StrategySpec spec = make_spec(so, w, kind);
        if (!not_applicable_reason(w, spec).empty()) continue;
        const Schedule s = build_schedule(w, spec);
        const OpCosts costs = cost_schedule(s, cm);
        Engine full, fast;
        fast.set_skip_steady_state(true);
        const Timeline a = full.run(s, costs);
        const Timeline& b = fast.run(s, costs);
        CAPTURE(c.model);
        CAPTURE(c.hardware);
        CAPTURE(s.strategy);
        check_same(a, b);
        CHECK(full.events_pushed() == fast.events_pushed());
        CHECK(full.ops_skipped() == 0);
        skipped += fast.ops_skipped();
        ++runs;
        // Run again on the same engine: nothing of the first run may leak into the second.
        const Timeline& again = fast.run(s, costs);
        CHECK(again.end_ns == a.end_ns);
      }
    }
  }
  CHECK(runs > 40);
  CHECK(skipped > runs * 1000);
}

TEST_CASE("engine: the one-rank loops give the general loop's timeline on random graphs") {
  // One-rank graphs run on loops that track the streams' finished counts instead of
  // dependency counters (and, with fixed factors and queued execution, keep the running ops
  // in locals). The general loop runs the same graphs when steady-state skipping is on (no
  // layers here, so nothing is skipped). Random graphs of both streams: dependencies on
  // earlier ops of either stream, now and then on a later op or on the op itself (a
  // deadlock both must report), zero costs (ties), fixed factors, launch times, the
  // contention model and both together; each also stopped at an op and run on.
  std::mt19937 rng(20261202);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const double factors[] = {1.0, 1.25, 1.5, 2.0, 3.7};
  int runs = 0, deadlocks = 0, overlapped = 0;
  const OpCode codes[] = {OpCode::AllReduce, OpCode::GateUp, OpCode::Attention,
                          OpCode::ResidualAdd};
  for (int trial = 0; trial < 800; ++trial) {
    const int n = pick(1, 40);
    const int mode = trial % 4;  // 0 fixed factors, 1 launch times, 2 contention, 3 both
    Schedule s;
    for (int i = 0; i < n; ++i) {
      std::vector<std::int32_t> deps;
      const int k = i > 0 ? pick(0, 3) : 0;
      for (int d = 0; d < k; ++d) deps.push_back(pick(0, i - 1));
      if (pick(0, 99) < 2) deps.push_back(pick(i, n - 1));  // on itself or a later op
      s.ops.push_back(make(codes[pick(0, 3)], deps));
    }
    OpCosts c;
    for (int i = 0; i < n; ++i) {
      c.standalone_ns.push_back(pick(0, 4) == 0 ? 0 : pick(1, 300));
      c.slowdown.push_back({factors[pick(0, 4)], factors[pick(0, 4)], factors[pick(0, 4)]});
    }
    if (mode == 1 || mode == 3) {
      // Rising launch times (eager), or a few values in any order, so that launches coincide.
      std::int64_t t = 0;
      const bool few = pick(0, 1) == 0;
      for (int i = 0; i < n; ++i) c.release_ns.push_back(few ? 10 * pick(0, 4) : t += pick(0, 60));
    }
    if (mode == 2 || mode == 3) {
      c.contention.enabled = true;
      c.contention.sms = 100;
      c.contention.comm_ctas = 20;
      c.contention.hbm_gbps = 4000;
      for (int i = 0; i < n; ++i) {
        OpResources r;
        // Comm kernels on the comm stream, and now and then a comm-flagged op on the compute
        // stream (a hand-made input: it never waits for SMs).
        r.comm = s.ops[static_cast<std::size_t>(i)].stream == StreamKind::Comm || pick(0, 19) == 0;
        r.waves = r.comm ? 0.0f : static_cast<float>(pick(0, 30)) / 10.0f;
        r.hbm_gbps = static_cast<float>(pick(0, 3000));
        c.resources.push_back(r);
      }
    }
    Engine general, pair, stopped, general_stopped;
    general.set_skip_steady_state(true);
    Timeline a;
    bool threw = false;
    try {
      a = general.run(s, c);
    } catch (const std::logic_error&) {
      threw = true;
    }
    CAPTURE(trial);
    if (threw) {
      ++deadlocks;
      CHECK_THROWS_AS(pair.run(s, c), std::logic_error);
      continue;
    }
    check_same(a, pair.run(s, c));
    CHECK(general.events_pushed() == pair.events_pushed());
    if (a.hidden_comm_ns > 0) ++overlapped;
    // Stopped at an op (the split search's early stop): the same partial timeline and events
    // as the general loop's at that point; then run on.
    stopped.load(s);
    general_stopped.set_skip_steady_state(true);
    general_stopped.load(s);
    const auto stop = static_cast<std::int32_t>(pick(0, n - 1));
    REQUIRE(stopped.run_until_started(c, stop));
    REQUIRE(general_stopped.run_until_started(c, stop));
    CHECK(stopped.timeline().start_ns == general_stopped.timeline().start_ns);
    CHECK(stopped.timeline().end_ns == general_stopped.timeline().end_ns);
    CHECK(stopped.events_pushed() == general_stopped.events_pushed());
    const Timeline& r = stopped.run_on();
    CHECK(r.end_ns == a.end_ns);
    CHECK(r.hidden_comm_ns == a.hidden_comm_ns);
    CHECK(r.comm_busy_ns == a.comm_busy_ns);
    CHECK(stopped.events_pushed() == general.events_pushed());
    ++runs;
  }
  CHECK(runs > 550);
  CHECK(deadlocks > 5);
  CHECK(overlapped > 100);
}
