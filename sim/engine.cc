// Event engine. One pending finish event per running op, keyed on (time, sequence of its
// last update); re-rating an op changes its key in place.
#include "sim/engine.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace tpo::sim {

// The pending events: each stream has at most one, that of the op it runs (its finish, or
// the end of a comm kernel's wait for SMs) or holds (its launch), keyed on (time, sequence
// number of its last update). So the set is running_ itself: a pop scans the streams for the
// earliest key, and a re-rated op's key changes in place.
bool Engine::before(std::int32_t a, std::int32_t b) const {
  const OpState& x = st_[static_cast<std::size_t>(a)];
  const OpState& y = st_[static_cast<std::size_t>(b)];
  return x.finish_ns != y.finish_ns ? x.finish_ns < y.finish_ns : x.key_seq < y.key_seq;
}

inline void Engine::push(std::int64_t time_ns, std::int32_t op) {
  OpState& x = st_[static_cast<std::size_t>(op)];
  x.finish_ns = time_ns;
  x.key_seq = seq_++;
}

template <bool One>
inline std::int32_t Engine::pop() const {
  if constexpr (One) {
    const std::int32_t a = running_[0], b = running_[1];
    const std::int32_t x = a >= 0 ? a : (a == -1 ? -1 : held(a));
    const std::int32_t y = b >= 0 ? b : (b == -1 ? -1 : held(b));
    if (x < 0) return y;
    if (y < 0) return x;
    return before(y, x) ? y : x;
  }
  std::int32_t top = -1;
  const std::int32_t* run = running_.data();
  const std::size_t streams = running_.size();
  for (std::size_t g = 0; g < streams; ++g) {
    const std::int32_t v = run[g];
    if (v == -1) continue;
    const std::int32_t op = v >= 0 ? v : held(v);  // held() is its own inverse
    if (top < 0 || before(op, top)) top = op;
  }
  return top;
}

// Marks the rank for re-rating at the end of the event.
template <bool One>
inline void Engine::mark_dirty(std::int32_t rank) {
  if constexpr (One) {
    rank_dirty_[0] = 1;
    return;
  }
  if (rank_dirty_[static_cast<std::size_t>(rank)]) return;
  rank_dirty_[static_cast<std::size_t>(rank)] = 1;
  dirty_ranks_.push_back(rank);
}

template <bool One>
inline void Engine::start(std::int32_t op, std::int64_t now) {
  const auto i = static_cast<std::size_t>(op);
  tl_.start_ns[i] = now;
  OpState& x = st_[i];
  x.remaining_ns = static_cast<double>(alone_[i]);
  x.last_update_ns = now;
  x.factor = 0;  // forces rerate() to schedule the finish
  const std::int32_t g = op_stream_[i];
  running_[static_cast<std::size_t>(g)] = op;
  const std::int32_t rank = rank_of(g);
  if (res_ != nullptr && res_[i].comm && g % kStreamsPerRank == 1) {
    const std::int32_t other = running_[static_cast<std::size_t>(g - 1)];  // compute stream
    if (other >= 0) wait_for_sms(op, other, now);
  }
  mark_dirty<One>(rank);
}

template <bool One>
inline void Engine::try_start(std::int32_t stream, std::int64_t now) {
  const auto st = static_cast<std::size_t>(stream);
  if (running_[st] != -1) return;  // an op runs, or one waits for its launch
  const std::int32_t h = stream_head_[st];
  if (h >= stream_offset_[st + 1]) return;
  const std::int32_t op = stream_ops_[static_cast<std::size_t>(h)];
  if (deps_left_[static_cast<std::size_t>(op)] != 0) return;
  stream_head_[st] = h + 1;
  OpState& x = st_[static_cast<std::size_t>(op)];
  x.waiting = 0;
  if (release_ != nullptr && release_[static_cast<std::size_t>(op)] > now) {
    // Not launched yet (eager or graph execution): it holds its stream and waits, running
    // nothing, until its launch; its finish event is the launch.
    running_[st] = held(op);
    x.waiting = kUnlaunched;
    push(release_[static_cast<std::size_t>(op)], op);
    return;
  }
  start<One>(op, now);
}

// Sets an op's rate factor; when it changes, carries the remaining work over and schedules
// the new finish time (rounded up to whole nanoseconds) under the next sequence number.
inline void Engine::refactor(OpState& x, double f, std::int64_t now, std::uint32_t& seq) {
  if (f == x.factor) return;
  if (x.factor > 0) {
    x.remaining_ns -= static_cast<double>(now - x.last_update_ns) / x.factor;
    if (x.remaining_ns < 0) x.remaining_ns = 0;
  }
  x.last_update_ns = now;
  x.factor = f;
  const double left = x.remaining_ns * f - 1e-6;
  auto whole = static_cast<std::int64_t>(left);
  if (static_cast<double>(whole) < left) ++whole;
  x.finish_ns = now + (whole > 0 ? whole : 0);
  x.key_seq = seq++;
}

inline void Engine::set_factor(std::int32_t op, double f, std::int64_t now) {
  refactor(st_[static_cast<std::size_t>(op)], f, now, seq_);
}

