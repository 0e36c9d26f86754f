// Planner search: candidates per point, ISO split search, the thread pool over points.
#include "planner/plan.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "planner/split_scorer.h"
#include "sim/error.h"
#include "sim/json_io.h"
#include "sim/profile_cost.h"
#include "sim/report.h"

namespace tpo::planner {

using sim::StrategyKind;
using sim::StrategySpec;

std::vector<std::int64_t> parse_seq_list(const std::string& text, std::int64_t align) {
  auto num = [&](const std::string& s) -> double {
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != s.size() || !std::isfinite(v) || v <= 0) {
      throw InputError("--seq", text, "'" + s + "' is not a positive number");
    }
    if (v > 1e9) throw InputError("--seq", text, "'" + s + "' is above 1e9");
    return v;
  };
  std::vector<std::int64_t> out;
  if (text.find(':') != std::string::npos) {
    std::vector<std::string> parts;
    std::stringstream ss(text);
    for (std::string p; std::getline(ss, p, ':');) parts.push_back(p);
    if (parts.size() < 2 || parts.size() > 3) {
      throw InputError("--seq", text, "a range is A:B (doubling) or A:B:FACTOR");
    }
    const double lo = num(parts[0]), hi = num(parts[1]);
    const double f = parts.size() == 3 ? num(parts[2]) : 2.0;
    if (lo > hi) throw InputError("--seq", text, "the range's start is above its end");
    if (f <= 1.0) throw InputError("--seq", text, "the step factor must be > 1");
    // The start and the end are kept as given; the points between are rounded to the grid.
    for (double x = lo; x <= hi * (1 + 1e-9); x *= f) {
      auto v = static_cast<std::int64_t>(std::llround(x));
      if (!out.empty() && v >= align) v = (v + align / 2) / align * align;
      if (out.empty() || out.back() < v) out.push_back(v);
      if (out.size() > 4096) throw InputError("--seq", text, "more than 4096 points");
    }
    // The range's end is always planned, even when the factor steps over it.
    const auto end = static_cast<std::int64_t>(std::llround(hi));
    while (!out.empty() && out.back() >= end) out.pop_back();
    out.push_back(end);
  } else {
    if (!text.empty() && text.back() == ',') {
      throw InputError("--seq", text, "ends with a comma: a length is missing after it");
    }
    std::stringstream ss(text);
    for (std::string p; std::getline(ss, p, ',');) {
      const double v = num(p);
      if (v != std::floor(v)) throw InputError("--seq", text, "'" + p + "' is not an integer");
      const auto n = static_cast<std::int64_t>(v);
      if (std::find(out.begin(), out.end(), n) != out.end()) {
        throw InputError("--seq", text, std::to_string(n) + " is listed twice");
      }
      out.push_back(n);
    }
  }
  if (out.empty()) throw InputError("--seq", text, "no prompt lengths given");
  // Shortest first, as the lookup, the chart and the CSV read them.
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::int64_t> parse_int_list(const std::string& text, const char* option,
                                         std::int64_t hi, const char* what) {
  std::vector<std::int64_t> out;
  std::stringstream ss(text);
  for (std::string p; std::getline(ss, p, ',');) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(p, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != p.size() || v < 1 || v > hi) {
      throw InputError(option, text, "'" + p + "' is not " + what);
    }
    // A value given twice is refused: planned once, it would leave one of two columns the user
    // asked for missing from the report without a word.
    if (std::find(out.begin(), out.end(), v) != out.end()) {
      throw InputError(option, text, "'" + p + "' is given twice: give each value once");
    }
    out.push_back(v);
  }
  return out;
}

std::vector<std::int64_t> parse_budget_list(const std::string& text) {
  if (text.empty()) return {};
  return parse_int_list(text, "--comm-ctas", 1024, "a CTA count between 1 and 1024");
}

std::vector<StrategyKind> parse_strategy_list(const std::string& text) {
  if (text == "all") return sim::all_strategies();
  std::vector<StrategyKind> out{StrategyKind::None};
  std::stringstream ss(text);
  for (std::string p; std::getline(ss, p, ',');) {
    const sim::StrategyDescriptor* d = sim::find_strategy(p);
    if (!d) {
      throw InputError(
          "--strategies", text,
          "unknown strategy '" + p + "' (choose from: " + sim::strategy_names() + ", or all)");
    }
    if (std::find(out.begin(), out.end(), d->kind) == out.end()) out.push_back(d->kind);
  }
  return out;
}

