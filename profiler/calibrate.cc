// Contention-model calibration on committed validation reports (see calibrate.h).
#include "profiler/calibrate.h"

#include "profiler/interference_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <tuple>

#include "sim/engine.h"
#include "sim/error.h"
#include "sim/format.h"
#include "sim/hardware.h"
#include "sim/json_io.h"
#include "sim/profile.h"
#include "sim/profile_cost.h"
#include "sim/report.h"
#include "sim/stats.h"
#include "sim/version.h"

namespace tpo::profiler {

using ojson = nlohmann::ordered_json;

namespace {

// A case of a report written before reports carried their run: rebuilt from its fields.
sim::PlannedRun legacy_case_run(const JsonObject& rep, const JsonObject& c) {
  const JsonObject opts = rep.object("options");
  sim::PlannedRun r;
  auto& w = r.workload;
  w.model = c.string("model");
  w.hardware = opts.string("hardware");
  w.tp = c.integer("tp");
  w.phase = c.string("phase");
  w.batch = c.integer("batch");
  w.context = c.count_or("context", 0);
  w.seq = w.phase == "decode" ? w.context : c.integer("seq_len");
  w.layers = c.integer("num_layers");
  w.emulate = rep.string_or("emulated_links", "");
  w.rope = "none";          // such reports predate the rotary kernel
  w.add_norm = "separate";  // and the fused add and norm
  const JsonObject s = c.object("strategy");
  const std::string name = s.string("name");
  const sim::StrategyDescriptor* d = sim::find_strategy(name);
  if (!d) throw InputError(c.file(), s.field("name"), "unknown strategy '" + name + "'");
  r.spec = sim::StrategySpec(d->kind);
  if (d->uses_chunks()) {
    for (const auto& t : s.raw().at("chunks")) r.spec.chunk_tokens.push_back(t.get<std::int64_t>());
  }
  if (d->uses_ladder_layers()) r.spec.ladder_layers = opts.count_or("ladder_layers", 0);
  if (d->uses_pieces()) r.spec.pieces = opts.integer_or("pieces", 4);
  return r;
}

std::string profile_for(const std::vector<std::string>& profiles, const sim::WorkloadOptions& w,
                        const std::string& model_name) {
  for (const auto& path : profiles) {
    const sim::Profile p = sim::load_profile(path);
    if (p.tp == w.tp && (p.model == model_name || p.model == w.model)) return path;
  }
  throw InputError("--profile", "",
                   "no profile of model " + model_name + " at TP " + std::to_string(w.tp) +
                       " among those given");
}

// A case ready to simulate under many parameter sets: graphs and standalone costs made once.
struct Prepared {
  sim::Schedule schedule, none;
  sim::OpCosts costs, none_costs;
  bool attention_batched_gemm = false;  // the profile's attention kernel (sim/contention.h)
  // The comm kernels' CTAs in this case's run (--comm-ctas, else the hardware's budget): a
  // knob of each run, not a parameter of the fit, so every parameter set keeps it.
  std::int64_t comm_ctas = 0;
  // Some GEMM of the schedule (of none) at rows the profile did not measure, and the
  // profile's interpolation error: the planner's ranking charge (PlanOptions).
  bool unmeasured_gemm_rows = false, none_unmeasured_gemm_rows = false;
  double interpolation_risk = 0;
  std::vector<char> gemm_rows_measured;  // per op of `schedule`: not a GEMM, or at measured rows
};

std::vector<Prepared> prepare(const std::vector<CalibrationCase>& cases,
                              const std::vector<std::string>& profiles) {
  std::vector<Prepared> out;
  for (const auto& c : cases) {
    sim::WorkloadOptions wo = c.run.workload;
    const sim::Workload w0 = sim::make_workload(wo);
    wo.profile = profile_for(profiles, wo, w0.model.name);
    sim::Workload w = sim::make_workload(wo);
    if (c.emulated_without_table) w.hardware.intra.tables.clear();  // as the run sized its copies
    const auto cm = sim::make_cost_model(w, wo.profile);
    Prepared p;
    p.schedule = sim::build_schedule(w, c.run.spec);
    p.none = sim::build_schedule(w, sim::StrategySpec(sim::StrategyKind::None));
    p.costs = sim::cost_schedule(p.schedule, *cm);
    p.none_costs = sim::cost_schedule(p.none, *cm);
    if (const auto* cp = cm->contention()) p.attention_batched_gemm = cp->attention_batched_gemm;
    p.comm_ctas = w.hardware.contention.comm_ctas;
    p.unmeasured_gemm_rows = sim::has_unmeasured_gemm_rows(p.schedule, *cm);
    p.none_unmeasured_gemm_rows = sim::has_unmeasured_gemm_rows(p.none, *cm);
    p.interpolation_risk = cm->gemm_interpolation_error();
    for (const auto& op : p.schedule.ops) {
      p.gemm_rows_measured.push_back(op.kind != sim::OpKind::Gemm ||
                                     op.code == sim::OpCode::LmHead ||
                                     cm->gemm_rows_measured(op.m));
    }
    p.costs.resources.clear();
    p.none_costs.resources.clear();
    out.push_back(std::move(p));
  }
  return out;
}

void set_resources(const sim::Schedule& s, sim::OpCosts& c, sim::ContentionParams p, bool on,
                   bool attention_batched_gemm, std::int64_t comm_ctas) {
  c.resources.clear();
  if (!on) return;
  p.attention_batched_gemm = attention_batched_gemm;
  // (Until 2026-12-05 every case took the first fitted case's budget: a run at --comm-ctas 4
  // was replayed with the comm kernels on 16 SMs.)
  if (comm_ctas > 0) p.comm_ctas = comm_ctas;
  c.contention = p;
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    c.resources.push_back(sim::op_resources(s.ops[i], c.standalone_ns[i], p));
  }
}

struct Eval {
  std::vector<double> predicted_us, none_us;
  std::vector<std::array<double, 4>> class_us;  // predicted op durations by class, per case
};

int op_class(sim::OpKind k) {
  switch (k) {
    case sim::OpKind::Gemm:
      return 0;
    case sim::OpKind::Attention:
      return 1;
    case sim::OpKind::AllReduce:
      return 3;
    default:
      return 2;
  }
}

int op_class(const std::string& kind) {
  return kind == "gemm" ? 0 : kind == "attention" ? 1 : kind == "allreduce" ? 3 : 2;
}

Eval run_all(std::vector<Prepared>& prep, const sim::ContentionParams& p, bool on,
             const std::vector<std::size_t>& which) {
  Eval e;
  sim::Engine engine;
  for (std::size_t i : which) {
    auto& c = prep[i];
    set_resources(c.schedule, c.costs, p, on, c.attention_batched_gemm, c.comm_ctas);
    set_resources(c.none, c.none_costs, p, on, c.attention_batched_gemm, c.comm_ctas);
    const sim::Timeline& tl = engine.run(c.schedule, c.costs);
    e.predicted_us.push_back(static_cast<double>(tl.total_ns) / 1e3);
    std::array<double, 4> by{};
    for (std::size_t j = 0; j < c.schedule.ops.size(); ++j) {
      by[static_cast<std::size_t>(op_class(c.schedule.ops[j].kind))] +=
          static_cast<double>(tl.end_ns[j] - tl.start_ns[j]) / 1e3;
    }
    e.class_us.push_back(by);
    e.none_us.push_back(static_cast<double>(engine.run(c.none, c.none_costs).total_ns) / 1e3);
  }
  return e;
}

double objective(const Eval& e, const std::vector<CalibrationCase>& cases,
                 const std::vector<std::size_t>& which, bool fit_ops) {
  double sse = 0;
  for (std::size_t k = 0; k < which.size(); ++k) {
    const CalibrationCase& c = cases[which[k]];
    const double err = e.predicted_us[k] / c.measured_us - 1.0;
    sse += err * err;
    if (!fit_ops) continue;
    double measured = 0;
    for (double x : c.measured_class_us) measured += x;
    for (std::size_t j = 0; j < 4 && measured > 0; ++j) {
      if (c.measured_class_us[j] <= 0) continue;
      const double ej = e.class_us[k][j] / c.measured_class_us[j] - 1.0;
      sse += ej * ej * c.measured_class_us[j] / measured;
    }
  }
  return sse;
}

}  // namespace

