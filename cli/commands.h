// Subcommand wiring: each registers its options on the CLI11 app and runs a library call.
// The workload's flags are bound in one place (bind_workload) to sim::WorkloadOptions, which
// simulate, plan, validate and profile all hold.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "sim/simulate.h"
#include "sim/workload.h"

namespace tpo::cli {

// Registers `simulate`; the returned function runs it after parsing (returns the exit code).
std::function<int()> add_simulate(CLI::App& app);
std::function<int()> add_plan(CLI::App& app);
std::function<int()> add_profile(CLI::App& app);
std::function<int()> add_validate(CLI::App& app);
std::function<int()> add_calibrate(CLI::App& app);

// Which workload flags a subcommand has (plan binds its own --seq list, profile only the
// model, TP and hardware).
struct WorkloadFlags {
  bool seq = true;
  bool phase_batch_context = true;
  bool layers = true;
  bool embed_head = false;
  bool profile = true;
  bool emulate = false;
  bool comm_ctas = false;
  bool sm_clock = false;
  bool exec = false;
  bool rope = false;
  bool add_norm = false;
  bool vocab = false;  // --vocab without --embed-head (plan: its generate scenario)
  // Everything that shapes one schedule run: simulate's and validate's set.
  static WorkloadFlags one_schedule() {
    WorkloadFlags f;
    f.embed_head = f.emulate = f.comm_ctas = f.sm_clock = f.exec = f.rope = f.add_norm = true;
    return f;
  }
};
void bind_workload(CLI::App* sub, sim::WorkloadOptions* w, const WorkloadFlags& f);
void bind_strategy(CLI::App* sub, sim::StrategyOptions* s);
// Options that would be silently ignored are errors: the user meant something by them.
// With `compare`, every strategy option is used by the strategies it concerns.
void check_given(const sim::WorkloadOptions& w, const sim::StrategyOptions& s, const CLI::App& sub,
                 bool compare);

// The flag bound to a workload or strategy field ("ladder_layers" -> "--ladder-layers").
std::string flag_for(const std::string& field);

// After CLI11 refused arguments it did not expect: "unknown option --stratgy for `tpo simulate`
// (did you mean --strategy?) ..." for the first of them that is an option, or "" when none is.
std::string unknown_option_hint(const CLI::App& app);
// For a word that is not one of `names`: " (did you mean NAME?)" where one is close (at most one
// edit in three letters), else "".
std::string nearest_hint(const std::string& word, const std::vector<std::string>& names);
// Where an output option of the parsed command names standard output (`-`, /dev/stdout,
// /dev/fd/1), the text summary goes to standard error instead, so that standard output holds
// the file alone (`tpo simulate --json - | jq`). True when it did.
bool summary_to_stderr_if_report_on_stdout(const CLI::App& app);
// Throws InputError when an output option names a file that is also one of the command's
// inputs (--model, --hardware, --profile, --plan, a report...): it would be replaced.
void refuse_output_over_input(const CLI::App& app);

}  // namespace tpo::cli