Evaluator::Evaluator(const sim::Workload& w, const sim::CostModel& cm) : w_(w), cm_(cm) {
  // Full-length candidates repeat one layer many times: the engine skips the steady state
  // (exactly the full run's timeline; see Engine::set_skip_steady_state).
  engine_.set_skip_steady_state(true);
}

std::int64_t Evaluator::run_graph(const sim::Workload& w, const StrategySpec& spec,
                                  std::int64_t* exposed, std::size_t* skipped, std::size_t* ops) {
  const sim::Schedule s = sim::build_schedule(w, spec);
  const sim::OpCosts c = sim::cost_schedule(s, cm_);
  const sim::Timeline& tl = engine_.run(s, c);
  if (exposed) *exposed = tl.exposed_comm_ns;
  if (skipped) *skipped = engine_.ops_skipped();
  if (ops) *ops = s.ops.size();
  return tl.total_ns;
}

std::int64_t time_from_runs(const sim::Workload& w, const StrategySpec& spec, sim::ExecMode exec,
                            const std::function<LayerRun(std::int64_t)>& run, std::int64_t* exposed,
                            bool* shortened) {
  if (shortened) *shortened = false;
  constexpr std::int64_t kShort = 8;
  // Only where every layer is built alike (a ladder on the last N layers is not), and where
  // the engine can skip at all (it does not with launch release times: eager or graph).
  const bool alike = (spec.ladder_layers == 0 || !sim::strategy(spec.kind).uses_ladder_layers()) &&
                     sim::layers_alike(w.model, w.layers, w.seq + w.context);
  if (alike && exec == sim::ExecMode::Queued && w.layers > 2 * kShort + 2) {
    const LayerRun a = run(kShort);
    if (a.skipped > 0) {
      const LayerRun b = run(kShort + 1);
      if (b.ops > a.ops && b.skipped == a.skipped + (b.ops - a.ops)) {
        const std::int64_t more = w.layers - kShort;
        if (exposed) *exposed = a.exposed_ns + more * (b.exposed_ns - a.exposed_ns);
        if (shortened) *shortened = true;
        return a.total_ns + more * (b.total_ns - a.total_ns);
      }
    }
  }
  const LayerRun r = run(w.layers);
  if (exposed) *exposed = r.exposed_ns;
  return r.total_ns;
}

std::int64_t Evaluator::time_ns(const sim::Workload& w, const StrategySpec& spec,
                                std::int64_t* exposed) {
  ++simulations_;
  bool shortened = false;
  const std::int64_t t = time_from_runs(
      w, spec, cm_.exec(),
      [&](std::int64_t layers) {
        sim::Workload a = w;
        a.layers = layers;
        LayerRun r;
        r.total_ns = run_graph(a, spec, &r.exposed_ns, &r.skipped, &r.ops);
        return r;
      },
      exposed, &shortened);
  shortened_ += shortened;
  return t;
}

Candidate Evaluator::full(const StrategySpec& spec) {
  Candidate c;
  c.spec = spec;
  c.total_ns = time_ns(w_, spec, &c.exposed_comm_ns);
  return c;
}

Candidate Evaluator::full_unshortened(const StrategySpec& spec) {
  Candidate c;
  c.spec = spec;
  ++simulations_;
  c.total_ns = run_graph(w_, spec, &c.exposed_comm_ns, nullptr, nullptr);
  return c;
}

