// Planner: a toy whose optimum is derived by hand, exhaustive k = 2 and coordinate descent
// against brute force, "don't overlap", thread-count independence, plan JSON round trip.
#include <doctest/doctest.h>

#include <filesystem>
#include <functional>
#include <set>
#include <tuple>

#include "../sim/toy.h"
#include "planner/generate.h"
#include "planner/plan.h"
#include "planner/plan_report.h"
#include "sim/config_paths.h"
#include "sim/error.h"
#include "sim/json_io.h"
#include "sim/plan_file.h"
#include "sim/profile_cost.h"
#include "sim/simulate.h"

using namespace tpo;
using namespace tpo::planner;
using sim::StrategyKind;

namespace {

// Only the row-parallel GEMMs (o_proj, down: 1 ns/token) and the all-reduce (2 ns/token)
// cost anything. One layer, S tokens in chunks a + b. By hand (see the test below):
// total(a) = 5S - 2a for a <= S/3 and 4S + a above, so the optimum is a = S/3: 13S/3.
class CommBoundToy final : public sim::CostModel {
 public:
  std::int64_t standalone_ns(const sim::Op& op) const override {
    if (op.code == sim::OpCode::OProj || op.code == sim::OpCode::Down) return op.tokens();
    if (op.code == sim::OpCode::AllReduce) return 2 * op.tokens();
    return 0;
  }
  double overlap_slowdown(const sim::Op&, sim::OpKind) const override { return 1.0; }
  std::string name() const override { return "comm-bound toy"; }
};

Plan toy_plan(std::vector<std::int64_t> seqs, std::int64_t layers, const std::string& strategies,
              std::int64_t align, std::int64_t max_chunks = 2) {
  Plan p;
  p.options.strategies = strategies;
  p.options.align = align;
  p.options.max_chunks = max_chunks;
  p.options.threads = 1;
  p.workload = test::toy_workload(seqs.front(), layers);
  p.cost_model = "toy";
  for (auto s : seqs) {
    PlanPoint pt;
    pt.seq = s;
    pt.workload.seq = s;
    p.points.push_back(pt);
  }
  return p;
}

}  // namespace

TEST_CASE("planner finds the hand-derived optimum split of a comm-bound toy") {
  // S = 12: none = o 12 + AR 24 + down 12 + AR 24 = 72. ISO with a = 4, b = 8:
  // o1 [0,4] AR_A1 [4,12] o2 [4,12] down1 [12,16] AR_A2 [12,28] down2 [28,36]
  // AR_M1 [28,36] AR_M2 [36,52] -> 52 = 13 * 12 / 3. a = 3 gives 57, a = 5 gives 53.
  Plan plan = toy_plan({12}, 1, "iso", 1);
  const CommBoundToy cm;
  run_plan(plan, &cm);
  const PlanPoint& p = plan.points[0];
  CHECK(p.none_ns() == 72);
  const Candidate& best = p.candidates[p.best];
  CHECK(best.strategy() == "iso");
  CHECK(best.spec.chunk_tokens == std::vector<std::int64_t>{4, 8});
  CHECK(best.total_ns == 52);
}

// The comm-bound toy as a profile would price it, measured at some GEMM rows only.
class PartlyMeasuredToy final : public sim::CostModel {
 public:
  PartlyMeasuredToy(std::set<std::int64_t> rows, double error)
      : rows_(std::move(rows)), error_(error) {}
  std::int64_t standalone_ns(const sim::Op& op) const override { return toy_.standalone_ns(op); }
  double overlap_slowdown(const sim::Op&, sim::OpKind) const override { return 1.0; }
  std::string name() const override { return "partly measured toy"; }
  bool gemm_rows_measured(std::int64_t m) const override { return rows_.count(m) > 0; }
  double gemm_interpolation_error() const override { return error_; }

 private:
  CommBoundToy toy_;
  std::set<std::int64_t> rows_;
  double error_;
};

