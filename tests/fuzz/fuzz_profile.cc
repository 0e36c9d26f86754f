// Profiles (tpo.profile/1), then the profile cost model built and used on a schedule.
#include "fuzz_common.h"
#include "sim/engine.h"
#include "sim/profile.h"
#include "sim/profile_cost.h"
#include "sim/strategy.h"
#include "sim/workload.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = tpo::fuzz::write_input(data, size);
  tpo::fuzz::expect_clean([&] {
    tpo::sim::Profile p = tpo::sim::load_profile(path);
    tpo::sim::WorkloadOptions o;
    o.model = "llama3.1-8b";
    o.hardware = "h200x8";
    o.tp = 2;
    o.seq = 128;
    o.layers = 1;
    const tpo::sim::Workload w = tpo::sim::make_workload(o);
    p.tp = 2;
    const tpo::sim::ProfileCostModel cm(p, w.hardware, w.tp);
    const auto s =
        tpo::sim::build_schedule(w, tpo::sim::StrategySpec(tpo::sim::StrategyKind::Iso, {64, 64}));
    tpo::sim::Engine e;
    e.run(s, tpo::sim::cost_schedule(s, cm));
  });
  return 0;
}
