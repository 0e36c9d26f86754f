// The schedule graph: the one representation shared by the simulator, the planner and the
// validation runtime. Ops sit on a stream (compute or comm) of a rank; within a stream they
// run in the order they appear in `ops` (like CUDA streams); `deps` add cross-op edges.
// Builders emit one representative rank: TP ranks run identical graphs in lockstep, so the
// all-reduce is modelled by its cost on one rank. The runtime replicates the graph per rank.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <tuple>
#include <vector>

namespace tpo::sim {

enum class OpKind : std::uint8_t { Gemm, Attention, Norm, Elementwise, AllReduce };
enum class OpCode : std::uint8_t {
  Embed,         // embedding lookup (memory)
  AttnNorm,      // rmsnorm before attention
  Qkv,           // fused Q/K/V projection
  Attention,     // causal attention over the KV prefix and the new tokens
  OProj,         // attention output projection (row-parallel)
  MlpNorm,       // rmsnorm before the MLP
  GateUp,        // fused gate and up projection (column-parallel)
  SiluMul,       // silu(gate) * up
  Down,          // down projection (row-parallel)
  AllReduce,     // sum of the row-parallel partial outputs over the TP ranks
  ResidualAdd,   // residual += reduced module output
  FinalNorm,     // rmsnorm before the LM head
  LmHead,        // logits for the last token of each request (vocab-parallel)
  LogitsGather,  // the ranks' logit slices gathered (vLLM's LogitsProcessor: a gather or an
                 // all-gather), priced as an all-reduce of half the logits (the same bus bytes)
};
enum class StreamKind : std::uint8_t { Compute = 0, Comm = 1 };
constexpr int kStreamsPerRank = 2;

const char* op_kind_name(OpKind k);
const char* op_code_name(OpCode c);  // "qkv", "o_proj", "gate_up", "down", ...
OpKind op_code_kind(OpCode c);

// An op's dependencies: up to four inline (nearly every op has one or two), more on the heap.
// The planner builds many graphs; this keeps a graph to about one allocation per vector.
class DepList {
 public:
  DepList() = default;
  DepList(std::initializer_list<std::int32_t> l) {
    for (auto d : l) push_back(d);
  }
  DepList(const std::vector<std::int32_t>& v) {  // NOLINT: implicit on purpose
    for (auto d : v) push_back(d);
  }
  void push_back(std::int32_t d) {
    if (size_ < kInline) {
      inline_[size_] = d;
    } else {
      if (size_ == kInline) heap_.assign(inline_, inline_ + kInline);
      heap_.push_back(d);
    }
    ++size_;
  }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const std::int32_t* begin() const { return size_ <= kInline ? inline_ : heap_.data(); }
  const std::int32_t* end() const { return begin() + size_; }
  std::int32_t operator[](std::size_t i) const { return begin()[i]; }