double Evaluator::surrogate_ns(const StrategySpec& spec) {
  // A template of a few layers; every further period of layers repeats the steady-state step
  // between the starts of layers 1 and 1 + period (the first op of each). Layers that do not
  // repeat (sim::layer_repeat's steps 0) are timed in full.
  const sim::LayerRepeat rep = sim::layer_repeat(w_.model, w_.layers, w_.seq + w_.context);
  if (rep.steps == 0) return static_cast<double>(time_ns(w_, spec, nullptr));
  sim::Workload w = w_;
  w.layers = rep.template_layers;
  const sim::Schedule s = sim::build_schedule(w, spec);
  const sim::Timeline& tl = engine_.run(s, sim::cost_schedule(s, cm_));
  ++simulations_;
  std::int64_t start1 = -1, start2 = -1;
  for (std::size_t i = 0; i < s.ops.size() && start2 < 0; ++i) {
    if (s.ops[i].layer == 1 && start1 < 0) start1 = tl.start_ns[i];
    if (s.ops[i].layer == 1 + rep.period) start2 = tl.start_ns[i];
  }
  return static_cast<double>(tl.total_ns) +
         static_cast<double>(rep.steps) * static_cast<double>(start2 - start1);
}

double Evaluator::split_score_ns(SplitScorer& scorer, const std::vector<std::int64_t>& chunks,
                                 double best, bool* exact) {
  ++simulations_;
  const double f = risk_factor(chunks);
  if (f == 1.0) return scorer.score_ns(chunks, best, exact);
  bool whole = true;
  const double s = scorer.score_ns(chunks, best / f, &whole) * f;
  if (exact) *exact = whole;
  // A bound >= best / f times f may round below best: it must still read as no better.
  return whole ? s : std::max(s, best);
}

double Evaluator::risk_factor(const std::vector<std::int64_t>& chunks) const {
  if (risk_ <= 0) return 1.0;
  for (auto c : chunks) {
    if (!cm_.gemm_rows_measured(c * w_.batch)) return 1.0 + risk_;
  }
  return 1.0;
}

std::string join_tokens(const std::vector<std::int64_t>& v) {
  std::string t;
  for (auto x : v) {
    if (!t.empty()) t += ',';
    t += std::to_string(x);
  }
  return t;
}

Plan make_plan(const PlanOptions& o) {
  if (o.align < 1) throw InputError("--align", std::to_string(o.align), "must be >= 1");
  if (o.max_chunks < 2) {
    throw InputError("--max-chunks", std::to_string(o.max_chunks), "must be >= 2");
  }
  if (o.max_chunks > 8) {
    throw InputError("--max-chunks", std::to_string(o.max_chunks),
                     "at most 8 (the split search grows with each chunk)");
  }
  sim::check_threshold(o.threshold, "--threshold");
  sim::check_threshold(o.chunk_gain, "--chunk-gain");
  if (o.threads < 0 || o.threads > 1024) {
    throw InputError("--threads", std::to_string(o.threads),
                     "must be between 0 (all cores) and 1024");
  }
  parse_budget_list(o.comm_ctas);
  parse_strategy_list(o.strategies);
  check_distinct_outputs({{o.json_path, "--json"}, {o.csv_path, "--csv"}, {o.svg_path, "--svg"}});
  for (const auto& [path, opt] : {std::pair{o.json_path, "--json"}, std::pair{o.csv_path, "--csv"},
                                  std::pair{o.svg_path, "--svg"}}) {
    if (!path.empty()) check_writable(path, opt);
  }
  Plan plan;
  plan.options = o;
  const auto seqs = parse_seq_list(o.seq, o.align);
  if (o.strategies != "all" && o.workload.phase == "prefill") {
    const auto kinds = parse_strategy_list(o.strategies);
    const bool iso = std::find(kinds.begin(), kinds.end(), StrategyKind::Iso) != kinds.end() ||
                     std::find(kinds.begin(), kinds.end(), StrategyKind::IsoLadder) != kinds.end();
    for (auto s : seqs) {
      if (iso && (s - 1) / o.align < 1) {
        throw InputError("--seq", std::to_string(s),
                         "is too short to cut into 2 chunks on the " + std::to_string(o.align) +
                             "-token grid (--align); iso needs more than --align tokens");
      }
    }
  }
  // Every point validated up front, and recorded with every field explicit. A length that
  // does not fit (memory) is refused with the lengths that do.
  std::optional<FieldError> first_error;
  std::vector<std::int64_t> fit;
  for (auto s : seqs) {
    PlanPoint p;
    p.seq = s;
    p.batch = o.workload.batch;
    sim::Workload w;
    try {
      w = sim::make_workload(point_workload(o, s));
    } catch (const FieldError& e) {
      if (e.name() != "seq" && e.name() != "context" && e.name() != "batch") throw;
      if (!first_error) first_error = e;
      continue;
    }
    fit.push_back(s);
    p.workload = sim::explicit_options(point_workload(o, s), w);
    if (plan.points.empty()) plan.workload = w;
    plan.points.push_back(p);
  }
  if (first_error) {
    if (fit.empty()) throw *first_error;
    std::string list;
    for (auto s : fit) {
      if (!list.empty()) list += ',';
      list += std::to_string(s);
    }
    throw FieldError(
        first_error->name(), first_error->value(),
        first_error->problem() + " (of the lengths asked for, these fit: " + list + ")");
  }
  plan.cost_model = "analytical";
  return plan;
}

