// FLOP and byte counts of the graph's ops against values computed by hand (see the comments
// for the arithmetic), for Llama-2-70B at TP 8 and Llama-3.1-8B at TP 2.
#include <doctest/doctest.h>

#include "sim/simulate.h"

using namespace tpo::sim;

namespace {
const Op& find(const Schedule& s, OpCode code, int layer, int chunk) {
  for (const auto& op : s.ops) {
    if (op.code == code && op.layer == layer && op.chunk == chunk) return op;
  }
  FAIL("op not found");
  return s.ops.front();
}
Workload shipped(const char* model, const char* hw, std::int64_t tp, std::int64_t seq) {
  WorkloadOptions o;
  o.model = model;
  o.hardware = hw;
  o.tp = tp;
  o.seq = seq;
  o.layers = 1;
  return make_workload(o);
}
}  // namespace

TEST_CASE("llama2-70b TP8 prefill 4096: GEMM, attention and all-reduce counts") {
  const Workload w = shipped("llama2-70b", "a100x8", 8, 4096);
  const Schedule s = build_schedule(w, {StrategyKind::None});
  // qkv: 64/8 = 8 query heads + 2 x (8/8 = 1) KV heads, x 128 = 1280 columns, K = 8192.
  const Op& qkv = find(s, OpCode::Qkv, 0, 0);
  CHECK(qkv.m == 4096);
  CHECK(qkv.n == 1280);
  CHECK(qkv.k == 8192);
  CHECK(qkv.flops == 85899345920.0);  // 2 * 4096 * 1280 * 8192
  CHECK(qkv.bytes == 98566144.0);     // 2 * (4096*8192 + 8192*1280 + 4096*1280)
  // Causal attention over 4096 tokens: 4096 * 4097 / 2 = 8,390,656 (q, k) pairs per head.
  const Op& attn = find(s, OpCode::Attention, 0, 0);
  CHECK(attn.flops == 34368126976.0);  // 4 * 8 heads * 128 * 8,390,656
  CHECK(attn.bytes == 20971520.0);     // 2 * (2*4096*8*128 + 2*4096*1*128 + 2*4096*1*128)
  CHECK(find(s, OpCode::OProj, 0, 0).flops == 68719476736.0);    // 2 * 4096 * 8192 * 1024
  CHECK(find(s, OpCode::GateUp, 0, 0).flops == 481036337152.0);  // 2 * 4096 * 7168 * 8192
  CHECK(find(s, OpCode::Down, 0, 0).flops == 240518168576.0);    // 2 * 4096 * 8192 * 3584
  CHECK(find(s, OpCode::AllReduce, 0, 0).bytes == 67108864.0);   // 2 * 4096 * 8192
  CHECK(find(s, OpCode::AttnNorm, 0, 0).bytes == 2.0 * (2.0 * 4096 * 8192 + 8192));
}

TEST_CASE("llama3.1-8b TP2 ISO chunk 2 (600 + 400 tokens): attention with a KV prefix") {
  const Workload w = shipped("llama3.1-8b", "h100x8", 2, 1000);
  StrategySpec spec{StrategyKind::Iso, {600, 400}};
  const Schedule s = build_schedule(w, spec);
  const Op& a2 = find(s, OpCode::Attention, 0, 1);
  CHECK(a2.kv_prefix() == 600);
  // 400 * 600 + 400 * 401 / 2 = 320,200 pairs; 32/2 = 16 query heads, 8/2 = 4 KV heads.
  CHECK(a2.flops == 2623078400.0);  // 4 * 16 * 128 * 320,200
  CHECK(a2.bytes == 6144000.0);     // 2 * (2*400*16*128 + 2*1000*4*128 + 2*400*4*128)
  const Op& q2 = find(s, OpCode::Qkv, 0, 1);
  CHECK(q2.n == 3072);               // (16 + 2 * 4) * 128
  CHECK(q2.flops == 10066329600.0);  // 2 * 400 * 3072 * 4096
  CHECK(find(s, OpCode::GateUp, 0, 1).n == 14336);
}

TEST_CASE("KV heads are replicated when TP exceeds them") {
  const Workload w = shipped("llama2-70b", "h100x16", 16, 128);
  const ShardDims d = validate_workload(w);
  CHECK(d.q_heads == 4);
  CHECK(d.kv_heads == 1);
  CHECK(d.qkv_n() == (4 + 2) * 128);
}
