// The one harness that builds every strategy's schedule graph from its record's GraphShape.
// A model is a sequence of modules (attention, MLP; or one parallel block per layer), the
// tokens are cut into segments (ISO chunks or micro-batch groups), and for each (module,
// segment) it emits the compute ops, the all-reduce of the module's row-parallel output, and
// the residual add of the reduced output — delayed by one module under ladder residual, so
// that module i-1's all-reduce overlaps module i's compute.
#include <algorithm>
#include <limits>

#include "sim/error.h"
#include "sim/strategy.h"

namespace tpo::sim {

namespace {

struct Segment {
  std::int32_t chunk = 0;
  std::int32_t piece = -1;
  std::int64_t req_begin = 0, req_end = 0;
  std::int64_t seq_begin = 0, seq_end = 0;
  std::int64_t tokens() const { return (req_end - req_begin) * (seq_end - seq_begin); }
};

enum class ModuleType { Attention, Mlp, Parallel };

struct Module {
  ModuleType type;
  std::int32_t layer;
  std::int32_t index;
  std::int32_t delay;  // how many modules later its residual add is applied (ladder: 1)
};

struct PendingResidual {
  std::int32_t due;  // emit before the compute of this module index
  std::int32_t module;
  std::size_t segment;
  // Its all-reduces (or row-parallel outputs) and their rows: [first, first + count) of the
  // emitter's pools, so that a graph costs no allocation per module.
  std::size_t first, count;
};

class GraphBuilder {
 public:
  GraphBuilder(const Workload& w, const ShardDims& d, Schedule& s) : w_(w), d_(d), s_(s) {}

  // A new op at the end of the schedule with its segment's fields, built in place.
  Op& base(OpCode code, const Segment& g, std::int32_t layer, std::int32_t module) {
    Op& op = s_.ops.emplace_back();
    op.code = code;
    op.kind = op_code_kind(code);
    op.stream = op.kind == OpKind::AllReduce ? StreamKind::Comm : StreamKind::Compute;
    op.layer = layer;
    op.module = module;
    op.chunk = g.chunk;
    op.piece = g.piece;
    op.req_begin = g.req_begin;
    op.req_end = g.req_end;
    op.seq_begin = g.seq_begin;
    op.seq_end = g.seq_end;
    return op;
  }
  std::int32_t last() const { return static_cast<std::int32_t>(s_.ops.size() - 1); }

  std::int32_t gemm(OpCode code, const Segment& g, std::int32_t layer, std::int32_t module,
                    std::int64_t n, std::int64_t k, DepList deps, bool accumulate = false) {
    Op& op = base(code, g, layer, module);
    // Biases where the model has them. A row-parallel GEMM's bias is added by one rank
    // before the all-reduce (as vLLM's RowParallelLinear does on rank 0): the rank simulated.
    const ModelConfig& mc = w_.model;
    const bool bias = (code == OpCode::Qkv && mc.qkv_bias) ||
                      (code == OpCode::OProj && mc.o_bias) ||
                      ((code == OpCode::GateUp || code == OpCode::Down) && mc.mlp_bias);
    set_gemm_work(op, g.tokens(), n, k, accumulate, bias);
    op.deps = std::move(deps);
    return last();
  }

  // Norms and elementwise ops over `width` columns of every row of the segment.
  std::int32_t rowwise(OpCode code, const Segment& g, std::int32_t layer, std::int32_t module,
                       std::int64_t width, DepList deps) {
    Op& op = base(code, g, layer, module);
    set_rowwise_work(op, g.tokens(), width);
    op.deps = std::move(deps);
    return last();
  }

  std::int32_t attention(const Segment& g, std::int32_t layer, std::int32_t module, DepList deps) {
    Op& op = base(OpCode::Attention, g, layer, module);
    // A sliding-window layer's window, where the workload reaches past it (within it the
    // layer is full attention: the same op as every other layer's).
    set_attention_work(op, g.req_end - g.req_begin, g.seq_end - g.seq_begin, g.seq_begin,
                       d_.q_heads, d_.kv_heads, d_.head_dim,
                       w_.model.window_at(layer, w_.seq + w_.context));
    op.deps = std::move(deps);
    return last();
  }

