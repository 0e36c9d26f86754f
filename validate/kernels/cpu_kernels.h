// CPU kernels (fp32, one thread per rank) shared by the profiler and the CPU runtime: Eigen
// GEMM, a straightforward causal attention with a KV prefix and GQA, rmsnorm, SiLU*mul,
// residual add, and an all-reduce across rank threads through shared memory. Reference
// quality and single-threaded on purpose: ranks are threads, and each owns one core.
#pragma once

#include <barrier>
#include <cmath>
#include <cstdint>
#include <vector>

#include "validate/kernels/attention_shape.h"

namespace tpo::validate::cpu {

// c[m x n] (+)= a[m x k] * b[k x n], all row-major; a's rows `lda` values apart (0: k).
void gemm(const float* a, const float* b, float* c, std::int64_t m, std::int64_t n, std::int64_t k,
          bool accumulate = false, std::int64_t lda = 0);

// The embedding lookup of a vocabulary slice: row i of x = table row ids[i] - first where that
// is in [0, rows), else zeros (another rank's row: the all-reduce after it sums them).
void embed(const std::int32_t* ids, const float* table, std::int64_t first, std::int64_t rows,
           float* x, std::int64_t tokens, std::int64_t cols);

// y = x / rms(x) * w over each row of `cols` values.
void rmsnorm(const float* x, const float* w, float* y, std::int64_t rows, std::int64_t cols,
             float eps = 1e-5f);

// x += o, then y = x / rms(x) * w, row by row in one pass over the row (the fused add and norm,
// --add-norm fused): the same arithmetic as add_inplace then rmsnorm.
void add_rmsnorm(float* x, const float* o, const float* w, float* y, std::int64_t rows,
                 std::int64_t cols, float eps = 1e-5f);

// Per-head RMSNorm in place (Qwen3's q_norm and k_norm): in each of `rows` rows `pitch` values
// apart, `heads` heads of head_dim values from x, each normalized with the weight w (head_dim).
void head_rmsnorm(float* x, std::int64_t pitch, std::int64_t heads, std::int64_t head_dim,
                  const float* w, std::int64_t rows, float eps = 1e-5f);

// gate_up rows are [gate (ffn) | up (ffn)]; out = silu(gate) * up, rows x ffn (SwiGLU), or
// with `gelu` gelu(gate) * up (GeGLU, tanh approximation as Gemma's gelu_pytorch_tanh).
void silu_mul(const float* gate_up, float* out, std::int64_t rows, std::int64_t ffn,
              bool gelu = false);
template <typename T>
T gelu_tanh(T x) {
  const T k = T(0.7978845608028654);  // sqrt(2 / pi)
  return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
}

// acc[i] += x[i].
void add_inplace(float* acc, const float* x, std::int64_t n);

// The KV-cache write after a qkv GEMM: `requests` x `rows` rows of qkv (pitch `qkv_n` values,
// [q | k | v] of q_width, kv_width, kv_width; request-major) to `rows` contiguous rows of
// kv_width per request in k and in v, request i's from k + i * dst_stride (and v's).
void store_kv(const float* qkv, std::int64_t qkv_n, std::int64_t q_width, std::int64_t kv_width,
              std::int64_t rows, float* k, float* v, std::int64_t requests = 1,
              std::int64_t dst_stride = 0);

// Rotary embeddings, in place, after a qkv GEMM: `requests` x `rows` rows of qkv (pitch
// `qkv_n`, request-major), request i's row t at position pos + t. In each row the first `rot`
// values of each of its first `heads` heads (head_dim apart: the query heads, then the K
// heads) are rotated in rotate-half pairs (j, j + rot / 2) by the angle of position p and pair
// j, whose cosine and sine table[p * rot + j] and table[p * rot + rot / 2 + j] hold (vLLM's
// cos_sin_cache layout).
void rope(float* qkv, std::int64_t qkv_n, std::int64_t heads, std::int64_t head_dim,
          std::int64_t rot, std::int64_t rows, std::int64_t pos, const float* table,
          std::int64_t requests = 1);
// That table for positions 0 .. positions - 1: angle p x theta^(-2j / rot), in double, stored
// as float.
std::vector<float> rope_table(std::int64_t positions, std::int64_t rot, double theta);

using validate::AttentionShape;
// q: [requests][q_tokens][q_heads][head_dim], its rows q_stride() apart; k, v:
// [requests][kv_capacity][kv_heads][head_dim] holding the prefix and the new tokens; out like
// q, packed. Query i sees keys 0 .. prefix + i
// (causal, bottom-right aligned); query head h reads KV head h / (q_heads / kv_heads).
void attention(const float* q, const float* k, const float* v, float* out, const AttentionShape& s);

// Sum of `n` floats over `ranks` threads, in place in each rank's buffer: reduce-scatter then
// all-gather through shared memory. Every rank thread calls run() with its own buffer.
class SharedAllReduce {
 public:
  explicit SharedAllReduce(int ranks);
  // Returns when every rank has arrived (the collective's real start, after any wait for a
  // late rank), in steady_clock nanoseconds since its epoch.
  std::int64_t run(int rank, float* buf, std::int64_t n);
  // All-gather: rank r's `per_rank` floats at buf + r * per_rank are copied into every other
  // rank's buffer at the same place. Returns as run() does.
  std::int64_t gather(int rank, float* buf, std::int64_t per_rank);
  // A rank that stops early (after a failure elsewhere) releases the others.
  void drop() { sync_.arrive_and_drop(); }
  int ranks() const { return ranks_; }

 private:
  // Publishes this rank's buffer and waits for every rank; returns when the last came.
  std::int64_t arrive(int rank, float* buf);
  int ranks_;
  std::vector<float*> bufs_;
  std::barrier<> sync_;
};

}  // namespace tpo::validate::cpu
