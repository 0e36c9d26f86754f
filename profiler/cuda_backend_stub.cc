// Builds without the CUDA backend: `tpo profile --backend cuda` says so.
#include "profiler/backend.h"
#include "tpo/config.h"

#if !TPO_WITH_CUDA || !defined(TPO_HAVE_CUDA_BACKEND)
namespace tpo::profiler {
std::unique_ptr<Backend> make_cuda_backend() {
  return nullptr;
}
}  // namespace tpo::profiler
#endif
