// JSON report, Chrome trace and console output for `tpo simulate`.
#include "sim/report.h"

#include "sim/profile_cost.h"

#include <cstdio>
#include <iomanip>
#include <sstream>

#include "sim/format.h"
#include "sim/plan_file.h"
#include "sim/version.h"

namespace tpo::sim {

using ojson = nlohmann::ordered_json;

ojson report_header(const std::string& schema, const std::string& kind) {
  return ojson{
      {"schema", schema}, {"tool_version", tool_version()}, {"git_sha", git_sha()}, {"kind", kind}};
}

std::string model_and_exec(const CostModel& cm) {
  return cm.name() + " cost model, " + exec_mode_name(cm.exec()) + " execution";
}

ojson workload_options_json(const WorkloadOptions& o) {
  return ojson{
      {"model", o.model},       {"hardware", o.hardware}, {"tp", o.tp},
      {"phase", o.phase},       {"batch", o.batch},       {"seq", o.seq},
      {"context", o.context},   {"layers", o.layers},     {"embed_head", o.embed_head},
      {"profile", o.profile},   {"emulate", o.emulate},   {"comm_ctas", o.comm_ctas},
      {"sm_clock", o.sm_clock}, {"exec", o.exec},         {"rope", o.rope},
      {"vocab", o.vocab},       {"add_norm", o.add_norm}, {"allreduce_fusion", o.allreduce_fusion}};
}

ojson options_json(const WorkloadOptions& w, const StrategyOptions& s) {
  ojson j = workload_options_json(w);
  j["strategy"] = s.strategy;
  j["chunks"] = s.chunks;
  j["split"] = s.split;
  j["ladder_layers"] = s.ladder_layers;
  j["pieces"] = s.pieces;
  return j;
}

ojson model_json(const ModelConfig& m) {
  ojson j{{"name", m.name},
          {"file", m.origin},
          {"num_layers", m.num_layers},
          {"hidden_size", m.hidden},
          {"num_attention_heads", m.heads},
          {"num_key_value_heads", m.kv_heads},
          {"head_dim", m.head_dim},
          {"intermediate_size", m.ffn},
          {"vocab_size", m.vocab},
          {"hidden_act", activation_name(m.activation)},
          {"qkv_bias", m.qkv_bias},
          {"o_bias", m.o_bias},
          {"mlp_bias", m.mlp_bias},
          {"tie_word_embeddings", m.tied_embeddings},
          {"rotary_dim", m.rotary_dim},
          {"rope_theta", m.rope_theta},
          {"qk_norm", m.qk_norm},
          {"post_norms", m.post_norms}};
  // Gemma's attention scores (what the runtimes compute; no cost): only where a config sets them.
  if (m.attn_scale > 0) j["attn_scale"] = m.attn_scale;
  if (m.attn_softcap > 0) j["attn_logit_softcapping"] = m.attn_softcap;
  if (m.sliding_window > 0) {
    j["sliding_window"] = m.sliding_window;
    ojson layers = ojson::array();
    for (std::int64_t l = 0; l < m.num_layers; ++l) {
      if (m.window_of(l) > 0) layers.push_back(l);
    }
    j["windowed_layers"] = std::move(layers);
  }
  return j;
}

ojson hardware_json(const HardwareConfig& h) {
  auto link = [](const LinkConfig& l) {
    ojson j{{"class", l.cls}};
    if (l.cls != "none") {
      j["allreduce_latency_us"] = l.allreduce_latency_us;
      j["busbw_gbps"] = l.busbw_gbps;
      if (l.tables.size() == 1) {
        j["allreduce_table"] = {{"ranks", l.tables[0].ranks}, {"points", l.tables[0].points}};
      } else if (!l.tables.empty()) {
        j["allreduce_table"] = ojson::array();
        for (const auto& t : l.tables) {
          j["allreduce_table"].push_back({{"ranks", t.ranks}, {"points", t.points}});
        }
      }
    }
    return j;
  };
  ojson j{{"name", h.name},
          {"file", h.origin},
          {"gpu", h.gpu_name},
          {"sms", h.sms},
          {"bf16_dense_tflops", h.bf16_dense_tflops},
          {"memory_bandwidth_gbps", h.memory_bandwidth_gbps},
          {"gpus_per_node", h.gpus_per_node},
          {"intra_node", link(h.intra)},
          {"inter_node", link(h.inter)}};
  if (h.peak_clock_mhz > 0) j["peak_clock_mhz"] = h.peak_clock_mhz;
  if (h.sm_clock_mhz > 0) j["sm_clock_mhz"] = h.sm_clock_mhz;  // bf16_dense_tflops is at it
  return j;
}

std::string sm_clock_text(const HardwareConfig& h) {
  if (h.sm_clock_mhz <= 0) return "";
  char clock[128];
  std::snprintf(clock, sizeof clock,
                ", SM clock %.0f MHz (tensor rate %.0f%% of the %.0f MHz peak)", h.sm_clock_mhz,
                100.0 * h.sm_clock_mhz / h.peak_clock_mhz, h.peak_clock_mhz);
  return clock;
}

std::string workload_line(const Workload& w) {
  std::ostringstream os;
  os << w.model.name << " on " << hardware_label(w.hardware) << ", TP " << w.tp << ", "
     << phase_name(w.phase) << ", batch " << w.batch;
  if (w.phase == Phase::Prefill) {
    os << " x " << w.seq << " tokens";
    if (w.context > 0) os << " after " << w.context << " cached";
  } else {
    os << ", context " << w.context;
  }
  os << ", " << w.layers;
  if (w.layers != w.model.num_layers) os << "/" << w.model.num_layers;
  os << " layers" << sm_clock_text(w.hardware);
  if (!w.rope && w.model.rotary_dim > 0) os << ", no rotary kernel (--rope none)";
  if (w.embed_head) {
    os << (w.vocab_replicated ? ", embedding and LM head whole on every GPU"
                              : ", embedding and LM head (vocab-parallel)");
  }
  if (!w.fused_add_norm) os << ", residual add and norm apart (--add-norm separate)";
  if (w.allreduce_add) os << ", all-reduces add and normalize (--allreduce-fusion add-norm)";
  return os.str();
}

SlowedBeside slowed_beside(const SimResult& r) {
  SlowedBeside s;
  const Timeline& tl = r.timeline;
  for (std::size_t i = 0; i < r.schedule.ops.size(); ++i) {
    if (i >= tl.start_ns.size() || i >= r.costs.standalone_ns.size() || tl.start_ns[i] < 0) {
      continue;
    }
    const std::int64_t more =
        std::max<std::int64_t>(0, tl.end_ns[i] - tl.start_ns[i] - r.costs.standalone_ns[i]);
    (r.schedule.ops[i].stream == StreamKind::Comm ? s.comm_ns : s.compute_ns) += more;
  }
  return s;
}

ojson simulate_report(const WorkloadOptions& wo, const StrategyOptions& so, const Workload& w,
                      const SimResult& r, std::int64_t baseline_ns, const CostModel& cm) {
  const Timeline& tl = r.timeline;
  const Schedule& s = r.schedule;
  // Only the parameters the strategy reads (options holds every option as given).
  const ojson params = strategy_params_json(r.spec);
  ojson strategy{{"name", s.strategy},
                 {"params", params},
                 {"chunks", s.chunk_tokens},
                 {"preserves_function", s.preserves_function}};
  if (!s.preserves_function) {
    strategy["note"] =
        "changes the model architecture: needs a model trained (or converted) for it";
  }
  ojson j = report_header("tpo.simulate/1", "predicted");
  j["cost_model"] = cm.name();
  j["overlap_model"] = cm.overlap_model();
  j["notes"] = workload_notes(w);
  j["execution"] = execution_json(cm.exec(), cm.launch());
  if (!wo.profile.empty()) j["profile"] = wo.profile;
  j["cost_sources"] = ojson::object();  // ops priced by each source
  for (const auto& [source, n] : cost_sources(r.schedule, cm)) j["cost_sources"][source] = n;
  j["options"] = options_json(wo, so);
  j["model"] = model_json(w.model);
  j["hardware"] = hardware_json(w.hardware);
  j["tp"] = w.tp;
  j["phase"] = phase_name(w.phase);
  j["batch"] = w.batch;
  j["seq_len"] = w.seq;
  j["context"] = w.context;
  j["num_layers"] = w.layers;
  j["strategy"] = strategy;
  j["total_us"] = to_us(tl.total_ns);
  j["baseline_us"] = to_us(baseline_ns);
  j["speedup"] =
      tl.total_ns > 0 ? static_cast<double>(baseline_ns) / static_cast<double>(tl.total_ns) : 0.0;
  j["compute_busy_us"] = to_us(tl.compute_busy_ns);
  j["comm_busy_us"] = to_us(tl.comm_busy_ns);
  j["exposed_comm_us"] = to_us(tl.exposed_comm_ns);
  j["overlap_efficiency"] = tl.overlap_efficiency;
  const SlowedBeside slowed = slowed_beside(r);
  j["compute_slowed_us"] = to_us(slowed.compute_ns);
  j["comm_slowed_us"] = to_us(slowed.comm_ns);
  ojson layers = ojson::array();
  for (std::int32_t l = 0; l < s.num_layers; ++l)
    layers.push_back(ojson{{"layer", l}, {"ops", ojson::array()}});
  ojson other = ojson::array();
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const Op& op = s.ops[i];
    ojson e{{"name", op_code_name(op.code)},
            {"kind", op_kind_name(op.kind)},
            {"layer", op.layer},
            {"chunk", op.chunk}};
    if (op.piece >= 0) e["piece"] = op.piece;
    e["stream"] = op.stream == StreamKind::Compute ? "compute" : "comm";
    e["tokens"] = op.tokens();
    if (op.kind == OpKind::Gemm) {
      e["m"] = op.m;
      e["n"] = op.n;
      e["k"] = op.k;
    }
    // The gated activation's op keeps the name silu_mul (profiles and reports key it so); a
    // GeGLU model's (Gemma) runs GELU, said here.
    if (op.code == OpCode::SiluMul) e["activation"] = activation_name(w.model.activation);
    if (op.kind == OpKind::Attention) {
      e["q_tokens"] = op.seq_end - op.seq_begin;
      e["kv_prefix"] = op.kv_prefix();
      if (op.window > 0) e["window"] = op.window;
    }
    // An all-reduce whose kernel also adds to the residual (--allreduce-fusion add-norm).
    if (op.kind == OpKind::AllReduce && op.residual_of >= 0) e["residual_add"] = true;
    if (const char* n = norm_after_name(op)) {  // the next module's norm fused into this add
      e["norm_after"] = n;
      if (op.norm_layer >= 0) e["norm_layer"] = op.norm_layer;
    }
    e["flops"] = op.flops;
    // What its launch streams (sim::hbm_bytes): a fused norm's, a post-norm's and qkv's rotary,
    // per-head norms and KV-cache write are in its time, so in its bytes.
    e["bytes"] = hbm_bytes(op);
    e["standalone_us"] = to_us(r.costs.standalone_ns[i]);
    e["cost_source"] = cm.origin(op);
    e["start_us"] = to_us(tl.start_ns[i]);
    e["end_us"] = to_us(tl.end_ns[i]);
    if (op.layer >= 0) {
      layers[static_cast<std::size_t>(op.layer)]["ops"].push_back(std::move(e));
    } else {
      other.push_back(std::move(e));
    }
  }
  j["layers"] = std::move(layers);
  j["other_ops"] = std::move(other);
  return j;
}

