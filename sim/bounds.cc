// The bounds table (see bounds.h). Generous: they reject the impossible, not the unusual.
#include "sim/bounds.h"

#include <cstdio>
#include <iterator>

#include "sim/error.h"

namespace tpo {

namespace {

constexpr double kPow2_20 = 1048576.0;

const FieldBound kBounds[] = {
    // Models (tpo.model/1 and Hugging Face config.json).
    {"num_hidden_layers", 1, 4096, false, "layers"},
    {"hidden_size", 1, kPow2_20, false, "values"},
    {"num_attention_heads", 1, 65536, false, "heads"},
    {"num_key_value_heads", 1, 65536, false, "heads"},
    {"head_dim", 1, 65536, false, "values"},
    {"intermediate_size", 1, 16 * kPow2_20, false, "values"},
    {"vocab_size", 1, 64 * kPow2_20, false, "tokens"},
    // Hardware (tpo.hardware/1).
    {"gpu.sms", 1, 4096, false, "SMs"},
    {"gpu.bf16_dense_tflops", 1e-3, 1e5, false, "TFLOP/s"},
    {"gpu.peak_clock_mhz", 100, 1e5, false, "MHz"},
    {"gpu.memory_bandwidth_gbps", 0.1, 1e6, false, "GB/s"},
    {"gpu.memory_gib", 0.01, 1e6, false, "GiB"},
    {"gpu.launch_overhead_us", 0, 1e6, false, "us (at most 1 s)"},
    {"gpu.kernel_overhead_us", 0, 1e6, false, "us (at most 1 s)"},
    {"graph_launch_us", 0, 1e6, false, "us (at most 1 s)"},
    {"eager_us.gemm", 0, 1e6, false, "us (at most 1 s)"},
    {"eager_us.attention", 0, 1e6, false, "us (at most 1 s)"},
    {"eager_us.norm", 0, 1e6, false, "us (at most 1 s)"},
    {"eager_us.elementwise", 0, 1e6, false, "us (at most 1 s)"},
    {"eager_us.allreduce", 0, 1e6, false, "us (at most 1 s)"},
    {"efficiency.gemm_max", 1e-3, 1, false, "fraction of peak"},
    {"efficiency.attention_max", 1e-3, 1, false, "fraction of peak"},
    {"efficiency.attention_kv_half", 0, 1e7, false, "tokens"},
    {"efficiency.memory", 1e-3, 1, false, "fraction of peak"},
    {"efficiency.gemm_tile_m", 1, 4096, false, "rows"},
    {"efficiency.gemm_tile_n", 1, 4096, false, "columns"},
    {"efficiency.gemm_k_half", 0, 1e6, false, "K"},
    {"efficiency.gemm_overhead_us", 0, 1e6, false, "us (at most 1 s)"},
    {"efficiency.gemm_split_k_us", 0, 1e6, false, "us (at most 1 s)"},
    {"efficiency.l2_resident_mib", 0, 1e6, false, "MiB"},
    {"efficiency.l2_gbps", 0, 1e7, false, "GB/s"},
    {"efficiency.norm_blocks_per_sm", 0, 1024, false, "thread blocks per SM"},
    {"gpus_per_node", 1, 4096, false, "GPUs"},
    {"nodes", 1, 1e5, false, "nodes"},
    {"allreduce_latency_us", 0, 1e6, false, "us (at most 1 s)"},
    {"busbw_gbps", 1e-3, 1e6, false, "GB/s"},
    {"compute_slowdown_under_comm.gemm", 1, 100, false, "x"},
    {"compute_slowdown_under_comm.attention", 1, 100, false, "x"},
    {"compute_slowdown_under_comm.memory", 1, 100, false, "x"},
    {"comm_slowdown_under_compute.gemm", 1, 100, false, "x"},
    {"comm_slowdown_under_compute.attention", 1, 100, false, "x"},
    {"comm_slowdown_under_compute.memory", 1, 100, false, "x"},
    {"contention.comm_ctas", 1, 4096, false, "CTAs"},
    {"contention.comm_ctas_full", 0, 4096, false, "CTAs"},
    {"gemm_cta_m", 1, 4096, false, "rows"},
    {"gemm_cta_n", 1, 4096, false, "columns"},
    {"hbm_gbps", 0, 1e6, true, "GB/s"},
    {"comm_hbm_gbps_per_cta", 0, 1e5, false, "GB/s"},
    {"compute_extra", 0, 100, false, "fraction"},
    {"comm_extra", 0, 100, false, "fraction"},
    // Profiles (tpo.profile/1): measured times and summaries.
    {"median_us", 0, 1e9, true, "us"},
    {"min_us", 0, 1e9, true, "us"},
    {"other_us", 0, 1e9, false, "us"},
    {"qkv_kv_store_width", 0, 65536 * 65536.0, false, "values (KV heads x head dim)"},
    {"qkv_rope_dim", 0, 65536, false, "values rotated per head"},
    {"qkv_rope_heads", 0, 65536, false, "heads"},
    {"attention_q_row_stride", 0, 65536 * 65536.0, false, "values (qkv width)"},
    {"attention_softcap", 0, 1e6, false, "(a soft cap on the scores)"},
    {"max_us", 0, 1e9, true, "us"},
    {"prefix", 0, 2147483648.0, false, "tokens"},
    {"fits.gemm_m_half", 0, 1e7, false, "rows"},
    // Measured: timing noise can put a ratio slightly below 1.
    {"compute_slowdown_under_comm", 0.1, 100, false, "x"},
    {"comm_slowdown_under_compute", 0.1, 100, false, "x"},
    // Plans: predicted times.
    {"predicted_us", 0, 1e15, true, "us"},
    {"none_us", 0, 1e15, true, "us"},
    {"measured_us", 0, 1e15, true, "us"},
};

bool ends_with_field(const std::string& path, const char* suffix) {
  const std::string s = suffix;
  if (path.size() < s.size() || path.compare(path.size() - s.size(), s.size(), s) != 0) {
    return false;
  }
  return path.size() == s.size() || path[path.size() - s.size() - 1] == '.';
}

}  // namespace

const FieldBound* bound_of(const std::string& dotted_field) {
  for (const auto& b : kBounds) {
    if (ends_with_field(dotted_field, b.field)) return &b;
  }
  return nullptr;
}

void check_bound(const std::string& file, const std::string& field, double x) {
  const FieldBound* b = bound_of(field);
  if (!b) return;
  const bool ok = (b->lo_open ? x > b->lo : x >= b->lo) && x <= b->hi;
  if (ok) return;
  char msg[200];
  std::snprintf(msg, sizeof msg, "%.15g is outside %s%.15g, %.15g] %s", x, b->lo_open ? "(" : "[",
                b->lo, b->hi, b->what);
  throw InputError(file, field, msg);
}

}  // namespace tpo
