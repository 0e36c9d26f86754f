// A measured profile ("tpo.profile/1"): per-op time tables measured by `tpo profile` on one
// device, interference factors measured the same way, and fits. One struct for the
// profiler (which writes it) and the profile cost model (which reads it), so the schema has
// one definition. Shapes are keys; times are medians in microseconds.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/schedule.h"

namespace tpo::sim {

struct Timing {
  double median_us = 0;
  double min_us = 0;
  double max_us = 0;
  std::int64_t reps = 0;
};

struct GemmPoint {
  std::string name;  // qkv, o_proj, gate_up, down
  std::int64_t m = 0, n = 0, k = 0;
  Timing t;
  std::string kernel;  // the library kernel measured (cuBLASLt's algorithm), where known
  // Timed with the model's bias in the epilogue, as the runtimes run it since 2026-12-04 (false:
  // without; the cost model takes the epilogue as free either way: n values read).
  bool bias = false;
};
struct AttentionPoint {
  std::int64_t requests = 1, q_tokens = 0, prefix = 0;
  std::int64_t q_heads = 0, kv_heads = 0, head_dim = 0;
  double flops = 0;
  Timing t;
};
struct RowwisePoint {
  std::string name;  // rmsnorm, silu_mul, residual_add, add_rmsnorm
  std::int64_t rows = 0, cols = 0;
  Timing t;
};
struct AllReducePoint {
  std::int64_t elements = 0;
  std::int64_t ranks = 0;
  std::int64_t bytes = 0;  // elements x element size of the profile's dtype
  Timing t;
};
struct InterferencePoint {
  std::string victim;  // "gemm" or "comm"
  std::string beside;  // what ran beside it: "copy" (P workers/CTAs), "allreduce", "gemm"
  std::int64_t workers = 0;
  std::string shape;  // human-readable shape of the victim
  double alone_us = 0;
  double beside_us = 0;
  // The other side's time alone, where the profiler measured it (a fragment's all-reduce).
  double other_us = 0;
  // A comm victim's bytes (the copy's; read once, written once): written by profiles since
  // 2026-12-04, added to the two committed H200 profiles from the sweep's definition; 0 where
  // not known.
  std::int64_t bytes = 0;
  double slowdown() const { return alone_us > 0 ? beside_us / alone_us : 1.0; }
};
struct AlphaBeta {  // t = alpha + beta * bytes over [lo_bytes, hi_bytes]
  std::int64_t lo_bytes = 0, hi_bytes = 0;
  double alpha_us = 0;
  double beta_us_per_byte = 0;
};

struct Profile {
  std::string origin;  // file it was read from
  nlohmann::json device =
      nlohmann::json::object();  // backend, name, driver, runtime and library versions
  nlohmann::json options = nlohmann::json::object();  // options of the run that made it
  std::string date, git_sha, tool_version;
  std::string dtype = "fp32";  // element type the kernels ran in
  std::string model;
  std::int64_t tp = 1;
  std::vector<GemmPoint> gemm;
  // When the qkv times include the KV-cache write that the runtime's qkv op does after its
  // GEMM: the elements per row of K (and of V) written (local KV heads x head dim). 0: the GEMM
  // alone (profiles made before 2026-12-02); the cost model then adds the analytical write.
  std::int64_t qkv_kv_store_width = 0;
  // When the qkv times also include the rotary kernel the runtime's qkv op runs between the
  // GEMM and the KV-cache write: the values it rotates per query and K head. 0: none (profiles
  // made before 2026-12-04); the cost model then adds the analytical kernel where the graph
  // runs one.
  std::int64_t qkv_rope_dim = 0, qkv_rope_heads = 0;  // values per head; query + K heads
  // When the qkv times also include the per-head query and key norms (a Qwen3 or Gemma-3
  // profile made since 2026-12-04); false: the cost model adds the analytical norms.
  bool qkv_qk_norm = false;
  // Values between one query token's Q and the next's as attention was timed: Q read in place
  // in the fused qkv rows ((q heads + 2 KV heads) x head dim), as the runtimes read it since
  // 2026-12-02. 0: packed Q (older profiles; their runtime gathered Q first with an untimed
  // copy). Provenance only: the cost model reads the attention times as they are.
  std::int64_t attention_q_row_stride = 0;
  // The soft cap attention was timed with (Gemma-2's attn_logit_softcapping; 0: none), in
  // profiles made since 2026-12-04; empty in older ones, which timed attention without one.
  std::optional<double> attention_softcap;
  std::vector<AttentionPoint> attention;
  std::vector<RowwisePoint> rowwise;
  std::vector<AllReducePoint> allreduce;
  std::vector<InterferencePoint> interference;
  // How far ahead of the timed op the other op of each pairwise interference run started (µs):
  // 30 in CUDA profiles made since 2026-12-05 (the profiler has started the other op 30 µs
  // ahead since b0556b8, 2026-11-29); empty in older profiles, whose runs (the committed H200
  // ones, made by 80be430) released both ops together, so which took the SMs first was a race.
  std::optional<double> interference_head_start_us;
  std::vector<AlphaBeta> allreduce_fit;
  // Fitted GEMM efficiency vs M: achieved FLOP/s / best achieved, eff(m) = m / (m + m_half).
  double gemm_m_half = 0;
  // Summaries used by the cost model (1.0 when not measured).
  double compute_slowdown_under_comm = 1.0;
  double comm_slowdown_under_compute = 1.0;
  // Held-back check of the profile model (see `tpo profile`), when it was run.
  nlohmann::json accuracy;
  // The analytical model of the --hardware file against the same measurements.
  nlohmann::json analytical_vs_measured;
  // Contention-model parameters fitted on measured schedules (`tpo calibrate`), with the fit's
  // errors on the cases used and on those kept out; null when not calibrated.
  nlohmann::json contention;
  // Launch costs measured on the machine (sim/launch.h's "launch" block); null when not.
  nlohmann::json launch;
};

nlohmann::ordered_json profile_to_json(const Profile& p);
// Throws InputError naming the file and the field.
// The name a profile's row-wise entry has for an op ("rmsnorm" for every norm), or nullptr for
// an op that is not row-wise. GEMM entries are named by op_code_name.
const char* rowwise_name(OpCode c);
// The row-wise entry of a residual add fused with the norm after it (Op::norm_after): one kernel,
// timed by `tpo profile` since 2026-12-04 (older profiles price it from their residual_add and
// rmsnorm entries).
inline constexpr const char* kAddNormName = "add_rmsnorm";

Profile profile_from_json(const nlohmann::json& j, const std::string& file);
Profile load_profile(const std::string& path);
// The attention kernel a profile timed: its device's attention_kernel ("cudnn-sdpa",
// "cublas-batched"); a CUDA profile without one was made before the fused kernel existed, so
// "cublas-batched"; else "cpu".
std::string profiled_attention_kernel(const Profile& p);

}  // namespace tpo::sim
