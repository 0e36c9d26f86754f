// Least-squares fits with Eigen.
#include "profiler/fit.h"

#include <Eigen/Dense>
#include <algorithm>
#include <map>

namespace tpo::profiler {

namespace {

sim::AlphaBeta alpha_beta(const std::vector<std::pair<double, double>>& pts) {
  // t = alpha + beta * bytes, least squares.
  Eigen::MatrixXd A(static_cast<Eigen::Index>(pts.size()), 2);
  Eigen::VectorXd y(static_cast<Eigen::Index>(pts.size()));
  for (std::size_t i = 0; i < pts.size(); ++i) {
    A(static_cast<Eigen::Index>(i), 0) = 1.0;
    A(static_cast<Eigen::Index>(i), 1) = pts[i].first;
    y(static_cast<Eigen::Index>(i)) = pts[i].second;
  }
  const Eigen::VectorXd x = A.colPivHouseholderQr().solve(y);
  sim::AlphaBeta f;
  f.lo_bytes = static_cast<std::int64_t>(pts.front().first);
  f.hi_bytes = static_cast<std::int64_t>(pts.back().first);
  f.alpha_us = x(0);
  f.beta_us_per_byte = x(1);
  if (f.alpha_us < 0) {  // a latency cannot be negative: fit the line through the origin
    const Eigen::VectorXd b = A.col(1);
    f.alpha_us = 0;
    f.beta_us_per_byte = b.dot(y) / b.dot(b);
  }
  return f;
}

}  // namespace

void fit_profile(sim::Profile& p) {
  p.allreduce_fit.clear();
  std::map<std::int64_t, std::vector<std::pair<double, double>>> by_ranks;
  for (const auto& a : p.allreduce) {
    by_ranks[a.ranks].emplace_back(static_cast<double>(a.bytes), a.t.median_us);
  }
  for (auto& [ranks, pts] : by_ranks) {
    std::sort(pts.begin(), pts.end());
    if (pts.size() < 2) continue;
    if (pts.size() < 4) {
      p.allreduce_fit.push_back(alpha_beta(pts));
      continue;
    }
    const std::size_t half = pts.size() / 2;
    p.allreduce_fit.push_back(alpha_beta({pts.begin(), pts.begin() + static_cast<long>(half) + 1}));
    p.allreduce_fit.push_back(alpha_beta({pts.begin() + static_cast<long>(half), pts.end()}));
  }
  // GEMM efficiency vs M: 1/eff - 1 = m_half / m, fitted through the origin over all (n, k).
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::pair<double, double>>> rates;
  for (const auto& g : p.gemm) {
    // The LM head is timed at batch sizes only (its best rate is far from the peak).
    if (g.t.median_us <= 0 || g.name == "lm_head") continue;
    const double flops = 2.0 * static_cast<double>(g.m * g.n) * static_cast<double>(g.k);
    rates[{g.n, g.k}].emplace_back(static_cast<double>(g.m), flops / g.t.median_us);
  }
  double sxx = 0, sxy = 0;
  for (const auto& [nk, pts] : rates) {
    double best = 0;
    for (const auto& [m, r] : pts) best = std::max(best, r);
    for (const auto& [m, r] : pts) {
      const double x = 1.0 / m, y = best / r - 1.0;
      sxx += x * x;
      sxy += x * y;
    }
  }
  p.gemm_m_half = sxx > 0 ? std::max(0.0, sxy / sxx) : 0.0;
}

}  // namespace tpo::profiler
