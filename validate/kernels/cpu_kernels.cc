// CPU kernels. Eigen maps the caller's row-major buffers; nothing is copied.
#include "validate/kernels/cpu_kernels.h"

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

namespace tpo::validate::cpu {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

void gemm(const float* a, const float* b, float* c, std::int64_t m, std::int64_t n, std::int64_t k,
          bool accumulate, std::int64_t lda) {
  Eigen::Map<const RowMat, 0, Eigen::OuterStride<>> A(a, m, k,
                                                      Eigen::OuterStride<>(lda > 0 ? lda : k));
  Eigen::Map<const RowMat> B(b, k, n);
  Eigen::Map<RowMat> C(c, m, n);
  if (accumulate) {
    C.noalias() += A * B;
  } else {
    C.noalias() = A * B;
  }
}

void embed(const std::int32_t* ids, const float* table, std::int64_t first, std::int64_t rows,
           float* x, std::int64_t tokens, std::int64_t cols) {
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int64_t r = ids[t] - first;
    float* xr = x + t * cols;
    if (r >= 0 && r < rows) {
      std::copy_n(table + r * cols, cols, xr);
    } else {
      std::fill_n(xr, cols, 0.0f);
    }
  }
}

namespace {
// y = x / rms(x) * w over one row whose sum of squares is `ss`.
void normalize_row(const float* x, const float* w, float* y, std::int64_t cols, double ss,
                   float eps) {
  const float inv = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(cols)) + eps);
  for (std::int64_t c = 0; c < cols; ++c) y[c] = x[c] * inv * w[c];
}
}  // namespace

void rmsnorm(const float* x, const float* w, float* y, std::int64_t rows, std::int64_t cols,
             float eps) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    double ss = 0;
    for (std::int64_t c = 0; c < cols; ++c) ss += static_cast<double>(xr[c]) * xr[c];
    normalize_row(xr, w, y + r * cols, cols, ss, eps);
  }
}

void add_rmsnorm(float* x, const float* o, const float* w, float* y, std::int64_t rows,
                 std::int64_t cols, float eps) {
  for (std::int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * cols;
    const float* orow = o + r * cols;
    float* yr = y + r * cols;
    double ss = 0;
    for (std::int64_t c = 0; c < cols; ++c) {
      const float v = xr[c] + orow[c];  // a local: the store to xr need not be read back
      xr[c] = v;
      ss += static_cast<double>(v) * v;
    }
    normalize_row(xr, w, yr, cols, ss, eps);
  }
}

void head_rmsnorm(float* x, std::int64_t pitch, std::int64_t heads, std::int64_t head_dim,
                  const float* w, std::int64_t rows, float eps) {
  for (std::int64_t r = 0; r < rows; ++r)
    rmsnorm(x + r * pitch, w, x + r * pitch, heads, head_dim, eps);
}

void silu_mul(const float* gate_up, float* out, std::int64_t rows, std::int64_t ffn, bool gelu) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up + r * 2 * ffn;
    const float* u = g + ffn;
    float* o = out + r * ffn;
    if (gelu) {
      for (std::int64_t c = 0; c < ffn; ++c) o[c] = gelu_tanh(g[c]) * u[c];
    } else {
      for (std::int64_t c = 0; c < ffn; ++c) o[c] = g[c] / (1.0f + std::exp(-g[c])) * u[c];
    }
  }
}

void add_inplace(float* acc, const float* x, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) acc[i] += x[i];
}

void store_kv(const float* qkv, std::int64_t qkv_n, std::int64_t q_width, std::int64_t kv_width,
              std::int64_t rows, float* k, float* v, std::int64_t requests,
              std::int64_t dst_stride) {
  for (std::int64_t i = 0; i < requests; ++i) {
    for (std::int64_t t = 0; t < rows; ++t) {
      const float* src = qkv + (i * rows + t) * qkv_n + q_width;
      std::copy_n(src, kv_width, k + i * dst_stride + t * kv_width);
      std::copy_n(src + kv_width, kv_width, v + i * dst_stride + t * kv_width);
    }
  }
}

void rope(float* qkv, std::int64_t qkv_n, std::int64_t heads, std::int64_t head_dim,
          std::int64_t rot, std::int64_t rows, std::int64_t pos, const float* table,
          std::int64_t requests) {
  const std::int64_t half = rot / 2;
  for (std::int64_t r = 0; r < requests * rows; ++r) {
    const float* cs = table + (pos + r % rows) * rot;
    float* row = qkv + r * qkv_n;
    for (std::int64_t h = 0; h < heads; ++h) {
      float* x = row + h * head_dim;
      for (std::int64_t j = 0; j < half; ++j) {
        const float a = x[j], b = x[j + half], c = cs[j], s = cs[half + j];
        x[j] = a * c - b * s;
        x[j + half] = b * c + a * s;
      }
    }
  }
}

