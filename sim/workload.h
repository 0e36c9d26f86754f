// What is being run: a model sharded over `tp` GPUs of a machine, in one phase. The shard
// dimensions (local heads, local FFN width) are derived and checked here, once.
#pragma once

#include <cstdint>
#include <string>

#include "sim/hardware.h"
#include "sim/model.h"

namespace tpo::sim {

enum class Phase { Prefill, Decode };
const char* phase_name(Phase p);

struct Workload {
  ModelConfig model;
  HardwareConfig hardware;
  std::int64_t tp = 1;
  Phase phase = Phase::Prefill;
  std::int64_t batch = 1;    // requests
  std::int64_t seq = 1;      // prefill: new tokens per request; decode: 1
  std::int64_t context = 0;  // tokens already in the KV cache per request
  std::int64_t layers = 0;   // layers simulated (<= model.num_layers)
  bool embed_head = false;   // include embedding, final norm and LM head
};

// Per-rank shard sizes under TP. KV heads are replicated when tp exceeds them, as vLLM and
// SGLang do; query heads and the FFN must divide evenly.
struct ShardDims {
  std::int64_t q_heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t hidden = 0;
  std::int64_t ffn = 0;
  std::int64_t vocab = 0;  // rounded up (vocab-parallel padding)
  std::int64_t qkv_n() const { return (q_heads + 2 * kv_heads) * head_dim; }
};

// Throws InputError (naming the option or the model file) when the workload is impossible.
ShardDims validate_workload(const Workload& w);

}  // namespace tpo::sim