  std::int32_t allreduce(const Segment& g, std::int32_t layer, std::int32_t module,
                         std::int32_t producer) {
    Op& op = base(OpCode::AllReduce, g, layer, module);
    set_allreduce_work(op, g.tokens() * d_.hidden);
    op.deps = {producer};
    return last();
  }

  const Workload& w_;
  const ShardDims& d_;
  Schedule& s_;
};

std::vector<Segment> split_rows(const Segment& g, std::int64_t pieces) {
  std::vector<Segment> out;
  const bool by_pos = g.seq_end - g.seq_begin > 1;
  const std::int64_t len = by_pos ? g.seq_end - g.seq_begin : g.req_end - g.req_begin;
  for (std::int64_t i = 0; i < pieces; ++i) {
    Segment p = g;
    p.piece = static_cast<std::int32_t>(i);
    const std::int64_t b = len * i / pieces, e = len * (i + 1) / pieces;
    if (by_pos) {
      p.seq_begin = g.seq_begin + b;
      p.seq_end = g.seq_begin + e;
    } else {
      p.req_begin = g.req_begin + b;
      p.req_end = g.req_begin + e;
    }
    out.push_back(p);
  }
  return out;
}

// The token matrix (requests x positions) cut into the strategy's segments; records the chunk
// sizes in the schedule.
std::vector<Segment> make_segments(const Workload& w, const StrategySpec& spec,
                                   const StrategyDescriptor& desc, Schedule& s) {
  const std::int64_t pos0 = w.context, pos1 = w.context + w.seq;
  std::vector<Segment> segs;
  switch (desc.shape.segments) {
    case Segments::PromptChunks: {
      const auto& c = spec.chunk_tokens;
      std::int64_t sum = 0;
      for (auto t : c) {
        if (t < 1) {
          throw FieldError("chunk_tokens", std::to_string(t), "every chunk needs >= 1 token");
        }
        sum += t;
      }
      if (c.size() < 2 || sum != w.seq) {
        throw FieldError("chunk_tokens", std::to_string(sum),
                         std::string(desc.name) + " needs >= 2 chunks whose tokens sum to seq (" +
                             std::to_string(w.seq) + ")");
      }
      std::int64_t at = pos0;
      for (std::size_t j = 0; j < c.size(); ++j) {
        segs.push_back({static_cast<std::int32_t>(j), -1, 0, w.batch, at, at + c[j]});
        at += c[j];
      }
      s.chunk_tokens = c;
      return segs;
    }
    case Segments::RequestGroups: {
      const std::int64_t half = w.batch / 2;
      segs.push_back({0, -1, 0, half, pos0, pos1});
      segs.push_back({1, -1, half, w.batch, pos0, pos1});
      break;
    }
    case Segments::Whole:
      segs.push_back({0, -1, 0, w.batch, pos0, pos1});
      break;
  }
  s.chunk_tokens = {w.seq};
  return segs;
}

// Attention and MLP modules per layer (or one parallel block), each with its residual delay.
std::vector<Module> make_modules(const Workload& w, const StrategySpec& spec,
                                 const GraphShape& shape) {
  const bool ladder = shape.ladder_residual;
  if (ladder && (spec.ladder_layers < 0 || spec.ladder_layers > w.layers)) {
    throw FieldError("ladder_layers", std::to_string(spec.ladder_layers),
                     "must be between 0 (all layers) and the layers simulated (" +
                         std::to_string(w.layers) + ")");
  }
  const std::int64_t first_ladder_layer =
      !ladder ? w.layers : (spec.ladder_layers == 0 ? 0 : w.layers - spec.ladder_layers);
  std::vector<Module> modules;
  for (std::int32_t l = 0; l < w.layers; ++l) {
    const std::int32_t delay = l >= first_ladder_layer ? 1 : 0;
    auto index = [&] { return static_cast<std::int32_t>(modules.size()); };
    if (shape.parallel_block) {
      modules.push_back({ModuleType::Parallel, l, index(), 0});
    } else {
      modules.push_back({ModuleType::Attention, l, index(), delay});
      modules.push_back({ModuleType::Mlp, l, index(), delay});
    }
  }
  return modules;
}

// Emits the ops of each (module, segment) in issue order, with the residual adds each module's
// all-reduce feeds, applied `delay` modules later.
class Emitter {
 public:
  Emitter(const Workload& w, const ShardDims& d, Schedule& s, std::vector<Segment> segs,
          std::vector<Module> modules, std::int64_t pieces)
      : w_(w),
        d_(d),
        s_(s),
        b_(w, d, s),
        segs_(std::move(segs)),
        modules_(std::move(modules)),
        pieces_(pieces),
        residual_writers_(segs_.size()),
        fused_(segs_.size(), false),
        layer_qkv_(segs_.size(), -1) {}

