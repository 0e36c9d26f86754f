// Strategy builders: ISO's pipeline against a timeline derived by hand, ladder's edges, and
// the invariants every function-preserving strategy must keep.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>

#include "sim/chunk_split.h"
#include "sim/engine.h"
#include "sim/error.h"
#include "sim/strategy.h"
#include "toy.h"

using namespace tpo::sim;
using tpo::test::toy_workload;
using tpo::test::ToyCost;

namespace {
Timeline run(const Schedule& s, const CostModel& cm) {
  Engine e;
  return e.run(s, cost_schedule(s, cm));
}
std::int64_t end_of(const Schedule& s, const Timeline& tl, OpCode code, int chunk,
                    int module = -1) {
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const Op& op = s.ops[i];
    if (op.code == code && op.chunk == chunk && (module < 0 || op.module == module)) {
      return tl.end_ns[i];
    }
  }
  FAIL("op not found");
  return -1;
}
}  // namespace

TEST_CASE("none on the toy model: everything in sequence") {
  // 8 tokens: attn part 8+16+8+16 = 48, AR 24 -> 72, residual 80, MLP 8+24+8+16 -> 136,
  // AR -> 160, residual -> 168.
  const auto w = toy_workload(8);
  const Schedule s = build_schedule(w, {StrategyKind::None});
  const Timeline tl = run(s, ToyCost());
  CHECK(tl.total_ns == 168);
  CHECK(tl.exposed_comm_ns == 48);
}

TEST_CASE("iso with 2 chunks of 4 tokens on the toy model matches the hand-derived timeline") {
  // compute: n1 0-4 q1 4-12 a1 12-16 o1 16-24 | n2 24-28 q2 28-36 a2 36-40 o2 40-48 |
  //          r(A1) 48-52 | m1: 52-56 56-68 68-72 72-80 | r(A2) 80-84 | m2: 84-88 88-100
  //          100-104 104-112 | r(M1) 112-116 | r(M2) 124-128
  // comm:    AR(A1) 24-36, AR(A2) 48-60, AR(M1) 80-92, AR(M2) 112-124
  const auto w = toy_workload(8);
  const Schedule s = build_schedule(w, {StrategyKind::Iso, {4, 4}});
  const Timeline tl = run(s, ToyCost());
  CHECK(end_of(s, tl, OpCode::OProj, 0) == 24);
  CHECK(end_of(s, tl, OpCode::AllReduce, 0, 0) == 36);
  CHECK(end_of(s, tl, OpCode::Attention, 1) == 40);
  CHECK(end_of(s, tl, OpCode::OProj, 1) == 48);
  CHECK(end_of(s, tl, OpCode::AllReduce, 1, 0) == 60);
  CHECK(end_of(s, tl, OpCode::ResidualAdd, 0, 0) == 52);
  CHECK(end_of(s, tl, OpCode::Down, 0) == 80);
  CHECK(end_of(s, tl, OpCode::ResidualAdd, 1, 0) == 84);
  CHECK(end_of(s, tl, OpCode::AllReduce, 0, 1) == 92);
  CHECK(end_of(s, tl, OpCode::Down, 1) == 112);
  CHECK(end_of(s, tl, OpCode::ResidualAdd, 0, 1) == 116);
  CHECK(end_of(s, tl, OpCode::AllReduce, 1, 1) == 124);
  CHECK(tl.total_ns == 128);
  CHECK(tl.comm_busy_ns == 48);
  // Only AR(M2) 116-124 is exposed: r(M1) covers 112-116, then compute waits for it.
  CHECK(tl.exposed_comm_ns == 8);
}

TEST_CASE("iso across a layer boundary: next layer's attention(c1) runs beside AR(mlp, c2)") {
  // Continuing the timeline above into layer 1: r(M1) 112-116, A1' 116-140 while AR(M2)
  // runs 112-124; AR(A1') 140-152; r(M2) 140-144; A2' 144-168; AR(A2') 168-180;
  // r(A1') 168-172; M1' 172-200; AR(M1') 200-212; r(A2') 200-204; M2' 204-232;
  // r(M1') 232-236; AR(M2') 232-244; r(M2') 244-248.
  const auto w = toy_workload(8, 2);
  const Schedule s = build_schedule(w, {StrategyKind::Iso, {4, 4}});
  const Timeline tl = run(s, ToyCost());
  CHECK(end_of(s, tl, OpCode::AllReduce, 1, 1) == 124);
  CHECK(end_of(s, tl, OpCode::ResidualAdd, 0, 1) == 116);
  CHECK(end_of(s, tl, OpCode::OProj, 0, 2) == 140);
  CHECK(end_of(s, tl, OpCode::ResidualAdd, 1, 1) == 144);
  CHECK(end_of(s, tl, OpCode::AllReduce, 0, 2) == 152);
  CHECK(end_of(s, tl, OpCode::Down, 1, 3) == 232);
  CHECK(tl.total_ns == 248);
}

