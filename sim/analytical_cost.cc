// The analytical cost model. GEMMs: the output is cut into tiles that run in waves over the
// SMs (so 2253 tokens cost a whole extra wave, not 0.55 x 4096), each tile at a per-SM peak
// times an efficiency that falls with small K, bounded below by the time to move the bytes;
// when there are fewer tiles than SMs, K is split over the idle SMs (split-K).
// Attention: exact causal-with-prefix FLOPs and bytes, roofline, at an efficiency that rises
// with the keys each query block streams (attention_kv_half). Norms and elementwise ops:
// bytes / bandwidth. All-reduce: latency + bus bytes / bus bandwidth, hierarchical across
// nodes. A per-kernel GPU overhead is added to every kernel (host launch costs are the
// execution mode's, sim/launch.h). Efficiencies are the hardware file's.
#include "sim/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "sim/error.h"
#include "sim/format.h"
#include "sim/workload.h"

namespace tpo::sim {

OpCosts cost_schedule(const Schedule& s, const CostModel& cm) {
  OpCosts c;
  const std::size_t n = s.ops.size();
  c.standalone_ns.resize(n);
  c.slowdown.resize(n);
  const ContentionParams* p = cm.contention();
  if (p && !p->enabled) p = nullptr;
  if (p) {
    c.contention = *p;
    c.resources.resize(n);
  }
  // Layers repeat: an op with the cost key of the op at the same place one layer before (the
  // same ordinal among its layer's ops) costs what that op costs (cost models read nothing
  // else, see op_cost_key), so only the ops that differ are costed. A layer's ops need not be
  // contiguous (overlap strategies interleave layers): each layer's ops are listed in order.
  std::int32_t layers = 0;
  for (const Op& op : s.ops) layers = std::max(layers, op.layer + 1);
  std::vector<std::int32_t> offset(static_cast<std::size_t>(layers) + 1, 0), by_layer, ordinal(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (s.ops[i].layer >= 0) ordinal[i] = offset[static_cast<std::size_t>(s.ops[i].layer) + 1]++;
  }
  for (std::size_t l = 0; l < static_cast<std::size_t>(layers); ++l) offset[l + 1] += offset[l];
  by_layer.resize(static_cast<std::size_t>(offset.back()));
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t l = s.ops[i].layer;
    if (l >= 0)
      by_layer[static_cast<std::size_t>(offset[static_cast<std::size_t>(l)] + ordinal[i])] =
          static_cast<std::int32_t>(i);
  }
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = s.ops[i];
    if (op.layer >= 1) {
      const auto l = static_cast<std::size_t>(op.layer);
      const std::int32_t at = offset[l - 1] + ordinal[i];
      if (at < offset[l]) {
        const auto j = static_cast<std::size_t>(by_layer[static_cast<std::size_t>(at)]);
        if (j < i && op_cost_key(s.ops[j]) == op_cost_key(op)) {  // j costed already
          c.standalone_ns[i] = c.standalone_ns[j];
          c.slowdown[i] = c.slowdown[j];
          if (p) c.resources[i] = c.resources[j];
          continue;
        }
      }
    }
    c.standalone_ns[i] = cm.standalone_ns(op);
    c.slowdown[i] = {cm.overlap_slowdown(op, OpKind::Gemm),
                     cm.overlap_slowdown(op, OpKind::Attention),
                     cm.overlap_slowdown(op, OpKind::Elementwise)};
    if (p) c.resources[i] = op_resources(op, c.standalone_ns[i], *p);
  }
  c.release_ns = release_times(s, cm.exec(), cm.launch());
  return c;
}

AnalyticalCostModel::AnalyticalCostModel(HardwareConfig hw, std::int64_t tp)
    : hw_(std::move(hw)), tp_(tp), contention_(hw_.contention) {}

double AnalyticalCostModel::memory_ns(double bytes) const {
  return bytes / (hw_.memory_bandwidth_gbps * hw_.memory_efficiency);  // GB/s = bytes/ns
}

