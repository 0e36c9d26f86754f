// Seeded model data for validation runs. Values come from a counter-based hash of (seed,
// stream, index) — fast, and rank r's data is the same whichever ranks are generated, so a
// one-GPU run (emulated communication) computes on exactly rank 0's shard.
#include "validate/kernels/model_data.h"

#include "validate/kernels/cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <optional>
#include <tuple>
#include <type_traits>

namespace tpo::validate {

namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// n values uniform in offset + [-scale, scale) from stream `stream` of `seed`.
std::vector<float> uniform(std::int64_t n, float scale, std::uint64_t seed, std::uint64_t stream,
                           float offset = 0) {
  std::vector<float> v(static_cast<std::size_t>(n));
  const std::uint64_t base = mix(seed ^ mix(stream));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double u = static_cast<double>(mix(base + i) >> 11) * (1.0 / 9007199254740992.0);
    v[i] = offset + scale * static_cast<float>(2.0 * u - 1.0);
  }
  return v;
}

// The nearest bf16 value (round to nearest even), as a float.
float round_to_bf16(float x) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  bits &= 0xFFFF0000u;
  float y = 0;
  std::memcpy(&y, &bits, sizeof y);
  return y;
}

// Each layer's sliding window where prompt + context reach past it (0: full attention), as the
// graph builder sets it on the layer's attention ops.
std::vector<std::int64_t> layer_windows(const sim::Workload& w) {
  std::vector<std::int64_t> out;
  for (std::int64_t l = 0; l < w.layers; ++l)
    out.push_back(w.model.window_at(l, w.context + w.seq));
  return out;
}

}  // namespace

