// Test helpers: hand-made configs and a toy cost model whose costs are easy to add by hand.
#pragma once

#include <string>

#include "sim/cost_model.h"
#include "sim/error.h"
#include "sim/workload.h"

namespace tpo::test {

// The message of the InputError `fn` throws, or "(no error)".
std::string error_of(auto&& fn) {
  try {
    fn();
  } catch (const tpo::InputError& e) {
    return e.what();
  }
  return "(no error)";
}

inline sim::ModelConfig toy_model() {
  sim::ModelConfig m;
  m.name = "toy";
  m.origin = "toy.json";
  m.num_layers = 8;
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 2;
  m.head_dim = 16;
  m.rotary_dim = 16;  // as a loaded config would have it (rotary on the whole head)
  m.ffn = 128;
  m.vocab = 100;
  return m;
}

inline sim::HardwareConfig toy_hardware() {
  sim::HardwareConfig h;
  h.name = "toyhw";
  h.origin = "toyhw.json";
  h.gpu_name = "toy";
  h.sms = 2;
  h.bf16_dense_tflops = 0.002;  // 2 FLOP/ns in all, 1 per SM
  h.memory_bandwidth_gbps = 1e9;
  h.memory_gib = 1;
  h.launch_overhead_us = 0;
  h.gemm_max_efficiency = 1;
  h.gemm_tile_m = 128;
  h.gemm_tile_n = 128;
  h.gemm_k_half = 0;
  h.attention_max_efficiency = 1;
  h.memory_efficiency = 1;
  h.gpus_per_node = 8;
  h.intra = sim::LinkConfig{"nvlink", 1.0, 10.0, {}};
  h.inter = sim::LinkConfig{"none", 0, 0, {}};
  return h;
}

// Toy hardware whose HBM moves 1 byte per ns and whose every kernel costs 1 us more: a
// memory-bound kernel's time reads as its bytes + 1000.
inline sim::HardwareConfig byte_per_ns_hardware() {
  sim::HardwareConfig h = toy_hardware();
  h.memory_bandwidth_gbps = 1;
  h.kernel_overhead_us = 1;
  return h;
}

// A qkv op: the GEMM of m rows (n x k), writing kv_width values of K (and of V) per row into
// the KV cache.
inline sim::Op qkv_op(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t kv_width) {
  sim::Op op;
  op.code = sim::OpCode::Qkv;
  op.kind = sim::OpKind::Gemm;
  sim::set_gemm_work(op, m, n, k, false);
  op.kv_width = kv_width;
  return op;
}

inline sim::Workload toy_workload(std::int64_t seq, std::int64_t layers = 1) {
  sim::Workload w;
  w.model = toy_model();
  w.hardware = toy_hardware();
  w.tp = 2;
  w.seq = seq;
  w.batch = 1;
  w.layers = layers;
  // The hand-derived timelines count the residual add and the norm after it as two ops.
  w.fused_add_norm = false;
  return w;
}

// Costs in ns per token of the op's rows: norm 1, qkv 2, attention 1, o_proj 2, gate_up 3,
// silu 1, down 2, residual 1, all-reduce 3. Slowdowns: `compute` for compute ops beside
// comm, `comm` for comm ops beside compute.
class ToyCost final : public sim::CostModel {
 public:
  explicit ToyCost(double compute = 1.0, double comm = 1.0) : compute_(compute), comm_(comm) {}
  std::int64_t standalone_ns(const sim::Op& op) const override {
    using sim::OpCode;
    std::int64_t per = 1;
    switch (op.code) {
      case OpCode::Qkv:
      case OpCode::OProj:
      case OpCode::Down:
        per = 2;
        break;
      case OpCode::GateUp:
      case OpCode::AllReduce:
        per = 3;
        break;
      default:
        per = 1;
    }
    return per * op.tokens();
  }
  double overlap_slowdown(const sim::Op& op, sim::OpKind) const override {
    return op.kind == sim::OpKind::AllReduce ? comm_ : compute_;
  }
  std::string name() const override { return "toy"; }

 private:
  double compute_, comm_;
};

}  // namespace tpo::test
