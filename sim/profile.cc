// Profile JSON in both directions; the writer and the reader sit side by side so the schema
// cannot drift.
#include "sim/profile.h"

#include "sim/launch.h"

#include "sim/error.h"
#include "sim/json_io.h"

namespace tpo::sim {

using ojson = nlohmann::ordered_json;

namespace {

ojson timing_json(const Timing& t) {
  return ojson{
      {"median_us", t.median_us}, {"min_us", t.min_us}, {"max_us", t.max_us}, {"reps", t.reps}};
}

Timing timing_from(const JsonObject& o) {
  Timing t;
  t.median_us = o.number("median_us");  // > 0: the model interpolates in log space
  t.min_us = o.number_or("min_us", t.median_us, false);
  t.max_us = o.number_or("max_us", t.median_us, false);
  t.reps = o.integer_or("reps", 1);
  if (t.min_us > t.median_us || t.median_us > t.max_us) {
    throw InputError(o.file(), o.field("median_us"),
                     "min_us <= median_us <= max_us does not hold; the timing is not a "
                     "measurement");
  }
  return t;
}

template <class F>
void each(const nlohmann::json& j, const std::string& file, const std::string& key, F f) {
  if (!j.contains(key)) return;
  const auto& arr = j.at(key);
  if (!arr.is_array()) throw InputError(file, key, "must be an array");
  for (std::size_t i = 0; i < arr.size(); ++i) {
    f(JsonObject(arr.at(i), file, key + "[" + std::to_string(i) + "]"));
  }
}

}  // namespace

ojson profile_to_json(const Profile& p) {
  ojson j;
  j["schema"] = "tpo.profile/1";
  j["kind"] = "measured";
  j["tool_version"] = p.tool_version;
  j["git_sha"] = p.git_sha;
  j["date"] = p.date;
  j["device"] = p.device;
  j["options"] = p.options;
  j["dtype"] = p.dtype;
  j["qkv_kv_store_width"] = p.qkv_kv_store_width;
  j["qkv_rope_dim"] = p.qkv_rope_dim;
  j["qkv_rope_heads"] = p.qkv_rope_heads;
  j["qkv_qk_norm"] = p.qkv_qk_norm;
  j["attention_q_row_stride"] = p.attention_q_row_stride;
  if (p.attention_softcap) j["attention_softcap"] = *p.attention_softcap;
  j["model"] = p.model;
  j["tp"] = p.tp;
  ojson g = ojson::array();
  for (const auto& x : p.gemm) {
    ojson e{{"name", x.name}, {"m", x.m}, {"n", x.n}, {"k", x.k}};
    e.update(timing_json(x.t));
    if (!x.kernel.empty()) e["kernel"] = x.kernel;
    if (x.bias) e["bias"] = true;
    g.push_back(e);
  }
  j["gemm"] = g;
  ojson a = ojson::array();
  for (const auto& x : p.attention) {
    ojson e{{"requests", x.requests}, {"q_tokens", x.q_tokens}, {"prefix", x.prefix},
            {"q_heads", x.q_heads},   {"kv_heads", x.kv_heads}, {"head_dim", x.head_dim},
            {"flops", x.flops}};
    e.update(timing_json(x.t));
    a.push_back(e);
  }
  j["attention"] = a;
  ojson r = ojson::array();
  for (const auto& x : p.rowwise) {
    ojson e{{"name", x.name}, {"rows", x.rows}, {"cols", x.cols}};
    e.update(timing_json(x.t));
    r.push_back(e);
  }
  j["rowwise"] = r;
  ojson ar = ojson::array();
  for (const auto& x : p.allreduce) {
    ojson e{{"elements", x.elements}, {"ranks", x.ranks}, {"bytes", x.bytes}};
    e.update(timing_json(x.t));
    e["busbw_gbps"] = x.t.median_us > 0
                          ? static_cast<double>(x.bytes) * 2.0 * static_cast<double>(x.ranks - 1) /
                                static_cast<double>(x.ranks) / (x.t.median_us * 1e3)
                          : 0.0;
    ar.push_back(e);
  }
  j["allreduce"] = ar;
  ojson in = ojson::array();
  for (const auto& x : p.interference) {
    in.push_back(ojson{{"victim", x.victim},
                       {"beside", x.beside},
                       {"workers", x.workers},
                       {"shape", x.shape},
                       {"alone_us", x.alone_us},
                       {"beside_us", x.beside_us},
                       {"slowdown", x.slowdown()}});
    if (x.other_us > 0) in.back()["other_us"] = x.other_us;
    if (x.bytes > 0) in.back()["bytes"] = x.bytes;
  }
  j["interference"] = ojson{{"points", in}};
  if (p.interference_head_start_us) {
    j["interference"]["head_start_us"] = *p.interference_head_start_us;
  }
  if (!p.interference.empty()) {  // summaries of measurements; none without points
    j["interference"]["compute_slowdown_under_comm"] = p.compute_slowdown_under_comm;
    j["interference"]["comm_slowdown_under_compute"] = p.comm_slowdown_under_compute;
  }
  ojson fits = ojson::array();
  for (const auto& f : p.allreduce_fit) {
    fits.push_back(ojson{{"lo_bytes", f.lo_bytes},
                         {"hi_bytes", f.hi_bytes},
                         {"alpha_us", f.alpha_us},
                         {"beta_us_per_byte", f.beta_us_per_byte}});
  }
  j["fits"] = ojson{{"allreduce_alpha_beta", fits}, {"gemm_m_half", p.gemm_m_half}};
  if (!p.accuracy.is_null()) j["accuracy"] = p.accuracy;
  if (!p.contention.is_null()) j["contention"] = p.contention;
  if (!p.launch.is_null()) j["launch"] = p.launch;
  if (!p.analytical_vs_measured.is_null()) j["analytical_vs_measured"] = p.analytical_vs_measured;
  return j;
}

const char* rowwise_name(OpCode c) {
  switch (c) {
    case OpCode::AttnNorm:
    case OpCode::MlpNorm:
    case OpCode::FinalNorm:
      return "rmsnorm";
    case OpCode::SiluMul:
      return "silu_mul";
    case OpCode::ResidualAdd:
      return "residual_add";
    default:
      return nullptr;
  }
}

namespace {
// Refuses an entry named for no op the schedule has: GEMMs by op_code_name, row-wise ops by
// rowwise_name (an entry of another name would never be read).
void check_entry_name(const JsonObject& e, bool gemm) {
  const std::string name = e.string("name");
  if (!gemm && name == kAddNormName) return;
  std::string known;
  for (int i = 0; i <= static_cast<int>(OpCode::LmHead); ++i) {
    const auto c = static_cast<OpCode>(i);
    const char* n =
        gemm ? (op_code_kind(c) == OpKind::Gemm ? op_code_name(c) : nullptr) : rowwise_name(c);
    if (!n) continue;
    if (name == n) return;
    if (known.find(n) == std::string::npos) known += std::string(known.empty() ? "" : ", ") + n;
  }
  if (!gemm) known += std::string(", ") + kAddNormName;
  throw InputError(e.file(), e.field("name"),
                   "'" + name + "' is not " + (gemm ? "a GEMM" : "a row-wise op") +
                       " tpo measures (" + known + ")");
}
}  // namespace

Profile profile_from_json(const nlohmann::json& j, const std::string& file) {
  const JsonObject o(j, file, "");
  if (o.string("schema") != "tpo.profile/1") {
    throw InputError(file, "schema", "expected \"tpo.profile/1\" (a file from `tpo profile`)");
  }
  Profile p;
  p.origin = file;
  p.tool_version = o.string_or("tool_version", "");
  p.git_sha = o.string_or("git_sha", "");
  p.date = o.string_or("date", "");
  p.device = o.has("device") ? o.object("device").raw() : nlohmann::json::object();
  if (const std::string b = JsonObject(p.device, file, "device").string_or("backend", "");
      !b.empty() && b != "cpu" && b != "cuda" && b != "nccl-tests import" &&
      b != "all-reduce CSV import") {
    throw InputError(file, "device.backend",
                     "'" + b + "' is not cpu, cuda, nccl-tests import or all-reduce CSV import");
  }
  p.options = o.has("options") ? o.object("options").raw() : nlohmann::json::object();
  // What the measurements belong to is checked against each run: it must be there.
  if (JsonObject(p.options, file, "options").string_or("hardware", "").empty()) {
    throw InputError(file, "options.hardware",
                     "missing: the hardware the profile was measured for (tpo profile writes it)");
  }
  p.dtype = o.string_or("dtype", "fp32");
  if (p.dtype != "fp32" && p.dtype != "bf16" && p.dtype != "fp16") {
    throw InputError(file, "dtype", "'" + p.dtype + "' is not fp32, bf16 or fp16");
  }
  p.model = o.string_or("model", "");
  if (!o.has("tp")) {
    throw InputError(file, "tp", "missing: the TP degree the shards were measured at");
  }
  p.tp = o.integer("tp");
  p.qkv_kv_store_width = o.count_or("qkv_kv_store_width", 0);
  p.qkv_rope_dim = o.count_or("qkv_rope_dim", 0);
  p.qkv_rope_heads = o.count_or("qkv_rope_heads", 0);
  if (o.has("qkv_qk_norm")) {
    if (!o.raw().at("qkv_qk_norm").is_boolean()) {
      throw InputError(file, "qkv_qk_norm", "must be true or false");
    }
    p.qkv_qk_norm = o.raw().at("qkv_qk_norm").get<bool>();
  }
  if ((p.qkv_rope_dim > 0) != (p.qkv_rope_heads > 0)) {
    throw InputError(file, "qkv_rope_heads",
                     "qkv_rope_dim and qkv_rope_heads are both 0 (no rotary kernel timed) or "
                     "both above 0");
  }
  p.attention_q_row_stride = o.count_or("attention_q_row_stride", 0);
  if (o.has("attention_softcap")) {
    p.attention_softcap = o.number_or("attention_softcap", 0, /*positive=*/false);
  }
  if (o.has("kind") && o.string("kind") != "measured") {
    throw InputError(file, "kind", "'" + o.string("kind") + "': a profile holds measurements");
  }
  each(j, file, "gemm", [&](const JsonObject& e) {
    check_entry_name(e, /*gemm=*/true);
    GemmPoint g{e.string("name"), e.integer("m"), e.integer("n"),
                e.integer("k"),   timing_from(e), e.string_or("kernel", "")};
    if (e.has("bias")) {
      if (!e.raw().at("bias").is_boolean()) {
        throw InputError(e.file(), e.field("bias"), "must be true or false");
      }
      g.bias = e.raw().at("bias").get<bool>();
    }
    p.gemm.push_back(std::move(g));
  });
  each(j, file, "attention", [&](const JsonObject& e) {
    AttentionPoint a;
    a.requests = e.integer("requests");
    a.q_tokens = e.integer("q_tokens");
    a.prefix = e.has("prefix") ? static_cast<std::int64_t>(e.number("prefix", false)) : 0;
    a.q_heads = e.integer("q_heads");
    a.kv_heads = e.integer("kv_heads");
    a.head_dim = e.integer("head_dim");
    a.flops = e.number("flops");
    a.t = timing_from(e);
    p.attention.push_back(a);
  });
  each(j, file, "rowwise", [&](const JsonObject& e) {
    check_entry_name(e, /*gemm=*/false);
    p.rowwise.push_back({e.string("name"), e.integer("rows"), e.integer("cols"), timing_from(e)});
  });
  each(j, file, "allreduce", [&](const JsonObject& e) {
    const std::int64_t ranks = e.integer("ranks");
    if (ranks != p.tp) {
      throw InputError(file, e.field("ranks"),
                       std::to_string(ranks) + " ranks in a profile of TP " + std::to_string(p.tp));
    }
    p.allreduce.push_back({e.integer("elements"), ranks, e.integer("bytes"), timing_from(e)});
  });
  if (p.gemm.empty() && p.attention.empty() && p.rowwise.empty() && p.allreduce.empty()) {
    throw InputError(file, "", "holds no measurement (gemm, attention, rowwise or allreduce)");
  }
  // Only a profile of links alone (tpo profile import-nccl-tests) may leave the model out.
  if (p.model.empty() && (!p.gemm.empty() || !p.attention.empty() || !p.rowwise.empty())) {
    throw InputError(file, "model", "missing: the model whose shards were measured");
  }
  if (j.contains("interference")) {
    const JsonObject in = o.object("interference");
    each(in.raw(), file, "points", [&](const JsonObject& e) {
      InterferencePoint x;
      x.victim = e.string("victim");
      x.beside = e.string("beside");
      x.workers = e.has("workers") ? static_cast<std::int64_t>(e.number("workers", false)) : 0;
      x.shape = e.string_or("shape", "");
      x.alone_us = e.number("alone_us");
      x.beside_us = e.number("beside_us");
      x.other_us = e.number_or("other_us", 0, /*positive=*/false);
      x.bytes = static_cast<std::int64_t>(e.number_or("bytes", 0, /*positive=*/false));
      p.interference.push_back(x);
    });
    p.compute_slowdown_under_comm = in.number_or("compute_slowdown_under_comm", 1.0);
    p.comm_slowdown_under_compute = in.number_or("comm_slowdown_under_compute", 1.0);
    if (in.has("head_start_us")) {
      p.interference_head_start_us = in.number_or("head_start_us", 0, /*positive=*/false);
      if (*p.interference_head_start_us < 0) {
        throw InputError(file, in.field("head_start_us"), "must be at least 0 (microseconds)");
      }
    }
  }
  if (j.contains("fits")) {
    const JsonObject f = o.object("fits");
    each(f.raw(), file, "allreduce_alpha_beta", [&](const JsonObject& e) {
      // A fit may come out negative on noisy data; it is informational, so any finite value.
      auto any = [&](const char* k) {
        if (!e.has(k) || !e.raw().at(k).is_number()) {
          throw InputError(file, e.field(k), "must be a number");
        }
        return e.raw().at(k).get<double>();
      };
      p.allreduce_fit.push_back({static_cast<std::int64_t>(e.number("lo_bytes", false)),
                                 static_cast<std::int64_t>(e.number("hi_bytes", false)),
                                 any("alpha_us"), any("beta_us_per_byte")});
    });
    p.gemm_m_half = f.number_or("gemm_m_half", 0.0, false);
  }
  if (j.contains("accuracy")) p.accuracy = j.at("accuracy");
  if (j.contains("contention")) p.contention = j.at("contention");
  if (j.contains("launch")) {
    p.launch = j.at("launch");
    launch_from_json(p.launch, file, "launch", {});  // checked at load time
  }
  if (j.contains("analytical_vs_measured"))
    p.analytical_vs_measured = j.at("analytical_vs_measured");
  return p;
}

std::string profiled_attention_kernel(const Profile& p) {
  if (p.device.is_object()) {
    const auto k = p.device.find("attention_kernel");
    if (k != p.device.end() && k->is_string()) return k->get<std::string>();
    const auto b = p.device.find("backend");
    if (b != p.device.end() && b->is_string() && b->get<std::string>() == "cuda") {
      return "cublas-batched";
    }
  }
  return "cpu";
}

Profile load_profile(const std::string& path) {
  return profile_from_json(read_json_file(path), path);
}

}  // namespace tpo::sim
