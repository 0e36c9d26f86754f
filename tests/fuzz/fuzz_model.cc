// Model files (tpo.model/1 and Hugging Face config.json), then a one-layer schedule of them
// timed end to end: the numbers a model file carries must never overflow or crash the core.
#include "fuzz_common.h"
#include "sim/cost_model.h"
#include "sim/engine.h"
#include "sim/model.h"
#include "sim/strategy.h"
#include "sim/workload.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = tpo::fuzz::write_input(data, size);
  tpo::fuzz::expect_clean([&] {
    const tpo::sim::ModelConfig m = tpo::sim::load_model(path);
    tpo::sim::WorkloadOptions o;
    o.model = path;
    o.hardware = "h100x8";
    o.tp = 1;
    o.seq = 64;
    o.layers = 1;
    const tpo::sim::Workload w = tpo::sim::make_workload(o);
    const auto s =
        tpo::sim::build_schedule(w, tpo::sim::StrategySpec(tpo::sim::StrategyKind::Iso, {32, 32}));
    const tpo::sim::AnalyticalCostModel cm(w.hardware, w.tp);
    tpo::sim::Engine e;
    e.run(s, tpo::sim::cost_schedule(s, cm));
    (void)m;
  });
  return 0;
}
