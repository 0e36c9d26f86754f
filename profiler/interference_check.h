// The contention model against a profile's interference microbenchmarks: each measured pair
// (a GEMM beside the copy kernel on P CTAs; the copy on P CTAs beside a GEMM, attention or a
// norm) is rebuilt as a small schedule the way `tpo profile` ran it — the victim's batch of
// back-to-back launches starting 30 us after the aggressor's longer run on the other stream —
// and the engine predicts the victim's time per launch, with the contention rules and with the
// fixed factors. These measurements are not used by `tpo calibrate`'s fit (which fits on
// whole schedules), so this is a check on data kept out of the fit.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/contention.h"
#include "sim/cost_model.h"
#include "sim/hardware.h"
#include "sim/profile.h"

namespace tpo::profiler {

// How far ahead of the timed op a pairwise interference run starts the other op (µs), as the
// CUDA profiler runs it (since 2026-11-29's b0556b8; recorded in profiles since 2026-12-05):
// the op that arrives second finds the SMs held, as in a schedule.
inline constexpr double kInterferenceHeadStartUs = 30;

// One measured pair rebuilt as a schedule (built once, predicted under many parameter sets).
struct InterferencePair {
  std::string label;  // "gemm beside copy p16 1024x14336x4096", ...
  std::string model;  // the profile's model
  sim::Schedule schedule;
  sim::OpCosts costs;  // standalone = measured alone times, release = the head start, fixed
                       // factors in `slowdown`; resources filled per prediction
  std::size_t victim_first = 0;
  std::int64_t victim_launches = 1;  // the victim's time is per launch of this many
  std::int64_t workers = 0;
  double alone_us = 0, measured_us = 0;
  bool attention_batched_gemm = false;  // the profile's attention kernel (sim/contention.h)
};
std::vector<InterferencePair> interference_pairs(const sim::Profile& p,
                                                 const sim::HardwareConfig& hw);
// The victim's time per launch: with the contention rules of `params` (comm_ctas taken from
// the pair), or with the fixed factors when `rules` is false.
double predict_pair(InterferencePair& pair, const sim::ContentionParams& params, bool rules);

struct InterferenceCheck {
  std::string label;  // "gemm beside copy p16 1024x14336x4096", ...
  double alone_us = 0, measured_us = 0;
  double contention_us = 0;  // predicted with the contention rules
  double fixed_us = 0;       // predicted with the fixed factors
};

// One row per interference point of `p` the check can rebuild (points it cannot are
// skipped). `params`: the contention parameters to check (enabled); `hw`: the machine.
std::vector<InterferenceCheck> check_interference(const sim::Profile& p,
                                                  const sim::HardwareConfig& hw,
                                                  const sim::ContentionParams& params);

// Prints the rows and the median / worst error of the slowdown under both models; returns
// the same as JSON.
nlohmann::ordered_json print_interference_check(const std::vector<InterferenceCheck>& rows,
                                                const std::string& title, std::ostream& os);

}  // namespace tpo::profiler