 private:
  static constexpr std::size_t kInline = 4;
  std::int32_t inline_[kInline] = {};
  std::size_t size_ = 0;
  std::vector<std::int32_t> heap_;
};

struct Op {
  OpCode code = OpCode::Qkv;
  OpKind kind = OpKind::Gemm;
  StreamKind stream = StreamKind::Compute;
  std::int32_t rank = 0;
  std::int32_t layer = -1;   // -1 for embedding / LM head
  std::int32_t module = -1;  // global module index: each attention and each MLP is one module
                             // (a parallel block is one module per layer)
  std::int32_t chunk = 0;    // segment index: ISO chunk or micro-batch group
  std::int32_t piece = -1;   // gemm-split piece, -1 when not split
  // The data an op covers: requests [req_begin, req_end) x positions [seq_begin, seq_end).
  std::int64_t req_begin = 0, req_end = 0;
  std::int64_t seq_begin = 0, seq_end = 0;
  // GEMM: shape m x n x k (m = token rows). Attention: m = query tokens, n = local query
  // heads, k = head dim. Norms and elementwise ops: m = rows, n = width.
  std::int64_t m = 0, n = 0, k = 0;
  std::int32_t kv_heads = 0;  // attention: local KV heads
  // Attention: each query sees at most this many keys, itself included (a sliding-window
  // layer's window, set where the workload reaches past it); 0: every earlier position.
  std::int64_t window = 0;
  double flops = 0;
  double bytes = 0;  // bytes moved through HBM (all-reduce: message bytes per rank)
  // ResidualAdd: the module whose reduced output it adds. AllReduce with --allreduce-fusion
  // add-norm: its module, when its kernel also adds the reduced output to the residual (and runs
  // post_norm and norm_after as a ResidualAdd would); -1 otherwise.
  std::int32_t residual_of = -1;
  bool accumulate = false;  // GEMM adds into its output (parallel block's down projection)
  bool bias = false;        // GEMM adds a bias vector in its epilogue (Qwen2's qkv)
  // Qkv: elements per row of K (and of V) that the op also writes into the KV cache after its
  // GEMM (local KV heads x head dim; the runtime's store_kv, a serving engine's cache write).
  std::int64_t kv_width = 0;
  // Qkv: rotary embeddings applied in their own kernel between the GEMM and the KV-cache
  // write (vLLM's and SGLang's rotary_embedding), in place on the first rope_dim values of
  // rope_heads heads (local query and KV heads); 0: none run (--rope none).
  std::int32_t rope_dim = 0, rope_heads = 0;
  // Qkv: an RMSNorm over each query head, then each K head, before the rotary kernel: two
  // kernels (vLLM's q_norm and k_norm of Qwen3 and Gemma-3).
  bool qk_norm = false;
  // ResidualAdd: the RMSNorm it runs first on the module's reduced output, in a kernel of its
  // own (Gemma's post-norms): 1 the attention's weight, 2 the MLP's; 0 none.
  std::int8_t post_norm = 0;
  // ResidualAdd: the next module's RMSNorm fused into the add (vLLM's and SGLang's
  // fused_add_rms_norm, --add-norm fused): after the add the kernel also writes the normalized
  // residual with layer `norm_layer`'s attention (1) or MLP (2) norm weight, or the final norm's
  // (3, the last module's adds with --embed-head), and no norm op follows; 0 none.
  std::int8_t norm_after = 0;
  std::int32_t norm_layer = -1;
  DepList deps;

  // Attention: KV tokens before the op's first position (cached context + earlier chunks).
  std::int64_t kv_prefix() const { return seq_begin; }
  std::int64_t tokens() const { return (req_end - req_begin) * (seq_end - seq_begin); }
};

// Everything that sets an op's cost — its work and the stream and rank it runs on — without
// its place in the graph (layer, module, dependencies; residual_of only as whether an
// all-reduce also adds): two ops equal here cost the same under the analytical and the profile
// cost model, which read no more of those.
inline auto op_cost_key(const Op& o) {
  return std::make_tuple(o.code, o.kind, o.stream, o.rank, o.chunk, o.piece, o.req_begin, o.req_end,
                         o.seq_begin, o.seq_end, o.m, o.n, o.k, o.kv_heads, o.window, o.flops,
                         o.bytes, o.accumulate, o.bias, o.kv_width, o.rope_dim, o.rope_heads,
                         o.qk_norm, o.post_norm, o.norm_after,
                         o.kind == OpKind::AllReduce && o.residual_of >= 0);
}

struct Schedule {
  std::vector<Op> ops;
  std::int32_t num_ranks = 1;
  std::string strategy;
  bool preserves_function = true;
  std::vector<std::int64_t> chunk_tokens;  // token counts per chunk (per request)
  std::int32_t num_layers = 0;

