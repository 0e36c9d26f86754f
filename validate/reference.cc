// The reference forward: the model's math written straight from its formulas, in float64,
// on all tokens at once, with no schedule, no chunks, no shared kernels — Eigen only for the
// matrix products. Each architecture's residual rule is written out as the papers state it:
//   standard:        x <- x + f_i(x)
//   ladder (arXiv 2501.06589): module i reads the residual without module i-1's output; that
//                    output is added after module i is computed; the last one at the end
//   parallel block:  x <- x + attn(n) + mlp(n) with n = rmsnorm(x), one all-reduce
// The runtime must match this within the tolerance, or the validation fails.
#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

#include "validate/kernels/cpu_kernels.h"
#include "validate/kernels/model_data.h"
#include "validate/runtime.h"

namespace tpo::validate {

namespace {

using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

Mat from(const std::vector<float>& v, std::int64_t rows, std::int64_t cols) {
  Mat m(rows, cols);
  for (std::int64_t i = 0; i < rows * cols; ++i) m.data()[i] = v[static_cast<std::size_t>(i)];
  return m;
}

// fn(begin, end) over [0, n) in contiguous blocks, one thread per core: the reference of a
// full-size shard (a GPU validation) is a teraflop of float64 work.
// Blocks hold at least `min_block` items.
template <class Fn>
void parallel_for(std::int64_t n, std::int64_t min_block, Fn fn) {
  const std::int64_t threads = std::clamp<std::int64_t>(std::thread::hardware_concurrency(), 1,
                                                        std::max<std::int64_t>(1, n / min_block));
  if (threads == 1) {
    fn(std::int64_t{0}, n);
    return;
  }
  // An exception in a block (std::bad_alloc from Eigen's temporaries) is rethrown here after
  // every thread has joined, not left to end the process in its thread.
  // A thread that cannot be started leaves the block to this one.
  std::vector<std::exception_ptr> failed(static_cast<std::size_t>(threads));
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads));
  for (std::int64_t t = 0; t < threads; ++t) {
    const std::int64_t b = n * t / threads, e = n * (t + 1) / threads;
    auto run = [=, &failed] {
      try {
        fn(b, e);
      } catch (...) {
        failed[static_cast<std::size_t>(t)] = std::current_exception();
      }
    };
    try {
      pool.emplace_back(run);
    } catch (const std::system_error&) {
      run();
    }
  }
  for (auto& th : pool) th.join();
  for (const auto& f : failed) {
    if (f) std::rethrow_exception(f);
  }
}

// a * b with the rows of a split over threads (Eigen itself runs single-threaded here).
Mat matmul(const Mat& a, const Mat& b) {
  Mat c(a.rows(), b.cols());
  parallel_for(a.rows(), 64, [&](std::int64_t r0, std::int64_t r1) {
    c.middleRows(r0, r1 - r0).noalias() = a.middleRows(r0, r1 - r0) * b;
  });
  return c;
}

Mat rmsnorm(const Mat& x, const std::vector<float>& w, double eps) {
  Mat y(x.rows(), x.cols());
  for (Eigen::Index r = 0; r < x.rows(); ++r) {
    const double ms = x.row(r).squaredNorm() / static_cast<double>(x.cols());
    const double inv = 1.0 / std::sqrt(ms + eps);
    for (Eigen::Index c = 0; c < x.cols(); ++c)
      y(r, c) = x(r, c) * inv * w[static_cast<std::size_t>(c)];
  }
  return y;
}

// x[t] += b for every row (an empty b: none).
void add_bias(Mat& x, const std::vector<float>& b) {
  if (b.empty()) return;
  for (Eigen::Index t = 0; t < x.rows(); ++t) {
    for (Eigen::Index c = 0; c < x.cols(); ++c) x(t, c) += b[static_cast<std::size_t>(c)];
  }
}

// Per-head RMSNorm of the query heads and the K heads (the layer's q_norm, k_norm weights).
// Every norm here and in the runtimes uses the model's rms_norm_eps and plain weights (Gemma's
// are 1 + w: the same work), and the runtimes are checked against this, not a checkpoint.
void head_norms(const ModelData& m, const LayerWeights& w, Mat& qkv) {
  const auto& d = m.d;
  if (!m.qk_norm) return;
  for (Eigen::Index t = 0; t < qkv.rows(); ++t) {
    for (std::int64_t h = 0; h < d.q_heads + d.kv_heads; ++h) {
      const auto& g = h < d.q_heads ? w.q_norm : w.k_norm;
      auto v = qkv.row(t).segment(h * d.head_dim, d.head_dim);
      const double inv = 1.0 / std::sqrt(v.squaredNorm() / static_cast<double>(d.head_dim) + m.eps);
      for (std::int64_t c = 0; c < d.head_dim; ++c) v(c) *= inv * g[static_cast<std::size_t>(c)];
    }
  }
}

