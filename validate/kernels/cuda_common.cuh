// Shared by the CUDA kernel files (internal, not a public header): error checks that throw
// with file and line, stream and grid helpers, block reductions, and the Context's state.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include "tpo/config.h"
#if TPO_WITH_NCCL
#include <nccl.h>
#endif

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

#include "validate/kernels/cuda_kernels.h"

// Each failed CUDA, cuBLAS or NCCL call throws with the file, line, call and the library's
// message.
namespace tpo::validate::cuda::detail {
[[noreturn]] inline void tpo_fail(const char* file, int line, const char* call,
                                  const std::string& why) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call + ": " +
                           why);
}
}  // namespace tpo::validate::cuda::detail
#define TPO_CHECK_(expr, Type, ok, message)                                                     \
  do {                                                                                          \
    const Type tpo_status_ = (expr);                                                            \
    if (tpo_status_ != (ok))                                                                    \
      ::tpo::validate::cuda::detail::tpo_fail(__FILE__, __LINE__, #expr, message(tpo_status_)); \
  } while (0)
#define TPO_CUDA_CHECK(expr) TPO_CHECK_(expr, cudaError_t, cudaSuccess, cudaGetErrorString)
#define TPO_CUBLAS_CHECK(expr)                            \
  TPO_CHECK_(expr, cublasStatus_t, CUBLAS_STATUS_SUCCESS, \
             [](cublasStatus_t st) { return std::string(cublasGetStatusString(st)); })
#if TPO_WITH_NCCL
#define TPO_NCCL_CHECK(expr) TPO_CHECK_(expr, ncclResult_t, ncclSuccess, ncclGetErrorString)
#endif

namespace tpo::validate::cuda {

// Helpers of the kernel files; each file compiles its own copy of the device functions.
namespace {

using bf16 = __nv_bfloat16;
inline cudaStream_t S(void* s) {
  return static_cast<cudaStream_t>(s);
}
inline int blocks_for(std::size_t n, int threads) {
  return static_cast<int>(std::min<std::size_t>((n + threads - 1) / threads, 65535 * 8));
}

// The reduction of v over the block (every thread gets it): within each warp by shuffles,
// then across the warps' results. `identity` pads the lanes beyond the last warp.
template <class Op>
__device__ float block_reduce(float v, float identity, Op op) {
  __shared__ float sh[32];
  for (int o = 16; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xffffffff, v, o));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  v = threadIdx.x < warps ? sh[threadIdx.x] : identity;
  if (warp == 0) {
    for (int o = 16; o > 0; o /= 2) v = op(v, __shfl_xor_sync(0xffffffff, v, o));
  }
  __syncthreads();
  if (threadIdx.x == 0) sh[0] = v;
  __syncthreads();
  const float r = sh[0];
  __syncthreads();
  return r;
}
struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
__device__ inline float block_sum(float v) {
  return block_reduce(v, 0.0f, Add{});
}
__device__ inline float block_max(float v) {
  return block_reduce(v, -INFINITY, Max{});
}

// Eight bf16 values moved as one 16-byte load or store (the vector paths below need the
// pointers 16-byte aligned and the lengths multiples of 8; the callers check).
struct alignas(16) Bf16x8 {
  bf16 v[8];
};
inline bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

}  // namespace

// A GEMM shape's cuBLASLt descriptors and the algorithm the heuristic picked for it (with
// the workspace allowed), made once per shape: per-call heuristics cost tens of microseconds
// of host time, which would land in the measurements of small GEMMs.
struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool has_algo = false;
  // A bias GEMM cuBLASLt found no epilogue algorithm for: the bias added by a kernel after it.
  bool bias_apart = false;
  std::string kernel;  // the algorithm's configuration, for profiles (gemm_kernel)
};

struct Context::Impl {
  cudaStream_t compute = nullptr, comm = nullptr;
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  Buffer workspace;
  // Keyed by shape and by the alignment of the three pointers: the heuristic must only pick
  // kernels that can read operands at those alignments (it assumes 256 bytes otherwise).
  // With a bias (the epilogue adds it), or A's rows further apart than k: a plan of its own.
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::uint32_t, std::uint32_t,
                      std::uint32_t, bool, std::int64_t>,
           LtPlan>
      plans;
};

}  // namespace tpo::validate::cuda
