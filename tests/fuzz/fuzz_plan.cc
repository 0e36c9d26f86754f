// Plan files (tpo.plan/1) as `tpo validate --plan` and serving engines read them, and generate
// reports (tpo.generate/1) as `tpo validate --plan` reads them.
#include "fuzz_common.h"
#include "sim/plan_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = tpo::fuzz::write_input(data, size);
  tpo::fuzz::expect_clean([&] {
    const tpo::sim::PlanFile p = tpo::sim::load_plan(path);
    for (std::int64_t seq : {1, 100, 4096}) p.lookup(seq);
  });
  tpo::fuzz::expect_clean([&] { tpo::sim::load_points(path); });
  return 0;
}
