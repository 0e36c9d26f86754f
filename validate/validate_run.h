// `tpo validate` as a library call: for each case (a workload and a strategy — from the
// options, or every point of a plan file) time the graph with the simulator, execute the
// same graph with the runtime, check the output, and report predicted against measured.
#pragma once

#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/error.h"
#include "sim/plan_file.h"
#include "sim/simulate.h"
#include "validate/runtime.h"

namespace tpo::validate {

struct ValidateOptions {
  // The workload (its `emulate`: with --comm emulated, the machine whose all-reduce each copy
  // kernel imitates; compute is predicted for `hardware`, the machine running) and the
  // strategy; with a plan, each point's own, except hardware, profile and emulate when given.
  sim::WorkloadOptions workload;
  sim::StrategyOptions strategy;
  std::string plan_path;  // validate the plan's points instead of one strategy
  bool hardware_given = false, profile_given = false,  // replace the plan's
      layers_given = false, exec_given = false, rope_given = false, add_norm_given = false,
       allreduce_fusion_given = false, sm_clock_given = false, comm_ctas_given = false;
  // With a generate report: run only this batch of it (--batch; 0: every batch).
  std::int64_t plan_batch = 0;
  std::string backend = "cpu";
  std::string comm = "nccl";       // cuda: nccl | emulated
  std::string attention = "auto";  // cuda: cudnn | cublas | auto (cudnn where available)
  double nccl_timeout_s = 300;     // cuda, NCCL: seconds without progress before aborting
  int repeat = 3;
  int warmup = 1;
  // Relative error allowed; not given: 1e-5 on the CPU (fp32), 2e-2 on CUDA.
  std::optional<double> tolerance;
  // One TP rank per process (mpirun -np TP): MPI all-reduce on the CPU, NCCL across
  // processes on CUDA. Rank 0 checks the output and reports.
  bool mpi = false;
  // With --plan: also measure each point's N fastest-predicted other candidates, so that the
  // report says whether the plan's pick was the fastest measured, and by how much it missed.
  int alternatives = 0;
  // Reports to write: checked before any work (on the reporting rank), written by the caller.
  std::string json_path, trace_path;
};

// Under --mpi: bad input that every process finds alike (a check made on what all of them
// agreed to hold): one says it, and all end with exit 2 without an MPI abort.
class SameOnEveryRank : public InputError {
 public:
  // ByAll: every process found it (rank 0 says it); Here: this process found it and says it,
  // the others learned of it (Elsewhere) and say nothing.
  enum class Found { ByAll, Here, Elsewhere };
  SameOnEveryRank(std::string where, std::string field, const std::string& what,
                  Found found = Found::ByAll)
      : InputError(std::move(where), std::move(field), what), found(found) {}
  SameOnEveryRank(const InputError& e, Found found, std::exception_ptr cause)
      : InputError(e), found(found), cause(std::move(cause)) {}
  Found found = Found::ByAll;
  std::exception_ptr cause;  // Here: what this process threw (a FieldError keeps its field)
};

struct CaseResult {
  sim::PlannedRun run;  // what ran, as a plan file would say it
  int group = -1;       // with --plan: the planned point it belongs to
  bool picked = true;   // the plan's pick (false: an alternative measured beside it)
  sim::Workload workload;
  sim::StrategySpec spec;
  sim::Schedule schedule;
  sim::Timeline predicted;
  std::int64_t predicted_none_ns = 0;
  // How the prediction priced the schedule's ops (measured, interpolated, extrapolated,
  // analytical: a profile's; all analytical without one).
  std::map<std::string, std::int64_t> cost_sources;
  RunResult measured;
  std::int64_t measured_none_ns = 0;
  double error_vs_reference = 0;  // against the architecture's reference forward
  double error_vs_none = -1;      // against none's output (function-preserving strategies)
  bool correct = false;
  // Measured by an earlier run of the same command that was stopped, and read back from its
  // resume log (FILE.partial beside --json FILE); predicted again.
  bool resumed = false;
};

// A generate report's strategy measured in both phases (`validate --plan` of a
// tpo.generate/1 report): its prefill and its decode step (the middle step's context).
struct GenerationRow {
  std::int64_t batch = 1;
  std::string strategy;
  bool picked = false;  // the report's fastest predicted tokens/s in its batch
  // Per phase (0: prefill, 1: the decode step): the case that ran the strategy's run, or none
  // where the strategy ran none in that phase (none included); in ns, the predicted and measured
  // time of what it ran there, and none's: the median over the phase's cases of the none each
  // measured beside it (the same for every strategy of the batch, so that speedups and tokens/s
  // rank alike). A phase that ran none takes none's times.
  std::optional<std::size_t> case_of[2];
  std::int64_t predicted_ns[2]{}, measured_ns[2]{}, predicted_none_ns[2]{}, measured_none_ns[2]{};
  double report_speedup = 0;  // the report's own (its steps averaged over their contexts)
  double noise = 0;           // the phases' run spreads, weighted as tokens/s weighs their times
  // The runs are the report's as it priced them: no option (--layers, --hardware, --profile,
  // ...) replaced a part, so its speedup is one of the same prediction.
  bool report_comparable = true;
};

// A generation's time, none's beside it, predicted and measured: prefill + (new tokens - 1) x
// the decode step (none: the none each case measured beside it), in microseconds.
struct GenerationTimes {
  double predicted_us = 0, measured_us = 0, predicted_none_us = 0, measured_none_us = 0;
  double predicted_tokens_per_s = 0, measured_tokens_per_s = 0;
};

struct ValidateReport {
  ValidateOptions options;
  std::string emulated_links;  // hardware whose all-reduce was emulated (emulated runs only)
  // How the emulated all-reduces were sized: "allreduce_table" (the link's published times) or
  // "latency+bandwidth", or "per case" where cases differ (each case then carries its own).
  // Reports before 2026-12-03 lack it: those sized them by the latter.
  std::string emulated_allreduce;
  std::string cost_model;
  nlohmann::ordered_json execution;  // the execution mode and the launch costs predicted with
  std::string measured_on;           // what the measurements ran on, in words
  std::vector<CaseResult> cases;
  // A generate report's prompt and new tokens per request, and each strategy measured in both
  // phases (empty otherwise).
  std::int64_t prompt = 0, new_tokens = 0;
  std::vector<GenerationRow> generation;
  // Per batch: the report's strategies whose runs were not measured (--alternatives too low).
  std::map<std::int64_t, int> generation_unmeasured;
  // The resume log (--json FILE: FILE.partial; empty without --json or with --json -): each
  // finished case is appended to it, and a rerun of the same command after an interruption or a
  // failure reads those back instead of running them again. The caller removes it once the
  // report is written.
  std::string resume_path;
  std::size_t resumed_cases() const;
  bool all_correct() const;
};

GenerationTimes generation_times(const ValidateReport& r, const GenerationRow& g);

// Per batch of a generate report: the report's pick against the strategies measured (none
// included), by measured tokens/s.
struct GenerationVerdict {
  std::int64_t batch = 1;
  std::string picked, fastest;  // strategies
  double regret = 0;            // fastest's tokens/s / the pick's - 1
  double noise = 0;             // the larger of the two rows' noise
  int compared = 0;             // the batch's rows
  int not_measured = 0;         // its strategies not measured (--alternatives too low)
  bool within_noise() const { return regret > 0 && regret <= noise; }
};
std::vector<GenerationVerdict> generation_verdicts(const ValidateReport& r);

// Per planned point: the pick against every measured alternative (none included: each case
// measures it). regret = measured(pick) / fastest measured - 1.
struct Decision {
  int group = -1;
  std::size_t picked_case = 0;
  std::string fastest;  // the fastest measured alternative, in words
  double regret = 0;    // picked_ns / fastest_ns - 1
  bool overlap_measured = false, overlap_picked = false;
  // none stands for the median of the none runs measured beside the point's cases (none_runs).
  std::int64_t none_ns = 0, fastest_ns = 0, picked_ns = 0;
  std::size_t none_runs = 0;
  // How far the measurements scatter: the largest of the pick's and the fastest case's
  // (max - min) / median over their timed runs, and of the none times measured beside the
  // point's cases. A regret no larger is not a measured difference.
  double noise = 0;
  bool regret_within_noise() const { return regret > 0 && regret <= noise; }
};
std::vector<Decision> decisions(const ValidateReport& r);

// (max - min) / median of a run's timed totals; 0 with fewer than two.
double run_spread(const RunResult& m);

// Throws InputError for bad input; returns the report (the caller prints and writes it).
ValidateReport run_validate(const ValidateOptions& o);
// What the run left out or read differently: the models' notes (sim::model_notes) and the
// biases the runtimes do not run.
std::vector<std::string> validate_notes(const ValidateReport& r);
void print_validate(std::ostream& os, const ValidateReport& r);

// A note when cases' first op started much later than predicted (over 10% of the measured
// time and 20 us): time before the schedule's first op that no prediction charges (on the
// CPU, the hand-off to the rank threads). Empty when no case did.
std::string late_start_note(const ValidateReport& r);

// A note when no case had a profile and the median |error| of the cases' predicted totals
// exceeds 25%: the predictions are the hardware file's analytical model, and how to profile
// the machine. Empty otherwise.
std::string unprofiled_note(const ValidateReport& r);

// The attention kernel the report's cases ran: the one name, "per case" when they differ,
// empty when none recorded one (the CPU runtime).
std::string attention_kernels(const ValidateReport& r);
// The GPU the cases ran on (rank 0's): its name, "per case" where they differ, empty on the CPU.
std::string measured_devices(const ValidateReport& r);
nlohmann::ordered_json validate_json(const ValidateReport& r);
std::string validate_trace(const ValidateReport& r);

}  // namespace tpo::validate
