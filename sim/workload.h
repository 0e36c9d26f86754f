// What is being run: a model sharded over `tp` GPUs of a machine, in one phase. The options
// (names and numbers, as a user gives them) are one struct, bound once by the CLI, held by
// simulate, plan, validate and profile, and written into every plan point; make_workload
// resolves them (configs loaded, defaults applied, everything checked). The shard dimensions
// (local heads, local FFN width) are derived and checked here, once.
#pragma once

#include <cstdint>
#include <string>

#include "sim/hardware.h"
#include "sim/model.h"

namespace tpo::sim {

enum class Phase { Prefill, Decode };
const char* phase_name(Phase p);

// The workload as given. Field names are the ones errors (FieldError) and plan files use.
struct WorkloadOptions {
  std::string model = "llama2-70b";    // shipped name, tpo model JSON or HF config.json
  std::string hardware = "rtx4090x8";  // shipped name or hardware JSON: the machine that runs
  std::int64_t tp = 8;
  std::string phase = "prefill";  // prefill | decode
  std::int64_t batch = 1;         // requests
  std::int64_t seq = 4096;        // prefill: prompt tokens; decode: context when context < 0
  std::int64_t context = -1;      // cached tokens per request; -1: prefill 0, decode seq
  std::int64_t layers = 0;        // layers simulated; 0: all of the model's
  bool embed_head = false;        // include embedding, final norm and LM head
  std::string profile;            // measured profile (tpo profile); empty: analytical model
  // Emulated communication: the machine whose all-reduce each copy kernel imitates; empty: the
  // hardware's own. Compute is predicted for `hardware`, the all-reduces for this machine.
  std::string emulate;
  // SMs (CTAs) the comm kernels hold: NCCL's CTA budget, or the emulated copy kernel's CTAs.
  // 0: the hardware file's default (contention.comm_ctas, 16 where it says nothing).
  std::int64_t comm_ctas = 0;
  // The GPUs' SM clock in MHz when locked or capped (nvidia-smi -lgc): the analytical model's
  // tensor-core rate scales from the hardware file's gpu.peak_clock_mhz to it. 0: as quoted.
  std::int64_t sm_clock = 0;
  // How the schedule reaches the GPU (sim/launch.h): queued | eager | graph.
  std::string exec = "queued";
  // Rotary position embeddings: kernel (their own memory-bound kernel after each qkv GEMM, as
  // vLLM and SGLang run them) | none (not run, not timed: what an engine that fuses them into
  // its attention kernel adds, about nothing; and every run and plan recorded before
  // 2026-12-04, which a file without the field is read as).
  std::string rope = "kernel";
  // The embedding and LM head with --embed-head: sharded (vocab-parallel, as vLLM runs them: the
  // embedding's rows summed by an all-reduce, the logits gathered) | replicated (every GPU holds
  // and runs them whole, no collective: gpt-fast, the ladder paper's runs).
  std::string vocab = "sharded";
  // A residual add and the norm after it: fused (one kernel that adds and normalizes, vLLM's and
  // SGLang's fused_add_rms_norm, what torch.compile makes of the two) | separate (two kernels:
  // Hugging Face transformers' eager forward; and every run and plan recorded before the option
  // (2026-12-04), which a file without the field is read as).
  std::string add_norm = "fused";
  // What an all-reduce's kernel also does: none | add-norm (it adds the reduced output to the
  // residual and, with --add-norm fused, runs the next norm: TensorRT-LLM's fused all-reduce,
  // FlashInfer's all-reduce fusion in vLLM and SGLang, TokenWeave). Files without it: none.
  std::string allreduce_fusion = "none";
  bool operator==(const WorkloadOptions&) const = default;
};

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
  std::string links_of;      // emulated: the machine whose links replaced the hardware's
  ExecMode exec = ExecMode::Queued;
  bool rope = true;               // a rotary kernel after each qkv GEMM (WorkloadOptions::rope)
  bool vocab_replicated = false;  // WorkloadOptions::vocab
  bool fused_add_norm = true;     // WorkloadOptions::add_norm
  bool allreduce_add = false;     // WorkloadOptions::allreduce_fusion == "add-norm"
};

// Per-rank shard sizes under TP. KV heads are replicated when tp exceeds them, as vLLM and
// SGLang do; query heads and the FFN must divide evenly.
struct ShardDims {
  std::int64_t q_heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t hidden = 0;
  std::int64_t ffn = 0;
  std::int64_t vocab = 0;  // rounded up (vocab-parallel padding); the whole when replicated
  std::int64_t qkv_n() const { return (q_heads + 2 * kv_heads) * head_dim; }
};

// Throws FieldError (naming the field) or InputError (naming the model file) when the workload
// is impossible.
ShardDims validate_workload(const Workload& w);

// Loads the model and hardware configs, applies the defaults (context, layers), takes the
// links of `emulate` when given, and checks everything.
Workload make_workload(const WorkloadOptions& o);
// The options that resolve to exactly `w` again (seq, context and layers made explicit),
// given the options it was made from.
WorkloadOptions explicit_options(const WorkloadOptions& o, const Workload& w);

}  // namespace tpo::sim