TEST_CASE("--chunk-gain never turns a split that clears the threshold into don't-overlap") {
  // The comm-bound toy at 12 tokens: the best 3-chunk split beats the best 2-chunk one.
  const CommBoundToy cm;
  const auto plan_with = [&](double threshold, double gain) {
    Plan plan = toy_plan({12}, 1, "iso", 1, 3);
    plan.options.threshold = threshold;
    plan.options.chunk_gain = gain;
    run_plan(plan, &cm);
    return plan.points[0];
  };
  const PlanPoint all = plan_with(0, 0);
  double t2 = 0, t3 = 0;
  for (const auto& c : all.candidates) {
    if (c.spec.chunk_tokens.size() == 2) t2 = static_cast<double>(c.total_ns);
    if (c.spec.chunk_tokens.size() == 3) t3 = static_cast<double>(c.total_ns);
  }
  const double none = static_cast<double>(all.none_ns());
  REQUIRE(t3 > 0);
  REQUIRE(t3 < t2);
  REQUIRE(t2 < none);
  // A threshold the 3-chunk split clears and the 2-chunk one does not, and a gain the 3-chunk
  // split does not pay: it stays (the step-down would have answered none).
  const double threshold = 0.5 * (none / t3 + none / t2) - 1.0;
  const double gain = 2.0 * (t2 / t3 - 1.0);
  PlanPoint p = plan_with(threshold, gain);
  CHECK(p.candidates[p.best].spec.chunk_tokens.size() == 3);
  // With a threshold both clear, the same gain steps down to 2 chunks.
  p = plan_with(0.5 * (none / t2 - 1.0), gain);
  CHECK(p.candidates[p.best].spec.chunk_tokens.size() == 2);
}

