// Validation runs: simulate, execute, check, compare.
#include "validate/validate_run.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "sim/config_paths.h"
#include "sim/engine.h"
#include "sim/error.h"
#include "sim/format.h"
#include "sim/json_io.h"
#include "sim/profile_cost.h"
#include "sim/report.h"
#include "sim/stats.h"
#include "sim/version.h"
#include "validate/kernels/process_group.h"

namespace tpo::validate {

using ojson = nlohmann::ordered_json;

bool ValidateReport::all_correct() const {
  for (const auto& c : cases) {
    if (!c.correct) return false;
  }
  return true;
}

std::size_t ValidateReport::resumed_cases() const {
  return static_cast<std::size_t>(
      std::count_if(cases.begin(), cases.end(), [](const CaseResult& c) { return c.resumed; }));
}

namespace {

// The runs to validate: the one given by options, or every point of a plan, exactly as
// planned — with the hardware (the machine running), the profile and the layers replaced only
// when given, and with emulated communication imitating the plan's machine unless told
// otherwise. Every run is checked here, cost model included, before any of them executes.
struct RunCase {
  sim::PlannedRun run;
  int group = -1;
  bool picked = true;
  sim::PlannedRun source;  // the run as the plan file has it (before options replaced parts)
  std::string where;       // its field path in the plan file ("lookup[2].run"), for errors
};

// CUDA graphs exist on the CUDA backend only; eager execution is predicted with one host
// thread per rank, which one process driving several GPUs is not.
// `where`: the plan run's field path ("lookup[N].run") when the mode came from a plan.
void check_exec(const ValidateOptions& o, const std::string& exec, std::int64_t tp,
                const std::string& where = "") {
  const bool from_plan = !o.exec_given && !o.plan_path.empty();
  if (o.backend == "cuda" && o.comm == "nccl" && !o.mpi && tp > 1 && exec == "eager") {
    throw InputError(
        from_plan ? o.plan_path : "--exec", from_plan ? where + ".workload.exec" : "eager",
        std::string(from_plan ? "eager " : "") +
            "is predicted with one host thread per rank; with --comm nccl run one rank "
            "per process (--mpi under mpirun), or use --comm emulated");
  }
  if (o.backend == "cpu" && exec == "graph") {
    throw InputError(
        from_plan ? o.plan_path : "--exec", from_plan ? where + ".workload.exec" : "graph",
        std::string(from_plan ? "graph " : "") +
            "needs --backend cuda: the CPU runtime has no CUDA graphs (its threads run "
            "every op as soon as it may start; use queued or eager)");
  }
}

// A config named by a shipped name or by a path, as one key: the canonical path of the file
// it reads (sub: "models", "hardware"; "" for a plain path), or the text where none is found.
std::string same_file_key(const std::string& sub, const std::string& spec) {
  if (spec.empty()) return spec;
  std::error_code ec;
  try {
    const std::string path =
        sub.empty() || sim::is_config_path(spec) ? spec : sim::resolve_config(sub, spec, sub);
    const auto canon = std::filesystem::weakly_canonical(path, ec);
    return ec ? spec : canon.string();
  } catch (const std::exception&) {
    return spec;
  }
}

// --batch with --plan: one batch of a generate report, its points renumbered; refused for a
// plan (its points carry their own batch) and for a batch the report does not have.
void keep_batch(sim::PlanFile& p, std::int64_t batch) {
  const std::string n = std::to_string(batch);
  if (p.generation.empty()) {
    throw InputError("--batch", n,
                     "comes from the plan with --plan; drop it (it picks one batch of a generate "
                     "report)");
  }
  std::vector<std::size_t> index(p.entries.size(), sim::GenerationPoint::npos);
  std::vector<sim::PlanEntry> entries;
  for (std::size_t i = 0; i < p.entries.size(); ++i) {
    if (p.entries[i].run.workload.batch != batch) continue;
    index[i] = entries.size();
    entries.push_back(p.entries[i]);
  }
  if (entries.empty()) {
    std::string have;
    for (const auto& g : p.generation) {
      const std::string b = std::to_string(g.batch);
      if (have.find(" " + b + ",") == std::string::npos) have += " " + b + ",";
    }
    have.pop_back();
    throw InputError("--batch", n, "the report " + p.path + " has batches" + have);
  }
  std::vector<sim::GenerationPoint> gen;
  for (auto g : p.generation) {
    if (g.batch != batch) continue;
    g.prefill_point = index[g.prefill_point];
    if (g.decode_point != sim::GenerationPoint::npos) g.decode_point = index[g.decode_point];
    gen.push_back(std::move(g));
  }
  p.entries = std::move(entries);
  p.generation = std::move(gen);
}

std::vector<RunCase> runs_of(const ValidateOptions& o, bool emulated, sim::PlanFile* read) {
  if (o.plan_path.empty()) {
    const sim::Workload w = sim::make_workload(o.workload);
    check_exec(o, o.workload.exec, o.workload.tp);
    const auto kind = sim::parse_strategy_name(o.strategy.strategy);
    const sim::PlannedRun run{o.workload, sim::make_spec(o.strategy, w, kind)};
    return {{run, -1, true, run, ""}};
  }
  sim::PlanFile plan = sim::load_points(o.plan_path);
  if (o.plan_batch != 0) keep_batch(plan, o.plan_batch);
  std::vector<RunCase> out;
  for (std::size_t g = 0; g < plan.entries.size(); ++g) {
    const auto& e = plan.entries[g];
    std::vector<sim::PlannedRun> mine{e.run};
    for (std::size_t a = 0; a < e.alternatives.size() && int(a) < o.alternatives; ++a) {
      mine.push_back(e.alternatives[a].first);
    }
    for (std::size_t k = 0; k < mine.size(); ++k) {
      sim::PlannedRun r = mine[k];
      // Where this run is in the file: the pick's, or an alternative's own (a generate report's).
      const std::string& run_where =
          k == 0 || k > e.alternatives_where.size() ? e.run_where : e.alternatives_where[k - 1];
      if (emulated)
        r.workload.emulate = o.workload.emulate.empty() ? r.workload.hardware : o.workload.emulate;
      if (o.hardware_given) r.workload.hardware = o.workload.hardware;
      if (o.profile_given) r.workload.profile = o.workload.profile;
      if (o.layers_given) r.workload.layers = o.workload.layers;
      if (o.exec_given) r.workload.exec = o.workload.exec;
      if (o.rope_given) r.workload.rope = o.workload.rope;
      if (o.add_norm_given) r.workload.add_norm = o.workload.add_norm;
      if (o.allreduce_fusion_given) r.workload.allreduce_fusion = o.workload.allreduce_fusion;
      if (o.sm_clock_given) r.workload.sm_clock = o.workload.sm_clock;
      if (o.comm_ctas_given) r.workload.comm_ctas = o.workload.comm_ctas;
      // The plan's predictions came from its profile as it was: one changed since would be
      // re-predicted silently, and the plan's numbers no longer be what validate prints.
      if (!plan.profile_digest.empty() && !o.profile_given && !r.workload.profile.empty() &&
          std::filesystem::exists(r.workload.profile) &&
          file_digest(r.workload.profile, "--profile") != plan.profile_digest) {
        throw InputError(o.plan_path, "profile_digest",
                         "the profile " + r.workload.profile +
                             " changed since the plan was made: re-plan with it, or pass "
                             "--profile " +
                             r.workload.profile +
                             " to validate the plan's schedules predicted "
                             "by it as it is now");
      }
      // A file the plan names (not replaced by an option) that is not there: the plan's field.
      for (const auto& [field, spec, replaced] :
           {std::tuple<const char*, std::string, bool>{"hardware", r.workload.hardware,
                                                       o.hardware_given},
            {"profile", r.workload.profile, o.profile_given},
            {"emulate", r.workload.emulate, !o.workload.emulate.empty()}}) {
        std::error_code ec;
        if (!replaced && sim::is_config_path(spec) && !std::filesystem::exists(spec, ec)) {
          throw InputError(o.plan_path, run_where + ".workload." + field,
                           "'" + spec + "': " + sim::missing_file_text(plan.made_in) +
                               " (a plan keeps paths as typed when it was made: run from that "
                               "folder, or replace it with --" +
                               field + ")");
        }
      }
      // A point the plan file describes impossibly is the file's fault: name its field. Where an
      // option replaced the plan's value, or the machine running does not fit the point, the
      // option is named.
      try {
        const sim::Workload w = sim::make_workload(r.workload);
        sim::build_schedule(w, r.spec);
        sim::make_cost_model(w, r.workload.profile);
      } catch (const FieldError& err) {
        const std::string& f = err.name();
        const bool overridden =
            (f == "hardware" && o.hardware_given) || (f == "profile" && o.profile_given) ||
            (f == "layers" && o.layers_given) || (f == "exec" && o.exec_given) ||
            (f == "rope" && o.rope_given) || (f == "add_norm" && o.add_norm_given) ||
            (f == "allreduce_fusion" && o.allreduce_fusion_given) ||
            (f == "sm_clock" && o.sm_clock_given) || (f == "comm_ctas" && o.comm_ctas_given) ||
            (f == "emulate" && !o.workload.emulate.empty());
        if (overridden) throw;
        const std::string replace_hint =
            f == "sm_clock"    ? " (--sm-clock replaces the plan's; 0: none)"
            : f == "comm_ctas" ? " (--comm-ctas replaces the plan's; 0: the default)"
                               : "";
        if (o.hardware_given && (f == "tp" || f == "seq" || f == "context" || f == "profile" ||
                                 f == "sm_clock" || f == "comm_ctas")) {
          throw InputError("--hardware", o.workload.hardware,
                           "does not fit the plan's " + e.where + " (" + f + " " + err.value() +
                               "): " + err.problem() + replace_hint);
        }
        if (o.profile_given && f == "sm_clock") {
          throw InputError("--profile", o.workload.profile,
                           "does not fit the plan's " + e.where + " (" + f + " " + err.value() +
                               "): " + err.problem() + replace_hint);
        }
        const bool of_strategy = f == "strategy" || f == "chunk_tokens" || f == "pieces" ||
                                 f == "ladder_layers" || f == "split" || f == "chunks";
        throw InputError(o.plan_path, run_where + (of_strategy ? ".strategy." : ".workload.") + f,
                         err.value() + ": " + err.problem());
      }
      check_exec(o, r.workload.exec, r.workload.tp, run_where);
      out.push_back({std::move(r), static_cast<int>(g), k == 0, mine[k], run_where});
    }
  }
  *read = plan;
  return out;
}

}  // namespace

namespace {

// How an emulated run sized its all-reduce copies: from the link's published table where it
// applies at the run's TP, else by latency + bandwidth.
std::string emulated_allreduce_of(const sim::Workload& w) {
  return w.hardware.allreduce_table(w.tp) ? "allreduce_table" : "latency+bandwidth";
}

// What the measurements ran on, in words, for the report.
std::string measured_on(const ValidateOptions& o, bool emulated, const std::string& ctas) {
  const std::string procs = o.mpi ? std::to_string(mpi::size()) + " processes" : "";
  if (o.mpi && o.backend == "cpu") {
    return "CPUs, one process per rank under MPI (" + procs +
           "), fp32, MPI all-reduce; times of rank 0 (its all-reduces include waiting for the "
           "others)";
  }
  if (o.mpi) {
    return "one GPU per process under MPI (" + procs +
           "), NCCL all-reduce; times of rank 0 (its all-reduces include waiting for the others)";
  }
  if (o.backend == "cpu") {
    return "this machine's CPU: ranks are threads, fp32, shared-memory all-reduce";
  }
  if (emulated) {
    return "one GPU, EMULATED COMMUNICATION: rank 0 only; each all-reduce is a copy kernel on " +
           ctas +
           " CTAs lasting the cost model's PREDICTED all-reduce time on the target machine "
           "(measured: compute and overlap; not: the links)";
  }
  return "one GPU per rank, NCCL all-reduce";
}

// Every option checked before any work; returns the tolerance in force.
double check_options(const ValidateOptions& o, bool emulated) {
  if (!(o.nccl_timeout_s >= 1) || !(o.nccl_timeout_s <= 86400)) {  // NaN included
    throw InputError("--nccl-timeout", std::to_string(o.nccl_timeout_s),
                     "must be between 1 and 86400 seconds");
  }
  if (o.backend != "cpu" && o.backend != "cuda") {
    throw InputError("--backend", o.backend, "must be cpu or cuda");
  }
  if (o.backend == "cuda" && o.comm != "nccl" && o.comm != "emulated") {
    throw InputError("--comm", o.comm, "must be nccl or emulated");
  }
  if (o.attention != "auto" && o.attention != "cudnn" && o.attention != "cublas") {
    throw InputError("--attention", o.attention, "must be auto, cudnn or cublas");
  }
  if (o.backend == "cuda" && !cuda_runtime_built()) {
    throw InputError("--backend", "cuda", "this build has no CUDA (configure where nvcc is found)");
  }
  // 0 is refused: no two summation orders agree to the last bit.
  if (o.tolerance && (!(*o.tolerance > 0) || !(*o.tolerance < 1))) {  // NaN, inf too
    throw InputError("--tolerance", fmt("%g", *o.tolerance),
                     "must be a relative error in (0, 1) (or left out)");
  }
  if (o.repeat < 1 || o.repeat > 10000) {
    throw InputError("--repeat", std::to_string(o.repeat), "must be between 1 and 10000");
  }
  if (o.alternatives < 0 || o.alternatives > 64) {
    throw InputError("--alternatives", std::to_string(o.alternatives),
                     "must be between 0 and 64 (other candidates measured per planned point)");
  }
  if (o.warmup < 0 || o.warmup > 10000) {
    throw InputError("--warmup", std::to_string(o.warmup), "must be between 0 and 10000");
  }
  if (o.mpi && emulated) {
    throw InputError("--mpi", "", "runs one rank per process; not with --comm emulated");
  }
  if (!o.workload.emulate.empty() && !emulated) {
    throw InputError("--emulate", o.workload.emulate,
                     "applies to --backend cuda --comm emulated only");
  }
  // fp32 on the CPU; bf16 on the GPU.
  return o.tolerance ? *o.tolerance : (o.backend == "cpu" ? 1e-5 : 2e-2);
}

// Host memory a run needs: the fp32 weights and KV prefix of every rank it generates, and on
// the CPU each rank's activations. Refused up front (naming --layers) when it would not fit,
// rather than failing after minutes of data generation.
void check_host_memory(const ValidateOptions& o, const sim::Workload& w, bool emulated) {
  const sim::ShardDims d = sim::validate_workload(w);
  const double H = double(d.hidden), qkv = double(d.qkv_n()), qd = double(d.q_heads * d.head_dim),
               f = double(d.ffn), kvd = double(d.kv_heads * d.head_dim);
  const double ranks = emulated ? 1.0 : double(w.tp), layers = double(w.layers);
  const double tokens = double(w.batch * w.seq), cap = double(w.batch * (w.seq + w.context));
  const double per_layer = H * qkv + qd * H + 3.0 * H * f + 2.0 * H + 2.0 * cap * kvd;
  double floats = ranks * layers * per_layer;
  if (o.backend == "cpu") {
    floats += ranks * (tokens * (2 * H + qkv + qd + 3 * f) + 2 * layers * tokens * H +
                       2 * layers * cap * kvd);
  }
  if (w.embed_head) {
    // Each rank's embedding slice and LM-head columns (a replicated table: every rank's copy),
    // the reference's float64 copy of one slice of the LM head, and on the CPU the logits.
    const double v = double(d.vocab);
    floats += ranks * 2.0 * v * H + 2.0 * v * H;
    if (o.backend == "cpu") floats += ranks * double(w.tp * w.batch) * v;
  }
  const double need = 4.0 * floats;
  const double have = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  if (have > 0 && need > 0.8 * have) {
    const double gib = 1024.0 * 1024.0 * 1024.0;
    char msg[512];
    std::snprintf(msg, sizeof msg,
                  "%lld layers of %s at TP %lld, batch %lld x %lld tokens, need about %.1f GiB of "
                  "host memory here (fp32 weights, activations and KV of every rank) and this "
                  "machine has %.1f GiB; validate fewer layers, a smaller batch or fewer tokens",
                  static_cast<long long>(w.layers), w.model.name.c_str(),
                  static_cast<long long>(w.tp), static_cast<long long>(w.batch),
                  static_cast<long long>(w.seq + w.context), need / gib, have / gib);
    throw InputError("--layers", std::to_string(w.layers), msg);
  }
}

// The logits at the end of a run's output (--embed-head): batch x every slice's vocabulary.
std::size_t logit_count(const sim::Workload& w) {
  if (!w.embed_head) return 0;
  const sim::ShardDims d = sim::validate_workload(w);
  return std::size_t(w.batch * (w.vocab_replicated ? 1 : w.tp) * d.vocab);
}

// On the GPU the float64 reference (a host computation) is made for every strategy where it
// costs little (tiny models, the GPU tests), not only where it is the only check: about 1e10
// multiply-adds, a few seconds of host time.
// Multiply-adds of the float64 reference forward of a run (every rank it makes; one when
// emulated), about.
double reference_macs(const sim::Workload& w, bool emulated) {
  const sim::ShardDims d = sim::validate_workload(w);
  const double H = double(d.hidden), f = double(d.ffn);
  const double per_token = H * double(d.qkv_n()) + double(d.q_heads * d.head_dim) * H + 3.0 * H * f;
  const double ranks = emulated ? 1.0 : double(w.tp);
  const double tokens = double(w.batch * w.seq), keys = double(w.context + w.seq);
  const double attention = 2.0 * double(d.q_heads * d.head_dim) * keys;
  const double head = w.embed_head ? H * double(d.vocab) * double(w.batch) / tokens : 0.0;
  return ranks * tokens * (double(w.layers) * (per_token + attention) + head);
}

bool reference_is_cheap(const sim::Workload& w, bool emulated) {
  return reference_macs(w, emulated) < 1e10;
}

// A finished case's measurements and checks as the resume log keeps them (its prediction is
// made again). A non-finite error (NaN output) is kept as null.
nlohmann::json measured_json(const CaseResult& c) {
  const RunResult& m = c.measured;
  nlohmann::json kernels = nlohmann::json::array();
  for (const auto& g : m.gemm_kernels) kernels.push_back({g.m, g.n, g.k, g.kernel});
  const auto error = [](double e) { return std::isfinite(e) ? nlohmann::json(e) : nullptr; };
  return {{"start_ns", m.start_ns},
          {"end_ns", m.end_ns},
          {"wait_ns", m.wait_ns},
          {"total_ns", m.total_ns},
          {"totals_ns", m.totals_ns},
          {"untimed_totals_ns", m.untimed_totals_ns},
          {"attention_kernel", m.attention_kernel},
          {"device", m.device},
          {"gemm_kernels", kernels},
          {"copy_gbps", m.copy_gbps},
          {"copy_fixed_us", m.copy_fixed_us},
          {"copy_ctas", m.copy_ctas},
          {"measured_none_ns", c.measured_none_ns},
          {"error_vs_reference", error(c.error_vs_reference)},
          {"error_vs_none", error(c.error_vs_none)},
          {"correct", c.correct}};
}

void read_measured(const nlohmann::json& j, CaseResult* c) {
  RunResult& m = c->measured;
  j.at("start_ns").get_to(m.start_ns);
  j.at("end_ns").get_to(m.end_ns);
  j.at("wait_ns").get_to(m.wait_ns);
  j.at("total_ns").get_to(m.total_ns);
  j.at("totals_ns").get_to(m.totals_ns);
  j.at("untimed_totals_ns").get_to(m.untimed_totals_ns);
  j.at("attention_kernel").get_to(m.attention_kernel);
  m.device = j.value("device", std::string());
  for (const auto& g : j.at("gemm_kernels")) {
    m.gemm_kernels.push_back({g.at(0).get<std::int64_t>(), g.at(1).get<std::int64_t>(),
                              g.at(2).get<std::int64_t>(), g.at(3).get<std::string>()});
  }
  j.at("copy_gbps").get_to(m.copy_gbps);
  j.at("copy_fixed_us").get_to(m.copy_fixed_us);
  j.at("copy_ctas").get_to(m.copy_ctas);
  j.at("measured_none_ns").get_to(c->measured_none_ns);
  const auto error = [](const nlohmann::json& e) {
    return e.is_null() ? std::numeric_limits<double>::infinity() : e.get<double>();
  };
  c->error_vs_reference = error(j.at("error_vs_reference"));
  c->error_vs_none = error(j.at("error_vs_none"));
  j.at("correct").get_to(c->correct);
  c->resumed = true;
}

// One case: predicted (the strategy and none), executed (the strategy and none), checked. With
// `resumed` (a resume log's entry for it): predicted, and its measurements and checks read back
// (on a rank that does not report, nothing: rank 0 holds them).
CaseResult run_case(const ValidateOptions& o, const sim::PlannedRun& run, const sim::Workload& w,
                    const RunOptions& ro, bool reporter, double tolerance, std::string* cost_model,
                    nlohmann::ordered_json* execution, const nlohmann::json* resumed = nullptr) {
  const bool emulated = o.backend == "cuda" && o.comm == "emulated";
  const auto cm = sim::make_cost_model(w, run.workload.profile);
  *cost_model = cm->name();
  *execution = sim::execution_json(cm->exec(), cm->launch());
  CaseResult c;
  c.run = run;
  // The run as it ran, every field explicit (a direct case's context was -1, "by default").
  c.run.workload = sim::explicit_options(run.workload, w);
  c.workload = w;
  c.spec = run.spec;
  c.schedule = sim::build_schedule(w, c.spec);
  sim::Engine engine;
  c.predicted = engine.run(c.schedule, sim::cost_schedule(c.schedule, *cm));
  c.cost_sources = sim::cost_sources(c.schedule, *cm);
  const sim::Schedule none_s = sim::build_schedule(w, sim::StrategySpec(sim::StrategyKind::None));
  c.predicted_none_ns = engine.run(none_s, sim::cost_schedule(none_s, *cm)).total_ns;
  if (resumed) {
    if (reporter) read_measured(*resumed, &c);
    return c;
  }
  if (reporter) {
    std::fprintf(stderr, "validating %s (%s) ...\n", c.schedule.strategy.c_str(),
                 sim::workload_line(w).c_str());
  }
  // Emulated communication: each all-reduce lasts what the target machine's would.
  auto targets = [&](const sim::Schedule& sch) {
    std::vector<std::int64_t> t;
    for (const auto& op : sch.ops) {
      // The collective's own time: an add it also runs (--allreduce-fusion) runs after it.
      sim::Op pure = op;
      pure.residual_of = -1;
      pure.post_norm = pure.norm_after = 0;
      t.push_back(op.kind == sim::OpKind::AllReduce ? cm->standalone_ns(pure) : 0);
    }
    return t;
  };
  RunOptions rx = ro;
  rx.exec = w.exec;
  auto execute = [&](const sim::Schedule& sch) {
    return o.backend == "cpu"
               ? run_cpu(w, sch, rx)
               : run_cuda(w, sch, rx, o.comm, targets(sch), int(w.hardware.contention.comm_ctas));
  };
  c.measured = execute(c.schedule);
  // none runs the attention kernel the case ran (--attention auto may have fallen back to the
  // cuBLAS one for a shape of the case's): a speedup between two kernels would mean nothing.
  if (c.measured.attention_kernel == "cudnn-sdpa") rx.attention = "cudnn";
  if (c.measured.attention_kernel == "cublas-batched") rx.attention = "cublas";
  const RunResult none = c.spec.kind == sim::StrategyKind::None ? c.measured : execute(none_s);
  c.measured_none_ns = none.total_ns;
  // The float64 reference is cheap on CPU-sized runs and always used there; on the GPU (large
  // shards) it is computed where it is the only check: strategies that change the model.
  // Function-preserving ones are checked against none's output.
  c.correct = true;
  c.error_vs_reference = -1;
  if (!reporter) return c;  // under --mpi rank 0 checks the output (every rank holds the same)
  const bool same_function = sim::preserves_function(c.spec.kind);
  const std::size_t logits = logit_count(w);
  if (o.backend == "cpu" || !same_function || reference_is_cheap(w, emulated)) {
    // A large run's reference takes host time the run itself did not: said before it starts
    // (about 5e10 multiply-adds a second on 16 cores).
    if (const double macs = reference_macs(w, emulated); macs > 1e12) {
      std::fprintf(stderr,
                   "checking it against the float64 reference forward on the host (about %.0e "
                   "multiply-adds: minutes; fewer --layers or tokens make it shorter) ...\n",
                   macs);
    }
    c.error_vs_reference = output_error(
        c.measured.output, reference_forward(w, c.spec, ro.seed, emulated ? 1 : 0), logits);
    c.correct = c.error_vs_reference <= tolerance;
  }
  if (same_function) {
    c.error_vs_none = output_error(c.measured.output, none.output, logits);
    c.correct = c.correct && c.error_vs_none <= tolerance;
  }
  return c;
}

}  // namespace

namespace {

// Ctrl-C while cases run: the report is written only when every case has run, so say what is
// lost (which cases had run) and exit 130 at once (CUDA or NCCL teardown behind running kernels
// can hang). The message is made before each case, the handler only writes it.
char g_interrupt_msg[2][4096];
std::atomic<int> g_interrupt_slot{-1};
extern "C" void on_validate_sigint(int sig) {
  const int slot = g_interrupt_slot.load();
  if (slot >= 0) {
    // mpirun forwards a Ctrl-C to its processes as SIGTERM.
    const char* head =
        sig == SIGINT ? "\ntpo: interrupted (Ctrl-C): " : "\ntpo: stopped (SIGTERM): ";
    const char* m = g_interrupt_msg[slot];
    ssize_t ignored = ::write(2, head, std::strlen(head));
    ignored = ::write(2, m, std::strlen(m));
    (void)ignored;
  }
  ::_exit(128 + sig);
}
// `log`: the resume log the finished cases are in (empty: none kept).
void say_on_interrupt(std::size_t done, std::size_t all, const std::string& log) {
  const int slot = g_interrupt_slot.load() == 0 ? 1 : 0;
  if (done > 0 && !log.empty()) {
    std::snprintf(g_interrupt_msg[slot], sizeof g_interrupt_msg[slot],
                  "%zu of %zu cases had run; the report is written "
                  "only when every case has run, and the finished ones are kept in %s: rerun the "
                  "same command to resume\n",
                  done, all, log.c_str());
  } else {
    std::snprintf(
        g_interrupt_msg[slot], sizeof g_interrupt_msg[slot],
        "%zu of %zu cases had run; validate writes its "
        "report only when every case has run, so nothing was written%s (fewer cases: "
        "--alternatives, --batch, --seq)\n",
        done, all,
        done > 0 ? "; with --json FILE finished cases are kept for a rerun to resume" : "");
  }
  g_interrupt_slot.store(slot);
}

// Under MPI, bad input some process found and every process now knows of: thrown on each as
// SameOnEveryRank: `mine` (what this process threw, if it found it) as its own, said by it (by
// rank 0 alone where `every` process found some); else, said by nobody here, `elsewhere`.
[[noreturn]] void throw_on_every_rank(std::exception_ptr mine, bool every, const char* option,
                                      const std::string& elsewhere) {
  if (mine) {
    try {
      std::rethrow_exception(mine);
    } catch (const InputError& e) {
      throw SameOnEveryRank(e, every ? SameOnEveryRank::Found::ByAll : SameOnEveryRank::Found::Here,
                            mine);
    }
  }
  throw SameOnEveryRank(option, "", elsewhere, SameOnEveryRank::Found::Elsewhere);
}

// What must match for a resume log's cases to be taken as this command's: the build, the
// runtime's options and every case as it will run (its workload in full, every field explicit).
std::string resume_fingerprint(const ValidateOptions& o, double tolerance,
                               const std::vector<RunCase>& runs,
                               const std::vector<sim::Workload>& ws) {
  nlohmann::json cases = nlohmann::json::array();
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const RunCase& rc = runs[i];
    cases.push_back(
        {{"run", sim::planned_run_json(rc.run)}, {"point", rc.group}, {"picked", rc.picked}});
    // What the files said, not only their names: the same path may hold another model on
    // another host, or since the stopped run (the folder a shipped file is in may differ).
    if (i < ws.size()) {
      auto model = sim::model_json(ws[i].model);
      auto hardware = sim::hardware_json(ws[i].hardware);
      model.erase("file");
      hardware.erase("file");
      cases.back()["model"] = std::move(model);
      cases.back()["hardware"] = std::move(hardware);
    }
  }
  return nlohmann::json{{"git_sha", git_sha()},
                        {"tool_version", tool_version()},
                        {"backend", o.backend},
                        {"comm", o.backend == "cuda" ? o.comm : ""},
                        {"attention", o.attention},
                        {"repeat", o.repeat},
                        {"warmup", o.warmup},
                        {"tolerance", tolerance},
                        {"mpi_processes", o.mpi ? mpi::size() : 0},
                        {"cases", cases}}
      .dump();
}

// The finished cases of a resume log made with the same fingerprint, by index. Lines that do not
// parse or do not read back as a case (a line cut short by a kill) are passed over: their cases
// run again. A log whose first line is not a JSON object (empty, or its header cut short) is no
// log: it is removed and started afresh.
std::map<std::size_t, nlohmann::json> read_resume_log(const std::string& path,
                                                      const std::string& fingerprint,
                                                      std::size_t cases) {
  std::map<std::size_t, nlohmann::json> done;
  std::ifstream in(path);
  std::string line;
  const bool any = static_cast<bool>(std::getline(in, line));
  const auto head = any ? nlohmann::json::parse(line, nullptr, false) : nlohmann::json();
  if (!any || head.is_discarded() || !head.is_object()) {
    in.close();
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
    return done;
  }
  if (head.value("fingerprint", "") != fingerprint) {
    throw InputError(path, "fingerprint",
                     "the resume log of a validate run with other cases, options, config files, "
                     "another build of tpo or another GPU is here; delete it, or rerun the "
                     "command that made it (where it ran) to resume");
  }
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("i") || !j.contains("measured") ||
        !j.at("i").is_number_unsigned() || j.at("i").get<std::size_t>() >= cases) {
      continue;
    }
    try {
      CaseResult scratch;
      read_measured(j.at("measured"), &scratch);
    } catch (const nlohmann::json::exception&) {
      continue;  // runs again
    }
    done[j.at("i").get<std::size_t>()] = j.at("measured");
  }
  return done;
}

