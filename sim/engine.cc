// Event engine. The heap holds finish events keyed on (time, insertion sequence); an event
// whose op was re-rated since it was pushed carries an old version and is skipped.
#include "sim/engine.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace tpo::sim {

namespace {
struct Later {
  template <class E>
  bool operator()(const E& a, const E& b) const {
    return a.time_ns != b.time_ns ? a.time_ns > b.time_ns : a.seq > b.seq;
  }
};
}  // namespace

void Engine::push(std::int64_t time_ns, std::int32_t op) {
  heap_.push_back({time_ns, seq_++, op, version_[static_cast<std::size_t>(op)]});
  std::push_heap(heap_.begin(), heap_.end(), Later{});
}

void Engine::start(std::int32_t op, std::int64_t now) {
  const auto i = static_cast<std::size_t>(op);
  tl_.start_ns[i] = now;
  remaining_ns_[i] = static_cast<double>(c_->standalone_ns[i]);
  last_update_ns_[i] = now;
  factor_[i] = 0;  // forces rerate() to schedule the finish
  running_[static_cast<std::size_t>(op_stream_[i])] = op;
  const std::int32_t rank = s_->ops[i].rank;
  if (!rank_dirty_[static_cast<std::size_t>(rank)]) {
    rank_dirty_[static_cast<std::size_t>(rank)] = 1;
    dirty_ranks_.push_back(rank);
  }
}

void Engine::try_start(std::int32_t stream, std::int64_t now) {
  const auto st = static_cast<std::size_t>(stream);
  if (running_[st] >= 0) return;
  const std::int32_t h = stream_head_[st];
  if (h >= stream_offset_[st + 1]) return;
  const std::int32_t op = stream_ops_[static_cast<std::size_t>(h)];
  if (pending_[static_cast<std::size_t>(op)] != 0) return;
  stream_head_[st] = h + 1;
  start(op, now);
}

void Engine::rerate(std::int32_t rank, std::int64_t now) {
  const std::int32_t base = rank * kStreamsPerRank;
  for (std::int32_t a = 0; a < kStreamsPerRank; ++a) {
    const std::int32_t op = running_[static_cast<std::size_t>(base + a)];
    if (op < 0) continue;
    const auto i = static_cast<std::size_t>(op);
    double f = 1.0;
    for (std::int32_t b = 0; b < kStreamsPerRank; ++b) {
      const std::int32_t other = running_[static_cast<std::size_t>(base + b)];
      if (b == a || other < 0) continue;
      f = std::max(f, c_->slowdown[i][static_cast<std::size_t>(
                          slowdown_class(s_->ops[static_cast<std::size_t>(other)].kind))]);
    }
    if (f == factor_[i]) continue;
    if (factor_[i] > 0) {
      remaining_ns_[i] -= static_cast<double>(now - last_update_ns_[i]) / factor_[i];
      if (remaining_ns_[i] < 0) remaining_ns_[i] = 0;
    }
    last_update_ns_[i] = now;
    factor_[i] = f;
    ++version_[i];
    push(now + static_cast<std::int64_t>(std::ceil(remaining_ns_[i] * f - 1e-6)), op);
  }
}

