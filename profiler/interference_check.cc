// The contention model against interference microbenchmarks (see interference_check.h).
#include "profiler/interference_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <ostream>

#include "sim/engine.h"
#include "sim/profile_cost.h"

namespace tpo::profiler {

namespace {

// As the CUDA backend runs a pair (profiler/cuda_backend.cc): the victim's batch of launches
// lasts ~200 us alone (1 to 64 launches) and starts 30 us after the aggressor, whose run lasts
// at least 8x the victim's batch alone.
constexpr double kBatchUs = 200;

template <class... A>
std::string format(const char* f, A... a) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a...);
  return buf;
}

std::int64_t batch_of(double alone_us) {
  return static_cast<std::int64_t>(
      std::clamp(std::ceil(kBatchUs / std::max(alone_us, 1e-3)), 1.0, 64.0));
}

// "1024x14336x4096" (GEMM) or "1024x8192" (rows x cols): the numbers; empty when malformed.
std::vector<std::int64_t> dims_of(const std::string& s) {
  std::vector<std::int64_t> v;
  std::size_t at = 0;
  while (at < s.size()) {
    std::size_t used = 0;
    try {
      v.push_back(std::stoll(s.substr(at), &used));
    } catch (const std::exception&) {
      return {};
    }
    at += used;
    if (at < s.size() && s[at] != 'x') return {};
    ++at;
  }
  return v;
}

sim::Op make_op(sim::OpCode code) {
  sim::Op op;
  op.code = code;
  op.kind = sim::op_code_kind(code);
  op.stream = code == sim::OpCode::AllReduce ? sim::StreamKind::Comm : sim::StreamKind::Compute;
  op.req_end = 1;
  return op;
}

// The op a point's other side ran (or the victim for a GEMM victim); false when the point
// names something this check does not rebuild.
bool compute_op(const sim::InterferencePoint& x, const sim::Profile& p, sim::Op* op) {
  if (x.victim == "gemm" || x.beside == "gemm") {
    const auto d = dims_of(x.shape);
    if (d.size() != 3) return false;
    *op = make_op(sim::OpCode::GateUp);
    sim::set_gemm_work(*op, d[0], d[1], d[2], false);
    return true;
  }
  if (x.beside == "rowwise") {
    const auto d = dims_of(x.shape);
    if (d.size() != 2) return false;
    *op = make_op(sim::OpCode::AttnNorm);
    sim::set_rowwise_work(*op, d[0], d[1]);
    return true;
  }
  if (x.beside == "attention" && !p.attention.empty()) {
    long long q = 0, prefix = 0;
    if (std::sscanf(x.shape.c_str(), "q%lld/p%lld", &q, &prefix) != 2 || q <= 0) return false;
    const auto& a = p.attention.front();  // the shard's heads
    *op = make_op(sim::OpCode::Attention);
    op->seq_begin = prefix;
    op->seq_end = prefix + q;
    sim::set_attention_work(*op, 1, q, prefix, a.q_heads, a.kv_heads, a.head_dim);
    return true;
  }
  return false;
}

// Appends an op lasting `us` alone, launched at `release_us`, with the fixed factors.
void add_op(InterferencePair& pair, const sim::CostModel& cm, const sim::Op& op, double us,
            double release_us = 0) {
  pair.schedule.ops.push_back(op);
  pair.costs.standalone_ns.push_back(std::llround(us * 1e3));
  pair.costs.release_ns.push_back(std::llround(release_us * 1e3));
  pair.costs.slowdown.push_back({cm.overlap_slowdown(op, sim::OpKind::Gemm),
                                 cm.overlap_slowdown(op, sim::OpKind::Attention),
                                 cm.overlap_slowdown(op, sim::OpKind::Elementwise)});
}

