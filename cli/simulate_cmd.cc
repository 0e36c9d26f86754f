// `tpo simulate`: flags bound to sim::SimulateOptions, then one run (or one per strategy
// with --compare). Output files are checked before the work and written atomically after.
#include <iomanip>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "sim/error.h"
#include "sim/json_io.h"
#include "sim/profile_cost.h"
#include "sim/report.h"
#include "sim/simulate.h"
#include "sim/version.h"

namespace tpo::cli {

namespace {

int run_simulate(const sim::SimulateOptions& o) {
  using namespace tpo::sim;
  const auto kind = parse_strategy(o.strategy);
  if (!kind) {
    std::string names;
    for (auto k : all_strategies())
      names += std::string(names.empty() ? "" : ", ") + strategy_name(k);
    throw InputError("--strategy", o.strategy, "unknown strategy (choose one of: " + names + ")");
  }
  if (!o.json_path.empty()) check_writable(o.json_path, "--json");
  if (!o.trace_path.empty()) check_writable(o.trace_path, "--trace");
  const Workload w = make_workload(o);
  const auto cm_ptr = make_cost_model(w, o.profile_path);
  const CostModel& cm = *cm_ptr;
  const SimResult base = simulate(w, make_spec(o, w, StrategyKind::None), cm);
  const std::int64_t baseline_ns = base.timeline.total_ns;

  if (!o.compare) {
    const StrategySpec spec = make_spec(o, w, *kind);
    const SimResult r = *kind == StrategyKind::None ? base : simulate(w, spec, cm);
    print_summary(std::cout, w, r, baseline_ns, cm.name());
    if (!o.profile_path.empty()) {
      auto sources = [&](const char* label, const Schedule& sch) {
        std::cout << "  " << std::left << std::setw(22) << label;
        for (const auto& [src, n] : cost_sources(sch, cm)) std::cout << n << " " << src << "  ";
        std::cout << "\n";
      };
      sources("op costs (strategy)", r.schedule);
      sources("op costs (none)", base.schedule);
      std::cout << "  profile " << o.profile_path
                << ": measured sizes are exact, interpolated ones between them, extrapolated "
                   "and analytical ones are the model's\n";
    }
    if (!o.json_path.empty()) {
      write_file_atomic(o.json_path, simulate_report(o, w, r, baseline_ns, cm).dump(1) + "\n",
                        "--json");
      std::cout << "\nwrote " << o.json_path << "\n";
    }
    if (!o.trace_path.empty()) {
      write_file_atomic(o.trace_path, chrome_trace(w, r), "--trace");
      std::cout << "wrote " << o.trace_path << " (open in https://ui.perfetto.dev)\n";
    }
    return 0;
  }

  std::vector<CompareRow> rows;
  nlohmann::ordered_json reports = nlohmann::ordered_json::array();
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  int pid = 0;
  for (auto k : all_strategies()) {
    StrategySpec spec;
    spec.kind = k;
    spec.pieces = o.pieces;
    CompareRow row;
    row.strategy = strategy_name(k);
    row.preserves_function = preserves_function(k);
    if (auto why = not_applicable_reason(w, spec); !why.empty()) {
      row.chunks = "-";
      row.skipped = why;
      rows.push_back(row);
      continue;
    }
    spec = make_spec(o, w, k);
    const SimResult r = k == StrategyKind::None ? base : simulate(w, spec, cm);
    row.chunks = chunks_text(spec, r.schedule);
    row.total_ns = r.timeline.total_ns;
    row.exposed_comm_ns = r.timeline.exposed_comm_ns;
    row.overlap_efficiency = r.timeline.overlap_efficiency;
    rows.push_back(row);
    if (!o.json_path.empty()) reports.push_back(simulate_report(o, w, r, baseline_ns, cm));
    if (!o.trace_path.empty()) {
      append_trace(events, pid++, "predicted: " + r.schedule.strategy, r.schedule,
                   r.timeline.start_ns, r.timeline.end_ns);
    }
  }
  print_compare(std::cout, w, rows, baseline_ns, cm.name());
  if (!o.json_path.empty()) {
    nlohmann::ordered_json j = report_header("tpo.simulate-compare/1", "predicted");
    j["options"] = options_json(o);
    j["results"] = std::move(reports);
    write_file_atomic(o.json_path, j.dump(1) + "\n", "--json");
    std::cout << "wrote " << o.json_path << "\n";
  }
  if (!o.trace_path.empty()) {
    nlohmann::ordered_json j{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}};
    write_file_atomic(o.trace_path, j.dump() + "\n", "--trace");
    std::cout << "wrote " << o.trace_path << " (open in https://ui.perfetto.dev)\n";
  }
  return 0;
}

}  // namespace