double AnalyticalCostModel::rowwise_ns(const Op& op) const {
  // Bytes that fit in the part of L2 an op can keep are served at L2 bandwidth (with
  // l2_in_place_only, only for an op that updates its operand in place: the residual add).
  const bool l2 = hw_.l2_resident_mib > 0 && op.bytes <= hw_.l2_resident_mib * 1048576.0 &&
                  (!hw_.l2_in_place_only || op.code == OpCode::ResidualAdd);
  double t = l2 ? op.bytes / hw_.l2_gbps : memory_ns(op.bytes);
  if (op.kind == OpKind::Norm && hw_.norm_blocks_per_sm > 0) {
    // One row per thread block: too few rows leave SMs, and so bandwidth, unused. Only the rows'
    // own bytes are slowed, not the weight vector every row shares: so every norm of fewer
    // rows than a full wave (sms x norm_blocks_per_sm) takes the time of that full wave.
    const double fill =
        static_cast<double>(op.m) / (static_cast<double>(hw_.sms) * hw_.norm_blocks_per_sm);
    if (fill > 0 && fill < 1 && op.bytes > 0) {
      const double shared = std::min(op.bytes, norm_weight_bytes(op));
      const double rows_t = t * (op.bytes - shared) / op.bytes;
      t = rows_t / fill + (t - rows_t);
    }
  }
  return t;
}

double AnalyticalCostModel::gemm_ns(std::int64_t m, std::int64_t n, std::int64_t k,
                                    double bytes) const {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  const double sm_flops_per_ns = hw_.bf16_dense_tflops * 1e3 / static_cast<double>(hw_.sms);
  // One tile shape: waves of thread blocks over the SMs, each at the tile's efficiency; at
  // least the bytes' time; plus the sum of the partial results when it splits K.
  const double memory = memory_ns(bytes);
  auto time_with = [&](const HardwareConfig::GemmTile& tile) {
    const std::int64_t tiles = ((m + tile.m - 1) / tile.m) * ((n + tile.n - 1) / tile.n);
    // With fewer output tiles than SMs (decode, thin chunks) libraries split K across the idle
    // SMs (split-K, at least kMinSplitDepth deep per split) instead of leaving them empty.
    constexpr std::int64_t kMinSplitDepth = 256;
    std::int64_t splits = 1;
    if (tiles < hw_.sms) {
      splits = std::max<std::int64_t>(1, std::min(hw_.sms / tiles, k / kMinSplitDepth));
    }
    const std::int64_t ctas = tiles * splits;
    // Stream-K spreads a partial last wave over every SM; otherwise it is a whole wave.
    const double waves = hw_.gemm_stream_k && ctas > hw_.sms
                             ? static_cast<double>(ctas) / static_cast<double>(hw_.sms)
                             : static_cast<double>((ctas + hw_.sms - 1) / hw_.sms);
    const double kd = static_cast<double>(k) / static_cast<double>(splits);
    const double eff = hw_.gemm_max_efficiency * tile.efficiency * kd / (kd + hw_.gemm_k_half);
    const double tile_flops = 2.0 * static_cast<double>(tile.m * tile.n) * kd;
    const double t = std::max(waves * tile_flops / (sm_flops_per_ns * eff), memory);
    return splits > 1 ? t + hw_.gemm_split_k_us * 1e3 : t;
  };
  // The fastest tile shape the library may pick, as its heuristic would.
  if (hw_.gemm_tiles.empty()) return time_with({hw_.gemm_tile_m, hw_.gemm_tile_n, 1.0});
  double best = std::numeric_limits<double>::infinity();
  for (const auto& tile : hw_.gemm_tiles) best = std::min(best, time_with(tile));
  return best;
}

