// CUDA kernels and library calls behind cuda_kernels.h. Errors throw with file and line.
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
namespace {
[[noreturn]] void tpo_fail(const char* file, int line, const char* call, const std::string& why) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call + ": " +
                           why);
}
}  // namespace
#define TPO_CHECK_(expr, Type, ok, message)                                             \
  do {                                                                                  \
    const Type tpo_status_ = (expr);                                                    \
    if (tpo_status_ != (ok)) tpo_fail(__FILE__, __LINE__, #expr, message(tpo_status_)); \
  } while (0)
#define TPO_CUDA_CHECK(expr) TPO_CHECK_(expr, cudaError_t, cudaSuccess, cudaGetErrorString)
#define TPO_CUBLAS_CHECK(expr)                            \
  TPO_CHECK_(expr, cublasStatus_t, CUBLAS_STATUS_SUCCESS, \
             [](cublasStatus_t st) { return std::string(cublasGetStatusString(st)); })
#if TPO_WITH_NCCL
#define TPO_NCCL_CHECK(expr) TPO_CHECK_(expr, ncclResult_t, ncclSuccess, ncclGetErrorString)
#endif

namespace tpo::validate::cuda {

namespace {

using bf16 = __nv_bfloat16;
cudaStream_t S(void* s) {
  return static_cast<cudaStream_t>(s);
}
int blocks_for(std::size_t n, int threads) {
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
__device__ float block_sum(float v) {
  return block_reduce(v, 0.0f, Add{});
}
__device__ float block_max(float v) {
  return block_reduce(v, -INFINITY, Max{});
}

__global__ void fill_kernel(bf16* p, std::size_t n, std::uint64_t seed, float scale) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    std::uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    const float u = float(x >> 40) / float(1ull << 24);  // [0, 1)
    p[i] = __float2bfloat16((2.0f * u - 1.0f) * scale);
  }
}

// Eight bf16 values moved as one 16-byte load or store (the vector paths below need the
// pointers 16-byte aligned and the lengths multiples of 8; the callers check).
struct alignas(16) Bf16x8 {
  bf16 v[8];
};
bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

// One block per row; VEC: 8 values per load.
template <bool VEC>
__global__ void rmsnorm_kernel(const bf16* x, const bf16* w, bf16* y, std::int64_t cols,
                               float eps) {
  const bf16* xr = x + blockIdx.x * cols;
  bf16* yr = y + blockIdx.x * cols;
  float ss = 0;
  if (VEC) {
    for (std::int64_t c = threadIdx.x * 8; c < cols; c += blockDim.x * 8) {
      const Bf16x8 a = *reinterpret_cast<const Bf16x8*>(xr + c);
      for (int e = 0; e < 8; ++e) {
        const float v = __bfloat162float(a.v[e]);
        ss += v * v;
      }
    }
  } else {
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float v = __bfloat162float(xr[c]);
      ss += v * v;
    }
  }
  ss = block_sum(ss);
  const float inv = rsqrtf(ss / float(cols) + eps);
  if (VEC) {
    for (std::int64_t c = threadIdx.x * 8; c < cols; c += blockDim.x * 8) {
      const Bf16x8 a = *reinterpret_cast<const Bf16x8*>(xr + c);
      const Bf16x8 g = *reinterpret_cast<const Bf16x8*>(w + c);
      Bf16x8 o;
      for (int e = 0; e < 8; ++e) {
        o.v[e] = __float2bfloat16(__bfloat162float(a.v[e]) * inv * __bfloat162float(g.v[e]));
      }
      *reinterpret_cast<Bf16x8*>(yr + c) = o;
    }
  } else {
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      yr[c] = __float2bfloat16(__bfloat162float(xr[c]) * inv * __bfloat162float(w[c]));
    }
  }
}

