// Profile runs, assembly, accuracy check and the nccl-tests import.
#include "profiler/profile_run.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "profiler/backend.h"
#include "profiler/fit.h"
#include "profiler/sweep.h"
#include "sim/error.h"
#include "sim/format.h"
#include "sim/json_io.h"
#include "sim/profile_cost.h"
#include "sim/simulate.h"
#include "sim/stats.h"
#include "sim/version.h"

namespace tpo::profiler {

std::string today() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

namespace {

// The graph op a measured item corresponds to, for the models to predict: the same work
// formulas the graph builder uses.
sim::Op op_of(const Item& it) {
  sim::Op op;
  switch (it.kind) {
    case ItemKind::Gemm:
      // The op the item's name says (every GEMM was read as qkv before 2026-12-04, which took
      // the profile's rotary kernel off a held-back gate_up, o_proj or down).
      op.code = it.name == "o_proj"    ? sim::OpCode::OProj
                : it.name == "gate_up" ? sim::OpCode::GateUp
                : it.name == "down"    ? sim::OpCode::Down
                : it.name == "lm_head" ? sim::OpCode::LmHead
                                       : sim::OpCode::Qkv;
      op.kind = sim::OpKind::Gemm;
      sim::set_gemm_work(op, it.m, it.n, it.k, false);
      if (it.name == "qkv") {  // its rotary kernel and KV-cache write
        op.kv_width = it.kv_heads * it.head_dim;
        op.rope_dim = static_cast<std::int32_t>(it.rope_dim);
        op.rope_heads = static_cast<std::int32_t>(it.q_heads + it.kv_heads);
        op.qk_norm = it.qk_norm;
      }
      break;
    case ItemKind::Attention:
      op.code = sim::OpCode::Attention;
      op.kind = sim::OpKind::Attention;
      op.req_begin = 0;
      op.req_end = it.requests;
      op.seq_begin = it.prefix;
      op.seq_end = it.prefix + it.q_tokens;
      sim::set_attention_work(op, it.requests, it.q_tokens, it.prefix, it.q_heads, it.kv_heads,
                              it.head_dim);
      break;
    case ItemKind::Rowwise:
      op.code = it.name == "rmsnorm"    ? sim::OpCode::AttnNorm
                : it.name == "silu_mul" ? sim::OpCode::SiluMul
                                        : sim::OpCode::ResidualAdd;
      op.kind = sim::op_code_kind(op.code);
      op.req_end = 1;
      op.seq_end = it.m;
      sim::set_rowwise_work(op, it.m, it.n);
      if (it.name == sim::kAddNormName) op.norm_after = 1;
      break;
    default:  // all-reduce
      op.code = sim::OpCode::AllReduce;
      op.kind = sim::OpKind::AllReduce;
      sim::set_allreduce_work(op, it.elements);
      break;
  }
  return op;
}

double attention_flops(const Item& it) {
  return op_of(it).flops;
}

const char* kind_label(ItemKind k) {
  switch (k) {
    case ItemKind::Gemm:
      return "gemm";
    case ItemKind::Attention:
      return "attention";
    case ItemKind::Rowwise:
      return "norm/elementwise";
    case ItemKind::AllReduce:
      return "allreduce";
    default:
      return "interference";
  }
}

// A slowdown's median (1: none measured), or an error's.
double median_of(std::vector<double> v) {
  return sim::median(std::move(v), 1.0);
}

// The profile's summary factor: the median of the points, kept within what a profile may hold
// ([1, 100]). Beside other work an op cannot run faster than alone, so a median below 1 is timing
// noise (a busy machine); it is recorded as 1 and said on stderr, the points keep what was
// measured. Without this a profile could be written that tpo then refuses to read.
double summary_slowdown(std::vector<double> v, const char* what) {
  const std::size_t n = v.size();
  const double m = median_of(std::move(v));
  const double kept = std::clamp(m, 1.0, 100.0);
  if (kept != m) {
    std::fprintf(stderr,
                 "tpo profile: %s measured %.3gx as long as alone (median of %zu points): timing "
                 "noise; recorded as %gx. Re-profile on an idle machine for a measured value.\n",
                 what, m, n, kept);
  }
  return kept;
}

}  // namespace

sim::Profile assemble(const std::vector<Measurement>& ms, const std::string& dtype) {
  sim::Profile p;
  p.dtype = dtype;
  const std::int64_t esize = dtype == "fp32" ? 4 : 2;
  std::vector<double> gemm_slow, comm_slow;
  for (const auto& m : ms) {
    const Item& it = m.item;
    if (it.held_back || m.t.reps == 0) continue;  // held back, or skipped on this machine
    switch (it.kind) {
      case ItemKind::Gemm:
        p.gemm.push_back({it.name, it.m, it.n, it.k, m.t, m.kernel, it.bias});
        if (it.name == "qkv") {
          p.qkv_kv_store_width = it.kv_heads * it.head_dim;
          p.qkv_rope_dim = it.rope_dim;
          p.qkv_rope_heads = it.rope_dim > 0 ? it.q_heads + it.kv_heads : 0;
          p.qkv_qk_norm = it.qk_norm;
        }
        break;
      case ItemKind::Attention:
        p.attention.push_back({it.requests, it.q_tokens, it.prefix, it.q_heads, it.kv_heads,
                               it.head_dim, attention_flops(it), m.t});
        p.attention_q_row_stride = attention_shape(it).q_stride();
        p.attention_softcap = it.attn_softcap;  // 0 recorded too
        break;
      case ItemKind::Rowwise:
        p.rowwise.push_back({it.name, it.m, it.n, m.t});
        break;
      case ItemKind::AllReduce:
        p.allreduce.push_back({it.elements, it.ranks, it.elements * esize, m.t});
        break;
      case ItemKind::Fragment: {
        sim::InterferencePoint x;
        x.victim = "fragment";
        x.beside = "copy";
        x.workers = it.workers;
        x.shape = "q" + std::to_string(it.q_tokens) + "/p" + std::to_string(it.prefix) + "/o" +
                  std::to_string(it.m) + "x" + std::to_string(it.n) + "x" + std::to_string(it.k);
        x.alone_us = m.alone.median_us;
        x.beside_us = m.t.median_us;
        x.other_us = m.other_us;
        p.interference.push_back(x);
        break;
      }
      case ItemKind::GemmBesideComm:
      case ItemKind::CommBesideGemm: {
        sim::InterferencePoint x;
        const bool gemm = it.kind == ItemKind::GemmBesideComm;
        x.victim = gemm ? "gemm" : "comm";
        x.beside = gemm ? "copy" : it.beside;
        x.workers = it.workers;
        x.shape = it.beside == "attention"
                      ? "q" + std::to_string(it.q_tokens) + "/p" + std::to_string(it.prefix)
                      : std::to_string(it.m) + "x" + std::to_string(it.n) +
                            (it.beside == "rowwise" ? "" : "x" + std::to_string(it.k));
        x.alone_us = m.alone.median_us;
        x.beside_us = m.t.median_us;
        if (!gemm) x.bytes = it.elements * esize;  // the copy's
        if (gemm) {
          gemm_slow.push_back(x.slowdown());
        } else if (it.beside == "gemm") {
          comm_slow.push_back(x.slowdown());
        }
        p.interference.push_back(x);
        break;
      }
    }
  }
  p.compute_slowdown_under_comm = summary_slowdown(gemm_slow, "a GEMM beside communication");
  p.comm_slowdown_under_compute = summary_slowdown(comm_slow, "communication beside a GEMM");
  return p;
}

namespace {

// Median and worst relative error of `cm` on measurements selected by `use`, per op kind.
nlohmann::json error_table(const sim::CostModel& cm, const std::vector<Measurement>& ms,
                           bool held_back, const std::string& title, std::ostream& os) {
  std::map<std::string, std::vector<double>> errs;
  nlohmann::json points = nlohmann::json::array();
  for (const auto& m : ms) {
    if (m.item.held_back != held_back || m.t.reps == 0 || m.t.median_us <= 0) continue;
    if (is_interference(m.item.kind)) continue;
    const sim::Op op = op_of(m.item);
    const double pred = static_cast<double>(cm.standalone_ns(op)) / 1e3;
    const double err = (pred - m.t.median_us) / m.t.median_us;
    // The LM head apart from the layer GEMMs: its rows are batch sizes (thin, memory-bound).
    errs[m.item.name == "lm_head" ? "lm_head" : kind_label(m.item.kind)].push_back(std::abs(err));
    points.push_back({{"key", m.item.key},
                      {"measured_us", m.t.median_us},
                      {"predicted_us", pred},
                      {"error", err},
                      {"source", cm.origin(op)}});
  }
  nlohmann::json summary = nlohmann::json::object();
  os << "\n" << title << " (" << points.size() << " shapes):\n";
  os << "  " << std::left << std::setw(18) << "op kind" << std::right << std::setw(8) << "shapes"
     << std::setw(16) << "median |error|" << std::setw(10) << "p90" << std::setw(14)
     << "worst |error|"
     << "\n";
  std::vector<double> all;
  for (auto& [kind, e] : errs) {
    std::sort(e.begin(), e.end());
    const double med = median_of(e), worst = e.back();
    const double p90 = e[std::min(e.size() - 1, (e.size() * 9) / 10)];
    all.insert(all.end(), e.begin(), e.end());
    summary[kind] = {
        {"shapes", e.size()}, {"median_error", med}, {"p90_error", p90}, {"worst_error", worst}};
    os << "  " << std::left << std::setw(18) << kind << std::right << std::setw(8) << e.size()
       << std::setw(15) << std::fixed << std::setprecision(1) << 100 * med << "%" << std::setw(9)
       << 100 * p90 << "%" << std::setw(13) << 100 * worst << "%\n";
  }
  if (!all.empty()) {
    std::sort(all.begin(), all.end());
    const double p90 = all[std::min(all.size() - 1, (all.size() * 9) / 10)];
    os << "  " << std::left << std::setw(18) << "all" << std::right << std::setw(8) << all.size()
       << std::setw(15) << 100 * median_of(all) << "%" << std::setw(9) << 100 * p90 << "%"
       << std::setw(13) << 100 * all.back() << "%\n";
    summary["all"] = {{"shapes", all.size()},
                      {"median_error", median_of(all)},
                      {"p90_error", p90},
                      {"worst_error", all.back()}};
  }
  os.unsetf(std::ios::fixed);
  return {{"summary", summary}, {"points", points}};
}

}  // namespace

nlohmann::json accuracy_check(const sim::Profile& p, const sim::HardwareConfig& hw, std::int64_t tp,
                              const std::vector<Measurement>& held, std::ostream& os) {
  const sim::ProfileCostModel cm(p, hw, tp);
  nlohmann::json j = error_table(
      cm, held, true,
      "accuracy of the profile model on held-back shapes (sizes between the table's, measured "
      "in the same run but not used by the model)",
      os);
  j["kind"] =
      "held-back shapes: measured in the same run, left out of the tables, predicted by "
      "the profile model";
  return j;
}

std::vector<Measurement> measurements_of(const sim::Profile& p) {
  std::vector<Measurement> ms;
  for (const auto& g : p.gemm) {
    Measurement m;
    m.item.kind = ItemKind::Gemm;
    m.item.name = g.name;
    m.item.m = g.m;
    m.item.n = g.n;
    m.item.k = g.k;
    if (g.name == "qkv" && p.qkv_kv_store_width > 0) {  // timed with its KV-cache write
      m.item.kv_heads = 1;
      m.item.head_dim = p.qkv_kv_store_width;
    }
    if (g.name == "qkv" && p.qkv_rope_dim > 0) {  // and its rotary kernel: those heads' values
      m.item.rope_dim = p.qkv_rope_dim;
      m.item.q_heads = p.qkv_rope_heads - m.item.kv_heads;
    }
    if (g.name == "qkv") m.item.qk_norm = p.qkv_qk_norm;
    m.item.bias = g.bias;
    m.item.key = g.name + " " + std::to_string(g.m);
    m.t = g.t;
    ms.push_back(m);
  }
  for (const auto& a : p.attention) {
    Measurement m;
    m.item.kind = ItemKind::Attention;
    m.item.name = "attention";
    m.item.requests = a.requests;
    m.item.q_tokens = a.q_tokens;
    m.item.prefix = a.prefix;
    m.item.q_heads = a.q_heads;
    m.item.kv_heads = a.kv_heads;
    m.item.head_dim = a.head_dim;
    m.item.key = "attention " + std::to_string(a.q_tokens) + "+" + std::to_string(a.prefix);
    m.t = a.t;
    ms.push_back(m);
  }
  for (const auto& a : p.allreduce) {
    if (a.ranks != p.tp) continue;  // the model prices the profile's TP
    Measurement m;
    m.item.kind = ItemKind::AllReduce;
    m.item.name = "allreduce";
    m.item.elements = a.elements;
    m.item.ranks = a.ranks;
    m.item.key = "allreduce " + std::to_string(a.bytes) + " B";
    m.t = a.t;
    ms.push_back(m);
  }
  for (const auto& r : p.rowwise) {
    Measurement m;
    m.item.kind = ItemKind::Rowwise;
    m.item.name = r.name;
    m.item.m = r.rows;
    m.item.n = r.cols;
    m.item.key = r.name + " " + std::to_string(r.rows);
    m.t = r.t;
    ms.push_back(m);
  }
  return ms;
}

nlohmann::json analytical_vs_measured(const sim::HardwareConfig& hw, std::int64_t tp,
                                      const std::vector<Measurement>& ms, std::ostream& os) {
  const sim::AnalyticalCostModel cm(hw, tp);
  nlohmann::json j = error_table(cm, ms, false,
                                 "the analytical model of '" + hw.name +
                                     "' against these measurements (signed errors in the JSON)",
                                 os);
  j["hardware"] = hw.name;
  return j;
}

int run_profile(const ProfileOptions& o, std::ostream& os) {
  if (o.out.empty()) throw InputError("--out", "", "give the profile's file name (--out FILE)");
  check_writable(o.out, "--out");
  // Upper bounds keep a typo from running for days (each measurement is repeated this often).
  if (o.reps < 1 || o.reps > 10000) {
    throw InputError("--reps", std::to_string(o.reps), "must be between 1 and 10000");
  }
  if (o.warmup < 0 || o.warmup > 10000) {
    throw InputError("--warmup", std::to_string(o.warmup), "must be between 0 and 10000");
  }
  if (o.max_tokens > (1 << 20)) {
    throw InputError("--max-tokens", std::to_string(o.max_tokens),
                     "must be at most 1048576 (2^20) tokens");
  }
  if (o.align < 1) throw InputError("--align", std::to_string(o.align), "must be >= 1");
  if (o.backend != "cpu" && o.backend != "cuda") {
    throw InputError("--backend", o.backend, "must be cpu or cuda");
  }
  // Decode rows below the grid: given (0 alone: none), or 1, 8 and 32 without --quick (on the
  // CPU too since 2026-12-04: Eigen runs a one-row product as a matrix-vector kernel about 10x
  // faster than the 64-row time a decode GEMM was read at, results/cpu/README.md).
  std::vector<std::int64_t> decode_rows;
  if (o.decode_rows_given) {
    if (o.decode_rows != std::vector<std::int64_t>{0}) {
      for (auto r : o.decode_rows) {
        if (r < 1 || r >= o.align) {
          throw InputError("--decode-rows", std::to_string(r),
                           "each must be at least 1 and below --align (" + std::to_string(o.align) +
                               "), where the grid starts (0 alone: none)");
        }
      }
      decode_rows = o.decode_rows;
    }
  } else if (!o.quick) {
    for (std::int64_t r : {1, 8, 32})
      if (r < o.align) decode_rows.push_back(r);
  }
  if (o.backend == "cpu" && o.attention != "auto") {
    throw InputError("--attention", o.attention, "applies to --backend cuda only");
  }
  std::unique_ptr<Backend> backend;
  if (o.backend == "cpu") {
    backend = make_cpu_backend();
  } else if (o.backend == "cuda") {
    backend = make_cuda_backend(o.attention);
    if (!backend) {
      throw InputError("--backend", "cuda", "this build has no CUDA (configure with nvcc present)");
    }
  } else {
    throw InputError("--backend", o.backend, "must be cpu or cuda");
  }
  sim::WorkloadOptions so = o.workload;
  if (so.hardware.empty() && o.backend == "cuda") {
    // The default labels the profile as an H200's: on another GPU it would be read as one.
    const std::string gpu = backend->device().value("name", std::string());
    // "H200" as a word: a GH200 (Grace Hopper) is another machine.
    const auto at = gpu.find("H200");
    // H200 NVL is the PCIe card (lower power, NVLink bridges): not h200x8's SXM part.
    const bool h200 = at != std::string::npos &&
                      (at == 0 || !std::isalnum(static_cast<unsigned char>(gpu[at - 1])));
    if (!h200 || gpu.find("NVL") != std::string::npos) {
      throw InputError("--hardware", "",
                       "not given, and this GPU is '" + gpu +
                           "', not an H200 (the default, h200x8): name its hardware file "
                           "(configs/hardware, or a copy of one with this GPU's datasheet "
                           "numbers), which the profile is labelled with");
    }
  }
  if (so.hardware.empty()) so.hardware = o.backend == "cpu" ? "cpu-host" : "h200x8";
  so.seq = 1;
  so.phase = "prefill";
  so.context = 0;
  // A CPU host holds what the profiler times: one layer's ops (make_workload's memory check
  // counts the layers a CPU run builds; a GPU's, the whole model, which must fit where it is
  // served). Until 2026-12-05 it was made with every layer, so a CPU profile of a model whose
  // layers do not all fit in host memory was refused. The sweep reads no layer count.
  so.layers = o.backend == "cpu" ? 1 : 0;
  const sim::Workload w = sim::make_workload(so);
  const sim::ShardDims d = sim::validate_workload(w);
  if (o.backend == "cuda") {
    // A profile of this GPU labelled as another's would be read as that GPU's measurements
    // (an H100's timings planning an H200).
    const std::string gpu = backend->device().value("name", std::string());
    if (!sim::same_gpu_model(gpu, w.hardware.gpu_name)) {
      throw InputError(w.hardware.origin, "gpu.name",
                       "is '" + w.hardware.gpu_name + "', but this GPU is '" + gpu +
                           "': the profile would be read as the file's GPU's measurements; "
                           "name this GPU's hardware file with --hardware (a copy of the "
                           "nearest one with this GPU's datasheet numbers)");
    }
  }
  // The profile is labelled with this hardware, and simulate reads it as that machine's
  // measurements: CPU timings labelled h200x8 would be used as an H200's.
  const bool cpu_file = w.hardware.is_cpu;
  if (cpu_file != (o.backend == "cpu")) {
    throw InputError("--hardware", w.hardware.name,
                     "is " + std::string(cpu_file ? "a CPU" : "a GPU") + " ('" +
                         w.hardware.gpu_name + "') but --backend " + o.backend + " measures " +
                         (o.backend == "cpu" ? "this machine's CPU" : "a GPU") +
                         "; the profile would be read as that hardware's measurements (for the "
                         "CPU: cpu-host, or a hardware file with gpu.kind \"cpu\")");
  }
  SweepOptions sw;
  sw.quick = o.quick;
  sw.align = o.align;
  if (o.gemm_step < -1) {
    throw InputError("--gemm-step", std::to_string(o.gemm_step), "must be >= 0 (0: the grid only)");
  }
  sw.gemm_step = o.gemm_step >= 0 ? o.gemm_step : (o.backend == "cuda" && !o.quick ? o.align : 0);
  std::sort(decode_rows.begin(), decode_rows.end());
  decode_rows.erase(std::unique(decode_rows.begin(), decode_rows.end()), decode_rows.end());
  sw.decode_rows = decode_rows;
  sw.accuracy = o.accuracy;
  sw.comm_workers = comm_workers(o.backend);
  sw.comm_lengths = comm_lengths(o.backend);
  sw.comm_beside_more = comm_beside_more(o.backend);
  sw.fragments = true;
  if (o.max_tokens < 0) {
    throw InputError("--max-tokens", std::to_string(o.max_tokens), "must be > 0 (or left out)");
  }
  sw.max_tokens =
      o.max_tokens > 0 ? o.max_tokens : (o.backend == "cpu" ? (o.quick ? 256 : 512) : 8192);
  if (sw.max_tokens < o.align) {
    throw InputError("--max-tokens", std::to_string(sw.max_tokens), "must be >= --align");
  }
  const auto items = make_sweep(w.model, d, w.tp, sw);
  HarnessOptions h;
  h.reps = o.reps;
  h.warmup = o.warmup;
  h.progress = o.progress;
  // Finished measurements go beside the output, so a killed run resumes; not beside a stream.
  if (const OutputTarget t = output_target(o.out, "--out"); !t.direct) {
    h.resume_path = t.path + ".partial";
  }
  nlohmann::json opts{
      {"backend", o.backend}, {"model", so.model},         {"hardware", so.hardware},
      {"tp", w.tp},           {"quick", o.quick},          {"max_tokens", sw.max_tokens},
      {"align", o.align},     {"gemm_step", sw.gemm_step}, {"decode_rows", sw.decode_rows},
      {"reps", o.reps},       {"warmup", o.warmup},        {"accuracy", o.accuracy}};
  if (o.backend == "cuda") opts["attention"] = o.attention;
  h.fingerprint = opts.dump();
  os << "tpo profile — " << backend->name() << " backend, " << w.model.name << " shard at TP "
     << w.tp << ": " << items.size() << " measurements (" << o.reps << " reps after " << o.warmup
     << " warm-up runs each)\n";
  const auto ms = run_sweep(*backend, items, h);

  sim::Profile p = assemble(ms, backend->dtype());
  if (!p.interference.empty()) p.interference_head_start_us = backend->interference_head_start_us();
  p.launch = backend->measure_launch(items);
  if (!p.launch.is_null()) {
    const sim::LaunchCosts lc = sim::launch_from_json(p.launch, "(measured)", "launch", {});
    os << "launch: " << std::fixed << std::setprecision(1) << lc.eager_of(sim::OpKind::Gemm)
       << " us host time per GEMM launch call, " << lc.eager_of(sim::OpKind::Norm)
       << " per norm; a CUDA graph launch adds " << lc.graph_launch_us << " us\n";
    os.unsetf(std::ios::fixed);
  }
  p.tool_version = tool_version();
  p.git_sha = git_sha();
  p.date = today();
  p.device = backend->device();
  p.options = opts;
  p.model = w.model.name;
  p.tp = w.tp;
  fit_profile(p);
  os << "measured " << p.gemm.size() << " GEMMs, " << p.attention.size() << " attentions, "
     << p.rowwise.size() << " norm/elementwise ops, " << p.allreduce.size()
     << " all-reduces\ninterference: a GEMM runs " << std::fixed << std::setprecision(2)
     << p.compute_slowdown_under_comm << "x as long beside communication, communication "
     << p.comm_slowdown_under_compute << "x as long beside a GEMM\n";
  os.unsetf(std::ios::fixed);
  if (o.accuracy) p.accuracy = accuracy_check(p, w.hardware, w.tp, ms, os);
  p.analytical_vs_measured = analytical_vs_measured(w.hardware, w.tp, ms, os);
  write_file_atomic(o.out, sim::profile_to_json(p).dump(1) + "\n", "--out");
  if (!h.resume_path.empty()) std::filesystem::remove(h.resume_path);
  os << "\nwrote " << output_name(o.out) << " (measured on this " << o.backend
     << "; use it with tpo simulate/plan --profile " << output_for_hint(o.out) << ")\n";
  return 0;
}

namespace {

// A message cannot take less than half the time of the fastest smaller one in the same run,
// once at least three are there: slow warm-up rows at the start (NVIDIA's H100 table has one)
// are then outvoted by a real one, and do not make the next row look impossible.
void check_plausible(const std::vector<sim::AllReducePoint>& pts, double time_us,
                     const std::string& where, const std::string& size_text,
                     const std::string& time_text, const char* field = "time",
                     const char* source = "run") {
  if (pts.size() < 3) return;
  const auto q = std::min_element(pts.begin(), pts.end(), [](const auto& a, const auto& b) {
    return a.t.median_us < b.t.median_us;
  });
  if (time_us < 0.5 * q->t.median_us) {
    throw InputError(where, field,
                     time_text + " us for " + size_text + " B, under half the " +
                         fmt("%.2f", q->t.median_us) + " us of " + std::to_string(q->bytes) +
                         " B, the fastest smaller message of the same " + source +
                         ": not a real all-reduce");
  }
}

sim::AllReducePoint measured_point(double bytes, double time_us) {
  sim::AllReducePoint p;
  p.bytes = static_cast<std::int64_t>(bytes);
  p.elements = p.bytes / 2;  // the graph's all-reduces carry bf16 values
  p.t.median_us = p.t.min_us = p.t.max_us = time_us;
  p.t.reps = 1;
  return p;
}

}  // namespace

std::vector<sim::AllReducePoint> parse_nccl_tests(const std::string& path,
                                                  std::int64_t ranks_override, bool in_place,
                                                  NcclTestsHeader* header_out) {
  if (ranks_override < 0 || ranks_override > 1 << 20) {
    throw InputError("--ranks", std::to_string(ranks_override),
                     "must be a rank count between 2 and 2^20 (or left out)");
  }
  std::istringstream in(read_input_file(path, ""));
  std::vector<sim::AllReducePoint> pts;
  std::int64_t line_no = 0;
  std::int64_t ranks = 0, rank_lines = 0, n_gpus = 0, runs = 0, graph_launches = 0;
  // Where a row's columns are. The header line names them ("size count type redop root time
  // algbw busbw #wrong time ..."), so versions that add columns (per-iteration statistics) are
  // read by name; without a header, the 12 (before 2.13) or 13 columns of the classic layout.
  struct Layout {
    std::size_t columns = 0;  // 0: not known from a header
    std::size_t time[2] = {0, 0}, algbw[2] = {0, 0}, check[2] = {0, 0};
    bool counts_wrong = true;  // "#wrong" (since 2.13), else "error" (largest relative error)
    std::int64_t line = 0;
  } header;
  const auto classic = [](std::size_t n) {
    Layout l;
    const std::size_t t = n == 13 ? 5 : 4;
    l.columns = n;
    l.time[0] = t, l.algbw[0] = t + 1, l.check[0] = t + 3;
    l.time[1] = t + 4, l.algbw[1] = t + 5, l.check[1] = t + 7;
    l.counts_wrong = n == 13;
    return l;
  };
  // Trailing words a row may carry beyond the header's (a time stamp, `-S 1`).
  const auto stamp = [](const std::string& t) {
    return t.find_first_not_of("0123456789-:.") == std::string::npos &&
           (t.find('-') != std::string::npos || t.find(':') != std::string::npos);
  };
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    std::istringstream ss(line);
    std::vector<std::string> tok;
    for (std::string t; ss >> t;) tok.push_back(t);
    // A launcher's label before each line: `srun --label` ("0:") or `mpirun --tag-output`
    // ("[1,0]<stdout>:", written against the line's first word).
    if (!tok.empty() && tok[0].size() > 1 && tok[0].back() == ':' &&
        tok[0].find_first_not_of("0123456789") == tok[0].size() - 1) {
      tok.erase(tok.begin());
    } else if (!tok.empty() && tok[0][0] == '[' && tok[0].find("]<std") != std::string::npos &&
               tok[0].find(':', tok[0].find("]<std")) != std::string::npos) {
      const std::string rest = tok[0].substr(tok[0].find(':', tok[0].find("]<std")) + 1);
      if (rest.empty()) {
        tok.erase(tok.begin());
      } else {
        tok[0] = rest;
      }
    }
    if (tok.empty()) continue;
    if (tok[0] == "#") {
      // "# Collective test starting: all_gather_perf" names the test (newer nccl-tests).
      if (tok.size() >= 5 && tok[1] == "Collective" && tok[3] == "starting:" &&
          tok[4].rfind("all_reduce_perf", 0) != 0) {
        throw InputError(path + ":" + std::to_string(line_no), "test",
                         "is the output of " + tok[4] + "; give all_reduce_perf output");
      }
      // The column header: out-of-place columns, then in-place ones, each from its "time".
      if (tok.size() > 4 && tok[1] == "size" &&
          std::find(tok.begin(), tok.end(), "redop") != tok.end()) {
        if (std::find(tok.begin(), tok.end(), "cputime") != tok.end()) {
          throw InputError(path + ":" + std::to_string(line_no), "cputime",
                           "the run reported CPU time (all_reduce_perf -C 1), not the GPU time "
                           "of each all-reduce: run it without -C");
        }
        Layout l;
        l.columns = tok.size() - 1;
        l.line = line_no;
        int half = -1;
        for (std::size_t i = 1; i < tok.size(); ++i) {
          const std::size_t at = i - 1;
          if (tok[i] == "time" && half < 1) l.time[++half] = at;
          if (half < 0) continue;
          if (tok[i] == "algbw" && !l.algbw[half]) l.algbw[half] = at;
          if ((tok[i] == "#wrong" || tok[i] == "error") && !l.check[half]) {
            l.check[half] = at;
            l.counts_wrong = tok[i] == "#wrong";
          }
        }
        if (half == 1 && l.algbw[0] && l.algbw[1] && l.check[0] && l.check[1]) header = l;
        continue;
      }
      // "# nThread 1 nGpus 8 minBytes ..." and one "#  Rank  N ..." line per rank. A second
      // such header is a second run (its ranks would be counted with the first's).
      if (tok.size() > 1 && tok[1] == "nThread" && ++runs > 1) {
        throw InputError(path + ":" + std::to_string(line_no), "nThread",
                         "a second run's header: the file holds more than one run of "
                         "all_reduce_perf; give one");
      }
      for (std::size_t i = 1; i + 1 < tok.size(); ++i) {
        if (tok[i] == "nGpus") {
          const long long n = std::atoll(tok[i + 1].c_str());
          if (n < 1 || n > (1 << 20) || tok[i + 1].size() > 8) {
            throw InputError(path + ":" + std::to_string(line_no), "nGpus",
                             tok[i + 1] + " is not a GPU count in [1, 2^20]");
          }
          ranks = std::max<std::int64_t>(ranks, n);
          n_gpus = std::max<std::int64_t>(n_gpus, n);
        }
        // "... validation: 1 graph: 1 ...": -G N, the timed iterations replayed as a CUDA graph.
        if (tok[i] == "graph:" && tok[1] == "nThread") {
          graph_launches = std::max<std::int64_t>(0, std::atoll(tok[i + 1].c_str()));
        }
      }
      if (tok.size() > 1 && tok[1] == "Rank") ++rank_lines;
      continue;
    }
    // A result row: a byte count, an element count, a type, then a reduction; other lines
    // (logs, NCCL INFO) are not rows.
    static const std::set<std::string> kRedops = {"sum", "prod", "max", "min", "avg", "none"};
    const auto digits = [](const std::string& t) {
      return !t.empty() && t.find_first_not_of("0123456789") == std::string::npos;
    };
    if (tok.size() < 4 || !kRedops.count(tok[3]) || !digits(tok[1])) continue;
    // A result row with an impossible number is a broken file, not a row to skip.
    const std::string where = path + ":" + std::to_string(line_no);
    std::size_t extra = 0;
    if (header.columns) {
      while (tok.size() - extra > header.columns && stamp(tok[tok.size() - 1 - extra])) ++extra;
    }
    const Layout l = header.columns ? header : classic(tok.size());
    if (header.columns ? tok.size() - extra != header.columns
                       : tok.size() != 12 && tok.size() != 13) {
      throw InputError(
          where, "row",
          std::to_string(tok.size()) + " columns where " +
              (header.columns ? "the header (line " + std::to_string(header.line) + ") names " +
                                    std::to_string(header.columns)
                              : std::string("all_reduce_perf prints 12 (or 13, with root)")) +
              ": a line cut off (a run killed mid-line) or edited; remove it");
    }
    const std::size_t t_at = l.time[in_place ? 1 : 0];
    if (tok[3] != "sum") {
      throw InputError(where, "redop",
                       tok[3] +
                           ": a row of another reduction or collective; tpo models sum "
                           "all-reduces (all_reduce_perf -o sum)");
    }
    char* end = nullptr;
    const double size = std::strtod(tok[0].c_str(), &end);
    if (*end || !std::isfinite(size) || size < 1 || size > 1e15 || size != std::floor(size)) {
      throw InputError(where, "size", tok[0] + " is not a byte count in [1, 1e15]");
    }
    const double time_us = std::strtod(tok[t_at].c_str(), &end);
    if (*end || !std::isfinite(time_us) || !(time_us > 0) || time_us > 1e9) {
      throw InputError(where, "time", tok[t_at] + " is not a time in (0, 1e9] us");
    }
    // A row that failed nccl-tests' own check measured something other than a correct
    // all-reduce. Since 2.13 (the root column) the column counts wrong elements; before, it
    // held the largest relative error ("2e-07"). "N/A": run without the check (-c 0).
    for (const std::size_t w : l.check) {
      if (tok[w] == "N/A") continue;
      if (l.counts_wrong) {
        if (tok[w] != "0") {
          throw InputError(where, "#wrong",
                           tok[w] + " wrong elements: nccl-tests found this row's result wrong");
        }
      } else {
        const double err = std::strtod(tok[w].c_str(), &end);
        if (*end || !std::isfinite(err) || err > 1e-2) {
          throw InputError(where, "error",
                           tok[w] +
                               ": nccl-tests found this row's result wrong (relative "
                               "error above 1e-2)");
        }
      }
    }
    // The row's own algbw (GB/s, printed to 0.01) is its size over its time: a row whose two
    // disagree was edited or corrupted. Times of 1e7 us and more print with two digits.
    const std::size_t bw_at = l.algbw[in_place ? 1 : 0];
    const double algbw = std::strtod(tok[bw_at].c_str(), &end);
    const double implied = size / (time_us * 1e3);
    const double rel = tok[t_at].find_first_of("eE") != std::string::npos ? 0.06 : 0.02;
    if (*end || !std::isfinite(algbw) || std::abs(algbw - implied) > 0.01 + rel * implied) {
      throw InputError(where, "algbw",
                       tok[bw_at] + " GB/s, but the row's size over its time is " +
                           fmt("%.2f", implied) +
                           " GB/s: the row's columns disagree (an edited or corrupted row, or a "
                           "run with -C 1, whose time is CPU time: run without it)");
    }
    if (!pts.empty() && size <= static_cast<double>(pts.back().bytes)) {
      throw InputError(where, "size",
                       tok[0] +
                           " B does not follow a smaller size: the file holds more than one run "
                           "(give one, sizes ascending)");
    }
    check_plausible(pts, time_us, where, tok[0], tok[t_at]);
    pts.push_back(measured_point(size, time_us));
  }
  if (pts.empty()) {
    throw InputError(path, "", "no all_reduce_perf result rows found (expected nccl-tests output)");
  }
  ranks = ranks_override > 0 ? ranks_override : std::max(ranks, rank_lines);
  if (ranks < 2) {
    throw InputError(path, "nGpus", "cannot tell how many ranks ran; pass --ranks N");
  }
  for (auto& p : pts) p.ranks = ranks;
  if (header_out) *header_out = {n_gpus, graph_launches};
  return pts;
}