// A point's none: the median (of an even count, the mean of the middle two; until 2026-12-05 the
// upper one, which with two cases took the slower none and overstated every measured speedup)
// of the none measured beside each of its cases, and their scatter, (max - min) / that median
// (0 with one case).
struct PointNone {
  std::int64_t median = 0;
  double spread = 0;
};
PointNone point_none(const std::vector<CaseResult>& cases, const std::vector<std::size_t>& idx) {
  std::vector<double> nones;
  for (auto i : idx) nones.push_back(static_cast<double>(cases[i].measured_none_ns));
  PointNone p;
  p.median = static_cast<std::int64_t>(sim::median(nones));
  if (nones.size() > 1 && p.median > 0) {
    const auto [lo, hi] = std::minmax_element(nones.begin(), nones.end());
    p.spread = (*hi - *lo) / static_cast<double>(p.median);
  }
  return p;
}

// What a regret within the measurements' scatter is said to be.
std::string within_noise_text(double noise) {
  return fmt(" (within the runs' spread, %.1f%%: not a measured difference)", 100 * noise);
}

}  // namespace

ValidateReport run_validate(const ValidateOptions& o) {
  const bool emulated = o.backend == "cuda" && o.comm == "emulated";
  const double tolerance = check_options(o, emulated);
  if (o.mpi) mpi::init();
  const bool reporter = !o.mpi || mpi::rank() == 0;  // checks the output and prints
  ValidateReport rep;
  rep.options = o;
  rep.options.tolerance = tolerance;
  sim::PlanFile plan;
  std::vector<RunCase> runs;
  std::vector<sim::Workload> ws;
  // Under MPI, bad input one process finds before the cases' collectives (a file missing on
  // its host, an output folder rank 0 cannot write) is told to every process, so that all end
  // with exit 2 instead of an MPI abort.
  std::exception_ptr bad;
  try {
    check_distinct_outputs(
        {{o.json_path.empty() || o.json_path == "-" ? "" : o.json_path + ".partial",
          "--json's resume log"},
         {o.json_path, "--json"},
         {o.trace_path, "--trace"}});
    if (reporter && !o.json_path.empty()) check_writable(o.json_path, "--json");
    if (reporter && !o.trace_path.empty()) check_writable(o.trace_path, "--trace");
    runs = runs_of(o, emulated, &plan);  // validates every run up front
    std::set<std::int64_t> ctas;         // the copy kernel's CTAs (a plan's may differ)
    for (const auto& rc : runs) {
      ctas.insert(sim::make_workload(rc.run.workload).hardware.contention.comm_ctas);
    }
    // Every input is read by now (a plan's models, hardware and profiles too): an output that is
    // one of them is refused before the run, not after it.
    if (reporter) {
      refuse_output_over_read_input(o.json_path, "--json");
      refuse_output_over_read_input(o.trace_path, "--trace");
    }
    rep.measured_on = measured_on(
        o, emulated, ctas.size() == 1 ? std::to_string(*ctas.begin()) : std::string("per-case"));
    for (const auto& rc : runs) {
      sim::Workload w = sim::make_workload(rc.run.workload);
      if (emulated) {
        rep.emulated_links = w.links_of.empty() ? w.hardware.name : w.links_of;
        const std::string sized = emulated_allreduce_of(w);
        rep.emulated_allreduce =
            rep.emulated_allreduce.empty() || rep.emulated_allreduce == sized ? sized : "per case";
      }
      check_host_memory(o, w, emulated);
      // The prediction is the hardware file's: a GPU's predicted against CPU measurements (or
      // the reverse) would report the gap between two machines as the model's error.
      if (w.hardware.is_cpu != (o.backend == "cpu")) {
        const bool cpu_file = w.hardware.is_cpu;
        const bool from_plan = !o.hardware_given && !o.plan_path.empty();
        throw InputError(from_plan ? o.plan_path : "--hardware",
                         from_plan ? rc.where + ".workload.hardware" : w.hardware.name,
                         std::string(from_plan ? "'" + w.hardware.name + "' " : "") + "is " +
                             std::string(cpu_file ? "a CPU" : "a GPU") + " ('" +
                             w.hardware.gpu_name + "') but --backend " + o.backend + " runs on " +
                             (o.backend == "cpu" ? "this machine's CPU" : "a GPU") +
                             ": the report would compare one machine's prediction with another's "
                             "measurement; give --hardware " +
                             (o.backend == "cpu" ? "cpu-host (or a hardware file with gpu.kind "
                                                   "\"cpu\")"
                                                 : "the GPU that runs it (e.g. h200x8)"));
      }
      ws.push_back(std::move(w));
    }
  } catch (const InputError&) {
    if (!o.mpi) throw;
    bad = std::current_exception();
  }
  if (o.mpi && mpi::max(bad ? 1 : 0) > 0) {
    const bool every = -mpi::max(bad ? -1 : 0) == 1;  // all found some: rank 0 says its own
    throw_on_every_rank(bad, every, "--mpi",
                        "another process found bad input (its message is above); nothing ran");
  }
  const std::string fingerprint = resume_fingerprint(o, tolerance, runs, ws);
  if (o.mpi) {
    // Every process must run the same cases with the same options and build: ranks given
    // different ones would meet in collectives of different sizes (memory corruption, a hang).
    // Checked before any collective of the cases; every process finds the same answer.
    const auto h = static_cast<std::int64_t>(std::hash<std::string>{}(fingerprint) >> 2);
    if (mpi::max(h) != -mpi::max(-h)) {
      throw SameOnEveryRank(
          "--mpi", "",
          "the " + std::to_string(mpi::size()) +
              " processes were not given the same run: their cases, options, tolerance or build "
              "of tpo differ (a different command line, config file or checkout on one host); "
              "launch every process with the same command and files");
    }
  }
  for (const auto& w : ws) {
    if (o.mpi && w.tp != mpi::size()) {
      throw SameOnEveryRank(
          "--mpi", std::to_string(mpi::size()) + (mpi::size() == 1 ? " process" : " processes"),
          "TP is " + std::to_string(w.tp) + ": launch one process per rank (mpirun -np " +
              std::to_string(w.tp) + ")");
    }
  }
  RunOptions ro;
  ro.repeat = o.repeat;
  ro.warmup = o.warmup;
  ro.mpi = o.mpi;
  ro.attention = o.attention;
  ro.nccl_timeout_s = o.nccl_timeout_s;
  // The resume log: rank 0 keeps each finished case there and reads back those of an earlier
  // run of the same command that was stopped; every rank skips the same cases.
  if (reporter && !o.json_path.empty() && o.json_path != "-") {
    rep.resume_path = o.json_path + ".partial";
  }
  // The log's fingerprint holds the GPU too: a run stopped on one GPU and resumed on another
  // would mix two GPUs' times in one report. (Not the processes' agreement above: under MPI each
  // rank has its own GPU.)
  const std::string log_fingerprint =
      fingerprint + (o.backend == "cuda" ? "\n" + cuda_device_name(o.mpi) : std::string());
  std::map<std::size_t, nlohmann::json> done;
  std::exception_ptr bad_log;  // rank 0's: a log it refuses (under MPI, told to every process)
  if (!rep.resume_path.empty() && std::filesystem::exists(rep.resume_path)) {
    try {
      done = read_resume_log(rep.resume_path, log_fingerprint, runs.size());
    } catch (const InputError&) {
      if (!o.mpi) throw;
      bad_log = std::current_exception();
    }
  }
  // The cases to skip, and after them whether rank 0 refused its log.
  std::vector<std::uint8_t> skip(runs.size() + 1, 0);
  for (const auto& d : done) skip[d.first] = 1;
  skip.back() = bad_log ? 1 : 0;
  if (o.mpi) mpi::broadcast(skip.data(), skip.size(), 0);
  if (skip.back()) {
    throw_on_every_rank(bad_log, false, "--json",
                        "rank 0 refused its resume log (above); nothing ran");
  }
  if (!done.empty()) {
    std::fprintf(stderr,
                 "resuming from %s: %zu of %zu cases measured by an earlier run of this command "
                 "are read back, not run again\n",
                 rep.resume_path.c_str(), done.size(), runs.size());
  }
  std::ofstream log;
  const auto keep = [&](std::size_t i, const CaseResult& c) {
    if (rep.resume_path.empty()) return;
    if (!log.is_open()) {
      const bool fresh = !std::filesystem::exists(rep.resume_path);
      bool cut = false;  // its last line cut short (a kill mid-write): the next starts afresh
      if (!fresh) {
        std::ifstream old(rep.resume_path, std::ios::binary | std::ios::ate);
        if (old && old.tellg() > 0) {
          old.seekg(-1, std::ios::end);
          cut = old.get() != '\n';
        }
      }
      log.open(rep.resume_path, std::ios::app);
      if (cut) log << "\n";
      if (!log) throw InputError("--json", rep.resume_path, "cannot write the resume log");
      if (fresh) log << nlohmann::json{{"fingerprint", log_fingerprint}}.dump() << "\n";
    }
    log << nlohmann::json{{"i", i}, {"measured", measured_json(c)}}.dump() << "\n" << std::flush;
  };
  std::size_t finished = done.size();
  if (reporter) say_on_interrupt(finished, runs.size(), finished ? rep.resume_path : "");
  struct Handler {  // restored however the cases end
    void (*previous)(int) = std::signal(SIGINT, on_validate_sigint);
    void (*previous_term)(int) = std::signal(SIGTERM, on_validate_sigint);
    ~Handler() {
      std::signal(SIGINT, previous);
      std::signal(SIGTERM, previous_term);
    }
  } handler;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto d = done.find(i);
    const nlohmann::json none_kept;  // a rank that does not report skips the case alike
    const nlohmann::json* resumed = d != done.end() ? &d->second : (skip[i] ? &none_kept : nullptr);
    try {
      rep.cases.push_back(run_case(o, runs[i].run, ws[i], ro, reporter, tolerance, &rep.cost_model,
                                   &rep.execution, resumed));
    } catch (const RunFailure& e) {
      if (finished == 0 || rep.resume_path.empty()) throw;
      throw RunFailure(std::string(e.what()) + "; the " + std::to_string(finished) + " of " +
                       std::to_string(runs.size()) + " cases that finished are kept in " +
                       rep.resume_path + ": rerun the same command to resume");
    } catch (const nlohmann::json::exception& e) {
      if (d == done.end()) throw;
      throw InputError(rep.resume_path, "measured",
                       std::string("a finished case could not be read back (") + e.what() +
                           "); delete the file to run every case again");
    }
    rep.cases.back().group = runs[i].group;
    rep.cases.back().picked = runs[i].picked;
    if (!resumed) {
      if (reporter) keep(i, rep.cases.back());
      ++finished;
      if (reporter) say_on_interrupt(finished, runs.size(), rep.resume_path);
      // Test hook: a Ctrl-C after N cases of this run (the handler's own path).
      if (const char* stop = std::getenv("TPO_VALIDATE_STOP_AFTER");
          stop && std::atoll(stop) > 0 &&
          finished - done.size() >= static_cast<std::size_t>(std::atoll(stop))) {
        std::raise(SIGINT);
      }
    }
  }
  // A generate report: each strategy whose two phases both ran (the picks; the others with
  // --alternatives; a phase where it ran none takes the none measured beside that phase's cases).
  rep.prompt = plan.prompt;
  rep.new_tokens = plan.new_tokens;
  const double steps = double(std::max<std::int64_t>(plan.new_tokens - 1, 0));
  for (const auto& g : plan.generation) {
    GenerationRow row;
    row.batch = g.batch;
    row.strategy = g.strategy;
    row.picked = g.picked;
    row.report_speedup = g.predicted_speedup;
    bool measured = true;
    double spread[2] = {0, 0};
    for (int ph = 0; ph < 2; ++ph) {
      const std::size_t point = ph == 0 ? g.prefill_point : g.decode_point;
      if (point == sim::GenerationPoint::npos) continue;  // one new token: no decode step
      const sim::PlannedRun& want = ph == 0 ? g.prefill : g.decode;
      std::vector<std::size_t> group;
      for (std::size_t i = 0; i < runs.size(); ++i) {
        if (runs[i].group == static_cast<int>(point)) group.push_back(i);
      }
      if (group.empty()) {
        measured = false;
        break;
      }
      const PointNone none = point_none(rep.cases, group);
      row.predicted_none_ns[ph] = rep.cases[group.front()].predicted_none_ns;
      row.measured_none_ns[ph] = none.median;
      std::size_t used = group.front();  // whose run tells whether options replaced parts
      if (want.spec.kind == sim::StrategyKind::None) {
        row.predicted_ns[ph] = row.predicted_none_ns[ph];
        row.measured_ns[ph] = none.median;
        spread[ph] = none.spread;
      } else {
        const auto it = std::find_if(group.begin(), group.end(),
                                     [&](std::size_t i) { return runs[i].source == want; });
        if (it == group.end()) {
          measured = false;
          break;
        }
        used = *it;
        row.case_of[ph] = used;
        row.predicted_ns[ph] = rep.cases[used].predicted.total_ns;
        row.measured_ns[ph] = rep.cases[used].measured.total_ns;
        spread[ph] = run_spread(rep.cases[used].measured);
      }
      // The report priced its own runs: an option that replaced a part (--layers, --hardware,
      // --profile, --emulate for other links...) makes its speedup another prediction's.
      sim::PlannedRun as_planned = runs[used].source;
      const std::string& emu = runs[used].run.workload.emulate;
      if (emu.empty() || emu == runs[used].run.workload.hardware) {
        as_planned.workload.emulate = emu;  // the machine's own links: what the report priced
      }
      // Layers as counted (0: all of the model's, as the model has them).
      sim::PlannedRun ran = runs[used].run;
      if (as_planned.workload.layers == 0) as_planned.workload.layers = ws[used].model.num_layers;
      ran.workload.layers = ws[used].layers;
      // Files as the files they are: a shipped name and its path, or a path typed two ways.
      for (auto* w : {&as_planned.workload, &ran.workload}) {
        w->model = same_file_key("models", w->model);
        w->hardware = same_file_key("hardware", w->hardware);
        w->emulate = same_file_key("hardware", w->emulate);
        w->profile = same_file_key("", w->profile);
      }
      if (!(as_planned == ran)) row.report_comparable = false;
    }
    if (!measured) {
      ++rep.generation_unmeasured[g.batch];
      continue;
    }
    const double pt = double(row.measured_ns[0]), dt = steps * double(row.measured_ns[1]);
    row.noise = pt + dt > 0 ? (spread[0] * pt + spread[1] * dt) / (pt + dt) : 0;
    rep.generation.push_back(row);
  }
  return rep;
}