ModelData make_data(const sim::Workload& w, std::uint64_t seed, std::int64_t ranks,
                    std::int64_t only_rank) {
  ModelData m;
  m.d = sim::validate_workload(w);
  m.gelu = w.model.activation == sim::ModelConfig::Activation::Gelu;
  m.eps = static_cast<float>(w.model.rms_norm_eps);
  m.model_file = w.model.origin;
  m.tp = w.tp;
  m.layers = w.layers;
  m.batch = w.batch;
  m.seq = w.seq;
  m.context = w.context;
  m.cap = w.context + w.seq;
  m.tokens = w.batch * w.seq;
  m.window = layer_windows(w);
  if (w.rope) {
    m.rotary_dim = w.model.rotary_dim;
    // Rounded to bf16 values, as the CUDA runtime uploads it (and vLLM casts its cos_sin_cache
    // to the activations' type): every runtime and the reference rotate by the same numbers
    // (a bf16 pair is not norm-preserving, about 0.4% at worst, which the float64 reference
    // would otherwise count against the GPU run).
    m.rope_table = cpu::rope_table(m.cap, m.rotary_dim, w.model.rope_theta);
    for (float& v : m.rope_table) v = round_to_bf16(v);
  }
  m.qk_norm = w.model.qk_norm;
  m.post_norms = w.model.post_norms;
  m.attn_scale = static_cast<float>(w.model.attn_scale);
  m.attn_softcap = static_cast<float>(w.model.attn_softcap);
  const auto& d = m.d;
  const std::int64_t qd = d.q_heads * d.head_dim, kvd = d.kv_heads * d.head_dim;
  const std::int64_t made =
      only_rank >= 0 ? only_rank + 1 : (ranks > 0 ? std::min(ranks, w.tp) : w.tp);
  m.w.resize(static_cast<std::size_t>(made));
  m.k0.resize(static_cast<std::size_t>(made));
  m.v0.resize(static_cast<std::size_t>(made));
  const float sh = 1.0f / std::sqrt(static_cast<float>(d.hidden));
  for (std::int64_t r = only_rank >= 0 ? only_rank : 0; r < made; ++r) {
    for (std::int64_t l = 0; l < w.layers; ++l) {
      const std::uint64_t s = static_cast<std::uint64_t>((r * 1000 + l) * 16);
      LayerWeights lw;
      lw.attn_norm = uniform(d.hidden, 0.1f, seed, s + 0, 1.0f);
      lw.wqkv = uniform(d.hidden * d.qkv_n(), sh, seed, s + 1);
      lw.wo = uniform(qd * d.hidden, 1.0f / std::sqrt(static_cast<float>(qd * w.tp)), seed, s + 2);
      lw.mlp_norm = uniform(d.hidden, 0.1f, seed, s + 3, 1.0f);
      lw.wgu = uniform(d.hidden * 2 * d.ffn, sh, seed, s + 4);
      lw.wd = uniform(d.ffn * d.hidden, 1.0f / std::sqrt(static_cast<float>(d.ffn * w.tp)), seed,
                      s + 5);
      if (m.qk_norm) {
        lw.q_norm = uniform(d.head_dim, 0.1f, seed, s + 8, 1.0f);
        lw.k_norm = uniform(d.head_dim, 0.1f, seed, s + 9, 1.0f);
      }
      // Biases (the model's flags), small against the outputs as trained biases are.
      if (w.model.qkv_bias) lw.bqkv = uniform(d.qkv_n(), 0.5f, seed, s + 12);
      if (w.model.mlp_bias) lw.bgu = uniform(2 * d.ffn, 0.5f, seed, s + 13);
      if (r == 0 && w.model.o_bias) lw.bo = uniform(d.hidden, 0.5f, seed, s + 14);
      if (r == 0 && w.model.mlp_bias) lw.bd = uniform(d.hidden, 0.5f, seed, s + 15);
      if (m.post_norms) {  // replicated: drawn from the layer alone, the same on every rank
        const std::uint64_t rs = static_cast<std::uint64_t>(l * 16) + 0xABC0000ull;
        lw.post_attn_norm = uniform(d.hidden, 0.1f, seed, rs + 10, 1.0f);
        lw.post_mlp_norm = uniform(d.hidden, 0.1f, seed, rs + 11, 1.0f);
      }
      m.w[static_cast<std::size_t>(r)].push_back(std::move(lw));
      // The cached prefix: positions < context of every request; the rest is filled by runs.
      std::vector<float> k(static_cast<std::size_t>(m.batch * m.cap * kvd), 0.0f), v = k;
      const auto pk = uniform(m.batch * m.context * kvd, 1.0f, seed, s + 6);
      const auto pv = uniform(m.batch * m.context * kvd, 1.0f, seed, s + 7);
      for (std::int64_t b = 0; b < m.batch; ++b) {
        for (std::int64_t i = 0; i < m.context * kvd; ++i) {
          k[static_cast<std::size_t>(b * m.cap * kvd + i)] =
              pk[static_cast<std::size_t>(b * m.context * kvd + i)];
          v[static_cast<std::size_t>(b * m.cap * kvd + i)] =
              pv[static_cast<std::size_t>(b * m.context * kvd + i)];
        }
      }
      m.k0[static_cast<std::size_t>(r)].push_back(std::move(k));
      m.v0[static_cast<std::size_t>(r)].push_back(std::move(v));
    }
  }
  m.x0 = uniform(m.tokens * d.hidden, 1.0f, seed, 0xFFFFFFFFull);
  if (w.embed_head) {
    m.head = true;
    m.vocab = d.vocab;
    m.vocab_slices = w.vocab_replicated ? 1 : w.tp;
    const std::int64_t real = std::max<std::int64_t>(1, w.model.vocab);
    const std::uint64_t ids = mix(seed ^ 0x1D5ull);
    for (std::int64_t t = 0; t < m.tokens; ++t) {
      m.ids.push_back(static_cast<std::int32_t>(mix(ids + static_cast<std::uint64_t>(t)) %
                                                static_cast<std::uint64_t>(real)));
    }
    m.final_norm = uniform(d.hidden, 0.1f, seed, 0xF1A1ull, 1.0f);
    m.embed.resize(static_cast<std::size_t>(made));
    m.lm_head.resize(static_cast<std::size_t>(made));
    for (std::int64_t r = only_rank >= 0 ? only_rank : 0; r < made; ++r) {
      // A replicated table is the same on every rank: drawn from streams of its own.
      const std::uint64_t s =
          0xE0000000ull + static_cast<std::uint64_t>(w.vocab_replicated ? 0x7FFF : r) * 4;
      m.embed[static_cast<std::size_t>(r)] = uniform(m.vocab * d.hidden, 1.0f, seed, s);
      m.lm_head[static_cast<std::size_t>(r)] = uniform(d.hidden * m.vocab, sh, seed, s + 1);
    }
  }
  return m;
}

HeadRows head_rows(const RowLayout& l, const sim::Op& op) {
  HeadRows h;
  h.request = op.req_begin;
  h.requests = op.req_end - op.req_begin;
  h.row = l.row(op.req_begin, l.seq - 1);
  if (h.requests > 1) h.stride = l.row(op.req_begin + 1, l.seq - 1) - h.row;
  return h;
}

std::vector<std::int32_t> ids_in_layout(const ModelData& m, const RowLayout& l) {
  std::vector<std::int32_t> ids(m.ids.size(), 0);
  for (std::int64_t b = 0; b < m.batch; ++b) {
    for (std::int64_t p = 0; p < m.seq; ++p) {
      ids[static_cast<std::size_t>(l.row(b, p))] = m.ids[static_cast<std::size_t>(b * m.seq + p)];
    }
  }
  return ids;
}

std::vector<float> run_output(const ModelData& m, std::vector<float> x,
                              const std::vector<float>& logits) {
  if (!m.head) return x;
  const std::int64_t S = m.vocab_slices, V = m.vocab;
  x.reserve(x.size() + static_cast<std::size_t>(m.batch * S * V));
  for (std::int64_t b = 0; b < m.batch; ++b) {
    for (std::int64_t s = 0; s < S; ++s) {
      const auto* p = logits.data() + (s * m.batch + b) * V;
      x.insert(x.end(), p, p + V);
    }
  }
  return x;
}

