// Profile cost model: lookups, log-log interpolation, analytical extrapolation.
#include "sim/profile_cost.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <string_view>

#include "sim/error.h"
#include "sim/format.h"
#include "sim/json_io.h"
#include "sim/stats.h"
#include "sim/strategy.h"

namespace tpo::sim {

namespace {

// Of two cost sources, the less measured: measured < interpolated < extrapolated < analytical.
const char* less_measured(const char* a, const char* b) {
  auto rank = [](std::string_view o) {
    return o == "measured" ? 0 : o == "interpolated" ? 1 : o == "extrapolated" ? 2 : 3;
  };
  return rank(a) >= rank(b) ? a : b;
}

void sort_curve(std::vector<std::pair<double, double>>& c) {
  std::sort(c.begin(), c.end());
  // Duplicate sizes: keep the first (profiles do not repeat a size; imports might).
  c.erase(std::unique(c.begin(), c.end(),
                      [](const auto& a, const auto& b) { return a.first == b.first; }),
          c.end());
}

// The median |read / measured - 1| of every interior point of the curves, each read in
// log-log space between its two neighbours as if it had not been measured; 0 if none.
template <class Curves>
double leave_one_out_error(const Curves& curves) {
  std::vector<double> err;
  for (const auto& [key, c] : curves) {
    for (std::size_t i = 1; i + 1 < c.size(); ++i) {
      const auto &a = c[i - 1], &b = c[i], &d = c[i + 1];
      if (a.second <= 0 || b.second <= 0 || d.second <= 0 || a.first <= 0) continue;
      const double t =
          (std::log(b.first) - std::log(a.first)) / (std::log(d.first) - std::log(a.first));
      const double read =
          std::exp(std::log(a.second) + t * (std::log(d.second) - std::log(a.second)));
      err.push_back(std::fabs(read / b.second - 1.0));
    }
  }
  return median(std::move(err));
}

}  // namespace

ProfileCostModel::ProfileCostModel(Profile p, HardwareConfig hw, std::int64_t tp)
    : p_(std::move(p)), a_(hw, tp), tp_(tp), contention_(hw.contention), launch_(hw.launch) {
  if (!p_.launch.is_null()) launch_ = launch_from_json(p_.launch, p_.origin, "launch", hw.launch);
  if (p_.contention.is_object() && p_.contention.contains("params")) {
    contention_ = contention_from_json(p_.contention.at("params"), p_.origin, "contention.params",
                                       hw.contention);
  }
  // Attention's blocks as the profiled kernel runs them (sim/contention.h).
  contention_.attention_batched_gemm = profiled_attention_kernel(p_) == "cublas-batched";
  // The LM head's rows a curve of their own, even where its shape is a layer GEMM's (whose
  // times may hold qkv's rotary kernel and KV-cache write, or a bias).
  for (const auto& g : p_.gemm) {
    (g.name == "lm_head" ? head_ : gemm_)[{g.n, g.k}].emplace_back(static_cast<double>(g.m),
                                                                   g.t.median_us);
  }
  for (const auto& a : p_.attention) {
    const int cls = attn_class(a.q_tokens, a.prefix);
    attn_[{a.q_heads, a.kv_heads, a.head_dim, cls}].emplace_back(a.flops, a.t.median_us);
    if (cls != kDecode) {
      attn_[{a.q_heads, a.kv_heads, a.head_dim, kAnyPrefill}].emplace_back(a.flops, a.t.median_us);
    }
  }
  for (const auto& r : p_.rowwise) {
    rowwise_[{r.name, r.cols}].emplace_back(static_cast<double>(r.rows), r.t.median_us);
  }
  for (const auto& r : p_.allreduce) {
    allreduce_[r.ranks].emplace_back(static_cast<double>(r.elements), r.t.median_us);
  }
  for (auto& [k, c] : gemm_) sort_curve(c);
  for (auto& [k, c] : head_) sort_curve(c);
  // The layer GEMMs' interpolation error and the rows every one of them was measured at (the
  // LM head's, timed at batch sizes only, are not what a chunk's GEMMs are read at).
  gemm_loo_ = leave_one_out_error(gemm_);
  for (const auto& [key, c] : gemm_) {
    std::vector<std::int64_t> rows;
    for (const auto& [m, us] : c) rows.push_back(static_cast<std::int64_t>(m));
    if (key == gemm_.begin()->first) {
      gemm_rows_ = rows;
    } else {
      std::vector<std::int64_t> both;
      std::set_intersection(gemm_rows_.begin(), gemm_rows_.end(), rows.begin(), rows.end(),
                            std::back_inserter(both));
      gemm_rows_ = std::move(both);
    }
  }
  for (auto& [k, c] : attn_) sort_curve(c);
  for (auto& [k, c] : rowwise_) sort_curve(c);
  for (auto& [k, c] : allreduce_) sort_curve(c);
  // The comm-beside-GEMM series: the comm-worker count measured at the most lengths.
  std::map<std::int64_t, Curve> comm_by_workers;
  for (const auto& x : p_.interference) {
    if (x.victim != "comm" || x.alone_us <= 0) continue;
    if (x.beside == "gemm") {
      comm_by_workers[x.workers].emplace_back(x.alone_us, x.slowdown());
    } else {
      comm_slowdown_[x.beside].emplace_back(x.alone_us, x.slowdown());
    }
  }
  Curve gemm;
  for (auto& [workers, c] : comm_by_workers) {
    sort_curve(c);
    if (c.size() >= 2 && c.size() > gemm.size()) gemm = c;
  }
  if (!gemm.empty()) comm_slowdown_["gemm"] = gemm;
  for (auto& [kind, c] : comm_slowdown_) sort_curve(c);
}

// Same op at another size (the size being the curve's x): for the analytical edge ratio.
static Op resized(const Op& op, double from, double to) {
  Op e = op;
  const double f = to / from;
  e.flops = op.flops * f;
  e.bytes = op.bytes * f;
  if (op.kind == OpKind::Gemm) {
    e.m = static_cast<std::int64_t>(std::llround(to));
    const double m = to, n = static_cast<double>(op.n), k = static_cast<double>(op.k);
    e.bytes = 2.0 * (m * k + k * n + m * n);
  } else if (op.kind == OpKind::Norm || op.kind == OpKind::Elementwise) {
    e.m = static_cast<std::int64_t>(std::llround(static_cast<double>(op.m) * f));
    // By the graph's formulas: a norm's weight vector does not scale with its rows.
    if (op.n > 0) set_rowwise_work(e, e.m, op.n);
  }
  return e;
}

ProfileCostModel::Estimate ProfileCostModel::on_curve(const Curve& c, double x,
                                                      const Op& op) const {
  const auto hi = std::lower_bound(c.begin(), c.end(), std::pair<double, double>{x, -1e300});
  if (hi != c.end() && hi->first == x) return {hi->second, "measured"};
  if (hi != c.begin() && hi != c.end()) {
    const auto lo = hi - 1;
    const double t =
        (std::log(x) - std::log(lo->first)) / (std::log(hi->first) - std::log(lo->first));
    return {std::exp(std::log(lo->second) + t * (std::log(hi->second) - std::log(lo->second))),
            "interpolated"};
  }
  // Outside the measured range: the analytical model, anchored at the nearest measured size.
  const auto& edge = hi == c.end() ? c.back() : c.front();
  // (Attention's busiest-block bound is left out of the ratio: the edge op is resized by its
  // FLOPs, not by its chunk, so that bound would not scale with it.)
  const double a_op = static_cast<double>(a_.standalone_spread_ns(op));
  const double a_edge = static_cast<double>(a_.standalone_spread_ns(resized(op, x, edge.first)));
  const double scale = a_edge > 0 ? edge.second * 1e3 / a_edge : 1.0;
  return {a_op * scale / 1e3, "extrapolated"};
}

ProfileCostModel::Estimate ProfileCostModel::estimate(const Op& op) const {
  switch (op.kind) {
    case OpKind::Gemm:
      if (op.code == OpCode::LmHead) {
        if (auto it = head_.find({op.n, op.k}); it != head_.end()) {
          return on_curve(it->second, static_cast<double>(op.m), op);
        }
        break;  // not timed (a replicated head, an older profile): the analytical model
      }
      if (auto it = gemm_.find({op.n, op.k}); it != gemm_.end()) {
        // What the profile's qkv times include besides the GEMM, and what this op runs: a
        // part timed but not run is taken off (analytically), one run but not timed added.
        const bool kv_timed = p_.qkv_kv_store_width > 0, kv_run = kv_store_bytes(op) > 0;
        Op timed = op;  // the op as the profile timed it
        if (op.code == OpCode::Qkv) {
          timed.kv_width = kv_timed ? op.kv_width : 0;
          timed.rope_dim = static_cast<std::int32_t>(p_.qkv_rope_dim);
          timed.rope_heads = static_cast<std::int32_t>(p_.qkv_rope_heads);
          timed.qk_norm = p_.qkv_qk_norm;
        } else {
          timed.kv_width = 0;
          timed.rope_dim = timed.rope_heads = 0;
          timed.qk_norm = false;
        }
        Estimate e = on_curve(it->second, static_cast<double>(op.m), timed);
        if (kv_run && !kv_timed) e.us += a_.kv_store_ns(op) / 1e3;
        if (timed.rope_dim != op.rope_dim || timed.rope_heads != op.rope_heads ||
            timed.qk_norm != op.qk_norm) {
          const double d =
              a_.rope_ns(op) - a_.rope_ns(timed) + a_.qk_norm_ns(op) - a_.qk_norm_ns(timed);
          e.us = std::max(0.0, e.us + d / 1e3);
        }
        return e;
      }
      break;
    case OpKind::Attention: {
      const Estimate e = attention(op);
      if (e.us >= 0) return e;
      break;
    }
    case OpKind::Norm:
    case OpKind::Elementwise:
      if (op.post_norm > 0) {  // the norm first, priced as a norm of its own, then the add
        Op add = op;
        add.post_norm = 0;
        Estimate e = estimate(add);
        const Estimate n = estimate(post_norm_op(op));
        e.us += n.us;
        e.origin = less_measured(e.origin, n.origin);
        return e;
      }
      if (op.norm_after > 0) {
        // The fused kernel where the profile timed it; else the add and the norm as timed apart,
        // the norm's time scaled by what fusing adds to the add in the analytical model against
        // the norm alone (no second read of the residual, no kernel term of its own).
        if (auto it = rowwise_.find({kAddNormName, op.n}); it != rowwise_.end()) {
          return on_curve(it->second, static_cast<double>(op.m), op);
        }
        Op add = op;
        add.norm_after = 0;
        Estimate e = estimate(add);
        Op norm = fused_norm_op(op);
        set_rowwise_work(norm, op.m, op.n);  // the norm as a kernel of its own
        const Estimate n = estimate(norm);
        const double norm_ns = static_cast<double>(a_.standalone_ns(norm));
        const double added = static_cast<double>(a_.standalone_ns(op) - a_.standalone_ns(add));
        e.us += norm_ns > 0 ? n.us * std::max(0.0, added) / norm_ns : 0.0;
        e.origin = less_measured(e.origin, n.origin);
        return e;
      }
      if (const char* name = rowwise_name(op.code)) {
        if (auto it = rowwise_.find({name, op.n}); it != rowwise_.end()) {
          return on_curve(it->second, static_cast<double>(op.m), op);
        }
      }
      break;
    case OpKind::AllReduce:
      if (op.residual_of >= 0) {
        // --allreduce-fusion add-norm: the all-reduce, then its add (and norms) priced as the
        // residual add kernel the profile timed (what the runtimes run after it on the comm
        // stream).
        Op pure = op;
        pure.residual_of = -1;
        pure.post_norm = pure.norm_after = 0;
        Estimate e = estimate(pure);
        const Estimate a = estimate(allreduce_add_op(op));
        e.us += a.us;
        e.origin = less_measured(e.origin, a.origin);
        return e;
      }
      if (auto it = allreduce_.find(tp_); it != allreduce_.end()) {
        const double elements = op.bytes / 2.0;  // the graph counts bf16 messages
        Estimate e = on_curve(it->second, elements, op);
        // Measured at NCCL's own budget: a smaller one slows the bandwidth term only.
        const Collective c{CollectiveKind::AllReduce, static_cast<std::int64_t>(op.bytes), tp_};
        e.us += (comm_budget_factor(contention_) - 1.0) * a_.allreduce_bandwidth_ns(c) / 1e3;
        return e;
      }
      break;
  }
  return {static_cast<double>(a_.standalone_ns(op)) / 1e3, "analytical"};
}

// Attention from the profile's curves (see attn_), or us < 0 where it has none for the op.
ProfileCostModel::Estimate ProfileCostModel::attention(const Op& op) const {
  const std::int64_t q = op.seq_end - op.seq_begin;
  // A window shorter than about half the chunk: no full causal attention of these q queries
  // sees as few keys per query. Read the one of 2 x keys-per-query - 1 queries without a
  // prefix (the same keys per query), at its rate per FLOP: extrapolated.
  if (q > 1 && op.window > 0 && op.window < op.seq_end) {
    const double kpq = attention_keys_per_query(op);
    if (kpq < 0.5 * static_cast<double>(q + 1)) {
      const auto q2 = std::max<std::int64_t>(2, std::llround(2.0 * kpq - 1.0));
      Op proxy = op;
      proxy.window = 0;
      proxy.seq_begin = 0;
      proxy.seq_end = q2;
      set_attention_work(proxy, op.req_end - op.req_begin, q2, 0, op.n, op.kv_heads, op.k);
      Estimate e = attention(proxy);
      if (e.us >= 0) {
        e.us *= op.flops / proxy.flops;
        e.origin = "extrapolated";
      }
      return e;
    }
  }
  if (attn_class(q, op.kv_prefix()) == kDecode) {
    auto it = attn_.find({op.n, op.kv_heads, op.k, kDecode});
    return it != attn_.end() ? on_curve(it->second, op.flops, op) : Estimate{-1, ""};
  }
  // The op's own ratio of prefix to chunk, in eighths (not rounded: an op near a measured
  // ratio is read between it and the next, so its time has no step there). A sliding-window
  // op (not profiled) is read as the full causal attention of its queries with the same keys
  // per query (an assumption: the same rate per FLOP at the same stream length per query).
  const double ratio = 8.0 * attention_equivalent_prefix(op) / static_cast<double>(q);
  // The curves of the ratios around it (each with two points or more), in ratio order.
  const Curve *lo = nullptr, *hi = nullptr;
  int r_lo = 0, r_hi = 0, curves = 0;
  for (auto it = attn_.lower_bound({op.n, op.kv_heads, op.k, 0});
       it != attn_.end() && std::get<0>(it->first) == op.n &&
       std::get<1>(it->first) == op.kv_heads && std::get<2>(it->first) == op.k;
       ++it) {
    if (it->second.size() < 2) continue;
    ++curves;
    const int r = std::get<3>(it->first);
    if (r <= ratio) {
      lo = &it->second;
      r_lo = r;
    } else if (!hi) {
      hi = &it->second;
      r_hi = r;
    }
  }
  if (lo && r_lo == ratio) return on_curve(*lo, op.flops, op);
  if (!lo || !hi) {
    // Beyond the ratios measured: the nearest one's curve where two ratios or more have
    // curves, else every prefill point (or the one ratio's curve where that is all there
    // is). Either way a reading off the op's ratio: extrapolated.
    auto any = attn_.find({op.n, op.kv_heads, op.k, kAnyPrefill});
    Estimate e{-1, ""};
    if ((curves >= 2 || any == attn_.end()) && (lo || hi)) {
      e = on_curve(lo ? *lo : *hi, op.flops, op);
    } else if (any != attn_.end()) {
      e = on_curve(any->second, op.flops, op);
    }
    if (e.us >= 0) e.origin = "extrapolated";
    return e;
  }
  const Estimate a = on_curve(*lo, op.flops, op), b = on_curve(*hi, op.flops, op);
  const double t = (ratio - r_lo) / static_cast<double>(r_hi - r_lo);
  const bool out =
      a.origin == std::string("extrapolated") || b.origin == std::string("extrapolated");
  return {std::exp((1 - t) * std::log(a.us) + t * std::log(b.us)),
          out ? "extrapolated" : "interpolated"};
}

std::int64_t ProfileCostModel::standalone_ns(const Op& op) const {
  return checked_ns(estimate(op).us * 1e3, op);
}

std::string ProfileCostModel::origin(const Op& op) const {
  return estimate(op).origin;
}

std::string ProfileCostModel::allreduce_text(const Workload& w) const {
  if (w.tp <= 1) return "";
  if (const auto it = allreduce_.find(tp_); it != allreduce_.end()) {
    return "all-reduce: the profile's measured times at " + std::to_string(tp_) + " ranks (" +
           std::to_string(it->second.size()) + " sizes)";
  }
  return CostModel::allreduce_text(w) + " (the profile has no all-reduce times at " +
         std::to_string(tp_) + " ranks)";
}

std::string ProfileCostModel::overlap_model() const {
  if (contention_.enabled) {
    const bool own = p_.contention.is_object() && p_.contention.contains("params");
    return contention_model_text(contention_, own ? "the profile's fitted contention block"
                                                  : a_.hardware().name + "'s contention block");
  }
  if (p_.interference.empty()) return a_.overlap_model();
  return "the profile's measured slowdown factors: compute " +
         fmt("x%.2f", p_.compute_slowdown_under_comm) +
         " beside comm; comm by its length beside compute";
}

double ProfileCostModel::overlap_slowdown(const Op& op, OpKind beside) const {
  const bool measured = !p_.interference.empty();
  if (!measured) return a_.overlap_slowdown(op, beside);
  if (op.kind != OpKind::AllReduce) return p_.compute_slowdown_under_comm;
  const char* kind = beside == OpKind::Gemm        ? "gemm"
                     : beside == OpKind::Attention ? "attention"
                                                   : "rowwise";
  auto it = comm_slowdown_.find(kind);
  if (it == comm_slowdown_.end()) it = comm_slowdown_.find("gemm");
  if (it == comm_slowdown_.end()) return p_.comm_slowdown_under_compute;
  // Interpolated in log(duration) between the measured lengths, flat beyond them.
  const double us = std::max(estimate(op).us, 1e-3);
  const auto& c = it->second;
  if (us <= c.front().first) return c.front().second;
  if (us >= c.back().first) return c.back().second;
  const auto hi = std::lower_bound(c.begin(), c.end(), std::pair<double, double>{us, -1e300});
  const auto lo = hi - 1;
  const double t =
      (std::log(us) - std::log(lo->first)) / (std::log(hi->first) - std::log(lo->first));
  return lo->second + t * (hi->second - lo->second);
}

std::unique_ptr<CostModel> make_cost_model(const Workload& w, const std::string& profile_path) {
  if (profile_path.empty()) {
    auto cm = std::make_unique<AnalyticalCostModel>(w.hardware, w.tp);
    cm->set_exec(w.exec);
    return cm;
  }
  Profile p = load_profile(profile_path);
  if (p.tp != w.tp) {
    throw FieldError("profile", profile_path,
                     "was measured at TP " + std::to_string(p.tp) + " but tp is " +
                         std::to_string(w.tp) + " (shard shapes differ); profile at this TP");
  }
  const std::string measured_for =
      JsonObject(p.options, profile_path, "options").string_or("hardware", "");
  if (!measured_for.empty() && measured_for != w.hardware.name &&
      measured_for != w.hardware.origin) {
    throw FieldError("profile", profile_path,
                     "was measured for hardware '" + measured_for + "' but hardware is '" +
                         w.hardware.name + "'; use hardware " + measured_for +
                         " (its analytical model fills what the profile lacks)");
  }
  // A profile's compute times were measured at its GPU's clock; one of all-reduces only (an
  // import) leaves compute to the analytical model, which the clock scales.
  if (w.hardware.sm_clock_mhz > 0 &&
      !(p.gemm.empty() && p.attention.empty() && p.rowwise.empty())) {
    throw FieldError("sm_clock", std::to_string(static_cast<std::int64_t>(w.hardware.sm_clock_mhz)),
                     "scales the analytical model's compute rate, but the compute times in " +
                         profile_path +
                         " were measured at its GPU's own clock: drop --sm-clock (0: as quoted), "
                         "or the profile");
  }
  if (!p.model.empty() && p.model != w.model.name &&
      (w.model.folder_name.empty() || p.model != w.model.folder_name)) {
    throw FieldError("profile", profile_path,
                     "was measured for model '" + p.model + "', not '" + w.model.name +
                         "'; profile this model (tpo profile --model ...)");
  }
  // The same name is not the same model: each GEMM the profile measured must have the shape
  // this model's shard gives it (else its ops would quietly fall back to the analytical model).
  if (!p.gemm.empty()) {
    Workload one = w;
    one.layers = 1;
    one.embed_head = true;  // the LM head too (a profile times it vocab-parallel)
    one.vocab_replicated = false;
    std::map<std::string, std::pair<std::int64_t, std::int64_t>> shape;
    for (const auto& op : build_schedule(one, StrategySpec(StrategyKind::None)).ops) {
      if (op.kind == OpKind::Gemm) shape[op_code_name(op.code)] = {op.n, op.k};
    }
    for (const auto& g : p.gemm) {
      const auto it = shape.find(g.name);
      if (it != shape.end() && it->second != std::pair{g.n, g.k}) {
        throw FieldError("profile", profile_path,
                         "was measured for a model named '" + p.model + "' whose " + g.name +
                             " GEMM is " + std::to_string(g.n) + " x " + std::to_string(g.k) +
                             " (n x k), but this model's shard at TP " + std::to_string(w.tp) +
                             " has " + std::to_string(it->second.first) + " x " +
                             std::to_string(it->second.second) +
                             ": another model under the same name; profile this one");
      }
    }
  }
  // Attention timed with another soft cap than the model's (a profile made since 2026-12-04
  // records the one it timed; 0: none, or an older profile, which is taken as it is).
  if (p.attention_softcap && !p.attention.empty() &&
      std::abs(*p.attention_softcap - w.model.attn_softcap) > 1e-9 * *p.attention_softcap) {
    throw FieldError("profile", profile_path,
                     "timed attention with a soft cap of " + fmt("%g", *p.attention_softcap) +
                         " (attention_softcap), but the model's attn_logit_softcapping is " +
                         fmt("%g", w.model.attn_softcap) +
                         " (0: none): another configuration of the model; profile this one");
  }
  auto cm = std::make_unique<ProfileCostModel>(std::move(p), w.hardware, w.tp);
  cm->set_exec(w.exec);
  return cm;
}

bool has_unmeasured_gemm_rows(const Schedule& s, const CostModel& cm) {
  for (const auto& op : s.ops) {
    // The LM head's rows are batch sizes, timed on a curve of their own.
    if (op.kind == OpKind::Gemm && op.code != OpCode::LmHead && !cm.gemm_rows_measured(op.m)) {
      return true;
    }
  }
  return false;
}

std::map<std::string, std::int64_t> cost_sources(const Schedule& s, const CostModel& cm) {
  std::map<std::string, std::int64_t> n;
  for (const auto& op : s.ops) ++n[cm.origin(op)];
  return n;
}

}  // namespace tpo::sim