TEST_CASE("iso: chunk j's attention depends on the qkv of every earlier chunk") {
  const auto w = toy_workload(12);
  const Schedule s = build_schedule(w, {StrategyKind::Iso, {4, 4, 4}});
  for (const auto& op : s.ops) {
    if (op.code != OpCode::Attention) continue;
    int earlier_qkv = 0;
    for (auto d : op.deps) {
      const Op& dep = s.ops[static_cast<std::size_t>(d)];
      if (dep.code == OpCode::Qkv && dep.chunk < op.chunk) ++earlier_qkv;
    }
    CHECK(earlier_qkv == op.chunk);
    CHECK(op.kv_prefix() == 4 * op.chunk);
  }
}

TEST_CASE("ladder: module i reads the residual stream without module i-1's output") {
  const auto w = toy_workload(8, 2);
  const Schedule s = build_schedule(w, {StrategyKind::Ladder});
  CHECK_FALSE(s.preserves_function);
  auto pos = [&](OpCode code, int module) {
    for (std::size_t i = 0; i < s.ops.size(); ++i) {
      const Op& op = s.ops[i];
      if (op.code == code && (code == OpCode::ResidualAdd ? op.residual_of : op.module) == module)
        return static_cast<long>(i);
    }
    return -1L;
  };
  // Modules 0..3 (attn0, mlp0, attn1, mlp1). Norm of module m comes before the residual add
  // of module m-1 on the compute stream, and after that of module m-2.
  const OpCode norms[] = {OpCode::AttnNorm, OpCode::MlpNorm, OpCode::AttnNorm, OpCode::MlpNorm};
  for (int m = 1; m < 4; ++m) {
    CHECK(pos(norms[m], m) < pos(OpCode::ResidualAdd, m - 1));
    if (m >= 2) CHECK(pos(OpCode::ResidualAdd, m - 2) < pos(norms[m], m));
  }
  // Each residual add waits for the all-reduce of its own module.
  for (const auto& op : s.ops) {
    if (op.code != OpCode::ResidualAdd) continue;
    REQUIRE(op.deps.size() == 1);
    const Op& ar = s.ops[static_cast<std::size_t>(op.deps[0])];
    CHECK(ar.code == OpCode::AllReduce);
    CHECK(ar.module == op.residual_of);
  }
  // The last two residual adds come after all compute (the final wait of the paper).
  CHECK(s.ops.back().code == OpCode::ResidualAdd);
  CHECK(s.ops[s.ops.size() - 2].code == OpCode::ResidualAdd);
}

TEST_CASE("ladder on the last N layers only: earlier layers stay standard") {
  const auto w = toy_workload(8, 3);
  StrategySpec spec{StrategyKind::Ladder};
  spec.ladder_layers = 1;
  const Schedule s = build_schedule(w, spec);
  // Layer 0 and 1 modules (0..3): residual add directly follows the module's all-reduce on
  // the compute stream, i.e. before the next module's norm.
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const Op& op = s.ops[i];
    if (op.code != OpCode::ResidualAdd || op.residual_of > 3) continue;
    bool next_norm_after = false;
    for (std::size_t j = i + 1; j < s.ops.size(); ++j) {
      if (s.ops[j].kind == OpKind::Norm) {
        next_norm_after = s.ops[j].module == op.residual_of + 1;
        break;
      }
    }
    CHECK(next_norm_after);
  }
  spec.ladder_layers = 4;  // more than the 3 layers
  CHECK_THROWS_AS(build_schedule(w, spec), tpo::InputError);
}