sim::WorkloadOptions point_workload(const PlanOptions& o, std::int64_t seq) {
  sim::WorkloadOptions w = o.workload;
  w.embed_head = false;
  w.seq = seq;
  // decode: seq stands for the context unless a context is given.
  return w;
}

std::vector<Variant> strategy_variants(Evaluator& ev, StrategyKind kind, std::int64_t align,
                                       std::int64_t max_chunks) {
  const sim::Workload& w = ev.workload();
  const sim::StrategyDescriptor& d = sim::strategy(kind);
  std::vector<Variant> out;
  // The best split for each chunk count, searched.
  if (d.uses_chunks() && sim::not_applicable_reason(w, StrategySpec(kind)).empty()) {
    // With an interpolation charge, the best split by prediction alone is searched too and
    // kept as a candidate where it differs, so the plan can say what the charge changed.
    const double risk = ev.interpolation_risk();
    std::vector<std::int64_t> seed, seed0;
    for (std::int64_t c = 2; c <= max_chunks; ++c) {
      const SplitResult r = plan_split(ev, kind, c, align, seed);
      if (r.chunks.empty()) continue;
      seed = r.chunks;
      out.push_back({StrategySpec(kind, r.chunks), join_tokens(r.chunks)});
      if (risk <= 0) continue;
      ev.set_interpolation_risk(0);
      const SplitResult r0 = plan_split(ev, kind, c, align, seed0);
      ev.set_interpolation_risk(risk);
      seed0 = r0.chunks;
      if (r0.chunks != r.chunks) {
        out.push_back({StrategySpec(kind, r0.chunks), join_tokens(r0.chunks)});
      }
    }
  }
  for (const StrategySpec& s : d.variants(w)) {
    if (sim::not_applicable_reason(w, s).empty()) out.push_back({s, sim::variant_text(s)});
  }
  return out;
}

