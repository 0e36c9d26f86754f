// Where the CUDA backend is not linked (`tpo`, which hands CUDA work to tpo-gpu, and builds
// without CUDA): `tpo profile --backend cuda` says the build has no CUDA.
#include "profiler/backend.h"

namespace tpo::profiler {
std::unique_ptr<Backend> make_cuda_backend(const std::string&) {
  return nullptr;
}
}  // namespace tpo::profiler
