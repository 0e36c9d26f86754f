// Workload validation: every impossible combination is reported with the field to fix.
#include "sim/workload.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "sim/error.h"
#include "sim/format.h"

namespace tpo::sim {

const char* phase_name(Phase p) {
  return p == Phase::Prefill ? "prefill" : "decode";
}

namespace {

// TP against the machine and the model's heads and FFN.
void check_tp(const Workload& w) {
  const auto& m = w.model;
  const std::string t = std::to_string(w.tp);
  if (w.tp < 1) throw FieldError("tp", std::to_string(w.tp), "must be >= 1");
  if (w.tp > w.hardware.max_tp()) {
    throw FieldError("tp", t,
                     "exceeds the GPUs of hardware '" + w.hardware.name + "' (" +
                         std::to_string(w.hardware.max_tp()) + ": nodes x gpus_per_node" +
                         (w.hardware.origin.empty() ? "" : " in " + w.hardware.origin) + ")");
  }
  if (w.tp > w.hardware.gpus_per_node && w.tp % w.hardware.gpus_per_node != 0) {
    throw FieldError("tp", t,
                     "spans nodes, so it must be a multiple of gpus_per_node (" +
                         std::to_string(w.hardware.gpus_per_node) + ")");
  }
  if (m.heads % w.tp != 0) {
    throw InputError(m.origin, "num_attention_heads",
                     std::to_string(m.heads) + " heads cannot be split over TP " + t +
                         "; choose a TP that divides it");
  }
  if (m.ffn % w.tp != 0) {
    throw InputError(m.origin, "intermediate_size",
                     std::to_string(m.ffn) + " is not divisible by TP " + t);
  }
  if (!(m.kv_heads % w.tp == 0 || w.tp % m.kv_heads == 0)) {
    throw InputError(m.origin, "num_key_value_heads",
                     std::to_string(m.kv_heads) +
                         " KV heads can be neither split nor replicated "
                         "evenly over TP " +
                         t);
  }
}

// Batch, prompt, context and layers.
void check_sizes(const Workload& w) {
  const auto& m = w.model;
  if (w.batch < 1) throw FieldError("batch", std::to_string(w.batch), "must be >= 1");
  if (w.seq < 1) throw FieldError("seq", std::to_string(w.seq), "must be >= 1");
  if (w.context < 0) throw FieldError("context", std::to_string(w.context), "must be >= 0");
  if (w.phase == Phase::Decode && w.context < 1) {
    throw FieldError("context", std::to_string(w.context),
                     "a decode step reads a KV cache of at least one token (the prompt): give a "
                     "context of 1 or more");
  }
  if (w.phase == Phase::Decode && w.seq != 1) {
    throw FieldError("seq", std::to_string(w.seq), "decode generates one token per step");
  }
  if (w.layers < 1 || w.layers > m.num_layers) {
    throw FieldError("layers", std::to_string(w.layers),
                     "must be between 1 and the model's " + std::to_string(m.num_layers) +
                         " (or 0, the default: all of them)");
  }
  constexpr std::int64_t kMaxTokens = std::int64_t{1} << 31;
  for (const auto& [field, v] :
       {std::pair{"seq", w.seq}, std::pair{"context", w.context}, std::pair{"batch", w.batch}}) {
    if (v > kMaxTokens) {
      throw FieldError(field, std::to_string(v), "exceeds 2^31; nothing that large fits a GPU");
    }
  }
  if (w.batch * (w.seq + w.context) > kMaxTokens) {
    // Blame the largest of the three: the one a user most likely mistyped.
    const auto [field, v] =
        w.context > std::max(w.seq, w.batch)
            ? std::pair{"context", w.context}
            : (w.seq >= w.batch ? std::pair{"seq", w.seq} : std::pair{"batch", w.batch});
    throw FieldError(field, std::to_string(v),
                     "batch x (seq + context) tokens exceeds 2^31; nothing that large fits a GPU");
  }
}

}  // namespace

ShardDims validate_workload(const Workload& w) {
  check_tp(w);
  check_sizes(w);
  const auto& m = w.model;
  const std::string t = std::to_string(w.tp);
  ShardDims d;
  d.q_heads = m.heads / w.tp;
  d.kv_heads = m.kv_heads >= w.tp ? m.kv_heads / w.tp : 1;
  d.head_dim = m.head_dim;
  d.hidden = m.hidden;
  d.ffn = m.ffn / w.tp;
  d.vocab = w.vocab_replicated ? m.vocab : (m.vocab + w.tp - 1) / w.tp;
  // Does it fit? bf16 weights of the whole model's shard plus the KV cache per GPU. A CPU rank
  // (the CPU runtime) holds only the layers the run builds (--layers), in fp32, and the
  // embedding and LM head only where it runs them (--embed-head). Per rank, as for a GPU: the
  // CPU runtime's ranks share one host's memory, so a run may need up to tp times this (an
  // approximation; a run that still runs out of memory says so and exits 1).
  const bool cpu = w.hardware.is_cpu;
  const std::int64_t held = cpu ? std::min(w.layers, m.num_layers) : m.num_layers;
  const double value_bytes = cpu ? 4.0 : 2.0;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const double per_layer =
      static_cast<double>(d.hidden * d.qkv_n() + d.q_heads * d.head_dim * d.hidden +
                          3 * d.hidden * d.ffn + 2 * d.hidden);
  // (The CPU runtime keeps a tied model's LM head apart from its embedding table.)
  const double embeddings = cpu && !w.embed_head ? 0.0
                                                 : (m.tied_embeddings && !cpu ? 1.0 : 2.0) *
                                                       static_cast<double>(d.vocab * d.hidden);
  const double weights = value_bytes * (static_cast<double>(held) * per_layer + embeddings);
  // Positions cached over all layers: every one in a full-attention layer; in a sliding-window
  // layer the new tokens and the window before them (a cache that drops what no query can see
  // any more: vLLM V1's hybrid KV-cache manager, transformers' hybrid cache).
  double positions = 0;
  for (std::int64_t l = 0; l < held; ++l) {
    const std::int64_t win = m.window_of(l);
    // The CPU runtime caches every position, and holds the prefix twice (the data's and its
    // own copy).
    positions += cpu ? static_cast<double>(2 * w.context + w.seq)
                     : static_cast<double>(win > 0 ? std::min(w.context, win - 1) + w.seq
                                                   : w.context + w.seq);
  }
  const double kv = 2.0 * value_bytes * static_cast<double>(w.batch) * positions *
                    static_cast<double>(d.kv_heads * d.head_dim);
  if (weights + kv > w.hardware.memory_gib * gib) {
    char msg[256];
    std::snprintf(msg, sizeof msg,
                  "needs %.1f GiB %s (%s weights %.1f + KV cache %.1f) but a %s has "
                  "%.1f GiB; ",
                  (weights + kv) / gib, cpu ? "per rank" : "per GPU", cpu ? "fp32" : "bf16",
                  weights / gib, kv / gib, w.hardware.gpu_name.c_str(), w.hardware.memory_gib);
    if (weights > w.hardware.memory_gib * gib) {
      throw FieldError(
          "tp", t,
          std::string(msg) +
              (cpu ? "run fewer --layers (each holds " +
                         fmt("%.3g", value_bytes * per_layer / gib) + " GiB per rank), " +
                         (w.embed_head ? "leave out --embed-head, " : "") +
                         "or a shorter --seq or --context"
                   : "raise tp or choose larger GPUs"));
    }
    // In decode the tokens are the context's (seq is the one new token).
    const bool decode = w.phase == Phase::Decode;
    throw FieldError(decode ? "context" : "seq", std::to_string(decode ? w.context : w.seq),
                     std::string(msg) + "lower the batch, the prompt or the context (batch " +
                         std::to_string(w.batch) + " x " + std::to_string(w.seq + w.context) +
                         " tokens)");
  }
  return d;
}

namespace {

// A locked or capped SM clock: the tensor-core rate (GEMMs and attention) scales with it from the
// clock the file's peak is quoted at. HBM bandwidth has its own clock and is held; so are the
// per-kernel overheads and the L2 rate, which this does not model.
void apply_sm_clock(const WorkloadOptions& o, HardwareConfig* h) {
  const std::string v = std::to_string(o.sm_clock);
  if (h->is_cpu) {
    throw FieldError("sm_clock", v, "hardware " + h->name + " is a CPU: it has no SM clock");
  }
  if (h->peak_clock_mhz <= 0) {
    throw FieldError("sm_clock", v,
                     "hardware " + h->name + " (" + h->origin +
                         ") does not say at which SM clock its bf16_dense_tflops is quoted: add "
                         "gpu.peak_clock_mhz to a copy of it");
  }
  // With a profile: refused by make_cost_model where the profile holds compute times.
  const double peak = h->peak_clock_mhz;
  if (o.sm_clock < 100 || static_cast<double>(o.sm_clock) > 1.5 * peak) {
    char range[112];
    std::snprintf(range, sizeof range, "must be between 100 and %.0f MHz (1.5 times the %.0f MHz ",
                  1.5 * peak, peak);
    throw FieldError("sm_clock", v,
                     std::string(range) + "at which " + h->name + "'s peak is quoted), or 0");
  }
  h->sm_clock_mhz = static_cast<double>(o.sm_clock);
  h->bf16_dense_tflops *= h->sm_clock_mhz / peak;
}

}  // namespace

Workload make_workload(const WorkloadOptions& o) {
  Workload w;
  w.model = load_model(o.model);
  w.hardware = load_hardware(o.hardware);
  w.tp = o.tp;
  if (o.phase == "prefill") {
    w.phase = Phase::Prefill;
    w.seq = o.seq;
    w.context = o.context < 0 ? 0 : o.context;
  } else if (o.phase == "decode") {
    w.phase = Phase::Decode;
    w.seq = 1;
    w.context = o.context < 0 ? o.seq : o.context;
  } else {
    throw FieldError("phase", o.phase, "must be prefill or decode");
  }
  w.batch = o.batch;
  w.layers = o.layers == 0 ? w.model.num_layers : o.layers;
  w.embed_head = o.embed_head;
  if (o.comm_ctas != 0 && w.hardware.is_cpu) {
    throw FieldError("comm_ctas", std::to_string(o.comm_ctas),
                     "applies to GPUs (the SMs the comm kernels hold); '" + w.hardware.name +
                         "' is a CPU: leave it out");
  }
  if (o.comm_ctas < 0 || (o.comm_ctas > 0 && o.comm_ctas >= w.hardware.sms)) {
    throw FieldError("comm_ctas", std::to_string(o.comm_ctas),
                     "must be between 1 and the GPU's SMs - 1 (" +
                         std::to_string(w.hardware.sms - 1) + "), or 0 for the default");
  }
  if (o.comm_ctas > 0) w.hardware.contention.comm_ctas = o.comm_ctas;
  if (o.sm_clock != 0) apply_sm_clock(o, &w.hardware);
  w.exec = parse_exec_mode(o.exec);
  if (w.exec == ExecMode::Graph && w.hardware.is_cpu) {
    throw FieldError(
        "exec", o.exec,
        "hardware " + w.hardware.name + " is a CPU: CUDA graphs need a GPU (use queued or eager)");
  }
  if (o.rope != "kernel" && o.rope != "none") {
    throw FieldError("rope", o.rope,
                     "must be kernel (a rotary kernel after each qkv GEMM) or none (not run or "
                     "timed: fused into attention)");
  }
  w.rope = o.rope == "kernel";
  if (o.vocab != "sharded" && o.vocab != "replicated") {
    throw FieldError("vocab", o.vocab,
                     "must be sharded (vocab-parallel embedding and LM head) or replicated (whole "
                     "on every GPU)");
  }
  w.vocab_replicated = o.vocab == "replicated";
  if (o.add_norm != "fused" && o.add_norm != "separate") {
    throw FieldError("add_norm", o.add_norm,
                     "must be fused (one kernel adds to the residual and normalizes it) or "
                     "separate (an add kernel, then a norm kernel)");
  }
  w.fused_add_norm = o.add_norm == "fused";
  if (o.allreduce_fusion != "none" && o.allreduce_fusion != "add-norm") {
    throw FieldError("allreduce_fusion", o.allreduce_fusion,
                     "must be none (the residual add a kernel of its own) or add-norm (the "
                     "all-reduce's kernel adds to the residual and runs the next norm)");
  }
  w.allreduce_add = o.allreduce_fusion == "add-norm";
  // Compute is this machine's; the all-reduces are the target machine's: its links (and so
  // its all-reduce times) replace the running machine's.
  const HardwareConfig target =
      o.emulate.empty() ? HardwareConfig{} : load_hardware(o.emulate, "emulate");
  if (!o.emulate.empty() && target.name != w.hardware.name) {
    if (w.tp > target.max_tp()) {
      throw FieldError("emulate", o.emulate,
                       "has " + std::to_string(target.max_tp()) + " GPUs, fewer than TP " +
                           std::to_string(w.tp));
    }
    w.hardware.gpus_per_node = target.gpus_per_node;
    w.hardware.nodes = target.nodes;
    w.hardware.intra = target.intra;
    w.hardware.inter = target.inter;
    w.links_of = target.name;
  }
  try {
    validate_workload(w);
  } catch (const FieldError& e) {
    // A decode step's context given as --seq (its default) is blamed on what was typed.
    if (e.name() == "context" && w.phase == Phase::Decode && o.context < 0) {
      throw FieldError("seq", e.value(), e.problem());
    }
    throw;
  }
  return w;
}

WorkloadOptions explicit_options(const WorkloadOptions& o, const Workload& w) {
  WorkloadOptions e = o;
  e.seq = w.phase == Phase::Prefill ? w.seq : w.context;
  e.context = w.context;
  e.layers = w.layers;
  e.embed_head = w.embed_head;
  return e;
}

}  // namespace tpo::sim
