// Seeded model data for validation runs.
#include "validate/model_data.h"

#include <cmath>
#include <random>

namespace tpo::validate {

namespace {
std::vector<float> uniform(std::int64_t n, float scale, std::mt19937_64& rng, float offset = 0) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = offset + u(rng);
  return v;
}

}  // namespace

ModelData make_data(const sim::Workload& w, std::uint64_t seed) {
  ModelData m;
  m.d = sim::validate_workload(w);
  m.tp = w.tp;
  m.layers = w.layers;
  m.batch = w.batch;
  m.seq = w.seq;
  m.context = w.context;
  m.cap = w.context + w.seq;
  m.tokens = w.batch * w.seq;
  const auto& d = m.d;
  const std::int64_t qd = d.q_heads * d.head_dim, kvd = d.kv_heads * d.head_dim;
  std::mt19937_64 rng(seed);
  m.w.resize(static_cast<std::size_t>(w.tp));
  m.k0.resize(static_cast<std::size_t>(w.tp));
  m.v0.resize(static_cast<std::size_t>(w.tp));
  const float sh = 1.0f / std::sqrt(static_cast<float>(d.hidden));
  for (std::int64_t r = 0; r < w.tp; ++r) {
    for (std::int64_t l = 0; l < w.layers; ++l) {
      LayerWeights lw;
      lw.attn_norm = uniform(d.hidden, 0.1f, rng, 1.0f);
      lw.wqkv = uniform(d.hidden * d.qkv_n(), sh, rng);
      lw.wo = uniform(qd * d.hidden, 1.0f / std::sqrt(static_cast<float>(qd * w.tp)), rng);
      lw.mlp_norm = uniform(d.hidden, 0.1f, rng, 1.0f);
      lw.wgu = uniform(d.hidden * 2 * d.ffn, sh, rng);
      lw.wd = uniform(d.ffn * d.hidden, 1.0f / std::sqrt(static_cast<float>(d.ffn * w.tp)), rng);
      m.w[static_cast<std::size_t>(r)].push_back(std::move(lw));
      std::vector<float> k(static_cast<std::size_t>(m.batch * m.cap * kvd), 0.0f), v = k;
      for (std::int64_t b = 0; b < m.batch; ++b) {
        for (std::int64_t p = 0; p < m.context; ++p) {
          for (std::int64_t e = 0; e < kvd; ++e) {
            const auto i = static_cast<std::size_t>((b * m.cap + p) * kvd + e);
            k[i] = std::uniform_real_distribution<float>(-1, 1)(rng);
            v[i] = std::uniform_real_distribution<float>(-1, 1)(rng);
          }
        }
      }
      m.k0[static_cast<std::size_t>(r)].push_back(std::move(k));
      m.v0[static_cast<std::size_t>(r)].push_back(std::move(v));
    }
  }
  m.x0 = uniform(m.tokens * d.hidden, 1.0f, rng);
  return m;
}


}  // namespace tpo::validate