double AnalyticalCostModel::attention_ns(const Op& op, bool busiest_block) const {
  // Work is spread over (128-query block x head x request) tiles that run in waves over the
  // SMs; a launch with fewer tiles than SMs (short chunks, decode) leaves SMs idle.
  const std::int64_t q = op.seq_end - op.seq_begin;
  const std::int64_t reqs = op.req_end - op.req_begin;
  const std::int64_t tiles = std::max<std::int64_t>(1, ((q + 127) / 128) * op.n * reqs);
  const std::int64_t waves = (tiles + hw_.sms - 1) / hw_.sms;
  const double util = static_cast<double>(tiles) / static_cast<double>(waves * hw_.sms);
  double eff = hw_.attention_max_efficiency;
  if (hw_.attention_kv_half > 0) {
    // Causal with the diagonal bottom-right: a query block streams the prefix and, on average,
    // half the chunk (with a sliding window, the keys in its window); short streams pay the
    // kernel's prologue and epilogue per block.
    const double kv = op.window > 0
                          ? attention_keys_per_query(op)
                          : static_cast<double>(op.kv_prefix()) + 0.5 * static_cast<double>(q + 1);
    eff *= kv / (kv + hw_.attention_kv_half);
  }
  const double peak = hw_.bf16_dense_tflops * 1e3 * eff;  // flops/ns
  // Blocks do not share work: a causal chunk's last blocks see the most keys (twice the
  // average without a prefix), and a launch of one wave lasts as long as its busiest block
  // on one SM, not as long as the average block (since 2026-12-04; before, the work was
  // spread evenly, which priced a short uncut prompt at about half its time where its
  // chunks after a prefix, whose blocks differ less, were priced in full).
  const double busiest =
      busiest_block ? 4.0 * static_cast<double>(op.k) * attention_busiest_block_pairs(op, 128)
                    : 0.0;
  const double per_sm = peak / static_cast<double>(hw_.sms);
  return std::max({op.flops / (peak * util), busiest / per_sm, memory_ns(op.bytes)});
}

namespace {

// A link's published all-reduce time for `bytes` on `ranks` (us; 0 where its table is for another
// rank count or absent), and the part of it that grows with the bytes (`bw_us`, the part a
// smaller CTA budget slows). Between two sizes: log-log interpolation for the time; the growing
// part is the bytes over the segment's own bandwidth (its added time over its added bytes),
// which a latency + bandwidth segment gives exactly, at most the whole time. Below the smallest
// size: its time, all latency. Above the largest: that time plus the extra bus bytes at
// past_table_gbps.
struct TableRead {
  double us = 0;
  double bw_us = 0;
};

// The bus bandwidth past a table's largest size: that of its last step between two sizes, at
// most busbw (a table ending latency-bound goes on at busbw, one ending short of saturation at
// what its last step gained), and never below the average its largest size reached, so that
// one all-reduce past the table never costs more than pieces of the table's largest size (until
// 2026-12-05 busbw capped it, so a table reaching more than the file's busbw, as a CSV of one's
// own stack may, priced one large all-reduce above two halves and so favoured splitting).
// `average`: the rate is the largest size's average (the extra bytes then cost as more whole
// pieces of that size would, latency share included).
double past_table_gbps(const LinkConfig& l, const LinkConfig::Table& table,
                       bool* average = nullptr) {
  const auto& pts = table.points;
  const double r = static_cast<double>(table.ranks);
  const double bus = 2.0 * (r - 1) / r;
  const auto& [b1, t1] = pts.back();
  const auto& [b0, t0] = pts[pts.size() - 2];
  const double reached_gbps = bus * b1 / (t1 * 1e3);
  const double step_gbps =
      t1 > t0 ? bus * (b1 - b0) / ((t1 - t0) * 1e3) : std::numeric_limits<double>::infinity();
  const double capped = std::min(l.busbw_gbps, step_gbps);
  if (average) *average = reached_gbps > capped;
  return std::max(reached_gbps, capped);
}

TableRead table_read(const LinkConfig& l, std::int64_t ranks, double bytes) {
  const LinkConfig::Table* table = l.table_for(ranks);
  if (!table) return {};
  const auto& pts = table->points;
  if (bytes <= pts.front().first) return {pts.front().second, 0};
  if (bytes >= pts.back().first) {
    const double r = static_cast<double>(ranks);
    const double bus = 2.0 * (r - 1) / r;
    const auto& [b1, t1] = pts.back();
    const auto& [b0, t0] = pts[pts.size() - 2];
    bool average = false;
    const double extra_us = bus * (bytes - b1) / past_table_gbps(l, *table, &average) / 1e3;
    const double grown_at_last = std::clamp(b1 * (t1 - t0) / (b1 - b0), 0.0, t1);
    // The part that grows with the bytes (what a smaller CTA budget slows): at the average rate
    // the extra time has the largest size's share of it, so that under any budget one
    // all-reduce past the table costs no more than pieces of the largest size.
    return {t1 + extra_us, grown_at_last + (average ? extra_us * grown_at_last / t1 : extra_us)};
  }
  const auto hi = std::lower_bound(pts.begin(), pts.end(), std::pair<double, double>{bytes, -1.0});
  const auto lo = hi - 1;
  const double slope =
      (std::log(hi->second) - std::log(lo->second)) / (std::log(hi->first) - std::log(lo->first));
  const double us =
      std::exp(std::log(lo->second) + slope * (std::log(bytes) - std::log(lo->first)));
  const double grown =
      bytes * (hi->second - lo->second) / (hi->first - lo->first);  // bytes x us per byte
  return {us, std::clamp(grown, 0.0, us)};
}

}  // namespace