std::vector<CalibrationCase> read_cases(const std::vector<std::string>& reports) {
  std::vector<CalibrationCase> out;
  std::set<std::filesystem::path> seen;
  for (const auto& path : reports) {
    check_input_file(path, "--reports");
    // A report given twice would count its cases twice in the fit.
    if (!seen.insert(std::filesystem::weakly_canonical(std::filesystem::absolute(path))).second) {
      throw InputError("--reports", path, "is given twice; each report's cases count once");
    }
    const nlohmann::json j = read_json_file(path);
    const JsonObject rep(j, path, "");
    if (rep.string("schema") != "tpo.validate/1") {
      throw InputError(path, "schema",
                       "expected \"tpo.validate/1\" (a `tpo validate --json` report)");
    }
    if (!j.contains("cases") || !j.at("cases").is_array()) {
      throw InputError(path, "cases", "must be an array");
    }
    if (j.at("cases").empty()) {
      throw InputError(path, "cases", "is empty: the report holds no measured case");
    }
    for (std::size_t i = 0; i < j.at("cases").size(); ++i) {
      const JsonObject c(j.at("cases").at(i), path, "cases[" + std::to_string(i) + "]");
      CalibrationCase k;
      k.file = path;
      k.model = c.string("model");
      k.run = c.has("run") ? sim::planned_run_from_json(c.raw().at("run"), path, c.field("run"),
                                                        rep.string_or("made_in", ""))
                           : legacy_case_run(rep, c);
      if (!rep.string_or("emulated_links", "").empty() && k.run.workload.comm_ctas == 0) {
        k.run.workload.comm_ctas = 16;  // the copy kernel's CTAs in every emulated run so far
      }
      k.run.workload.profile.clear();  // matched by model and TP from --profile
      k.measured_us = c.number("measured_us");
      k.reported_us = c.number("predicted_us");
      k.measured_none_us = c.number_or("measured_none_us", 0);
      k.legacy_copies = rep.string_or("backend", "") == "cuda" && !rep.has("attention_q_in_place");
      k.on_cpu = rep.string_or("backend", "") == "cpu";
      // How the run sized its emulated all-reduces: the case's own label, else the report's
      // (one for all its cases), else by latency + bandwidth (reports before 2026-12-03).
      k.emulated_without_table =
          !rep.string_or("emulated_links", "").empty() &&
          c.string_or("emulated_allreduce",
                      rep.string_or("emulated_allreduce", "latency+bandwidth")) !=
              "allreduce_table";
      if (c.has("ops") && !c.raw().at("ops").is_array()) {
        throw InputError(path, c.field("ops"), "must be an array of the case's ops");
      }
      if (c.has("ops")) {
        const auto& ops = c.raw().at("ops");
        struct Span {
          std::size_t index;
          std::string name;
          bool comm;
          double start, us;
        };
        std::vector<Span> spans;
        for (std::size_t q = 0; q < ops.size(); ++q) {
          const JsonObject op(ops.at(q), path, c.field("ops") + "[" + std::to_string(q) + "]");
          const std::string kind = op.string("kind");
          if (kind != "gemm" && kind != "attention" && kind != "norm" && kind != "elementwise" &&
              kind != "allreduce") {
            throw InputError(
                path, op.field("kind"),
                "'" + kind + "' is not gemm, attention, norm, elementwise or allreduce");
          }
          const std::string stream = op.string_or("stream", "compute");
          if (stream != "compute" && stream != "comm") {
            throw InputError(path, op.field("stream"), "'" + stream + "' is not compute or comm");
          }
          const double us = op.number("measured_us", /*positive=*/false);
          k.measured_class_us[static_cast<std::size_t>(op_class(kind))] += us;
          spans.push_back({q, op.string_or("name", ""), stream == "comm",
                           op.number_or("measured_start_us", -1, /*positive=*/false), us});
        }
        k.measured_ops = ops.size();
        for (const Span& a : spans) k.ops.push_back({a.name, a.comm, a.start, a.us});
        for (const Span& a : spans) {  // compute ops that overlapped no comm op
          if (a.comm || a.start < 0 || a.us <= 0) continue;
          bool alone = true;
          for (const Span& m : spans) {
            if (m.comm && m.start < a.start + a.us && a.start < m.start + m.us) alone = false;
          }
          if (alone) k.compute_alone_us.push_back({a.index, a.name, a.us});
        }
      }
      out.push_back(std::move(k));
    }
  }
  return out;
}

namespace {
using sim::median;
}  // namespace

ErrorSummary summarize(const std::vector<double>& errors) {
  ErrorSummary s;
  s.cases = errors.size();
  if (errors.empty()) return s;
  std::vector<double> a;
  for (double e : errors) {
    a.push_back(std::fabs(e));
    s.mean_signed += e / static_cast<double>(errors.size());
    s.worst_abs = std::max(s.worst_abs, std::fabs(e));
  }
  s.median_abs = median(std::move(a));
  return s;
}

std::vector<CaseError> evaluate(const std::vector<CalibrationCase>& cases,
                                const std::vector<std::string>& profiles,
                                const sim::ContentionParams& p, bool use_contention) {
  auto prep = prepare(cases, profiles);
  std::vector<std::size_t> all(cases.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  const Eval e = run_all(prep, p, use_contention, all);
  std::vector<CaseError> out;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    out.push_back({e.predicted_us[i], e.predicted_us[i] / cases[i].measured_us - 1.0});
  }
  return out;
}

double comm_hbm_from_profile(const sim::Profile& p, std::int64_t ctas) {
  std::vector<const sim::InterferencePoint*> copies;
  for (const auto& x : p.interference) {
    if (x.victim == "comm" && x.beside == "gemm" && x.workers == ctas && x.bytes > 0 &&
        x.alone_us > 0) {
      copies.push_back(&x);
    }
  }
  if (copies.empty()) return 0;
  std::sort(copies.begin(), copies.end(),
            [](const auto* a, const auto* b) { return a->bytes < b->bytes; });
  const auto* big = copies.back();
  double bytes = double(big->bytes), us = big->alone_us;
  for (auto it = copies.rbegin() + 1; it != copies.rend(); ++it) {
    if ((*it)->bytes < big->bytes && (*it)->alone_us < big->alone_us) {
      bytes -= double((*it)->bytes);
      us -= (*it)->alone_us;
      break;
    }
  }
  // bytes / us is MB/s; / 1e3 is GB/s; x 2: read and written.
  return 2.0 * bytes / us / 1e3 / double(ctas);
}