std::shared_ptr<const ModelData> shared_data(const sim::Workload& w, std::uint64_t seed,
                                             std::int64_t ranks, std::int64_t only_rank) {
  const sim::ShardDims d = sim::validate_workload(w);
  const std::int64_t made = ranks > 0 ? std::min(ranks, w.tp) : w.tp;
  const auto key = std::make_tuple(
      d.hidden, d.q_heads, d.kv_heads, d.head_dim, d.ffn, w.tp, w.layers, w.batch, w.seq, w.context,
      seed, made, only_rank, static_cast<int>(w.model.activation), layer_windows(w),
      w.rope ? w.model.rotary_dim : 0, w.model.rope_theta, w.model.qk_norm, w.model.post_norms,
      w.model.qkv_bias, w.model.o_bias, w.model.mlp_bias, w.embed_head, w.vocab_replicated,
      w.model.vocab, w.model.rms_norm_eps, w.model.attn_scale, w.model.attn_softcap);
  static std::mutex mu;
  static std::optional<std::remove_const_t<decltype(key)>> cached_key;
  static std::shared_ptr<const ModelData> cached;
  std::lock_guard<std::mutex> lock(mu);
  if (!cached || cached_key != key) {
    cached.reset();  // free the old data before making the new
    cached = std::make_shared<const ModelData>(make_data(w, seed, ranks, only_rank));
    cached_key = key;
  }
  return cached;
}

AttentionShape chunk_attention(const ModelData& m, std::int64_t layer, std::int64_t len,
                               std::int64_t pos) {
  AttentionShape a;
  a.window = m.window.at(static_cast<std::size_t>(layer));
  a.requests = 1;
  a.q_tokens = len;
  a.prefix = pos;
  a.q_heads = m.d.q_heads;
  a.kv_heads = m.d.kv_heads;
  a.head_dim = m.d.head_dim;
  a.kv_capacity = m.cap;
  a.scale = m.attn_scale;
  a.softcap = m.attn_softcap;
  return a;
}

RowLayout row_layout(const ModelData& m, const sim::Schedule& s) {
  RowLayout l;
  l.batch = m.batch;
  l.seq = m.seq;
  l.starts.push_back(0);
  std::int64_t at = 0;
  for (auto t : s.chunk_tokens) l.starts.push_back(at += t);
  if (at != m.seq) l.starts = {0, m.seq};  // no chunks, or not of this sequence: one
  return l;
}

std::int64_t RowLayout::row(std::int64_t request, std::int64_t pos) const {
  const auto c = std::upper_bound(starts.begin(), starts.end(), pos) - starts.begin() - 1;
  const std::int64_t begin = starts[static_cast<std::size_t>(c)];
  const std::int64_t len = starts[static_cast<std::size_t>(c) + 1] - begin;
  return batch * begin + request * len + (pos - begin);
}

namespace {
std::vector<float> permute(const RowLayout& l, const std::vector<float>& x, std::int64_t width,
                           bool to) {
  std::vector<float> y(x.size());
  const auto w = static_cast<std::size_t>(width);
  for (std::int64_t r = 0; r < l.batch; ++r) {
    for (std::int64_t p = 0; p < l.seq; ++p) {
      const auto a = static_cast<std::size_t>(r * l.seq + p) * w;  // request-major
      const auto b = static_cast<std::size_t>(l.row(r, p)) * w;
      std::copy_n(x.data() + (to ? a : b), w, y.data() + (to ? b : a));
    }
  }
  return y;
}
}  // namespace

std::vector<float> to_layout(const RowLayout& l, const std::vector<float>& x, std::int64_t width) {
  return permute(l, x, width, true);
}
std::vector<float> from_layout(const RowLayout& l, const std::vector<float>& x,
                               std::int64_t width) {
  return permute(l, x, width, false);
}

std::vector<RowBlock> row_blocks(const RowLayout& l, std::int64_t context, const sim::Op& op) {
  std::vector<RowBlock> b;
  const std::int64_t p0 = op.seq_begin - context, p1 = op.seq_end - context;
  const std::int64_t requests = op.req_end - op.req_begin;
  const auto c = std::lower_bound(l.starts.begin(), l.starts.end(), p0);
  if (c != l.starts.end() && *c == p0 && c + 1 != l.starts.end() && *(c + 1) == p1) {
    // One chunk (or the whole sequence): its requests' rows are one block.
    b.push_back(
        {l.row(op.req_begin, p0), requests * (p1 - p0), op.req_begin, op.seq_begin, requests});
    return b;
  }
  for (std::int64_t r = op.req_begin; r < op.req_end; ++r) {
    for (std::size_t k = 0; k + 1 < l.starts.size(); ++k) {
      const std::int64_t q0 = std::max(p0, l.starts[k]), q1 = std::min(p1, l.starts[k + 1]);
      if (q0 < q1) b.push_back({l.row(r, q0), q1 - q0, r, context + q0, 1});
    }
  }
  return b;
}

}  // namespace tpo::validate