// Rotary embeddings on the query and K heads of every new token (request b's token i at
// position context + i), from the data's table: rotate-half pairs (j, j + rotary_dim / 2).
void rotate(const ModelData& m, Mat& qkv) {
  const auto& d = m.d;
  const std::int64_t rot = m.rotary_dim, half = rot / 2;
  if (rot <= 0) return;
  for (std::int64_t t = 0; t < m.tokens; ++t) {
    const std::int64_t p = m.context + t % m.seq;
    for (std::int64_t h = 0; h < d.q_heads + d.kv_heads; ++h) {
      for (std::int64_t j = 0; j < half; ++j) {
        const double c = m.rope_table[static_cast<std::size_t>(p * rot + j)];
        const double s = m.rope_table[static_cast<std::size_t>(p * rot + half + j)];
        const double a = qkv(t, h * d.head_dim + j), b = qkv(t, h * d.head_dim + half + j);
        qkv(t, h * d.head_dim + j) = a * c - b * s;
        qkv(t, h * d.head_dim + half + j) = b * c + a * s;
      }
    }
  }
}

// Causal attention of one rank's heads over the cached prefix and all new tokens (over the
// layer's sliding window where it has one).
Mat attention(const ModelData& m, std::int64_t rank, std::int64_t layer, const Mat& qkv) {
  const auto& d = m.d;
  const std::int64_t hq = d.q_heads, hk = d.kv_heads, D = d.head_dim, group = hq / hk;
  const std::int64_t qd = hq * D, kvd = hk * D;
  const auto& k0 = m.k0[static_cast<std::size_t>(rank)][static_cast<std::size_t>(layer)];
  const auto& v0 = m.v0[static_cast<std::size_t>(rank)][static_cast<std::size_t>(layer)];
  const std::int64_t window = m.window.at(static_cast<std::size_t>(layer));
  Mat out = Mat::Zero(m.tokens, qd);
  const double scale = m.attn_scale > 0 ? m.attn_scale : 1.0 / std::sqrt(static_cast<double>(D));
  const double cap = m.attn_softcap;
  // Keys and values of each request at every position: the cached prefix, then the new tokens.
  std::vector<Mat> keys, values;
  for (std::int64_t b = 0; b < m.batch; ++b) {
    Mat kb(m.cap, kvd), vb(m.cap, kvd);
    for (std::int64_t p = 0; p < m.cap; ++p) {
      for (std::int64_t c = 0; c < kvd; ++c) {
        if (p < m.context) {
          const auto i = static_cast<std::size_t>((b * m.cap + p) * kvd + c);
          kb(p, c) = k0[i];
          vb(p, c) = v0[i];
        } else {
          kb(p, c) = qkv(b * m.seq + (p - m.context), qd + c);
          vb(p, c) = qkv(b * m.seq + (p - m.context), qd + kvd + c);
        }
      }
    }
    keys.push_back(std::move(kb));
    values.push_back(std::move(vb));
  }
  // Query row i of request b (position context + i) sees keys 0..context + i: softmax of the
  // scaled scores over those, times the values. Tasks are (request, head, block of rows).
  constexpr std::int64_t kRows = 256;
  const std::int64_t blocks = (m.seq + kRows - 1) / kRows;
  parallel_for(m.batch * hq * blocks, 1, [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t b = t / (hq * blocks), h = t / blocks % hq, i0 = t % blocks * kRows;
      const std::int64_t len = std::min(kRows, m.seq - i0), seen = m.context + i0 + len;
      const std::int64_t g = h / group;
      const auto bi = static_cast<std::size_t>(b);
      Mat sc = qkv.block(b * m.seq + i0, h * D, len, D) *
               keys[bi].block(0, g * D, seen, D).transpose() * scale;
      if (cap > 0) sc = (sc.array() / cap).tanh() * cap;
      for (std::int64_t r = 0; r < len; ++r) {
        // Keys first..visible - 1: all earlier positions, or the layer's sliding window.
        const std::int64_t visible = m.context + i0 + r + 1;
        const std::int64_t first = window > 0 && visible > window ? visible - window : 0;
        const double mx = sc.row(r).segment(first, visible - first).maxCoeff();
        double sum = 0;
        for (std::int64_t j = 0; j < seen; ++j) {
          sc(r, j) = j >= first && j < visible ? std::exp(sc(r, j) - mx) : 0.0;
          sum += sc(r, j);
        }
        sc.row(r) /= sum;
      }
      out.block(b * m.seq + i0, h * D, len, D) = sc * values[bi].block(0, g * D, seen, D);
    }
  });
  return out;
}

}  // namespace