TEST_CASE("function-preserving strategies do the same FLOPs as none") {
  auto w = toy_workload(1000, 2);
  w.batch = 4;
  const double ref = build_schedule(w, {StrategyKind::None}).total_flops();
  CHECK(ref > 0);
  CHECK(build_schedule(w, {StrategyKind::Iso, {500, 500}}).total_flops() == ref);
  CHECK(build_schedule(w, {StrategyKind::Iso, {123, 400, 477}}).total_flops() == ref);
  StrategySpec gs{StrategyKind::GemmSplit};
  gs.pieces = 3;
  CHECK(build_schedule(w, gs).total_flops() == ref);
  CHECK(build_schedule(w, {StrategyKind::Microbatch}).total_flops() == ref);
  // The model-changing ones are flagged.
  CHECK_FALSE(build_schedule(w, {StrategyKind::ParallelBlock}).preserves_function);
  CHECK(build_schedule(w, {StrategyKind::Iso, {500, 500}}).preserves_function);
}

TEST_CASE("every strategy builds a graph that runs to completion, prefill and decode") {
  for (auto phase : {Phase::Prefill, Phase::Decode}) {
    auto w = toy_workload(phase == Phase::Prefill ? 256 : 1, 3);
    w.phase = phase;
    w.batch = 4;
    w.context = phase == Phase::Decode ? 100 : 0;
    for (auto k : all_strategies()) {
      StrategySpec spec{k};
      spec.pieces = 2;
      if (k == StrategyKind::Iso || k == StrategyKind::IsoLadder) spec.chunk_tokens = {100, 156};
      if (!not_applicable_reason(w, spec).empty()) {
        CHECK(phase == Phase::Decode);
        continue;
      }
      const Schedule s = build_schedule(w, spec);
      const Timeline tl = run(s, ToyCost(1.2, 1.3));
      CAPTURE(strategy_name(k));
      CHECK(tl.total_ns > 0);
      // Every dependency is respected, and comes before its op (the CUDA runtime enqueues in
      // order and refuses a later one).
      for (std::size_t i = 0; i < s.ops.size(); ++i) {
        for (auto d : s.ops[i].deps) {
          CHECK(static_cast<std::size_t>(d) < i);
          CHECK(tl.start_ns[i] >= tl.end_ns[static_cast<std::size_t>(d)]);
        }
      }
    }
  }
}

TEST_CASE("chunk resolution: counts, ratios, even splits and the errors") {
  CHECK(resolve_chunks(4096, 2, "") == std::vector<std::int64_t>{2048, 2048});
  CHECK(resolve_chunks(10, 3, "") == std::vector<std::int64_t>{3, 3, 4});
  CHECK(resolve_chunks(4096, 0, "2253,1843") == std::vector<std::int64_t>{2253, 1843});
  CHECK(resolve_chunks(4096, 0, "0.55,0.45") == std::vector<std::int64_t>{2253, 1843});
  CHECK_THROWS_AS(resolve_chunks(4096, 0, "100,200"), tpo::InputError);
  CHECK_THROWS_AS(resolve_chunks(4096, 3, "0.5,0.5"), tpo::InputError);
  CHECK_THROWS_AS(resolve_chunks(4096, 0, "0.6,0.6"), tpo::InputError);
  CHECK_THROWS_AS(resolve_chunks(4096, 0, "a,b"), tpo::InputError);
  CHECK_THROWS_AS(resolve_chunks(4096, 0, "4096"), tpo::InputError);
  CHECK_THROWS_AS(resolve_chunks(3, 4, ""), tpo::InputError);
  CHECK_THROWS_AS(resolve_chunks(2, 0, "0.9999,0.0001"), tpo::InputError);
}

namespace {
// For each op with norm_after, the GEMMs that read its output must be the first of that norm's
// module (qkv for the attention's norm, gate_up for the MLP's) in layer norm_layer, same chunk.
void check_fused_adds(const Schedule& s) {
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const Op& add = s.ops[i];
    if (add.norm_after == 0) continue;
    CHECK((add.code == OpCode::ResidualAdd || add.code == OpCode::AllReduce));
    int readers = 0;
    for (const Op& op : s.ops) {
      if (std::find(op.deps.begin(), op.deps.end(), static_cast<std::int32_t>(i)) ==
              op.deps.end() ||
          op.kind != OpKind::Gemm) {
        continue;
      }
      ++readers;
      CHECK(op.layer == add.norm_layer);
      CHECK(op.chunk == add.chunk);
      // (A parallel block's one norm feeds its qkv and its gate_up.)
      CHECK((op.code == OpCode::GateUp || (add.norm_after == 1 && op.code == OpCode::Qkv)));
      if (s.strategy != "parallel-block") {
        CHECK(op.code == (add.norm_after == 2 ? OpCode::GateUp : OpCode::Qkv));
      }
    }
    CHECK(readers >= 1);
  }
}
}  // namespace