// A comm kernel arriving while an SM-bound kernel that started earlier holds every SM gets
// SMs when that kernel's current wave retires: until then it only waits. `a` is the compute
// kernel's state (`r` its resources, `alone` its standalone time, `started` its start); the
// wait, or 0 for none.
inline double Engine::sm_wait(const ContentionParams& p, const OpResources& r, const OpState& a,
                              std::int64_t alone_ns, std::int64_t started, std::int64_t now) {
  if (r.waves <= 0 || started >= now || a.factor <= 0) return 0;
  // A kernel of fewer blocks than the SMs the comm kernel leaves free never blocks it.
  if (fits_beside(r.waves, p.sms, p.comm_ctas)) return 0;
  const double alone = static_cast<double>(alone_ns);
  const double left = a.remaining_ns - static_cast<double>(now - a.last_update_ns) / a.factor;
  const double wave = alone / std::max(1.0, std::ceil(static_cast<double>(r.waves) - 1e-4));
  const double into = std::fmod(std::max(0.0, alone - left), wave);
  // While it waits the comm kernel holds nothing: the compute kernel runs alone (rate 1).
  const double wait_ns = std::min(wave - into, std::max(0.0, left));
  return wait_ns < 1 ? 0 : wait_ns;
}

void Engine::wait_for_sms(std::int32_t comm, std::int32_t compute, std::int64_t now) {
  const auto ci = static_cast<std::size_t>(compute);
  const double wait_ns =
      sm_wait(c_->contention, res_[ci], st_[ci], alone_[ci], tl_.start_ns[ci], now);
  if (wait_ns <= 0) return;
  OpState& x = st_[static_cast<std::size_t>(comm)];
  x.waiting = 1;
  x.remaining_ns = wait_ns;
}

// Rates of a compute op and a comm op overlapping on one GPU: their resources and states
// (null: none runs on that stream); `alone_b` is the comm op's standalone time.
inline void Engine::rerate_contended(const ContentionParams& p, const OpResources* ra, OpState* a,
                                     const OpResources* rb, OpState* b, std::int64_t alone_b,
                                     std::int64_t now, std::uint32_t& seq) {
  if (b != nullptr && b->waiting) {
    // The kernel it waited for is gone (or never held every SM): it starts its work now.
    if (a == nullptr || ra->waves <= 0) {
      b->begin_work(alone_b, now);
    } else {
      refactor(*b, 1.0, now, seq);  // only time passes
      refactor(*a, 1.0, now, seq);
      return;
    }
  }
  double fa = 1.0, fb = 1.0;
  if (a != nullptr && b != nullptr) {
    const double demand = static_cast<double>(ra->hbm_gbps) + static_cast<double>(rb->hbm_gbps);
    const double mem = p.hbm_gbps > 0 && demand > p.hbm_gbps ? demand / p.hbm_gbps : 1.0;
    const double waves = ra->beside_comm > 0
                             ? ra->beside_comm
                             : wave_factor(ra->waves, p.sms, p.comm_ctas, p.stream_k, p.extra_wave);
    fa = std::max(waves, mem) * (1.0 + p.compute_extra);
    fb = mem * (1.0 + p.comm_extra);
  }
  if (a != nullptr) refactor(*a, fa, now, seq);
  if (b != nullptr) refactor(*b, fb, now, seq);
}

inline void Engine::rerate_contention(std::int32_t a, std::int32_t b, std::int64_t now) {
  const auto i = static_cast<std::size_t>(a), j = static_cast<std::size_t>(b);
  rerate_contended(c_->contention, a >= 0 ? &res_[i] : nullptr, a >= 0 ? &st_[i] : nullptr,
                   b >= 0 ? &res_[j] : nullptr, b >= 0 ? &st_[j] : nullptr, b >= 0 ? alone_[j] : 0,
                   now, seq_);
}

inline void Engine::rerate(std::int32_t rank, std::int64_t now) {
  static_assert(kStreamsPerRank == 2, "rerate assumes a compute and a comm stream per rank");
  const auto base = static_cast<std::size_t>(rank * kStreamsPerRank);
  const std::int32_t a = running_[base], b = running_[base + 1];  // held ops are < -1
  if (res_ != nullptr) {
    rerate_contention(a, b, now);
    return;
  }
  if (a >= 0) {
    set_factor(
        a, b >= 0 ? slow_[static_cast<std::size_t>(a)][op_cls_[static_cast<std::size_t>(b)]] : 1.0,
        now);
  }
  if (b >= 0) {
    set_factor(
        b, a >= 0 ? slow_[static_cast<std::size_t>(b)][op_cls_[static_cast<std::size_t>(a)]] : 1.0,
        now);
  }
}