GenerationTimes generation_times(const ValidateReport& r, const GenerationRow& g) {
  const double steps = static_cast<double>(std::max<std::int64_t>(r.new_tokens - 1, 0));
  const auto total = [&](const std::int64_t* ns) { return to_us(ns[0]) + steps * to_us(ns[1]); };
  GenerationTimes t;
  t.predicted_us = total(g.predicted_ns);
  t.measured_us = total(g.measured_ns);
  t.predicted_none_us = total(g.predicted_none_ns);
  t.measured_none_us = total(g.measured_none_ns);
  const double tokens = static_cast<double>(g.batch * r.new_tokens);
  t.predicted_tokens_per_s = t.predicted_us > 0 ? tokens / (t.predicted_us * 1e-6) : 0;
  t.measured_tokens_per_s = t.measured_us > 0 ? tokens / (t.measured_us * 1e-6) : 0;
  return t;
}

std::vector<GenerationVerdict> generation_verdicts(const ValidateReport& r) {
  std::map<std::int64_t, GenerationVerdict> by_batch;
  // Per batch, measured tokens/s and noise of the fastest and of the pick.
  std::map<std::int64_t, std::pair<double, double>> best, pick;
  for (const auto& g : r.generation) {
    auto& v = by_batch[g.batch];
    v.batch = g.batch;
    ++v.compared;
    const double tps = generation_times(r, g).measured_tokens_per_s;
    if (v.fastest.empty() || tps > best[g.batch].first) {
      best[g.batch] = {tps, g.noise};
      v.fastest = g.strategy;
    }
    if (g.picked) {
      v.picked = g.strategy;
      pick[g.batch] = {tps, g.noise};
    }
  }
  std::vector<GenerationVerdict> out;
  for (auto& [b, v] : by_batch) {
    if (v.picked.empty()) continue;
    v.regret = pick[b].first > 0 ? best[b].first / pick[b].first - 1 : 0;
    v.noise = std::max(best[b].second, pick[b].second);  // the two compared
    if (const auto it = r.generation_unmeasured.find(b); it != r.generation_unmeasured.end()) {
      v.not_measured = it->second;
    }
    out.push_back(v);
  }
  return out;
}