TEST_CASE("fused add and norm: each add before a module's norm runs it, in every strategy") {
  for (auto kind :
       {StrategyKind::None, StrategyKind::Iso, StrategyKind::Ladder, StrategyKind::GemmSplit,
        StrategyKind::Microbatch, StrategyKind::ParallelBlock, StrategyKind::IsoLadder}) {
    CAPTURE(strategy_name(kind));
    auto w = toy_workload(8, 3);
    w.batch = 2;
    StrategySpec spec(kind);
    if (strategy(kind).uses_chunks()) spec.chunk_tokens = {3, 5};
    if (kind == StrategyKind::GemmSplit) spec.pieces = 2;
    auto count = [](const Schedule& s, auto pred) {
      return std::count_if(s.ops.begin(), s.ops.end(), pred);
    };
    auto is_norm = [](const Op& op) {
      return op.code == OpCode::AttnNorm || op.code == OpCode::MlpNorm;
    };
    w.fused_add_norm = false;
    const Schedule apart = build_schedule(w, spec);
    w.fused_add_norm = true;
    const Schedule fused = build_schedule(w, spec);
    CHECK(count(apart, [](const Op& op) { return op.norm_after > 0; }) == 0);
    const auto fused_norms = count(fused, [](const Op& op) { return op.norm_after > 0; });
    // Every norm is either an op of its own or fused (into each of a gemm-split's piece adds,
    // over its rows), never both, never lost.
    const std::int64_t per_norm = kind == StrategyKind::GemmSplit ? spec.pieces : 1;
    CHECK(fused_norms % per_norm == 0);
    CHECK(count(fused, is_norm) + fused_norms / per_norm == count(apart, is_norm));
    // The same adds, over the same rows.
    CHECK(count(fused, [](const Op& op) { return op.code == OpCode::ResidualAdd; }) ==
          count(apart, [](const Op& op) { return op.code == OpCode::ResidualAdd; }));
    // Each segment's first module reads the embedding, and the last adds run after every module:
    // neither fuses; a ladder's first module past a standard layer has no add due before it.
    const std::int64_t segs = static_cast<std::int64_t>(fused.chunk_tokens.size()) *
                              (kind == StrategyKind::Microbatch ? 2 : 1);
    const bool ladder = kind == StrategyKind::Ladder || kind == StrategyKind::IsoLadder;
    CHECK(count(fused, is_norm) == segs * (ladder ? 2 : 1));
    check_fused_adds(fused);
    // Each fused add waits for its own all-reduce only.
    for (const Op& op : fused.ops) {
      if (op.norm_after == 0) continue;
      CHECK(op.deps.size() == 1);
      for (auto d : op.deps) {
        CHECK(fused.ops[static_cast<std::size_t>(d)].code == OpCode::AllReduce);
        CHECK(fused.ops[static_cast<std::size_t>(d)].module == op.residual_of);
      }
    }
    // A ladder fuses module m-2's add with module m's norm.
    if (kind == StrategyKind::Ladder) {
      for (const Op& op : fused.ops) {
        if (op.norm_after == 0) continue;
        const int next = op.residual_of + 2;
        CHECK(op.norm_after == (next % 2 == 1 ? 2 : 1));
        CHECK(op.norm_layer == next / 2);
      }
    }
  }
}

TEST_CASE("fused add and norm on the toy model: one op fewer, the norm's time gone") {
  // The toy cost charges the fused op as an add (1 ns per token): the MLP's norm (8) is gone
  // from the timeline of the test above, 168 -> 160; the all-reduces stay exposed.
  auto w = toy_workload(8);
  w.fused_add_norm = true;
  const Schedule s = build_schedule(w, {StrategyKind::None});
  const Timeline tl = run(s, ToyCost());
  CHECK(tl.total_ns == 160);
  CHECK(tl.exposed_comm_ns == 48);
  CHECK(std::count_if(s.ops.begin(), s.ops.end(),
                      [](const Op& op) { return op.code == OpCode::MlpNorm; }) == 0);
}