  void run() {
    embed();
    for (const Module& m : modules_) {
      for (std::size_t j = 0; j < segs_.size(); ++j) {
        flush(j, m.index);
        emit(m, j);
      }
    }
    for (std::size_t j = 0; j < segs_.size(); ++j) {
      flush(j, std::numeric_limits<std::int32_t>::max());
    }
    head();
  }

 private:
  // A vocab-parallel embedding: each rank gathers the rows of its vocabulary slice, and an
  // all-reduce sums them.
  void embed() {
    if (!w_.embed_head) return;
    const Segment all{0, -1, 0, w_.batch, w_.context, w_.context + w_.seq};
    std::int32_t e = b_.rowwise(OpCode::Embed, all, -1, -1, d_.hidden, {});
    if (w_.tp > 1 && !w_.vocab_replicated) e = b_.allreduce(all, -1, -1, e);
    for (auto& rw : residual_writers_) rw = {e};
  }

  // Final norm and LM head on the last position of each request. With --add-norm fused the last
  // module's adds run the final norm over their rows, as vLLM's norm(hidden_states, residual)
  // does over every token; else a final norm op on the last positions.
  void head() {
    if (!w_.embed_head) return;
    std::vector<std::int32_t> deps;
    for (const auto& rw : residual_writers_) {
      std::int32_t last_module = -1;
      for (const auto id : rw) {
        last_module = std::max(last_module, s_.ops[static_cast<std::size_t>(id)].residual_of);
      }
      for (const auto id : rw) {
        Op& add = s_.ops[static_cast<std::size_t>(id)];
        if (w_.fused_add_norm && add.residual_of >= 0 && add.residual_of == last_module) {
          add.norm_after = 3;
        }
        deps.push_back(id);
      }
    }
    const std::int64_t end = w_.context + w_.seq;
    const Segment last{0, -1, 0, w_.batch, end - 1, end};
    const auto fn =
        w_.fused_add_norm ? -1 : b_.rowwise(OpCode::FinalNorm, last, -1, -1, d_.hidden, deps);
    const auto head = b_.gemm(OpCode::LmHead, last, -1, -1, d_.vocab, d_.hidden,
                              fn >= 0 ? DepList{fn} : DepList(deps));
    // The logits of every rank's vocabulary slice gathered (batch x vocab bf16 values in all):
    // an all-gather moves (n - 1) / n of them over each link, as an all-reduce of half of them.
    if (w_.tp > 1 && !w_.vocab_replicated) {
      Op& g = b_.base(OpCode::LogitsGather, last, -1, -1);
      set_allreduce_work(g, w_.batch * d_.vocab * w_.tp / 2);
      g.deps = {head};
    }
  }