// One pass over the ops for the compact per-op fields the loops read: for a one-rank graph
// without skipping (pair_) each op's gate, otherwise its successors (inline lists; CSR lists
// in a second pass when an op has more than kSuccInline) and dependency count; then one over
// the streams' op counts for the per-stream lists. Buffers keep their capacity between runs.
void Engine::load(const Schedule& s) {
  s_ = &s;
  const std::size_t n = s.ops.size();
  const std::size_t streams = static_cast<std::size_t>(s.num_ranks) * kStreamsPerRank;
  pair_ = streams == kStreamsPerRank && !skip_;
  op_stream_.resize(n);
  op_cls_.resize(n);
  deps_init_.resize(n);  // filled for the general loop only
  if (pair_) {
    gate_.resize(n);
  } else {
    succ_small_.assign(n, SuccList{0, {}});
  }
  stream_offset_.assign(streams + 1, 0);
  // Locals, not members, in the loops: the stores through the int arrays would otherwise make
  // the compiler reload every member vector's pointers after each one.
  SuccList* small = succ_small_.data();
  std::int32_t* stream_count = stream_offset_.data() + 1;
  std::int32_t* op_stream = op_stream_.data();
  std::int32_t* deps_init = deps_init_.data();
  std::uint8_t* op_cls = op_cls_.data();
  fill_.resize(n);
  std::int32_t* place = fill_.data();
  std::int32_t* gate = gate_.data();  // per op (pair_)
  bool overflow = false, later = false;
  auto bad_dep = [&](std::size_t i, std::int32_t d) {
    throw std::logic_error("engine: op " + std::to_string(i) + " depends on unknown op " +
                           std::to_string(d));
  };
  auto bad_rank = [&](std::size_t i) {
    throw std::logic_error("engine: op " + std::to_string(i) + " on a rank out of range");
  };
  if (pair_) {
    // Two streams: each op's place from two counters, its gate from its dependencies on the
    // other stream.
    std::int32_t count0 = 0, count1 = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const Op& op = s.ops[i];
      const auto me = static_cast<std::int32_t>(i);
      const std::int32_t g = s.global_stream(op);
      std::int32_t need = 0;
      for (auto d : op.deps) {
        if (d < 0 || static_cast<std::size_t>(d) >= n) bad_dep(i, d);
        if (d >= me) {
          later = true;  // its place is not known yet: the pass below
        } else if (op_stream[d] != g) {
          need = std::max(need, place[d] + 1);
        }
      }
      if (g != 0 && g != 1) bad_rank(i);
      gate[i] = need;
      op_stream[i] = g;
      op_cls[i] = static_cast<std::uint8_t>(slowdown_class(op.kind));
      place[i] = g != 0 ? count1 : count0;
      count0 += 1 - g;
      count1 += g;
    }
    stream_count[0] = count0;
    stream_count[1] = count1;
  }
  for (std::size_t i = 0; i < n && !pair_; ++i) {
    const Op& op = s.ops[i];
    const auto me = static_cast<std::int32_t>(i);
    const std::int32_t g = s.global_stream(op);
    for (auto d : op.deps) {
      if (d < 0 || static_cast<std::size_t>(d) >= n) bad_dep(i, d);
      SuccList& x = small[d];
      if (x.n < kSuccInline) {
        x.s[x.n] = me;
      } else {
        overflow = true;
      }
      ++x.n;
    }
    if (g < 0 || static_cast<std::size_t>(g) >= streams) bad_rank(i);
    deps_init[i] = static_cast<std::int32_t>(op.deps.size());
    op_stream[i] = g;
    op_cls[i] = static_cast<std::uint8_t>(slowdown_class(op.kind));
    place[i] = stream_count[g]++;  // its place in its stream's list
  }
  if (later) {  // a dependency on a later op: on the other stream a gate, on its own never
    for (std::size_t i = 0; i < n; ++i) {
      for (auto d : s.ops[i].deps) {
        if (static_cast<std::size_t>(d) < i) continue;
        const auto u = static_cast<std::size_t>(d);
        gate[i] = op_stream[u] == op_stream[i] ? kNever : std::max(gate[i], place[u] + 1);
      }
    }
  }
  for (std::size_t g = 0; g < streams; ++g) stream_offset_[g + 1] += stream_offset_[g];
  stream_ops_.resize(n);
  st_.resize(n);
  stream_head_.assign(stream_offset_.begin(), stream_offset_.end() - 1);
  {
    // From each op's place: no store feeds the next iteration's load.
    std::int32_t* by_stream = stream_ops_.data();
    const std::int32_t* first = stream_offset_.data();
    if (pair_) {  // and the gates by place, beside the ops
      gate_place_.resize(n);
      std::int32_t* by_place = gate_place_.data();
      for (std::size_t i = 0; i < n; ++i) {
        const std::int32_t at = first[op_stream[i]] + place[i];
        by_stream[at] = static_cast<std::int32_t>(i);
        by_place[at] = gate[i];
      }
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        by_stream[first[op_stream[i]] + place[i]] = static_cast<std::int32_t>(i);
      }
    }
  }
  succ_csr_ = overflow;
  if (overflow) {  // some op has more successors than fit inline: CSR lists for every op
    succ_offset_.assign(n + 1, 0);
    for (std::size_t i = 0; i < n; ++i) succ_offset_[i + 1] = succ_offset_[i] + small[i].n;
    succ_.resize(static_cast<std::size_t>(succ_offset_[n]));
    fill_.assign(succ_offset_.begin(), succ_offset_.end() - 1);
    for (std::size_t i = 0; i < n; ++i) {
      for (auto d : s.ops[i].deps)
        succ_[static_cast<std::size_t>(fill_[static_cast<std::size_t>(d)]++)] =
            static_cast<std::int32_t>(i);
    }
  }
  // For steady-state skipping: each layer's first op, every op's dependencies in op order
  // and where they start, and its largest successor (and the largest of all ops before it).
  layer_first_.clear();
  if (!skip_) return;
  dep_offset_.resize(n + 1);
  succ_max_.resize(n);
  succ_max_before_.resize(n + 1);
  dep_offset_[0] = 0;
  succ_max_before_[0] = -1;
  dep_flat_.clear();
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t layer = s.ops[i].layer;
    if (layer >= 0) {
      if (static_cast<std::size_t>(layer) >= layer_first_.size()) {
        layer_first_.resize(static_cast<std::size_t>(layer) + 1, -1);
      }
      if (layer_first_[static_cast<std::size_t>(layer)] < 0) {
        layer_first_[static_cast<std::size_t>(layer)] = static_cast<std::int32_t>(i);
      }
    }
    for (auto d : s.ops[i].deps) dep_flat_.push_back(d);
    dep_offset_[i + 1] = dep_offset_[i] + deps_init_[i];
    const std::int32_t *b = succ_begin(i), *e = succ_end(i);
    succ_max_[i] = b != e ? e[-1] : -1;
    succ_max_before_[i + 1] = std::max(succ_max_before_[i], succ_max_[i]);
  }
}

