// GEMM through cuBLASLt, with a plan (descriptors and algorithm) made once per shape.
#include "validate/kernels/cuda_common.cuh"

namespace tpo::validate::cuda {

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

}  // namespace tpo::validate::cuda
