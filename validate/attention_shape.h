// The shape of one attention call, shared by the CPU and CUDA kernels so that the profiler,
// the runtimes and the tests describe attention one way.
#pragma once

#include <cstdint>

namespace tpo::validate {

struct AttentionShape {
  std::int64_t requests = 1;
  std::int64_t q_tokens = 1;  // new tokens per request
  std::int64_t prefix = 0;    // KV tokens before them
  std::int64_t q_heads = 1, kv_heads = 1, head_dim = 1;
  std::int64_t kv_capacity = 0;  // KV cache rows per request (>= prefix + q_tokens)
};

}  // namespace tpo::validate
