// Reporters for plans: console table, "tpo.plan/1" JSON (read back through sim/plan_file.h,
// by serving engines and `tpo validate`), CSV, and a self-contained SVG chart.
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

}  // namespace tpo::planner
