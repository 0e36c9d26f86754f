// Model files (tpo.model/1 and Hugging Face config.json), then a one-layer schedule of them
// timed end to end: the numbers a model file carries must never overflow or crash the core.
#include "fuzz_common.h"
#include "sim/model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = tpo::fuzz::write_input(data, size);
  tpo::fuzz::expect_clean([&] {
    tpo::sim::load_model(path);
    tpo::fuzz::time_one_layer(path, "h100x8", 64);
  });
  return 0;
}
