// Sweep construction.
#include "profiler/sweep.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "sim/profile.h"

namespace tpo::profiler {

std::vector<std::int64_t> token_grid(const SweepOptions& o) {
  std::set<std::int64_t> s;
  for (std::int64_t t = o.align; t <= o.max_tokens; t *= 2) {
    s.insert(t);
    const std::int64_t mid = (t * 3 / 2) / o.align * o.align;
    if (!o.quick && mid <= o.max_tokens && mid > t) s.insert(mid);
  }
  if (s.empty()) s.insert(std::max<std::int64_t>(1, o.max_tokens));
  return {s.begin(), s.end()};
}

std::vector<std::int64_t> gemm_rows(const SweepOptions& o) {
  const auto grid = token_grid(o);
  std::set<std::int64_t> s(grid.begin(), grid.end());
  if (o.gemm_step > 0) {
    const std::int64_t to = std::min(o.gemm_dense_to, o.max_tokens);
    for (std::int64_t t = o.gemm_step; t <= to; t += o.gemm_step) s.insert(t);
  }
  s.insert(o.decode_rows.begin(), o.decode_rows.end());
  return {s.begin(), s.end()};
}

validate::AttentionShape attention_shape(const Item& it) {
  validate::AttentionShape s;
  s.requests = it.requests;
  s.q_tokens = it.q_tokens;
  s.prefix = it.prefix;
  s.q_heads = it.q_heads;
  s.kv_heads = it.kv_heads;
  s.head_dim = it.head_dim;
  s.kv_capacity = it.prefix + it.q_tokens;
  s.scale = it.attn_scale;
  s.softcap = it.attn_softcap;
  // Q in place in the fused qkv rows, as the runtimes read it (no gather).
  s.q_row_stride = (it.q_heads + 2 * it.kv_heads) * it.head_dim;
  return s;
}

std::vector<Item> make_sweep(const sim::ModelConfig& m, const sim::ShardDims& d, std::int64_t tp,
                             const SweepOptions& o) {
  std::vector<Item> items;
  const auto grid = token_grid(o);
  // Held back: sizes between grid points (never measured for the tables).
  std::vector<std::int64_t> held;
  if (o.accuracy) {
    for (std::size_t i = 0; i + 1 < grid.size(); ++i) {
      const std::int64_t h = (grid[i] + grid[i + 1]) / 2 + o.align / 4 + 1;
      // Never a table size (a fine --align can put it on the grid): each key is one item.
      if (!std::binary_search(grid.begin(), grid.end(), h)) held.push_back(h);
    }
  }
  auto add_sizes = [&](auto add) {
    for (auto t : grid) add(t, false);
    for (auto t : held) add(t, true);
  };
  // GEMMs: the dense rows, and the held-back sizes that are not among them.
  const auto dense = gemm_rows(o);
  auto add_gemm_sizes = [&](auto add) {
    for (auto t : dense) add(t, false);
    for (auto t : held)
      if (!std::binary_search(dense.begin(), dense.end(), t)) add(t, true);
  };
  struct G {
    const char* name;
    std::int64_t n, k;
  };
  const G gemms[] = {{"qkv", d.qkv_n(), d.hidden},
                     {"o_proj", d.hidden, d.q_heads * d.head_dim},
                     {"gate_up", 2 * d.ffn, d.hidden},
                     {"down", d.hidden, d.ffn}};
  // One item per size (and held-back size) of an op that is a table over rows: GEMMs (m)
  // and row-wise ops.
  auto add_rows = [&](ItemKind kind, const std::string& table, const char* name, std::int64_t n,
                      std::int64_t k, const char* unit) {
    auto each = [&](auto add) {
      if (kind == ItemKind::Gemm) {
        add_gemm_sizes(add);  // the decode rows are among gemm_rows
      } else {
        const std::set<std::int64_t> decode(o.decode_rows.begin(), o.decode_rows.end());
        for (auto t : decode)
          if (!std::binary_search(grid.begin(), grid.end(), t)) add(t, false);
        add_sizes(add);
      }
    };
    each([&](std::int64_t t, bool hb) {
      Item it;
      it.kind = kind;
      it.name = name;
      it.m = t;
      it.n = n;
      it.k = k;
      it.held_back = hb;
      it.gelu = kind == ItemKind::Rowwise && std::string(name) == "silu_mul" &&
                m.activation == sim::ModelConfig::Activation::Gelu;
      it.key = table + "/" + name + "/" + unit + std::to_string(t);
      items.push_back(it);
    });
  };
  for (const auto& g : gemms) add_rows(ItemKind::Gemm, "gemm", g.name, g.n, g.k, "m");
  // The LM head (vocab-parallel: this rank's vocabulary slice): one row per request, so only
  // batch sizes: the decode rows and the grid's first rows (up to 4 x align; the first alone
  // with --quick). Not a table the planner's chunks read, so neither dense nor held back.
  if (d.vocab > 0) {
    std::set<std::int64_t> rows(o.decode_rows.begin(), o.decode_rows.end());
    for (std::int64_t t = o.align; t <= std::min(o.max_tokens, 4 * o.align); t *= 2) {
      rows.insert(t);
      if (o.quick) break;
    }
    for (const std::int64_t t : rows) {
      Item it;
      it.kind = ItemKind::Gemm;
      it.name = "lm_head";
      it.m = t;
      it.n = d.vocab;
      it.k = d.hidden;
      it.key = "gemm/lm_head/m" + std::to_string(t);
      items.push_back(it);
    }
  }
  // qkv is timed as the runtime's qkv op runs: the GEMM, the rotary kernel on its query and K
  // heads, then K and V of its rows written into the KV cache. Its keys say so, so that a time
  // of an older partial run without them is not resumed in its place.
  for (Item& it : items) {
    if (it.kind != ItemKind::Gemm || it.name != "qkv") continue;
    it.q_heads = d.q_heads;
    it.kv_heads = d.kv_heads;
    it.head_dim = d.head_dim;
    it.rope_dim = m.rotary_dim;
    it.qk_norm = m.qk_norm;
    it.key = std::string("gemm/qkv") + (m.qk_norm ? "+qk_norm" : "") + "+rope+kv_store/m" +
             std::to_string(it.m);
  }
  // A GEMM the model biases is timed with its bias in the epilogue, as the runtimes run it.
  for (Item& it : items) {
    if (it.kind != ItemKind::Gemm) continue;
    it.bias = (it.name == "qkv" && m.qkv_bias) || (it.name == "o_proj" && m.o_bias) ||
              ((it.name == "gate_up" || it.name == "down") && m.mlp_bias);
    if (it.bias) it.key += "+bias";
  }
  // Attention: a chunk of t tokens after prefixes of 0, t and 3t tokens (ISO's later chunks).
  add_sizes([&](std::int64_t t, bool hb) {
    for (std::int64_t mult : {0, 1, 3}) {
      const std::int64_t p = mult * t;
      if (p + t > o.max_tokens * 2) continue;
      if (o.quick && mult == 3) continue;
      Item it;
      it.kind = ItemKind::Attention;
      it.name = "attention";
      it.q_tokens = t;
      it.prefix = p;
      it.q_heads = d.q_heads;
      it.kv_heads = d.kv_heads;
      it.head_dim = d.head_dim;
      it.held_back = hb;
      it.key = "attention/q" + std::to_string(t) + "/p" + std::to_string(p);
      items.push_back(it);
    }
  });
  // Decode attention: one new token per request after a context of t tokens.
  add_sizes([&](std::int64_t t, bool hb) {
    for (std::int64_t reqs : {1, 8}) {
      Item it;
      it.kind = ItemKind::Attention;
      it.name = "attention";
      it.requests = reqs;
      it.q_tokens = 1;
      it.prefix = t;
      it.q_heads = d.q_heads;
      it.kv_heads = d.kv_heads;
      it.head_dim = d.head_dim;
      it.held_back = hb;
      it.key = "attention/decode/r" + std::to_string(reqs) + "/p" + std::to_string(t);
      items.push_back(it);
    }
  });
  struct R {
    const char* name;
    std::int64_t cols;
  };
  // add_rmsnorm: the residual add and the next norm in one kernel (--add-norm fused, the default).
  const R rows[] = {{"rmsnorm", d.hidden},
                    {"silu_mul", d.ffn},
                    {"residual_add", d.hidden},
                    {sim::kAddNormName, d.hidden}};
  for (const auto& r : rows) add_rows(ItemKind::Rowwise, "rowwise", r.name, r.cols, 0, "rows");
  if (tp > 1) {
    add_sizes([&](std::int64_t t, bool hb) {
      Item it;
      it.kind = ItemKind::AllReduce;
      it.name = "allreduce";
      it.elements = t * d.hidden;
      it.ranks = tp;
      it.held_back = hb;
      it.key = "allreduce/rows" + std::to_string(t) + "/r" + std::to_string(tp);
      items.push_back(it);
    });
  }
  // Interference: the layer's biggest GEMM at a mid-size chunk beside P comm workers, and a
  // comm-sized copy (the mid chunk's all-reduce, times `mult`) beside that GEMM — or beside
  // another op kind an all-reduce overlaps in a schedule: the mid chunk's attention after a
  // prefix of one chunk, or its rmsnorm.
  const std::int64_t mid = grid[grid.size() / 2];
  auto comm_beside = [&](const std::string& beside, std::int64_t workers, std::int64_t mult,
                         std::string key) {
    Item c;
    c.kind = ItemKind::CommBesideGemm;
    c.name = "comm";
    c.beside = beside;
    c.elements = mid * d.hidden * mult;
    c.workers = workers;
    if (beside == "gemm") {
      c.m = mid;
      c.n = 2 * d.ffn;
      c.k = d.hidden;
    } else if (beside == "attention") {
      c.q_tokens = mid;
      c.prefix = mid;
      c.q_heads = d.q_heads;
      c.kv_heads = d.kv_heads;
      c.head_dim = d.head_dim;
    } else {
      c.m = mid;
      c.n = d.hidden;
    }
    c.key = std::move(key);
    items.push_back(c);
  };
  for (auto p : o.comm_workers) {
    Item g;
    g.kind = ItemKind::GemmBesideComm;
    g.name = "gate_up";
    g.m = mid;
    g.n = 2 * d.ffn;
    g.k = d.hidden;
    g.workers = p;
    g.key = "interference/gemm_beside_comm/p" + std::to_string(p);
    items.push_back(g);
    comm_beside("gemm", p, 1, "interference/comm_beside_gemm/p" + std::to_string(p));
  }
  const std::int64_t mid_workers = o.comm_workers[o.comm_workers.size() / 2];
  auto series_key = [&](const std::string& beside, std::int64_t mult) {
    return "interference/comm_beside_" + beside + "/p" + std::to_string(mid_workers) + "/x" +
           std::to_string(mult);
  };
  for (auto mult : o.comm_lengths) {
    if (mult > 1) comm_beside("gemm", mid_workers, mult, series_key("gemm", mult));
  }
  for (const auto& kind : o.comm_beside_more) {
    for (std::int64_t mult : {1, 8}) comm_beside(kind, mid_workers, mult, series_key(kind, mult));
  }
  if (o.fragments) {
    for (auto p : o.comm_workers) {
      Item f;
      f.kind = ItemKind::Fragment;
      f.name = "fragment";
      f.q_tokens = mid;
      f.prefix = mid;
      f.q_heads = d.q_heads;
      f.kv_heads = d.kv_heads;
      f.head_dim = d.head_dim;
      f.m = mid;  // o_proj: mid x hidden x (q_heads x head_dim)
      f.n = d.hidden;
      f.k = d.q_heads * d.head_dim;
      f.elements = mid * d.hidden;  // the other chunk's all-reduce
      f.workers = p;
      f.key = "interference/fragment/p" + std::to_string(p);
      items.push_back(f);
    }
  }
  std::set<std::string> keys;
  for (const auto& it : items) {
    if (!keys.insert(it.key).second) {
      throw std::logic_error("profile sweep: the key " + it.key + " names two measurements");
    }
  }
  // Attention as the model scores it (Gemma's scale, Gemma-2's soft cap): the runtimes' kernel.
  for (Item& it : items) {
    it.attn_scale = static_cast<float>(m.attn_scale);
    it.attn_softcap = static_cast<float>(m.attn_softcap);
  }
  return items;
}

}  // namespace tpo::profiler