void append_trace(ojson& events, int pid, const std::string& process_name, const Schedule& s,
                  const std::vector<std::int64_t>& start_ns,
                  const std::vector<std::int64_t>& end_ns) {
  events.push_back(ojson{{"name", "process_name"},
                         {"ph", "M"},
                         {"pid", pid},
                         {"args", ojson{{"name", process_name}}}});
  for (std::int32_t r = 0; r < s.num_ranks; ++r) {
    for (int st = 0; st < kStreamsPerRank; ++st) {
      const int tid = r * kStreamsPerRank + st;
      const std::string name = "rank " + std::to_string(r) + (st == 0 ? " compute" : " comm");
      events.push_back(ojson{{"name", "thread_name"},
                             {"ph", "M"},
                             {"pid", pid},
                             {"tid", tid},
                             {"args", ojson{{"name", name}}}});
    }
  }
  // Colours from the trace viewer's fixed palette, one per kind.
  auto colour = [](OpKind k) {
    switch (k) {
      case OpKind::Gemm:
        return "thread_state_running";
      case OpKind::Attention:
        return "rail_response";
      case OpKind::Norm:
        return "thread_state_iowait";
      case OpKind::Elementwise:
        return "grey";
      case OpKind::AllReduce:
        return "terrible";
    }
    return "grey";
  };
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const Op& op = s.ops[i];
    ojson args{{"layer", op.layer}, {"chunk", op.chunk}, {"tokens", op.tokens()}};
    if (op.piece >= 0) args["piece"] = op.piece;
    if (op.kind == OpKind::Gemm)
      args["mnk"] = std::to_string(op.m) + "x" + std::to_string(op.n) + "x" + std::to_string(op.k);
    if (op.kind == OpKind::Attention) {
      args["q_tokens"] = op.seq_end - op.seq_begin;
      args["kv_prefix"] = op.kv_prefix();
      if (op.window > 0) args["window"] = op.window;
    }
    if (const char* n = norm_after_name(op)) {
      args["norm_after"] = n;
      if (op.norm_layer >= 0) args["norm_layer"] = op.norm_layer;
    }
    args["flops"] = op.flops;
    args["bytes"] = hbm_bytes(op);
    events.push_back(ojson{{"name", op_code_name(op.code)},
                           {"cat", op_kind_name(op.kind)},
                           {"ph", "X"},
                           {"pid", pid},
                           {"tid", s.global_stream(op)},
                           {"ts", to_us(start_ns[i])},
                           {"dur", to_us(end_ns[i] - start_ns[i])},
                           {"cname", colour(op.kind)},
                           {"args", std::move(args)}});
  }
}