// Options that would be silently ignored are errors: the user meant something by them.
void check_given(const sim::SimulateOptions& o, const CLI::App& sub) {
  auto given = [&](const char* name) { return sub.count(name) > 0; };
  const bool iso = o.strategy == "iso" || o.strategy == "iso+ladder";
  const bool ladder = o.strategy == "ladder" || o.strategy == "iso+ladder";
  if (given("--context") && o.context < 0) {
    throw InputError("--context", std::to_string(o.context), "must be >= 0");
  }
  if (o.phase == "decode" && given("--seq") && given("--context")) {
    throw InputError("--seq", std::to_string(o.seq),
                     "in decode --seq only stands in for --context; give one of them");
  }
  if (o.pieces < 2) throw InputError("--pieces", std::to_string(o.pieces), "must be >= 2");
  if (o.ladder_layers < 0) {
    throw InputError("--ladder-layers", std::to_string(o.ladder_layers), "must be >= 0");
  }
  if (o.compare) return;  // --compare uses each option for the strategies it concerns
  if (!iso && (given("--chunks") || given("--split"))) {
    throw InputError(given("--split") ? "--split" : "--chunks", "",
                     "applies to --strategy iso or iso+ladder, not " + o.strategy);
  }
  if (!ladder && given("--ladder-layers")) {
    throw InputError("--ladder-layers", "", "applies to --strategy ladder or iso+ladder");
  }
  if (o.strategy != "gemm-split" && given("--pieces")) {
    throw InputError("--pieces", "", "applies to --strategy gemm-split");
  }
}

void add_workload_options(CLI::App* sub, sim::SimulateOptions* opts) {
  sub->add_option("--model", opts->model,
                  "Shipped model name (see configs/models), a path to a tpo model JSON, or a "
                  "Hugging Face config.json")
      ->capture_default_str();
  sub->add_option("--hardware", opts->hardware,
                  "Shipped hardware name (see configs/hardware) or a path to a hardware JSON")
      ->capture_default_str();
  sub->add_option("--tp", opts->tp, "Tensor-parallel degree (GPUs sharing each layer)")
      ->capture_default_str();
  sub->add_option("--phase", opts->phase,
                  "prefill (a batch of prompts) or decode (one token per request)")
      ->capture_default_str();
  sub->add_option("--batch", opts->batch, "Requests in the batch")->capture_default_str();
  sub->add_option("--seq", opts->seq,
                  "Prefill: prompt tokens per request. Decode: the context length when "
                  "--context is not given")
      ->capture_default_str();
  sub->add_option("--context", opts->context,
                  "Tokens already in each request's KV cache (prefill default 0; decode "
                  "default --seq)");
  sub->add_option("--strategy", opts->strategy,
                  "none | iso | ladder | gemm-split | microbatch | parallel-block | iso+ladder")
      ->capture_default_str();
  sub->add_option("--chunks", opts->chunks,
                  "iso: number of chunks (default 2; even split unless --split is given)");
  sub->add_option("--split", opts->split,
                  "iso: chunk sizes as token counts summing to --seq (1792,2304) or ratios "
                  "summing to 1 (0.45,0.55)");
  sub->add_option("--ladder-layers", opts->ladder_layers,
                  "ladder: convert only the last N layers (0 = all)")
      ->capture_default_str();
  sub->add_option("--pieces", opts->pieces, "gemm-split: pieces of each block's last GEMM")
      ->capture_default_str();
  sub->add_option("--profile", opts->profile_path,
                  "Use op costs measured by `tpo profile` (FILE); the analytical model fills "
                  "what the profile lacks");
  sub->add_option("--trace", opts->trace_path,
                  "Write a Chrome trace to FILE (open it in https://ui.perfetto.dev)");
}

std::function<int()> add_simulate(CLI::App& app) {
  auto opts = std::make_shared<sim::SimulateOptions>();
  auto* sub = app.add_subcommand(
      "simulate",
      "Predict the timeline of one overlap strategy (or --compare all of them) for a model on\n"
      "a machine, with the analytical cost model (or a measured --profile) and the\n"
      "discrete-event engine.");
  add_workload_options(sub, opts.get());
  sub->add_option("--layers", opts->layers, "Simulate only the first N layers (0 = all)")
      ->capture_default_str();
  sub->add_flag("--embed-head", opts->embed_head,
                "Include the embedding, final norm and LM head (last token of each request)");
  sub->add_flag("--compare", opts->compare,
                "Simulate every strategy that applies and print them side by side");
  sub->add_option("--json", opts->json_path, "Write the report (schema tpo.simulate/1) to FILE");
  return [opts, sub] {
    check_given(*opts, *sub);
    return run_simulate(*opts);
  };
}

}  // namespace tpo::cli
