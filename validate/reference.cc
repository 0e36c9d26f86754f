// The reference forward: the model's math written straight from its formulas, in float64,
// on all tokens at once, with no schedule, no chunks, no shared kernels — Eigen only for the
// matrix products. Each architecture's residual rule is written out as the papers state it:
//   standard:        x <- x + f_i(x)
//   ladder (arXiv 2501.06589): module i reads the residual without module i-1's output; that
//                    output is added after module i is computed; the last one at the end
//   parallel block:  x <- x + attn(n) + mlp(n) with n = rmsnorm(x), one all-reduce
// The runtime must match this within the tolerance, or the validation fails.
#include <Eigen/Dense>
#include <cmath>
#include <vector>

#include "validate/model_data.h"
#include "validate/runtime.h"

namespace tpo::validate {

namespace {

using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

Mat from(const std::vector<float>& v, std::int64_t rows, std::int64_t cols) {
  Mat m(rows, cols);
  for (std::int64_t i = 0; i < rows * cols; ++i) m.data()[i] = v[static_cast<std::size_t>(i)];
  return m;
}

Mat rmsnorm(const Mat& x, const std::vector<float>& w) {
  Mat y(x.rows(), x.cols());
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const double ms = x.row(r).squaredNorm() / static_cast<double>(x.cols());
    const double inv = 1.0 / std::sqrt(ms + 1e-5);
    for (Eigen::Index c = 0; c < x.cols(); ++c) y(r, c) = x(r, c) * inv * w[static_cast<std::size_t>(c)];
  }
  return y;
}

// Causal attention of one rank's heads over the cached prefix and all new tokens.
Mat attention(const ModelData& m, std::int64_t rank, std::int64_t layer, const Mat& qkv) {
  const auto& d = m.d;
  const std::int64_t hq = d.q_heads, hk = d.kv_heads, D = d.head_dim, group = hq / hk;
  const std::int64_t qd = hq * D, kvd = hk * D;
  const auto& k0 = m.k0[static_cast<std::size_t>(rank)][static_cast<std::size_t>(layer)];
  const auto& v0 = m.v0[static_cast<std::size_t>(rank)][static_cast<std::size_t>(layer)];
  Mat out = Mat::Zero(m.tokens, qd);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  // Key/value of request b at absolute position p, head g, element e.
  auto key = [&](std::int64_t b, std::int64_t p, std::int64_t g, std::int64_t e, bool value) {
    if (p < m.context) {
      const auto& c = value ? v0 : k0;
      return static_cast<double>(c[static_cast<std::size_t>((b * m.cap + p) * kvd + g * D + e)]);
    }
    return qkv(b * m.seq + (p - m.context), qd + (value ? kvd : 0) + g * D + e);
  };
  std::vector<double> w;
  for (std::int64_t b = 0; b < m.batch; ++b) {
    for (std::int64_t i = 0; i < m.seq; ++i) {
      const std::int64_t row = b * m.seq + i, pos = m.context + i;  // sees keys 0..pos
      for (std::int64_t h = 0; h < hq; ++h) {
        const std::int64_t g = h / group;
        w.assign(static_cast<std::size_t>(pos + 1), 0.0);
        double mx = -1e300;
        for (std::int64_t j = 0; j <= pos; ++j) {
          double s = 0;
          for (std::int64_t e = 0; e < D; ++e) s += qkv(row, h * D + e) * key(b, j, g, e, false);
          w[static_cast<std::size_t>(j)] = s * scale;
          mx = std::max(mx, s * scale);
        }
        double sum = 0;
        for (auto& x : w) sum += (x = std::exp(x - mx));
        for (std::int64_t j = 0; j <= pos; ++j) {
          const double p = w[static_cast<std::size_t>(j)] / sum;
          for (std::int64_t e = 0; e < D; ++e) out(row, h * D + e) += p * key(b, j, g, e, true);
        }
      }
    }
  }
  return out;
}

}  // namespace

std::vector<float> reference_forward(const sim::Workload& wl, const sim::StrategySpec& spec,
                                     std::uint64_t seed, std::int64_t ranks_summed) {
  const std::int64_t ranks = ranks_summed > 0 ? std::min(ranks_summed, wl.tp) : wl.tp;
  const ModelData m = make_data(wl, seed, ranks);
  const auto& d = m.d;
  const std::int64_t T = m.tokens, H = d.hidden;
  const bool parallel = spec.kind == sim::StrategyKind::ParallelBlock;
  const bool ladder =
      spec.kind == sim::StrategyKind::Ladder || spec.kind == sim::StrategyKind::IsoLadder;
  const std::int64_t first_ladder =
      !ladder ? m.layers : (spec.ladder_layers == 0 ? 0 : m.layers - spec.ladder_layers);

  // Sum over ranks of a module's row-parallel output (what the all-reduce produces).
  auto module = [&](const Mat& x, std::int64_t layer, bool attn, bool mlp) {
    Mat sum = Mat::Zero(T, H);
    for (std::int64_t r = 0; r < ranks; ++r) {
      const LayerWeights& w = m.w[static_cast<std::size_t>(r)][static_cast<std::size_t>(layer)];
      const Mat n = rmsnorm(x, (attn || parallel) ? w.attn_norm : w.mlp_norm);
      if (attn) {
        const Mat qkv = n * from(w.wqkv, H, d.qkv_n());
        sum += attention(m, r, layer, qkv) * from(w.wo, d.q_heads * d.head_dim, H);
      }
      if (mlp) {
        const Mat gu = n * from(w.wgu, H, 2 * d.ffn);
        Mat act(T, d.ffn);
        for (std::int64_t t = 0; t < T; ++t) {
          for (std::int64_t c = 0; c < d.ffn; ++c) {
            const double g = gu(t, c), u = gu(t, d.ffn + c);
            act(t, c) = g / (1.0 + std::exp(-g)) * u;
          }
        }
        sum += act * from(w.wd, d.ffn, H);
      }
    }
    return sum;
  };

  Mat x = from(m.x0, T, H);
  Mat pending;
  bool has_pending = false;
  for (std::int64_t l = 0; l < m.layers; ++l) {
    if (parallel) {
      x += module(x, l, true, true);
      continue;
    }
    for (bool attn : {true, false}) {
      if (l >= first_ladder) {  // ladder: compute from x without the previous module's output
        Mat out = module(x, l, attn, !attn);
        if (has_pending) x += pending;
        pending = std::move(out);
        has_pending = true;
      } else {
        if (has_pending) {
          x += pending;
          has_pending = false;
        }
        x += module(x, l, attn, !attn);
      }
    }
  }
  if (has_pending) x += pending;
  std::vector<float> out(static_cast<std::size_t>(T * H));
  for (std::int64_t i = 0; i < T * H; ++i) out[static_cast<std::size_t>(i)] = static_cast<float>(x.data()[i]);
  return out;
}

}  // namespace tpo::validate