TEST_CASE("interpolation risk: a split on interpolated GEMM rows is ranked that much slower") {
  // S = 12: 4,8 is predicted 52 ns, 6,6 54 ns (4S + a above S/3), none 72. Only 6 rows (and
  // 12, none's) are measured: 4,8 counts 52 (1 + r), beaten by 6,6 once r > 2/52 = 3.8%.
  auto best_of = [](double profile_error, double option) {
    Plan plan = toy_plan({12}, 1, "iso", 1);
    plan.options.interpolation_risk = option;
    const PartlyMeasuredToy cm({6, 12}, profile_error);
    run_plan(plan, &cm);
    return plan.points[0];
  };
  // auto: the cost model's own error.
  PlanPoint p = best_of(0.05, -1);
  CHECK(p.candidates[p.best].spec.chunk_tokens == std::vector<std::int64_t>{6, 6});
  CHECK(p.candidates[p.best].total_ns == 54);  // the prediction, not the ranking
  CHECK_FALSE(p.candidates[p.best].unmeasured_gemm_rows);
  CHECK(p.interpolation_risk == doctest::Approx(0.05));
  // By prediction alone the pick would have been 4,8: the plan says so.
  REQUIRE(p.best_by_prediction != p.best);
  CHECK(p.candidates[p.best_by_prediction].spec.chunk_tokens == std::vector<std::int64_t>{4, 8});
  // Below the gap the charge changes nothing; off, nothing is charged.
  p = best_of(0.03, -1);
  CHECK(p.candidates[p.best].spec.chunk_tokens == std::vector<std::int64_t>{4, 8});
  CHECK(p.best == p.best_by_prediction);
  p = best_of(0.05, 0);
  CHECK(p.candidates[p.best].spec.chunk_tokens == std::vector<std::int64_t>{4, 8});
  CHECK(p.interpolation_risk == 0);
  // An explicit fraction overrides the profile's.
  p = best_of(0.0, 0.10);
  CHECK(p.candidates[p.best].spec.chunk_tokens == std::vector<std::int64_t>{6, 6});
  // Every row measured: nothing charged, whatever the error.
  Plan plan = toy_plan({12}, 1, "iso", 1);
  const PartlyMeasuredToy all({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, 0.5);
  run_plan(plan, &all);
  CHECK(plan.points[0].candidates[plan.points[0].best].total_ns == 52);
  CHECK(plan.points[0].interpolation_risk == 0);
}

TEST_CASE("a chunk more only where it beats the best split of one fewer by --chunk-gain") {
  // Llama-2-70B on 8x RTX 4090: ISO's best 3-chunk split is 0.2% faster than its best 2-chunk
  // one at 5952 tokens (predicted), 1.3% at 11648.
  const auto plan_at = [](double gain) {
    PlanOptions o;
    o.workload.model = "llama2-70b";
    o.workload.hardware = "rtx4090x8";
    o.workload.tp = 8;
    o.seq = "5952,11648";
    o.strategies = "iso";
    o.chunk_gain = gain;
    o.threads = 1;
    o.quiet = true;
    Plan p = make_plan(o);
    run_plan(p);
    return p;
  };
  const auto chunks = [](const PlanPoint& p, std::size_t i) {
    return p.candidates[i].spec.chunk_tokens.size();
  };
  const auto best_with = [](const PlanPoint& p, std::size_t k) {
    std::int64_t t = 0;
    for (const auto& c : p.candidates) {
      if (c.spec.chunk_tokens.size() == k) t = c.total_ns;
    }
    REQUIRE(t > 0);
    return static_cast<double>(t);
  };
  const Plan fastest = plan_at(0), simplest = plan_at(0.005);
  for (std::size_t i = 0; i < 2; ++i) {
    const PlanPoint &f = fastest.points[i], &s = simplest.points[i];
    CAPTURE(f.seq);
    CHECK(chunks(f, f.best) == 3);  // the fastest, by however little
    CHECK(f.best == f.best_by_prediction);
    CHECK(s.best == s.best_by_prediction);
    // With the gain: 3 chunks only where they beat 2 by more than 0.5%.
    const double gain = best_with(s, 2) / best_with(s, 3) - 1.0;
    CHECK(chunks(s, s.best) == (gain > 0.005 ? 3u : 2u));
  }
  CHECK(chunks(simplest.points[0], simplest.points[0].best) == 2);
  CHECK(chunks(simplest.points[1], simplest.points[1].best) == 3);
  // The generate scenario picks alike.
  GenerateOptions g;
  g.plan.workload.model = "llama2-70b";
  g.plan.workload.hardware = "rtx4090x8";
  g.plan.workload.tp = 8;
  g.plan.strategies = "iso";
  g.plan.threads = 1;
  g.prompt = 5952;
  g.new_tokens = 4;
  g.batches = "1";
  for (const double gain : {0.0, 0.005}) {
    g.plan.chunk_gain = gain;
    const GenerateReport r = run_generate(g);
    CHECK(r.batches.at(0).results.at(1).prefill_spec.chunk_tokens.size() == (gain > 0 ? 2u : 3u));
  }
  // A gain outside [0, 1) is refused, naming the flag.
  PlanOptions bad;
  bad.chunk_gain = -0.1;
  CHECK_THROWS_WITH_AS(make_plan(bad), doctest::Contains("--chunk-gain"), InputError);
}

TEST_CASE("interpolation risk: the pruned split search equals brute force without pruning") {
  const PartlyMeasuredToy cm({64, 128, 192, 256, 384}, 0.03);
  for (std::int64_t seq : {448, 512}) {
    for (std::int64_t k : {2, 3}) {
      auto w = test::toy_workload(seq, 4);
      Evaluator ev(w, cm), evb(w, cm);
      ev.set_interpolation_risk(0.03);
      evb.set_interpolation_risk(0.03);
      evb.set_pruning(false);
      CAPTURE(seq);
      CAPTURE(k);
      const auto s = brute_force_split(ev, StrategyKind::Iso, k, 64);
      const auto b = brute_force_split(evb, StrategyKind::Iso, k, 64);
      CHECK(s.chunks == b.chunks);
      CHECK(s.score_ns == b.score_ns);
    }
  }
}

TEST_CASE(
    "k = 2 exhaustive search equals brute force, and coordinate descent matches it on small "
    "cases") {
  const test::ToyCost cm(1.15, 1.3);
  for (std::int64_t seq : {256, 320, 448}) {
    for (auto kind : {StrategyKind::Iso, StrategyKind::IsoLadder}) {
      auto w = test::toy_workload(seq, 4);
      sim::Workload wb = w;
      Evaluator ev(w, cm), evb(wb, cm);
      CAPTURE(seq);
      const auto s2 = search_split(ev, kind, 2, 32);
      const auto b2 = brute_force_split(evb, kind, 2, 32);
      CHECK(s2.chunks == b2.chunks);
      CHECK(s2.score_ns == b2.score_ns);
      const auto s3 = search_split(ev, kind, 3, 32);
      const auto b3 = brute_force_split(evb, kind, 3, 32);
      CHECK(s3.score_ns == doctest::Approx(b3.score_ns).epsilon(0.005));
      CHECK(s3.score_ns >= b3.score_ns);
    }
  }
}

TEST_CASE(
    "3-chunk descent stays within 1% of brute force on real models beyond the exhaustive limit") {
  // 8192 tokens on the 64-token grid: 8001 boundary pairs, more than kExhaustiveLimit.
  for (const auto& [model, hw, tp] :
       {std::tuple{"llama3-70b", "h100x8", 8}, std::tuple{"llama2-70b", "a800x8", 8}}) {
    sim::WorkloadOptions o;
    o.model = model;
    o.hardware = hw;
    o.tp = tp;
    o.seq = 8192;
    o.layers = 4;
    const auto w = sim::make_workload(o);
    const sim::AnalyticalCostModel cm(w.hardware, w.tp);
    Evaluator ev(w, cm);
    CAPTURE(model);
    const auto s2 = search_split(ev, StrategyKind::Iso, 2, 64);
    const auto s3 = search_split(ev, StrategyKind::Iso, 3, 64, s2.chunks);
    const auto b3 = brute_force_split(ev, StrategyKind::Iso, 3, 64);
    CHECK(s3.score_ns >= b3.score_ns);
    CHECK(s3.score_ns <= b3.score_ns * 1.01);
  }
}

TEST_CASE("the 3-layer surrogate matches the full timeline for identical layers") {
  const test::ToyCost cm(1.0, 1.0);
  for (std::int64_t layers : {4, 6}) {
    auto w = test::toy_workload(256, layers);
    Evaluator ev(w, cm);
    for (const auto& chunks : {std::vector<std::int64_t>{96, 160}, {128, 128}, {200, 56}}) {
      const sim::StrategySpec spec(StrategyKind::Iso, chunks);
      CHECK(ev.surrogate_ns(spec) == doctest::Approx(static_cast<double>(ev.full(spec).total_ns)));
    }
  }
}

TEST_CASE("where the 3-layer surrogate is not the full timeline, splits are timed in full") {
  // iso+ladder of Llama-3.1-8B at TP 8 on 8x H100, 1024 tokens: communication bound, so
  // after 3 layers the pipeline is not yet in its steady state and the surrogate ranks the
  // splits wrongly (it put 512,512 first; timed in full, 64,960 is 6% faster).
  sim::WorkloadOptions o;
  o.model = "llama3.1-8b";
  o.hardware = "h100x8";
  o.tp = 8;
  o.seq = 1024;
  const sim::Workload w = sim::make_workload(o);
  const auto cm = sim::make_cost_model(w, "");
  Evaluator ev(w, *cm);
  const auto full_ns = [&](const std::vector<std::int64_t>& c) {
    return ev.full(sim::StrategySpec(StrategyKind::IsoLadder, c)).total_ns;
  };
  std::int64_t best = std::numeric_limits<std::int64_t>::max();
  for (std::int64_t a = 64; a < 1024; a += 64) best = std::min(best, full_ns({a, 1024 - a}));
  const SplitResult surrogate = search_split(ev, StrategyKind::IsoLadder, 2, 64);
  REQUIRE_FALSE(surrogate.chunks.empty());
  CHECK(full_ns(surrogate.chunks) > best);  // the case this test is about
  const SplitResult planned = plan_split(ev, StrategyKind::IsoLadder, 2, 64);
  CHECK(full_ns(planned.chunks) == best);
  CHECK(planned.score_ns == doctest::Approx(static_cast<double>(best)));
  // Where the surrogate is exact (ISO with identical, steady layers) nothing changes.
  CHECK(plan_split(ev, StrategyKind::Iso, 2, 64).chunks ==
        search_split(ev, StrategyKind::Iso, 2, 64).chunks);
}

TEST_CASE("the full-timing fallback's settings hold on workloads they were not chosen on") {
  // The 0.5% tolerance and the 32/16 line settings were chosen on the benchmark sweep (TP 8,
  // 512-16k tokens). Here TP 2 and 4 at 2k and 32k tokens on three machines: the planned 2-chunk
  // split is within 0.01% of the best of every split timed in full (2026-12-03: worst 0.004%;
  // the surrogate's search alone 0.031% here, so this fails without the fallback).
  double worst = 0;
  for (const char* hw : {"rtx4090x8", "h100x8", "h200x8"}) {
    for (std::int64_t tp : {2, 4}) {
      for (std::int64_t seq : {2048, 32768}) {
        sim::WorkloadOptions o;
        o.model = "llama3.1-8b";
        o.hardware = hw;
        o.tp = tp;
        o.seq = seq;
        const sim::Workload w = sim::make_workload(o);
        const auto cm = sim::make_cost_model(w, "");
        for (auto kind : {StrategyKind::Iso, StrategyKind::IsoLadder}) {
          Evaluator ev(w, *cm);
          double best = std::numeric_limits<double>::infinity();
          for (std::int64_t a = 64; a < seq; a += 64) {
            best = std::min(
                best, static_cast<double>(ev.full(sim::StrategySpec(kind, {a, seq - a})).total_ns));
          }
          const SplitResult p = plan_split(ev, kind, 2, 64);
          REQUIRE_FALSE(p.chunks.empty());
          worst = std::max(
              worst,
              static_cast<double>(ev.full(sim::StrategySpec(kind, p.chunks)).total_ns) / best - 1);
        }
      }
    }
  }
  CHECK(worst <= 1e-4);
}

TEST_CASE("none is chosen when communication is negligible") {
  // (parallel-block would still win here, by dropping a norm and a residual add per layer: a
  // model change, not overlap, so it is left out unless allowed.)
  Plan plan = toy_plan({256, 512}, 2, "all", 64, 3);
  plan.workload.tp = 1;  // no all-reduce at all
  const test::ToyCost cm(1.1, 1.1);
  run_plan(plan, &cm);
  for (const auto& p : plan.points) {
    CHECK(p.best == 0);
    CHECK(p.candidates[0].strategy() == "none");
  }
}

TEST_CASE("model-changing strategies are chosen only with allow_arch_change") {
  for (bool allow : {false, true}) {
    Plan plan = toy_plan({512}, 4, "ladder", 64);
    plan.options.allow_arch_change = allow;
    const test::ToyCost cm(1.0, 1.0);
    run_plan(plan, &cm);
    const auto& p = plan.points[0];
    CHECK(p.candidates.size() >= 2);
    CHECK((p.best != 0) == allow);  // ladder hides comm in this toy; only allowed if asked
  }
}

TEST_CASE("the plan does not depend on the number of threads") {
  Plan a = toy_plan({128, 256, 384, 512, 640}, 3, "all", 32, 3);
  Plan b = a;
  b.options.threads = 2;
  const test::ToyCost cm(1.2, 1.4);
  run_plan(a, &cm);
  run_plan(b, &cm);
  CHECK(plan_json(a).dump() == plan_json(b).dump());
}

TEST_CASE("plan JSON round-trips through load_plan and looks up by prompt length") {
  Plan plan = toy_plan({256, 512, 1024}, 2, "iso,gemm-split", 64);
  const test::ToyCost cm(1.0, 1.0);
  run_plan(plan, &cm);
  // A field the toy does not use still travels (--sm-clock: validate --plan predicts at it).
  for (auto& pt : plan.points) pt.workload.sm_clock = 1500 + pt.seq;
  const auto path = std::filesystem::temp_directory_path() / "tpo_plan_roundtrip.json";
  write_file_atomic(path.string(), plan_json(plan).dump(1), "--json");
  const sim::PlanFile lp = sim::load_plan(path.string());
  REQUIRE(lp.entries.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& pt = plan.points[i];
    const auto& b = pt.candidates[pt.best];
    CHECK(lp.entries[i].seq == pt.seq);
    CHECK(lp.entries[i].run.spec == b.spec);           // every strategy parameter
    CHECK(lp.entries[i].run.workload == pt.workload);  // every workload field
    CHECK(lp.entries[i].run.workload.seq == pt.seq);
    CHECK(lp.entries[i].predicted_us == doctest::Approx(static_cast<double>(b.total_ns) / 1e3));
  }
  // Between planned lengths: the shorter entry's strategy, its split scaled to the length.
  const auto e700 = lp.lookup(700);
  CHECK(e700.run.spec.kind == lp.entries[1].run.spec.kind);
  CHECK(e700.run.workload.seq == 700);
  if (e700.run.spec.kind == StrategyKind::Iso) {
    std::int64_t sum = 0;
    for (auto c : e700.run.spec.chunk_tokens) {
      sum += c;
      CHECK(c > 0);
    }
    CHECK(sum == 700);
    CHECK(e700.run.spec.chunk_tokens.front() % 64 == 0);
  }
  CHECK(lp.lookup(100).run.spec.kind == StrategyKind::None);  // shorter than anything planned
  CHECK(lp.lookup(5000).run.spec.kind == lp.entries[2].run.spec.kind);
  std::filesystem::remove(path);
}

TEST_CASE("a generate report is read back as the runs validate --plan measures") {
  GenerateOptions g;
  g.plan.workload.model = "llama3-70b";
  g.plan.workload.hardware = "h100x8";
  g.plan.workload.tp = 8;
  g.plan.workload.layers = 2;
  g.plan.strategies = "iso,ladder,parallel-block";
  g.prompt = 256;
  g.new_tokens = 16;
  g.batches = "1,4";
  const auto rep = run_generate(g);
  const auto path = std::filesystem::temp_directory_path() / "tpo_generate_points.json";
  write_file_atomic(path.string(), generate_json(rep).dump(1), "--json");
  // Not a plan of prompt lengths: load_plan refuses it; load_points reads it.
  CHECK_THROWS_AS(sim::load_plan(path.string()), InputError);
  const sim::PlanFile lp = sim::load_points(path.string());
  CHECK(lp.prompt == 256);
  CHECK(lp.new_tokens == 16);
  REQUIRE(lp.entries.size() == 4);  // per batch: its prefill and its decode step
  REQUIRE(lp.generation.size() == 8);
  for (std::size_t b = 0; b < 2; ++b) {
    const auto& res = rep.batches[b].results;
    // The pick: the fastest predicted tokens/s of the batch among the strategies that keep the
    // model, none unless it beats none by more than the threshold; its two runs the batch's
    // points. (Ladder and parallel-block change the model: never the pick, 2026-12-05.)
    std::size_t best = 0;
    for (std::size_t k = 0; k < res.size(); ++k) {
      if (res[k].preserves_function && res[k].speedup > res[best].speedup) best = k;
    }
    if (res[best].speedup <= 1.0 + g.plan.threshold) best = 0;
    const sim::GenerationPoint* picked = nullptr;
    for (std::size_t k = 0; k < 4; ++k) {
      const auto& gp = lp.generation[b * 4 + k];
      CHECK(gp.batch == rep.batches[b].batch);
      CHECK(gp.strategy == res[k].strategy);
      CHECK(gp.picked == (k == best));
      CHECK(gp.prefill.spec == res[k].prefill_spec);
      CHECK(gp.decode.spec == res[k].decode_spec);
      CHECK(gp.prefill.workload.embed_head);
      CHECK(gp.prefill.workload.seq == 256);
      CHECK(gp.decode.workload.phase == "decode");
      // The middle step's context: the 15 steps run at 257 .. 271.
      CHECK(gp.decode.workload.context == 264);
      CHECK(gp.prefill_point == 2 * b);
      CHECK(gp.decode_point == 2 * b + 1);
      if (gp.picked) picked = &gp;
    }
    REQUIRE(picked != nullptr);
    const auto& pre = lp.entries[2 * b];
    const auto& dec = lp.entries[2 * b + 1];
    CHECK(pre.run == picked->prefill);
    CHECK(dec.run == picked->decode);
    CHECK(dec.seq == 264);
    CHECK(pre.alternatives_where.size() == pre.alternatives.size());
    CHECK(pre.run_where == picked->where + ".prefill_run");
    // Alternatives: the other strategies' runs in that phase, once each, never none nor the pick.
    for (const auto* e : {&pre, &dec}) {
      std::set<std::string> seen;
      for (std::size_t a = 0; a < e->alternatives.size(); ++a) {
        const auto& alt = e->alternatives[a];
        CHECK(alt.first.spec.kind != StrategyKind::None);
        CHECK_FALSE(alt.first == e->run);
        CHECK(seen.insert(sim::planned_run_json(alt.first).dump()).second);
        if (a > 0) CHECK(e->alternatives[a - 1].second <= alt.second);
      }
    }
  }
  // A report written before its runs were recorded: the field is named, with what to do.
  auto j = nlohmann::json::parse(generate_json(rep).dump());
  j["batches"][1]["results"][2].erase("decode_run");
  const auto old_path = std::filesystem::temp_directory_path() / "tpo_generate_old.json";
  write_file_atomic(old_path.string(), j.dump(), "--json");
  try {
    sim::load_points(old_path.string());
    FAIL("a report without decode_run was read");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("batches[1].results[2].decode_run") != std::string::npos);
    CHECK(std::string(e.what()).find("plan --scenario generate") != std::string::npos);
  }
  // Inconsistent reports are refused, naming the field: a strategy decoding at another context,
  // a batch twice, a first result that is not none, a missing decode step time.
  const auto refused = [&](const std::function<void(nlohmann::json&)>& edit, const char* field) {
    auto k = nlohmann::json::parse(generate_json(rep).dump());
    edit(k);
    static int n = 0;
    const auto f = std::filesystem::temp_directory_path() /
                   ("tpo_generate_edit" + std::to_string(n++) + ".json");
    write_file_atomic(f.string(), k.dump(), "--json");
    CAPTURE(field);
    CHECK_THROWS_WITH_AS(sim::load_points(f.string()), doctest::Contains(field), InputError);
    std::filesystem::remove(f);
  };
  refused(
      [](nlohmann::json& k) {
        k["batches"][0]["results"][2]["decode_run"]["workload"]["context"] = 300;
      },
      "batches[0].results[2].decode_run.workload");
  refused([](nlohmann::json& k) { k["batches"][1]["batch"] = 1; }, "batches[1].batch");
  refused([](nlohmann::json& k) { k["batches"][0]["results"][0]["strategy"] = "iso"; },
          "batches[0].results[0].strategy");
  refused([](nlohmann::json& k) { k["batches"][0]["results"][1].erase("decode_step_us"); },
          "batches[0].results[1].decode_step_us");
  refused([](nlohmann::json& k) { k["batches"][0]["decode_context"] = 999; },
          "batches[0].results[0].decode_run.workload.context");
  // Labels and figures that do not agree with the runs: a strategy name unknown, another
  // strategy's runs under a name, a strategy twice, tokens/s or a speedup edited, new tokens
  // whose middle step is not the runs' context.
  refused([](nlohmann::json& k) { k["batches"][0]["results"][2]["strategy"] = "ladderr"; },
          "batches[0].results[2].strategy");
  refused(
      [](nlohmann::json& k) {
        auto& res = k["batches"][0]["results"];
        for (std::size_t a = 1; a < res.size(); ++a) {
          if (res[a]["strategy"] == "iso") continue;
          res[a]["strategy"] = "iso";  // iso is listed too: a run of another strategy, or twice
          break;
        }
      },
      "batches[0].results[");
  refused([](nlohmann::json& k) { k["batches"][0]["results"][1]["tokens_per_s"] = 99999.0; },
          "batches[0].results[1].tokens_per_s");
  refused([](nlohmann::json& k) { k["batches"][0]["results"][1]["speedup"] = 50.0; },
          "batches[0].results[1].speedup");
  refused([](nlohmann::json& k) { k["options"]["new_tokens"] = 100; }, "batches[0].results[0]");
  refused([](nlohmann::json& k) { k["schema"] = "tpo.generate/2"; }, "\"tpo.generate/1\"");
  // A tie goes to the first listed: none, when nothing beats it.
  {
    auto k = nlohmann::json::parse(generate_json(rep).dump());
    const auto none = k["batches"][0]["results"][0];
    for (auto& res : k["batches"][0]["results"]) {
      for (const char* f :
           {"prefill_us", "decode_step_us", "total_us", "tokens_per_s", "speedup"}) {
        res[f] = none[f];
      }
    }
    const auto f = std::filesystem::temp_directory_path() / "tpo_generate_tie.json";
    write_file_atomic(f.string(), k.dump(), "--json");
    const sim::PlanFile t = sim::load_points(f.string());
    CHECK(t.generation[0].picked);
    CHECK(t.entries[0].run.spec.kind == StrategyKind::None);
    std::filesystem::remove(f);
  }
  // A run of the wrong phase is the file's fault, named.
  j = nlohmann::json::parse(generate_json(rep).dump());
  j["batches"][0]["results"][1]["prefill_run"]["workload"]["phase"] = "decode";
  const auto bad_path = std::filesystem::temp_directory_path() / "tpo_generate_bad.json";
  write_file_atomic(bad_path.string(), j.dump(), "--json");
  CHECK_THROWS_WITH_AS(sim::load_points(bad_path.string()),
                       doctest::Contains("batches[0].results[1].prefill_run.workload"), InputError);
  for (const auto& f : {path, old_path, bad_path}) std::filesystem::remove(f);
}

