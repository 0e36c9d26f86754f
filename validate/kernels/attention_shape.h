// The shape of one attention call, shared by the CPU and CUDA kernels so that the profiler,
// the runtimes and the tests describe attention one way.
#pragma once

#include <cmath>
#include <cstdint>

namespace tpo::validate {

struct AttentionShape {
  std::int64_t requests = 1;
  std::int64_t q_tokens = 1;  // new tokens per request
  std::int64_t prefix = 0;    // KV tokens before them
  std::int64_t q_heads = 1, kv_heads = 1, head_dim = 1;
  std::int64_t kv_capacity = 0;  // KV cache rows per request (>= prefix + q_tokens)
  // A sliding window: each query sees only the last `window` positions, itself included
  // (0: every earlier position).
  std::int64_t window = 0;
  // The scores' scale (0: 1 / sqrt(head_dim); Gemma: query_pre_attn_scalar^-1/2), and a soft cap
  // on the scaled scores before the softmax, cap x tanh(score / cap) (0: none; Gemma-2's
  // attn_logit_softcapping).
  float scale = 0;
  float softcap = 0;
  float score_scale() const {
    return scale > 0 ? scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  }
  // The first key position query `i` of the chunk sees.
  std::int64_t first_key(std::int64_t i) const {
    const std::int64_t last = prefix + i;
    return window > 0 && last + 1 > window ? last + 1 - window : 0;
  }
  // Values from one query token's Q to the next: 0 for packed rows (q_heads * head_dim); the
  // runtimes read Q in place in the fused qkv rows, (q_heads + 2 kv_heads) * head_dim apart,
  // as serving engines do; at least q_heads * head_dim. The output is always packed.
  std::int64_t q_row_stride = 0;
  std::int64_t q_stride() const { return q_row_stride > 0 ? q_row_stride : q_heads * head_dim; }
  // Elements of the output (and of a packed q), of q in its layout (its last row ends at its
  // last query value), and of k (and of v), in the layouts the kernels take.
  std::int64_t q_elements() const { return requests * q_tokens * q_heads * head_dim; }
  std::int64_t q_input_elements() const {
    return requests * q_tokens == 0 ? 0
                                    : (requests * q_tokens - 1) * q_stride() + q_heads * head_dim;
  }
  std::int64_t kv_elements() const { return requests * kv_capacity * kv_heads * head_dim; }
};

}  // namespace tpo::validate
