// A profiling backend runs the ops of a sweep on one device. The harness owns warm-up,
// repetitions and statistics; a backend only prepares an op and runs it once, timing it its
// own way (host clock on the CPU, CUDA events on the GPU).
#pragma once

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "profiler/sweep.h"

namespace tpo::profiler {

// Thrown by prepare() when this machine cannot measure an item (e.g. an all-reduce over more
// GPUs than it has): the harness skips it and the profile model falls back for it.
struct SkipItem : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Runner {
 public:
  virtual ~Runner() = default;
  // Runs the op once on the next rotated input set; returns its time in seconds.
  virtual double run_once() = 0;
  // Interference runners that also time the other side alone (a fragment's all-reduce):
  // that time in seconds, measured once; 0 otherwise.
  virtual double other_seconds() const { return 0; }
  // The library kernel the op runs, where the backend can say (a cuBLASLt GEMM's algorithm:
  // cu::gemm_kernel); empty otherwise. Recorded in the profile beside the time.
  virtual std::string kernel() { return {}; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual std::string dtype() const = 0;
  virtual nlohmann::json device() const = 0;  // name, versions
  // Throws std::runtime_error when the item cannot run on this backend.
  virtual std::unique_ptr<Runner> prepare(const Item& item) = 0;
  // Interference items: the victim alone (the GEMM, or the comm op/copy), for the baseline.
  virtual std::unique_ptr<Runner> prepare_alone(const Item& item) = 0;
  // Host launch costs (sim/launch.h's "launch" block), measured on the smallest item of each
  // kind in `items`; null where launches cost nothing to measure apart (the CPU).
  virtual nlohmann::json measure_launch(const std::vector<Item>& /*items*/) { return nullptr; }
  // How far ahead of the timed op its pairwise interference runs start the other op (µs), for
  // the profile (tpo calibrate replays the pairs so); empty where that is not a time (the CPU
  // backend's aggressor threads run throughout).
  virtual std::optional<double> interference_head_start_us() const { return std::nullopt; }
};

std::unique_ptr<Backend> make_cpu_backend();
// Input sets a runner rotates through so a run never finds its inputs in cache: enough sets
// of `bytes_per_set` to cover 64 MiB, between 2 and 8.
int rotation_sets(std::int64_t bytes_per_set);
// Null when this build has no CUDA; throws tpo::RunFailure when there is no device.
// `attention`: auto | cudnn | cublas (the attention kernel measured, as the runtime runs it).
std::unique_ptr<Backend> make_cuda_backend(const std::string& attention = "auto");
// Comm workers (threads on the CPU, CTAs on the GPU) the interference sweep tries.
std::vector<std::int64_t> comm_workers(const std::string& backend);
// Multiples of the mid chunk's all-reduce measured as the comm victim beside a GEMM.
std::vector<std::int64_t> comm_lengths(const std::string& backend);
// Op kinds besides the GEMM that the comm victim is measured beside.
std::vector<std::string> comm_beside_more(const std::string& backend);

}  // namespace tpo::profiler
