// GEMM through cuBLASLt, with a plan (descriptors and algorithm) made once per shape.
#include <cstdio>
#include <cstdlib>

#include "validate/kernels/cuda_common.cuh"

namespace tpo::validate::cuda {

namespace {

// cublasLtMatmulTile_t's names (cublasLt.h), by value.
const char* tile_name(std::uint32_t id) {
  static const char* const names[] = {
      "undefined", "8x8",    "8x16",   "16x8",   "8x32",    "16x16",   "32x8",    "8x64",
      "16x32",     "32x16",  "64x8",   "32x32",  "32x64",   "64x32",   "32x128",  "64x64",
      "128x32",    "64x128", "128x64", "64x256", "128x128", "256x64",  "64x512",  "128x256",
      "256x128",   "512x64", "64x96",  "96x64",  "96x128",  "128x160", "160x128", "192x128",
      "128x192",   "128x96", "32x256", "256x32", "8x128",   "8x192",   "8x256"};
  return id < sizeof(names) / sizeof(names[0]) ? names[id] : nullptr;
}

const char* reduction_name(std::uint32_t r) {
  switch (r) {
    case 0:
      return "none";
    case 1:
      return "in-place";
    case 2:
      return "compute-type";
    case 4:
      return "output-type";
    default:
      return "other";
  }
}

template <typename T>
T algo_attr(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  std::size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written) !=
      CUBLAS_STATUS_SUCCESS)
    return T{};
  return v;
}

std::string describe(const cublasLtMatmulAlgo_t& algo, float waves) {
  const auto tile = algo_attr<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID);
  const char* tn = tile_name(tile);
  const std::string tile_text = tn ? std::string(tn) : "id " + std::to_string(tile);
  // Stages, inner shape and cluster shape are cublasLt.h enum values (ids), not counts.
  char buf[320];
  std::snprintf(
      buf, sizeof(buf),
      "tile %s, stages id %u, split-K %d, reduction %s, swizzle %u, custom %u, inner shape id "
      "%u, cluster id %u, algo %d, waves %.2f",
      tile_text.c_str(), algo_attr<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID),
      algo_attr<std::int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
      reduction_name(algo_attr<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME)),
      algo_attr<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING),
      algo_attr<std::uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION),
      unsigned(algo_attr<std::uint16_t>(algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID)),
      unsigned(algo_attr<std::uint16_t>(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID)),
      algo_attr<std::int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID), double(waves));
  return buf;
}

std::uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t al = 256;
  while (al > 1 && a % al != 0) al /= 2;
  return al;
}

// The plan for C = A B with these operands, made on first use.
const LtPlan& plan_for(Context::Impl& I, const void* a, const void* b, const void* c,
                       std::int64_t m, std::int64_t n, std::int64_t k, bool bias = false,
                       std::int64_t lda = 0) {
  // Row-major C = A B is column-major C^T = B^T A^T: B's buffer is an n x k column-major
  // matrix, A's a k x m one (leading dimension lda), C's an n x m one. No transposes needed.
  const std::uint32_t al_a = alignment(b), al_b = alignment(a), al_c = alignment(c);
  const std::int64_t ld_a = lda > 0 ? lda : k;
  const auto key = std::make_tuple(m, n, k, al_a, al_b, al_c, bias, ld_a);
  auto it = I.plans.find(key);
  if (it != I.plans.end()) return it->second;
  LtPlan p;
  auto make_op = [&](bool epilogue) {
    if (p.op) cublasLtMatmulDescDestroy(p.op);
    p.op = nullptr;
    TPO_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    if (!epilogue) return;
    // One value per row of column-major C^T (an output feature), over every token.
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    TPO_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    const cudaDataType_t bt = CUDA_R_16BF;
    TPO_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
  };
  // $TPO_CUBLASLT_BIAS_APART (read when a plan is made): the bias always by the kernel apart,
  // for the GPU test of that path, or to rule the epilogue out when a result looks wrong.
  const bool force_apart = bias && std::getenv("TPO_CUBLASLT_BIAS_APART") != nullptr;
  p.bias_apart = force_apart;
  make_op(bias && !force_apart);
  TPO_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.la, CUDA_R_16BF, n, k, n));
  TPO_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.lb, CUDA_R_16BF, k, m, ld_a));
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
  auto heuristic = [&] {
    found = 0;
    return cublasLtMatmulAlgoGetHeuristic(I.lt, p.op, p.la, p.lb, p.lc, p.lc, pref, 1, &result,
                                          &found) == CUBLAS_STATUS_SUCCESS &&
           found > 0;
  };
  bool ok = heuristic();
  if (!ok && bias && !p.bias_apart) {
    // No algorithm with the bias epilogue (PyTorch does not ask cuBLASLt for one where an
    // operand has a dimension of 1, reporting an invalid-value heuristic there): the GEMM
    // without it, and the bias added by a kernel of its own.
    make_op(false);
    p.bias_apart = true;
    ok = heuristic();
  }
  cublasLtMatmulPreferenceDestroy(pref);
  if (ok) {
    p.algo = result.algo;
    p.has_algo = true;
    p.kernel = describe(result.algo, result.wavesCount);
  } else {
    p.kernel = "default";
  }
  if (bias) p.kernel += p.bias_apart ? ", bias by a kernel apart" : ", epilogue bias";
  return I.plans.emplace(key, p).first->second;
}

}  // namespace

void gemm_bf16(Context& ctx, const void* a, const void* b, void* c, std::int64_t m, std::int64_t n,
               std::int64_t k, bool accumulate, void* stream, const void* bias, std::int64_t lda) {
  auto& I = ctx.impl();
  const LtPlan& p = plan_for(I, a, b, c, m, n, k, bias != nullptr, lda);
  if (bias && !p.bias_apart) {  // the plan's descriptor is this context's, one host thread's
    TPO_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                    sizeof(bias)));
  }
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  TPO_CUBLAS_CHECK(cublasLtMatmul(I.lt, p.op, &alpha, b, p.la, a, p.lb, &beta, c, p.lc, c, p.lc,
                                  p.has_algo ? &p.algo : nullptr, I.workspace.get(),
                                  I.workspace.bytes(), S(stream)));
  if (bias && p.bias_apart) add_bias_rows_bf16(c, bias, m, n, stream);
}

std::string gemm_kernel(Context& ctx, const void* a, const void* b, const void* c, std::int64_t m,
                        std::int64_t n, std::int64_t k, bool bias) {
  return plan_for(ctx.impl(), a, b, c, m, n, k, bias).kernel;
}

std::vector<GemmPlanInfo> gemm_plans(Context& ctx) {
  std::vector<GemmPlanInfo> out;
  for (const auto& [key, plan] : ctx.impl().plans) {
    GemmPlanInfo g{std::get<0>(key), std::get<1>(key), std::get<2>(key), plan.kernel};
    if (!out.empty() && out.back().m == g.m && out.back().n == g.n && out.back().k == g.k &&
        out.back().kernel == g.kernel) {
      continue;  // the same shape and algorithm at other pointer alignments
    }
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace tpo::validate::cuda
