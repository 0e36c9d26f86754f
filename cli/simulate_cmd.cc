// `tpo simulate`: flags bound to sim::WorkloadOptions and sim::StrategyOptions, then one run
// (or one per strategy with --compare). Output files are checked before the work and written
// atomically after.
#include <iomanip>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "sim/error.h"
#include "sim/format.h"
#include "sim/json_io.h"
#include "sim/profile_cost.h"
#include "sim/report.h"
#include "sim/simulate.h"
#include "sim/version.h"

namespace tpo::cli {

namespace {

struct SimulateCli {
  sim::WorkloadOptions workload;
  sim::StrategyOptions strategy;
  bool compare = false;
  std::string json_path, trace_path;
};

using namespace tpo::sim;

// The comm budget the hardware (or profile) gives when --comm-ctas is not.
std::int64_t default_comm_ctas_of(WorkloadOptions o) {
  o.comm_ctas = 0;
  const Workload w = make_workload(o);
  const auto cm = make_cost_model(w, o.profile);
  return cm->contention() ? cm->contention()->comm_ctas : w.hardware.contention.comm_ctas;
}

// Under --comm-ctas the baseline none is the one without it (the hardware's default budget): what
// the user would run without overlap, so the speedup is not inflated by a slowed none.
// With --comm-ctas: what the speedups are over, said before the numbers ("" without it).
std::string budget_note(const WorkloadOptions& wo, std::int64_t baseline_ns) {
  if (wo.comm_ctas == 0) return "";
  return "comm budget: every schedule here runs its all-reduces on " +
         std::to_string(wo.comm_ctas) + " CTAs (--comm-ctas); speedups are over none at the " +
         "default " + std::to_string(default_comm_ctas_of(wo)) + " CTAs (" +
         tpo::fmt("%.3f ms", tpo::to_us(baseline_ns) / 1e3) + "), so none itself can read below 1x";
}

// The cost model's line; with a profile, how many of the schedule's ops it priced from
// measurements (measured or interpolated), how many it extrapolated past them (the analytical
// model scaled by the profile's ratio at the nearest measured size) and how many the analytical
// model priced alone (the report's cost_source, counted the same way).
std::string model_and_exec_of(const WorkloadOptions& wo, const CostModel& cm, const Schedule& s) {
  if (wo.profile.empty()) return sim::model_and_exec(cm);
  std::int64_t from_profile = 0, extrapolated = 0, all = 0;
  for (const auto& [src, n] : cost_sources(s, cm)) {
    all += n;
    if (src == "measured" || src == "interpolated") from_profile += n;
    if (src == "extrapolated") extrapolated += n;
  }
  const std::int64_t analytical = all - from_profile - extrapolated;
  std::string parts =
      std::to_string(from_profile) + " of " + std::to_string(all) + " ops from its measurements";
  if (extrapolated > 0) {
    parts += ", " + std::to_string(extrapolated) +
             " extrapolated past them (the analytical model scaled at the nearest measured size)";
  }
  if (analytical > 0) parts += ", " + std::to_string(analytical) + " analytical alone";
  return cm.name() + " cost model (" + parts + "), " + exec_mode_name(cm.exec()) + " execution";
}

// One strategy: the summary, where the op costs came from, the report and the trace.
void run_one(const SimulateCli& c, const Workload& w, const CostModel& cm, const SimResult& base) {
  const WorkloadOptions& wo = c.workload;
  const StrategyOptions& so = c.strategy;
  const StrategyKind kind = parse_strategy_name(so.strategy);
  const std::int64_t baseline_ns = base.timeline.total_ns;
  const SimResult r = kind == StrategyKind::None && wo.comm_ctas == 0
                          ? base
                          : simulate(w, make_spec(so, w, kind), cm);
  print_summary(std::cout, w, r, baseline_ns, model_and_exec_of(wo, cm, r.schedule),
                cm.overlap_model(), cm.allreduce_text(w), budget_note(wo, baseline_ns));
  if (!wo.profile.empty()) {
    auto sources = [&](const char* label, const Schedule& sch) {
      std::cout << "  " << std::left << std::setw(22) << label;
      for (const auto& [src, n] : cost_sources(sch, cm)) std::cout << n << " " << src << "  ";
      std::cout << "\n";
    };
    sources("op costs (strategy)", r.schedule);
    sources("op costs (none)", base.schedule);
    std::cout << "  profile " << wo.profile
              << ": measured sizes are exact, interpolated ones between them, extrapolated "
                 "and analytical ones are the model's\n";
  }
  OutputSet out;  // both or neither
  if (!c.json_path.empty()) {
    auto j = simulate_report(wo, so, w, r, baseline_ns, cm);
    j["options"]["compare"] = false;
    out.add(c.json_path, j.dump(1) + "\n", "--json");
  }
  if (!c.trace_path.empty()) out.add(c.trace_path, chrome_trace(w, r), "--trace");
  out.commit();
  if (!c.json_path.empty()) std::cout << "\nwrote " << output_name(c.json_path) << "\n";
  if (!c.trace_path.empty()) {
    std::cout << "wrote " << output_name(c.trace_path) << " (open in https://ui.perfetto.dev)\n";
  }
}

// Every strategy side by side (n/a with the reason where one does not apply).
void run_compare(const SimulateCli& c, const Workload& w, const CostModel& cm,
                 const SimResult& base) {
  const WorkloadOptions& wo = c.workload;
  const StrategyOptions& so = c.strategy;
  const std::int64_t baseline_ns = base.timeline.total_ns;
  std::vector<CompareRow> rows;
  nlohmann::ordered_json reports = nlohmann::ordered_json::array();
  nlohmann::ordered_json skipped = nlohmann::ordered_json::array();  // n/a, with the reason
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  std::string unaligned;  // the first split whose chunks are not multiples of 8 tokens
  int pid = 0;
  for (auto k : all_strategies()) {
    StrategySpec spec(k);
    spec.pieces = so.pieces;
    CompareRow row;
    row.strategy = strategy_name(k);
    row.preserves_function = preserves_function(k);
    if (auto why = not_applicable_reason(w, spec); !why.empty()) {
      row.chunks = "-";
      row.skipped = why;
      rows.push_back(row);
      skipped.push_back({{"strategy", row.strategy}, {"reason", why}});
      continue;
    }
    spec = make_spec(so, w, k);
    const SimResult r = k == StrategyKind::None && wo.comm_ctas == 0 ? base : simulate(w, spec, cm);
    row.chunks = variant_text(spec);
    if (unaligned.empty()) unaligned = unaligned_chunks_note(r.schedule);
    row.total_ns = r.timeline.total_ns;
    row.exposed_comm_ns = r.timeline.exposed_comm_ns;
    row.overlap_efficiency = r.timeline.overlap_efficiency;
    row.slowed = slowed_beside(r);
    rows.push_back(row);
    if (!c.json_path.empty()) {
      reports.push_back(simulate_report(wo, so, w, r, baseline_ns, cm));
      reports.back()["options"]["compare"] = true;
    }
    if (!c.trace_path.empty()) {
      append_trace(events, pid++, "predicted: " + r.schedule.strategy, r.schedule,
                   r.timeline.start_ns, r.timeline.end_ns);
    }
  }
  print_compare(std::cout, w, rows, baseline_ns, model_and_exec_of(wo, cm, base.schedule),
                cm.overlap_model(), cm.allreduce_text(w), budget_note(wo, baseline_ns));
  if (!unaligned.empty()) std::cout << "\n" << unaligned << "\n";
  OutputSet out;  // both or neither
  if (!c.json_path.empty()) {
    nlohmann::ordered_json j = report_header("tpo.simulate-compare/1", "predicted");
    j["options"] = options_json(wo, so);
    j["options"]["compare"] = true;
    j["results"] = std::move(reports);
    j["not_applicable"] = std::move(skipped);
    out.add(c.json_path, j.dump(1) + "\n", "--json");
  }
  if (!c.trace_path.empty()) {
    nlohmann::ordered_json j{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}};
    out.add(c.trace_path, j.dump() + "\n", "--trace");
  }
  out.commit();
  if (!c.json_path.empty()) std::cout << "wrote " << output_name(c.json_path) << "\n";
  if (!c.trace_path.empty()) {
    std::cout << "wrote " << output_name(c.trace_path) << " (open in https://ui.perfetto.dev)\n";
  }
}

int run_simulate(const SimulateCli& c) {
  parse_strategy_name(c.strategy.strategy);  // an unknown name fails before any work
  check_distinct_outputs({{c.json_path, "--json"}, {c.trace_path, "--trace"}});
  if (!c.json_path.empty()) check_writable(c.json_path, "--json");
  if (!c.trace_path.empty()) check_writable(c.trace_path, "--trace");
  const Workload w = make_workload(c.workload);
  const auto cm = make_cost_model(w, c.workload.profile);
  if (c.workload.comm_ctas > 0 && !(cm->contention() && cm->contention()->enabled)) {
    throw InputError("--comm-ctas", std::to_string(c.workload.comm_ctas),
                     "the " + cm->name() + " cost model of " + w.hardware.name +
                         " has no contention model (no \"contention\" block), so the budget "
                         "changes nothing; drop --comm-ctas (as tpo plan refuses it)");
  }
  SimResult base;
  if (c.workload.comm_ctas > 0) {
    WorkloadOptions o = c.workload;
    o.comm_ctas = 0;
    const Workload w0 = make_workload(o);
    base = simulate(w0, make_spec(c.strategy, w0, StrategyKind::None),
                    *make_cost_model(w0, o.profile));
  } else {
    base = simulate(w, make_spec(c.strategy, w, StrategyKind::None), *cm);
  }
  if (c.compare) {
    run_compare(c, w, *cm, base);
  } else {
    run_one(c, w, *cm, base);
  }
  return 0;
}

}  // namespace