void Engine::reset(const OpCosts& costs) {
  c_ = &costs;
  const std::size_t n = op_stream_.size();
  const std::size_t streams = stream_offset_.size() - 1;
  if (costs.standalone_ns.size() != n || costs.slowdown.size() != n ||
      (!costs.release_ns.empty() && costs.release_ns.size() != n) ||
      (!costs.resources.empty() && costs.resources.size() != n)) {
    throw std::logic_error("engine: costs do not match the schedule");
  }
  tl_.start_ns.assign(n, -1);
  tl_.end_ns.assign(n, -1);
  if (pair_) {
    finished_[0] = finished_[1] = 0;
    busy_[0] = busy_[1] = busy_[2] = 0;
  } else {
    deps_left_ = deps_init_;
  }
  stream_head_.assign(stream_offset_.begin(), stream_offset_.end() - 1);
  running_.assign(streams, -1);
  rank_dirty_.assign(streams / kStreamsPerRank, 0);
  dirty_ranks_.clear();
  seq_ = 0;
  alone_ = costs.standalone_ns.data();
  slow_ = costs.slowdown.data();
  res_ = costs.resources.empty() ? nullptr : costs.resources.data();
  release_ = costs.release_ns.empty() ? nullptr : costs.release_ns.data();
}

const Timeline& Engine::run(const Schedule& s, const OpCosts& costs) {
  load(s);
  return run_loaded(costs);
}

const Timeline& Engine::run_loaded(const OpCosts& costs, bool stats) {
  begin_run(costs);
  if (skip_ && costs.release_ns.empty() && layer_first_.size() > 2) {
    next_layer_ = 1;
    watch_ = layer_first_[1];
  }
  advance(-1);
  return end_run(stats);
}

bool Engine::run_until_started(const OpCosts& costs, std::int32_t op) {
  begin_run(costs);
  return advance(op);
}

const Timeline& Engine::run_on(bool stats) {
  advance(-1);
  return end_run(stats);
}

template <bool One>
inline void Engine::settle(std::int64_t now) {
  if constexpr (One) {
    if (rank_dirty_[0]) {
      rank_dirty_[0] = 0;
      rerate(0, now);
    }
    return;
  }
  for (auto r : dirty_ranks_) {
    rank_dirty_[static_cast<std::size_t>(r)] = 0;
    rerate(r, now);
  }
  dirty_ranks_.clear();
}

void Engine::begin_run(const OpCosts& costs) {
  if (!s_) throw std::logic_error("engine: run before load()");
  reset(costs);
  const std::size_t streams = stream_offset_.size() - 1;
  if (pair_) {
    fresh_ = true;  // the lanes' loop starts the first ops
  } else {
    for (std::size_t g = 0; g < streams; ++g) try_start<false>(static_cast<std::int32_t>(g), 0);
    settle<false>(0);
  }
  done_ = 0;
  now_ = 0;
  watch_ = -1;
  prev_.base = cur_.base = -1;
  skips_.clear();
  skipped_ops_ = 0;
}

bool Engine::advance(std::int32_t stop) {
  if (pair_) {
    if (res_ == nullptr) {
      return release_ == nullptr ? advance_lanes<false, false>(stop)
                                 : advance_lanes<false, true>(stop);
    }
    return release_ == nullptr ? advance_lanes<true, false>(stop) : advance_lanes<true, true>(stop);
  }
  return running_.size() == kStreamsPerRank ? advance_impl<true>(stop) : advance_impl<false>(stop);
}