TEST_CASE("fused add and norm under ladder on the last layers: the switch-over") {
  // 3 layers, ladder on the last 2: module 0 and 1 (layer 0) standard, 2..5 delayed by one.
  // Adds due: 0 before 1, 1 before 2, nothing before 3, 2 before 4, 3 before 5, 4 and 5 at the
  // end. So the norms of modules 0 and 3 stay ops of their own, the adds of 4 and 5 plain adds.
  auto w = toy_workload(8, 3);
  w.fused_add_norm = true;
  StrategySpec spec(StrategyKind::Ladder);
  spec.ladder_layers = 2;
  const Schedule s = build_schedule(w, spec);
  std::map<int, int> norm_of;  // residual_of -> the module whose norm the add runs
  std::vector<int> own;        // modules with a norm op of their own
  for (const Op& op : s.ops) {
    if (op.code == OpCode::AttnNorm || op.code == OpCode::MlpNorm) own.push_back(op.module);
    if (op.code == OpCode::ResidualAdd) {
      norm_of[op.residual_of] =
          op.norm_after == 0 ? -1 : 2 * op.norm_layer + (op.norm_after == 2 ? 1 : 0);
    }
  }
  CHECK(own == std::vector<int>{0, 3});
  CHECK(norm_of == std::map<int, int>{{0, 1}, {1, 2}, {2, 4}, {3, 5}, {4, -1}, {5, -1}});
  check_fused_adds(s);
}

TEST_CASE("fused add and norm with the embedding and LM head: the last adds run the final norm") {
  for (auto kind :
       {StrategyKind::None, StrategyKind::Iso, StrategyKind::Ladder, StrategyKind::GemmSplit}) {
    CAPTURE(strategy_name(kind));
    auto w = toy_workload(8, 2);
    w.embed_head = true;
    StrategySpec spec(kind);
    if (kind == StrategyKind::Iso) spec.chunk_tokens = {3, 5};
    if (kind == StrategyKind::GemmSplit) spec.pieces = 2;
    for (const bool fused : {false, true}) {
      for (const bool in_ar : {false, true}) {
        w.fused_add_norm = fused;
        w.allreduce_add = in_ar;  // the last adds in the all-reduces (not a ladder's)
        const Schedule s = build_schedule(w, spec);
        const bool ar_adds = in_ar && kind != StrategyKind::Ladder;
        int final_norms = 0, final_adds = 0;
        std::int32_t head = -1;
        for (std::size_t i = 0; i < s.ops.size(); ++i) {
          const Op& op = s.ops[i];
          final_norms += op.code == OpCode::FinalNorm;
          if (op.norm_after == 3) {
            ++final_adds;
            CHECK(op.residual_of == 3);  // the last module's (ladder: not the one before it)
            CHECK(op.code == (ar_adds ? OpCode::AllReduce : OpCode::ResidualAdd));
            CHECK(std::string(norm_after_name(op)) == "final_norm");
          }
          if (op.code == OpCode::LmHead) head = static_cast<std::int32_t>(i);
        }
        REQUIRE(head >= 0);
        // Separate: a final norm op on the last positions, which the LM head waits for. Fused:
        // none; the last module's adds (one per ISO chunk, one per gemm-split piece) run it over
        // their rows, and the LM head waits for every add of the last flush.
        CHECK(final_norms == (fused ? 0 : 1));
        const std::int64_t per = kind == StrategyKind::Iso         ? 2
                                 : kind == StrategyKind::GemmSplit ? 2
                                                                   : 1;
        CHECK(final_adds == (fused ? per : 0));
        for (auto d : s.ops[static_cast<std::size_t>(head)].deps) {
          const Op& dep = s.ops[static_cast<std::size_t>(d)];
          CHECK(dep.code == (!fused    ? OpCode::FinalNorm
                             : ar_adds ? OpCode::AllReduce
                                       : OpCode::ResidualAdd));
        }
      }
    }
  }
}