double AnalyticalCostModel::allreduce_ns(const Collective& c) const {
  if (c.ranks <= 1 || c.bytes <= 0) return 0;
  const double bytes = static_cast<double>(c.bytes);
  const std::int64_t g = std::min(c.ranks, hw_.gpus_per_node);
  const std::int64_t nodes = (c.ranks + g - 1) / g;
  Collective intra{c.kind, c.bytes, g};
  double t = 0;
  if (const TableRead tr = table_read(hw_.intra, g, bytes); tr.us > 0) {
    t = tr.us * 1e3;  // published whole-op times, read at NCCL's own budget
  } else {
    t = hw_.intra.allreduce_latency_us * 1e3 + intra.bus_bytes() / hw_.intra.busbw_gbps;
  }
  if (nodes > 1) {
    // Reduce-scatter inside the node, all-reduce of 1/g of the data across nodes on each
    // GPU's own NIC, all-gather inside the node (the intra part is the ring's 2(g-1)/g).
    Collective inter{c.kind, static_cast<std::int64_t>(bytes / static_cast<double>(g)), nodes};
    t += hw_.inter.allreduce_latency_us * 1e3 + inter.bus_bytes() / hw_.inter.busbw_gbps;
  }
  // A CTA budget below what the collective needs to fill its links slows its bandwidth term
  // (not its latency).
  return t + (comm_budget_factor(contention_) - 1.0) * allreduce_bandwidth_ns(c);
}

double AnalyticalCostModel::allreduce_bandwidth_ns(const Collective& c) const {
  if (c.ranks <= 1 || c.bytes <= 0) return 0;
  const std::int64_t g = std::min(c.ranks, hw_.gpus_per_node);
  const std::int64_t nodes = (c.ranks + g - 1) / g;
  // A published table: the part of its time that grows with the bytes, at NCCL's real bandwidth
  // at that size (below the link's peak); else bus bytes at busbw.
  const TableRead tr = table_read(hw_.intra, g, static_cast<double>(c.bytes));
  double bw = tr.us > 0 ? tr.bw_us * 1e3
                        : Collective{c.kind, c.bytes, g}.bus_bytes() / hw_.intra.busbw_gbps;
  if (nodes > 1) {
    const Collective inter{c.kind, c.bytes / g, nodes};
    bw += inter.bus_bytes() / hw_.inter.busbw_gbps;
  }
  return bw;
}