template <bool One>
bool Engine::advance_impl(std::int32_t stop) {
  if (stop >= 0 && tl_.start_ns[static_cast<std::size_t>(stop)] >= 0) return true;
  for (std::int32_t top; (top = pop<One>()) >= 0;) {
    const auto i = static_cast<std::size_t>(top);
    const std::int64_t now = now_ = st_[i].finish_ns;
    if (st_[i].waiting == kUnlaunched) {  // launched now: it starts
      st_[i].waiting = 0;
      start<One>(static_cast<std::int32_t>(i), now);
      // An op of the rank's other stream launched at the same instant starts in this event
      // too, so that the order of the two launches' events does not matter.
      const std::int32_t v = running_[static_cast<std::size_t>(op_stream_[i] ^ 1)];
      if (v < -1 && st_[static_cast<std::size_t>(held(v))].finish_ns == now) {
        st_[static_cast<std::size_t>(held(v))].waiting = 0;
        start<One>(held(v), now);
      }
      settle<One>(now);
    } else if (st_[i].waiting) {  // a comm kernel got its SMs: its work starts
      st_[i].begin_work(alone_[i], now);
      const std::int32_t rank = rank_of(op_stream_[i]);
      mark_dirty<One>(rank);
      settle<One>(now);
      continue;
    } else {
      tl_.end_ns[i] = now;
      ++done_;
      const std::int32_t g = op_stream_[i];
      running_[static_cast<std::size_t>(g)] = -1;
      const std::int32_t rank = rank_of(g);
      mark_dirty<One>(rank);
      for (const std::int32_t *k = succ_begin(i), *e = succ_end(i); k != e; ++k) {
        const auto sx = static_cast<std::size_t>(*k);
        if (--deps_left_[sx] == 0) try_start<One>(op_stream_[sx], now);
      }
      try_start<One>(g, now);
      settle<One>(now);
    }
    if (watch_ >= 0 && tl_.start_ns[static_cast<std::size_t>(watch_)] >= 0) on_layer_start(now);
    if (stop >= 0 && tl_.start_ns[static_cast<std::size_t>(stop)] >= 0) return true;
  }
  return false;
}

namespace {

// One stream's op in advance_lanes (op -1: none) with its fluid state: running, held until
// its launch (waiting kUnlaunched), or a comm kernel waiting for SMs.
struct Lane {
  std::int32_t op;
  std::uint8_t cls;  // its slowdown class
  bool comm;         // its resources' comm flag (contention)
};

}  // namespace

