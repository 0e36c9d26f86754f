// The cost model interface: an op's standalone duration, and how much it slows while it
// overlaps an op on the other stream of its rank. The analytical model (roofline with
// efficiency curves, from the hardware file) implements it now; a profile-based model
// (measured tables) will implement the same interface.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/collective.h"
#include "sim/contention.h"
#include "sim/hardware.h"
#include "sim/launch.h"
#include "sim/schedule.h"

namespace tpo::sim {

struct Workload;

class CostModel {
 public:
  virtual ~CostModel() = default;
  // Duration of the op alone on the machine, integer nanoseconds, launch overhead included.
  virtual std::int64_t standalone_ns(const Op& op) const = 0;
  // Multiplier (>= 1) on the op's duration while an op of kind `beside` runs on the other
  // stream of its rank.
  virtual double overlap_slowdown(const Op& op, OpKind beside) const = 0;
  virtual std::string name() const = 0;
  // Where the op's cost came from ("analytical", "measured", ...), for the report.
  virtual std::string origin(const Op& /*op*/) const { return name(); }
  // The contention model's parameters; null (or disabled): the fixed slowdown factors.
  virtual const ContentionParams* contention() const { return nullptr; }
  // What prices overlap, in words, for the reports: the contention model and where its
  // parameters come from, or the fixed slowdown factors and theirs ("" where neither applies).
  virtual std::string overlap_model() const { return ""; }
  // What prices the all-reduces of `w`, as a console line ("all-reduce: ..."; "" at TP 1):
  // the hardware file's links (allreduce_cost_line), or a profile's measured times.
  virtual std::string allreduce_text(const Workload& w) const;
  // Whether every GEMM of the model was timed at `m` rows (a measured profile); a model
  // that prices every size alike (the analytical one) answers true.
  virtual bool gemm_rows_measured(std::int64_t /*m*/) const { return true; }
  // How far a GEMM time read between measured rows can be off: the model's own estimate
  // (a profile: leave-one-out over its measured rows), 0 where nothing is interpolated.
  virtual double gemm_interpolation_error() const { return 0; }
  // Host launch costs (sim/launch.h): the hardware file's, or what a profile measured.
  virtual const LaunchCosts& launch() const {
    static const LaunchCosts kNone;  // nothing charged (test models)
    return kNone;
  }
  // How the schedule reaches the GPU; queued (launches hidden) unless set.
  ExecMode exec() const { return exec_; }
  void set_exec(ExecMode m) { exec_ = m; }

 private:
  ExecMode exec_ = ExecMode::Queued;
};

// An op's time as integer nanoseconds, checked: a time that is not finite or over 1000 s for
// one kernel comes from implausible workload or hardware numbers, and is refused (InputError)
// rather than overflowing the engine's integer clock.
std::int64_t checked_ns(double ns, const Op& op);

// Costs of a whole schedule, one entry per op, as the engine consumes them.
struct OpCosts {
  std::vector<std::int64_t> standalone_ns;
  // Per op, the slowdown while the op beside it is a GEMM [0], attention [1], or anything
  // else [2] (norms, elementwise ops, all-reduces); see slowdown_class().
  std::vector<std::array<double, 3>> slowdown;
  // With the contention model: what each op occupies, and the rules' parameters.
  std::vector<OpResources> resources;
  ContentionParams contention;
  // Eager and graph execution: the earliest start of each op (its launch); empty when queued.
  std::vector<std::int64_t> release_ns;
};
inline int slowdown_class(OpKind k) {
  return k == OpKind::Gemm ? 0 : (k == OpKind::Attention ? 1 : 2);
}
OpCosts cost_schedule(const Schedule& s, const CostModel& cm);

class AnalyticalCostModel final : public CostModel {
 public:
  AnalyticalCostModel(HardwareConfig hw, std::int64_t tp);
  std::int64_t standalone_ns(const Op& op) const override;
  double overlap_slowdown(const Op& op, OpKind beside) const override;
  std::string name() const override { return "analytical"; }
  const ContentionParams* contention() const override { return &contention_; }
  void set_contention(const ContentionParams& p) { contention_ = p; }
  std::string overlap_model() const override;
  const LaunchCosts& launch() const override { return hw_.launch; }
  const HardwareConfig& hardware() const { return hw_; }

  // Building blocks, exposed for tests and for the report's explanations (all in ns).
  double gemm_ns(std::int64_t m, std::int64_t n, std::int64_t k, double bytes) const;
  // busiest_block false: without the bound of a one-wave launch's busiest block (the profile
  // model's ratios between sizes of one curve, whose edge op is resized by FLOPs alone).
  double attention_ns(const Op& op, bool busiest_block = true) const;
  // standalone_ns with attention priced without that bound (the same for every other op).
  std::int64_t standalone_spread_ns(const Op& op) const;
  double memory_ns(double bytes) const;
  double rowwise_ns(const Op& op) const;  // norms and elementwise ops: L2 and row fill
  double allreduce_ns(const Collective& c) const;
  // An all-reduce's bandwidth term, inside and across nodes: the part a CTA budget below
  // comm_ctas_full slows (comm_budget_factor); its latency does not grow. Bus bytes over bus
  // bandwidth, or from a published table the part of its time that grows with the bytes.
  double allreduce_bandwidth_ns(const Collective& c) const;
  // The KV-cache write a qkv op does after its GEMM (one kernel: K and V of each row read from
  // the GEMM's output and written to the cache), per-kernel term included; 0 for other ops.
  double kv_store_ns(const Op& op) const;
  // A qkv op's rotary kernel (op.rope_dim > 0): memory-bound, one kernel; 0 for other ops.
  double rope_ns(const Op& op) const;
  // A qkv op's per-head query and key norms (op.qk_norm): memory-bound, two kernels.
  double qk_norm_ns(const Op& op) const;

 private:
  HardwareConfig hw_;
  std::int64_t tp_;
  ContentionParams contention_;
};

// What the analytical model charges for an all-reduce on `tp` ranks of `hw`, in words, for the
// reports: "all-reduce: the allreduce_table's times for 8 ranks (32 sizes) inside a
// node" or "all-reduce: 8 us latency + bytes at 476 GB/s bus bandwidth (nvlink)", saying when
// the file's table does not apply at `tp`, and the link across nodes where `tp` spans nodes.
// Empty at TP 1 (no all-reduce).
// `links_of`: the machine whose links were emulated (--emulate), named as their source.
std::string allreduce_cost_line(const HardwareConfig& hw, std::int64_t tp,
                                const std::string& links_of = "");
// "the contention model, from h200x8's contention block (a comm kernel holds 16 of 132 SMs)";
// `from` names where the parameters are.
std::string contention_model_text(const ContentionParams& p, const std::string& from);

}  // namespace tpo::sim