// Rows on grid y (strided), columns on x; VEC: 8 columns per thread.
template <bool VEC>
__global__ void silu_mul_kernel(const bf16* gu, bf16* out, std::int64_t rows, std::int64_t ffn) {
  const std::int64_t step = VEC ? 8 : 1;
  const std::int64_t c = (blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x) * step;
  if (c >= ffn) return;
  for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const bf16* g = gu + r * 2 * ffn + c;
    const bf16* u = g + ffn;
    bf16* o = out + r * ffn + c;
    if (VEC) {
      const Bf16x8 a = *reinterpret_cast<const Bf16x8*>(g);
      const Bf16x8 b = *reinterpret_cast<const Bf16x8*>(u);
      Bf16x8 y;
      for (int e = 0; e < 8; ++e) {
        const float gv = __bfloat162float(a.v[e]);
        y.v[e] = __float2bfloat16(gv / (1.0f + __expf(-gv)) * __bfloat162float(b.v[e]));
      }
      *reinterpret_cast<Bf16x8*>(o) = y;
    } else {
      const float gv = __bfloat162float(*g);
      *o = __float2bfloat16(gv / (1.0f + __expf(-gv)) * __bfloat162float(*u));
    }
  }
}

// n counts elements, or groups of 8 with VEC.
template <bool VEC>
__global__ void add_kernel(bf16* acc, const bf16* x, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    if (VEC) {
      Bf16x8 a = reinterpret_cast<Bf16x8*>(acc)[i];
      const Bf16x8 b = reinterpret_cast<const Bf16x8*>(x)[i];
      for (int e = 0; e < 8; ++e) {
        a.v[e] = __float2bfloat16(__bfloat162float(a.v[e]) + __bfloat162float(b.v[e]));
      }
      reinterpret_cast<Bf16x8*>(acc)[i] = a;
    } else {
      acc[i] = __float2bfloat16(__bfloat162float(acc[i]) + __bfloat162float(x[i]));
    }
  }
}

// Holds its stream for `ns` nanoseconds of GPU time (one thread, no memory traffic).
// The SM cycle counter bounds it too (4 cycles per ns: about 2x the time at this GPU's top
// clock), should the global timer not advance.
__global__ void spin_kernel(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  const long long c0 = clock64();
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns && (unsigned long long)(clock64() - c0) < 4 * ns);
}

// Pointer arrays of the batched attention GEMMs, one entry per (request, query head).
struct AttnPtrs {
  const void** k;
  const void** q;
  void** s;
  const void** v;
  const void** p;
  void** o;
};
__global__ void attention_ptrs_kernel(AttnPtrs a, const bf16* q, const bf16* k, const bf16* v,
                                      bf16* out, float* scores, bf16* probs, int batch, int q_heads,
                                      int group, int d, long long q_request, long long kv_request,
                                      long long per_head) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= batch) return;
  const int r = b / q_heads, h = b % q_heads, g = h / group;
  a.k[b] = k + r * kv_request + std::size_t(g) * d;
  a.v[b] = v + r * kv_request + std::size_t(g) * d;
  a.q[b] = q + r * q_request + std::size_t(h) * d;
  a.o[b] = out + r * q_request + std::size_t(h) * d;
  a.s[b] = scores + b * per_head;
  a.p[b] = probs + b * per_head;
}

__global__ void copy_kernel(const int4* src, int4* dst, std::size_t n16, const char* src_tail,
                            char* dst_tail, std::size_t tail) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n16;
       i += std::size_t(gridDim.x) * blockDim.x) {
    dst[i] = src[i];
  }
  if (blockIdx.x == 0 && threadIdx.x < tail) dst_tail[threadIdx.x] = src_tail[threadIdx.x];
}

// One block per (query row, request x head): softmax over the keys the row may see
// (prefix + row + 1), zeros beyond, up to the padded row length ld. Scores are
// [request x head][q][ld] fp32; probabilities the same layout in bf16.
__global__ void masked_softmax_kernel(const float* s, bf16* p, int q, int ld, int prefix) {
  const int row = blockIdx.x, h = blockIdx.y;
  const float* sr = s + (std::size_t(h) * q + row) * ld;
  bf16* pr = p + (std::size_t(h) * q + row) * ld;
  const int valid = prefix + row + 1;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < valid; j += blockDim.x) mx = fmaxf(mx, sr[j]);
  mx = block_max(mx);
  float sum = 0;
  for (int j = threadIdx.x; j < valid; j += blockDim.x) sum += __expf(sr[j] - mx);
  sum = block_sum(sum);
  const float inv = 1.0f / sum;
  for (int j = threadIdx.x; j < ld; j += blockDim.x) {
    pr[j] = __float2bfloat16(j < valid ? __expf(sr[j] - mx) * inv : 0.0f);
  }
}

}  // namespace

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = cudaGetErrorString(e);
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device";
  return n;
}

