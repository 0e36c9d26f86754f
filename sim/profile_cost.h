// The profile cost model: times come from a measured profile ("tpo.profile/1") where it has
// the op; between measured sizes it interpolates in log-log space; outside the measured
// range (or for ops the profile lacks) it uses the analytical model, scaled by the
// measured/analytical ratio at the nearest measured point when there is one. origin(op)
// says which of these produced each op's time, and the report carries it.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/cost_model.h"
#include "sim/profile.h"
#include "sim/workload.h"

namespace tpo::sim {

class ProfileCostModel final : public CostModel {
 public:
  ProfileCostModel(Profile p, HardwareConfig hw, std::int64_t tp);
  std::int64_t standalone_ns(const Op& op) const override;
  double overlap_slowdown(const Op& op, OpKind beside) const override;
  std::string name() const override { return "profile"; }
  // "measured" (a profiled size), "interpolated", "extrapolated" (analytical, scaled at the
  // edge of the measured range) or "analytical" (the profile has nothing like it).
  std::string origin(const Op& op) const override;
  const ContentionParams* contention() const override { return &contention_; }
  void set_contention(const ContentionParams& p) { contention_ = p; }
  std::string overlap_model() const override;
  std::string allreduce_text(const Workload& w) const override;
  const LaunchCosts& launch() const override { return launch_; }
  const Profile& profile() const { return p_; }
  // Rows at which every GEMM curve of the profile has a point.
  bool gemm_rows_measured(std::int64_t m) const override {
    return std::binary_search(gemm_rows_.begin(), gemm_rows_.end(), m);
  }
  // Leave-one-out: each GEMM point between two others read off the curve without it (log-log
  // between its neighbours), the median |read / measured - 1| over all such points; 0 where
  // no curve has three points. On a grid of 2^i and 1.5 x 2^i rows a left-out point's
  // neighbours lie twice as far apart as an interpolated op's; on a dense grid (every
  // multiple of --align up to 4096 rows) the median comes mostly from there, and may
  // understate the error of reading across the sparse rows above it.
  double gemm_interpolation_error() const override { return gemm_loo_; }

 private:
  using Curve = std::vector<std::pair<double, double>>;  // (size, us), sorted by size
  struct Estimate {
    double us;
    const char* origin;
  };
  Estimate estimate(const Op& op) const;
  Estimate on_curve(const Curve& c, double x, const Op& op) const;

  Profile p_;
  AnalyticalCostModel a_;
  std::map<std::pair<std::int64_t, std::int64_t>, Curve> gemm_;  // (n, k) -> m, layer GEMMs
  std::map<std::pair<std::int64_t, std::int64_t>, Curve> head_;  // the LM head's
  std::vector<std::int64_t> gemm_rows_;                          // sorted
  double gemm_loo_ = 0;
  // (q heads, kv heads, head dim, class) -> flops. Decode (one query per request) is its own
  // curve. Prefill points are kept on one curve per ratio of prefix to chunk length (class:
  // the ratio in eighths; the sweep measures 0, 1 and 3): a chunk without a prefix, one after
  // a prefix as long, and one after three times as long run at different rates per causal
  // FLOP (the H200 profiles' cuBLAS attention ~67, ~89 and ~100 TFLOP/s: without a prefix
  // it computes the masked half of the scores too). An op reads the curves of the two ratios
  // around its own at its FLOPs and interpolates their log times by its ratio; beyond the
  // measured ratios it reads the nearest. One curve over every prefill point missed a
  // 5120-token chunk by 19%, and one over every point with a prefix missed a 6016-token
  // chunk after 512 tokens by 16% (results/h200/calibration/README.md). kAnyPrefill holds
  // every prefill point, used beyond the measured ratios where fewer than two ratios have
  // curves of two points (so a profile of chunks without a prefix still prices one after a
  // prefix, labelled extrapolated).
  static constexpr int kDecode = -2, kAnyPrefill = -1;
  static int attn_class(std::int64_t q_tokens, std::int64_t prefix) {
    return q_tokens == 1 ? kDecode
                         : static_cast<int>(std::llround(8.0 * static_cast<double>(prefix) /
                                                         static_cast<double>(q_tokens)));
  }
  Estimate attention(const Op& op) const;
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, int>, Curve> attn_;
  std::map<std::pair<std::string, std::int64_t>, Curve> rowwise_;  // (name, cols) -> rows
  std::map<std::int64_t, Curve> allreduce_;                        // ranks -> elements
  // Communication's slowdown against its duration alone (us -> factor), by what runs beside
  // it: "gemm" (a short transfer waits for the GEMM's thread blocks to leave the SMs, a long
  // one mostly shares them; kept when measured at two lengths or more), "attention",
  // "rowwise". Kinds not measured use the GEMM's.
  std::map<std::string, Curve> comm_slowdown_;
  std::int64_t tp_;
  ContentionParams contention_;  // the profile's fitted values, else the hardware file's
  LaunchCosts launch_;           // the profile's measured launch costs, else the hardware file's
};

// The cost model for a workload: the profile at `profile_path` when one is given (it must
// have been measured at the workload's TP), else the analytical model. Throws InputError
// naming --profile when the profile does not fit the workload.
std::unique_ptr<CostModel> make_cost_model(const Workload& w, const std::string& profile_path);

// Whether some GEMM of the schedule runs at rows the cost model did not measure
// (CostModel::gemm_rows_measured): the planner's interpolation charge applies to it.
bool has_unmeasured_gemm_rows(const Schedule& s, const CostModel& cm);

// How many ops of a schedule each cost source priced ("measured", "interpolated", ...).
std::map<std::string, std::int64_t> cost_sources(const Schedule& s, const CostModel& cm);

}  // namespace tpo::sim