double run_spread(const RunResult& m) {
  if (m.totals_ns.size() < 2) return 0;
  std::vector<std::int64_t> t = m.totals_ns;
  std::sort(t.begin(), t.end());
  const double median = t.size() % 2 ? double(t[t.size() / 2])
                                     : (double(t[t.size() / 2 - 1]) + double(t[t.size() / 2])) / 2;
  return median > 0 ? double(t.back() - t.front()) / median : 0;
}

std::vector<Decision> decisions(const ValidateReport& r) {
  std::map<int, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < r.cases.size(); ++i) {
    if (r.cases[i].group >= 0) groups[r.cases[i].group].push_back(i);
  }
  std::vector<Decision> out;
  for (const auto& [g, idx] : groups) {
    Decision d;
    d.group = g;
    for (auto i : idx) {
      if (r.cases[i].picked) d.picked_case = i;
    }
    const PointNone pn = point_none(r.cases, idx);
    const std::int64_t none = pn.median;
    std::int64_t fastest = none;
    d.fastest = "none";
    std::size_t fastest_case = r.cases.size();
    for (auto i : idx) {
      const auto& c = r.cases[i];
      if (c.spec.kind != sim::StrategyKind::None && c.measured.total_ns < fastest) {
        fastest = c.measured.total_ns;
        fastest_case = i;
        d.fastest = c.schedule.strategy + " " + sim::variant_text(c.spec);
      }
    }
    d.noise = run_spread(r.cases[d.picked_case].measured);
    if (fastest_case < r.cases.size()) {
      d.noise = std::max(d.noise, run_spread(r.cases[fastest_case].measured));
    }
    d.noise = std::max(d.noise, pn.spread);
    // none is measured in every case's run: the median of those stands for it, the pick too.
    const auto& p = r.cases[d.picked_case];
    const std::int64_t pick = p.spec.kind == sim::StrategyKind::None ? none : p.measured.total_ns;
    d.regret = static_cast<double>(pick) / static_cast<double>(fastest) - 1.0;
    d.none_ns = none;
    d.none_runs = idx.size();  // one none beside each case
    d.fastest_ns = fastest;
    d.picked_ns = pick;
    d.overlap_picked = p.spec.kind != sim::StrategyKind::None;
    d.overlap_measured = d.fastest != "none";
    out.push_back(d);
  }
  return out;
}