nlohmann::json device_info(int device) {
  cudaDeviceProp prop{};
  TPO_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int driver = 0, runtime = 0, nccl = 0;
  TPO_CUDA_CHECK(cudaDriverGetVersion(&driver));
  TPO_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
#if TPO_WITH_NCCL
  ncclGetVersion(&nccl);
#endif
  return {{"backend", "cuda"},
          {"name", prop.name},
          {"sms", prop.multiProcessorCount},
          {"memory_gib", double(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0)},
          {"compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
          {"driver", driver},
          {"cuda_runtime", runtime},
          {"cublas", cublasLtGetVersion()},
          {"nccl", nccl}};
}

Buffer::Buffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes) TPO_CUDA_CHECK(cudaMalloc(&p_, bytes));
}
Buffer::~Buffer() {
  if (p_) cudaFree(p_);
}
Buffer::Buffer(Buffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) {
  o.p_ = nullptr;
  o.bytes_ = 0;
}
Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    if (p_) cudaFree(p_);
    p_ = o.p_;
    bytes_ = o.bytes_;
    o.p_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

// A GEMM shape's cuBLASLt descriptors and the algorithm the heuristic picked for it (with
// the workspace allowed), made once per shape: per-call heuristics cost tens of microseconds
// of host time, which would land in the measurements of small GEMMs.
struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool has_algo = false;
};

struct Context::Impl {
  cudaStream_t compute = nullptr, comm = nullptr;
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  Buffer workspace;
  // Keyed by shape and by the alignment of the three pointers: the heuristic must only pick
  // kernels that can read operands at those alignments (it assumes 256 bytes otherwise).
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::uint32_t, std::uint32_t,
                      std::uint32_t>,
           LtPlan>
      plans;
};

Context::Context(int device) : device_(device), impl_(std::make_unique<Impl>()) {
  TPO_CUDA_CHECK(cudaSetDevice(device));
  int least = 0, greatest = 0;
  TPO_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  TPO_CUDA_CHECK(cudaStreamCreateWithPriority(&impl_->compute, cudaStreamNonBlocking, least));
  // The comm stream at the highest priority, so its kernels get SMs as soon as any free up.
  TPO_CUDA_CHECK(cudaStreamCreateWithPriority(&impl_->comm, cudaStreamNonBlocking, greatest));
  TPO_CUBLAS_CHECK(cublasCreate(&impl_->blas));
  TPO_CUBLAS_CHECK(cublasLtCreate(&impl_->lt));
  impl_->workspace = Buffer(32u << 20);
}

Context::~Context() {
  cudaSetDevice(device_);  // the handles and streams belong to this device
  for (auto& [shape, p] : impl_->plans) {
    cublasLtMatrixLayoutDestroy(p.la);
    cublasLtMatrixLayoutDestroy(p.lb);
    cublasLtMatrixLayoutDestroy(p.lc);
    cublasLtMatmulDescDestroy(p.op);
  }
  if (impl_->lt) cublasLtDestroy(impl_->lt);
  if (impl_->blas) cublasDestroy(impl_->blas);
  if (impl_->compute) cudaStreamDestroy(impl_->compute);
  if (impl_->comm) cudaStreamDestroy(impl_->comm);
}

void* Context::compute_stream() const {
  return impl_->compute;
}
void* Context::comm_stream() const {
  return impl_->comm;
}
void Context::synchronize() const {
  int previous = 0;
  TPO_CUDA_CHECK(cudaGetDevice(&previous));
  TPO_CUDA_CHECK(cudaSetDevice(device_));
  TPO_CUDA_CHECK(cudaDeviceSynchronize());
  TPO_CUDA_CHECK(cudaSetDevice(previous));  // leave the caller's device current
}

Event::Event() {
  cudaEvent_t e;
  TPO_CUDA_CHECK(cudaEventCreate(&e));
  e_ = e;
}
Event::~Event() {
  cudaEventDestroy(static_cast<cudaEvent_t>(e_));
}
void Event::record(void* stream) {
  TPO_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(e_), S(stream)));
}
void Event::make_wait(void* stream) const {
  TPO_CUDA_CHECK(cudaStreamWaitEvent(S(stream), static_cast<cudaEvent_t>(e_), 0));
}
void Event::synchronize() const {
  TPO_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(e_)));
}
double Event::seconds_between(const Event& from, const Event& to) {
  float ms = 0;
  TPO_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(from.e_),
                                      static_cast<cudaEvent_t>(to.e_)));
  return double(ms) * 1e-3;
}