// The in-schedule fragment ("q<q>/p<prefix>/o<m>x<n>x<k>"): the copy (its measured time
// alone) and, from the same moment, the chunk's attention then o_proj, whose profile times
// are scaled to the fragment's measured time alone.
std::optional<InterferencePair> fragment_pair(const sim::InterferencePoint& x,
                                              const sim::Profile& p, const sim::CostModel& cm) {
  long long q = 0, prefix = 0, m = 0, n = 0, k = 0;
  if (x.other_us <= 0 || p.attention.empty() ||
      std::sscanf(x.shape.c_str(), "q%lld/p%lld/o%lldx%lldx%lld", &q, &prefix, &m, &n, &k) != 5 ||
      q <= 0 || m <= 0 || n <= 0 || k <= 0) {
    return std::nullopt;
  }
  const auto& a = p.attention.front();
  sim::Op attn = make_op(sim::OpCode::Attention);
  attn.seq_begin = prefix;
  attn.seq_end = prefix + q;
  sim::set_attention_work(attn, 1, q, prefix, a.q_heads, a.kv_heads, a.head_dim);
  sim::Op oproj = make_op(sim::OpCode::OProj);
  sim::set_gemm_work(oproj, m, n, k, false);
  sim::Op copy = make_op(sim::OpCode::AllReduce);
  sim::set_allreduce_work(copy, m * n);
  const double ta = static_cast<double>(cm.standalone_ns(attn));
  const double to = static_cast<double>(cm.standalone_ns(oproj));
  const double scale = x.alone_us / std::max(1e-3, (ta + to) / 1e3);
  InterferencePair pair;
  pair.label = "fragment beside copy p" + std::to_string(x.workers) + " " + x.shape;
  pair.model = p.model;
  pair.workers = x.workers;
  pair.alone_us = x.alone_us;
  pair.measured_us = x.beside_us;
  add_op(pair, cm, copy, x.other_us);
  pair.victim_first = 1;
  add_op(pair, cm, attn, ta / 1e3 * scale);
  add_op(pair, cm, oproj, to / 1e3 * scale);
  return pair;
}

// How long the profiler's copy of an m x n bf16 output on `workers` CTAs lasts alone, from the
// profile's copy beside the GEMM on the same CTAs (the victim "comm" of the smallest time: the
// series' first point copies one chunk's m x k activations, k the GEMM's inner dimension);
// scaled by bytes (a copy on a fixed number of CTAs runs at a fixed rate). 0 when unmeasured.
double copy_us(const sim::Profile& p, std::int64_t workers, std::int64_t m, std::int64_t n) {
  double best = 0, scale = 0;
  for (const auto& y : p.interference) {
    if (y.victim != "comm" || y.beside != "gemm" || y.workers != workers || y.alone_us <= 0) {
      continue;
    }
    const auto d = dims_of(y.shape);
    if (d.size() != 3 || d[0] <= 0 || d[2] <= 0) continue;
    if (best == 0 || y.alone_us < best) {
      best = y.alone_us;
      scale = static_cast<double>(m * n) / static_cast<double>(d[0] * d[2]);
    }
  }
  return best * scale;
}

}  // namespace

double predict_pair(InterferencePair& pair, const sim::ContentionParams& params, bool rules) {
  sim::OpCosts& c = pair.costs;
  c.resources.clear();
  if (rules) {
    c.contention = params;
    c.contention.enabled = true;
    c.contention.comm_ctas = pair.workers;
    c.contention.attention_batched_gemm = pair.attention_batched_gemm;
    for (std::size_t i = 0; i < pair.schedule.ops.size(); ++i) {
      c.resources.push_back(
          sim::op_resources(pair.schedule.ops[i], c.standalone_ns[i], c.contention));
    }
  }
  sim::Engine e;
  const sim::Timeline& tl = e.run(pair.schedule, c);
  const auto n = static_cast<std::size_t>(pair.victim_launches);
  const std::int64_t end = tl.end_ns[pair.schedule.ops.size() - 1];
  return static_cast<double>(end - c.release_ns[pair.victim_first]) / 1e3 / static_cast<double>(n);
}

