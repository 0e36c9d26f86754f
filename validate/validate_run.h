// `tpo validate` as a library call: for each case (a workload and a strategy — from the
// options, or every point of a plan file) time the graph with the simulator, execute the
// same graph with the runtime, check the output, and report predicted against measured.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/simulate.h"
#include "validate/runtime.h"

namespace tpo::validate {

struct ValidateOptions {
  sim::SimulateOptions sim;  // model, hardware, tp, phase, batch, seq, strategy, ... profile
  std::string plan_path;     // validate the plan's points instead of one strategy
  std::string backend = "cpu";
  std::string comm = "nccl";  // cuda: nccl | emulated
  int repeat = 3;
  int warmup = 1;
  int comm_ctas = 16;  // emulated: CTAs of the copy kernel
  // emulated: the machine whose links each all-reduce's copy kernel imitates (its all-reduce
  // time); compute is predicted for sim.hardware, the machine running. Empty: sim.hardware's
  // own links, or with a plan the plan's hardware.
  std::string emulate;
  double tolerance = 0;  // relative error allowed; 0: 1e-5 on the CPU (fp32), 2e-2 on CUDA
  // One TP rank per process (mpirun -np TP): MPI all-reduce on the CPU, NCCL across
  // processes on CUDA. Rank 0 checks the output and reports.
  bool mpi = false;
};

struct CaseResult {
  sim::Workload workload;
  sim::StrategySpec spec;
  sim::Schedule schedule;
  sim::Timeline predicted;
  std::int64_t predicted_none_ns = 0;
  RunResult measured;
  std::int64_t measured_none_ns = 0;
  double error_vs_reference = 0;  // against the architecture's reference forward
  double error_vs_none = -1;      // against none's output (function-preserving strategies)
  bool correct = false;
};

struct ValidateReport {
  ValidateOptions options;
  std::string emulated_links;  // hardware whose all-reduce was emulated (emulated runs only)
  std::string cost_model;
  std::string measured_on;  // what the measurements ran on, in words
  std::vector<CaseResult> cases;
  bool all_correct() const;
};

// Throws InputError for bad input; returns the report (the caller prints and writes it).
ValidateReport run_validate(const ValidateOptions& o);
void print_validate(std::ostream& os, const ValidateReport& r);
nlohmann::ordered_json validate_json(const ValidateReport& r);
std::string validate_trace(const ValidateReport& r);

}  // namespace tpo::validate