TEST_CASE("lookup scales a planned split to the prompt length, on the grid") {
  sim::PlanFile lp;
  lp.align = 64;
  sim::PlanEntry e;
  e.seq = 1024;
  e.run.spec = sim::StrategySpec(StrategyKind::Iso, {512, 512});
  e.chunk_fractions = {0.5, 0.5};
  lp.entries.push_back(e);
  CHECK(lp.lookup(1500).run.spec.chunk_tokens == std::vector<std::int64_t>{768, 732});
  CHECK(lp.lookup(1024).run.spec.chunk_tokens == std::vector<std::int64_t>{512, 512});
  CHECK(lp.lookup(1000).run.spec.kind == StrategyKind::None);
}

TEST_CASE("prompt-length lists and ranges, and their errors") {
  CHECK(parse_seq_list("512:4096", 64) == std::vector<std::int64_t>{512, 1024, 2048, 4096});
  CHECK(parse_seq_list("1000,3000", 64) == std::vector<std::int64_t>{1000, 3000});
  // In any order, shortest first (the lookup, the chart and the CSV read them so).
  CHECK(parse_seq_list("2048,512,1024", 64) == std::vector<std::int64_t>{512, 1024, 2048});
  CHECK(parse_seq_list("1024:2048:1.5", 64) == std::vector<std::int64_t>{1024, 1536, 2048});
  CHECK_THROWS_AS(parse_seq_list("4096:512", 64), InputError);
  CHECK_THROWS_AS(parse_seq_list("512:4096:1", 64), InputError);
  CHECK_THROWS_AS(parse_seq_list("abc", 64), InputError);
  CHECK_THROWS_AS(parse_seq_list("1:2:3:4", 64), InputError);
  CHECK_THROWS_AS(parse_seq_list("100.5", 64), InputError);
  // A length listed twice would be planned twice; a trailing comma hides a missing length.
  CHECK_THROWS_WITH_AS(parse_seq_list("1024,1024", 64), doctest::Contains("listed twice"),
                       InputError);
  CHECK_THROWS_WITH_AS(parse_seq_list("1024,", 64), doctest::Contains("ends with a comma"),
                       InputError);
}