std::vector<std::string> validate_notes(const ValidateReport& r) {
  std::vector<std::string> out;
  const auto add = [&](const std::string& n) {
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  };
  // The runtimes run the biases too since 2026-12-04 (the GEMMs' epilogue): nothing to say.
  for (const auto& c : r.cases) {
    for (const auto& n : sim::workload_notes(c.workload)) add(n);
  }
  // A prediction for another GPU than the one measured: its errors would compare two GPUs.
  std::map<std::string, std::string> profile_gpu;  // profile path -> the GPU it measured
  for (const auto& c : r.cases) {
    const std::string& here = c.measured.device;
    if (here.empty() || sim::same_gpu_model(here, c.workload.hardware.gpu_name)) continue;
    const std::string& path = c.run.workload.profile;
    if (!path.empty() && !profile_gpu.count(path)) {
      try {
        profile_gpu[path] = sim::load_profile(path).device.value("name", std::string());
      } catch (const std::exception&) {
        profile_gpu[path] = "";  // gone since the run: the note then does not credit it
      }
    }
    const bool profiled_here = !path.empty() && !sim::gpu_model_token(profile_gpu[path]).empty() &&
                               sim::same_gpu_model(profile_gpu[path], here);
    add("measured on " + c.measured.device + ", but the hardware file predicting it, " +
        sim::hardware_label(c.workload.hardware) + ", is another GPU's (" +
        c.workload.hardware.gpu_name + "): " +
        (profiled_here
             ? "the ops the profile measured are this GPU's; what it lacks, the interference "
               "and the launches are predicted for the file's GPU"
             : "predicted and measured are two GPUs' times, not the model's error (give "
               "--hardware this GPU's file, or --profile one measured on it)"));
  }
  if (const std::size_t k = r.resumed_cases(); k > 0) {
    add(std::to_string(k) + " of " + std::to_string(r.cases.size()) +
        " cases (marked resumed) were measured by an earlier run of this command that was "
        "stopped, and read back from its resume log: their times are from that run");
  }
  return out;
}