  // The residual adds of segment `seg` that are due before module `upto_module`. With
  // --add-norm fused, where one module's adds are due right before a module's norm, emit() makes
  // each of them that norm's kernel over its rows too (fused_). After the last module, head()
  // gives the last adds the final norm (--embed-head).
  void flush(std::size_t seg, std::int32_t upto_module) {
    const bool before_module = upto_module < static_cast<std::int32_t>(modules_.size());
    fused_[seg] = false;
    std::vector<std::int32_t>& writers = residual_writers_[seg];
    bool any = false;
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->segment != seg || it->due > upto_module) {
        ++it;
        continue;
      }
      // The adds due now replace the stream's last writers (all of them: after the last module a
      // ladder has two modules' adds due).
      if (!any) writers.clear();
      any = true;
      const Module& m = modules_[static_cast<std::size_t>(it->module)];
      // --allreduce-fusion add-norm: the all-reduce's kernel adds (not a ladder's delayed add:
      // the next module reads the residual without it while the all-reduce runs).
      const bool in_allreduce = w_.allreduce_add && w_.tp > 1 && m.delay == 0;
      for (std::size_t p = it->first; p < it->first + it->count; ++p) {
        const auto id = in_allreduce ? pool_ars_[p]
                                     : b_.rowwise(OpCode::ResidualAdd, pool_rows_[p], m.layer,
                                                  m.index, d_.hidden, {pool_ars_[p]});
        Op& add = s_.ops[static_cast<std::size_t>(id)];
        add.residual_of = m.index;
        // Gemma's post-norm on the module's output (a parallel block's: the attention's).
        if (w_.model.post_norms) add.post_norm = m.type == ModuleType::Mlp ? 2 : 1;
        writers.push_back(id);
      }
      // Dues rise with the module index (a ladder's delay never falls), so at most one module's
      // adds are due before a module.
      fused_[seg] = w_.fused_add_norm && before_module;
      it = pending_.erase(it);
    }
  }

  // qkv and attention of segment j; attention waits for the KV of earlier chunks.
  std::int32_t attention_part(const Module& m, std::size_t j, const DepList& norm) {
    const Segment& g = segs_[j];
    const auto qkv = b_.gemm(OpCode::Qkv, g, m.layer, m.index, d_.qkv_n(), d_.hidden, norm);
    Op& q = s_.ops[static_cast<std::size_t>(qkv)];
    q.kv_width = d_.kv_heads * d_.head_dim;
    q.qk_norm = w_.model.qk_norm;
    if (w_.rope) {
      q.rope_dim = static_cast<std::int32_t>(w_.model.rotary_dim);
      q.rope_heads = static_cast<std::int32_t>(d_.q_heads + d_.kv_heads);
    }
    if (qkv_layer_ != m.layer) {
      std::fill(layer_qkv_.begin(), layer_qkv_.end(), -1);
      qkv_layer_ = m.layer;
    }
    layer_qkv_[j] = qkv;
    DepList deps = {qkv};
    for (std::size_t i = 0; i < j; ++i) {  // KV of earlier chunks of the same requests
      if (layer_qkv_[i] >= 0 && segs_[i].req_begin == g.req_begin &&
          segs_[i].seq_end <= g.seq_begin) {
        deps.push_back(layer_qkv_[i]);
      }
    }
    return b_.attention(g, m.layer, m.index, deps);
  }

  // The module's input norm on segment j: the residual adds just flushed, made to run it over
  // their rows too (--add-norm fused; a gemm-split's pieces: one each), else a norm op of its
  // own. Returns what the module's GEMMs wait for.
  DepList norm(const Module& m, std::size_t j, OpCode code) {
    if (fused_[j]) {
      fused_[j] = false;
      for (const std::int32_t add : residual_writers_[j]) {
        Op& a = s_.ops[static_cast<std::size_t>(add)];
        a.norm_after = code == OpCode::MlpNorm ? 2 : 1;
        a.norm_layer = m.layer;
      }
      return residual_writers_[j];
    }
    return {b_.rowwise(code, segs_[j], m.layer, m.index, d_.hidden, residual_writers_[j])};
  }

