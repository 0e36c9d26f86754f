// `tpo profile` as a library call: sweep the model's shapes on a backend, assemble the
// profile, fit it, check it against a held-back set, write it.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "profiler/harness.h"
#include "sim/profile.h"
#include "sim/workload.h"

namespace tpo::profiler {

inline sim::WorkloadOptions default_workload() {
  sim::WorkloadOptions w;
  w.model = "llama3.1-8b";
  w.hardware.clear();
  w.tp = 2;
  w.seq = 1;
  return w;
}

struct ProfileOptions {
  std::string backend = "cpu";
  std::string attention = "auto";  // cuda: cudnn | cublas | auto (cudnn where available)
  // The model and TP whose shard shapes are measured, and the hardware whose analytical model
  // fills what the profile lacks (empty: cpu-host on cpu, h200x8 on cuda). The rest of the
  // workload (phase, prompt, layers) is not used: the sweep covers every chunk size.
  sim::WorkloadOptions workload = default_workload();
  bool quick = false;
  std::string out;
  std::int64_t max_tokens = 0;  // 0: 512 on cpu (256 with --quick), 8192 on cuda
  std::int64_t align = 64;
  // GEMMs also at every multiple of gemm_step rows up to 4096 (SweepOptions::gemm_step);
  // -1: --align on cuda without --quick, none otherwise.
  std::int64_t gemm_step = -1;
  // GEMMs and row-wise ops also at these rows below --align (SweepOptions::decode_rows);
  // decode_rows_given false: 1, 8 and 32 on cuda without --quick, none otherwise; {0}: none.
  std::vector<std::int64_t> decode_rows;
  bool decode_rows_given = false;
  int reps = 5;
  int warmup = 2;
  bool accuracy = true;
  bool progress = true;
};

int run_profile(const ProfileOptions& o, std::ostream& os);
std::string today();  // YYYY-MM-DD, UTC

// Assembles a profile from measurements (held-back ones excluded).
sim::Profile assemble(const std::vector<Measurement>& ms, const std::string& dtype);

// Prints and returns the accuracy of the profile model on the held-back measurements:
// per op kind the median and worst |predicted - measured| / measured.
nlohmann::json accuracy_check(const sim::Profile& p, const sim::HardwareConfig& hw, std::int64_t tp,
                              const std::vector<Measurement>& held, std::ostream& os);

// The analytical model of `hw` against every measured (not held-back) op: the honest
// accuracy figure of the analytical model on this device.
nlohmann::json analytical_vs_measured(const sim::HardwareConfig& hw, std::int64_t tp,
                                      const std::vector<Measurement>& ms, std::ostream& os);

// The measurements a profile's tables hold (GEMM, attention, rowwise), to compare a cost model
// with them again (`tpo profile accuracy`).
std::vector<Measurement> measurements_of(const sim::Profile& p);

// What an all_reduce_perf header says about how its times were taken.
struct NcclTestsHeader {
  // The most GPUs one thread drove (the header's nGpus; 1 when each rank had its own thread; 0
  // when the file has no such header).
  std::int64_t gpus_per_thread = 0;
  // The header's "graph: N" (-G N): N > 0 when the timed iterations were captured as a CUDA
  // graph and replayed, so no host launch time is in them; 0 when eager or not stated.
  std::int64_t graph_launches = 0;
};

// Parses the output of nccl-tests' all_reduce_perf into all-reduce points: the out-of-place
// times, or the in-place ones (tpo's runtime all-reduces in place). Throws InputError naming
// the file when nothing can be read from it. `header`, when given, receives what the header
// says about the run.
std::vector<sim::AllReducePoint> parse_nccl_tests(const std::string& path,
                                                  std::int64_t ranks_override,
                                                  bool in_place = false,
                                                  NcclTestsHeader* header = nullptr);

// Reads a CSV of one's own all-reduce times (torch.distributed, a custom kernel, a serving
// engine's benchmark): `#` lines are comments (the first is returned in `note` as the
// provenance), the first other line names the columns, one of them `bytes` and one `time_us`
// (others are ignored); each size once, ascending, at least two. Throws InputError naming the
// file and line.
std::vector<sim::AllReducePoint> parse_allreduce_csv(const std::string& path, std::int64_t ranks,
                                                     std::string* note = nullptr);

}  // namespace tpo::profiler