void set_device(int device) {
  TPO_CUDA_CHECK(cudaSetDevice(device));
}

void fill_random_bf16(void* p, std::size_t n, std::uint64_t seed, float scale, void* stream) {
  fill_kernel<<<blocks_for(n, 256), 256, 0, S(stream)>>>(static_cast<bf16*>(p), n, seed, scale);
  TPO_CUDA_CHECK(cudaGetLastError());
}

void copy_device(void* dst, const void* src, std::size_t bytes, void* stream) {
  if (bytes == 0) return;
  TPO_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, S(stream)));
}

void copy_rows(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
               std::size_t width_bytes, std::size_t height, void* stream) {
  if (height == 0 || width_bytes == 0) return;
  TPO_CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width_bytes, height,
                                   cudaMemcpyDeviceToDevice, S(stream)));
}

void copy_to_host_bf16_as_float(const void* dev, float* host, std::size_t n) {
  std::vector<bf16> tmp(n);
  TPO_CUDA_CHECK(cudaMemcpy(tmp.data(), dev, n * sizeof(bf16), cudaMemcpyDeviceToHost));
  for (std::size_t i = 0; i < n; ++i) host[i] = __bfloat162float(tmp[i]);
}

void copy_from_host_float_to_bf16(const float* host, void* dev, std::size_t n) {
  std::vector<bf16> tmp(n);
  for (std::size_t i = 0; i < n; ++i) tmp[i] = __float2bfloat16(host[i]);
  TPO_CUDA_CHECK(cudaMemcpy(dev, tmp.data(), n * sizeof(bf16), cudaMemcpyHostToDevice));
}

void gemm_bf16(Context& ctx, const void* a, const void* b, void* c, std::int64_t m, std::int64_t n,
               std::int64_t k, bool accumulate, void* stream) {
  // Row-major C = A B is column-major C^T = B^T A^T: B's buffer is an n x k column-major
  // matrix, A's a k x m one, C's an n x m one. No transposes needed.
  auto& I = ctx.impl();
  auto alignment = [](const void* p) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    std::uint32_t al = 256;
    while (al > 1 && a % al != 0) al /= 2;
    return al;
  };
  const std::uint32_t al_a = alignment(b), al_b = alignment(a), al_c = alignment(c);
  const auto key = std::make_tuple(m, n, k, al_a, al_b, al_c);
  auto it = I.plans.find(key);
  if (it == I.plans.end()) {
    LtPlan p;
    TPO_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    TPO_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.la, CUDA_R_16BF, n, k, n));
    TPO_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.lb, CUDA_R_16BF, k, m, k));
    TPO_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.lc, CUDA_R_16BF, n, m, n));
    cublasLtMatmulPreference_t pref = nullptr;
    TPO_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    std::size_t ws = I.workspace.bytes();
    TPO_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    // Lt's A is our b, its B our a (see above).
    TPO_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a)));
    TPO_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b)));
    TPO_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof(al_c)));
    TPO_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof(al_c)));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(I.lt, p.op, p.la, p.lb, p.lc, p.lc,
                                                             pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (hs == CUBLAS_STATUS_SUCCESS && found > 0) {
      p.algo = result.algo;
      p.has_algo = true;
    }
    it = I.plans.emplace(key, p).first;
  }
  const LtPlan& p = it->second;
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  TPO_CUBLAS_CHECK(cublasLtMatmul(I.lt, p.op, &alpha, b, p.la, a, p.lb, &beta, c, p.lc, c, p.lc,
                                  p.has_algo ? &p.algo : nullptr, I.workspace.get(),
                                  I.workspace.bytes(), S(stream)));
}

namespace {
// Keys per score row, padded to 8 so every row starts 16-byte aligned (an odd number of keys
// would put cuBLAS on a slow path).
std::int64_t padded_keys(const AttentionShape& s) {
  return (s.prefix + s.q_tokens + 7) / 8 * 8;
}
std::size_t round256(std::size_t b) {
  return (b + 255) / 256 * 256;
}
}  // namespace

