// A target machine: the GPU, the links inside a node and between nodes, and how overlapped
// ops slow each other. Loaded from configs/hardware/*.json ("tpo.hardware/1"); every number
// in those files cites its source, and interference factors are assumptions until a profile
// measures them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "sim/contention.h"
#include "sim/launch.h"

namespace tpo::sim {

struct LinkConfig {
  std::string cls;  // nvlink | pcie | pcie-no-p2p | host-shm | infiniband | none
  double allreduce_latency_us = 0;
  double busbw_gbps = 0;  // nccl-tests bus bandwidth, 1e9 bytes/s
  // Measured all-reduce times ("allreduce_table": nccl-tests' time per op, which includes its
  // kernel's start and drain), one table per rank count, ranks ascending, each with message
  // bytes ascending. At a table's rank count the analytical model reads it instead of
  // latency + bandwidth; empty: none given.
  struct Table {
    std::int64_t ranks = 0;
    std::vector<std::pair<double, double>> points;  // (bytes, us)
  };
  std::vector<Table> tables;
  // The table for `ranks`, or nullptr.
  const Table* table_for(std::int64_t ranks) const {
    for (const auto& t : tables) {
      if (t.ranks == ranks) return &t;
    }
    return nullptr;
  }
};

// Multipliers (>= 1) on an op's duration while it overlaps an op on the other stream.
struct SlowdownByKind {
  double gemm = 1;
  double attention = 1;
  double memory = 1;  // norms, elementwise ops
};

struct HardwareConfig {
  std::string name;
  std::string origin;
  std::string description;
  std::string gpu_name;
  bool is_cpu = false;  // gpu.kind "cpu": the runtime's CPU backend (cpu-host), not a GPU
  std::int64_t sms = 0;
  double bf16_dense_tflops = 0;  // at sm_clock_mhz when set, else as the file quotes it
  // The SM clock at which the file's bf16_dense_tflops is quoted (gpu.peak_clock_mhz; 0: not
  // given), and the clock a workload runs its GPUs at (--sm-clock; 0: as quoted). A locked or
  // capped clock scales the tensor-core rate (GEMMs, attention) and nothing else.
  double peak_clock_mhz = 0;
  double sm_clock_mhz = 0;
  double memory_bandwidth_gbps = 0;
  double memory_gib = 0;
  double launch_overhead_us = 0;  // host time of one eager launch call (every op kind)
  // GPU time every kernel adds to its work when kernels run back to back on one stream
  // (start, drain, the gap to the next): the analytical model's per-kernel term.
  double kernel_overhead_us = 0;
  double graph_launch_us = 0;  // host time of one CUDA graph launch until its first node runs
  // Efficiency assumptions of the analytical cost model.
  double gemm_max_efficiency = 0;
  std::int64_t gemm_tile_m = 128;
  std::int64_t gemm_tile_n = 128;
  double gemm_k_half = 0;  // GEMM efficiency factor K / (K + k_half)
  // Tile shapes the GEMM library picks from (rows, cols, efficiency relative to the best): the
  // model times each and takes the fastest, as the library's heuristic would. Default: the one
  // tile gemm_tile_m x gemm_tile_n.
  struct GemmTile {
    std::int64_t m = 128, n = 128;
    double efficiency = 1;
  };
  std::vector<GemmTile> gemm_tiles;
  // Stream-K: a GEMM with more thread blocks than SMs spreads its last partial wave over all
  // SMs instead of running it as a whole extra wave.
  bool gemm_stream_k = false;
  double gemm_overhead_us = 0;  // GPU time a GEMM kernel adds (default kernel_overhead_us)
  // GPU time a GEMM that splits K across thread blocks adds to sum its partial results: one
  // constant per such GEMM (e.g. a second kernel), whatever the split; 0: none. The model's tile
  // choice includes it.
  double gemm_split_k_us = 0;
  double attention_max_efficiency = 0;
  // Fused attention's efficiency rises with the keys each query block streams: at
  // attention_max x kv / (kv + attention_kv_half), kv the average keys per query (the prefix
  // plus half the chunk, causal). 0: flat at attention_max.
  double attention_kv_half = 0;
  double memory_efficiency = 0;
  // Memory-bound ops whose bytes fit in l2_resident_mib run at l2_gbps (0: not modelled).
  double l2_resident_mib = 0;
  double l2_gbps = 0;
  // Only ops that update their operand in place (the residual add) get L2 speed: an op that
  // writes a separate output runs at HBM speed at any size (measured on the H200).
  bool l2_in_place_only = false;
  // Norms run one row per thread block: fewer rows than SMs x this leave bandwidth unused
  // (0: not modelled).
  double norm_blocks_per_sm = 0;
  std::int64_t gpus_per_node = 0;
  std::int64_t nodes = 1;
  LinkConfig intra;
  LinkConfig inter;  // cls == "none" for single-node machines
  SlowdownByKind compute_under_comm;
  SlowdownByKind comm_under_compute;
  // The interference block's source says its factors are assumptions (every shipped file's
  // does: only a profile measures them).
  bool interference_assumed = false;
  // The contention model's parameters (the "contention" block; disabled where absent).
  ContentionParams contention;
  // Launch costs by execution mode (from launch_overhead_us and graph_launch_us).
  LaunchCosts launch;

  std::int64_t max_tp() const { return gpus_per_node * nodes; }  // GPUs in the machine
  // The node link's all-reduce table an all-reduce on `ranks` reads (the ranks inside one node),
  // or nullptr: none at that rank count, or no all-reduce (1 rank).
  const LinkConfig::Table* allreduce_table(std::int64_t ranks) const {
    return ranks > 1 ? intra.table_for(std::min(ranks, gpus_per_node)) : nullptr;
  }
};

// `field` names the option in errors ("hardware", or "emulate" for an emulation target).
HardwareConfig load_hardware(const std::string& spec, const std::string& field = "hardware");
// The same from a parsed file; `path` names it in errors (a file about to be written, checked
// before it is).
HardwareConfig hardware_from_json(const nlohmann::json& j, const std::string& path);
std::vector<std::string> shipped_hardware();
// The machine's name for headers: its `name`, and the file it came from where that file is
// named otherwise (a copied file keeps the name inside: "h100x8 (from my-machine.json)").
std::string hardware_label(const HardwareConfig& h);

// The model in a GPU's name, upper-cased: the first word (split at spaces, '-' and '_') of
// letters and digits only, with a digit, that is not a memory size or a form factor ("NVIDIA H100
// 80GB HBM3" and "NVIDIA H100 SXM5 80GB" -> "H100", "NVIDIA A100-SXM4-80GB" -> "A100", "NVIDIA
// GeForce RTX 4090" -> "4090", "NVIDIA GH200 480GB" -> "GH200"); a count ("8x") is not a model,
// and a model written with its form factor or "RTX" reads as the model ("H100SXM5" -> "H100",
// "RTX4090" -> "4090"); empty where there is none ("host CPU").
std::string gpu_model_token(const std::string& gpu_name);
// Whether two GPU names (nvidia-smi's, a hardware file's gpu.name) may be one part: the same
// model and the same form factor (PCIe, NVL, else SXM), or a name of no model (nothing to tell).
bool same_gpu_model(const std::string& a, const std::string& b);

}  // namespace tpo::sim