std::vector<sim::AllReducePoint> parse_allreduce_csv(const std::string& path, std::int64_t ranks,
                                                     std::string* note_out) {
  if (ranks < 2 || ranks > 1 << 20) {
    throw InputError("--ranks", std::to_string(ranks), "must be a rank count between 2 and 2^20");
  }
  std::string text = read_input_file(path, "");
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);  // a UTF-8 byte order mark
  std::istringstream in(text);
  const auto trim = [](const std::string& t) {
    const auto b = t.find_first_not_of(" \t\r");
    if (b == std::string::npos) return std::string();
    return t.substr(b, t.find_last_not_of(" \t\r") - b + 1);
  };
  // Text that goes into a report or a file: printable ASCII, at most `max` characters.
  const auto printable = [](const std::string& t, std::size_t max) {
    std::string out;
    for (const unsigned char ch : t) {
      if (out.size() == max) return out + "...";
      out += ch >= 0x20 && ch < 0x7f ? static_cast<char>(ch) : '?';
    }
    return out;
  };
  // Fields split at commas; a field in double quotes may hold commas ("" is a quote in it).
  const auto split = [&](const std::string& line, const std::string& where) {
    std::vector<std::string> f(1);
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
      const char ch = line[i];
      if (quoted) {
        if (ch != '"') {
          f.back() += ch;
        } else if (i + 1 < line.size() && line[i + 1] == '"') {
          f.back() += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else if (ch == '"' && trim(f.back()).empty()) {
        quoted = true;
        f.back().clear();
      } else if (ch == ',') {
        f.emplace_back();
      } else {
        f.back() += ch;
      }
    }
    if (quoted) throw InputError(where, "row", "a quoted field is not closed");
    for (auto& x : f) x = trim(x);
    return f;
  };
  // A number as a CSV holds it: decimal digits, a point, an exponent; no sign, no hex.
  const auto number = [](const std::string& t, bool whole) {
    static const std::string kDigits = "0123456789";
    if (t.empty() || kDigits.find(t[0]) == std::string::npos) return -1.0;
    if (whole && t.find_first_not_of(kDigits) != std::string::npos) return -1.0;
    if (t.find_first_not_of(kDigits + ".eE+-") != std::string::npos) return -1.0;
    char* end = nullptr;
    const double v = std::strtod(t.c_str(), &end);
    return *end || !std::isfinite(v) ? -1.0 : v;
  };
  std::vector<sim::AllReducePoint> pts;
  std::vector<std::string> names;
  std::size_t bytes_at = 0, time_at = 0;
  std::int64_t line_no = 0;
  std::string note;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    line = trim(line);
    if (line.empty()) continue;
    const std::string where = path + ":" + std::to_string(line_no);
    if (line[0] == '#') {  // the first comment: where the times are from
      if (note.empty()) note = printable(trim(line.substr(1)), 300);
      continue;
    }
    const std::vector<std::string> f = split(line, where);
    if (names.empty()) {  // the header
      names = f;
      int bytes_cols = 0, time_cols = 0;
      for (std::size_t i = 0; i < names.size(); ++i) {
        std::string n = names[i];
        std::transform(n.begin(), n.end(), n.begin(),
                       [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
        if (n == "bytes" && bytes_cols++ == 0) bytes_at = i;
        if (n == "time_us" && time_cols++ == 0) time_at = i;
      }
      if (bytes_cols > 1 || time_cols > 1) {
        throw InputError(
            where, "header",
            "'" + printable(line, 120) + "' names the bytes or the time_us column more than once");
      }
      if (bytes_cols == 0 || time_cols == 0) {
        throw InputError(where, "header",
                         "'" + printable(line, 120) +
                             "': the first line that is not a # comment must name the columns, "
                             "with one called bytes (the message size) and one called time_us "
                             "(one all-reduce's time in microseconds)");
      }
      continue;
    }
    if (f.size() != names.size()) {
      throw InputError(where, "row",
                       std::to_string(f.size()) + " fields where the header names " +
                           std::to_string(names.size()));
    }
    const std::string& b = f[bytes_at];
    const std::string& t = f[time_at];
    const double size = number(b, true);
    if (!(size >= 1) || size > 1e15) {
      throw InputError(where, "bytes",
                       "'" + printable(b, 40) + "' is not a byte count in [1, 1e15] (digits only)");
    }
    const double time_us = number(t, false);
    if (!(time_us > 0) || time_us > 1e9) {
      throw InputError(where, "time_us", "'" + printable(t, 40) + "' is not a time in (0, 1e9] us");
    }
    if (!pts.empty() && size <= static_cast<double>(pts.back().bytes)) {
      throw InputError(where, "bytes",
                       b + " does not follow a smaller size: give each message size once, "
                           "ascending");
    }
    check_plausible(pts, time_us, where, b, t, "time_us", "file");
    pts.push_back(measured_point(size, time_us));
  }
  if (names.empty()) {
    throw InputError(path, "header", "no header line (bytes,time_us) and no rows");
  }
  if (pts.size() < 2) {
    throw InputError(path, "rows",
                     std::string(pts.empty() ? "no rows" : "one message size") +
                         " under the header; an all-reduce table needs at least two");
  }
  for (auto& p : pts) p.ranks = ranks;
  if (note_out) *note_out = note;
  return pts;
}

}  // namespace tpo::profiler
