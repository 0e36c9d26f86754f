// libFuzzer targets for every file tpo reads. Each writes the input to a scratch file and hands
// it to the real loader: a clear InputError (exit 2 in the CLI) is the expected outcome for bad
// input; anything else — another exception, a crash, a sanitizer report, a hang — is a bug the
// fuzzer reports. Built by `make fuzz` (clang, -fsanitize=fuzzer,address,undefined).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "sim/cost_model.h"
#include "sim/engine.h"
#include "sim/error.h"
#include "sim/strategy.h"
#include "sim/workload.h"

namespace tpo::fuzz {

// A scratch file per process holding the input.
inline std::string write_input(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/tpo-fuzz-" + std::to_string(::getpid()) + ".json";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
  return path;
}

// Runs `fn`; InputError is a correct answer, anything else aborts (the fuzzer records it).
template <class F>
void expect_clean(F&& fn) {
  try {
    fn();
  } catch (const tpo::InputError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "unexpected exception: %s\n", e.what());
    std::abort();
  }
}

// The core on what a parser loaded: a one-layer ISO schedule of `seq` tokens in two chunks,
// priced by the analytical model of its hardware and timed by the engine.
inline void time_one_layer(const std::string& model, const std::string& hardware,
                           std::int64_t seq) {
  sim::WorkloadOptions o;
  o.model = model;
  o.hardware = hardware;
  o.tp = 1;
  o.seq = seq;
  o.layers = 1;
  const sim::Workload w = sim::make_workload(o);
  const auto s =
      sim::build_schedule(w, sim::StrategySpec(sim::StrategyKind::Iso, {seq / 2, seq - seq / 2}));
  const sim::AnalyticalCostModel cm(w.hardware, w.tp);
  sim::Engine e;
  e.run(s, sim::cost_schedule(s, cm));
}

}  // namespace tpo::fuzz
