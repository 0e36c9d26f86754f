// Subcommand wiring: each registers its options on the CLI11 app and runs a library call.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace tpo::cli {

// Registers `simulate`; the returned function runs it after parsing (returns the exit code).
std::function<int()> add_simulate(CLI::App& app);
std::function<int()> add_plan(CLI::App& app);
std::function<int()> add_profile(CLI::App& app);

}  // namespace tpo::cli
