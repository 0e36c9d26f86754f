// Hardware files (tpo.hardware/1), then Llama-3.1-8B's schedule priced on them.
#include "fuzz_common.h"
#include "sim/cost_model.h"
#include "sim/engine.h"
#include "sim/hardware.h"
#include "sim/strategy.h"
#include "sim/workload.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = tpo::fuzz::write_input(data, size);
  tpo::fuzz::expect_clean([&] {
    tpo::sim::WorkloadOptions o;
    o.model = "llama3.1-8b";
    o.hardware = path;
    o.tp = 1;
    o.seq = 128;
    o.layers = 1;
    const tpo::sim::Workload w = tpo::sim::make_workload(o);
    const auto s =
        tpo::sim::build_schedule(w, tpo::sim::StrategySpec(tpo::sim::StrategyKind::Iso, {64, 64}));
    const tpo::sim::AnalyticalCostModel cm(w.hardware, w.tp);
    tpo::sim::Engine e;
    e.run(s, tpo::sim::cost_schedule(s, cm));
  });
  return 0;
}