std::string chrome_trace(const Workload& w, const SimResult& r) {
  ojson events = ojson::array();
  append_trace(events, 0, "predicted: " + r.schedule.strategy + " — " + workload_line(w),
               r.schedule, r.timeline.start_ns, r.timeline.end_ns);
  ojson j{
      {"traceEvents", std::move(events)},
      {"displayTimeUnit", "ns"},
      {"otherData", ojson{{"tool", "tpo"}, {"version", tool_version()}, {"git_sha", git_sha()}}}};
  return j.dump() + "\n";
}

std::string unaligned_chunks_note(const Schedule& s) {
  // About splits: an unsplit prompt, or decode's one token per request, is what it is.
  if (s.chunk_tokens.size() < 2) return "";
  std::string odd;
  for (auto t : s.chunk_tokens) {
    if (t % 8 != 0) odd += (odd.empty() ? "" : ", ") + std::to_string(t);
  }
  if (odd.empty()) return "";
  return "note: chunk lengths " + odd +
         " are not multiples of 8 tokens; GPU kernels run such shapes slower than aligned "
         "ones, which this prediction does not include (prefer splits on the 64-token grid)";
}

std::vector<std::string> workload_notes(const Workload& w) {
  return model_notes(w.model, w.seq + w.context, w.layers, w.embed_head);
}

