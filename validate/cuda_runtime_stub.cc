// Builds without CUDA: `tpo validate --backend cuda` says the build has no CUDA.
#include "sim/error.h"
#include "validate/runtime.h"

namespace tpo::validate {

bool cuda_runtime_built() {
  return false;
}

std::string cuda_device_name(bool) {
  return "";
}

RunResult run_cuda(const sim::Workload&, const sim::Schedule&, const RunOptions&,
                   const std::string&, const std::vector<std::int64_t>&, int) {
  throw InputError("--backend", "cuda", "this build has no CUDA (configure where nvcc is found)");
}

}  // namespace tpo::validate
