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
  std::vector<std::int32_t> ars;
  std::vector<Segment> rows;
};

class GraphBuilder {
 public:
  GraphBuilder(const Workload& w, const ShardDims& d, Schedule& s) : w_(w), d_(d), s_(s) {}

  std::int32_t add(Op op) {
    s_.ops.push_back(std::move(op));
    return static_cast<std::int32_t>(s_.ops.size() - 1);
  }

  Op base(OpCode code, const Segment& g, std::int32_t layer, std::int32_t module) const {
    Op op;
    op.code = code;
    op.kind = op_code_kind(code);
    op.stream = code == OpCode::AllReduce ? StreamKind::Comm : StreamKind::Compute;
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

  std::int32_t gemm(OpCode code, const Segment& g, std::int32_t layer, std::int32_t module,
                    std::int64_t n, std::int64_t k, DepList deps, bool accumulate = false) {
    Op op = base(code, g, layer, module);
    // Biases where the model has them. A row-parallel GEMM's bias is added by one rank
    // before the all-reduce (as vLLM's RowParallelLinear does on rank 0): the rank simulated.
    const ModelConfig& mc = w_.model;
    const bool bias = (code == OpCode::Qkv && mc.qkv_bias) ||
                      (code == OpCode::OProj && mc.o_bias) ||
                      ((code == OpCode::GateUp || code == OpCode::Down) && mc.mlp_bias);
    set_gemm_work(op, g.tokens(), n, k, accumulate, bias);
    op.deps = std::move(deps);
    return add(std::move(op));
  }

  // Norms and elementwise ops over `width` columns of every row of the segment.
  std::int32_t rowwise(OpCode code, const Segment& g, std::int32_t layer, std::int32_t module,
                       std::int64_t width, DepList deps) {
    Op op = base(code, g, layer, module);
    set_rowwise_work(op, g.tokens(), width);
    op.deps = std::move(deps);
    return add(std::move(op));
  }

  std::int32_t attention(const Segment& g, std::int32_t layer, std::int32_t module, DepList deps) {
    Op op = base(OpCode::Attention, g, layer, module);
    set_attention_work(op, g.req_end - g.req_begin, g.seq_end - g.seq_begin, g.seq_begin,
                       d_.q_heads, d_.kv_heads, d_.head_dim);
    op.deps = std::move(deps);
    return add(std::move(op));
  }

  std::int32_t allreduce(const Segment& g, std::int32_t layer, std::int32_t module,
                         std::int32_t producer) {
    Op op = base(OpCode::AllReduce, g, layer, module);
    set_allreduce_work(op, g.tokens() * d_.hidden);
    op.deps = {producer};
    return add(std::move(op));
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

}  // namespace

Schedule build_schedule(const Workload& w, const StrategySpec& spec) {
  const ShardDims d = validate_workload(w);
  if (auto why = not_applicable_reason(w, spec); !why.empty()) {
    throw FieldError("strategy", strategy_name(spec.kind), why);
  }
  Schedule s;
  s.ops.reserve(static_cast<std::size_t>(w.layers) * 2 *
                    (spec.chunk_tokens.empty() ? 2 : spec.chunk_tokens.size()) *
                    static_cast<std::size_t>(8 + 3 * std::max<std::int64_t>(1, spec.pieces)) +
                16);
  const StrategyDescriptor& desc = strategy(spec.kind);
  const GraphShape& shape = desc.shape;
  s.strategy = desc.name;
  s.preserves_function = desc.preserves_function;
  s.num_layers = static_cast<std::int32_t>(w.layers);
  GraphBuilder b(w, d, s);

  // Segments of the token matrix (requests x positions).
  const std::int64_t pos0 = w.context;
  const std::int64_t pos1 = w.context + w.seq;
  std::vector<Segment> segs;
  if (shape.segments == Segments::PromptChunks) {
    const auto& c = spec.chunk_tokens;
    std::int64_t sum = 0;
    for (auto t : c) {
      if (t < 1)
        throw FieldError("chunk_tokens", std::to_string(t), "every chunk needs >= 1 token");
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
  } else if (shape.segments == Segments::RequestGroups) {
    const std::int64_t half = w.batch / 2;
    segs.push_back({0, -1, 0, half, pos0, pos1});
    segs.push_back({1, -1, half, w.batch, pos0, pos1});
    s.chunk_tokens = {w.seq};
  } else {
    segs.push_back({0, -1, 0, w.batch, pos0, pos1});
    s.chunk_tokens = {w.seq};
  }
  std::int64_t pieces = 1;
  if (shape.split_last_gemm) {
    pieces = spec.pieces;
    if (pieces < 2) throw FieldError("pieces", std::to_string(pieces), "must be >= 2");
  }
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
    if (shape.parallel_block) {
      modules.push_back({ModuleType::Parallel, l, static_cast<std::int32_t>(modules.size()), 0});
    } else {
      modules.push_back(
          {ModuleType::Attention, l, static_cast<std::int32_t>(modules.size()), delay});
      modules.push_back({ModuleType::Mlp, l, static_cast<std::int32_t>(modules.size()), delay});
    }
  }

  // Per segment: the ops that last wrote its residual stream (what the next norm reads).
  std::vector<std::vector<std::int32_t>> residual_writers(segs.size());
  if (w.embed_head) {
    Segment all{0, -1, 0, w.batch, pos0, pos1};
    // A vocab-parallel embedding: each rank gathers the rows of its vocabulary slice, and an
    // all-reduce sums them. (The LM head's logits gather, B x vocab values, is not modelled.)
    std::int32_t e = b.rowwise(OpCode::Embed, all, -1, -1, d.hidden, {});
    if (w.tp > 1) e = b.allreduce(all, -1, -1, e);
    for (auto& rw : residual_writers) rw = {e};
  }
  std::vector<PendingResidual> pending;
  auto flush = [&](std::size_t seg, std::int32_t upto_module) {
    for (auto it = pending.begin(); it != pending.end();) {
      if (it->segment != seg || it->due > upto_module) {
        ++it;
        continue;
      }
      std::vector<std::int32_t> writers;
      for (std::size_t p = 0; p < it->ars.size(); ++p) {
        const Module& m = modules[static_cast<std::size_t>(it->module)];
        const auto id =
            b.rowwise(OpCode::ResidualAdd, it->rows[p], m.layer, m.index, d.hidden, {it->ars[p]});
        s.ops[static_cast<std::size_t>(id)].residual_of = m.index;
        writers.push_back(id);
      }
      residual_writers[seg] = writers;
      it = pending.erase(it);
    }
  };

  // qkv ops of the current layer per segment, for attention's KV dependencies.
  std::vector<std::int32_t> layer_qkv(segs.size(), -1);
  std::int32_t qkv_layer = -1;

  for (const Module& m : modules) {
    for (std::size_t j = 0; j < segs.size(); ++j) {
      const Segment& g = segs[j];
      flush(j, m.index);
      const auto& in = residual_writers[j];
      std::vector<std::int32_t> outs;  // row-parallel GEMM outputs to all-reduce
      std::vector<Segment> out_rows;
      auto last_gemm = [&](OpCode code, std::int64_t n, std::int64_t k, DepList deps, bool acc) {
        if (pieces <= 1) {
          outs.push_back(b.gemm(code, g, m.layer, m.index, n, k, deps, acc));
          out_rows.push_back(g);
          return;
        }
        for (const Segment& p : split_rows(g, pieces)) {
          outs.push_back(b.gemm(code, p, m.layer, m.index, n, k, deps, acc));
          out_rows.push_back(p);
        }
      };
      auto attention_part = [&](std::int32_t norm) {
        const auto qkv = b.gemm(OpCode::Qkv, g, m.layer, m.index, d.qkv_n(), d.hidden, {norm});
        if (qkv_layer != m.layer) {
          std::fill(layer_qkv.begin(), layer_qkv.end(), -1);
          qkv_layer = m.layer;
        }
        layer_qkv[j] = qkv;
        DepList deps = {qkv};
        for (std::size_t i = 0; i < j; ++i) {  // KV of earlier chunks of the same requests
          if (layer_qkv[i] >= 0 && segs[i].req_begin == g.req_begin &&
              segs[i].seq_end <= g.seq_begin) {
            deps.push_back(layer_qkv[i]);
          }
        }
        return b.attention(g, m.layer, m.index, deps);
      };
      if (m.type == ModuleType::Attention) {
        const auto norm = b.rowwise(OpCode::AttnNorm, g, m.layer, m.index, d.hidden, in);
        const auto attn = attention_part(norm);
        last_gemm(OpCode::OProj, d.hidden, d.q_heads * d.head_dim, {attn}, false);
      } else if (m.type == ModuleType::Mlp) {
        const auto norm = b.rowwise(OpCode::MlpNorm, g, m.layer, m.index, d.hidden, in);
        const auto gu = b.gemm(OpCode::GateUp, g, m.layer, m.index, 2 * d.ffn, d.hidden, {norm});
        const auto act = b.rowwise(OpCode::SiluMul, g, m.layer, m.index, d.ffn, {gu});
        last_gemm(OpCode::Down, d.hidden, d.ffn, {act}, false);
      } else {  // parallel block: attention and MLP read one norm; down accumulates into o_proj
        const auto norm = b.rowwise(OpCode::AttnNorm, g, m.layer, m.index, d.hidden, in);
        const auto attn = attention_part(norm);
        const auto o =
            b.gemm(OpCode::OProj, g, m.layer, m.index, d.hidden, d.q_heads * d.head_dim, {attn});
        const auto gu = b.gemm(OpCode::GateUp, g, m.layer, m.index, 2 * d.ffn, d.hidden, {norm});
        const auto act = b.rowwise(OpCode::SiluMul, g, m.layer, m.index, d.ffn, {gu});
        last_gemm(OpCode::Down, d.hidden, d.ffn, {act, o}, true);
      }
      PendingResidual pr{m.index + 1 + m.delay, m.index, j, {}, out_rows};
      for (std::size_t p = 0; p < outs.size(); ++p) {
        pr.ars.push_back(w.tp > 1 ? b.allreduce(out_rows[p], m.layer, m.index, outs[p]) : outs[p]);
      }
      pending.push_back(std::move(pr));
    }
  }
  for (std::size_t j = 0; j < segs.size(); ++j) {
    flush(j, std::numeric_limits<std::int32_t>::max());
  }
  if (w.embed_head) {
    std::vector<std::int32_t> deps;
    for (const auto& rw : residual_writers) deps.insert(deps.end(), rw.begin(), rw.end());
    Segment last{0, -1, 0, w.batch, pos1 - 1, pos1};
    const auto fn = b.rowwise(OpCode::FinalNorm, last, -1, -1, d.hidden, deps);
    b.gemm(OpCode::LmHead, last, -1, -1, d.vocab, d.hidden, {fn});
  }
  return s;
}

}  // namespace tpo::sim