void print_notes(std::ostream& os, const std::vector<std::string>& notes) {
  for (const auto& n : notes) os << "note: " << n << "\n";
}

std::string overlap_line(const Workload& w, const std::string& overlap) {
  return w.tp > 1 && !overlap.empty() ? "overlap: " + overlap : "";
}

void print_summary(std::ostream& os, const Workload& w, const SimResult& r,
                   std::int64_t baseline_ns, const std::string& cost_model,
                   const std::string& overlap, const std::string& allreduce,
                   const std::string& baseline_note) {
  const Timeline& tl = r.timeline;
  os << "tpo simulate — " << workload_line(w) << "\n";
  os << "strategy " << r.schedule.strategy;
  const std::string c = variant_text(r.spec);
  if (c != "-") os << " (" << c << ")";
  if (!r.schedule.preserves_function) os << "  [changes the model: needs retraining]";
  os << "\npredicted by the " << cost_model << " (not measured)\n";
  if (!allreduce.empty()) os << allreduce << "\n";
  if (const auto ov = overlap_line(w, overlap); !ov.empty()) os << ov << "\n";
  print_notes(os, workload_notes(w));
  if (!baseline_note.empty()) os << baseline_note << "\n";
  os << "\n";
  auto line = [&](const char* label, const std::string& v) {
    os << "  " << std::left << std::setw(22) << label << v << "\n";
  };
  line("total", fmt("%.3f ms", to_us(tl.total_ns) / 1e3));
  line("none (baseline)", fmt("%.3f ms", to_us(baseline_ns) / 1e3));
  line("speedup over none", fmt("%.3fx", tl.total_ns > 0 ? static_cast<double>(baseline_ns) /
                                                               static_cast<double>(tl.total_ns)
                                                         : 0.0));
  line("compute busy", fmt("%.3f ms", to_us(tl.compute_busy_ns) / 1e3));
  line("comm busy", fmt("%.3f ms", to_us(tl.comm_busy_ns) / 1e3));
  line("exposed comm", fmt("%.3f ms", to_us(tl.exposed_comm_ns) / 1e3) +
                           fmt(" (%.1f%% of total)",
                               tl.total_ns > 0 ? 100.0 * static_cast<double>(tl.exposed_comm_ns) /
                                                     static_cast<double>(tl.total_ns)
                                               : 0.0));
  line("overlap efficiency", fmt("%.1f%% of comm hidden", 100.0 * tl.overlap_efficiency));
  // What hiding it cost: the ops ran longer beside each other than alone.
  const SlowedBeside slowed = slowed_beside(r);
  line("slowed beside", fmt("compute %.3f ms", to_us(slowed.compute_ns) / 1e3) +
                            fmt(", comm %.3f ms longer than alone", to_us(slowed.comm_ns) / 1e3));
  line("ops simulated", std::to_string(r.schedule.ops.size()));
  if (const auto note = unaligned_chunks_note(r.schedule); !note.empty())
    os << "\n" << note << "\n";
}

