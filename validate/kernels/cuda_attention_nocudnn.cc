// Builds with CUDA but without cuDNN (or its frontend headers): the cuBLAS attention only.
#include <stdexcept>

#include "validate/kernels/cuda_kernels.h"

namespace tpo::validate::cuda {

bool fused_attention_built() {
  return false;
}

bool fused_attention_available(std::string* why) {
  if (why) *why = "this build has no cuDNN fused attention";
  return false;
}

void attention_fused_bf16(Context&, const void*, const void*, const void*, void*,
                          const AttentionShape&, void*) {
  throw std::runtime_error(
      "this build has no cuDNN fused attention (cuDNN or the cudnn-frontend headers were not "
      "found when it was configured); use --attention cublas");
}

bool fused_attention_plans(const std::vector<AttentionShape>&, std::string* why) {
  if (why) *why = "this build has no cuDNN fused attention";
  return false;
}

}  // namespace tpo::validate::cuda