namespace {

// The parameters the fit searches, from the hardware file's (the rest stay as they are); the
// objective is the squared relative error of the schedules in `train` and of `pairs`.
sim::ContentionParams fit(std::vector<Prepared>& prep, const std::vector<CalibrationCase>& cases,
                          const std::vector<std::size_t>& train, sim::ContentionParams base,
                          std::vector<InterferencePair>& pairs, const std::string& wave_rule,
                          bool fit_ops, double fixed_per_cta,
                          std::map<std::pair<std::int64_t, std::int64_t>, double>* by_block) {
  sim::ContentionParams best = base;
  double best_obj = std::numeric_limits<double>::infinity();
  // Whether a GEMM fills every SM and whether its waves are whole are searched only with the
  // microbenchmarks in the fit, which isolate them; on 14 schedules alone they overfit (held
  // out: 3.0% median instead of 2.3% when fitted on Llama-3.1-8B).
  const int shapes = pairs.empty() ? 1 : 4;
  const int rule_lo = wave_rule == "extra-wave" ? 1 : 0,
            rule_hi = wave_rule == "requantize" ? 0 : 1;
  for (int rule = rule_lo; rule <= rule_hi; ++rule)
    for (int shape = 0; shape < shapes; ++shape) {
      if (rule == 1 && shape % 2 == 1) continue;  // stream-K does not change the extra-wave rule
      for (std::int64_t tm : {64, 128, 256}) {
        for (std::int64_t tn : {128, 256}) {
          const std::vector<double> per_cta_grid =
              fixed_per_cta >= 0 ? std::vector<double>{fixed_per_cta}
                                 : std::vector<double>{0.0, 25.0, 50.0, 100.0, 150.0, 200.0, 300.0};
          for (double per_cta : per_cta_grid) {
            for (int ce = 0; ce <= 24; ++ce) {
              for (int me = 0; me <= 20; ++me) {
                sim::ContentionParams p = base;
                p.enabled = true;
                p.gemm_cta_m = tm;
                p.gemm_cta_n = tn;
                p.comm_hbm_gbps_per_cta = per_cta;
                p.compute_extra = 0.025 * ce;
                p.comm_extra = 0.05 * me;
                p.extra_wave = rule == 1;
                if (!pairs.empty()) {
                  p.gemm_fill = shape < 2;
                  p.stream_k = shape % 2 == 1;
                }
                double obj = objective(run_all(prep, p, true, train), cases, train, fit_ops);
                for (auto& pair : pairs) {
                  const double err = predict_pair(pair, p, true) / pair.measured_us - 1.0;
                  obj += err * err;
                }
                if (obj < best_obj) {
                  best_obj = obj;
                  best = p;
                }
                auto [it, fresh] = by_block->try_emplace({tm, tn}, obj);
                if (!fresh) it->second = std::min(it->second, obj);
              }
            }
          }
        }
      }
    }
  return best;
}

// The copies the CUDA runtime made before 2026-12-02 and the profiles never timed: which op
// made each, and its size. The Q gather before attention copied Q out of the qkv rows: its
// size is the bytes read and written (bf16). qkv's KV-cache write was two strided copies of
// narrow rows (128-512 values), of which the model already counts what the one-kernel write
// costs (sim/analytical_cost.cc): what is fitted for it is the rest, by rows (fitted per byte
// instead, the 70B fit predicts the 8B model's held-out writes 8% too slow; per row, within 1%).
enum class Copy { QGather, KvWrite };
const char* copy_name(Copy c) {
  return c == Copy::QGather ? "q_gather" : "kv_write";
}
double copy_size(Copy c, const sim::Op& op) {
  if (c == Copy::QGather) {
    return op.kind == sim::OpKind::Attention
               ? 2.0 * 2.0 * static_cast<double>(op.tokens()) * static_cast<double>(op.n * op.k)
               : 0.0;
  }
  return sim::kv_store_bytes(op) > 0 ? static_cast<double>(op.m) : 0.0;
}
// Copy calls per op: the old runtime wrote the KV cache one request at a time.
std::int64_t copy_calls(Copy c, const sim::Op& op) {
  return c == Copy::KvWrite ? std::max<std::int64_t>(1, op.req_end - op.req_begin) : 1;
}

// The ops of such runs that made copy `c` and ran beside nothing, in `which`: the copy's
// size, the measured time and the standalone (profile) time of each.
struct AlonePoint {
  double size, measured_us, standalone_us;
};
std::vector<AlonePoint> alone_points(Copy c, const std::vector<CalibrationCase>& cases,
                                     const std::vector<Prepared>& prep,
                                     const std::vector<std::size_t>& which) {
  std::vector<AlonePoint> out;
  for (std::size_t i : which) {
    const auto& k = cases[i];
    if (!k.legacy_copies || k.measured_ops != prep[i].schedule.ops.size()) continue;
    for (const auto& a : k.compute_alone_us) {
      const sim::Op& op = prep[i].schedule.ops[a.index];
      // The report's ops are the rebuilt graph's, one for one: a name that differs means the
      // graph is not the one that ran.
      if (!a.name.empty() && a.name != sim::op_code_name(op.code)) {
        throw InputError(k.file, "ops[" + std::to_string(a.index) + "].name",
                         "is '" + a.name + "', but the graph rebuilt from the report has '" +
                             sim::op_code_name(op.code) +
                             "' there (made by another version of the graph builder?)");
      }
      const double size = copy_size(c, op);
      if (size <= 0 || copy_calls(c, op) != 1) continue;  // fitted on single calls
      out.push_back({size, a.us, static_cast<double>(prep[i].costs.standalone_ns[a.index]) / 1e3});
    }
  }
  return out;
}

// Theil-Sen (robust to the few points whose profile interpolation is off): the slope is the
// median of the pairwise slopes, the fixed time the median of what is left; neither below 0.
CopyFit fit_copy(const std::vector<AlonePoint>& pts) {
  CopyFit g;
  g.ops = pts.size();
  if (pts.size() < 2) return g;
  std::vector<double> slopes, rest;
  for (std::size_t a = 0; a < pts.size(); ++a) {
    for (std::size_t b = a + 1; b < pts.size(); ++b) {
      const double dx = pts[b].size - pts[a].size;
      if (std::fabs(dx) < 1) continue;
      slopes.push_back(((pts[b].measured_us - pts[b].standalone_us) -
                        (pts[a].measured_us - pts[a].standalone_us)) /
                       dx);
    }
  }
  g.us_per_unit = std::max(0.0, median(slopes));
  for (const auto& p : pts)
    rest.push_back(p.measured_us - p.standalone_us - g.us_per_unit * p.size);
  g.fixed_us = std::max(0.0, median(rest));
  return g;
}

ojson summary_json(const ErrorSummary& s) {
  if (s.cases == 0) {  // no error to report: null, not 0
    return ojson{{"cases", 0},
                 {"median_abs_error", nullptr},
                 {"mean_signed_error", nullptr},
                 {"worst_abs_error", nullptr}};
  }
  return ojson{{"cases", s.cases},
               {"median_abs_error", s.median_abs},
               {"mean_signed_error", s.mean_signed},
               {"worst_abs_error", s.worst_abs}};
}

std::string pct(double x) {
  return fmt("%+.1f%%", 100 * x);
}

// Decision quality on groups of measured alternatives (the same model, links and prompt:
// `none` and the function-preserving splits on the 8-token grid): which the model would pick,
// how much slower than the fastest measured that was (regret), and whether "overlap or not"
// matches the measurement where the measured difference exceeds 2%. Picked twice: by
// prediction alone, and as `tpo plan` ranks (a candidate with GEMMs at rows the profile did
// not measure counted the profile's interpolation error slower; PlanOptions); either way
// `none` unless the pick beats it by more than `threshold`, as `tpo plan` decides.
ojson decisions(const std::vector<CalibrationCase>& cases, const std::vector<Prepared>& prep,
                const std::vector<std::size_t>& set, const Eval& e, double threshold,
                double chunk_gain, std::ostream& os, const char* label) {
  std::map<std::string, std::vector<std::size_t>> groups;
  for (std::size_t k = 0; k < set.size(); ++k) {
    const auto& c = cases[set[k]];
    if (!sim::preserves_function(c.run.spec.kind) || c.measured_none_us <= 0) continue;
    const auto& w = c.run.workload;
    groups[w.model + " " + w.emulate + " " + std::to_string(w.seq)].push_back(k);
  }
  ojson out = ojson::array();
  int right = 0, judged = 0;
  double worst = 0, worst_ranked = 0;
  std::vector<std::string> changed;
  for (const auto& [key, ks] : groups) {
    // Alternatives: each case, and none (measured in every case's run: their median).
    std::vector<double> nones;
    for (auto k : ks) nones.push_back(cases[set[k]].measured_none_us);
    std::sort(nones.begin(), nones.end());
    // (Of an even count the mean of the middle two, as validate's; until 2026-12-05 the upper.)
    const double none_meas = sim::median(nones);
    const Prepared& p0 = prep[set[ks.front()]];
    struct Pick {
      double score, measured;
      std::string name;
      std::size_t chunks = 0;  // the prompt's chunks (0: none or uncut)
      sim::StrategyKind kind = sim::StrategyKind::None;
    };
    const double none_pred = e.none_us[ks.front()];
    const Pick none_by_pred{none_pred, none_meas, "none"};
    const Pick none_ranked{
        none_pred * (p0.none_unmeasured_gemm_rows ? 1 + p0.interpolation_risk : 1.0), none_meas,
        "none"};
    Pick by_pred = none_by_pred, ranked = none_ranked;
    double best_meas = none_meas;
    std::vector<Pick> preds, charges;
    for (auto k : ks) {
      const auto& c = cases[set[k]];
      const Prepared& p = prep[set[k]];
      best_meas = std::min(best_meas, c.measured_us);
      const double pred = e.predicted_us[k];
      const double charged = pred * (p.unmeasured_gemm_rows ? 1 + p.interpolation_risk : 1.0);
      const std::string name = sim::variant_text(c.run.spec);
      const std::size_t chunks = c.run.spec.chunk_tokens.size();
      preds.push_back({pred, c.measured_us, name, chunks, c.run.spec.kind});
      charges.push_back({charged, c.measured_us, name, chunks, c.run.spec.kind});
    }
    // The fastest of each ranking, with a chunk more only where it pays (--chunk-gain), as tpo
    // plan picks.
    for (auto [pick, all, none] : {std::tuple{&by_pred, &preds, none_by_pred.score},
                                   std::tuple{&ranked, &charges, none_ranked.score}}) {
      const std::vector<Pick>& a = *all;
      std::size_t i = 0;
      for (std::size_t j = 1; j < a.size(); ++j) {
        if (a[j].score < a[i].score) i = j;
      }
      if (a.empty() || !(a[i].score < none)) continue;
      i = sim::fewest_paying_chunks(
          i, a.size(), [&](std::size_t j) { return a[j].chunks; },
          [&](std::size_t j) { return a[j].score; },
          [&](std::size_t j, std::size_t q) { return a[j].kind == a[q].kind; }, none, threshold,
          chunk_gain);
      *pick = a[i];
    }
    if (sim::keeps_none(none_by_pred.score, by_pred.score, threshold)) by_pred = none_by_pred;
    if (sim::keeps_none(none_ranked.score, ranked.score, threshold)) ranked = none_ranked;
    const double regret = by_pred.measured / best_meas - 1.0;
    const double regret_ranked = ranked.measured / best_meas - 1.0;
    worst = std::max(worst, regret);
    worst_ranked = std::max(worst_ranked, regret_ranked);
    if (ranked.name != by_pred.name) {
      changed.push_back(key + ": " + ranked.name + " over " + by_pred.name +
                        fmt(" (regret %.1f%%", 100 * regret_ranked) +
                        fmt(" instead of %.1f%%)", 100 * regret));
    }
    const bool overlap_measured = best_meas < none_meas;
    const bool overlap_picked = by_pred.name != "none";
    const bool clear = std::fabs(none_meas / best_meas - 1.0) > 0.02;
    if (clear) {
      ++judged;
      right += overlap_measured == overlap_picked;
    }
    out.push_back(ojson{{"group", key},
                        {"alternatives", ks.size() + 1},
                        {"picked", by_pred.name},
                        {"regret", regret},
                        {"picked_with_interpolation_risk", ranked.name},
                        {"regret_with_interpolation_risk", regret_ranked},
                        {"overlap_measured", overlap_measured},
                        {"overlap_picked", overlap_picked},
                        {"difference_over_2pct", clear}});
  }
  if (groups.empty()) {
    os << "  " << label << "0 groups of measured alternatives (no regret to report)\n";
    return out;
  }
  os << "  " << label << groups.size() << " groups: worst regret " << fmt("%.1f%%", 100 * worst)
     << " (ranked as plan does: " << fmt("%.1f%%", 100 * worst_ranked)
     << "), overlap decision right in " << right << " of " << judged
     << " where the measured difference exceeds 2%\n";
  for (const auto& line : changed)
    os << "      ranked with the interpolation risk, " << line << "\n";
  return out;
}

// The copies of older CUDA runs: each fitted on the fit-on models' ops that made it beside
// nothing, its error given on those ops and on the held-out models' ones, then added to every
// such case's ops (as part of the op: the copy and the kernel ran back to back on its stream).
ojson fit_legacy_copies(const std::vector<CalibrationCase>& cases, std::vector<Prepared>& prep,
                        const std::vector<std::size_t>& train, const std::vector<std::size_t>& test,
                        std::ostream& os) {
  ojson out = ojson::object();
  // Errors of the standalone times without and with the copy, on ops beside nothing.
  auto errors = [](const std::vector<AlonePoint>& pts, const CopyFit& f) {
    std::vector<double> without, with;
    for (const auto& a : pts) {
      without.push_back(a.standalone_us / a.measured_us - 1.0);
      with.push_back((a.standalone_us + f.us(a.size)) / a.measured_us - 1.0);
    }
    return std::pair{summarize(without), summarize(with)};
  };
  auto line = [&](const char* set, const std::pair<ErrorSummary, ErrorSummary>& e) {
    os << "    " << set << e.first.cases << " ops: median |error| "
       << fmt("%.1f%%", 100 * e.first.median_abs) << " -> "
       << fmt("%.1f%%", 100 * e.second.median_abs) << ", mean signed " << pct(e.first.mean_signed)
       << " -> " << pct(e.second.mean_signed) << "\n";
  };
  std::vector<std::pair<Copy, CopyFit>> fits;
  for (Copy c : {Copy::QGather, Copy::KvWrite}) {
    const auto fitted = alone_points(c, cases, prep, train);
    const CopyFit f = fit_copy(fitted);
    if (f.ops == 0) continue;
    const auto ef = errors(fitted, f), eh = errors(alone_points(c, cases, prep, test), f);
    if (fits.empty()) {
      os << "Copies the CUDA runtime made before 2026-12-02, untimed by the profiles (the Q "
            "gather before attention; qkv's KV-cache write as two strided copies, beyond the "
            "one-kernel write the model counts), on ops beside nothing (profile alone -> with "
            "the copy):\n";
    }
    const std::string rate =
        c == Copy::QGather
            ? "bytes at " + fmt("%.0f", f.us_per_unit > 0 ? 1e-3 / f.us_per_unit : 0) + " GB/s"
            : fmt("%.2f", 1e3 * f.us_per_unit) + " us per 1000 rows";
    os << "  " << copy_name(c) << ": " << fmt("%.2f", f.fixed_us) << " us + " << rate << "\n";
    line("fitted,   ", ef);
    line("held out, ", eh);
    out[copy_name(c)] = ojson{{"fixed_us", f.fixed_us},
                              {"per", c == Copy::QGather ? "byte" : "row"},
                              {"us_per_unit", f.us_per_unit},
                              {"fitted_ops", f.ops},
                              {"fitted_without", summary_json(ef.first)},
                              {"fitted_with", summary_json(ef.second)},
                              {"held_out_without", summary_json(eh.first)},
                              {"held_out_with", summary_json(eh.second)}};
    fits.emplace_back(c, f);
  }
  if (!fits.empty()) os << "\n";
  for (std::size_t i = 0; i < cases.size(); ++i) {
    if (!cases[i].legacy_copies) continue;
    for (auto* sc : {&prep[i].schedule, &prep[i].none}) {
      auto& costs = sc == &prep[i].schedule ? prep[i].costs : prep[i].none_costs;
      for (std::size_t j = 0; j < sc->ops.size(); ++j) {
        for (const auto& [c, f] : fits) {
          const double size = copy_size(c, sc->ops[j]);
          if (size <= 0) continue;
          const double calls = static_cast<double>(copy_calls(c, sc->ops[j]));
          costs.standalone_ns[j] += static_cast<std::int64_t>(
              std::llround((f.us(size) + (calls - 1) * f.fixed_us) * 1e3));
        }
      }
    }
  }
  return out;
}

// The planner's interpolation charge checked on the runs: GEMMs that ran beside nothing
// (chunks on the 8-token grid, every model; qkv left out, as its legacy KV copies are fitted
// on such ops), measured against the profile, at rows the profile measured and at rows it
// did not; beside the profiles' own leave-one-out interpolation error, which the planner
// charges. Nothing here is fitted.
ojson gemm_interpolation_check(const std::vector<CalibrationCase>& cases,
                               const std::vector<Prepared>& prep,
                               const std::vector<std::size_t>& which, std::ostream& os) {
  std::vector<double> at[2];  // [0]: rows measured, [1]: not; measured / profile - 1
  std::set<std::int64_t> rows;
  std::map<std::string, double> charge;
  for (std::size_t i : which) {
    const auto& k = cases[i];
    const Prepared& p = prep[i];
    if (k.measured_ops != p.schedule.ops.size()) continue;
    charge[k.run.workload.model] = p.interpolation_risk;
    for (const auto& a : k.compute_alone_us) {
      const sim::Op& op = p.schedule.ops[a.index];
      if (op.kind != sim::OpKind::Gemm || op.code == sim::OpCode::LmHead ||
          sim::kv_store_bytes(op) > 0 || a.us <= 0) {
        continue;
      }
      const bool unmeasured = !p.gemm_rows_measured[a.index];
      if (unmeasured) rows.insert(op.m);
      at[unmeasured].push_back(a.us / (static_cast<double>(p.costs.standalone_ns[a.index]) / 1e3) -
                               1.0);
    }
  }
  ojson out = ojson::object();
  if (at[1].empty()) return out;
  os << "GEMMs beside nothing (o_proj, gate_up, down; every model), measured / profile - 1, "
        "where the profile measured their rows and where it did not (the planner's "
        "interpolation charge, checked):\n";
  const char* names[2] = {"rows measured", "rows not measured"};
  for (int u = 0; u < 2; ++u) {
    std::vector<double> abs;
    for (double e : at[u]) abs.push_back(std::fabs(e));
    const double med = median(at[u]), med_abs = median(abs);
    os << "  " << names[u] << ": " << at[u].size() << " ops"
       << ", median " << pct(med) << ", median |.| " << fmt("%.1f%%", 100 * med_abs) << "\n";
    out[u ? "rows_not_measured" : "rows_measured"] =
        ojson{{"ops", at[u].size()}, {"median", med}, {"median_abs", med_abs}};
  }
  os << "  the rows not measured:";
  for (auto m : rows) os << " " << m;
  os << "\n  the profiles' leave-one-out GEMM interpolation error (the charge):";
  for (const auto& [model, c] : charge) os << " " << model << fmt(" %.1f%%", 100 * c);
  os << "\n\n";
  out["rows"] = rows;
  out["charge"] = charge;
  return out;
}

}  // namespace