// The loop of a one-rank graph (pair_), as advance_impl<true> with the streams' finished
// counts in place of dependency counters, and the two streams' ops and fluid state in
// locals. The arithmetic is set_factor's and the pushes come in rerate's order (compute,
// then comm), so the timeline and the event count are the same bit for bit. The order of
// the starts within an event does not matter: a comm kernel waits only for a kernel that
// started before the event, a started op's event is pushed by the re-rating, and two ops
// held for their launches are launched in one event when their launches coincide (the only
// case where the order of their pushes would decide which comes first). The state goes back
// to the members when the loop stops.
template <bool Contention, bool Release>
bool Engine::advance_lanes(std::int32_t stop) {
  if (!fresh_ && stop >= 0 && tl_.start_ns[static_cast<std::size_t>(stop)] >= 0) return true;
  const std::int64_t* alone = alone_;
  const std::array<double, 3>* slow = slow_;
  const OpResources* res = res_;
  const std::int64_t* release = release_;
  const ContentionParams& p = c_->contention;
  const std::uint8_t* cls = op_cls_.data();
  const std::int32_t* ops = stream_ops_.data();
  const std::int32_t* gate = gate_place_.data();
  std::int64_t* start_ns = tl_.start_ns.data();
  std::int64_t* end_ns = tl_.end_ns.data();
  const std::int32_t end0 = stream_offset_[1], end1 = stream_offset_[2];
  std::int32_t head0 = stream_head_[0], head1 = stream_head_[1];
  std::int32_t fin0 = finished_[0], fin1 = finished_[1];
  std::uint32_t seq = seq_;
  std::size_t done = done_;
  std::int64_t now = now_;
  std::int64_t busy_c = busy_[0], busy_m = busy_[1], busy_both = busy_[2];
  Lane c{-1, 0, false}, m{-1, 0, false};
  OpState cs{}, ms{};
  auto load_lane = [&](std::size_t g, Lane& l, OpState& x) {
    const std::int32_t v = running_[g];
    if (v == -1) return;
    l.op = v >= 0 ? v : held(v);
    l.cls = cls[l.op];
    if constexpr (Contention) l.comm = res[l.op].comm;
    x = st_[static_cast<std::size_t>(l.op)];
  };
  load_lane(0, c, cs);
  load_lane(1, m, ms);
  bool hit = false;
  // A lane's op runs (not held for its launch).
  auto runs = [](const Lane& l, const OpState& x) {
    return l.op >= 0 && (!Release || x.waiting != kUnlaunched);
  };
  auto begin = [&](Lane& l, OpState& x, const Lane& other, const OpState& ox, std::int32_t op,
                   bool is_comm_stream) {  // start
    start_ns[op] = now;
    l.op = op;
    x.begin_work(alone[op], now);
    hit |= op == stop;
    if constexpr (Contention) {
      // As start(): a comm kernel on the comm stream beside a running compute kernel.
      if (l.comm && is_comm_stream && runs(other, ox)) {
        const double w = sm_wait(p, res[other.op], ox, alone[other.op], start_ns[other.op], now);
        if (w > 0) {
          x.waiting = 1;
          x.remaining_ns = w;
        }
      }
    }
  };
  auto take = [&](Lane& l, OpState& x, const Lane& other, const OpState& ox, std::int32_t& head,
                  std::int32_t end, std::int32_t other_fin, bool is_comm_stream) {  // try_start
    if (l.op >= 0 || head >= end || gate[head] > other_fin) return;
    const std::int32_t op = ops[head++];
    l.cls = cls[op];
    if constexpr (Contention) l.comm = res[op].comm;
    if constexpr (Release) {
      if (release[op] > now) {  // it holds its stream until its launch
        l.op = op;
        x.waiting = kUnlaunched;
        x.finish_ns = release[op];
        x.key_seq = seq++;
        return;
      }
    }
    begin(l, x, other, ox, op, is_comm_stream);
  };
  auto rerate_lanes = [&] {
    const bool a = runs(c, cs), b = runs(m, ms);
    if constexpr (Contention) {
      rerate_contended(p, a ? &res[c.op] : nullptr, a ? &cs : nullptr, b ? &res[m.op] : nullptr,
                       b ? &ms : nullptr, b ? alone[m.op] : 0, now, seq);
    } else {
      if (a) refactor(cs, b ? slow[c.op][m.cls] : 1.0, now, seq);
      if (b) refactor(ms, a ? slow[m.op][c.cls] : 1.0, now, seq);
    }
  };
  if (fresh_) {  // the run's first starts (begin_run)
    fresh_ = false;
    take(c, cs, m, ms, head0, end0, fin1, false);
    take(m, ms, c, cs, head1, end1, fin0, true);
    rerate_lanes();
  }
  while (!hit) {
    // The next event: the earlier key, ties to the earlier update.
    bool comp;
    if (c.op >= 0) {
      comp = m.op < 0 || cs.finish_ns < ms.finish_ns ||
             (cs.finish_ns == ms.finish_ns && cs.key_seq < ms.key_seq);
    } else if (m.op >= 0) {
      comp = false;
    } else {
      break;
    }
    Lane& l = comp ? c : m;
    OpState& x = comp ? cs : ms;
    {  // rank 0's busy and overlapped time since the last event
      const std::int64_t dt = x.finish_ns - now;
      const bool cb = runs(c, cs), mb = runs(m, ms);
      busy_c += cb ? dt : 0;
      busy_m += mb ? dt : 0;
      busy_both += cb && mb ? dt : 0;
    }
    now = x.finish_ns;
    if (Release && x.waiting == kUnlaunched) {  // launched now: it starts
      // (with the other stream's op when it is launched at the same instant: as advance_impl)
      const bool both = ms.waiting == kUnlaunched && cs.waiting == kUnlaunched && c.op >= 0 &&
                        m.op >= 0 && cs.finish_ns == ms.finish_ns;
      if (comp || both) begin(c, cs, m, ms, c.op, false);
      if (!comp || both) begin(m, ms, c, cs, m.op, true);
    } else if (Contention && x.waiting) {  // a comm kernel got its SMs: its work starts
      x.begin_work(alone[l.op], now);
    } else {
      end_ns[l.op] = now;
      l.op = -1;
      ++done;
      if (comp) {
        ++fin0;
        take(m, ms, c, cs, head1, end1, fin0, true);
        take(c, cs, m, ms, head0, end0, fin1, false);
      } else {
        ++fin1;
        take(c, cs, m, ms, head0, end0, fin1, false);
        take(m, ms, c, cs, head1, end1, fin0, true);
      }
    }
    rerate_lanes();
  }
  auto store = [&](const Lane& l, const OpState& x, std::size_t g) {
    running_[g] = l.op < 0 ? -1 : (Release && x.waiting == kUnlaunched ? held(l.op) : l.op);
    if (l.op >= 0) st_[static_cast<std::size_t>(l.op)] = x;
  };
  store(c, cs, 0);
  store(m, ms, 1);
  stream_head_[0] = head0;
  stream_head_[1] = head1;
  finished_[0] = fin0;
  finished_[1] = fin1;
  seq_ = seq;
  done_ = done;
  now_ = now;
  busy_[0] = busy_c;
  busy_[1] = busy_m;
  busy_[2] = busy_both;
  return hit;
}

const Timeline& Engine::end_run(bool stats) {
  const Schedule& s = *s_;
  const std::size_t n = s.ops.size();
  fill_skipped();
  if (done_ != n) {
    for (std::size_t i = 0; i < n; ++i) {
      if (tl_.start_ns[i] < 0) {
        throw std::logic_error("engine: schedule deadlocks: op " + std::to_string(i) + " (" +
                               op_code_name(s.ops[i].code) +
                               ") never starts; a dependency cycle or a dependency on a later "
                               "op of the same stream");
      }
    }
  }
  tl_.total_ns = now_;
  // Busy and hidden time of rank 0 from its two streams' ops, which are in issue order and
  // so sorted and disjoint per stream.
  const Span comp{stream_ops_.data() + stream_offset_[0], stream_ops_.data() + stream_offset_[1]};
  const Span comm{stream_ops_.data() + stream_offset_[1], stream_ops_.data() + stream_offset_[2]};
  if (stats && pair_) {  // summed by the lanes' loop, event by event
    tl_.compute_busy_ns = busy_[0];
    tl_.comm_busy_ns = busy_[1];
    tl_.hidden_comm_ns = busy_[2];
    tl_.exposed_comm_ns = busy_[1] - busy_[2];
    tl_.overlap_efficiency =
        busy_[1] > 0 ? static_cast<double>(busy_[2]) / static_cast<double>(busy_[1]) : 0.0;
  } else if (stats) {
    overlap_stats(comp, comm, tl_);
  } else {
    tl_.compute_busy_ns = tl_.comm_busy_ns = tl_.hidden_comm_ns = tl_.exposed_comm_ns = 0;
    tl_.overlap_efficiency = 0;
  }
  return tl_;
}

