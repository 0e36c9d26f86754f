// `tpo simulate` as a library call: one validated options struct, then run(). The CLI binds
// its flags straight to SimulateOptions; the planner calls simulate() directly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/cost_model.h"
#include "sim/engine.h"
#include "sim/schedule.h"
#include "sim/strategy.h"
#include "sim/workload.h"

namespace tpo::sim {

struct SimulateOptions {
  std::string model = "llama2-70b";
  std::string hardware = "rtx4090x8";
  std::int64_t tp = 8;
  std::string phase = "prefill";
  std::int64_t batch = 1;
  std::int64_t seq = 4096;
  std::int64_t context = -1;  // -1: prefill 0, decode --seq
  std::string strategy = "none";
  std::int64_t chunks = 0;  // 0: 2 unless --split says otherwise
  std::string split;
  std::int64_t ladder_layers = 0;
  std::int64_t pieces = 4;
  std::int64_t layers = 0;  // 0: all of the model's layers
  bool embed_head = false;
  bool compare = false;
  std::string json_path;
  std::string trace_path;
  std::string profile_path;  // measured profile (tpo profile); empty: analytical model
};

// Loads configs and checks everything; throws InputError naming the option or file.
Workload make_workload(const SimulateOptions& o);
StrategySpec make_spec(const SimulateOptions& o, const Workload& w, StrategyKind kind);

struct SimResult {
  StrategySpec spec;
  Schedule schedule;
  OpCosts costs;
  Timeline timeline;
};

SimResult simulate(const Workload& w, const StrategySpec& spec, const CostModel& cm);

}  // namespace tpo::sim