namespace {

// A generate report's strategies, each from its measured prefill and decode step: tokens/s and
// the speedup over none, predicted and measured, beside the report's own speedup; per batch,
// whether the report's pick measured fastest of those measured.
void print_generation(std::ostream& os, const ValidateReport& r) {
  if (r.generation.empty()) return;
  os << "\ngeneration: prompt " << r.prompt << " + " << r.new_tokens
     << " new tokens per request; tokens/s = batch x new tokens / (prefill + " << r.new_tokens - 1
     << " x the decode step at the middle step's context); none: the median of the none measured "
        "beside each phase's cases (a strategy that ran none in a phase, [none], takes it); "
        "report = the generate report's own speedup (its steps priced at their contexts):\n";
  os << std::left << std::setw(8) << "  batch" << std::setw(24) << "strategy" << std::right
     << std::setw(20) << "prefill_ms p/m" << std::setw(20) << "decode_step_ms p/m" << std::setw(22)
     << "tokens/s p/m" << std::setw(10) << "pred" << std::setw(10) << "meas" << std::setw(10)
     << "report\n";
  for (const auto& g : r.generation) {
    const auto t = generation_times(r, g);
    std::string name = g.strategy;
    // Which phases ran none (one new token: no decode step to name).
    const bool decode_none = r.new_tokens > 1 && !g.case_of[1];
    if (g.strategy != "none" && (!g.case_of[0] || decode_none)) {
      name += std::string(" [") + (g.case_of[0] ? "-" : "none") + "/" +
              (decode_none ? "none" : "-") + "]";
    }
    if (g.picked) name += " *";
    const auto ms = [](std::int64_t ns, const char* f) { return fmt(f, to_us(ns) / 1e3); };
    os << "  " << std::left << std::setw(6) << g.batch << std::setw(24) << name << std::right
       << std::setw(20) << ms(g.predicted_ns[0], "%.3f") + "/" + ms(g.measured_ns[0], "%.3f")
       << std::setw(20) << ms(g.predicted_ns[1], "%.4f") + "/" + ms(g.measured_ns[1], "%.4f")
       << std::setw(22)
       << fmt("%.1f", t.predicted_tokens_per_s) + "/" + fmt("%.1f", t.measured_tokens_per_s)
       << std::setw(10) << fmt("%.3fx", t.predicted_none_us / t.predicted_us) << std::setw(10)
       << fmt("%.3fx", t.measured_none_us / t.measured_us) << std::setw(10)
       << (g.report_comparable ? fmt("%.3fx", g.report_speedup) : std::string("-")) << "\n";
  }
  os << "  * = the report's pick (its fastest predicted tokens/s, as it priced them); [none/-], "
        "[-/none], [none/none]: the strategy ran none in prefill, in decode, in both";
  if (std::any_of(r.generation.begin(), r.generation.end(),
                  [](const GenerationRow& g) { return !g.report_comparable; })) {
    os << "; report - : options replaced part of what the report priced (--layers, --hardware, "
          "--profile, --emulate, ...), so its speedup is of another prediction";
  }
  os << "\n";
  for (const auto& v : generation_verdicts(r)) {
    os << "  batch " << v.batch << ": the pick, " << v.picked << ", "
       << (v.picked == v.fastest
               ? "measured fastest of the " + std::to_string(v.compared) + " strategies compared"
               : "measured slower than " + v.fastest + fmt(", regret %.1f%%", 100 * v.regret) +
                     (v.within_noise()       ? within_noise_text(v.noise)
                      : r.options.repeat < 2 ? std::string(" (one timed run per case: no spread "
                                                           "to judge it by)")
                                             : std::string()));
    if (v.not_measured > 0) {
      os << "; " << v.not_measured << " strateg" << (v.not_measured == 1 ? "y" : "ies")
         << " not measured (--alternatives N measures each phase's N fastest-predicted others)";
    }
    os << "\n";
  }
}

}  // namespace

namespace {

// A case's tokens: the prompt's ("1024", "2x1024" for a batch), or a decode step's requests and
// the context they read ("2 @ctx 68").
std::string tokens_text(const sim::Workload& w) {
  if (w.phase == sim::Phase::Decode) {
    return std::to_string(w.batch) + " @ctx " + std::to_string(w.context);
  }
  return (w.batch > 1 ? std::to_string(w.batch) + "x" : std::string()) + std::to_string(w.seq);
}

}  // namespace

// --exec graph on CUDA: each case's graph was also launched without its per-op timing events.
void print_untimed_graphs(std::ostream& os, const ValidateReport& r) {
  bool header = false;
  for (const auto& c : r.cases) {
    std::vector<std::int64_t> t = c.measured.untimed_totals_ns;
    if (t.empty()) continue;
    if (!header) {
      os << "\nthe same graphs without their per-op timing events (what a serving engine "
            "launches), median of as many runs; measured_ms above had the events:\n";
      header = true;
    }
    std::sort(t.begin(), t.end());
    const double untimed = to_us(t[t.size() / 2]), timed = to_us(c.measured.total_ns);
    os << "  " << std::left << std::setw(16) << c.schedule.strategy << std::setw(18)
       << sim::variant_text(c.spec) << std::right << std::setw(14) << tokens_text(c.workload)
       << fmt("  %.3f ms untimed, ", untimed / 1e3) << fmt("%.3f ms timed: ", timed / 1e3)
       << fmt("the events cost %+.1f%%\n", untimed > 0 ? 100 * (timed - untimed) / untimed : 0.0);
  }
}