int run_calibrate(const CalibrateOptions& o, std::ostream& os) {
  if (o.reports.empty()) throw InputError("--reports", "", "give validation reports to fit on");
  if (o.profiles.empty()) throw InputError("--profile", "", "give the profiles the runs used");
  const bool checking = !o.params_from.empty();
  if (o.fit_on.empty() && !checking) {
    throw InputError("--fit-on", "",
                     "name the model(s) whose cases are fitted; the rest are held out (or "
                     "--params-from HARDWARE to check a hardware file's contention block "
                     "on every case)");
  }
  if (checking) {
    // Nothing is fitted: the options that steer a fit, or write one, have nothing to act on.
    const std::pair<bool, const char*> fitting[] = {
        {o.fit_microbenchmarks, "--fit-microbenchmarks"},
        {o.fit_ops, "--fit-ops"},
        {o.update_profiles, "--update-profiles"},
        {o.wave_rule_given, "--wave-rule"},
        {o.comm_hbm == "fit" && o.comm_hbm_given, "--comm-hbm-per-cta fit"}};
    for (const auto& [given, name] : fitting) {
      if (given) {
        throw InputError(name, "",
                         std::string("steers or writes a fit, and --params-from ") + o.params_from +
                             " fits nothing (the block's rules are checked as "
                             "they are); leave one of the two out");
      }
    }
  }
  sim::check_threshold(o.threshold, "--threshold");
  sim::check_threshold(o.chunk_gain, "--chunk-gain");
  if (!o.out.empty()) check_writable(o.out, "--out");
  const auto cases = read_cases(o.reports);
  for (const auto& p : o.profiles) check_input_file(p, "--profile");
  auto prep = prepare(cases, o.profiles);
  // Chunks off the 8-token grid run a much slower attention kernel (results/h200, finding 4a):
  // a standalone-cost error, not contention. They are neither fitted nor mixed into the
  // held-out figures; their errors are reported on their own.
  auto aligned = [&](std::size_t i) {
    for (auto t : cases[i].run.spec.chunk_tokens) {
      if (t % 8 != 0) return false;
    }
    return true;
  };
  std::vector<std::size_t> train, test, off_grid, all;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    all.push_back(i);
    // --fit-on names a model by its name or as the reports' runs give it (a shipped name or
    // a path).
    const auto named = [&](const std::string& m) {
      return std::find(o.fit_on.begin(), o.fit_on.end(), m) != o.fit_on.end();
    };
    const bool fit = named(cases[i].run.workload.model) || named(cases[i].model);
    if (!aligned(i)) {
      off_grid.push_back(i);
    } else {
      (fit ? train : test).push_back(i);
    }
  }
  if (train.empty() && (!checking || !o.fit_on.empty())) {
    std::set<std::string> models;
    for (const auto& c : cases) models.insert(c.model);
    std::string names;
    for (const auto& m : models) names += (names.empty() ? "" : ", ") + m;
    names += " (by name, or as each run gives it)";
    throw InputError(
        "--fit-on", o.fit_on.front(),
        "no case of that model with chunks on the 8-token grid; the reports' models: " + names);
  }
  std::set<std::string> fit_models;  // the fitted models' names, matched with profiles
  for (std::size_t i : train) fit_models.insert(cases[i].model);
  if (train.empty() && o.legacy_copies == "fit") {
    // Checking on every case: the old runtime's copies would have no case to be fitted on.
    for (const auto& c : cases) {
      if (c.legacy_copies) {
        throw InputError(c.file, "attention_q_in_place",
                         "is missing: a CUDA run made before 2026-12-02, whose untimed copies "
                         "are fitted on the --fit-on models' cases; name them with --fit-on "
                         "(the cases the block was fitted on), or --legacy-copies off");
      }
    }
  }
  const ojson copies_json = o.legacy_copies == "fit" && !train.empty()
                                ? fit_legacy_copies(cases, prep, train, test, os)
                                : ojson("off");
  std::vector<std::size_t> on_grid = train;
  on_grid.insert(on_grid.end(), test.begin(), test.end());
  std::sort(on_grid.begin(), on_grid.end());
  const ojson interp_json = gemm_interpolation_check(cases, prep, on_grid, os);
  // The case whose hardware file stands for the runs' GPU: the first fitted, else the first.
  const CalibrationCase& first = cases[train.empty() ? std::size_t{0} : train.front()];
  const sim::Workload w0 = sim::make_workload(first.run.workload);
  const sim::ContentionParams base = w0.hardware.contention;
  // --params-from: the file's block over the runs' GPU (its SMs, HBM bandwidth, comm budget).
  sim::ContentionParams checked;
  std::string checked_from;
  if (checking) {
    const sim::HardwareConfig hw = sim::load_hardware(o.params_from, "--params-from");
    const std::string& path = hw.origin;
    nlohmann::json j = read_json_file(path);
    if (!j.contains("contention")) {
      throw InputError(path, "contention",
                       "is missing: the file has no contention block to check (h200x8's is "
                       "the fitted one)");
    }
    // The runs' budget (a knob of each run, kept per case) and their GPU's HBM bandwidth, not
    // the file's.
    nlohmann::json block = j.at("contention");
    if (block.is_object()) {
      block.erase("comm_ctas");
      block.erase("hbm_gbps");
    }
    checked = sim::contention_from_json(block, path, "contention", base);
    checked.enabled = true;
    checked_from = sim::hardware_label(hw) + " (" + hw.gpu_name + ")";
  }
  // The fit-on models' interference microbenchmarks, when asked to fit them too.
  std::vector<InterferencePair> fit_pairs;
  if (o.fit_microbenchmarks) {
    for (const auto& path : o.profiles) {
      const sim::Profile prof = sim::load_profile(path);
      if (!fit_models.count(prof.model)) continue;
      for (auto& pair : interference_pairs(prof, w0.hardware)) fit_pairs.push_back(pair);
    }
  }
  if (o.fit_ops) {
    for (std::size_t i : train) {
      if (cases[i].measured_ops != prep[i].schedule.ops.size()) {
        throw InputError(cases[i].file, "ops",
                         "lists " + std::to_string(cases[i].measured_ops) + " ops, but the graph " +
                             "rebuilt from it has " + std::to_string(prep[i].schedule.ops.size()) +
                             " (--fit-ops needs every op measured)");
      }
    }
  }
  // The comm kernel's HBM draw: fitted, measured in the fit-on profiles, or given.
  double fixed_per_cta = -1;
  std::string hbm_from;
  if (o.comm_hbm == "profile") {
    // Measured on the hardware file's comm budget (16 CTAs unless it says otherwise), whatever
    // --comm-ctas the first case ran (until 2026-12-05 its budget: a --comm-ctas 32 run first
    // gave the draw of a copy on 32 CTAs, 57 GB/s per CTA instead of 37.5).
    const std::int64_t measure_ctas =
        sim::load_hardware(first.run.workload.hardware).contention.comm_ctas;
    std::vector<double> per;
    for (const auto& path : o.profiles) {
      const sim::Profile prof = sim::load_profile(path);
      // (Checking on every case: every profile is this run's GPU's.)
      if (!fit_models.empty() && !fit_models.count(prof.model)) continue;
      const double v = comm_hbm_from_profile(prof, measure_ctas);
      if (v <= 0) {
        throw InputError(path, "interference.points",
                         "has no copy timed alone with its bytes on " +
                             std::to_string(measure_ctas) +
                             " CTAs (--comm-hbm-per-cta profile needs one; profiles made before "
                             "2026-12-04 lack the bytes)");
      }
      per.push_back(v);
    }
    if (per.empty()) {
      throw InputError("--comm-hbm-per-cta", "profile", "no --profile of a --fit-on model");
    }
    fixed_per_cta = std::accumulate(per.begin(), per.end(), 0.0) / double(per.size());
    const char* whose = fit_models.empty() ? "profiles" : "fit-on profiles";
    hbm_from = "; comm HBM draw " + fmt("%.1f", fixed_per_cta) + " GB/s per CTA measured in the " +
               whose + " (their long copies on " + std::to_string(measure_ctas) +
               " CTAs, read and written)";
    os << "comm HBM draw per CTA, measured in the " << whose << ": " << fmt("%.1f", fixed_per_cta)
       << " GB/s (the slope between the two longest copies alone on " << measure_ctas
       << " CTAs, bytes read and written), "
       << (checking ? "in place of the block's" : "held in the fit") << "\n\n";
  } else if (o.comm_hbm != "fit") {
    std::size_t used = 0;
    try {
      fixed_per_cta = std::stod(o.comm_hbm, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != o.comm_hbm.size() || !(fixed_per_cta >= 0)) {
      throw InputError("--comm-hbm-per-cta", o.comm_hbm,
                       "must be fit, profile, or a number of GB/s per CTA (>= 0)");
    }
    hbm_from = "; comm HBM draw held at " + fmt("%.1f", fixed_per_cta) + " GB/s per CTA (given)";
  }
  // The objective's best per block size: whether the schedules pin the block down.
  std::map<std::pair<std::int64_t, std::int64_t>, double> by_block;
  sim::ContentionParams p;
  if (checking) {
    p = checked;
    if (fixed_per_cta >= 0) p.comm_hbm_gbps_per_cta = fixed_per_cta;
    p.source = "the contention block of " + checked_from + ", checked, nothing fitted" + hbm_from;
  } else {
    p = fit(prep, cases, train, base, fit_pairs, o.wave_rule, o.fit_ops, fixed_per_cta, &by_block);
    p.source =
        "fitted by tpo calibrate on " + std::to_string(train.size()) + " measured schedules" +
        (fit_pairs.empty()
             ? ""
             : " and " + std::to_string(fit_pairs.size()) + " interference microbenchmarks") +
        " of";
    for (const auto& m : o.fit_on) p.source += " " + m;
    p.source += hbm_from;
  }
  const Eval before = run_all(prep, base, false, all);
  const Eval after = run_all(prep, p, true, all);
  // Per op, with the fitted model (prep holds its resources since the last run_all): the
  // cases whose reports list every op under the graph's names.
  std::vector<ojson> case_ops(cases.size());
  struct Miss {
    double diff_us;
    std::size_t c, op;
    double predicted_us, measured_us;
    bool beside_comm;
  };
  std::vector<Miss> misses;
  std::size_t ops_cases = 0;
  if (o.ops) {
    sim::Engine engine;
    for (std::size_t i : all) {
      const auto& c = cases[i];
      const sim::Schedule& s = prep[i].schedule;
      if (c.ops.size() != s.ops.size()) continue;
      bool same = true;
      for (std::size_t j = 0; j < s.ops.size() && same; ++j) {
        same = c.ops[j].name == sim::op_code_name(s.ops[j].code);
      }
      if (!same) continue;
      ++ops_cases;
      const sim::Timeline& tl = engine.run(s, prep[i].costs);
      const bool held = std::find(test.begin(), test.end(), i) != test.end();
      ojson list = ojson::array();
      for (std::size_t j = 0; j < s.ops.size(); ++j) {
        const auto& m = c.ops[j];
        const double ps = static_cast<double>(tl.start_ns[j]) / 1e3,
                     pu = static_cast<double>(tl.end_ns[j] - tl.start_ns[j]) / 1e3;
        const bool timed = m.start_us >= 0 && m.us > 0;
        bool beside = false;  // measured: a compute op overlapping a comm op, or the reverse
        for (const auto& x : c.ops) {
          if (timed && x.start_us >= 0 && x.us > 0 && x.comm != m.comm &&
              x.start_us < m.start_us + m.us && m.start_us < x.start_us + x.us) {
            beside = true;
          }
        }
        list.push_back(ojson{{"name", sim::op_code_name(s.ops[j].code)},
                             {"layer", s.ops[j].layer},
                             {"chunk", s.ops[j].chunk},
                             {"stream", m.comm ? "comm" : "compute"},
                             {"predicted_start_us", ps},
                             {"predicted_us", pu},
                             {"measured_start_us", m.start_us},
                             {"measured_us", m.us},
                             {"measured_beside_comm", beside}});
        if (held && timed) misses.push_back({pu - m.us, i, j, pu, m.us, beside});
      }
      case_ops[i] = std::move(list);
    }
  }

  // The evaluation restricted to a set of cases, in the set's order.
  auto sub = [](const Eval& e, const std::vector<std::size_t>& which) {
    Eval s;
    for (std::size_t i : which) {
      s.predicted_us.push_back(e.predicted_us[i]);
      s.none_us.push_back(e.none_us[i]);
    }
    return s;
  };
  auto errors = [&](const Eval& e, const std::vector<std::size_t>& which) {
    std::vector<double> v;
    for (std::size_t i : which) v.push_back(e.predicted_us[i] / cases[i].measured_us - 1.0);
    return v;
  };
  // The comm budgets the runs held (each case is replayed with its own).
  std::string budgets;
  {
    std::set<std::int64_t> held;
    for (const auto& c : prep) held.insert(c.comm_ctas);
    for (auto b : held) budgets += (budgets.empty() ? "" : " or ") + std::to_string(b);
  }
  if (checking) {
    os << "tpo calibrate — the contention block of " << checked_from
       << ", nothing fitted, checked on " << cases.size() << " cases ("
       << (train.empty() ? std::string("all held out")
                         : std::to_string(train.size()) +
                               " of the --fit-on models, which the block was fitted on, and " +
                               std::to_string(test.size()) + " held out")
       << "; " << off_grid.size() << " with chunks off the 8-token grid reported apart)\n";
    os << "  the runs' GPU: " << p.sms << " SMs, HBM " << fmt("%.0f", p.hbm_gbps) << " GB/s ("
       << sim::hardware_label(w0.hardware) << "'s)\n";
  } else {
    os << "tpo calibrate — contention model fitted on " << train.size() << " cases (" << test.size()
       << " held out; " << off_grid.size() << " with chunks off the 8-token grid reported apart)\n";
  }
  if (std::any_of(cases.begin(), cases.end(), [](const auto& c) { return c.on_cpu; })) {
    os << "note: some reports were measured on a CPU (validate --backend cpu): SMs, waves and "
          "HBM sharing are GPU notions; fitted to threads, the values describe no GPU\n";
  }
  os << "\n";
  os << (checking ? "  checked: gemm_cta " : "  fitted: gemm_cta ") << p.gemm_cta_m << "x"
     << p.gemm_cta_n << (p.gemm_fill ? " (fills every SM)" : " (its tiles only)")
     << (p.extra_wave ? ", one wave more beside comm"
         : p.stream_k ? ", stream-K waves"
                      : ", whole waves")
     << ", comm " << fmt("%.1f", p.comm_hbm_gbps_per_cta) << " GB/s per CTA, compute_extra "
     << p.compute_extra << ", comm_extra " << p.comm_extra << " (comm kernels hold " << budgets
     << " of " << p.sms << " SMs, as each run held them)\n";
  // How firmly the fit-on cases choose the block size: each size's best objective (the rest
  // searched as usual) against the pick's.
  if (!checking) {
    const double best_obj = by_block.at({p.gemm_cta_m, p.gemm_cta_n});
    os << "  the fit's objective by block size, each with the rest at its best (the pick = 1):";
    for (const auto& [mn, obj] : by_block) {
      os << " " << mn.first << "x" << mn.second << " "
         << (best_obj > 0 ? fmt("%.2f", obj / best_obj) : std::string("-"));
    }
    os << "\n";
  }
  os << "\n";
  ojson rows = ojson::array();
  for (std::size_t i : all) {
    const auto& c = cases[i];
    const bool fitted = std::find(train.begin(), train.end(), i) != train.end();
    const bool off = std::find(off_grid.begin(), off_grid.end(), i) != off_grid.end();
    rows.push_back(ojson{{"report", c.file},
                         {"run", sim::planned_run_json(c.run)},
                         {"set", fitted ? "fit" : (off ? "off-grid" : "held-out")},
                         {"measured_us", c.measured_us},
                         {"predicted_before_us", before.predicted_us[i]},
                         {"predicted_after_us", after.predicted_us[i]},
                         {"error_before", before.predicted_us[i] / c.measured_us - 1.0},
                         {"error_after", after.predicted_us[i] / c.measured_us - 1.0},
                         {"predicted_none_after_us", after.none_us[i]}});
    if (!case_ops[i].is_null()) rows.back()["ops"] = std::move(case_ops[i]);
  }
  const ErrorSummary fb = summarize(errors(before, train)), fa = summarize(errors(after, train));
  const ErrorSummary tb = summarize(errors(before, test)), ta = summarize(errors(after, test));
  const ErrorSummary ob = summarize(errors(before, off_grid)),
                     oa = summarize(errors(after, off_grid));
  auto line = [&](const char* label, const ErrorSummary& s) {
    os << "  " << label << s.cases << " cases";
    if (s.cases == 0) {
      os << "   (none: no error to report)\n";
      return;
    }
    os << "   median |error| " << fmt("%5.1f%%", 100 * s.median_abs) << "   mean signed "
       << pct(s.mean_signed) << "   worst " << fmt("%5.1f%%", 100 * s.worst_abs) << "\n";
  };
  line("fit set,  fixed factors:    ", fb);
  line("fit set,  contention model: ", fa);
  line("held out, fixed factors:    ", tb);
  line("held out, contention model: ", ta);
  line("off-grid, fixed factors:    ", ob);
  line("off-grid, contention model: ", oa);
  os << "\n";
  // Where the time goes: each class's predicted op durations against the measured ones,
  // summed over a set's cases (cases whose reports list every op).
  ojson classes = ojson::object();
  os << "  op durations by class, predicted / measured - 1 (summed over the cases):\n"
     << "  " << std::string(28, ' ') << "      gemm attention  norm/elt allreduce\n";
  const char* class_names[] = {"gemm", "attention", "norm_elementwise", "allreduce"};
  auto class_line = [&](const char* label, const char* key, const Eval& e,
                        const std::vector<std::size_t>& which) {
    std::array<double, 4> pred{}, meas{};
    for (std::size_t i : which) {
      if (cases[i].measured_ops != prep[i].schedule.ops.size()) continue;
      for (std::size_t j = 0; j < 4; ++j) {
        pred[j] += e.class_us[i][j];
        meas[j] += cases[i].measured_class_us[j];
      }
    }
    ojson row = ojson::object();
    os << "  " << label << std::string(28 - std::string(label).size(), ' ');
    for (std::size_t j = 0; j < 4; ++j) {
      if (meas[j] > 0) {
        os << fmt(" %+8.1f%%", 100 * (pred[j] / meas[j] - 1.0));
      } else {
        os << "       n/a";  // nothing of the class measured in the set
      }
      row[class_names[j]] = ojson{{"predicted_us", pred[j]}, {"measured_us", meas[j]}};
    }
    os << "\n";
    classes[key] = row;
  };
  class_line("fit set,  contention model:", "fit", after, train);
  class_line("held out, fixed factors:", "held_out_fixed_factors", before, test);
  class_line("held out, contention model:", "held_out", after, test);
  os << "\n";
  if (o.ops) {
    // The held-out ops the fitted model misses most, in microseconds: compute ops and comm
    // ops apart (an emulated run's copies are long, and would fill the list).
    std::sort(misses.begin(), misses.end(), [](const Miss& a, const Miss& b) {
      return std::fabs(a.diff_us) > std::fabs(b.diff_us);
    });
    os << "  per op (--ops): " << ops_cases << " of " << cases.size()
       << " cases list every op under the graph's names; the held-out ops "
       << (checking ? "the checked block" : "the fitted model") << " misses most:\n";
    for (const bool comm : {false, true}) {
      std::size_t shown = 0;
      for (const Miss& m : misses) {
        const auto& c = cases[m.c];
        if (c.ops[m.op].comm != comm) continue;
        if (++shown > (comm ? 4u : 8u)) break;
        const sim::Op& op = prep[m.c].schedule.ops[m.op];
        std::string split;
        for (auto t : c.run.spec.chunk_tokens) {
          if (!split.empty()) split += ',';
          split += std::to_string(t);
        }
        os << "    " << c.run.workload.model << " " << sim::strategy_name(c.run.spec.kind) << " "
           << split;
        if (!c.run.workload.emulate.empty()) os << " (" << c.run.workload.emulate << ")";
        os << ": op " << m.op << " " << sim::op_code_name(op.code) << " layer " << op.layer
           << " chunk " << op.chunk << fmt("  predicted %.1f us", m.predicted_us)
           << fmt(", measured %.1f us", m.measured_us) << fmt(" (%+.1f us)", m.diff_us)
           << (m.beside_comm ? (comm ? ", beside compute" : ", beside comm") : "") << "\n";
      }
    }
    os << "\n";
  }
  os << "  decisions among the measured alternatives (none and the splits on the grid):\n";
  decisions(cases, prep, train, sub(before, train), o.threshold, o.chunk_gain, os,
            "fit set,  fixed factors:    ");
  const ojson dec_fit = decisions(cases, prep, train, sub(after, train), o.threshold, o.chunk_gain,
                                  os, "fit set,  contention model: ");
  const ojson dec_test_before = decisions(cases, prep, test, sub(before, test), o.threshold,
                                          o.chunk_gain, os, "held out, fixed factors:    ");
  const ojson dec_test = decisions(cases, prep, test, sub(after, test), o.threshold, o.chunk_gain,
                                   os, "held out, contention model: ");
  // The profiles' interference microbenchmarks, never used by the fit: the fitted rules
  // against the fixed factors on each measured pair.
  ojson micro = ojson::array();
  for (const auto& path : o.profiles) {
    const sim::Profile prof = sim::load_profile(path);
    const auto rows = check_interference(prof, w0.hardware, p);
    const bool fitted = o.fit_microbenchmarks && fit_models.count(prof.model) > 0;
    micro.push_back(
        {{"profile", path},
         {"set", fitted ? "fit" : "held-out"},
         {"pairs", print_interference_check(
                       rows,
                       std::string(checking ? "the block's rules on " : "the fitted rules on ") +
                           path + "'s interference microbenchmarks (" +
                           (fitted ? "fitted" : "not in the fit") + "):",
                       os)}});
    // Pairs of a profiler that released both ops together: who took the SMs first was a race
    // (the H200 runs of 2026-11-29: a GEMM beside the copy measured 1.006x in one, 1.23x with
    // the copy first in another), so the replay's order may not be how a pair ran.
    const bool unrecorded = !rows.empty() && !prof.interference_head_start_us.has_value();
    micro.back()["head_start_recorded"] = !unrecorded;
    if (unrecorded) {
      os << "    this profile does not record its pairs' head start (profiles made before "
            "2026-12-05 do not; those made before 2026-11-29's b0556b8, as the committed H200 "
            "ones, released both ops together, so which took the SMs first was a race); the "
            "replay starts the other op "
         << kInterferenceHeadStartUs
         << " us ahead, as the profiler now does: a miss here may be the order, not the "
            "rules\n";
    }
  }
  ojson rep = sim::report_header("tpo.calibration/1", "predicted and measured");
  rep["microbenchmarks"] = std::move(micro);
  rep["decisions"] = ojson{{"threshold", o.threshold},
                           {"chunk_gain", o.chunk_gain},
                           {"fit", dec_fit},
                           {"held_out", dec_test},
                           {"held_out_fixed_factors", dec_test_before}};
  rep["fit_on"] = o.fit_on;
  if (checking) rep["params_from"] = checked_from;
  rep["legacy_copies"] = copies_json;
  rep["gemm_interpolation"] = interp_json;
  rep["params"] = sim::contention_json(p);
  rep["objective_by_block"] = ojson::array();
  for (const auto& [mn, obj] : by_block) {
    rep["objective_by_block"].push_back(
        ojson{{"gemm_cta_m", mn.first}, {"gemm_cta_n", mn.second}, {"objective", obj}});
  }
  rep["fit"] = ojson{{"fixed_factors", summary_json(fb)}, {"contention", summary_json(fa)}};
  rep["held_out"] = ojson{{"fixed_factors", summary_json(tb)}, {"contention", summary_json(ta)}};
  rep["op_classes"] = classes;
  rep["off_grid"] = ojson{{"fixed_factors", summary_json(ob)}, {"contention", summary_json(oa)}};
  rep["cases"] = std::move(rows);
  // The report and every updated profile are one set: all written, or none changed.
  OutputSet out;
  out.add(o.out, rep.dump(1) + "\n", "--out");
  if (o.update_profiles) {
    for (const auto& path : o.profiles) {
      sim::Profile prof = sim::load_profile(path);
      prof.contention = ojson{{"params", sim::contention_json(p)}, {"fit_on", o.fit_on},
                              {"fit", summary_json(fa)},           {"held_out", summary_json(ta)},
                              {"tool_version", tool_version()},    {"git_sha", git_sha()}};
      out.add(path, sim::profile_to_json(prof).dump(1) + "\n", "--profile",
              /*replaces_input=*/true);  // --update-profiles: in place, as asked
    }
  }
  out.commit();
  if (!o.out.empty()) os << "\nwrote " << output_name(o.out) << "\n";
  if (o.update_profiles) {
    for (const auto& path : o.profiles) os << "updated " << path << " (contention block)\n";
  }
  return 0;
}

}  // namespace tpo::profiler
