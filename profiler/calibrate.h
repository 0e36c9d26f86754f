// Calibrating the contention model on measured schedules: `tpo validate` reports carry, per
// case, the workload, the strategy and the measured total. Each case is simulated again with
// the profile the runs were predicted with; the contention parameters are fitted (a grid
// search minimising the squared relative error) on the cases of the models named for the fit,
// and the errors are reported on those cases and, separately, on the cases kept out.
#pragma once

#include <array>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/contention.h"
#include "sim/plan_file.h"
#include "sim/profile.h"

namespace tpo::profiler {

struct CalibrationCase {
  std::string file;   // the report it came from
  std::string model;  // the model's name as the report gives it (run.workload.model may be a path)
  bool on_cpu = false;  // measured by `validate --backend cpu` (threads, not SMs)
  sim::PlannedRun run;
  double measured_us = 0;
  double reported_us = 0;       // what the report predicted (the model of its day)
  double measured_none_us = 0;  // `none` on the same workload, measured in the same run
  // Measured op durations summed by class (GEMM, attention, norms and elementwise ops,
  // all-reduces), and how many ops the report lists; empty sums when it lists none.
  std::array<double, 4> measured_class_us{};
  std::size_t measured_ops = 0;
  // Made by the CUDA runtime before 2026-12-02 (the report lacks attention_q_in_place): each
  // attention op was a strided copy of Q and then the kernel, and qkv wrote K and V into the
  // cache with two strided copies per request. (The KV write became one kernel at a9c298e,
  // hours before Q was read in place at b3b96ef; no report was made in between, no GPU
  // having run, so one marker tells both.)
  bool legacy_copies = false;
  // An emulated run that sized its all-reduces by latency + bandwidth (every report before
  // 2026-12-03, when hardware files had no allreduce_table): replayed without the table.
  bool emulated_without_table = false;
  // Compute ops that overlapped no comm op: their index in the graph, name and measured time.
  struct AloneOp {
    std::size_t index;
    std::string name;
    double us;
  };
  std::vector<AloneOp> compute_alone_us;
  // Every op the report lists, in its order (the graph's): name, stream and measured span;
  // empty when it lists none.
  struct MeasuredOp {
    std::string name;
    bool comm = false;
    double start_us = -1, us = 0;
  };
  std::vector<MeasuredOp> ops;
};

struct CalibrateOptions {
  std::vector<std::string> reports;   // tpo.validate/1 files
  std::vector<std::string> profiles;  // tpo.profile/1 files, matched to cases by model and TP
  std::vector<std::string> fit_on;    // models whose cases are fitted; the rest are held out
  std::string out;                    // tpo.calibration/1 report (optional)
  bool update_profiles = false;       // write the fitted block into each profile
  // Also fit the interference microbenchmarks of the --fit-on models' profiles (each pair
  // weighs as much as a schedule); the other models' pairs stay held out.
  bool fit_microbenchmarks = false;
  // How a kernel's waves fare beside a comm kernel (sim/contention.h): "auto" lets the fit
  // choose on the fit-on cases, "requantize" (waves over the SMs left; the default) or
  // "extra-wave" (one wave more; the shipped fit's).
  std::string wave_rule = "requantize";
  // Fit each case's op durations summed by class too (GEMM, attention, norms/elementwise,
  // all-reduce, each weighted by its share of the case's measured time), not only its
  // total: the parameters then cannot trade one kind's slowdown for another's.
  bool fit_ops = false;
  // Reports of the runtime's copies before 2026-12-02 (CalibrationCase::legacy_copies): "fit"
  // adds them to their ops (the Q gather to attention, the rest of the two-copy KV write to
  // qkv), each one's cost (a fixed time plus one per byte of Q, or per row of K and V) fitted
  // on the fit-on models' ops that made it and ran beside nothing; "off" leaves them out.
  std::string legacy_copies = "fit";
  // Each case's ops predicted by the fitted model beside their measurement, in --out, and
  // the largest per-op misses of the held-out cases printed.
  bool ops = false;
  // The planner's --threshold: in the decisions, overlap is picked only when it beats none
  // by more than this fraction, as `tpo plan` decides (PlanOptions::threshold).
  double threshold = 0.02;
  // The planner's --chunk-gain: a split of k > 2 chunks is picked over the best of k - 1 only
  // where it is predicted to beat it by more than this fraction (PlanOptions::chunk_gain).
  double chunk_gain = 0.005;
  // The comm kernel's HBM draw per CTA (contention.comm_hbm_gbps_per_cta): "fit" (searched over
  // its grid with the rest), "profile" (measured: the fit-on models' profiles' long copies on
  // the comm budget's CTAs, comm_hbm_from_profiles), or a number of GB/s held as given.
  std::string comm_hbm = "fit";
  // Fit nothing: check this hardware file's contention block (a shipped name or a path) on the
  // reports. --fit-on is then optional and names the cases the block was fitted on (reported
  // apart, and the legacy copies' fit set); without it every case is held out. The SMs and HBM
  // bandwidth are the runs' GPU's; the block's rules and values are the file's.
  std::string params_from;
  bool wave_rule_given = false;  // --wave-rule on the command line (refused with params_from)
  bool comm_hbm_given = false;   // --comm-hbm-per-cta on the command line ("fit" refused with it)
};

// The HBM bandwidth a copy on `ctas` CTAs draws per CTA, read and written, in GB/s: from a
// profile's copies timed alone beside-GEMM series (victim "comm", with their bytes) on that many
// CTAs, the slope between the two largest (so neither a kernel's fixed time nor an L2-resident
// short copy counts); one such copy alone: its bytes over its time. 0 where the profile has
// none with bytes (profiles before 2026-12-04 but the two H200 ones, to which they were added).
double comm_hbm_from_profile(const sim::Profile& p, std::int64_t ctas);

// A copy's cost, fitted: time_us = fixed_us + us_per_unit x size (bytes, or rows), the fixed
// part once per copy call (the KV write made one per request).
struct CopyFit {
  double fixed_us = 0, us_per_unit = 0;
  std::size_t ops = 0;  // ops it was fitted on (0: none, and it costs nothing)
  double us(double size) const { return ops > 0 ? fixed_us + us_per_unit * size : 0.0; }
};

std::vector<CalibrationCase> read_cases(const std::vector<std::string>& reports);

struct CaseError {
  double predicted_us = 0;
  double error = 0;  // (predicted - measured) / measured
};

// Errors of every case under `p` (contention off when !p.enabled: the fixed factors).
std::vector<CaseError> evaluate(const std::vector<CalibrationCase>& cases,
                                const std::vector<std::string>& profiles,
                                const sim::ContentionParams& p, bool use_contention);

struct ErrorSummary {
  std::size_t cases = 0;
  double median_abs = 0, mean_signed = 0, worst_abs = 0;
};
ErrorSummary summarize(const std::vector<double>& errors);

// Runs the whole calibration: prints a table, writes the report and the profiles if asked.
int run_calibrate(const CalibrateOptions& o, std::ostream& os);

}  // namespace tpo::profiler
