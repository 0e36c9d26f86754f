// Attention with a KV prefix and GQA: pointer arrays, two batched cuBLAS GEMMs around a
// masked softmax. The fallback and the comparison for cuDNN's fused attention
// (cuda_attention_cudnn.cc), chosen with --attention cublas.
#include <cstdio>

#include "validate/kernels/cuda_common.cuh"

namespace tpo::validate::cuda {

namespace {

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
                                      int group, int d, long long q_request, long long o_request,
                                      long long kv_request, long long per_head) {
  const int b = blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= batch) return;
  const int r = b / q_heads, h = b % q_heads, g = h / group;
  a.k[b] = k + r * kv_request + std::size_t(g) * d;
  a.v[b] = v + r * kv_request + std::size_t(g) * d;
  a.q[b] = q + r * q_request + std::size_t(h) * d;
  a.o[b] = out + r * o_request + std::size_t(h) * d;
  a.s[b] = scores + b * per_head;
  a.p[b] = probs + b * per_head;
}

// One block per (query row, request x head): softmax over the keys the row may see, zeros
// elsewhere, up to the padded row length ld. Score column j is key first + j; the row sees
// keys up to prefix + row, and with a window > 0 only the last `window` of them. Scores are
// [request x head][q][ld] fp32, capped in place first where cap > 0 (cap x tanh(score / cap),
// Gemma-2's soft cap); probabilities the same layout in bf16.
__global__ void masked_softmax_kernel(float* s, bf16* p, int q, int ld, int prefix, int first,
                                      int window, float cap) {
  const int row = blockIdx.x, h = blockIdx.y;
  float* sr = s + (std::size_t(h) * q + row) * ld;
  bf16* pr = p + (std::size_t(h) * q + row) * ld;
  const int last = prefix + row;  // the row's own position
  const int lo = (window > 0 && last + 1 > window ? last + 1 - window : 0) - first;
  const int hi = last + 1 - first;
  // Each thread caps its own columns, which the max and sum loops read back; the last loop reads
  // other threads' columns, after the barriers in block_max and block_sum.
  if (cap > 0) {
    for (int j = lo + threadIdx.x; j < hi; j += blockDim.x) sr[j] = cap * tanhf(sr[j] / cap);
  }
  float mx = -INFINITY;
  for (int j = lo + threadIdx.x; j < hi; j += blockDim.x) mx = fmaxf(mx, sr[j]);
  mx = block_max(mx);
  float sum = 0;
  for (int j = lo + threadIdx.x; j < hi; j += blockDim.x) sum += __expf(sr[j] - mx);
  sum = block_sum(sum);
  const float inv = 1.0f / sum;
  for (int j = threadIdx.x; j < ld; j += blockDim.x) {
    pr[j] = __float2bfloat16(j >= lo && j < hi ? __expf(sr[j] - mx) * inv : 0.0f);
  }
}

}  // namespace

namespace {
// Keys per score row, padded to 8 so every row starts 16-byte aligned (an odd number of keys
// would put cuBLAS on a slow path): from the first key any query sees (with a sliding window,
// the first query's window start) to the last query's own.
std::int64_t padded_keys(const AttentionShape& s) {
  return (s.prefix + s.q_tokens - s.first_key(0) + 7) / 8 * 8;
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

bool use_fused_attention(const std::string& option) {
  if (option == "cublas") return false;
  std::string why;
  const bool ok = fused_attention_available(&why);
  if (option == "cudnn") {
    if (!ok) {
      throw std::runtime_error("--attention cudnn: cuDNN's fused attention cannot run here (" +
                               why + "); use --attention cublas");
    }
    return true;
  }
  if (option != "auto") {
    throw std::invalid_argument("--attention " + option + ": must be auto, cudnn or cublas");
  }
  if (!ok && fused_attention_built()) {
    // Built with cuDNN but it cannot run here: say so (reports record the kernel that ran).
    std::fprintf(stderr,
                 "tpo: --attention auto: cuDNN's fused attention cannot run here (%s); "
                 "using the cuBLAS attention\n",
                 why.c_str());
  }
  return ok;
}

const char* attention_kernel_name(bool fused) {
  return fused ? "cudnn-sdpa" : "cublas-batched";
}

// All requests and heads in four launches: a kernel that fills the pointer arrays, the scores
// S = Q K^T as one batched GEMM (fp32 out), a masked softmax, and O = P V as one batched GEMM.
void attention_bf16(Context& ctx, const void* q, const void* k, const void* v, void* out,
                    void* scratch, const AttentionShape& s, void* stream) {
  auto& I = ctx.impl();
  TPO_CUBLAS_CHECK(cublasSetStream(I.blas, S(stream)));
  // cublasSetStream puts the handle back on cuBLAS's own workspace pool, which it may allocate
  // from while a CUDA graph is being captured (--exec graph): give it the context's workspace
  // instead, the one the cuBLASLt GEMMs use (every call on it is on the same compute stream).
  TPO_CUBLAS_CHECK(cublasSetWorkspace(I.blas, I.workspace.get(), I.workspace.bytes()));
  // Keys first .. prefix + q - 1: with a sliding window, those before the first query's window
  // are left out of both GEMMs.
  const int first = int(s.first_key(0));
  const int nq = int(s.q_tokens), kv = int(s.prefix + s.q_tokens) - first, d = int(s.head_dim);
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
  // Q rows q_stride() apart (in place in the qkv rows, or packed); the output packed.
  const int ldq = int(s.q_stride()), ldo = int(s.q_heads) * d, ldk = int(s.kv_heads) * d;
  attention_ptrs_kernel<<<(batch + 127) / 128, 128, 0, S(stream)>>>(
      P, static_cast<const bf16*>(q), static_cast<const bf16*>(k) + std::size_t(first) * ldk,
      static_cast<const bf16*>(v) + std::size_t(first) * ldk, static_cast<bf16*>(out), scores,
      probs, batch, int(s.q_heads), int(s.q_heads / s.kv_heads), d, (long long)nq * ldq,
      (long long)nq * ldo, (long long)s.kv_capacity * ldk, (long long)per_head);
  TPO_CUDA_CHECK(cudaGetLastError());
  const float scale = s.score_scale(), one = 1.0f, zero = 0.0f;
  // Column-major view: S_b^T (kv x nq, ld) = K_g^T' (K stored d x kv, ld ldk, transposed)
  // times Q_h (d x nq, ld ldq).
  TPO_CUBLAS_CHECK(cublasGemmBatchedEx(
      I.blas, CUBLAS_OP_T, CUBLAS_OP_N, kv, nq, d, &scale, P.k, CUDA_R_16BF, ldk, P.q, CUDA_R_16BF,
      ldq, &zero, P.s, CUDA_R_32F, ld, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  masked_softmax_kernel<<<dim3(unsigned(nq), unsigned(batch)), 256, 0, S(stream)>>>(
      scores, probs, nq, ld, int(s.prefix), first, int(s.window), s.softcap);
  TPO_CUDA_CHECK(cudaGetLastError());
  // O_h^T (d x nq, ld ldo) = V_g (d x kv, ld ldk) P_b^T (kv x nq, ld ld).
  TPO_CUBLAS_CHECK(cublasGemmBatchedEx(
      I.blas, CUBLAS_OP_N, CUBLAS_OP_N, d, nq, kv, &one, P.v, CUDA_R_16BF, ldk, P.p, CUDA_R_16BF,
      ld, &zero, P.o, CUDA_R_16BF, ldo, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace tpo::validate::cuda
