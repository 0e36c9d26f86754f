// Execution modes and launch costs (see launch.h).
#include "sim/launch.h"

#include <algorithm>
#include <cmath>

#include "sim/error.h"
#include "sim/json_io.h"

namespace tpo::sim {

namespace {
// JSON keys of LaunchCosts::eager_us, in OpKind order.
constexpr const char* kKindKeys[5] = {"gemm", "attention", "norm", "elementwise", "allreduce"};
}  // namespace

const char* exec_mode_name(ExecMode m) {
  switch (m) {
    case ExecMode::Eager:
      return "eager";
    case ExecMode::Graph:
      return "graph";
    case ExecMode::Queued:
      break;
  }
  return "queued";
}

ExecMode parse_exec_mode(const std::string& name) {
  if (name == "queued") return ExecMode::Queued;
  if (name == "eager") return ExecMode::Eager;
  if (name == "graph") return ExecMode::Graph;
  throw FieldError("exec", name,
                   "must be queued (launches hidden), eager (one launch call per op) or graph "
                   "(one CUDA graph launch)");
}

LaunchCosts uniform_launch(double eager_us, double graph_launch_us, const std::string& source) {
  LaunchCosts c;
  c.eager_us.fill(eager_us);
  c.graph_launch_us = graph_launch_us;
  c.source = source;
  return c;
}

std::vector<std::int64_t> release_times(const Schedule& s, ExecMode mode, const LaunchCosts& c) {
  std::vector<std::int64_t> r;
  if (mode == ExecMode::Queued) return r;
  r.resize(s.ops.size());
  if (mode == ExecMode::Graph) {
    std::fill(r.begin(), r.end(), std::llround(c.graph_launch_us * 1e3));
    return r;
  }
  // Each rank's host thread issues its ops in schedule order; the clocks are in double ns
  // (launch costs are fractions of a microsecond apart) and rounded once per op.
  std::vector<double> host(static_cast<std::size_t>(std::max(1, s.num_ranks)), 0.0);
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const Op& op = s.ops[i];
    double& t = host[static_cast<std::size_t>(std::clamp(op.rank, 0, s.num_ranks - 1))];
    // A residual add's (Gemma's) post-norm is launched first: the op starts after both calls.
    if (op.post_norm > 0) t += c.eager_of(OpKind::Norm) * 1e3;
    t += c.eager_of(op.kind) * 1e3;
    r[i] = std::llround(t);
    // qkv's per-head norms (two), rotary kernel and KV-cache write are launch calls of their
    // own after its GEMM's: they hold the host thread back from the next op.
    t += (2 * (qk_norm_bytes(op) > 0) * c.eager_of(OpKind::Norm) +
          ((rope_bytes(op) > 0) + (kv_store_bytes(op) > 0)) * c.eager_of(OpKind::Elementwise)) *
         1e3;
  }
  return r;
}

LaunchCosts launch_from_json(const nlohmann::json& j, const std::string& file,
                             const std::string& path, LaunchCosts c) {
  const JsonObject o(j, file, path);
  if (o.has("eager_us")) {
    const JsonObject e = o.object("eager_us");
    for (std::size_t k = 0; k < 5; ++k) {
      c.eager_us[k] = e.number_or(kKindKeys[k], c.eager_us[k], /*positive=*/false);
    }
  }
  c.graph_launch_us = o.number_or("graph_launch_us", c.graph_launch_us, /*positive=*/false);
  c.source = o.string_or("source", c.source);
  return c;
}

nlohmann::ordered_json launch_json(const LaunchCosts& c) {
  nlohmann::ordered_json e = nlohmann::ordered_json::object();
  for (std::size_t k = 0; k < 5; ++k) e[kKindKeys[k]] = c.eager_us[k];
  return nlohmann::ordered_json{
      {"eager_us", e}, {"graph_launch_us", c.graph_launch_us}, {"source", c.source}};
}

nlohmann::ordered_json execution_json(ExecMode mode, const LaunchCosts& c) {
  nlohmann::ordered_json j{{"mode", exec_mode_name(mode)}};
  if (mode == ExecMode::Queued) {
    j["launch"] = "hidden: the schedule is queued before the GPU starts; op times are GPU times";
  } else {
    j["launch"] = launch_json(c);
  }
  return j;
}

}  // namespace tpo::sim