std::string allreduce_cost_line(const HardwareConfig& hw, std::int64_t tp,
                                const std::string& links_of) {
  if (tp <= 1) return "";
  const auto link = [](const LinkConfig& l) {
    return fmt("%g us latency + bytes at ", l.allreduce_latency_us) +
           fmt("%g GB/s bus bandwidth (", l.busbw_gbps) + l.cls + ")";
  };
  const LinkConfig::Table* table = hw.allreduce_table(tp);
  std::string s =
      table
          ? "all-reduce: the allreduce_table's times for " + std::to_string(table->ranks) +
                " ranks (" + std::to_string(table->points.size()) + " sizes up to " +
                fmt("%g MiB", table->points.back().first / 1048576.0) + "; larger ones go on at " +
                fmt("%.3g GB/s bus bandwidth", past_table_gbps(hw.intra, *table)) +
                ") inside a node"
          : "all-reduce: " + link(hw.intra);
  if (tp > hw.gpus_per_node && hw.inter.cls != "none") s += ", across nodes " + link(hw.inter);
  s += links_of.empty() ? " from the hardware file" : " from " + links_of + " (--emulate)";
  // A table read instead of busbw_gbps that disagrees with it: most often a hardware file
  // copied for another machine whose link figures were changed and whose table was kept.
  if (table && table->points.size() >= 2) {
    const double r = static_cast<double>(table->ranks);
    const auto& [b1, t1] = table->points.back();
    const double reached = 2.0 * (r - 1) / r * b1 / (t1 * 1e3);
    if (reached > 0 && hw.intra.busbw_gbps > 0 &&
        std::max(reached / hw.intra.busbw_gbps, hw.intra.busbw_gbps / reached) > 1.5) {
      s += "; note: the table's largest all-reduce reaches " + fmt("%.0f", reached) +
           " GB/s bus bandwidth, the file's busbw_gbps is " + fmt("%.0f", hw.intra.busbw_gbps) +
           ", and at this TP the table is read instead: if it is another machine's (a copied "
           "file), delete or replace it (docs/hardware-file.md)";
    }
  }
  if (!hw.intra.tables.empty() && !table) {
    std::string ranks;
    for (const auto& t : hw.intra.tables) {
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(t.ranks);
    }
    s += "; its allreduce_table is for " + ranks + " ranks and does not apply at TP " +
         std::to_string(tp);
  }
  return s;
}

double AnalyticalCostModel::kv_store_ns(const Op& op) const {
  const double bytes = kv_store_bytes(op);
  return bytes > 0 ? memory_ns(bytes) + hw_.kernel_overhead_us * 1e3 : 0.0;
}

double AnalyticalCostModel::rope_ns(const Op& op) const {
  const double bytes = rope_bytes(op);
  return bytes > 0 ? memory_ns(bytes) + hw_.kernel_overhead_us * 1e3 : 0.0;
}

double AnalyticalCostModel::qk_norm_ns(const Op& op) const {
  const double bytes = qk_norm_bytes(op);
  return bytes > 0 ? memory_ns(bytes) + 2.0 * hw_.kernel_overhead_us * 1e3 : 0.0;
}

std::int64_t AnalyticalCostModel::standalone_spread_ns(const Op& op) const {
  if (op.kind != OpKind::Attention) return standalone_ns(op);
  return checked_ns(attention_ns(op, false) + hw_.kernel_overhead_us * 1e3, op);
}

std::int64_t AnalyticalCostModel::standalone_ns(const Op& op) const {
  double t = 0;
  switch (op.kind) {
    case OpKind::Gemm:
      t = gemm_ns(op.m, op.n, op.k, op.bytes) + qk_norm_ns(op) + rope_ns(op) + kv_store_ns(op);
      break;
    case OpKind::Attention:
      t = attention_ns(op);
      break;
    case OpKind::Norm:
    case OpKind::Elementwise:
      // An add that runs the next norm too: one kernel, priced as that norm (fused_norm_op).
      t = rowwise_ns(op.norm_after > 0 ? fused_norm_op(op) : op);
      // A post-norm first: a norm kernel of its own.
      if (op.post_norm > 0) t += static_cast<double>(standalone_ns(post_norm_op(op)));
      break;
    case OpKind::AllReduce:
      t = allreduce_ns({CollectiveKind::AllReduce, static_cast<std::int64_t>(op.bytes), tp_});
      // Its kernel also adds and normalizes (--allreduce-fusion add-norm): that work's bytes at
      // HBM speed, no kernel term of its own (an assumption: the fused kernel's reduction does
      // not hide them).
      if (op.residual_of >= 0) {
        const Op add = allreduce_add_op(op);
        t += rowwise_ns(add.norm_after > 0 ? fused_norm_op(add) : add);
        if (add.post_norm > 0) t += rowwise_ns(post_norm_op(add));
      }
      break;
  }
  // A published all-reduce time already holds its kernel's start and drain.
  const double overhead_us = op.kind == OpKind::Gemm ? hw_.gemm_overhead_us
                             : op.kind == OpKind::AllReduce && hw_.allreduce_table(tp_)
                                 ? 0.0
                                 : hw_.kernel_overhead_us;
  return checked_ns(t + overhead_us * 1e3, op);
}

