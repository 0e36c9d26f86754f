// nccl-tests all_reduce_perf output, as `tpo profile import-nccl-tests` reads it.
#include "fuzz_common.h"
#include "profiler/profile_run.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = tpo::fuzz::write_input(data, size);
  tpo::fuzz::expect_clean([&] { tpo::profiler::parse_nccl_tests(path, 0); });
  return 0;
}
