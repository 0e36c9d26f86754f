// One description of a collective, shared by the cost model, the profiler and the runtime
// so that byte counts and the bus-bandwidth factor cannot drift apart (as nccl-tests does).
#pragma once

#include <cstdint>

namespace tpo::sim {

enum class CollectiveKind { AllReduce };

struct Collective {
  CollectiveKind kind = CollectiveKind::AllReduce;
  std::int64_t bytes = 0;  // message size per rank
  std::int64_t ranks = 1;

  // Ring all-reduce moves 2(n-1)/n of the message over each rank's link (nccl-tests busbw).
  double bus_factor() const {
    return ranks <= 1 ? 0.0 : 2.0 * static_cast<double>(ranks - 1) / static_cast<double>(ranks);
  }
  double bus_bytes() const { return static_cast<double>(bytes) * bus_factor(); }
};

}  // namespace tpo::sim