TEST_CASE("a deep model's full-length time from two short graphs is exactly the full run's") {
  // Every strategy and its variants, ISO at 2 and 3 chunks, on machines with fixed factors
  // and with the contention model, a measured profile, two requests, a cached prefix, the
  // embedding and head, and several depths: total and exposed communication must equal the
  // full graph's run, and the shortcut must have been taken (so the test can fail both ways).
  struct Case {
    const char* model;
    const char* hardware;
    std::int64_t tp, seq, batch, context, layers;
    bool embed_head;
    const char* profile;  // under configs/profiles, or ""
  };
  const Case cases[] = {
      {"llama2-70b", "rtx4090x8", 8, 4096, 1, -1, 0, false, ""},
      {"llama3-70b", "h200x8", 8, 8192, 1, -1, 0, false, ""},
      {"llama3.1-8b", "a800x8", 8, 2048, 2, -1, 0, true, ""},
      {"qwen2.5-72b", "h100x8", 8, 3000, 1, 1024, 19, false, ""},
      {"llama-30b", "h100x8-nop2p", 4, 16384, 1, -1, 33, true, ""},
      {"llama2-70b", "h200x8", 8, 4096, 1, -1, 21, false, "h200-llama2-70b-tp8.json"},
  };
  std::int64_t compared = 0, shortened = 0;
  for (const Case& c : cases) {
    sim::WorkloadOptions o;
    o.model = c.model;
    o.hardware = c.hardware;
    o.tp = c.tp;
    o.seq = c.seq;
    o.batch = c.batch;
    o.context = c.context;
    o.layers = c.layers;
    o.embed_head = c.embed_head;
    if (*c.profile) o.profile = sim::config_dir() + "/profiles/" + c.profile;
    const sim::Workload w = sim::make_workload(o);
    auto cm = sim::make_cost_model(w, o.profile);
    Evaluator ev(w, *cm);
    for (const StrategyKind kind : sim::all_strategies()) {
      std::vector<sim::StrategySpec> specs = sim::strategy(kind).variants(w);
      for (std::int64_t chunks : {2, 3}) {
        sim::StrategyOptions so;
        so.chunks = chunks;
        specs.push_back(sim::make_spec(so, w, kind));
      }
      for (const sim::StrategySpec& spec : specs) {
        if (!sim::not_applicable_reason(w, spec).empty()) continue;
        CAPTURE(c.model);
        CAPTURE(c.hardware);
        CAPTURE(sim::strategy_name(kind));
        CAPTURE(sim::variant_text(spec));
        const Candidate a = ev.full(spec);
        const Candidate b = ev.full_unshortened(spec);
        CHECK(a.total_ns == b.total_ns);
        CHECK(a.exposed_comm_ns == b.exposed_comm_ns);
        ++compared;
      }
    }
    shortened += ev.shortened();
  }
  CHECK(compared > 60);
  CHECK(shortened > compared / 2);
}
