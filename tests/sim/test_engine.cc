// The event engine on small hand-built graphs, with exact expected start and end times.
#include <doctest/doctest.h>

#include <stdexcept>

#include "sim/engine.h"

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