const Timeline& Engine::run(const Schedule& s, const OpCosts& costs) {
  s_ = &s;
  c_ = &costs;
  const std::size_t n = s.ops.size();
  const std::size_t streams = static_cast<std::size_t>(s.num_ranks) * kStreamsPerRank;
  if (costs.standalone_ns.size() != n || costs.slowdown.size() != n) {
    throw std::logic_error("engine: costs do not match the schedule");
  }
  tl_ = Timeline{};
  tl_.start_ns.assign(n, -1);
  tl_.end_ns.assign(n, -1);

  // Successors (CSR) and dependency counts.
  succ_offset_.assign(n + 1, 0);
  pending_.assign(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    for (auto d : s.ops[i].deps) {
      if (d < 0 || static_cast<std::size_t>(d) >= n) {
        throw std::logic_error("engine: op " + std::to_string(i) + " depends on unknown op " +
                               std::to_string(d));
      }
      ++succ_offset_[static_cast<std::size_t>(d) + 1];
    }
    pending_[i] = static_cast<std::int32_t>(s.ops[i].deps.size());
  }
  for (std::size_t i = 0; i < n; ++i) succ_offset_[i + 1] += succ_offset_[i];
  succ_.resize(static_cast<std::size_t>(succ_offset_[n]));
  stream_head_.assign(n, 0);  // scratch fill pointer per op, reused below for streams
  for (std::size_t i = 0; i < n; ++i) {
    for (auto d : s.ops[i].deps) {
      const auto di = static_cast<std::size_t>(d);
      succ_[static_cast<std::size_t>(succ_offset_[di] + stream_head_[di]++)] =
          static_cast<std::int32_t>(i);
    }
  }
  // Ops per stream, in issue order (CSR).
  stream_offset_.assign(streams + 1, 0);
  op_stream_.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t g = s.global_stream(s.ops[i]);
    if (g < 0 || static_cast<std::size_t>(g) >= streams) {
      throw std::logic_error("engine: op " + std::to_string(i) + " on a rank out of range");
    }
    op_stream_[i] = g;
    ++stream_offset_[static_cast<std::size_t>(g) + 1];
  }
  for (std::size_t g = 0; g < streams; ++g) stream_offset_[g + 1] += stream_offset_[g];
  stream_ops_.resize(n);
  stream_head_.assign(streams, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const auto g = static_cast<std::size_t>(op_stream_[i]);
    stream_ops_[static_cast<std::size_t>(stream_offset_[g] + stream_head_[g]++)] =
        static_cast<std::int32_t>(i);
  }
  for (std::size_t g = 0; g < streams; ++g) stream_head_[g] = stream_offset_[g];
  running_.assign(streams, -1);
  remaining_ns_.assign(n, 0);
  factor_.assign(n, 0);
  last_update_ns_.assign(n, 0);
  version_.assign(n, 0);
  rank_dirty_.assign(static_cast<std::size_t>(s.num_ranks), 0);
  dirty_ranks_.clear();
  heap_.clear();
  heap_.reserve(n + 16);
  seq_ = 0;

  auto settle = [&](std::int64_t now) {
    for (auto r : dirty_ranks_) {
      rank_dirty_[static_cast<std::size_t>(r)] = 0;
      rerate(r, now);
    }
    dirty_ranks_.clear();
  };
  for (std::size_t g = 0; g < streams; ++g) try_start(static_cast<std::int32_t>(g), 0);
  settle(0);

  std::size_t done = 0;
  std::int64_t now = 0;
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    const Event e = heap_.back();
    heap_.pop_back();
    const auto i = static_cast<std::size_t>(e.op);
    if (e.version != version_[i]) continue;  // re-rated since
    now = e.time_ns;
    tl_.end_ns[i] = now;
    ++done;
    const std::int32_t g = op_stream_[i];
    running_[static_cast<std::size_t>(g)] = -1;
    const std::int32_t rank = s.ops[i].rank;
    if (!rank_dirty_[static_cast<std::size_t>(rank)]) {
      rank_dirty_[static_cast<std::size_t>(rank)] = 1;
      dirty_ranks_.push_back(rank);
    }
    for (std::int32_t k = succ_offset_[i]; k < succ_offset_[i + 1]; ++k) {
      const auto sx = static_cast<std::size_t>(succ_[static_cast<std::size_t>(k)]);
      if (--pending_[sx] == 0) try_start(op_stream_[sx], now);
    }
    try_start(g, now);
    settle(now);
  }
  if (done != n) {
    for (std::size_t i = 0; i < n; ++i) {
      if (tl_.start_ns[i] < 0) {
        throw std::logic_error("engine: schedule deadlocks: op " + std::to_string(i) + " (" +
                               op_code_name(s.ops[i].code) +
                               ") never starts; a dependency cycle or a dependency on a later "
                               "op of the same stream");
      }
    }
  }
  tl_.total_ns = now;
  summarize(s, tl_);
  return tl_;
}

void summarize(const Schedule& s, Timeline& tl) {
  std::vector<std::pair<std::int64_t, std::int64_t>> comp, comm;
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const Op& op = s.ops[i];
    if (op.rank != 0) continue;
    auto& v = op.stream == StreamKind::Compute ? comp : comm;
    v.emplace_back(tl.start_ns[i], tl.end_ns[i]);
  }
  // Each stream runs one op at a time, in issue order: its intervals are sorted and disjoint.
  std::int64_t cb = 0, mb = 0, hidden = 0;
  for (auto [a, b] : comp) cb += b - a;
  for (auto [a, b] : comm) mb += b - a;
  std::size_t j = 0;
  for (auto [a, b] : comm) {
    while (j < comp.size() && comp[j].second <= a) ++j;
    for (std::size_t k = j; k < comp.size() && comp[k].first < b; ++k) {
      hidden += std::min(b, comp[k].second) - std::max(a, comp[k].first);
    }
  }
  tl.compute_busy_ns = cb;
  tl.comm_busy_ns = mb;
  tl.hidden_comm_ns = hidden;
  tl.exposed_comm_ns = mb - hidden;
  tl.overlap_efficiency = mb > 0 ? static_cast<double>(hidden) / static_cast<double>(mb) : 0.0;
}

}  // namespace tpo::sim