std::vector<InterferencePair> interference_pairs(const sim::Profile& p,
                                                 const sim::HardwareConfig& hw) {
  const sim::ProfileCostModel cm(p, hw, p.tp);
  // The other op's head start as the profile says it ran; a profile without one released both
  // together (a race for the SMs), and is replayed with the current profiler's head start.
  const double head = p.interference_head_start_us.value_or(kInterferenceHeadStartUs);
  std::vector<InterferencePair> pairs;
  for (const auto& x : p.interference) {
    if (x.alone_us <= 0 || x.beside_us <= 0 || x.workers <= 0 || x.workers >= hw.sms) continue;
    if (x.victim == "fragment") {
      if (auto f = fragment_pair(x, p, cm)) pairs.push_back(std::move(*f));
      continue;
    }
    sim::Op other;
    if (!compute_op(x, p, &other)) continue;
    const bool comm_victim = x.victim == "comm";
    sim::Op victim = comm_victim ? make_op(sim::OpCode::AllReduce) : other;
    sim::Op aggressor = comm_victim ? other : make_op(sim::OpCode::AllReduce);
    if (!comm_victim) sim::set_allreduce_work(aggressor, victim.m * victim.n);
    const std::int64_t b = batch_of(x.alone_us);
    // The aggressor, as the profiler ran it: launches back to back until it outlasts the
    // victim's batch. A compute aggressor lasts the profile's time for its shape; the copy
    // beside a GEMM victim copies the GEMM's output (m x n) per launch, and lasts what the
    // profile measured for the copy on the same CTAs (see copy_us). Only where no such
    // measurement exists is the copy taken as one kernel outlasting the run.
    const double victim_batch_us = static_cast<double>(b) * x.alone_us;
    double aggressor_us = comm_victim ? static_cast<double>(cm.standalone_ns(aggressor)) / 1e3
                                      : copy_us(p, x.workers, victim.m, victim.n);
    std::int64_t na = 1;
    if (aggressor_us > 0) {
      na = static_cast<std::int64_t>(std::clamp(
          std::ceil((8 * victim_batch_us + head) / std::max(aggressor_us, 1e-3)), 4.0, 4096.0));
    } else {
      aggressor_us = 8 * victim_batch_us + 2 * head;
    }
    InterferencePair pair;
    pair.label =
        x.victim + " beside " + x.beside + " p" + std::to_string(x.workers) + " " + x.shape;
    pair.model = p.model;
    pair.workers = x.workers;
    pair.alone_us = x.alone_us;
    pair.measured_us = x.beside_us;
    for (std::int64_t i = 0; i < na; ++i) add_op(pair, cm, aggressor, aggressor_us);
    pair.victim_first = pair.schedule.ops.size();
    for (std::int64_t i = 0; i < b; ++i) add_op(pair, cm, victim, x.alone_us, head);
    pair.victim_launches = b;
    pairs.push_back(std::move(pair));
  }
  for (auto& pair : pairs) pair.attention_batched_gemm = cm.contention()->attention_batched_gemm;
  return pairs;
}

std::vector<InterferenceCheck> check_interference(const sim::Profile& p,
                                                  const sim::HardwareConfig& hw,
                                                  const sim::ContentionParams& params) {
  std::vector<InterferenceCheck> rows;
  for (auto& pair : interference_pairs(p, hw)) {
    InterferenceCheck r;
    r.label = pair.label;
    r.alone_us = pair.alone_us;
    r.measured_us = pair.measured_us;
    r.contention_us = predict_pair(pair, params, true);
    r.fixed_us = predict_pair(pair, params, false);
    rows.push_back(r);
  }
  return rows;
}

nlohmann::ordered_json print_interference_check(const std::vector<InterferenceCheck>& rows,
                                                const std::string& title, std::ostream& os) {
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  if (rows.empty()) return j;
  os << "\n  " << title << "\n";
  os << "    "
     << format("%-44s %9s %9s %10s %10s", "pair (victim beside aggressor, CTAs, shape)", "alone_us",
               "meas_us", "contention", "fixed")
     << "\n";
  std::vector<double> ec, ef;
  for (const auto& r : rows) {
    const double c = r.contention_us / r.measured_us - 1, f = r.fixed_us / r.measured_us - 1;
    ec.push_back(std::abs(c));
    ef.push_back(std::abs(f));
    os << "    "
       << format("%-44s %9.1f %9.1f %+9.1f%% %+9.1f%%", r.label.c_str(), r.alone_us, r.measured_us,
                 100 * c, 100 * f)
       << "\n";
    j.push_back({{"pair", r.label},
                 {"alone_us", r.alone_us},
                 {"measured_us", r.measured_us},
                 {"predicted_contention_us", r.contention_us},
                 {"predicted_fixed_factors_us", r.fixed_us}});
  }
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  };
  os << "    fixed: the profile's measured factors, which summarise these same pairs (not a "
        "held-out comparison)\n";
  os << "    "
     << format("median |error|: contention %.1f%%, fixed factors %.1f%%; worst %.1f%%, %.1f%%",
               100 * med(ec), 100 * med(ef), 100 * *std::max_element(ec.begin(), ec.end()),
               100 * *std::max_element(ef.begin(), ef.end()))
     << "\n";
  return j;
}

}  // namespace tpo::profiler
