// `tpo plan`: flags bound to planner::PlanOptions (or GenerateOptions for --scenario
// generate), validated before any work; outputs written atomically at the end.
#include <exception>
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "planner/generate.h"
#include "planner/plan.h"
#include "planner/plan_report.h"
#include "sim/error.h"
#include "sim/json_io.h"

namespace tpo::cli {

namespace {

struct PlanCli {
  planner::PlanOptions plan;
  std::string batch = "1";
  std::string scenario = "sweep";
  std::int64_t prompt = 1024;
  std::int64_t new_tokens = 512;
  bool seq_given = false;
  std::string interpolation_risk = "auto";
};

// --interpolation-risk: auto (the profile's own interpolation error), off, or a fraction.
double parse_interpolation_risk(const std::string& t) {
  if (t == "auto") return -1;
  if (t == "off") return 0;
  std::size_t used = 0;
  double v = -1;
  try {
    v = std::stod(t, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != t.size() || !(v >= 0) || v >= 1) {
    throw InputError("--interpolation-risk", t,
                     "must be auto, off or a fraction in [0, 1) (0.03: 3% slower)");
  }
  return v;
}

// Options that would be silently ignored are errors: the user meant something by them.
void check_given(const PlanCli& c, const CLI::App& sub) {
  auto given = [&](const char* name) { return sub.count(name) > 0; };
  if (c.scenario == "generate") {
    for (const char* opt : {"--csv", "--svg"}) {
      if (given(opt)) {
        throw InputError(opt, "",
                         "does not apply to --scenario generate: it writes its table as text and "
                         "--json (tpo.generate/1); the CSV and chart are of prompt-length sweeps");
      }
    }
    if (given("--comm-ctas")) {
      throw InputError("--comm-ctas", "",
                       "is searched by the prompt-length sweep only; the generate scenario runs "
                       "at the hardware's default comm budget");
    }
    for (const char* opt :
         {"--seq", "--phase", "--context", "--allow-arch-change", "--interpolation-risk"}) {
      if (given(opt)) {
        throw InputError(opt, "",
                         "does not apply to --scenario generate (it uses --prompt, "
                         "--new-tokens and a list of --batch sizes)");
      }
    }
  } else {
    for (const char* opt : {"--prompt", "--new-tokens", "--vocab"}) {
      if (given(opt)) throw InputError(opt, "", "applies to --scenario generate only");
    }
    if (c.plan.workload.phase == "decode" && given("--context")) {
      throw InputError("--context", std::to_string(c.plan.workload.context),
                       "in a decode plan --seq lists the context lengths; drop --context");
    }
    if (c.plan.workload.phase == "decode" && given("--max-chunks")) {
      throw InputError("--max-chunks", "",
                       "applies to prefill: a decode step has no prompt to cut into chunks");
    }
  }
  if (given("--interpolation-risk") && c.plan.workload.profile.empty()) {
    throw InputError("--interpolation-risk", c.interpolation_risk,
                     "applies with --profile only (the analytical model prices every GEMM size "
                     "alike and charges nothing)");
  }
  if (given("--context") && c.plan.workload.context < 0) {
    throw InputError("--context", std::to_string(c.plan.workload.context), "must be >= 0");
  }
  if (c.plan.strategies.empty()) {
    throw InputError("--strategies", "", "give strategy names (iso,ladder,...) or all");
  }
}

int run_plan_cli(PlanCli& c) {
  if (c.scenario == "generate") {
    planner::GenerateOptions g;
    g.plan = c.plan;
    g.prompt = c.prompt;
    g.new_tokens = c.new_tokens;
    g.batches = c.batch;
    const auto r = planner::run_generate(g);
    planner::print_generate(std::cout, r);
    if (!g.plan.json_path.empty()) {
      write_file_atomic(g.plan.json_path, planner::generate_json(r).dump(1) + "\n", "--json");
      std::cout << "\nwrote " << output_name(g.plan.json_path) << "\n";
    }
    return 0;
  }
  if (c.scenario != "sweep") {
    throw InputError("--scenario", c.scenario, "must be sweep (default) or generate");
  }
  try {
    std::size_t used = 0;
    c.plan.workload.batch = std::stoll(c.batch, &used);
    if (used != c.batch.size() || c.plan.workload.batch < 1) throw std::invalid_argument("batch");
  } catch (const std::exception&) {
    throw InputError("--batch", c.batch,
                     "must be one positive integer (lists of batch sizes are for --scenario "
                     "generate)");
  }
  planner::Plan plan = planner::make_plan(c.plan);
  planner::run_plan(plan);
  planner::print_plan(std::cout, plan);
  std::cout << "\n";
  // All outputs or none: written beside their places, renamed together at the end.
  OutputSet out;
  if (!c.plan.json_path.empty())
    out.add(c.plan.json_path, planner::plan_json(plan).dump(1) + "\n", "--json");
  if (!c.plan.csv_path.empty()) out.add(c.plan.csv_path, planner::plan_csv(plan), "--csv");
  if (!c.plan.svg_path.empty()) out.add(c.plan.svg_path, planner::plan_svg(plan), "--svg");
  out.commit();
  for (const auto& p : {c.plan.json_path, c.plan.csv_path, c.plan.svg_path}) {
    if (!p.empty()) std::cout << "wrote " << output_name(p) << "\n";
  }
  return 0;
}

}  // namespace

std::function<int()> add_plan(CLI::App& app) {
  auto c = std::make_shared<PlanCli>();
  auto& o = c->plan;
  auto* sub = app.add_subcommand(
      "plan",
      "Find the best overlap strategy and ISO chunk split for each prompt length (predicted\n"
      "with the analytical cost model, or a measured --profile). --scenario generate:\n"
      "prefill + decode tokens/s per strategy and batch size, like the ladder-residual\n"
      "paper's benchmark.");
  sub->footer(
      "Examples:\n"
      "  tpo plan --model llama2-70b --hardware rtx4090x8 --tp 8 --seq 512:16384 --svg p.svg\n"
      "  tpo plan --model path/to/config.json --hardware h100x8 --tp 8 --seq 1024,8192 "
      "--sm-clock 1590\n"
      "  tpo plan --scenario generate --model llama3-70b --hardware h100x8 --tp 8 --batch "
      "1,4,16,64 --exec graph");
  WorkloadFlags f;
  f.seq = false;  // a list of prompt lengths, below; --batch is a list with --scenario generate
  f.layers = false;
  f.profile = false;
  f.sm_clock = true;
  f.exec = true;
  f.rope = true;
  f.add_norm = true;
  f.vocab = true;
  bind_workload(sub, &o.workload, f);
  sub->add_option(
         "--seq", o.seq,
         "Prompt lengths: a list (1024,4096), a range doubling (512:32768) or with a "
         "factor (512:32768:1.5; a range's inner points rounded to the --align grid). In decode: "
         "context lengths")
      ->capture_default_str();
  sub->add_option("--batch", c->batch,
                  "Requests per batch; with --scenario generate a list of them (1,4,16,64)")
      ->capture_default_str();
  sub->add_option("--strategies", o.strategies,
                  "Comma list of strategies to consider (none is always included), or all")
      ->capture_default_str();
  sub->add_option("--max-chunks", o.max_chunks, "iso: try 2 .. N chunks")->capture_default_str();
  sub->add_option("--align", o.align, "iso: chunk boundaries on multiples of this many tokens")
      ->capture_default_str();
  sub->add_option("--threshold", o.threshold,
                  "Recommend overlap only if it beats none by more than this fraction")
      ->capture_default_str();
  sub->add_option("--chunk-gain", o.chunk_gain,
                  "iso: cut the prompt in one chunk more only if that beats the best split of "
                  "one chunk fewer by more than this fraction (a split the model cannot tell "
                  "from a simpler one is not worth an engine's extra chunk; 0: the fastest)")
      ->capture_default_str();
  sub->add_option("--interpolation-risk", c->interpolation_risk,
                  "With --profile: rank a candidate whose GEMMs run at rows the profile did not "
                  "measure as this fraction slower (predicted times are unchanged): auto (the "
                  "profile's own interpolation error, leave-one-out over its GEMM rows), off, "
                  "or a fraction")
      ->capture_default_str();
  sub->add_flag("--allow-arch-change", o.allow_arch_change,
                "Let the planner choose ladder, iso+ladder and parallel-block, which change the "
                "model (they need a model trained for them)");
  sub->add_option("--layers", o.workload.layers, "Plan with the first N layers only (0 = all)")
      ->capture_default_str();
  sub->add_option("--threads", o.threads, "Worker threads (0 = all cores)")->capture_default_str();
  sub->add_option(
      "--comm-ctas", o.comm_ctas,
      "Comm SM budgets to search jointly with the splits (e.g. 4,8,16,32): the CTAs each "
      "all-reduce kernel holds (needs a cost model with contention, e.g. h200x8)");
  sub->add_option("--scenario", c->scenario, "sweep (prompt lengths) or generate")
      ->capture_default_str();
  sub->add_option("--prompt", c->prompt, "generate: prompt tokens")->capture_default_str();
  sub->add_option("--new-tokens", c->new_tokens, "generate: tokens generated per request")
      ->capture_default_str();
  sub->add_option(
      "--json", o.json_path,
      "Write the plan (tpo.plan/1) or scenario (tpo.generate/1) to FILE (- for standard "
      "output; the text summary then goes to standard error)");
  sub->add_option("--profile", o.workload.profile,
                  "Use op costs measured by `tpo profile` (FILE); the analytical model fills "
                  "what the profile lacks");
  sub->add_option("--csv", o.csv_path, "Write every candidate of every point as CSV");
  sub->add_option("--svg", o.svg_path, "Write a chart of predicted speedup vs prompt length");
  sub->add_flag("--quiet", o.quiet, "No progress on stderr");
  return [c, sub] {
    check_given(*c, *sub);
    c->plan.interpolation_risk = parse_interpolation_risk(c->interpolation_risk);
    return run_plan_cli(*c);
  };
}

}  // namespace tpo::cli