std::vector<float> reference_forward(const sim::Workload& wl, const sim::StrategySpec& spec,
                                     std::uint64_t seed, std::int64_t ranks_summed) {
  const std::int64_t ranks = ranks_summed > 0 ? std::min(ranks_summed, wl.tp) : wl.tp;
  const auto data = shared_data(wl, seed, ranks);
  const ModelData& m = *data;
  const auto& d = m.d;
  const std::int64_t T = m.tokens, H = d.hidden;
  const sim::GraphShape& shape = sim::strategy(spec.kind).shape;
  const bool parallel = shape.parallel_block;
  const bool ladder = shape.ladder_residual;
  const std::int64_t first_ladder =
      !ladder ? m.layers : (spec.ladder_layers == 0 ? 0 : m.layers - spec.ladder_layers);

  // Sum over ranks of a module's row-parallel output (what the all-reduce produces).
  auto module = [&](const Mat& x, std::int64_t layer, bool attn, bool mlp) {
    Mat sum = Mat::Zero(T, H);
    for (std::int64_t r = 0; r < ranks; ++r) {
      const LayerWeights& w = m.w[static_cast<std::size_t>(r)][static_cast<std::size_t>(layer)];
      const Mat n = rmsnorm(x, (attn || parallel) ? w.attn_norm : w.mlp_norm, m.eps);
      if (attn) {
        Mat qkv = matmul(n, from(w.wqkv, H, d.qkv_n()));
        add_bias(qkv, w.bqkv);
        head_norms(m, w, qkv);
        rotate(m, qkv);
        Mat o = matmul(attention(m, r, layer, qkv), from(w.wo, d.q_heads * d.head_dim, H));
        add_bias(o, w.bo);  // rank 0's only
        sum += o;
      }
      if (mlp) {
        Mat gu = matmul(n, from(w.wgu, H, 2 * d.ffn));
        add_bias(gu, w.bgu);
        Mat act(T, d.ffn);
        for (std::int64_t t = 0; t < T; ++t) {
          for (std::int64_t c = 0; c < d.ffn; ++c) {
            const double g = gu(t, c), u = gu(t, d.ffn + c);
            act(t, c) = (m.gelu ? cpu::gelu_tanh(g) : g / (1.0 + std::exp(-g))) * u;
          }
        }
        Mat down = matmul(act, from(w.wd, d.ffn, H));
        add_bias(down, w.bd);  // rank 0's only
        sum += down;
      }
    }
    // Gemma's post-norm on the reduced output (a parallel block's: the attention's weight;
    // replicated, so rank 0's).
    if (m.post_norms) {
      const LayerWeights& w0 = m.w[0][static_cast<std::size_t>(layer)];
      return rmsnorm(sum, attn ? w0.post_attn_norm : w0.post_mlp_norm, m.eps);
    }
    return sum;
  };

  Mat x = from(m.x0, T, H);
  if (m.head) {  // the embedding: each token's row, from the slice that holds it
    x.setZero();
    for (std::int64_t t = 0; t < T; ++t) {
      const std::int64_t id = m.ids[static_cast<std::size_t>(t)];
      const std::int64_t s = m.vocab_slices > 1 ? id / m.vocab : 0;
      if (m.vocab_slices > 1 && s >= ranks) continue;  // a slice no rank here holds: zeros
      const auto& e = m.embed[static_cast<std::size_t>(s)];
      for (std::int64_t c = 0; c < H; ++c)
        x(t, c) = e[static_cast<std::size_t>((id - s * m.vocab) * H + c)];
    }
  }
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
  for (std::int64_t i = 0; i < T * H; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<float>(x.data()[i]);
  if (!m.head) return out;
  // The final norm and the LM head on each request's last position: logits [batch][slice x
  // vocab], a slice no rank here holds left zero.
  Mat last(m.batch, H);
  for (std::int64_t b = 0; b < m.batch; ++b) last.row(b) = x.row(b * m.seq + m.seq - 1);
  const Mat n = rmsnorm(last, m.final_norm, m.eps);
  const std::int64_t held = std::min(m.vocab_slices, ranks);
  std::vector<Mat> logits;
  for (std::int64_t s = 0; s < held; ++s)
    logits.push_back(matmul(n, from(m.lm_head[static_cast<std::size_t>(s)], H, m.vocab)));
  for (std::int64_t b = 0; b < m.batch; ++b) {
    for (std::int64_t s = 0; s < m.vocab_slices; ++s) {
      for (std::int64_t v = 0; v < m.vocab; ++v) {
        out.push_back(s < held ? static_cast<float>(logits[static_cast<std::size_t>(s)](b, v))
                               : 0.0f);
      }
    }
  }
  return out;
}

}  // namespace tpo::validate