TEST_CASE("--allreduce-fusion add-norm: the all-reduce's kernel adds and normalizes") {
  for (auto kind :
       {StrategyKind::None, StrategyKind::Iso, StrategyKind::Ladder, StrategyKind::GemmSplit,
        StrategyKind::Microbatch, StrategyKind::ParallelBlock, StrategyKind::IsoLadder}) {
    CAPTURE(strategy_name(kind));
    auto w = toy_workload(8, 3);
    w.batch = 2;
    w.fused_add_norm = true;
    StrategySpec spec(kind);
    if (strategy(kind).uses_chunks()) spec.chunk_tokens = {3, 5};
    if (kind == StrategyKind::GemmSplit) spec.pieces = 2;
    const Schedule plain = build_schedule(w, spec);
    w.allreduce_add = true;
    const Schedule s = build_schedule(w, spec);
    auto count = [](const Schedule& g, auto pred) {
      return std::count_if(g.ops.begin(), g.ops.end(), pred);
    };
    const auto adds = count(s, [](const Op& op) { return op.code == OpCode::ResidualAdd; });
    const auto in_ar =
        count(s, [](const Op& op) { return op.code == OpCode::AllReduce && op.residual_of >= 0; });
    // Every add is either an op of its own or in its all-reduce; none lost. Only a ladder's
    // delayed adds stay ops (the next module reads the residual while that all-reduce runs).
    CHECK(adds + in_ar ==
          count(plain, [](const Op& op) { return op.code == OpCode::ResidualAdd; }));
    const bool ladder = kind == StrategyKind::Ladder || kind == StrategyKind::IsoLadder;
    // (Ladder here delays every module's add.)
    CHECK(adds == (ladder ? adds + in_ar : 0));
    CHECK((ladder ? in_ar == 0 : in_ar > 0));
    // The same norms fused, now into the all-reduces; the compute stream waits for them.
    CHECK(count(s, [](const Op& op) { return op.norm_after > 0; }) ==
          count(plain, [](const Op& op) { return op.norm_after > 0; }));
    for (const Op& op : s.ops) {
      if (op.code != OpCode::AllReduce || op.residual_of < 0) continue;
      CHECK(op.residual_of == op.module);
      CHECK(op.stream == StreamKind::Comm);
    }
    check_fused_adds(s);
  }
  // At TP 1 there is no all-reduce to fuse into: the adds stay.
  auto w = toy_workload(8, 2);
  w.tp = 1;
  w.allreduce_add = true;
  const Schedule one = build_schedule(w, {StrategyKind::None});
  CHECK(std::count_if(one.ops.begin(), one.ops.end(),
                      [](const Op& op) { return op.code == OpCode::ResidualAdd; }) == 4);
}

TEST_CASE(
    "--allreduce-fusion with a ladder on the last layers: fused and plain all-reduces costed "
    "apart") {
  // Layer 0 standard (its all-reduces add), layers 1-2 ladder (theirs do not): with the add and
  // norm apart the two kinds of all-reduce differ only in whether they add, and the schedule's
  // per-layer cost reuse must not take one's cost for the other's.
  for (const bool fused_norm : {false, true}) {
    for (const bool post : {false, true}) {
      CAPTURE(fused_norm);
      CAPTURE(post);
      auto w = toy_workload(8, 3);
      w.model.post_norms = post;
      w.fused_add_norm = fused_norm;
      w.allreduce_add = true;
      StrategySpec spec(StrategyKind::Ladder);
      spec.ladder_layers = 2;
      const Schedule s = build_schedule(w, spec);
      const AnalyticalCostModel cm(tpo::test::byte_per_ns_hardware(), w.tp);
      const auto costs = cost_schedule(s, cm);
      int adding = 0, plain = 0;
      std::int64_t adding_ns = 0, plain_ns = 0;
      for (std::size_t i = 0; i < s.ops.size(); ++i) {
        const Op& op = s.ops[i];
        CHECK(costs.standalone_ns[i] == cm.standalone_ns(op));
        if (op.code == OpCode::AllReduce) {
          (op.residual_of >= 0 ? adding_ns : plain_ns) = costs.standalone_ns[i];
        }
        if (op.code != OpCode::AllReduce) continue;
        (op.residual_of >= 0 ? adding : plain) += 1;
        CHECK((op.residual_of >= 0) == (op.layer == 0));
      }
      CHECK(adding == 2);
      CHECK(plain == 4);
      CHECK(adding_ns > plain_ns);  // the add's bytes
    }
  }
}