  std::int32_t global_stream(const Op& op) const {
    return op.rank * kStreamsPerRank + static_cast<std::int32_t>(op.stream);
  }
  double total_flops() const;
};

// An op's work — shape fields, FLOPs and bytes moved — from its size: one set of formulas for
// the graph builder and for the profiler's analytical-vs-measured comparison.
// GEMM: c[m x n] (+)= a[m x k] b[k x n] (+ bias[n]) in bf16. A bias costs its m x n adds and
// reads its n values, fused in the epilogue (no extra pass over c).
void set_gemm_work(Op& op, std::int64_t m, std::int64_t n, std::int64_t k, bool accumulate,
                   bool bias = false);
// Norms and elementwise ops (by op.code) over `width` columns of `rows` rows.
void set_rowwise_work(Op& op, std::int64_t rows, std::int64_t width);
// Causal attention of `q` new tokens after `prefix` cached ones, per request; with a
// `window` (> 0), each query sees only the last `window` positions, itself included.
void set_attention_work(Op& op, std::int64_t requests, std::int64_t q, std::int64_t prefix,
                        std::int64_t q_heads, std::int64_t kv_heads, std::int64_t head_dim,
                        std::int64_t window = 0);
// (query, key) pairs per request and head of that attention: sum over its queries of the
// keys each sees.
double attention_pairs(std::int64_t q, std::int64_t prefix, std::int64_t window);
// An attention op's keys per query, on average (prefix + (q + 1) / 2 without a window), and
// the prefix a full causal attention of its queries would have for the same average: its own
// prefix where its window changes nothing, less where it does (never below 0). The profile
// model reads a windowed op off the full-attention curves there.
double attention_keys_per_query(const Op& op);
double attention_equivalent_prefix(const Op& op);
// The (query, key) pairs of the op's busiest block of `block` queries (per request and head):
// the blocks cut the chunk from its first query, and the last one or two, which see the most
// keys, are compared. A kernel with fewer blocks than SMs lasts as long as that block.
double attention_busiest_block_pairs(const Op& op, std::int64_t block);
// An all-reduce of `elements` bf16 values.
void set_allreduce_work(Op& op, std::int64_t elements);
// Bytes a qkv op's KV-cache write moves (op.kv_width: K and V of each of its op.m rows read
// from the GEMM's output and written to the cache, bf16); 0 for every other op.
inline double kv_store_bytes(const Op& op) {
  return op.code == OpCode::Qkv && op.kv_width > 0
             ? 2.0 * 2.0 * 2.0 * static_cast<double>(op.m) * static_cast<double>(op.kv_width)
             : 0.0;
}
// Bytes a qkv op's rotary kernel moves: its heads' rotated values read and written in place
// (bf16), and each row's cos and sin (rope_dim bf16 values, from a table by position, as vLLM
// keeps it); 0 for every other op.
inline double rope_bytes(const Op& op) {
  if (op.code != OpCode::Qkv || op.rope_dim <= 0) return 0.0;
  const double m = static_cast<double>(op.m), d = static_cast<double>(op.rope_dim);
  return 2.0 * 2.0 * m * static_cast<double>(op.rope_heads) * d + 2.0 * m * d;
}
// Bytes a qkv op's per-head norms move: every query and K value (op.n less the V width) read
// and written in bf16; 0 for every other op.
inline double qk_norm_bytes(const Op& op) {
  if (op.code != OpCode::Qkv || !op.qk_norm) return 0.0;
  return 2.0 * 2.0 * static_cast<double>(op.m) * static_cast<double>(op.n - op.kv_width);
}
// A residual add's post-norm (op.post_norm) as an op of its own: an rmsnorm of the same rows
// and width, which the cost models price and the contention model streams. Call only where
// op.post_norm is set.
Op post_norm_op(const Op& add);
// A residual add that runs the next norm after its add (op.norm_after) as the one kernel it is,
// priced as a norm (one block per row, so too few rows slow all its row bytes; and not an
// in-place update for the L2 rule: it writes the normalized rows elsewhere): the add's bytes,
// then the normalized rows written and the weight read, not the residual read again (the
// kernel reads the module output and the residual, and writes the residual and the normalized
// values: four passes for the two ops' five). Call only where op.norm_after is set.
Op fused_norm_op(const Op& add);
// The residual add (with its post-norm and next norm) an all-reduce's kernel also runs
// (op.residual_of >= 0 on an AllReduce, --allreduce-fusion add-norm), as a ResidualAdd op of the
// same rows and width.
Op allreduce_add_op(const Op& ar);
// Bytes an op's launch streams through HBM, the work its standalone time covers: op.bytes, plus
// a qkv op's per-head norms, rotary kernel and KV-cache write, and a residual add's fused next
// norm (in place of its own bytes) and post-norm. An all-reduce's op.bytes are its payload.
double hbm_bytes(const Op& op);
// The name of the norm a residual add runs after its add ("attn_norm", "mlp_norm"), for
// reports; nullptr where it runs none.
inline const char* norm_after_name(const Op& op) {
  if (op.norm_after == 0) return nullptr;
  return op_code_name(op.norm_after == 3   ? OpCode::FinalNorm
                      : op.norm_after == 2 ? OpCode::MlpNorm
                                           : OpCode::AttnNorm);
}
// Bytes of a norm's weight vector (op.n bf16 values), read once and shared by all its rows; 0 for
// every other op.
inline double norm_weight_bytes(const Op& op) {
  const bool norm =
      op.code == OpCode::AttnNorm || op.code == OpCode::MlpNorm || op.code == OpCode::FinalNorm;
  return norm ? 2.0 * static_cast<double>(op.n) : 0.0;
}
// The same op over positions [seq_begin, seq_end) of its requests instead: shape, FLOPs and
// bytes recomputed by the formulas above (the split search moves ISO chunk boundaries on one
// graph; build_schedule at the new split gives the same op).
void resegment(Op& op, std::int64_t seq_begin, std::int64_t seq_end);

}  // namespace tpo::sim