std::function<int()> add_simulate(CLI::App& app) {
  auto c = std::make_shared<SimulateCli>();
  auto* sub = app.add_subcommand(
      "simulate",
      "Predict the timeline of one overlap strategy (or --compare all of them) for a model on\n"
      "a machine, with the analytical cost model (or a measured --profile) and the\n"
      "discrete-event engine.");
  sub->footer(
      "Examples:\n"
      "  tpo simulate --model llama2-70b --hardware rtx4090x8 --tp 8 --seq 4096 --compare\n"
      "  tpo simulate --strategy iso --split 0.55,0.45 --json r.json --trace r.trace.json\n"
      "  tpo simulate --model llama3-70b --hardware h100x8 --tp 8 --phase decode --batch 16 "
      "--seq 2048 --exec graph --compare");
  bind_workload(sub, &c->workload, WorkloadFlags::one_schedule());
  bind_strategy(sub, &c->strategy);
  sub->add_flag("--compare", c->compare,
                "Simulate every strategy that applies and print them side by side");
  sub->add_option("--json", c->json_path,
                  "Write the report (schema tpo.simulate/1) to FILE (- for standard output; the "
                  "text summary then goes to standard error)");
  sub->add_option("--trace", c->trace_path,
                  "Write a Chrome trace to FILE (open it in https://ui.perfetto.dev)");
  return [c, sub] {
    check_given(c->workload, c->strategy, *sub, c->compare);
    if (sub->count("--vocab") && !c->workload.embed_head) {
      throw InputError("--vocab", c->workload.vocab,
                       "applies with --embed-head (the embedding and LM head it describes)");
    }
    return run_simulate(*c);
  };
}

}  // namespace tpo::cli
