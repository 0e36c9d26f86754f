// Subcommand wiring: each registers its options on the CLI11 app and runs a library call.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

#include "sim/simulate.h"

namespace tpo::cli {

// Registers `simulate`; the returned function runs it after parsing (returns the exit code).
std::function<int()> add_simulate(CLI::App& app);
std::function<int()> add_plan(CLI::App& app);
std::function<int()> add_profile(CLI::App& app);
std::function<int()> add_validate(CLI::App& app);

// Shared by simulate and validate: the workload and strategy options, and the check that no
// given option would be silently ignored.
void add_workload_options(CLI::App* sub, sim::SimulateOptions* opts);
void check_given(const sim::SimulateOptions& o, const CLI::App& sub);

}  // namespace tpo::cli
