// What a profile measures: exactly the shapes the model's schedule graphs use under TP t —
// GEMMs for token counts on the alignment grid, attention for (chunk, prefix) pairs, norms
// and elementwise ops, all-reduce message sizes — plus interference pairs. A held-back set
// (sizes between grid points) is kept apart to check the profile model's accuracy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/workload.h"
#include "validate/kernels/attention_shape.h"

namespace tpo::profiler {

// Fragment: as ISO runs it, one chunk's attention (after a prefix of one chunk) and o_proj on
// the compute stream while the other chunk's all-reduce (the copy on P CTAs) starts at the
// same moment on the comm stream; the victim is the compute part.
enum class ItemKind {
  Gemm,
  Attention,
  Rowwise,
  AllReduce,
  GemmBesideComm,
  CommBesideGemm,
  Fragment
};
inline bool is_interference(ItemKind k) {
  return k == ItemKind::GemmBesideComm || k == ItemKind::CommBesideGemm || k == ItemKind::Fragment;
}

struct Item {
  ItemKind kind = ItemKind::Gemm;
  std::string key;   // unique and stable: names a finished measurement for resuming
  std::string name;  // qkv, o_proj, gate_up, down, attention, rmsnorm, silu_mul, ...
  std::int64_t m = 0, n = 0, k = 0;  // GEMM shape; rowwise rows (m) x cols (n)
  std::int64_t requests = 1, q_tokens = 0, prefix = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
  std::int64_t elements = 0, ranks = 1;  // all-reduce
  std::int64_t workers = 0;              // interference: comm workers (threads / CTAs)
  // CommBesideGemm: what the comm victim runs beside — "gemm" (m, n, k), "attention" (the
  // attention fields) or "rowwise" (an rmsnorm of m rows x n cols).
  std::string beside = "gemm";
  bool held_back = false;  // measured only to check the model's accuracy
  bool gelu = false;       // silu_mul of a GeGLU model (Gemma): the gate's activation is GELU's
  // qkv: the values its rotary kernel rotates per query and K head (0: no rotary kernel).
  std::int64_t rope_dim = 0;
  bool qk_norm = false;  // qkv: its per-head query and key norms first (Qwen3, Gemma-3)
  bool bias = false;     // a GEMM with the model's bias in its epilogue
  // Attention (and the comm beside it): the scores' scale and soft cap (AttentionShape's).
  float attn_scale = 0, attn_softcap = 0;
  // qkv: the values per row before K (the query heads), and of K (and of V) after them.
  std::int64_t q_width() const { return q_heads * head_dim; }
  std::int64_t kv_width() const { return kv_heads * head_dim; }
};

// A GEMM item of that shape alone (no qkv epilogue).
inline Item gemm_item(std::int64_t m, std::int64_t n, std::int64_t k) {
  Item it;
  it.m = m;
  it.n = n;
  it.k = k;
  return it;
}

struct SweepOptions {
  std::int64_t max_tokens = 2048;                // largest chunk (rows) measured
  std::int64_t align = 64;                       // the planner's grid
  bool quick = false;                            // fewer sizes
  bool accuracy = false;                         // add the held-back set
  std::vector<std::int64_t> comm_workers = {1};  // interference: comm workers to try
  // Interference: longer transfers (multiples of the mid chunk's all-reduce) measured beside
  // the GEMM at the middle worker count, so the slowdown is known against the duration.
  std::vector<std::int64_t> comm_lengths = {1};
  // Interference: besides the GEMM, the comm victim is measured beside these op kinds
  // ("attention", "rowwise") at the middle worker count, at 1x and 8x the mid message.
  std::vector<std::string> comm_beside_more;
  bool fragments = false;  // measure the in-schedule fragment at every worker count
  // GEMMs are also measured at every multiple of gemm_step rows up to gemm_dense_to (0: on the
  // grid only). The planner puts chunk boundaries on its align grid, and a library's kernel
  // choice makes a GEMM's time a step function of its rows that interpolating between the
  // grid's points misses: on the H200 (cuBLASLt, results/h200/calibration), GEMMs at 1408,
  // 1664 and 2688 rows ran 9-11% over the interpolation, where other rows off the grid ran
  // within 3%.
  std::int64_t gemm_step = 0;
  std::int64_t gemm_dense_to = 4096;
  // Rows below the grid measured for GEMMs and row-wise ops (not held back): decode batches,
  // one token per request. Without them a decode step's GEMMs and norms are extrapolated from
  // the grid's smallest size by the analytical model's ratio, which for thin GEMMs (split-K)
  // and one-row norms is the least certain part of that model (results/independent).
  std::vector<std::int64_t> decode_rows;
};

// The attention call an attention item measures (a KV cache just large enough).
validate::AttentionShape attention_shape(const Item& it);

std::vector<Item> make_sweep(const sim::ModelConfig& m, const sim::ShardDims& d, std::int64_t tp,
                             const SweepOptions& o);

// Token counts measured: powers of two from `align` up to max_tokens (quick) plus, in full
// mode, the midpoints 1.5 x 2^i on the grid.
std::vector<std::int64_t> token_grid(const SweepOptions& o);
// The rows GEMMs are measured at: the token grid and, with gemm_step, every multiple of it up
// to min(gemm_dense_to, max_tokens).
std::vector<std::int64_t> gemm_rows(const SweepOptions& o);

}  // namespace tpo::profiler
