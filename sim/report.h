// Reporters over plain records: the simulator returns data, these format it as the
// "tpo.simulate/1" JSON report, a Chrome trace (Perfetto), or console text.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/simulate.h"

namespace tpo::sim {

// The provenance block every report opens with: schema, tool version, git SHA, and whether
// its numbers are "predicted" or "measured".
nlohmann::ordered_json report_header(const std::string& schema, const std::string& kind);
// The options a report was made with: the workload's and the strategy's.
nlohmann::ordered_json options_json(const WorkloadOptions& w, const StrategyOptions& s);
nlohmann::ordered_json workload_options_json(const WorkloadOptions& w);
nlohmann::ordered_json model_json(const ModelConfig& m);
nlohmann::ordered_json hardware_json(const HardwareConfig& h);
// A note when ISO chunk lengths are not multiples of 8 tokens ("" otherwise): GPU kernels run
// such shapes slower than aligned ones (results/h200, finding 4a), which neither the
// analytical model nor a profile (measured on the --align grid) predicts.
std::string unaligned_chunks_note(const Schedule& s);

nlohmann::ordered_json simulate_report(const WorkloadOptions& wo, const StrategyOptions& so,
                                       const Workload& w, const SimResult& r,
                                       std::int64_t baseline_ns, const CostModel& cost_model);

// Adds one process (pid) to a Chrome trace: one track per stream, slices named by op and
// coloured by kind. The validation runtime adds its measured timeline as a second process.
void append_trace(nlohmann::ordered_json& events, int pid, const std::string& process_name,
                  const Schedule& s, const std::vector<std::int64_t>& start_ns,
                  const std::vector<std::int64_t>& end_ns);
std::string chrome_trace(const Workload& w, const SimResult& r);

// "analytical cost model, eager execution": what made a prediction, for console output.
std::string model_and_exec(const CostModel& cm);
// `overlap`: what prices overlap (CostModel::overlap_model), printed at TP > 1 where given.
// `allreduce`: what priced the all-reduces (CostModel::allreduce_text), printed where given;
// `baseline_note`: what the speedups are over where that is not plain none (--comm-ctas).
void print_summary(std::ostream& os, const Workload& w, const SimResult& r,
                   std::int64_t baseline_ns, const std::string& cost_model,
                   const std::string& overlap = "", const std::string& allreduce = "",
                   const std::string& baseline_note = "");

// How much longer than alone the ops of each stream ran (summed over ops, each at least 0):
// what overlap cost the compute beside the all-reduces, and the all-reduces beside compute
// (slowdown factors or the contention model, waits for SMs included). A comm op counted as
// hidden may have slowed the compute beside it by this much.
struct SlowedBeside {
  std::int64_t compute_ns = 0, comm_ns = 0;
};
SlowedBeside slowed_beside(const SimResult& r);

struct CompareRow {
  std::string strategy;
  std::string chunks;
  std::int64_t total_ns = 0;
  std::int64_t exposed_comm_ns = 0;
  SlowedBeside slowed;
  double overlap_efficiency = 0;
  bool preserves_function = true;
  std::string skipped;  // why it does not apply, when it does not
};
void print_compare(std::ostream& os, const Workload& w, const std::vector<CompareRow>& rows,
                   std::int64_t baseline_ns, const std::string& cost_model,
                   const std::string& overlap = "", const std::string& allreduce = "",
                   const std::string& baseline_note = "");
// The model's notes for this workload (sim::model_notes at its prompt + context).
std::vector<std::string> workload_notes(const Workload& w);
// Each as a "note: ..." line.
void print_notes(std::ostream& os, const std::vector<std::string>& notes);
// "overlap: ..." for the console, or "" at TP 1 or where `overlap` is empty.
std::string overlap_line(const Workload& w, const std::string& overlap);
std::string workload_line(const Workload& w);
// ", SM clock 1590 MHz (tensor rate 87% of the 1830 MHz peak)" where --sm-clock set one, else "".
std::string sm_clock_text(const HardwareConfig& h);

}  // namespace tpo::sim
