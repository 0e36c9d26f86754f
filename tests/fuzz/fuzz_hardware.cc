// Hardware files (tpo.hardware/1), then Llama-3.1-8B's schedule priced on them.
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = tpo::fuzz::write_input(data, size);
  tpo::fuzz::expect_clean([&] { tpo::fuzz::time_one_layer("llama3.1-8b", path, 128); });
  return 0;
}
