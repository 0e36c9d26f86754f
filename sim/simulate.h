// `tpo simulate` as a library call: workload options and strategy options (no output paths,
// no flags: those are the CLI's), resolved once, then simulate(). The planner calls
// simulate()'s parts directly.
#pragma once

#include <cstdint>
#include <string>

#include "sim/cost_model.h"
#include "sim/engine.h"
#include "sim/schedule.h"
#include "sim/strategy.h"
#include "sim/workload.h"

namespace tpo::sim {

// A strategy as given by name and parameters. Field names are the ones errors use.
struct StrategyOptions {
  std::string strategy = "none";
  std::int64_t chunks = 0;  // prompt chunks: count (0: 2, or as many as `split` lists)
  std::string split;        // prompt chunks: token counts or ratios ("1792,2304", "0.45,0.55")
  std::int64_t ladder_layers = 0;
  std::int64_t pieces = 4;
};

// The named strategy; throws FieldError naming "strategy" with the names that exist.
StrategyKind parse_strategy_name(const std::string& name);
// The spec of `kind` for the workload: chunk tokens resolved from chunks/split where the
// strategy cuts the prompt, its other parameters from the options.
StrategySpec make_spec(const StrategyOptions& o, const Workload& w, StrategyKind kind);

struct SimResult {
  StrategySpec spec;
  Schedule schedule;
  OpCosts costs;
  Timeline timeline;
};

SimResult simulate(const Workload& w, const StrategySpec& spec, const CostModel& cm);

}  // namespace tpo::sim