std::vector<float> rope_table(std::int64_t positions, std::int64_t rot, double theta) {
  std::vector<float> t(static_cast<std::size_t>(std::max<std::int64_t>(positions, 0) * rot));
  const std::int64_t half = rot / 2;
  for (std::int64_t j = 0; j < half; ++j) {
    const double inv_freq =
        std::pow(theta, -2.0 * static_cast<double>(j) / static_cast<double>(rot));
    for (std::int64_t p = 0; p < positions; ++p) {
      const double a = static_cast<double>(p) * inv_freq;
      t[static_cast<std::size_t>(p * rot + j)] = static_cast<float>(std::cos(a));
      t[static_cast<std::size_t>(p * rot + half + j)] = static_cast<float>(std::sin(a));
    }
  }
  return t;
}

void attention(const float* q, const float* k, const float* v, float* out,
               const AttentionShape& s) {
  const std::int64_t d = s.head_dim, group = s.q_heads / s.kv_heads;
  const float scale = s.score_scale(), cap = s.softcap;
  std::vector<float> score(static_cast<std::size_t>(s.prefix + s.q_tokens));
  for (std::int64_t r = 0; r < s.requests; ++r) {
    const float* kr = k + r * s.kv_capacity * s.kv_heads * d;
    const float* vr = v + r * s.kv_capacity * s.kv_heads * d;
    for (std::int64_t i = 0; i < s.q_tokens; ++i) {
      const std::int64_t first = s.first_key(i), keys = s.prefix + i + 1;
      for (std::int64_t h = 0; h < s.q_heads; ++h) {
        const std::int64_t kvh = h / group;
        const float* qv = q + (r * s.q_tokens + i) * s.q_stride() + h * d;
        float mx = -std::numeric_limits<float>::infinity();
        for (std::int64_t j = first; j < keys; ++j) {
          const float* kv = kr + (j * s.kv_heads + kvh) * d;
          float dot = 0;
          for (std::int64_t e = 0; e < d; ++e) dot += qv[e] * kv[e];
          const float sc = cap > 0 ? cap * std::tanh(dot * scale / cap) : dot * scale;
          score[static_cast<std::size_t>(j)] = sc;
          mx = std::max(mx, sc);
        }
        double sum = 0;
        for (std::int64_t j = first; j < keys; ++j) {
          const float p = std::exp(score[static_cast<std::size_t>(j)] - mx);
          score[static_cast<std::size_t>(j)] = p;
          sum += p;
        }
        float* o = out + ((r * s.q_tokens + i) * s.q_heads + h) * d;
        std::fill(o, o + d, 0.0f);
        const float inv = static_cast<float>(1.0 / sum);
        for (std::int64_t j = first; j < keys; ++j) {
          const float p = score[static_cast<std::size_t>(j)] * inv;
          const float* vv = vr + (j * s.kv_heads + kvh) * d;
          for (std::int64_t e = 0; e < d; ++e) o[e] += p * vv[e];
        }
      }
    }
  }
}

SharedAllReduce::SharedAllReduce(int ranks)
    : ranks_(ranks), bufs_(static_cast<std::size_t>(ranks), nullptr), sync_(ranks) {}

std::int64_t SharedAllReduce::arrive(int rank, float* buf) {
  bufs_[static_cast<std::size_t>(rank)] = buf;
  sync_.arrive_and_wait();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::int64_t SharedAllReduce::run(int rank, float* buf, std::int64_t n) {
  const std::int64_t all_arrived = arrive(rank, buf);
  auto slice = [&](int r) {
    return std::pair<std::int64_t, std::int64_t>{n * r / ranks_, n * (r + 1) / ranks_};
  };
  // Reduce-scatter: this rank sums its slice over every rank into its own buffer. Rank r
  // writes only slice r of its own buffer and reads only slice r of the others.
  const auto [b, e] = slice(rank);
  for (int o = 0; o < ranks_; ++o) {
    if (o == rank) continue;
    const float* src = bufs_[static_cast<std::size_t>(o)];
    for (std::int64_t i = b; i < e; ++i) buf[i] += src[i];
  }
  sync_.arrive_and_wait();
  // All-gather: copy every other rank's reduced slice.
  for (int o = 0; o < ranks_; ++o) {
    if (o == rank) continue;
    const auto [ob, oe] = slice(o);
    const float* src = bufs_[static_cast<std::size_t>(o)];
    std::copy(src + ob, src + oe, buf + ob);
  }
  sync_.arrive_and_wait();
  return all_arrived;
}

std::int64_t SharedAllReduce::gather(int rank, float* buf, std::int64_t per_rank) {
  const std::int64_t all_arrived = arrive(rank, buf);
  for (int o = 0; o < ranks_; ++o) {
    if (o == rank) continue;
    const float* src = bufs_[static_cast<std::size_t>(o)] + o * per_rank;
    std::copy(src, src + per_rank, buf + o * per_rank);
  }
  sync_.arrive_and_wait();
  return all_arrived;
}

}  // namespace tpo::validate::cpu
