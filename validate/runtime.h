// The validation runtime: executes a sim::Schedule — the very graph the simulator timed —
// with real kernels, one thread per (rank, stream), and records when each op ran. Strategies
// are not re-implemented here: every op is interpreted from its code, its layer/module and
// the token block it covers. A plain reference forward of each architecture (standard,
// ladder, parallel block), written without the graph, checks the output.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/schedule.h"
#include "sim/strategy.h"
#include "sim/workload.h"

namespace tpo::validate {

struct RunOptions {
  int repeat = 3;   // timed runs; the median is reported
  int warmup = 1;   // untimed runs first
  std::uint64_t seed = 1234;
};

struct RunResult {
  std::vector<std::int64_t> start_ns, end_ns;  // rank 0, median run, from the run's start
  std::int64_t total_ns = 0;                   // median of the timed runs
  std::vector<std::int64_t> totals_ns;         // every timed run
  std::vector<float> output;                   // final residual stream, [batch][seq][hidden]
};

// Runs the schedule on the CPU: fp32, ranks as threads, a compute and a comm thread per rank,
// a shared-memory all-reduce. Throws InputError for what the runtime cannot run (embedding /
// LM head ops).
RunResult run_cpu(const sim::Workload& w, const sim::Schedule& s, const RunOptions& o);

// The reference: the same weights and inputs, computed module by module on all tokens at
// once, with the architecture's residual rule (standard; ladder on the last N layers;
// parallel attention + MLP). No schedule involved.
std::vector<float> reference_forward(const sim::Workload& w, const sim::StrategySpec& spec,
                                     std::uint64_t seed);

// max |a - b| / max |b|: the error measure of the correctness check.
double relative_error(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace tpo::validate