std::size_t attention_scratch_bytes(const AttentionShape& s) {
  const std::size_t batch = std::size_t(s.requests * s.q_heads);
  const std::size_t per_head = std::size_t(s.q_tokens * padded_keys(s));
  return round256(6 * batch * sizeof(void*)) + round256(batch * per_head * sizeof(float)) +
         batch * per_head * sizeof(bf16);
}

// All requests and heads in four launches: a kernel that fills the pointer arrays, the scores
// S = Q K^T as one batched GEMM (fp32 out), a masked softmax, and O = P V as one batched GEMM.
void attention_bf16(Context& ctx, const void* q, const void* k, const void* v, void* out,
                    void* scratch, const AttentionShape& s, void* stream) {
  auto& I = ctx.impl();
  TPO_CUBLAS_CHECK(cublasSetStream(I.blas, S(stream)));
  const int nq = int(s.q_tokens), kv = int(s.prefix + s.q_tokens), d = int(s.head_dim);
  const int ld = int(padded_keys(s));
  const int batch = int(s.requests * s.q_heads);
  if (batch > 65535) {
    throw std::runtime_error("attention_bf16: " + std::to_string(batch) +
                             " (request, head) pairs in one call; at most 65535");
  }
  const std::size_t per_head = std::size_t(nq) * std::size_t(ld);
  char* base = static_cast<char*>(scratch);
  const std::size_t ptr_bytes = round256(6 * std::size_t(batch) * sizeof(void*));
  void** ptrs = reinterpret_cast<void**>(base);
  float* scores = reinterpret_cast<float*>(base + ptr_bytes);
  bf16* probs = reinterpret_cast<bf16*>(base + ptr_bytes +
                                        round256(std::size_t(batch) * per_head * sizeof(float)));
  AttnPtrs P{const_cast<const void**>(ptrs),
             const_cast<const void**>(ptrs + batch),
             ptrs + 2 * batch,
             const_cast<const void**>(ptrs + 3 * batch),
             const_cast<const void**>(ptrs + 4 * batch),
             ptrs + 5 * batch};
  const int ldq = int(s.q_heads) * d, ldk = int(s.kv_heads) * d;
  attention_ptrs_kernel<<<(batch + 127) / 128, 128, 0, S(stream)>>>(
      P, static_cast<const bf16*>(q), static_cast<const bf16*>(k), static_cast<const bf16*>(v),
      static_cast<bf16*>(out), scores, probs, batch, int(s.q_heads), int(s.q_heads / s.kv_heads), d,
      (long long)nq * ldq, (long long)s.kv_capacity * ldk, (long long)per_head);
  TPO_CUDA_CHECK(cudaGetLastError());
  const float scale = 1.0f / std::sqrt(float(d)), one = 1.0f, zero = 0.0f;
  // Column-major view: S_b^T (kv x nq, ld) = K_g^T' (K stored d x kv, ld ldk, transposed)
  // times Q_h (d x nq, ld ldq).
  TPO_CUBLAS_CHECK(cublasGemmBatchedEx(
      I.blas, CUBLAS_OP_T, CUBLAS_OP_N, kv, nq, d, &scale, P.k, CUDA_R_16BF, ldk, P.q, CUDA_R_16BF,
      ldq, &zero, P.s, CUDA_R_32F, ld, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  masked_softmax_kernel<<<dim3(unsigned(nq), unsigned(batch)), 256, 0, S(stream)>>>(
      scores, probs, nq, ld, int(s.prefix));
  TPO_CUDA_CHECK(cudaGetLastError());
  // O_h^T (d x nq, ld ldq) = V_g (d x kv, ld ldk) P_b^T (kv x nq, ld ld).
  TPO_CUBLAS_CHECK(cublasGemmBatchedEx(
      I.blas, CUBLAS_OP_N, CUBLAS_OP_N, d, nq, kv, &one, P.v, CUDA_R_16BF, ldk, P.p, CUDA_R_16BF,
      ld, &zero, P.o, CUDA_R_16BF, ldq, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void spin(void* stream, double microseconds) {
  if (microseconds <= 0) return;
  spin_kernel<<<1, 1, 0, S(stream)>>>((unsigned long long)(microseconds * 1e3));
  TPO_CUDA_CHECK(cudaGetLastError());
}

void rmsnorm_bf16(const void* x, const void* w, void* y, std::int64_t rows, std::int64_t cols,
                  float eps, void* stream) {
  if (rows == 0) return;
  if (cols % 8 == 0 && aligned16(x) && aligned16(w) && aligned16(y)) {
    rmsnorm_kernel<true><<<unsigned(rows), 256, 0, S(stream)>>>(
        static_cast<const bf16*>(x), static_cast<const bf16*>(w), static_cast<bf16*>(y), cols, eps);
  } else {
    rmsnorm_kernel<false><<<unsigned(rows), 256, 0, S(stream)>>>(
        static_cast<const bf16*>(x), static_cast<const bf16*>(w), static_cast<bf16*>(y), cols, eps);
  }
  TPO_CUDA_CHECK(cudaGetLastError());
}

void silu_mul_bf16(const void* gate_up, void* out, std::int64_t rows, std::int64_t ffn,
                   void* stream) {
  const std::size_t n = std::size_t(rows) * ffn;
  if (n == 0) return;
  const bool vec = ffn % 8 == 0 && aligned16(gate_up) && aligned16(out);
  const std::int64_t per_row = vec ? ffn / 8 : ffn;
  const dim3 grid(unsigned((per_row + 255) / 256), unsigned(std::min<std::int64_t>(rows, 65535)));
  if (vec) {
    silu_mul_kernel<true><<<grid, 256, 0, S(stream)>>>(static_cast<const bf16*>(gate_up),
                                                       static_cast<bf16*>(out), rows, ffn);
  } else {
    silu_mul_kernel<false><<<grid, 256, 0, S(stream)>>>(static_cast<const bf16*>(gate_up),
                                                        static_cast<bf16*>(out), rows, ffn);
  }
  TPO_CUDA_CHECK(cudaGetLastError());
}

void add_bf16(void* acc, const void* x, std::int64_t n, void* stream) {
  if (n == 0) return;
  if (n % 8 == 0 && aligned16(acc) && aligned16(x)) {
    add_kernel<true><<<blocks_for(std::size_t(n) / 8, 256), 256, 0, S(stream)>>>(
        static_cast<bf16*>(acc), static_cast<const bf16*>(x), std::size_t(n) / 8);
  } else {
    add_kernel<false><<<blocks_for(std::size_t(n), 256), 256, 0, S(stream)>>>(
        static_cast<bf16*>(acc), static_cast<const bf16*>(x), std::size_t(n));
  }
  TPO_CUDA_CHECK(cudaGetLastError());
}

void copy_on_ctas(const void* src, void* dst, std::size_t bytes, int ctas, void* stream) {
  const std::size_t n16 = bytes / 16, tail = bytes % 16;
  copy_kernel<<<std::max(1, ctas), 512, 0, S(stream)>>>(
      static_cast<const int4*>(src), static_cast<int4*>(dst), n16,
      static_cast<const char*>(src) + n16 * 16, static_cast<char*>(dst) + n16 * 16, tail);
  TPO_CUDA_CHECK(cudaGetLastError());
}

#if TPO_WITH_NCCL
struct NcclGroup::Impl {
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::vector<int> devices;  // of each local rank
};

namespace {
cudaStream_t high_priority_stream(int device) {
  TPO_CUDA_CHECK(cudaSetDevice(device));
  int least = 0, greatest = 0;
  TPO_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t s;
  TPO_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest));
  return s;
}
}  // namespace

std::vector<char> nccl_unique_id() {
  ncclUniqueId id;
  TPO_NCCL_CHECK(ncclGetUniqueId(&id));
  return std::vector<char>(id.internal, id.internal + sizeof(id.internal));
}

NcclGroup::NcclGroup(int rank, int nranks, const std::vector<char>& unique_id, int device)
    : impl_(std::make_unique<Impl>()) {
  ncclUniqueId id;
  if (unique_id.size() != sizeof(id.internal)) {
    throw std::runtime_error("NCCL unique id of " + std::to_string(unique_id.size()) +
                             " bytes; expected " + std::to_string(sizeof(id.internal)));
  }
  std::copy(unique_id.begin(), unique_id.end(), id.internal);
  int previous = 0;
  TPO_CUDA_CHECK(cudaGetDevice(&previous));
  TPO_CUDA_CHECK(cudaSetDevice(device));
  ncclComm_t comm;
  TPO_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
  impl_->comms.push_back(comm);
  impl_->streams.push_back(high_priority_stream(device));
  impl_->devices.push_back(device);
  TPO_CUDA_CHECK(cudaSetDevice(previous));
}

NcclGroup::NcclGroup(int ranks) : impl_(std::make_unique<Impl>()) {
  int previous = 0;
  TPO_CUDA_CHECK(cudaGetDevice(&previous));
  std::string why;
  const int n = device_count(&why);
  if (n < ranks) {
    throw std::runtime_error("NCCL group of " + std::to_string(ranks) + " ranks needs " +
                             std::to_string(ranks) + " GPUs; this machine has " +
                             std::to_string(n));
  }
  impl_->comms.resize(std::size_t(ranks));
  std::vector<int> devs(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) devs[std::size_t(r)] = r;
  TPO_NCCL_CHECK(ncclCommInitAll(impl_->comms.data(), ranks, devs.data()));
  for (int r = 0; r < ranks; ++r) {
    impl_->streams.push_back(high_priority_stream(r));
    impl_->devices.push_back(r);
  }
  TPO_CUDA_CHECK(cudaSetDevice(previous));  // leave the caller's device current
}

NcclGroup::~NcclGroup() {
  for (auto c : impl_->comms) ncclCommDestroy(c);
  for (auto s : impl_->streams) cudaStreamDestroy(s);
}

int NcclGroup::ranks() const {
  return int(impl_->comms.size());
}
void* NcclGroup::stream(int rank) const {
  return impl_->streams[std::size_t(rank)];
}

void NcclGroup::allreduce_bf16(const std::vector<void*>& bufs, std::size_t count) {
  allreduce_bf16_on(bufs, count, std::vector<void*>(impl_->streams.begin(), impl_->streams.end()));
}

void NcclGroup::allreduce_bf16_on(const std::vector<void*>& bufs, std::size_t count,
                                  const std::vector<void*>& streams) {
  if (bufs.size() != impl_->comms.size() || streams.size() != impl_->comms.size()) {
    throw std::runtime_error("NCCL all-reduce: " + std::to_string(bufs.size()) + " buffers and " +
                             std::to_string(streams.size()) + " streams for " +
                             std::to_string(impl_->comms.size()) + " ranks");
  }
  TPO_NCCL_CHECK(ncclGroupStart());
  for (std::size_t r = 0; r < impl_->comms.size(); ++r) {
    TPO_NCCL_CHECK(ncclAllReduce(bufs[r], bufs[r], count, ncclBfloat16, ncclSum, impl_->comms[r],
                                 S(streams[r])));
  }
  TPO_NCCL_CHECK(ncclGroupEnd());
}

void NcclGroup::synchronize() const {
  int previous = 0;
  TPO_CUDA_CHECK(cudaGetDevice(&previous));
  for (std::size_t r = 0; r < impl_->streams.size(); ++r) {
    TPO_CUDA_CHECK(cudaSetDevice(impl_->devices[r]));
    TPO_CUDA_CHECK(cudaStreamSynchronize(impl_->streams[r]));
  }
  TPO_CUDA_CHECK(cudaSetDevice(previous));
}

#else  // built without NCCL
struct NcclGroup::Impl {};
std::vector<char> nccl_unique_id() {
  throw std::runtime_error("this build has no NCCL (configure where nccl.h and libnccl are found)");
}
NcclGroup::NcclGroup(int) {
  throw std::runtime_error("this build has no NCCL (configure where nccl.h and libnccl are found)");
}
NcclGroup::NcclGroup(int, int, const std::vector<char>&, int) {
  throw std::runtime_error("this build has no NCCL (configure where nccl.h and libnccl are found)");
}
NcclGroup::~NcclGroup() = default;
int NcclGroup::ranks() const {
  return 0;
}
void* NcclGroup::stream(int) const {
  return nullptr;
}
void NcclGroup::allreduce_bf16(const std::vector<void*>&, std::size_t) {}
void NcclGroup::allreduce_bf16_on(const std::vector<void*>&, std::size_t,
                                  const std::vector<void*>&) {}
void NcclGroup::synchronize() const {}
#endif

}  // namespace tpo::validate::cuda
