// The data a validation run computes on — per rank and layer the weight shard, the input
// residual stream, the cached KV of the prefix — generated from one seed, so the CPU runtime,
// the CUDA runtime and the reference forward all compute on identical numbers.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/schedule.h"
#include "sim/workload.h"
#include "validate/kernels/attention_shape.h"

namespace tpo::validate {

struct LayerWeights {
  std::vector<float> attn_norm, wqkv, wo, mlp_norm, wgu, wd;
  std::vector<float> q_norm, k_norm;  // per-head norm weights (head_dim) where the model has them
  // Gemma's post-norm weights (hidden; the same on every rank) where the model has them.
  std::vector<float> post_attn_norm, post_mlp_norm;
  // Biases where the model has them: qkv's and gate_up's this rank's shard; o_proj's and down's
  // (row-parallel, added once before the all-reduce) on rank 0 only, empty elsewhere.
  std::vector<float> bqkv, bo, bgu, bd;
};

struct ModelData {
  sim::ShardDims d;
  bool gelu = false;       // GeGLU MLP (Gemma) instead of SwiGLU
  float eps = 1e-5f;       // every RMSNorm's epsilon (the model's rms_norm_eps)
  std::string model_file;  // the model config, for messages
  std::int64_t tp = 1, layers = 0, batch = 1, seq = 1, context = 0, cap = 0, tokens = 0;
  // Per layer: the sliding window its attention uses (0: full attention), as the simulator
  // builds it (set only where prompt + context reach past it).
  std::vector<std::int64_t> window;
  // Rotary embeddings (workload rope): the values rotated per head (0: none run) and each
  // position's cosines and sines, [cap][rotary_dim] (cpu::rope_table).
  std::int64_t rotary_dim = 0;
  std::vector<float> rope_table;
  // The attention scores' scale (0: 1 / sqrt(head_dim)) and soft cap (0: none), as
  // AttentionShape takes them (Gemma's query_pre_attn_scalar, Gemma-2's
  // attn_logit_softcapping).
  float attn_scale = 0, attn_softcap = 0;
  bool qk_norm = false;     // per-head query and key norms before the rotation (Qwen3, Gemma-3)
  bool post_norms = false;  // a norm on each module's reduced output before its add (Gemma)
  std::vector<std::vector<LayerWeights>> w;  // [rank][layer], ranks generated
  std::vector<float> x0;                     // [tokens][hidden]
  // The embedding and LM head (--embed-head): the run starts from token ids instead of x0
  // and ends with the logits of each request's last position. Sharded (vocab-parallel, as
  // vLLM runs them): rank r holds vocabulary rows [r x vocab, (r + 1) x vocab) of the
  // embedding table and the same columns of the LM head; replicated: every rank the whole
  // table (the same values), no collective. An untied LM head either way (a tied one, as
  // Gemma's, reads the embedding table transposed: the same work).
  bool head = false;
  std::int64_t vocab = 0;         // vocabulary rows per rank (d.vocab, padded as the graph's)
  std::int64_t vocab_slices = 1;  // TP when sharded, 1 when replicated
  std::vector<std::int32_t> ids;  // [tokens], request-major, in [0, the model's vocabulary)
  std::vector<std::vector<float>> embed, lm_head;       // [rank]: [vocab][hidden], [hidden][vocab]
  std::vector<float> final_norm;                        // [hidden], replicated
  std::vector<std::vector<std::vector<float>>> k0, v0;  // [rank][layer][batch][cap][kv][d]
};

// Where each token's row lives in a run's [tokens][...] activation matrices: chunk by chunk
// (the schedule's chunk_tokens), and within a chunk request by request: row = batch x chunk
// start + request x chunk length + position in the chunk, positions counted from the
// context. With one chunk that is request-major (request x seq + position). So a chunk's
// rows over every request are one block, as a serving engine packs a batch and as the
// simulator counts one kernel (and one all-reduce) per chunk op.
struct RowLayout {
  std::int64_t batch = 1, seq = 1;
  std::vector<std::int64_t> starts;  // chunk starts (from the context), then seq
  std::int64_t row(std::int64_t request, std::int64_t pos) const;  // pos: from the context
};
RowLayout row_layout(const ModelData& m, const sim::Schedule& s);
// Request-major rows of `width` values into the layout's order, and back.
std::vector<float> to_layout(const RowLayout& l, const std::vector<float>& x, std::int64_t width);
std::vector<float> from_layout(const RowLayout& l, const std::vector<float>& x, std::int64_t width);

// The rows an op covers, as contiguous blocks of `requests` consecutive requests from
// `request`, len / requests rows each at positions from `pos` (absolute): one block when the
// op's positions are one chunk of the layout (or the whole sequence), else one per request
// and chunk.
struct RowBlock {
  std::int64_t row, len, request, pos;  // first row, rows in all, first request, first position
  std::int64_t requests = 1;
  std::int64_t per_request() const { return len / requests; }
};
std::vector<RowBlock> row_blocks(const RowLayout& l, std::int64_t context, const sim::Op& op);

// Attention for `len` new tokens of one request starting at position `pos` in layer `layer`,
// with the model's shard heads, KV cache capacity and the layer's sliding window.
AttentionShape chunk_attention(const ModelData& m, std::int64_t layer, std::int64_t len,
                               std::int64_t pos);

// The rows the LM head reads (each request's last position, `requests` of them from
// `request`): the first, and the step between consecutive requests' rows (they sit in the
// last chunk, one chunk length apart).
struct HeadRows {
  std::int64_t row = 0, stride = 1, request = 0, requests = 1;
};
HeadRows head_rows(const RowLayout& l, const sim::Op& op);

// The token ids in the layout's row order (--embed-head), as both runtimes' embedding reads them.
std::vector<std::int32_t> ids_in_layout(const ModelData& m, const RowLayout& l);
// TP rank `rank`'s vocabulary slice: its place in the logits buffer (0 when replicated), and
// the first vocabulary row its embedding table holds.
inline std::int64_t vocab_slice(const ModelData& m, std::int64_t rank) {
  return m.vocab_slices > 1 ? rank : 0;
}
inline std::int64_t vocab_first(const ModelData& m, std::int64_t rank) {
  return vocab_slice(m, rank) * m.vocab;
}

// The run's output: the final residual stream ([batch][seq][hidden], request-major), then with
// the LM head the logits ([batch][vocab_slices x vocab]) from a run's [slice][batch][vocab]
// buffer (what an all-gather of the slices leaves).
std::vector<float> run_output(const ModelData& m, std::vector<float> x,
                              const std::vector<float>& logits);

// `ranks`: how many ranks' shards to generate (0: all TP ranks; 1 for a one-GPU run).
// `only_rank` >= 0: that rank's shard alone (the others' entries left empty), for a process
// that runs one rank (--mpi).
ModelData make_data(const sim::Workload& w, std::uint64_t seed, std::int64_t ranks = 0,
                    std::int64_t only_rank = -1);

// The same, kept for the next caller asking for the same data (one entry): a validation
// case, its `none` run and the reference forward share one generation, which on a full-size
// shard is seconds of host work.
std::shared_ptr<const ModelData> shared_data(const sim::Workload& w, std::uint64_t seed,
                                             std::int64_t ranks = 0, std::int64_t only_rank = -1);

}  // namespace tpo::validate
