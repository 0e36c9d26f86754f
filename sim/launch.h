// How the host gets the schedule onto the GPU, and what that costs. Three execution modes:
//  - queued: the whole schedule is queued before the GPU starts on it (the runtime holds the
//    streams with a spin while the host enqueues), so host launch time is hidden. Op times are
//    the GPU's back-to-back times, as `tpo profile` measures them. The H200 runs of 2026-11-29
//    measured this mode.
//  - eager: one host thread per rank issues the rank's ops in program order, one launch call
//    after another; an op cannot start before its launch call has returned. Long kernels hide
//    the launches (the host runs ahead); short ones wait for them (decode). Serving engines
//    run prefill like this where they do not capture it.
//  - graph: the rank's schedule was captured once in a CUDA graph; one graph launch releases
//    every op. Serving engines replay decode steps like this (captured batch sizes).
// Launch costs are host-side, per launch call and per op kind (a cuBLASLt GEMM's host work is
// larger than a norm kernel's, NCCL's larger still): the hardware file's assumption, or what a
// profile measured on the machine.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/schedule.h"

namespace tpo::sim {

enum class ExecMode : std::uint8_t { Queued, Eager, Graph };
const char* exec_mode_name(ExecMode m);
// Throws FieldError naming "exec" for a name that is not queued, eager or graph.
ExecMode parse_exec_mode(const std::string& name);

struct LaunchCosts {
  // Host time of one launch call, by OpKind (gemm, attention, norm, elementwise, all-reduce).
  std::array<double, 5> eager_us{};
  double graph_launch_us = 0;  // one cudaGraphLaunch: host call until the first node can run
  std::string source;          // where the values come from, for reports
  double eager_of(OpKind k) const { return eager_us[static_cast<std::size_t>(k)]; }
};

// The same host cost for every kind: the hardware file's single launch_overhead_us.
LaunchCosts uniform_launch(double eager_us, double graph_launch_us, const std::string& source);

// When each op may start at the earliest (ns from the run's start), by the mode: empty for
// queued (no constraint); eager: the end of the op's launch call, the rank's ops issued in
// schedule order (a qkv op's per-head norms, rotary kernel and KV-cache write are more launch calls
// after its GEMM's, which delay the ops after it; a residual add with a post-norm starts after
// the norm's call and its own); graph: the graph launch, for every
// op.
std::vector<std::int64_t> release_times(const Schedule& s, ExecMode mode, const LaunchCosts& c);

// A "launch" JSON block (a profile's measurements): {"eager_us": {"gemm": .., "attention": ..,
// "norm": .., "elementwise": .., "allreduce": ..}, "graph_launch_us": ..}; `base` supplies
// what it omits. Every value is checked (finite, 0 to 1e6 us).
LaunchCosts launch_from_json(const nlohmann::json& j, const std::string& file,
                             const std::string& path, LaunchCosts base);
nlohmann::ordered_json launch_json(const LaunchCosts& c);
// For reports: the mode and the costs that applied.
nlohmann::ordered_json execution_json(ExecMode mode, const LaunchCosts& c);

}  // namespace tpo::sim