// Steady-state skipping (engine.h, set_skip_steady_state).

// Whether op i is op i - period one layer on: the same stream, and dependencies and successors
// shifted by the period (dependencies earlier in the list, as builders emit); and the same
// costs.
bool Engine::repeats_shape(std::size_t i, std::size_t period) const {
  if (i < period) return false;
  const std::size_t j = i - period;
  const auto p = static_cast<std::int32_t>(period);
  if (op_stream_[i] != op_stream_[j] || op_cls_[i] != op_cls_[j] ||
      deps_init_[i] != deps_init_[j]) {
    return false;
  }
  for (std::int32_t k = 0; k < deps_init_[i]; ++k) {
    const std::int32_t d = dep_flat_[static_cast<std::size_t>(dep_offset_[i] + k)];
    if (d >= static_cast<std::int32_t>(i) ||
        d != dep_flat_[static_cast<std::size_t>(dep_offset_[j] + k)] + p) {
      return false;
    }
  }
  const std::int32_t *a = succ_begin(i), *ae = succ_end(i), *b = succ_begin(j);
  if (ae - a != succ_end(j) - b) return false;
  for (; a != ae; ++a, ++b) {
    if (*a != *b + p) return false;
  }
  return true;
}

bool Engine::repeats_costs(std::size_t i, std::size_t period) const {
  const std::size_t j = i - period;
  if (c_->standalone_ns[i] != c_->standalone_ns[j] || c_->slowdown[i] != c_->slowdown[j]) {
    return false;
  }
  if (!c_->resources.empty()) {
    const OpResources& a = c_->resources[i];
    const OpResources& b = c_->resources[j];
    if (a.waves != b.waves || a.hbm_gbps != b.hbm_gbps || a.comm != b.comm ||
        a.beside_comm != b.beside_comm) {
      return false;
    }
  }
  return true;
}