void run_jobs(std::size_t n, int threads, const std::function<void(std::size_t)>& job,
              const std::function<void(std::size_t)>& done) {
  std::size_t t = threads > 0 ? static_cast<std::size_t>(threads)
                              : std::max(1u, std::thread::hardware_concurrency());
  t = std::min(t, n);
  std::atomic<std::size_t> next{0}, finished{0};
  std::mutex mu;
  std::exception_ptr error;
  auto worker = [&] {
    for (std::size_t j = next++; j < n; j = next++) {
      try {
        job(j);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
      }
      const std::size_t d = ++finished;
      if (done) {
        std::lock_guard<std::mutex> lock(mu);
        done(d);
      }
    }
  };
  std::vector<std::thread> pool;
  for (std::size_t i = 1; i < t; ++i) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

namespace {

// A cost model per comm SM budget searched (the first is the default budget).
struct Budget {
  std::int64_t ctas = 0;  // 0: the default
  const sim::CostModel* cm = nullptr;
};

void plan_point(const Plan& plan, PlanPoint& point, const std::vector<Budget>& budgets) {
  const PlanOptions& o = plan.options;
  sim::Workload w = plan.workload;
  if (w.phase == sim::Phase::Prefill) {
    w.seq = point.seq;
  } else {
    w.context = o.workload.context < 0 ? point.seq : o.workload.context;
  }
  const sim::CostModel& cm = *budgets.front().cm;
  std::int64_t simulations = 0;
  {
    Evaluator ev(w, cm);
    Candidate none = ev.full(StrategySpec(StrategyKind::None));
    none.detail.assign(1, '-');
    point.candidates.push_back(none);
    simulations += ev.simulations();
  }
  const bool searched = budgets.size() > 1;
  const double risk =
      o.interpolation_risk < 0 ? cm.gemm_interpolation_error() : o.interpolation_risk;
  for (std::size_t bi = searched ? 1 : 0; bi < budgets.size(); ++bi) {
    Evaluator ev(w, *budgets[bi].cm);
    ev.set_pruning(o.prune);
    ev.set_coarse_lines(o.coarse_lines);
    ev.set_interpolation_risk(risk);
    for (StrategyKind k : parse_strategy_list(o.strategies)) {
      if (k == StrategyKind::None) continue;
      for (auto& v : strategy_variants(ev, k, o.align, o.max_chunks)) {
        Candidate c = ev.full(v.spec);
        c.detail = std::move(v.detail);
        c.comm_ctas = budgets[bi].ctas;
        if (searched) c.detail += " @" + std::to_string(c.comm_ctas) + " CTAs";
        point.candidates.push_back(std::move(c));
      }
    }
    simulations += ev.simulations();
  }
  // Candidates ranked by predicted time, those with GEMMs at rows the profile did not measure
  // as if `risk` slower; and by prediction alone, to say where that changed the pick.
  // (Each candidate's unmeasured rows are found with any profile, charged or not: reports
  // carry them; until 2026-12-05 only with a charge, so they read false without one.)
  bool charged = false;
  if (risk > 0 || !o.workload.profile.empty()) {
    for (auto& c : point.candidates) {
      c.unmeasured_gemm_rows = sim::has_unmeasured_gemm_rows(sim::build_schedule(w, c.spec), cm);
      charged = charged || (risk > 0 && c.unmeasured_gemm_rows);
    }
  }
  point.interpolation_risk = charged ? risk : 0.0;
  auto ranked = [&](const Candidate& c) {
    return static_cast<double>(c.total_ns) * (c.unmeasured_gemm_rows ? 1.0 + risk : 1.0);
  };
  point.best = point.best_by_prediction = 0;
  for (std::size_t i = 0; i < point.candidates.size(); ++i) {
    Candidate& c = point.candidates[i];
    c.speedup =
        c.total_ns > 0 ? static_cast<double>(point.none_ns()) / static_cast<double>(c.total_ns) : 0;
    c.allowed = c.preserves_function() || o.allow_arch_change;
    if (!c.allowed) continue;
    if (ranked(c) < ranked(point.candidates[point.best])) point.best = i;
    if (c.total_ns < point.candidates[point.best_by_prediction].total_ns) {
      point.best_by_prediction = i;
    }
  }
  // A prompt cut in one chunk more only where it pays (--chunk-gain) over the best cut of the
  // same strategy in one chunk fewer (at any comm budget searched, or at the pick's own), down
  // to 2 chunks; never down to a cut that would no longer clear the threshold over none where
  // the pick did (the answer would turn to "don't overlap").
  const auto fewest_paying = [&](std::size_t pick, auto&& time, bool same_budget) {
    const auto& cs = point.candidates;
    return sim::fewest_paying_chunks(
        pick, cs.size(), [&](std::size_t i) { return cs[i].spec.chunk_tokens.size(); },
        [&](std::size_t i) { return time(cs[i]); },
        [&](std::size_t i, std::size_t p) {
          return cs[i].allowed && cs[i].spec.kind == cs[p].spec.kind &&
                 (!same_budget || cs[i].comm_ctas == cs[p].comm_ctas);
        },
        time(cs.front()), o.threshold, o.chunk_gain);
  };
  point.best = fewest_paying(point.best, ranked, false);
  point.best_by_prediction = fewest_paying(
      point.best_by_prediction, [](const Candidate& c) { return static_cast<double>(c.total_ns); },
      false);
  // "Don't overlap" unless the winner beats none by more than the threshold (as ranked: a
  // charged winner beats none by that much after its charge).
  if (sim::keeps_none(ranked(point.candidates.front()), ranked(point.candidates[point.best]),
                      o.threshold)) {
    point.best = 0;
  }
  if (point.candidates[point.best_by_prediction].speedup <= 1.0 + o.threshold) {
    point.best_by_prediction = 0;
  }
  point.simulations = simulations;
  {
    const sim::Schedule best = sim::build_schedule(w, point.candidates[point.best].spec);
    point.cost_sources = sim::cost_sources(best, cm);
    std::set<std::int64_t> rows;
    for (const auto& op : best.ops) {
      if (op.kind == sim::OpKind::Gemm && cm.origin(op) == "interpolated") rows.insert(op.m);
    }
    point.gemm_rows_interpolated.assign(rows.begin(), rows.end());
  }
  if (searched) {
    // What the plan would pick at the default budget alone (ranked, and held to the threshold,
    // as above), for what the chosen budget gains: none where no overlap beat it there.
    const std::int64_t def = budgets[1].ctas;
    const Candidate* pick = nullptr;
    for (const auto& c : point.candidates) {
      if (c.allowed && c.comm_ctas == def && (!pick || ranked(c) < ranked(*pick))) pick = &c;
    }
    if (pick) {
      pick = &point.candidates[fewest_paying(
          static_cast<std::size_t>(pick - point.candidates.data()), ranked, true)];
    }
    point.best_at_default_budget_ns =
        !pick || sim::keeps_none(ranked(point.candidates.front()), ranked(*pick), o.threshold)
            ? point.none_ns()
            : pick->total_ns;
  }
  // The run a plan file records: the point's workload at the chosen budget.
  if (point.candidates[point.best].comm_ctas > 0) {
    point.workload.comm_ctas = point.candidates[point.best].comm_ctas;
  }
}

}  // namespace

void run_plan(Plan& plan, const sim::CostModel* override_cm) {
  const auto own = sim::make_cost_model(plan.workload, plan.options.workload.profile);
  const sim::CostModel& cm = override_cm ? *override_cm : *own;
  plan.cost_model = cm.name();
  plan.overlap_model = cm.overlap_model();
  plan.allreduce_text = cm.allreduce_text(plan.workload);
  plan.execution = sim::execution_json(cm.exec(), cm.launch());
  // Budgets: the default first (none's baseline), then each one searched.
  std::vector<Budget> budgets{{0, &cm}};
  std::vector<std::unique_ptr<sim::CostModel>> owned;
  const auto list = parse_budget_list(plan.options.comm_ctas);
  if (!list.empty() && cm.contention() && cm.contention()->enabled) {
    plan.overlap_model += "; budgets searched: --comm-ctas " + plan.options.comm_ctas;
  }
  if (!list.empty() && !(cm.contention() && cm.contention()->enabled)) {
    throw InputError("--comm-ctas", plan.options.comm_ctas,
                     "the " + cm.name() + " cost model of " + plan.workload.hardware.name +
                         " has no contention model (no \"contention\" block), so every budget "
                         "predicts the same; drop --comm-ctas");
  }
  for (auto b : list) {
    if (b >= plan.workload.hardware.sms) {
      throw InputError(
          "--comm-ctas", std::to_string(b),
          "must be below the GPU's " + std::to_string(plan.workload.hardware.sms) + " SMs");
    }
  }
  if (!list.empty()) {
    const std::int64_t def = plan.workload.hardware.contention.comm_ctas;
    budgets.push_back({def, &cm});
    for (auto b : list) {
      if (b == def) continue;
      sim::Workload wb = plan.workload;
      wb.hardware.contention.comm_ctas = b;
      owned.push_back(sim::make_cost_model(wb, plan.options.workload.profile));
      budgets.push_back({b, owned.back().get()});
    }
  }
  const std::size_t n = plan.points.size();
  const bool progress = !plan.options.quiet && isatty(2);
  const auto t0 = std::chrono::steady_clock::now();
  // Longest prompts first, so that the last job to finish is a short one.
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return plan.points[a].seq > plan.points[b].seq;
  });
  run_jobs(
      n, plan.options.threads,
      [&](std::size_t j) { plan_point(plan, plan.points[order[j]], budgets); },
      [&](std::size_t d) {
        if (!progress) return;
        const double el =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(stderr, "\rplanning: %zu/%zu points, %.1f s elapsed, ETA %.1f s   ", d, n, el,
                     el / static_cast<double>(d) * static_cast<double>(n - d));
      });
  if (progress) std::fprintf(stderr, "\r%70s\r", "");
}

}  // namespace tpo::planner
