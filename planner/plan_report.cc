// Plan reporters and the plan loader.
#include "planner/plan_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "sim/config_paths.h"
#include "sim/cost_model.h"
#include "sim/error.h"
#include "sim/format.h"
#include "sim/json_io.h"
#include "sim/plan_file.h"
#include "sim/report.h"
#include "sim/version.h"

namespace tpo::planner {

using ojson = nlohmann::ordered_json;

namespace {
std::string length_label(std::int64_t n) {
  if (n >= 1024 && n % 1024 == 0) return std::to_string(n / 1024) + "k";
  return std::to_string(n);
}
const char* length_name(const Plan& p) {
  return p.workload.phase == sim::Phase::Prefill ? "prompt" : "context";
}
// Best candidate that changes the model, when the user did not allow those.
const Candidate* best_arch_change(const PlanPoint& p) {
  const Candidate* b = nullptr;
  for (const auto& c : p.candidates) {
    if (!c.allowed && (!b || c.total_ns < b->total_ns)) b = &c;
  }
  return b;
}
// Where the plan keeps none though a large share of none's time is exposed communication: the
// fastest candidate that was allowed, against none. It hides `hidden` of none's exposed comm
// and runs `added` more compute (the rest of its time: chunked GEMMs, and compute slowed
// beside the all-reduces); nullptr where none is not kept or the share is small.
struct NoneBecause {
  const Candidate* c = nullptr;
  std::size_t index = 0;
  double hidden_ns = 0, added_ns = 0;
};
NoneBecause none_because(const PlanPoint& p) {
  NoneBecause w;
  if (p.best != 0 || p.candidates.empty()) return w;
  const Candidate& none = p.candidates.front();
  if (none.total_ns <= 0 || none.exposed_comm_ns < none.total_ns / 10) return w;
  for (std::size_t i = 1; i < p.candidates.size(); ++i) {
    const Candidate& c = p.candidates[i];
    if (c.allowed && (!w.c || c.total_ns < w.c->total_ns)) {
      w.c = &c;
      w.index = i;
    }
  }
  if (!w.c) return w;
  w.hidden_ns = static_cast<double>(none.exposed_comm_ns - w.c->exposed_comm_ns);
  w.added_ns = static_cast<double>((w.c->total_ns - w.c->exposed_comm_ns) -
                                   (none.total_ns - none.exposed_comm_ns));
  return w;
}
// The model's notes at the longest point's prompt + context.
std::vector<std::string> plan_notes(const Plan& plan) {
  std::int64_t positions = 0;  // the longest point's prompt + context
  for (const auto& p : plan.points) {
    positions = std::max(positions, plan.workload.phase == sim::Phase::Prefill
                                        ? p.seq + std::max<std::int64_t>(p.workload.context, 0)
                                        : p.seq + 1);
  }
  return sim::model_notes(plan.workload.model, positions, plan.workload.layers,
                          plan.workload.embed_head);
}
}  // namespace

void print_plan(std::ostream& os, const Plan& plan) {
  const auto& w = plan.workload;
  os << "tpo plan — " << w.model.name << " on " << sim::hardware_label(w.hardware) << ", TP "
     << w.tp << ", " << sim::phase_name(w.phase) << ", batch " << w.batch
     << (w.phase == sim::Phase::Prefill && w.context > 0
             ? ", after " + std::to_string(w.context) + " cached tokens"
             : "")
     << ", " << w.layers << " layers" << sim::sm_clock_text(w.hardware)
     << (!w.rope && w.model.rotary_dim > 0 ? ", no rotary kernel (--rope none)" : "")
     << (!w.fused_add_norm ? ", residual add and norm apart (--add-norm separate)" : "")
     << (w.allreduce_add ? ", all-reduces add and normalize (--allreduce-fusion add-norm)" : "")
     << "\n";
  os << "predicted by the " << plan.cost_model << " cost model, "
     << sim::exec_mode_name(plan.workload.exec) << " execution (not measured); overlap must beat "
     << "none by more than " << fmt("%.1f%%", 100 * plan.options.threshold);
  // The chunk rule is said where some candidate was cut in 3 chunks or more.
  bool three = false;
  for (const auto& p : plan.points) {
    for (const auto& c : p.candidates) three = three || c.spec.chunk_tokens.size() >= 3;
  }
  if (three && plan.options.chunk_gain > 0) {
    os << ", and a chunk more must beat the best split of one fewer by more than "
       << fmt("%.1f%%", 100 * plan.options.chunk_gain) << " (--chunk-gain)";
  }
  os << "\n";
  if (!plan.allreduce_text.empty()) os << plan.allreduce_text << "\n";
  if (const auto ov = sim::overlap_line(w, plan.overlap_model); !ov.empty()) os << ov << "\n";
  sim::print_notes(os, plan_notes(plan));
  os << "\n";
  // Wide enough for the longest strategy name (parallel-block), and a space after it.
  os << std::left << std::setw(9) << length_name(plan) << std::setw(16) << "best" << std::setw(20)
     << "chunks / variant" << std::right << std::setw(13) << "predicted_ms"
     << " " << std::setw(9) << "none_ms"
     << " " << std::setw(8) << "speedup"
     << " " << std::setw(16) << "exposed_comm_ms";
  bool any_arch = false;
  for (const auto& p : plan.points) {
    for (const auto& c : p.candidates) any_arch = any_arch || !c.preserves_function();
  }
  const bool show_arch = !plan.options.allow_arch_change && any_arch;
  if (show_arch) os << "  if the model may change";
  os << "\n";
  for (const auto& p : plan.points) {
    const Candidate& b = p.candidates[p.best];
    os << std::left << std::setw(9) << p.seq << std::setw(16) << b.strategy() << std::setw(20)
       << (p.best == 0 ? "(don't overlap)" : b.detail) << std::right << std::setw(13)
       << fmt("%.3f", to_us(b.total_ns) / 1e3) << " " << std::setw(9)
       << fmt("%.3f", to_us(p.none_ns()) / 1e3) << " " << std::setw(8) << fmt("%.3fx", b.speedup)
       << " " << std::setw(16) << fmt("%.3f", to_us(b.exposed_comm_ns) / 1e3);
    if (show_arch) {
      if (const Candidate* a = best_arch_change(p); a && a->total_ns < b.total_ns) {
        os << "  " << a->strategy() << " " << fmt("%.3fx", a->speedup);
      }
    }
    os << "\n";
  }
  // Why none where much of its time is exposed communication.
  bool said = false;
  for (const auto& p : plan.points) {
    const NoneBecause w = none_because(p);
    if (!w.c) continue;
    if (!said) {
      os << "\ndon't overlap, though much of none's time is exposed communication:\n";
      said = true;
    }
    os << "  " << p.seq << ": " << fmt("%.3f", to_us(p.candidates.front().exposed_comm_ns) / 1e3)
       << " of " << fmt("%.3f", to_us(p.none_ns()) / 1e3) << " ms; the fastest overlap tried, "
       << w.c->strategy() << " " << w.c->detail << " (" << fmt("%.3f", to_us(w.c->total_ns) / 1e3)
       << " ms, " << fmt("%.3fx", w.c->speedup) << "), ";
    if (w.c->speedup > 1.0 + plan.options.threshold && w.c->unmeasured_gemm_rows &&
        p.interpolation_risk > 0) {
      // Faster by prediction, but charged for GEMM rows the profile did not measure.
      os << "beats none by prediction, but has GEMMs at rows the profile did not measure, "
            "counted "
         << fmt("%.1f%%", 100 * p.interpolation_risk)
         << " slower (--interpolation-risk), so it does not beat none by more than the "
         << fmt("%.1f%%", 100 * plan.options.threshold) << " threshold\n";
    } else if (w.c->speedup > 1.0) {
      os << "beats none by less than the " << fmt("%.1f%%", 100 * plan.options.threshold)
         << " threshold (--threshold)\n";
    } else {
      os << "hides " << fmt("%.3f", w.hidden_ns / 1e6) << " ms of it but runs "
         << fmt("%.3f", w.added_ns / 1e6)
         << " ms more compute (its cut GEMMs, and compute slowed beside the all-reduces: the "
            "overlap line above)\n";
    }
  }
  if (plan.cost_model != "analytical") {
    std::map<std::string, std::int64_t> total;
    for (const auto& p : plan.points) {
      for (const auto& [k, n] : p.cost_sources) total[k] += n;
    }
    os << "\nop costs of the chosen schedules:";
    bool first = true;
    for (const auto& [k, n] : total) {
      os << (first ? " " : ", ") << n << " " << k;
      first = false;
    }
    os << " (profile " << plan.options.workload.profile << ")\n";
    std::set<std::int64_t> rows;
    for (const auto& p : plan.points)
      rows.insert(p.gemm_rows_interpolated.begin(), p.gemm_rows_interpolated.end());
    if (!rows.empty()) {
      os << "GEMMs of the chosen schedules at rows the profile did not measure (interpolated):";
      std::size_t shown = 0;
      for (auto m : rows) {
        if (++shown > 12) {
          os << " ...";
          break;
        }
        os << " " << m;
      }
      os << "\n  (a cuBLASLt GEMM's time can step between measured rows: on the H200, 1408, 1664 "
            "and 2688 rows ran 9-11% over the interpolation;\n  a CUDA profile made since "
            "2026-12-02 measures every multiple of --align up to 4096 rows, --gemm-step)\n";
    }
    double risk = 0;
    for (const auto& p : plan.points) risk = std::max(risk, p.interpolation_risk);
    if (risk > 0) {
      os << "ranking: a candidate with GEMMs at rows the profile did not measure counts "
         << fmt("%.1f%%", 100 * risk) << " slower ("
         << (plan.options.interpolation_risk < 0
                 ? "the profile's own interpolation error, leave-one-out; "
                 : "--interpolation-risk; ")
         << "predicted times unchanged; --interpolation-risk off ranks by prediction alone)\n";
      for (const auto& p : plan.points) {
        if (p.best == p.best_by_prediction) continue;
        const Candidate& b = p.candidates[p.best];
        const Candidate& a = p.candidates[p.best_by_prediction];
        auto name = [](const Candidate& c, bool none) {
          return none ? std::string("don't overlap") : c.strategy() + " " + c.detail;
        };
        os << "  " << p.seq << ": " << name(b, p.best == 0) << " ("
           << fmt("%.3f", to_us(b.total_ns) / 1e3) << " ms) over "
           << name(a, p.best_by_prediction == 0) << " (" << fmt("%.3f", to_us(a.total_ns) / 1e3)
           << " ms), whose GEMM rows were not all measured\n";
      }
    }
  }
  if (!plan.options.comm_ctas.empty()) {
    os << "\ncomm SM budget searched: " << plan.options.comm_ctas
       << " CTAs (the chosen one is in the variant column); gain over the best at the default "
          "budget:";
    for (const auto& p : plan.points) {
      const Candidate& b = p.candidates[p.best];
      os << " " << p.seq << ": "
         << fmt("%.1f%%", 100.0 * (static_cast<double>(p.best_at_default_budget_ns) /
                                       static_cast<double>(b.total_ns) -
                                   1.0));
    }
    os << "\n(only 16 CTAs has run in a measured schedule: other budgets are the contention "
          "model's extrapolation, README 'Overlap: the contention model')\n";
  }
  const auto kinds = parse_strategy_list(plan.options.strategies);
  const bool chunked = std::any_of(kinds.begin(), kinds.end(),
                                   [](auto k) { return sim::strategy(k).uses_chunks(); });
  if (plan.workload.phase == sim::Phase::Prefill && chunked) {
    // ISO (and iso+ladder) need a chunk boundary on the --align grid inside the prompt.
    std::string short_ones;
    for (const auto& p : plan.points) {
      if ((p.seq - 1) / plan.options.align < 1) {
        short_ones += (short_ones.empty() ? "" : ", ") + std::to_string(p.seq);
      }
    }
    if (!short_ones.empty()) {
      os << "\niso not tried at " << short_ones << " tokens: no chunk boundary on the --align "
         << plan.options.align << " grid inside the prompt (lower --align to try it)\n";
    }
    // Where a pick is cut on that grid.
    const bool cut = std::any_of(plan.points.begin(), plan.points.end(), [](const auto& p) {
      return p.candidates[p.best].spec.chunk_tokens.size() > 1;
    });
    if (plan.options.align % 8 != 0 && cut) {
      os << "\nnote: --align " << plan.options.align
         << " puts chunk boundaries off multiples of 8 tokens; GPU kernels run such shapes "
            "slower than aligned ones, which these predictions do not include (the default, "
            "64, keeps them aligned)\n";
    }
  }
  if (plan.workload.phase == sim::Phase::Prefill && !plan.points.empty()) {
    os << "\nA prompt between two planned lengths: the shorter one's strategy, its chunks scaled "
          "to the prompt\n(the JSON's lookup entries, for a serving engine); one shorter than "
       << std::min_element(plan.points.begin(), plan.points.end(),
                           [](const auto& a, const auto& b) { return a.seq < b.seq; })
              ->seq
       << " tokens is not planned (the lookup falls back to none).\n";
  }
  if (show_arch) {
    os << "\nladder, iso+ladder and parallel-block change the model (retraining needed); they are "
          "shown, not chosen.\nPass --allow-arch-change to let the planner pick them.\n";
  }
}

ojson plan_json(const Plan& plan) {
  const auto& w = plan.workload;
  const auto& o = plan.options;
  auto cand_json = [](const Candidate& c) {
    return ojson{{"strategy", c.strategy()},
                 {"detail", c.detail},
                 {"chunks", c.spec.chunk_tokens},
                 {"params", sim::strategy_params_json(c.spec)},
                 {"total_us", to_us(c.total_ns)},
                 {"speedup", c.speedup},
                 {"exposed_comm_us", to_us(c.exposed_comm_ns)},
                 {"preserves_function", c.preserves_function()},
                 {"allowed", c.allowed},
                 {"comm_ctas", c.comm_ctas},
                 {"unmeasured_gemm_rows", c.unmeasured_gemm_rows}};
  };
  ojson j = sim::report_header("tpo.plan/1", "predicted");
  j["cost_model"] = plan.cost_model;
  j["overlap_model"] = plan.overlap_model;
  j["notes"] = plan_notes(plan);
  j["execution"] = plan.execution;
  j["options"] = ojson{{"model", o.workload.model},
                       {"hardware", o.workload.hardware},
                       {"tp", o.workload.tp},
                       {"phase", o.workload.phase},
                       {"seq", o.seq},
                       {"batch", o.workload.batch},
                       {"context", o.workload.context},
                       {"strategies", o.strategies},
                       {"max_chunks", o.max_chunks},
                       {"align", o.align},
                       {"threshold", o.threshold},
                       {"chunk_gain", o.chunk_gain},
                       {"allow_arch_change", o.allow_arch_change},
                       {"layers", o.workload.layers},
                       {"profile", o.workload.profile},
                       {"comm_ctas", o.comm_ctas},
                       {"sm_clock", o.workload.sm_clock},
                       {"exec", o.workload.exec},
                       {"rope", o.workload.rope},
                       {"vocab", o.workload.vocab},
                       {"add_norm", o.workload.add_norm},
                       {"allreduce_fusion", o.workload.allreduce_fusion},
                       {"interpolation_risk",
                        o.interpolation_risk < 0 ? ojson("auto") : ojson(o.interpolation_risk)}};
  // Of a file only: a pipe (/dev/stdin) cannot be read again to fingerprint or to check.
  if (std::error_code ec;
      !o.workload.profile.empty() && std::filesystem::is_regular_file(o.workload.profile, ec)) {
    j["profile_digest"] = file_digest(o.workload.profile, "--profile");
  }
  // Where relative paths in it are read from: recorded only where the plan has one, so that
  // validate --plan finds them from any folder.
  if (const std::string made_in = sim::made_in_for(o.workload); !made_in.empty()) {
    j["made_in"] = made_in;
  }
  j["model"] = sim::model_json(w.model);
  j["hardware"] = sim::hardware_json(w.hardware);
  j["tp"] = w.tp;
  j["phase"] = sim::phase_name(w.phase);
  j["batch"] = o.workload.batch;
  j["num_layers"] = w.layers;
  ojson lookup = ojson::array();
  ojson points = ojson::array();
  for (const auto& p : plan.points) {
    const Candidate& b = p.candidates[p.best];
    std::vector<double> fractions;
    for (auto c : b.spec.chunk_tokens) {
      fractions.push_back(static_cast<double>(c) / static_cast<double>(p.seq));
    }
    lookup.push_back(ojson{{"seq_len", p.seq},
                           {"batch", p.batch},
                           {"strategy", b.strategy()},
                           {"chunks", b.spec.chunk_tokens},
                           {"chunk_fractions", fractions},
                           {"params", sim::strategy_params_json(b.spec)},
                           {"predicted_us", to_us(b.total_ns)},
                           {"none_us", to_us(p.none_ns())},
                           {"speedup", b.speedup},
                           {"run", sim::planned_run_json({p.workload, b.spec})}});
    ojson cands = ojson::array();
    for (const auto& c : p.candidates) cands.push_back(cand_json(c));
    points.push_back(ojson{{"seq_len", p.seq},
                           {"batch", p.batch},
                           {"none_us", to_us(p.none_ns())},
                           {"best", p.best},
                           {"overlap", p.best != 0},
                           {"simulations", p.simulations},
                           {"cost_sources", p.cost_sources},
                           {"gemm_rows_interpolated", p.gemm_rows_interpolated},
                           {"interpolation_risk", p.interpolation_risk},
                           {"best_by_prediction", p.best_by_prediction},
                           {"candidates", std::move(cands)}});
    // Where none is kept though much of its time is exposed comm: the fastest overlap tried.
    if (const NoneBecause w = none_because(p); w.c) {
      points.back()["none_because"] = ojson{{"candidate", w.index},
                                            {"hidden_comm_us", w.hidden_ns / 1e3},
                                            {"added_compute_us", w.added_ns / 1e3}};
    }
    // With a budget search only: what the plan picks at the default budget alone.
    if (!plan.options.comm_ctas.empty()) {
      points.back()["best_at_default_budget_us"] = to_us(p.best_at_default_budget_ns);
    }
  }
  j["lookup"] = std::move(lookup);
  j["points"] = std::move(points);
  return j;
}

std::string plan_csv(const Plan& plan) {
  std::ostringstream os;
  os << "seq_len,batch,strategy,detail,predicted_total_us,predicted_speedup,"
        "predicted_exposed_comm_us,preserves_function,allowed,best\n";
  for (const auto& p : plan.points) {
    for (std::size_t i = 0; i < p.candidates.size(); ++i) {
      const Candidate& c = p.candidates[i];
      os << p.seq << ',' << p.batch << ',' << c.strategy() << ",\"" << c.detail << "\","
         << fmt("%.3f", to_us(c.total_ns)) << ',' << fmt("%.5f", c.speedup) << ','
         << fmt("%.3f", to_us(c.exposed_comm_ns)) << ',' << (c.preserves_function() ? 1 : 0) << ','
         << (c.allowed ? 1 : 0) << ',' << (i == p.best ? 1 : 0) << "\n";
    }
  }
  return os.str();
}

// Text from the inputs (a model's or hardware file's name) inside the SVG's XML.
static std::string xml_text(const std::string& t) {
  std::string out;
  for (char c : t) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string plan_svg(const Plan& plan) {
  // One line per strategy: its best variant's speedup at each length.
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::pair<std::int64_t, double>>> lines;
  std::map<std::string, bool> changes_model;
  for (const auto& p : plan.points) {
    std::map<std::string, double> best;
    for (const auto& c : p.candidates) {
      if (std::find(order.begin(), order.end(), c.strategy()) == order.end()) {
        order.push_back(c.strategy());
      }
      changes_model[c.strategy()] = !c.preserves_function();
      best[c.strategy()] = std::max(best[c.strategy()], c.speedup);
    }
    for (const auto& [s, v] : best) lines[s].emplace_back(p.seq, v);
  }
  const double W = 940, H = 520, L = 70, R = 270, T = 50, B = 75;
  const double pw = W - L - R, ph = H - T - B;
  double xmin = std::log2(static_cast<double>(plan.points.front().seq));
  double xmax = std::log2(static_cast<double>(plan.points.back().seq));
  if (xmax - xmin < 1e-9) {
    xmin -= 0.5;
    xmax += 0.5;
  }
  double ymin = 1.0, ymax = 1.0;
  for (const auto& [s, pts] : lines) {
    for (auto [x, y] : pts) {
      ymin = std::min(ymin, y);
      ymax = std::max(ymax, y);
    }
  }
  const double step = (ymax - ymin) > 0.6 ? 0.2 : ((ymax - ymin) > 0.25 ? 0.1 : 0.05);
  ymin = std::floor(ymin / step) * step;
  ymax = std::ceil(ymax / step + 1e-9) * step;
  if (ymax - ymin < step) ymax = ymin + step;
  auto X = [&](std::int64_t n) {
    return L + (std::log2(static_cast<double>(n)) - xmin) / (xmax - xmin) * pw;
  };
  auto Y = [&](double v) { return T + (ymax - v) / (ymax - ymin) * ph; };
  const char* palette[] = {"#444444", "#1f77b4", "#d62728", "#2ca02c",
                           "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"};
  std::ostringstream os;
  os << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
     << "\" viewBox=\"0 0 " << W << " " << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  const auto& w = plan.workload;
  os << "<text x=\"" << L << "\" y=\"22\" font-size=\"15\" font-weight=\"bold\">Predicted speedup "
     << "over no overlap — " << xml_text(w.model.name) << ", " << xml_text(w.hardware.name)
     << ", TP " << w.tp << "</text>\n";
  os << "<text x=\"" << L << "\" y=\"40\" fill=\"#555\">" << sim::phase_name(w.phase) << ", batch "
     << w.batch
     << (w.phase == sim::Phase::Prefill && w.context > 0
             ? ", after " + std::to_string(w.context) + " cached tokens"
             : "")
     << ", " << w.layers << " layers; " << plan.cost_model
     << " cost model, predicted, not measured; best variant of each strategy</text>\n";
  // Grid and y ticks.
  for (double v = ymin; v <= ymax + 1e-9; v += step) {
    os << "<line x1=\"" << L << "\" x2=\"" << L + pw << "\" y1=\"" << Y(v) << "\" y2=\"" << Y(v)
       << "\" stroke=\"" << (std::abs(v - 1.0) < 1e-9 ? "#888" : "#e5e5e5") << "\"/>\n";
    os << "<text x=\"" << L - 8 << "\" y=\"" << Y(v) + 4 << "\" text-anchor=\"end\">"
       << fmt("%.2f", v) << "×</text>\n";
  }
  for (const auto& p : plan.points) {
    os << "<line x1=\"" << X(p.seq) << "\" x2=\"" << X(p.seq) << "\" y1=\"" << T << "\" y2=\""
       << T + ph << "\" stroke=\"#f0f0f0\"/>\n";
    os << "<text x=\"" << X(p.seq) << "\" y=\"" << T + ph + 18 << "\" text-anchor=\"middle\">"
       << length_label(p.seq) << "</text>\n";
  }
  os << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << pw << "\" height=\"" << ph
     << "\" fill=\"none\" stroke=\"#333\"/>\n";
  os << "<text x=\"" << L + pw / 2 << "\" y=\"" << H - 8 << "\" text-anchor=\"middle\">"
     << length_name(plan) << " length (tokens, log scale)</text>\n";
  os << "<text transform=\"translate(18," << T + ph / 2
     << ") rotate(-90)\" text-anchor=\"middle\">speedup over none (predicted)</text>\n";
  // The threshold overlap must clear to be recommended.
  const double thr = 1.0 + plan.options.threshold;
  if (thr <= ymax) {
    os << "<line x1=\"" << L << "\" x2=\"" << L + pw << "\" y1=\"" << Y(thr) << "\" y2=\"" << Y(thr)
       << "\" stroke=\"#999\" stroke-dasharray=\"2,3\"/>\n";
    os << "<text x=\"" << L + pw - 4 << "\" y=\"" << Y(thr) - 4
       << "\" text-anchor=\"end\" fill=\"#777\" font-size=\"10\">threshold ("
       << fmt("%.0f", 100 * plan.options.threshold) << "%)</text>\n";
  }
  int li = 0;
  for (const auto& s : order) {
    const auto& pts = lines[s];
    const char* colour = palette[li % 8];
    const bool dashed = changes_model[s];
    os << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"2\""
       << (dashed ? " stroke-dasharray=\"6,4\"" : "") << " points=\"";
    for (auto [x, y] : pts) os << fmt("%.1f", X(x)) << "," << fmt("%.1f", Y(y)) << " ";
    os << "\"/>\n";
    for (auto [x, y] : pts) {
      os << "<circle cx=\"" << fmt("%.1f", X(x)) << "\" cy=\"" << fmt("%.1f", Y(y))
         << "\" r=\"3\" fill=\"" << colour << "\"><title>" << s << " at " << x << ": "
         << fmt("%.3f", y) << "×</title></circle>\n";
    }
    const double ly = T + 10 + 20 * li;
    os << "<line x1=\"" << L + pw + 15 << "\" x2=\"" << L + pw + 40 << "\" y1=\"" << ly
       << "\" y2=\"" << ly << "\" stroke=\"" << colour << "\" stroke-width=\"2\""
       << (dashed ? " stroke-dasharray=\"6,4\"" : "") << "/>\n";
    os << "<text x=\"" << L + pw + 46 << "\" y=\"" << ly + 4 << "\">" << s
       << (dashed ? " (changes model)" : "") << "</text>\n";
    ++li;
  }
  // The recommendation at each length: a ring on the chosen point, its name under the axis.
  for (const auto& p : plan.points) {
    const Candidate& b = p.candidates[p.best];
    os << "<circle cx=\"" << fmt("%.1f", X(p.seq)) << "\" cy=\"" << fmt("%.1f", Y(b.speedup))
       << "\" r=\"7\" fill=\"none\" stroke=\"black\" stroke-width=\"1.5\"><title>chosen at "
       << p.seq << ": " << b.strategy() << "</title></circle>\n";
    os << "<text x=\"" << X(p.seq) << "\" y=\"" << T + ph + 32
       << "\" text-anchor=\"middle\" font-size=\"10\" fill=\"#333\">" << b.strategy()
       << "</text>\n";
  }
  const double ly = T + 10 + 20 * li;
  os << "<circle cx=\"" << L + pw + 27 << "\" cy=\"" << ly << "\" r=\"6\" fill=\"none\" "
     << "stroke=\"black\" stroke-width=\"1.5\"/>\n";
  os << "<text x=\"" << L + pw + 46 << "\" y=\"" << ly + 4 << "\">recommended</text>\n";
  os << "</svg>\n";
  return os.str();
}

}  // namespace tpo::planner