  // The module's compute on segment j, its all-reduces, and its pending residual add.
  void emit(const Module& m, std::size_t j) {
    const Segment& g = segs_[j];
    const std::size_t first = pool_ars_.size();  // row-parallel GEMM outputs to all-reduce
    auto last_gemm = [&](OpCode code, std::int64_t n, std::int64_t k, DepList deps, bool acc) {
      if (pieces_ <= 1) {
        pool_ars_.push_back(b_.gemm(code, g, m.layer, m.index, n, k, deps, acc));
        pool_rows_.push_back(g);
        return;
      }
      for (const Segment& p : split_rows(g, pieces_)) {
        pool_ars_.push_back(b_.gemm(code, p, m.layer, m.index, n, k, deps, acc));
        pool_rows_.push_back(p);
      }
    };
    const std::int64_t qd = d_.q_heads * d_.head_dim;
    if (m.type == ModuleType::Attention) {
      const auto n = norm(m, j, OpCode::AttnNorm);
      last_gemm(OpCode::OProj, d_.hidden, qd, {attention_part(m, j, n)}, false);
    } else if (m.type == ModuleType::Mlp) {
      const auto n = norm(m, j, OpCode::MlpNorm);
      const auto gu = b_.gemm(OpCode::GateUp, g, m.layer, m.index, 2 * d_.ffn, d_.hidden, n);
      const auto act = b_.rowwise(OpCode::SiluMul, g, m.layer, m.index, d_.ffn, {gu});
      last_gemm(OpCode::Down, d_.hidden, d_.ffn, {act}, false);
    } else {  // parallel block: attention and MLP read one norm; down accumulates into o_proj
      const auto n = norm(m, j, OpCode::AttnNorm);
      const auto attn = attention_part(m, j, n);
      const auto o = b_.gemm(OpCode::OProj, g, m.layer, m.index, d_.hidden, qd, {attn});
      const auto gu = b_.gemm(OpCode::GateUp, g, m.layer, m.index, 2 * d_.ffn, d_.hidden, n);
      const auto act = b_.rowwise(OpCode::SiluMul, g, m.layer, m.index, d_.ffn, {gu});
      last_gemm(OpCode::Down, d_.hidden, d_.ffn, {act, o}, true);
    }
    const std::size_t count = pool_ars_.size() - first;
    if (w_.tp > 1) {
      for (std::size_t p = first; p < first + count; ++p) {
        pool_ars_[p] = b_.allreduce(pool_rows_[p], m.layer, m.index, pool_ars_[p]);
      }
    }
    pending_.push_back({m.index + 1 + m.delay, m.index, j, first, count});
  }

  const Workload& w_;
  const ShardDims& d_;
  Schedule& s_;
  GraphBuilder b_;
  std::vector<Segment> segs_;
  std::vector<Module> modules_;
  std::int64_t pieces_;
  // Per segment: the ops that last wrote its residual stream (what the next norm reads).
  std::vector<std::vector<std::int32_t>> residual_writers_;
  // Per segment: whether the residual adds just flushed run the next norm too.
  std::vector<bool> fused_;
  std::vector<PendingResidual> pending_;
  std::vector<std::int32_t> pool_ars_;  // see PendingResidual
  std::vector<Segment> pool_rows_;
  // qkv ops of the current layer per segment, for attention's KV dependencies.
  std::vector<std::int32_t> layer_qkv_;
  std::int32_t qkv_layer_ = -1;
};

}  // namespace

Schedule build_schedule(const Workload& w, const StrategySpec& spec) {
  const ShardDims d = validate_workload(w);
  if (auto why = not_applicable_reason(w, spec); !why.empty()) {
    throw FieldError("strategy", strategy_name(spec.kind), why);
  }
  const StrategyDescriptor& desc = strategy(spec.kind);
  Schedule s;
  s.strategy = desc.name;
  s.preserves_function = desc.preserves_function;
  s.num_layers = static_cast<std::int32_t>(w.layers);
  std::int64_t pieces = 1;
  if (desc.shape.split_last_gemm) {
    pieces = spec.pieces;
    if (pieces < 2 || pieces > 64) {
      throw FieldError("pieces", std::to_string(pieces), "must be between 2 and 64");
    }
  }
  if (spec.chunk_tokens.size() > 64) {
    throw FieldError("chunk_tokens", std::to_string(spec.chunk_tokens.size()) + " chunks",
                     "at most 64 chunks");
  }
  s.ops.reserve(static_cast<std::size_t>(w.layers) * 2 *
                    (spec.chunk_tokens.empty() ? 2 : spec.chunk_tokens.size()) *
                    static_cast<std::size_t>(8 + 3 * pieces) +
                16);
  std::vector<Segment> segs = make_segments(w, spec, desc, s);
  std::vector<Module> modules = make_modules(w, spec, desc.shape);
  Emitter(w, d, s, std::move(segs), std::move(modules), pieces).run();
  return s;
}

}  // namespace tpo::sim
