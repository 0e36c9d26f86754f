// Generation scenarios like the ladder paper's benchmark: a prompt is prefilled, then
// new tokens are decoded one step at a time; tokens/s = batch x new tokens / (prefill time +
// all decode steps). Each strategy is used in the phases where it applies, `none` elsewhere
// (ISO, for instance, only cuts prompts).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include "planner/plan.h"

namespace tpo::planner {

// The plan's options (model, hardware, TP, strategies, align, max chunks, layers, threads,
// profile, JSON path; its phase, seq, batch and sweep outputs are not used) and a scenario.
struct GenerateOptions {
  PlanOptions plan;
  std::int64_t prompt = 1024;
  std::int64_t new_tokens = 512;
  std::string batches = "1";  // the CLI's default; --batch 1,4,16,64 for a sweep
};

struct GenerateResult {
  std::string strategy;
  std::string prefill_strategy, decode_strategy;  // what ran in each phase
  std::string detail;                             // ISO chunks etc.
  bool preserves_function = true;
  double prefill_us = 0;
  double decode_step_us = 0;  // mean over the generated tokens
  double total_us = 0;
  double tokens_per_s = 0;
  double speedup = 0;  // tokens/s over none's
  // What ran in each phase, as `tpo validate --plan` runs it again (prefill_run, decode_run).
  sim::StrategySpec prefill_spec, decode_spec;
};

struct GenerateBatch {
  std::int64_t batch = 1;
  // The prefill's workload, and the decode step's at the middle step's context (the one
  // `tpo validate --plan` measures; the report's decode_step_us averages the steps' contexts).
  sim::WorkloadOptions prefill, decode;
  std::vector<GenerateResult> results;  // results[0] is none
};

struct GenerateReport {
  GenerateOptions options;
  std::string model_name, hardware_name;
  std::string hardware_label;  // sim::hardware_label: the name, and the file where it differs
  bool cpu = false;            // the hardware is a CPU (validate it with --backend cpu)
  std::string clock;           // sim::sm_clock_text of the hardware ("" at the quoted clock)
  std::string cost_model = "analytical";
  std::string overlap_model;         // sim::CostModel::overlap_model
  std::vector<std::string> notes;    // sim::model_notes at prompt + new tokens
  nlohmann::ordered_json execution;  // the execution mode and its launch costs
  std::int64_t layers = 0;
  // What priced the all-reduces (CostModel::allreduce_text); with the analytical model, also
  // that decode's small all-reduces are latency-bound and that latency depends on the
  // all-reduce implementation.
  std::string allreduce_note;
  std::vector<GenerateBatch> batches;
};

GenerateReport run_generate(const GenerateOptions& o);

void print_generate(std::ostream& os, const GenerateReport& r);
nlohmann::ordered_json generate_json(const GenerateReport& r);

}  // namespace tpo::planner
