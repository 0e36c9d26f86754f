// The contention model: what two kernels overlapping on one GPU share, by rule rather than by a
// fixed slowdown factor. A comm kernel (NCCL's channels, or the emulated all-reduce's copy)
// holds P SMs for its whole run; a GEMM or attention kernel beside it runs its waves of thread
// blocks on the S - P SMs left (so a one-wave kernel of S blocks needs two waves); a comm kernel
// that arrives while such a kernel holds every SM gets SMs only as the kernel's current wave
// retires (thread blocks are not preempted; the comm stream's priority gives it the first SMs
// freed); and ops that stream HBM share its bandwidth. The fluid engine re-rates both ops
// whenever the running set changes. Parameters come from the hardware file (datasheet values
// and labelled assumptions) or, fitted on measured schedules, from a profile (`tpo calibrate`).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/schedule.h"

namespace tpo::sim {

struct ContentionParams {
  bool enabled = false;
  std::int64_t sms = 0;         // SMs of the GPU
  std::int64_t comm_ctas = 16;  // SMs a comm kernel holds (CTAs, one per SM)
  // CTAs at which a collective reaches its link's bus bandwidth; with fewer its bandwidth term
  // scales by comm_ctas / comm_ctas_full (0: the budget does not change the comm's time).
  std::int64_t comm_ctas_full = 0;
  std::int64_t gemm_cta_m = 128;  // output tile of one GEMM thread block (rows x cols): sets how
  std::int64_t gemm_cta_n = 256;  // many waves a GEMM runs
  // gemm_fill: a GEMM with fewer tiles than SMs still fills every SM (split-K, persistent
  // kernels), so any SM taken costs it; otherwise its tiles alone count. stream_k: a partial
  // wave is spread over the SMs (waves are fractional, not rounded up).
  bool gemm_fill = true;
  bool stream_k = false;
  // extra_wave: a kernel of W waves beside a comm kernel takes one wave more, (W + 1) / W of
  // its time (W at least 1), and at least S / (S - P) — instead of its waves re-quantized
  // over the S - P SMs left (which gives a sawtooth the measurements do not show). It is the
  // rate the H200 schedules' GEMMs ran at beside the copy on 16 CTAs, op by op
  // (results/h200/inschedule_gemms.py): measured at P = 16 only; its form at other budgets is
  // an assumption.
  bool extra_wave = false;
  double hbm_gbps = 0;  // HBM bandwidth the ops share (GB/s = bytes/ns)
  // A GEMM or attention kernel that alone draws at least this share of hbm_gbps (its bytes
  // over its standalone time) is memory-bound: its blocks wait on HBM, not on SMs, so beside a
  // comm kernel it takes no extra wave (beside_comm 1) and only shares HBM; it still holds its
  // SMs, so a comm kernel arriving waits for its wave. 0: every such kernel is SM-bound.
  double memory_bound_share = 0;
  double comm_hbm_gbps_per_cta = 0;  // HBM bandwidth a comm kernel draws per CTA
  double compute_extra = 0;  // further slowdown of a compute kernel beside a comm kernel (L2)
  double comm_extra = 0;     // further slowdown of a comm kernel beside a compute kernel
  // How attention's thread blocks are counted: false, a fused kernel (one block per 128 query
  // rows per head); true, the cuBLAS batched attention (the score GEMM's tiles, keys x query
  // rows per head, of the GEMM tile above) that the CUDA runtime ran before cuDNN's. Not a
  // fitted value: set from the profile's attention kernel (ProfileCostModel).
  bool attention_batched_gemm = false;
  std::string source;  // where the values come from, for reports
};

// What one op occupies, for the engine.
struct OpResources {
  // SM-bound kernels: thread blocks / SMs (>= 1 where they fill every SM: GEMMs under gemm_fill,
  // the batched attention; below 1 for a fused attention of fewer blocks); 0 for memory-bound ops
  float waves = 0;
  float hbm_gbps = 0;  // bandwidth it draws alone
  bool comm = false;   // holds comm_ctas SMs for its whole run
  // wave_factor(waves, sms, comm_ctas, stream_k, extra_wave) under its parameters: its
  // slowdown beside a comm kernel, kept so the engine need not recompute it at each re-rating
  // (0: not computed; the engine then computes it).
  double beside_comm = 0;
};

OpResources op_resources(const Op& op, std::int64_t standalone_ns, const ContentionParams& p);

// How much longer a collective's bandwidth term takes on the budget `p.comm_ctas` (>= 1).
double comm_budget_factor(const ContentionParams& p);

// Whether a kernel of `waves` waves (blocks / sms) has no more blocks than the sms - taken SMs
// left beside a comm kernel (so it never waits for SMs, nor makes one wait).
inline bool fits_beside(double waves, std::int64_t sms, std::int64_t taken) {
  return waves * static_cast<double>(sms) <= static_cast<double>(sms - taken) + 1e-3;
}
// The slowdown of an SM-bound kernel of `waves` waves when `taken` of `sms` SMs are held.
double wave_factor(double waves, std::int64_t sms, std::int64_t taken, bool stream_k = false,
                   bool extra_wave = false);

// The comm budget used when none is given and the default (16) is not below `sms`: half the
// SMs, at least one (cpu-host's 2 cores: 1).
inline std::int64_t default_comm_ctas(std::int64_t sms) {
  return sms > 2 ? sms / 2 : 1;
}

// Reads a "contention" JSON block (hardware file or profile); `base` supplies what it omits.
ContentionParams contention_from_json(const nlohmann::json& j, const std::string& file,
                                      const std::string& path, ContentionParams base);
nlohmann::ordered_json contention_json(const ContentionParams& p);

}  // namespace tpo::sim