// At the start of a layer (its first op has just started and the event is settled): the
// state relative to that op and time, compared with the previous layer's; when equal, a jump
// over the layers the graph repeats for.
void Engine::on_layer_start(std::int64_t now) {
  const std::int32_t base = watch_;
  ++next_layer_;
  watch_ = static_cast<std::size_t>(next_layer_) < layer_first_.size()
               ? layer_first_[static_cast<std::size_t>(next_layer_)]
               : -1;
  const auto n = static_cast<std::int32_t>(op_stream_.size());
  const std::size_t streams = stream_offset_.size() - 1;
  std::swap(prev_, cur_);
  Snapshot& c = cur_;
  c.base = base;
  c.t = now;
  c.seq = seq_;
  c.state.clear();
  constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::min();
  auto head_op = [&](std::size_t g) {
    return stream_head_[g] < stream_offset_[g + 1]
               ? stream_ops_[static_cast<std::size_t>(stream_head_[g])]
               : n;
  };
  // The frontier: below lo every op is done; from hi on no op has started or lost a
  // dependency.
  std::int32_t lo = n;
  for (std::size_t g = 0; g < streams; ++g) {
    lo = std::min(lo, running_[g] >= 0 ? running_[g] : head_op(g));
  }
  std::int32_t hi = std::max(lo, succ_max_before_[static_cast<std::size_t>(lo)] + 1);
  for (std::size_t g = 0; g < streams; ++g) {
    hi = std::max({hi, running_[g] + 1, std::min(n, head_op(g) + 1)});
  }
  for (std::int32_t i = lo; i < hi; ++i) {
    if (tl_.end_ns[static_cast<std::size_t>(i)] >= 0) {
      hi = std::max(hi, succ_max_[static_cast<std::size_t>(i)] + 1);
    }
  }
  c.lo = lo;
  c.hi = hi;
  auto rel = [&](std::int64_t x) { return x >= 0 ? x - now : kNone; };
  auto bits = [](double x) { return std::bit_cast<std::int64_t>(x); };
  c.state.push_back(lo - base);
  c.state.push_back(hi - base);
  for (std::size_t g = 0; g < streams; ++g) {
    const std::int32_t h = head_op(g);
    c.state.push_back(running_[g] >= 0 ? running_[g] - base : kNone);
    c.state.push_back(h < n ? h - base : kNone);
  }
  for (std::int32_t i = lo; i < hi; ++i) {
    const auto u = static_cast<std::size_t>(i);
    c.state.push_back(deps_left_[u]);
    c.state.push_back(rel(tl_.start_ns[u]));
    c.state.push_back(rel(tl_.end_ns[u]));
    if (running_[static_cast<std::size_t>(op_stream_[u])] == i) {
      const OpState& x = st_[u];
      c.state.push_back(bits(x.remaining_ns));
      c.state.push_back(bits(x.factor));
      c.state.push_back(x.last_update_ns - now);
      c.state.push_back(x.finish_ns - now);
      c.state.push_back(x.waiting);
    }
  }
  std::vector<std::int32_t> order;  // the ops with a pending event
  for (std::size_t g = 0; g < streams; ++g) {
    if (running_[g] != -1) order.push_back(running_[g] >= 0 ? running_[g] : held(running_[g]));
  }
  std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return st_[static_cast<std::size_t>(a)].key_seq < st_[static_cast<std::size_t>(b)].key_seq;
  });
  for (auto op : order) c.state.push_back(op - base);

  const Snapshot& p = prev_;
  if (p.base < 0 || c.base <= p.base || p.state != c.state) return;
  const std::int32_t period = c.base - p.base;
  const std::int64_t delta = c.t - p.t;
  // How far the graph repeats from the frontier on.
  std::int32_t end = lo;
  const auto per = static_cast<std::size_t>(period);
  for (; end < n; ++end) {
    const auto u = static_cast<std::size_t>(end);
    if (!repeats_costs(u, per) || !repeats_shape(u, per)) break;
  }
  const std::int32_t layers = (end - hi) / period;
  if (layers < 1) return;
  const std::int32_t q = layers * period;
  const std::int64_t d = static_cast<std::int64_t>(layers) * delta;
  // Move the frontier's state q ops on and d later (from the top: the ranges may overlap).
  for (std::int32_t i = hi - 1; i >= lo; --i) {
    const auto u = static_cast<std::size_t>(i);
    const auto v = static_cast<std::size_t>(i + q);
    tl_.start_ns[v] = tl_.start_ns[u] >= 0 ? tl_.start_ns[u] + d : -1;
    tl_.end_ns[v] = tl_.end_ns[u] >= 0 ? tl_.end_ns[u] + d : -1;
    deps_left_[v] = deps_left_[u];
    st_[v] = st_[u];
    st_[v].last_update_ns += d;
    st_[v].finish_ns += d;
  }
  for (std::int32_t i = lo; i < std::min(hi, lo + q); ++i) {
    tl_.start_ns[static_cast<std::size_t>(i)] = tl_.end_ns[static_cast<std::size_t>(i)] = -1;
  }
  for (std::size_t g = 0; g < streams; ++g) {
    const std::int32_t h = head_op(g);
    if (running_[g] >= 0) running_[g] += q;
    if (h < n) {  // the head's place in the stream's (ascending) list
      const auto* first = stream_ops_.data() + stream_offset_[g];
      const auto* last = stream_ops_.data() + stream_offset_[g + 1];
      stream_head_[g] =
          static_cast<std::int32_t>(std::lower_bound(first, last, h + q) - stream_ops_.data());
    }
  }
  done_ += static_cast<std::size_t>(q);
  now_ += d;
  seq_ += (c.seq - p.seq) * static_cast<std::uint32_t>(layers);
  skips_.push_back({lo, lo + q, period, delta});
  skipped_ops_ += static_cast<std::size_t>(q);
  watch_ = -1;  // one jump per run: the rest is the graph's last layers
}

// The skipped ops' times: each is the op one layer before, one layer's time later.
void Engine::fill_skipped() {
  for (const Skip& k : skips_) {
    for (std::int32_t i = k.from; i < k.to; ++i) {
      const auto u = static_cast<std::size_t>(i);
      const auto w = static_cast<std::size_t>(i - k.period);
      tl_.start_ns[u] = tl_.start_ns[w] + k.delta;
      tl_.end_ns[u] = tl_.end_ns[w] + k.delta;
    }
  }
  skips_.clear();
}

void Engine::overlap_stats(Span comp, Span comm, Timeline& tl) {
  std::int64_t cb = 0, mb = 0, hidden = 0;
  const auto& st = tl.start_ns;
  const auto& en = tl.end_ns;
  auto at = [](const std::int32_t* p) { return static_cast<std::size_t>(*p); };
  for (const std::int32_t* p = comp.begin; p != comp.end; ++p) cb += en[at(p)] - st[at(p)];
  const std::int32_t* j = comp.begin;
  for (const std::int32_t* p = comm.begin; p != comm.end; ++p) {
    const std::int64_t a = st[at(p)], b = en[at(p)];
    mb += b - a;
    while (j != comp.end && en[at(j)] <= a) ++j;
    for (const std::int32_t* k = j; k != comp.end && st[at(k)] < b; ++k) {
      hidden += std::min(b, en[at(k)]) - std::max(a, st[at(k)]);
    }
  }
  tl.compute_busy_ns = cb;
  tl.comm_busy_ns = mb;
  tl.hidden_comm_ns = hidden;
  tl.exposed_comm_ns = mb - hidden;
  tl.overlap_efficiency = mb > 0 ? static_cast<double>(hidden) / static_cast<double>(mb) : 0.0;
}

}  // namespace tpo::sim