void print_compare(std::ostream& os, const Workload& w, const std::vector<CompareRow>& rows,
                   std::int64_t baseline_ns, const std::string& cost_model,
                   const std::string& overlap, const std::string& allreduce,
                   const std::string& baseline_note) {
  os << "tpo simulate --compare — " << workload_line(w) << "\n";
  os << "predicted by the " << cost_model << " (not measured)\n";
  if (!allreduce.empty()) os << allreduce << "\n";
  if (const auto ov = overlap_line(w, overlap); !ov.empty()) os << ov << "\n";
  print_notes(os, workload_notes(w));
  if (!baseline_note.empty()) os << baseline_note << "\n";
  os << "\n";
  os << std::left << std::setw(16) << "strategy" << std::setw(16) << "chunks" << std::right
     << std::setw(12) << "total_ms" << std::setw(10) << "speedup" << std::setw(17)
     << "exposed_comm_ms" << std::setw(13) << "overlap_eff" << std::setw(18) << "compute_slowed_ms"
     << "  model\n";
  for (const auto& r : rows) {
    os << std::left << std::setw(16) << r.strategy << std::setw(16) << r.chunks << std::right;
    if (!r.skipped.empty()) {
      os << "  n/a: " << r.skipped << "\n";
      continue;
    }
    os << std::setw(12) << fmt("%.3f", to_us(r.total_ns) / 1e3) << std::setw(10)
       << fmt("%.3fx", static_cast<double>(baseline_ns) / static_cast<double>(r.total_ns))
       << std::setw(17) << fmt("%.3f", to_us(r.exposed_comm_ns) / 1e3) << std::setw(13)
       << fmt("%.1f%%", 100.0 * r.overlap_efficiency) << std::setw(18)
       << fmt("%.3f", to_us(r.slowed.compute_ns) / 1e3) << "  "
       << (r.preserves_function ? "same" : "changed") << "\n";
  }
  os << "\ncompute_slowed_ms: how much longer than alone the compute ran beside the all-reduces "
        "(what hiding them cost; overlap_eff counts comm as hidden however slow the compute "
        "beside it ran)\n";
  os << "model 'changed': ladder, iso+ladder and parallel-block compute a different function "
        "and need a model trained (or converted) for them.\n";
}

}  // namespace tpo::sim
