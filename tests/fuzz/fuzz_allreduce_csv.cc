// A CSV of one's own all-reduce times, as `tpo profile import-allreduce` reads it.
#include "fuzz_common.h"
#include "profiler/profile_run.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = tpo::fuzz::write_input(data, size);
  tpo::fuzz::expect_clean([&] { tpo::profiler::parse_allreduce_csv(path, 8); });
  return 0;
}