void print_validate(std::ostream& os, const ValidateReport& r) {
  os << "tpo validate — measured on " << r.measured_on << "; predicted by the " << r.cost_model
     << " cost model; " << r.execution.value("mode", "queued") << " execution\n";
  if (const std::string d = measured_devices(r); !d.empty()) os << "GPU: " << d << "\n";
  if (!r.emulated_links.empty()) {
    os << "EMULATED COMMUNICATION: each all-reduce replays the predicted duration of "
       << r.emulated_links
       << "'s; this is one GPU, not a multi-GPU run, and the links were not measured\n";
  }
  sim::print_notes(os, validate_notes(r));
  os << "\n";
  os << std::left << std::setw(16) << "strategy" << std::setw(18) << "variant" << std::right
     << std::setw(14) << "tokens" << std::setw(14) << "predicted_ms" << std::setw(13)
     << "measured_ms" << std::setw(9) << "error" << std::setw(12) << "pred_spdup" << std::setw(12)
     << "meas_spdup"
     << "  result\n";
  for (const auto& c : r.cases) {
    const double pred = to_us(c.predicted.total_ns), meas = to_us(c.measured.total_ns);
    os << std::left << std::setw(16) << c.schedule.strategy << std::setw(18)
       << sim::variant_text(c.spec) << std::right << std::setw(14) << tokens_text(c.workload)
       << std::setw(14) << fmt("%.3f", pred / 1e3) << std::setw(13) << fmt("%.3f", meas / 1e3)
       << std::setw(9) << fmt("%+.1f%%", 100 * (pred - meas) / meas) << std::setw(12)
       << fmt("%.3fx",
              static_cast<double>(c.predicted_none_ns) / static_cast<double>(c.predicted.total_ns))
       << std::setw(12)
       << fmt("%.3fx",
              static_cast<double>(c.measured_none_ns) / static_cast<double>(c.measured.total_ns))
       << "  " << (c.correct ? "correct" : "WRONG") << " ("
       << fmt("%.1e", c.error_vs_reference >= 0 ? c.error_vs_reference : c.error_vs_none)
       << (c.error_vs_reference >= 0 ? "" : " vs none") << ")" << (c.resumed ? " resumed" : "")
       << "\n";
  }
  for (const auto& c : r.cases) {
    if (const auto note = sim::unaligned_chunks_note(c.schedule); !note.empty()) {
      os << "\n" << note << "\n";
      break;
    }
  }
  if (const auto note = late_start_note(r); !note.empty()) os << "\n" << note << "\n";
  print_untimed_graphs(os, r);
  if (r.options.repeat < 3) {
    os << "\nnote: " << r.options.repeat << " timed run" << (r.options.repeat == 1 ? "" : "s")
       << " per case (--repeat): measured times and speedups carry the noise of single runs; "
          "the default, 3, reports each case's median\n";
  }
  // The runs' scatter, where a case's runs spread more than 5%: speedups and errors within it
  // are not measured differences (a new-user trial read 1.35x and 0.69x off one tiny case).
  double spread = 0;
  std::string widest;
  for (const auto& c : r.cases) {
    if (const double x = run_spread(c.measured); x > spread) {
      spread = x;
      widest = c.schedule.strategy + " at " + tokens_text(c.workload) + " tokens";
    }
  }
  if (spread > 0.05) {
    os << "\nnote: a case's timed runs spread up to " << fmt("%.0f%%", 100 * spread) << " ("
       << widest
       << "; max - min over their median, each run in --json's measured_runs_us): measured "
          "speedups and errors within that are not measured differences; an idle machine and "
          "more --repeat narrow it\n";
  }
  if (const auto note = unprofiled_note(r); !note.empty()) os << "\n" << note << "\n";
  if (attention_kernels(r) == "per case") {
    os << "\nnote: the cases ran different attention kernels (--attention auto used the cuBLAS "
          "one where cuDNN refused a shape; each case's none ran its case's kernel): compare "
          "cases only with the same attention_kernel in --json\n";
  }
  if (r.cost_model == "profile") {
    std::map<std::string, std::int64_t> total;
    for (const auto& c : r.cases) {
      for (const auto& [k, n] : c.cost_sources) total[k] += n;
    }
    os << "\nop costs of the validated schedules' predictions:";
    for (const auto& [k, n] : total) os << " " << n << " " << k;
    os << " (ops the profile did not measure are priced between or beyond its sizes, or by the "
          "analytical model: the least certain part of a prediction)\n";
    std::int64_t decode_extrapolated = 0;
    for (const auto& c : r.cases) {
      if (c.workload.phase != sim::Phase::Decode) continue;
      if (const auto it = c.cost_sources.find("extrapolated"); it != c.cost_sources.end()) {
        decode_extrapolated += it->second;
      }
    }
    if (decode_extrapolated > 0) {
      os << "note: " << decode_extrapolated
         << " decode ops lie outside the profile's measured sizes and are extrapolated; `tpo "
            "profile` without --quick times decode rows (1, 8 and 32 tokens by default, "
            "--decode-rows)\n";
    }
  }
  if (const auto ds = decisions(r); !ds.empty()) {
    os << "\nthe plan's pick against the measured alternatives (none, and --alternatives); none "
          "is the median over the point's cases of the none each measured beside it, so it can "
          "differ from any one row above:\n";
    for (const auto& d : ds) {
      const auto& p = r.cases[d.picked_case];
      // A decode point is its context (every step is one token).
      std::string at = p.workload.phase == sim::Phase::Decode
                           ? "ctx " + std::to_string(p.workload.context)
                           : std::to_string(p.workload.seq);
      if (r.new_tokens > 0) at = "batch " + std::to_string(p.workload.batch) + ", " + at;
      os << "  " << std::left << std::setw(r.new_tokens > 0 ? 20 : 9) << at << std::setw(28)
         << (p.schedule.strategy + " " + sim::variant_text(p.spec))
         << fmt("%.3f ms; ", to_us(d.picked_ns) / 1e3)
         << (d.regret <= 0 ? "fastest measured" : "fastest measured: " + d.fastest)
         << (d.regret <= 0 ? "" : fmt(" %.3f ms", to_us(d.fastest_ns) / 1e3))
         << fmt(", regret %.1f%%", 100 * d.regret)
         << (d.regret_within_noise() ? within_noise_text(d.noise) : std::string())
         << fmt("; none %.3f ms", to_us(d.none_ns) / 1e3)
         << (d.none_runs == 1 ? std::string(" (measured beside the one case)")
                              : " (median over " + std::to_string(d.none_runs) + " cases' none)")
         << std::right << "\n";
    }
  }
  print_generation(os, r);
  os << "\nerror = (predicted - measured) / measured; speedups are over `none` on the same "
        "workload; result: max |output - reference| / max |reference| against the "
        "architecture's reference forward (and none's output when the function is the same)\n";
}

namespace {

// A text every case's measurement names (`field` of its RunResult): the one value, "per case"
// where cases differ, empty where none names one (the CPU runtime's).
std::string one_or_per_case(const ValidateReport& r, std::string RunResult::*field) {
  std::string one;
  for (const auto& c : r.cases) {
    const std::string& v = c.measured.*field;
    if (v.empty()) continue;
    if (one.empty()) one = v;
    if (v != one) return "per case";
  }
  return one;
}

}  // namespace

std::string measured_devices(const ValidateReport& r) {
  return one_or_per_case(r, &RunResult::device);
}

std::string attention_kernels(const ValidateReport& r) {
  return one_or_per_case(r, &RunResult::attention_kernel);
}

std::string unprofiled_note(const ValidateReport& r) {
  std::vector<double> errors;
  for (const auto& c : r.cases) {
    if (!c.run.workload.profile.empty()) return "";
    if (c.measured.total_ns <= 0) continue;
    errors.push_back(std::abs(static_cast<double>(c.predicted.total_ns) /
                                  static_cast<double>(c.measured.total_ns) -
                              1.0));
  }
  if (errors.empty()) return "";
  std::sort(errors.begin(), errors.end());
  const std::size_t n = errors.size();
  const double median = n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2;
  if (median <= 0.25) return "";
  const sim::Workload& w = r.cases.front().workload;
  return fmt("note: the predictions are %.0f%% off (median): they are ", 100 * median) +
         w.hardware.name +
         "'s analytical model (its file's figures and assumptions), not this machine's "
         "measurements. Profile it (tpo profile --backend " +
         r.options.backend + " --model " + r.cases.front().run.workload.model + " --tp " +
         std::to_string(w.tp) + " --hardware " + r.cases.front().run.workload.hardware +
         " --out prof.json) and pass --profile prof.json for predictions worth comparing";
}

std::string late_start_note(const ValidateReport& r) {
  int late = 0, timed = 0;
  double lo_us = 0, hi_us = 0, hi_share = 0;
  for (const auto& c : r.cases) {
    if (c.measured.start_ns.empty() || c.predicted.start_ns.empty() || c.measured.total_ns <= 0) {
      continue;
    }
    ++timed;
    const auto first = [](const std::vector<std::int64_t>& v) {
      return *std::min_element(v.begin(), v.end());
    };
    const double gap_us = to_us(first(c.measured.start_ns) - first(c.predicted.start_ns));
    const double share = gap_us / to_us(c.measured.total_ns);
    if (gap_us <= 20 || share <= 0.1) continue;
    lo_us = late == 0 ? gap_us : std::min(lo_us, gap_us);
    hi_us = std::max(hi_us, gap_us);
    hi_share = std::max(hi_share, share);
    ++late;
  }
  if (late == 0) return "";
  const bool cpu = r.options.backend == "cpu";
  return "note: in " + std::to_string(late) + " of " + std::to_string(timed) +
         " cases the first op started " +
         (lo_us == hi_us ? fmt("%.0f us", hi_us) : fmt("%.0f", lo_us) + fmt("-%.0f us", hi_us)) +
         fmt(" later than predicted (up to %.0f%% of the measured time): ", 100 * hi_share) +
         (cpu ? (r.options.mpi ? "the hand-off to the ranks (MPI processes), "
                               : "the CPU runtime's hand-off to its rank threads, ")
              : "time before the first kernel started, ") +
         "which no prediction charges; short runs (decode steps) are the most affected";
}

