// The one op interpreter of the runtimes. Strategies are not re-implemented here or in any
// runtime: each op is interpreted from its code, layer, module and the token block it covers —
// which kernel runs on which rows, reading and writing which activations. A backend only
// implements RankKernels over one rank's buffers (host fp32 on the CPU, device bf16 on a GPU).
#pragma once

#include <cstdint>

#include "sim/schedule.h"
#include "validate/kernels/model_data.h"

namespace tpo::validate {

// The weight a GEMM multiplies by, which fixes what it reads and writes:
// Qkv: normed -> qkv; O: attn -> out[module]; GateUp: normed -> gate_up; Down: act -> out[module].
enum class Weight : std::uint8_t { Qkv, O, GateUp, Down };

// The kernels over one rank's activations ([tokens][width] matrices: x, normed, qkv, attn,
// gate_up, act, and out[module] per module) and its per-layer KV caches. Rows are token rows
// in the run's RowLayout (model_data.h).
class RankKernels {
 public:
  virtual ~RankKernels() = default;
  // normed[rows] = rmsnorm(x[rows]) with the layer's attention (or MLP) norm weight.
  virtual void rmsnorm(std::int64_t layer, bool mlp, std::int64_t row, std::int64_t len) = 0;
  // With `bias`, the weight's bias is added too (the GEMM's epilogue) where this rank holds one:
  // a column-parallel shard's on every rank, a row-parallel GEMM's on rank 0 only.
  virtual void gemm(Weight w, std::int64_t layer, std::int64_t module, std::int64_t row,
                    std::int64_t len, bool accumulate, bool bias) = 0;
  // Per-head RMSNorm in place on the query heads, then the K heads, of `rows` qkv rows from
  // `row` (the layer's q_norm and k_norm weights): two kernels.
  virtual void qk_norm(std::int64_t layer, std::int64_t row, std::int64_t rows) = 0;
  // Rotary embeddings in place on the query and K heads of `len` qkv rows from `row` — one
  // request's, positions from `pos` — or of `requests` consecutive requests as store_kv: one
  // kernel.
  virtual void rope(std::int64_t row, std::int64_t len, std::int64_t pos,
                    std::int64_t requests) = 0;
  // K and V of `len` qkv rows from `row` — one request's, positions from `pos` — into the
  // layer's cache; with `requests` > 1, as many consecutive requests from `request`, `len`
  // rows each (contiguous from `row`) at the same positions: one kernel.
  virtual void store_kv(std::int64_t layer, std::int64_t row, std::int64_t len,
                        std::int64_t request, std::int64_t pos, std::int64_t requests) = 0;
  // Causal attention of `requests` consecutive requests from `request`, `len` new tokens each
  // at positions from `pos` (after the prefix in the cache), query rows contiguous from `row`.
  virtual void attention(std::int64_t layer, std::int64_t request, std::int64_t requests,
                         std::int64_t row, std::int64_t len, std::int64_t pos) = 0;
  // act[rows] = act(gate) * up of gate_up[rows] (SwiGLU or GeGLU).
  virtual void gated_act(std::int64_t row, std::int64_t len) = 0;
  // x[rows] += out[module][rows]; with `post_norm` (Gemma) out[module][rows] is first
  // normalized in place with layer `layer`'s post-attention (1) or post-MLP (2) norm weight;
  // with `norm_after`, in the same kernel as the add, normed[rows] = rmsnorm(x[rows]) with layer
  // `norm_layer`'s attention (1) or MLP (2) norm weight, or the final norm's (3: the last
  // module's adds with --embed-head): the fused add and norm.
  virtual void residual_add(std::int64_t module, std::int64_t row, std::int64_t len,
                            std::int64_t layer, int post_norm, std::int64_t norm_layer,
                            int norm_after) = 0;
  // out[module][rows] summed over the TP ranks (module < 0: x[rows], the embedding's rows);
  // returns when every rank had arrived (steady_clock ns since its epoch), or 0 where that is
  // not known.
  virtual std::int64_t allreduce(std::int64_t module, std::int64_t row, std::int64_t len) = 0;
  // x[rows] = the embedding rows of the tokens at those rows that this rank's vocabulary slice
  // holds, zeros for the others (--embed-head).
  virtual void embed(std::int64_t row, std::int64_t len) = 0;
  // normed[rows] = rmsnorm(x[rows]) with the final norm's weight, on the requests' last rows
  // (the rows the LM head reads): one kernel.
  virtual void final_norm(const HeadRows& rows) = 0;
  // This rank's logits slice of the requests' last rows: normed[rows] x its LM-head columns,
  // into its slice of the [slice][batch][vocab] logits buffer. One GEMM.
  virtual void lm_head(const HeadRows& rows) = 0;
  // The ranks' logits slices gathered into every rank's buffer (an all-gather); returns as
  // allreduce does.
  virtual std::int64_t gather_logits() = 0;
};

// Runs `op` on one rank through `k`. Returns a collective's arrival time (see
// RankKernels::allreduce), else 0. Throws std::logic_error for an op code it does not know.
std::int64_t interpret(const ModelData& m, const RowLayout& l, const sim::Op& op, RankKernels& k);

// The residual add an op runs, over its rows: a ResidualAdd's, or what an all-reduce's kernel
// also runs after the sum (op.residual_of >= 0 on an AllReduce, --allreduce-fusion add-norm:
// interpret calls it after k.allreduce; the CUDA runtime, which sums every rank at once, after
// its collective). Nothing for an op without one.
void interpret_add(const ModelData& m, const RowLayout& l, const sim::Op& op, RankKernels& k);

}  // namespace tpo::validate
