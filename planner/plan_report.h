// Reporters for plans: console table, "tpo.plan/1" JSON (and loading it back, for serving
// engines and `tpo validate`), CSV, and a self-contained SVG chart of speedup vs length.
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "planner/plan.h"

namespace tpo::planner {

void print_plan(std::ostream& os, const Plan& plan);
nlohmann::ordered_json plan_json(const Plan& plan);
std::string plan_csv(const Plan& plan);
std::string plan_svg(const Plan& plan);

// What a plan file says, as loaded back: per prompt length the chosen strategy and chunks.
struct LoadedPlanEntry {
  std::int64_t seq = 0;
  std::int64_t batch = 1;
  std::string strategy;
  std::vector<std::int64_t> chunks;
  std::vector<double> chunk_fractions;
  std::int64_t ladder_layers = 0;
  std::int64_t pieces = 0;
  double total_us = 0;
  double none_us = 0;
};
struct LoadedPlan {
  std::string model, hardware, phase;
  std::string profile;  // the profile the plan was made with ("" for the analytical model)
  std::int64_t tp = 0;
  std::int64_t align = 64;
  std::vector<LoadedPlanEntry> entries;
  // What to run for a prompt of `seq` tokens: the entry of the largest planned length <= seq,
  // its ISO chunk fractions scaled to seq with boundaries on the align grid. Shorter than
  // every planned length (or too short to cut): strategy "none".
  LoadedPlanEntry lookup(std::int64_t seq) const;
};
// Throws InputError naming the file and the field when the plan is malformed.
LoadedPlan load_plan(const std::string& path);

}  // namespace tpo::planner