std::int64_t checked_ns(double ns, const Op& op) {
  constexpr double kMaxNs = 1e12;  // 1000 s for one kernel
  if (!(ns >= 0) || !(ns <= kMaxNs)) {
    throw InputError("workload", op_code_name(op.code),
                     "one " + std::string(op_code_name(op.code)) + " op would take " +
                         (std::isfinite(ns) ? std::to_string(ns / 1e9) + " s" : "forever") +
                         "; the workload or hardware numbers are implausible");
  }
  return std::llround(ns);
}

double AnalyticalCostModel::overlap_slowdown(const Op& op, OpKind beside) const {
  // Comm slows by what computes beside it; compute by its own kind.
  const bool comm = op.kind == OpKind::AllReduce;
  const SlowdownByKind& s = comm ? hw_.comm_under_compute : hw_.compute_under_comm;
  switch (comm ? beside : op.kind) {
    case OpKind::Gemm:
      return s.gemm;
    case OpKind::Attention:
      return s.attention;
    default:
      return s.memory;
  }
}

std::string contention_model_text(const ContentionParams& p, const std::string& from) {
  // Its source's opening words say whether the values are fitted, measured or assumed, and on
  // what: a block copied into another machine's file keeps them.
  std::string says;
  if (!p.source.empty()) {
    // Up to its first sentence or clause end (a punctuation mark before a space, so that a URL
    // or a version number stays whole), at most about 60 characters.
    std::size_t end = p.source.size();
    for (const char* stop : {". ", ": ", "; "}) end = std::min(end, p.source.find(stop));
    says = p.source.substr(0, end);
    if (says.size() > 60) {
      const std::size_t space = says.rfind(' ', 60);
      says = says.substr(0, space == std::string::npos || space == 0 ? 60 : space) + " ...";
    }
    says = "; its source: '" + says + "'";
  }
  return "the contention model, from " + from + " (a comm kernel holds " +
         std::to_string(p.comm_ctas) + " of " + std::to_string(p.sms) + " SMs" + says +
         "; README, 'Overlap: the contention model')";
}

std::string AnalyticalCostModel::overlap_model() const {
  if (contention_.enabled)
    return contention_model_text(contention_, hw_.name + "'s contention block");
  const SlowdownByKind& c = hw_.compute_under_comm;
  const SlowdownByKind& m = hw_.comm_under_compute;
  return "fixed slowdown factors, from " + hw_.name + "'s interference block" +
         (hw_.interference_assumed ? " (assumed, not measured: its source says so)" : "") +
         ": beside comm, GEMMs " + fmt("x%.2f", c.gemm) + ", attention " +
         fmt("x%.2f", c.attention) + ", memory-bound ops " + fmt("x%.2f", c.memory) + "; comm " +
         fmt("x%.2f", m.gemm) + " beside a GEMM, " + fmt("x%.2f", m.attention) +
         " beside attention, " + fmt("x%.2f", m.memory) + " beside a memory-bound op";
}

std::string CostModel::allreduce_text(const Workload& w) const {
  return allreduce_cost_line(w.hardware, w.tp, w.links_of);
}

}  // namespace tpo::sim