ojson validate_json(const ValidateReport& r) {
  ojson j = sim::report_header("tpo.validate/1", "predicted and measured");
  j["backend"] = r.options.backend;
  j["measured_on"] = r.measured_on;
  // Under MPI: the CPU's MPI all-reduce (NCCL across processes on CUDA).
  j["comm"] = r.options.backend == "cuda" ? r.options.comm
              : r.options.mpi             ? "mpi"
                                          : "shared-memory";
  if (!r.emulated_links.empty()) {
    j["emulated_links"] = r.emulated_links;
    j["emulated_allreduce"] = r.emulated_allreduce;
  }
  j["cost_model"] = r.cost_model;
  j["notes"] = validate_notes(r);
  // Where the cases' relative paths are read from (tpo calibrate reads the runs back).
  for (const auto& c : r.cases) {
    if (const std::string made_in = sim::made_in_for(c.run.workload); !made_in.empty()) {
      j["made_in"] = made_in;
      break;
    }
  }
  j["execution"] = r.execution;
  // The runtimes read Q in place in the qkv rows (since 2026-12-02; before, the CUDA runtime
  // gathered it with an untimed strided copy, which tpo calibrate adds back for older reports).
  j["attention_q_in_place"] = true;
  if (const std::string k = attention_kernels(r); !k.empty()) j["attention_kernel"] = k;
  if (const std::string d = measured_devices(r); !d.empty()) j["device"] = d;
  j["options"] = sim::options_json(r.options.workload, r.options.strategy);
  j["options"]["plan"] = r.options.plan_path;
  j["options"]["repeat"] = r.options.repeat;
  j["options"]["warmup"] = r.options.warmup;
  j["options"]["mpi"] = r.options.mpi;
  j["tolerance"] = r.options.tolerance.value_or(0);  // set to the tolerance in force
  j["all_correct"] = r.all_correct();
  j["resumed_cases"] = r.resumed_cases();
  ojson cases = ojson::array();
  for (const auto& c : r.cases) {
    ojson k;
    k["model"] = c.workload.model.name;
    k["tp"] = c.workload.tp;
    k["phase"] = sim::phase_name(c.workload.phase);
    k["batch"] = c.workload.batch;
    k["seq_len"] = c.workload.seq;
    k["context"] = c.workload.context;
    k["num_layers"] = c.workload.layers;
    k["strategy"] = ojson{{"name", c.schedule.strategy},
                          {"chunks", c.schedule.chunk_tokens},
                          {"preserves_function", c.schedule.preserves_function}};
    k["run"] = sim::planned_run_json(c.run);
    if (!r.emulated_links.empty()) k["emulated_allreduce"] = emulated_allreduce_of(c.workload);
    if (c.measured.copy_gbps > 0) {  // CUDA: the copy kernel each emulated all-reduce ran
      k["emulated_copy"] = ojson{{"gbps", c.measured.copy_gbps},
                                 {"fixed_us", c.measured.copy_fixed_us},
                                 {"ctas", c.measured.copy_ctas}};
    }
    if (c.group >= 0) {
      k["point"] = c.group;
      k["picked_by_plan"] = c.picked;
    }
    k["predicted_us"] = to_us(c.predicted.total_ns);
    k["cost_sources"] = c.cost_sources;
    k["resumed"] = c.resumed;
    if (!c.measured.attention_kernel.empty()) k["attention_kernel"] = c.measured.attention_kernel;
    if (!c.measured.device.empty()) k["device"] = c.measured.device;
    k["measured_us"] = to_us(c.measured.total_ns);
    k["measured_runs_us"] = ojson::array();
    for (auto t : c.measured.totals_ns) k["measured_runs_us"].push_back(to_us(t));
    if (!c.measured.untimed_totals_ns.empty()) {
      k["measured_untimed_runs_us"] = ojson::array();
      for (auto t : c.measured.untimed_totals_ns) k["measured_untimed_runs_us"].push_back(to_us(t));
    }
    k["error"] =
        (to_us(c.predicted.total_ns) - to_us(c.measured.total_ns)) / to_us(c.measured.total_ns);
    k["predicted_none_us"] = to_us(c.predicted_none_ns);
    k["measured_none_us"] = to_us(c.measured_none_ns);
    k["predicted_speedup"] =
        static_cast<double>(c.predicted_none_ns) / static_cast<double>(c.predicted.total_ns);
    k["measured_speedup"] =
        static_cast<double>(c.measured_none_ns) / static_cast<double>(c.measured.total_ns);
    k["correct"] = c.correct;
    if (c.error_vs_reference >= 0) k["error_vs_reference"] = c.error_vs_reference;
    if (c.error_vs_none >= 0) k["error_vs_none"] = c.error_vs_none;
    ojson ops = ojson::array();
    for (std::size_t i = 0; i < c.schedule.ops.size(); ++i) {
      const auto& op = c.schedule.ops[i];
      const double pd = to_us(c.predicted.end_ns[i] - c.predicted.start_ns[i]);
      const double md = to_us(c.measured.end_ns[i] - c.measured.start_ns[i]);
      ojson e{{"name", sim::op_code_name(op.code)},
              {"kind", sim::op_kind_name(op.kind)},
              {"layer", op.layer},
              {"chunk", op.chunk},
              {"stream", op.stream == sim::StreamKind::Compute ? "compute" : "comm"},
              {"predicted_start_us", to_us(c.predicted.start_ns[i])},
              {"predicted_us", pd},
              {"measured_start_us", to_us(c.measured.start_ns[i])},
              {"measured_us", md}};
      if (op.kind == sim::OpKind::AllReduce && op.residual_of >= 0) e["residual_add"] = true;
      if (const char* n = sim::norm_after_name(op)) {
        e["norm_after"] = n;
        if (op.norm_layer >= 0) e["norm_layer"] = op.norm_layer;
      }
      // Only where measured (the CPU's shared-memory all-reduce knows when the last rank came).
      if (i < c.measured.wait_ns.size()) e["measured_wait_us"] = to_us(c.measured.wait_ns[i]);
      // Emulated: the copy kernel lasted the predicted all-reduce time; not a measured link.
      // One that also adds (--allreduce-fusion): the copy replayed the collective, the add after
      // it was measured.
      if (!r.emulated_links.empty() && op.kind == sim::OpKind::AllReduce) {
        e[op.residual_of >= 0 ? "measured_us_replays_the_collective"
                              : "measured_us_is_replayed_prediction"] = true;
      }
      e["error"] = md > 0 ? (pd - md) / md : 0.0;
      ops.push_back(std::move(e));
    }
    k["ops"] = std::move(ops);
    if (!c.measured.gemm_kernels.empty()) {
      ojson g = ojson::array();
      for (const auto& x : c.measured.gemm_kernels) {
        g.push_back(ojson{{"m", x.m}, {"n", x.n}, {"k", x.k}, {"kernel", x.kernel}});
      }
      k["gemm_kernels"] = std::move(g);
    }
    cases.push_back(std::move(k));
  }
  j["cases"] = std::move(cases);
  ojson dec = ojson::array();
  for (const auto& d : decisions(r)) {
    dec.push_back(ojson{{"point", d.group},
                        {"picked_case", d.picked_case},
                        {"fastest_measured", d.fastest},
                        {"regret", d.regret},
                        {"picked_measured_us", to_us(d.picked_ns)},
                        {"fastest_measured_us", to_us(d.fastest_ns)},
                        {"none_measured_us", to_us(d.none_ns)},
                        {"none_runs", d.none_runs},
                        {"overlap_picked", d.overlap_picked},
                        {"overlap_measured", d.overlap_measured},
                        {"noise", d.noise},
                        {"regret_within_noise", d.regret_within_noise()}});
  }
  j["decisions"] = std::move(dec);
  if (!r.generation.empty()) {
    ojson gen = ojson::array();
    for (const auto& g : r.generation) {
      const auto t = generation_times(r, g);
      gen.push_back(ojson{
          {"batch", g.batch},
          {"strategy", g.strategy},
          {"picked_by_report", g.picked},
          {"prefill_case", g.case_of[0] ? ojson(*g.case_of[0]) : ojson(nullptr)},
          {"decode_case", g.case_of[1] ? ojson(*g.case_of[1]) : ojson(nullptr)},
          {"predicted_prefill_us", to_us(g.predicted_ns[0])},
          {"measured_prefill_us", to_us(g.measured_ns[0])},
          {"predicted_decode_step_us", to_us(g.predicted_ns[1])},
          {"measured_decode_step_us", to_us(g.measured_ns[1])},
          {"predicted_us", t.predicted_us},
          {"measured_us", t.measured_us},
          {"predicted_none_us", t.predicted_none_us},
          {"measured_none_us", t.measured_none_us},
          {"predicted_tokens_per_s", t.predicted_tokens_per_s},
          {"measured_tokens_per_s", t.measured_tokens_per_s},
          {"predicted_speedup", t.predicted_none_us / t.predicted_us},
          {"measured_speedup", t.measured_none_us / t.measured_us},
          {"noise", g.noise},
          {"report_speedup", g.report_comparable ? ojson(g.report_speedup) : ojson(nullptr)}});
    }
    j["generation"] = ojson{{"prompt", r.prompt},
                            {"new_tokens", r.new_tokens},
                            {"tokens_per_s",
                             "batch x new_tokens / (prefill + (new_tokens - 1) x "
                             "the decode step at the middle step's context)"},
                            {"strategies", std::move(gen)}};
    ojson verdicts = ojson::array();
    for (const auto& v : generation_verdicts(r)) {
      verdicts.push_back(ojson{{"batch", v.batch},
                               {"picked_by_report", v.picked},
                               {"fastest_measured", v.fastest},
                               {"regret", v.regret},
                               {"noise", v.noise},
                               {"regret_within_noise", v.within_noise()},
                               {"compared", v.compared},
                               {"not_measured", v.not_measured}});
    }
    j["generation"]["verdicts"] = std::move(verdicts);
    ojson unmeasured = ojson::object();
    for (const auto& [b, n] : r.generation_unmeasured) unmeasured[std::to_string(b)] = n;
    j["generation"]["not_measured"] = std::move(unmeasured);
  }
  return j;
}

std::string validate_trace(const ValidateReport& r) {
  ojson events = ojson::array();
  int pid = 0;
  for (const auto& c : r.cases) {
    const std::string what = c.schedule.strategy + " — " + sim::workload_line(c.workload);
    sim::append_trace(events, pid++, "predicted: " + what, c.schedule, c.predicted.start_ns,
                      c.predicted.end_ns);
    sim::append_trace(events, pid++,
                      "measured (" + r.options.backend +
                          (r.options.backend == "cuda" && r.options.comm == "emulated"
                               ? ", emulated communication"
                               : "") +
                          "): " + what,
                      c.schedule, c.measured.start_ns, c.measured.end_ns);
  }
  // As simulate's trace: the build that wrote it in otherData.
  ojson j{{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ns"},
          {"otherData",
           ojson{{"tool", "tpo"}, {"version", tpo::tool_version()}, {"git_sha", tpo::git_sha()}}}};
  return j.dump() + "\n";
}

}  // namespace tpo::validate
