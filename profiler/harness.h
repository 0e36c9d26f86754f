// The measuring harness: Google Benchmark drives every measurement (manual timing: the
// backend times each run), after a warm-up; the harness records every sample and keeps the
// median, min and max. Progress with an ETA goes to stderr; each finished measurement is
// appended to a resume log so an interrupted run continues where it stopped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/backend.h"
#include "sim/profile.h"

namespace tpo::profiler {

struct HarnessOptions {
  int warmup = 2;
  int reps = 5;
  bool progress = true;
  std::string resume_path;  // JSON lines of finished measurements; empty: no resume
  std::string fingerprint;  // the options a resume log must match
};

struct Measurement {
  Item item;
  sim::Timing t;
  sim::Timing alone;    // interference items: the victim alone
  double other_us = 0;  // the other side alone, where the runner measured it
  std::string kernel;   // the library kernel the runner ran, where it says (Runner::kernel)
};

// Median, min, max of samples in seconds, reported in microseconds.
sim::Timing summarize_samples(std::vector<double> seconds);

std::vector<Measurement> run_sweep(Backend& backend, const std::vector<Item>& items,
                                   const HarnessOptions& o);

}  // namespace tpo::profiler
