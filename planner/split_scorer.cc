// The split search's scorer and lower bound (see split_scorer.h).
#include "planner/split_scorer.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "planner/plan.h"

namespace tpo::planner {

using sim::Op;
using sim::StrategyKind;
using sim::StrategySpec;

SplitScorer::SplitScorer(const sim::Workload& w, const sim::CostModel& cm, StrategyKind kind,
                         std::int64_t k, std::int64_t whole_layers)
    : cm_(cm),
      repeat_(sim::layer_repeat(w.model, w.layers, w.seq + w.context)),
      context_(w.context) {
  if (const sim::ContentionParams* p = cm.contention(); p && p->enabled) contention_ = p;
  sim::Workload t = w;
  // As Evaluator::surrogate_ns: a template of a few layers whose step repeats, or (layers that
  // do not repeat) every layer, and the score its whole run.
  t.layers = repeat_.template_layers;
  if (whole_layers > 0) {
    // As Evaluator::run_graph: the graph of that many layers, run whole.
    t.layers = whole_layers;
    repeat_.template_layers = whole_layers;
    repeat_.steps = 0;
    engine_.set_skip_steady_state(true);
  }
  std::vector<std::int64_t> even;
  for (std::int64_t j = 0; j < k; ++j) even.push_back(w.seq * (j + 1) / k - w.seq * j / k);
  template_ = sim::build_schedule(t, StrategySpec(kind, even));
  const sim::Schedule& s = template_;
  const std::size_t n = s.ops.size();

  // Shape slots, the chunk of each, and the predecessors (dependencies, stream order) of
  // each op.
  std::vector<std::int64_t> tb, te;
  for (std::int64_t j = 0, at = w.context; j < k; ++j) {
    tb.push_back(at);
    te.push_back(at += even[static_cast<std::size_t>(j)]);
  }
  std::map<decltype(sim::op_cost_key(s.ops[0])), std::int32_t> slots;
  std::vector<std::int32_t> slot_chunk;
  std::vector<std::uint8_t> comm(n, 0);
  std::vector<std::int32_t> last_on_stream(
      static_cast<std::size_t>(s.num_ranks) * sim::kStreamsPerRank, -1);
  bool in_order = true;  // the bound's passes need every dependency earlier in the list
  pred_offset_.assign(1, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = s.ops[i];
    const auto [it, added] =
        slots.emplace(sim::op_cost_key(op), static_cast<std::int32_t>(slots.size()));
    if (added) {
      const auto c = static_cast<std::size_t>(op.chunk);
      const bool chunk_op = op.chunk >= 0 && c < tb.size() && op.seq_begin == tb[c] &&
                            op.seq_end == te[c] && op.req_begin == 0 && op.req_end == w.batch;
      slot_op_.push_back(op);
      slot_chunk.push_back(chunk_op ? op.chunk : -1);
    }
    slot_.push_back(it->second);
    comm[i] = op.stream == sim::StreamKind::Comm;
    for (auto d : op.deps) {
      if (d < 0 || static_cast<std::size_t>(d) >= i) in_order = false;
      pred_.push_back(d);
    }
    const auto g = static_cast<std::size_t>(s.global_stream(op));
    if (last_on_stream[g] >= 0) pred_.push_back(last_on_stream[g]);
    last_on_stream[g] = static_cast<std::int32_t>(i);
    pred_offset_.push_back(static_cast<std::int32_t>(pred_.size()));
  }
  const std::size_t nslots = slot_op_.size();
  slot_costs_.resize(nslots);
  d_.resize(n);
  finish_.resize(n);
  from1_.resize(n);

  // What does not change with the split.
  costs_.standalone_ns.resize(n);
  costs_.slowdown.resize(n);
  if (contention_) {
    costs_.contention = *contention_;
    costs_.resources.resize(n);
    // The least HBM an all-reduce draws: its kernel's copy alone. One that also adds and
    // normalizes (--allreduce-fusion add-norm) draws those bytes over its time too, more with
    // each split, so the bound leaves them out (it must not exceed any split's score; over a
    // 1 ns time, as here until 2026-12-05, they made it run compute and comm in series).
    for (const Op& op : slot_op_) {
      if (op.kind != sim::OpKind::AllReduce) continue;
      Op copy = op;
      copy.residual_of = -1;
      comm_res_ = sim::op_resources(copy, 1, *contention_);
    }
  }
  costs_.release_ns = sim::release_times(s, cm.exec(), cm.launch());
  engine_.load(template_);
  chunk_slots_.resize(static_cast<std::size_t>(k));
  chunk_range_slots_.resize(static_cast<std::size_t>(k));
  memo_.resize(static_cast<std::size_t>(k));
  memo_range_.resize(static_cast<std::size_t>(k));
  fixed_costs_.resize(nslots);
  for (std::size_t sl = 0; sl < nslots; ++sl) {
    if (slot_chunk[sl] >= 0) {
      auto& ids = slot_op_[sl].kind == sim::OpKind::Attention ? chunk_range_slots_ : chunk_slots_;
      ids[static_cast<std::size_t>(slot_chunk[sl])].push_back(static_cast<std::int32_t>(sl));
    } else {
      fixed_costs_[sl] = cost_of(sl, slot_op_[sl].seq_begin, slot_op_[sl].seq_end);
      slot_costs_[sl] = &fixed_costs_[sl];
    }
  }
  // Ops of no chunk get their costs now; a chunk's, when its range is first resolved.
  chunk_ops_.resize(static_cast<std::size_t>(k));
  chunk_range_.assign(static_cast<std::size_t>(k), Range{-1, -1});
  chunk_dirty_.assign(static_cast<std::size_t>(k), 0);
  for (std::size_t i = 0; i < n; ++i) {
    const auto sl = static_cast<std::size_t>(slot_[i]);
    if (slot_chunk[sl] >= 0) {
      chunk_ops_[static_cast<std::size_t>(slot_chunk[sl])].push_back(static_cast<std::int32_t>(i));
    } else {
      costs_.standalone_ns[i] = fixed_costs_[sl].ns;
      costs_.slowdown[i] = fixed_costs_[sl].slowdown;
      if (contention_) costs_.resources[i] = fixed_costs_[sl].resources;
    }
  }

  if (whole_layers > 0) return;  // what follows serves the bound only
  work_ = s.num_ranks == 1;
  all_count_.assign(nslots, 0);
  step_count_.assign(nslots, 0);
  comm_all_count_.assign(nslots, 0);
  comm_step_count_.assign(nslots, 0);
  for (std::size_t i = 0; i < n; ++i) {
    ++(comm[i] ? comm_all_count_ : all_count_)[static_cast<std::size_t>(slot_[i])];
  }
  // The step: the first ops of layers 1 and 1 + period, as the surrogate takes them.
  step_ = repeat_.steps > 0;
  from_first_.assign(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    if (s.ops[i].layer == 1 && first1_ < 0) first1_ = static_cast<std::int32_t>(i);
    if (s.ops[i].layer == 1 + repeat_.period && first2_ < 0) {
      first2_ = static_cast<std::int32_t>(i);
    }
  }
  if (!in_order) return;  // no bound
  if (step_) {
    if (first1_ < 0 || first2_ <= first1_) return;  // no bound for an unexpected graph
    const auto f1 = static_cast<std::size_t>(first1_), f2 = static_cast<std::size_t>(first2_);
    from_first_[f1] = 1;
    for (std::size_t i = f1 + 1; i < n; ++i) {
      for (std::int32_t q = pred_offset_[i]; q < pred_offset_[i + 1]; ++q) {
        if (from_first_[static_cast<std::size_t>(pred_[static_cast<std::size_t>(q)])]) {
          from_first_[i] = 1;
        }
      }
    }
    if (!from_first_[f2]) return;
    std::vector<std::uint8_t> before2(n, 0);
    before2[f2] = 1;
    for (std::size_t i = f2 + 1; i-- > 0;) {
      if (!before2[i]) continue;
      for (std::int32_t q = pred_offset_[i]; q < pred_offset_[i + 1]; ++q) {
        before2[static_cast<std::size_t>(pred_[static_cast<std::size_t>(q)])] = 1;
      }
    }
    // The work argument for the step needs both ops on the compute stream.
    const std::int32_t g1 = s.global_stream(s.ops[f1]);
    if (!comm[f2]) {
      const std::int32_t g2 = s.global_stream(s.ops[f2]);
      tail_count_.assign(nslots, 0);
      for (std::size_t i = f2; i < n; ++i) {
        if (s.global_stream(s.ops[i]) == g2) ++tail_count_[static_cast<std::size_t>(slot_[i])];
      }
      tail_ = true;
    }
    if (!comm[f1] && g1 == s.global_stream(s.ops[f2])) {
      for (std::size_t i = f1; i < f2; ++i) {
        const auto sl = static_cast<std::size_t>(slot_[i]);
        if (s.global_stream(s.ops[i]) == g1) ++step_count_[sl];
        if (comm[i] && from_first_[i] && before2[i]) ++comm_step_count_[sl];
      }
    }
  }
  for (std::size_t sl = 0; sl < nslots; ++sl) {
    if (all_count_[sl]) all_slots_.push_back(static_cast<std::int32_t>(sl));
    if (step_count_[sl]) step_slots_.push_back(static_cast<std::int32_t>(sl));
  }
  bound_ = true;
}

SplitScorer::Cost SplitScorer::cost_of(std::size_t slot, std::int64_t seq_begin,
                                       std::int64_t seq_end) const {
  Op op = slot_op_[slot];
  if (op.seq_begin != seq_begin || op.seq_end != seq_end) sim::resegment(op, seq_begin, seq_end);
  // As cost_schedule costs it.
  Cost c;
  c.ns = cm_.standalone_ns(op);
  c.slowdown = {cm_.overlap_slowdown(op, sim::OpKind::Gemm),
                cm_.overlap_slowdown(op, sim::OpKind::Attention),
                cm_.overlap_slowdown(op, sim::OpKind::Elementwise)};
  if (!contention_) {
    c.lowest = std::min({c.slowdown[0], c.slowdown[1], c.slowdown[2]});
    c.f = c.slowdown[2];  // beside an all-reduce (of class 2)
  } else {
    const sim::ContentionParams& p = *contention_;
    c.resources = sim::op_resources(op, c.ns, p);
    if (op.kind != sim::OpKind::AllReduce) {
      // The engine's rates of a compute op and an all-reduce at work beside it.
      const double demand =
          static_cast<double>(c.resources.hbm_gbps) + static_cast<double>(comm_res_.hbm_gbps);
      const double mem = p.hbm_gbps > 0 && demand > p.hbm_gbps ? demand / p.hbm_gbps : 1.0;
      c.f = std::max(c.resources.beside_comm, mem) * (1.0 + p.compute_extra);
      c.g = mem * (1.0 + p.comm_extra);
    }
  }
  return c;
}

std::size_t SplitScorer::Memo::cell(const Range& r) const {
  const std::size_t mask = cells_.size() - 1;
  std::uint64_t h = static_cast<std::uint64_t>(r.begin) * 0x9e3779b97f4a7c15ULL ^
                    static_cast<std::uint64_t>(r.end);
  h *= 0xbf58476d1ce4e5b9ULL;
  for (std::size_t c = static_cast<std::size_t>(h >> 32) & mask;; c = (c + 1) & mask) {
    if (cells_[c].first.begin < 0 || cells_[c].first == r) return c;
  }
}

SplitScorer::Cost* SplitScorer::Memo::find(const Range& r) const {
  if (cells_.empty()) return nullptr;
  const auto& c = cells_[cell(r)];
  return c.first.begin < 0 ? nullptr : c.second;
}

void SplitScorer::Memo::insert(const Range& r, Cost* costs) {
  if (2 * (used_ + 1) > cells_.size()) {  // grow: at most half full
    std::vector<std::pair<Range, Cost*>> old(std::max<std::size_t>(64, 2 * cells_.size()),
                                             {Range{-1, -1}, nullptr});
    old.swap(cells_);
    for (const auto& c : old) {
      if (c.first.begin >= 0) cells_[cell(c.first)] = c;
    }
  }
  cells_[cell(r)] = {r, costs};
  ++used_;
}

SplitScorer::Cost* SplitScorer::pool_take(std::size_t count) {
  if (pool_left_ < count) {
    pool_left_ = std::max<std::size_t>(1024, count);
    pool_.push_back(std::make_unique<Cost[]>(pool_left_));
    pool_next_ = pool_.back().get();
  }
  Cost* out = pool_next_;
  pool_next_ += count;
  pool_left_ -= count;
  return out;
}

void SplitScorer::resolve(const std::vector<std::int64_t>& chunks) {
  bool changed = false;
  std::int64_t b = context_;
  for (std::size_t j = 0; j < chunk_slots_.size(); ++j) {
    const Range r{b, b + chunks[j]};
    b = r.end;
    if (r == chunk_range_[j]) continue;  // as in the last split: its costs are in place
    chunk_range_[j] = r;
    chunk_dirty_[j] = 1;
    changed = true;
    // Attention's cost depends on where its chunk lies (its prefix); every other op's only on
    // the chunk's length.
    for (const bool by_range : {false, true}) {
      const auto& ids = by_range ? chunk_range_slots_[j] : chunk_slots_[j];
      if (ids.empty()) continue;
      auto& memo = by_range ? memo_range_[j] : memo_[j];
      const Range key = by_range ? r : Range{0, r.end - r.begin};
      Cost* costs = memo.find(key);
      if (costs == nullptr) {
        costs = pool_take(ids.size());
        for (std::size_t q = 0; q < ids.size(); ++q) {
          costs[q] = cost_of(static_cast<std::size_t>(ids[q]), r.begin, r.end);
        }
        memo.insert(key, costs);
      }
      for (std::size_t q = 0; q < ids.size(); ++q) {
        slot_costs_[static_cast<std::size_t>(ids[q])] = &costs[q];
      }
    }
  }
  if (!changed) return;
  if (contention_) return;
  scale_ = 1;
  comm_g_.fill(1e300);
  for (std::size_t sl = 0; sl < slot_op_.size(); ++sl) {
    const Cost& c = *slot_costs_[sl];
    scale_ = std::min(scale_, c.lowest);
    if (slot_op_[sl].kind == sim::OpKind::AllReduce) {
      for (std::size_t cls = 0; cls < 3; ++cls)
        comm_g_[cls] = std::min(comm_g_[cls], c.slowdown[cls]);
    }
  }
}

double SplitScorer::score_ns(const std::vector<std::int64_t>& chunks, double best, bool* exact) {
  if (exact) *exact = true;
  resolve(chunks);
  // The engine's costs of the ops of every chunk whose range changed since they were set.
  for (std::size_t j = 0; j < chunk_ops_.size(); ++j) {
    if (!chunk_dirty_[j]) continue;
    chunk_dirty_[j] = 0;
    for (const std::int32_t i : chunk_ops_[j]) {
      const auto op = static_cast<std::size_t>(i);
      const Cost& c = *slot_costs_[static_cast<std::size_t>(slot_[op])];
      costs_.standalone_ns[op] = c.ns;
      costs_.slowdown[op] = c.slowdown;
      if (contention_) costs_.resources[op] = c.resources;
    }
  }
  if (!step_) return static_cast<double>(engine_.run_loaded(costs_, false).total_ns);
  const auto f1 = static_cast<std::size_t>(first1_), f2 = static_cast<std::size_t>(first2_);
  const auto steps = static_cast<double>(repeat_.steps);
  if (tail_ && best < std::numeric_limits<double>::infinity() &&
      engine_.run_until_started(costs_, first2_)) {
    // Both starts are known: the score is at least layer 1 + period's start, the compute chain
    // from there to the end, and the steps.
    const sim::Timeline& part = engine_.timeline();
    const auto s1 = static_cast<double>(part.start_ns[f1]);
    const auto s2 = static_cast<double>(part.start_ns[f2]);
    double tail = 0;
    for (std::size_t sl = 0; sl < slot_op_.size(); ++sl) {
      tail += static_cast<double>(slot_costs_[sl]->ns) * tail_count_[sl];
    }
    tail *= contention_ ? 1.0 : std::min(1.0, scale_);
    const double lower = s2 + std::max(0.0, tail * (1 - 1e-9) - 64.0) + steps * (s2 - s1);
    if (lower >= best) {
      if (exact) *exact = false;
      return lower;
    }
  }
  const sim::Timeline& tl = tail_ && best < std::numeric_limits<double>::infinity()
                                ? engine_.run_on(false)
                                : engine_.run_loaded(costs_, false);
  // As Evaluator::surrogate_ns: each further period adds the step between layers 1 and
  // 1 + period.
  const std::int64_t step = tl.start_ns[f2] - tl.start_ns[f1];
  return static_cast<double>(tl.total_ns) + steps * static_cast<double>(step);
}

double SplitScorer::knapsack(const std::vector<std::int32_t>& slots,
                             const std::vector<std::int32_t>& counts, double w) {
  // Items of one unit cost are merged (ops of a kind mostly share their factors), so there
  // are a few to order however many slots there are.
  items_.clear();
  for (const std::int32_t sl : slots) {
    const Cost& c = *slot_costs_[static_cast<std::size_t>(sl)];
    const double g = contention_ ? c.g
                                 : comm_g_[static_cast<std::size_t>(sim::slowdown_class(
                                       slot_op_[static_cast<std::size_t>(sl)].kind))];
    const double unit = g * (1.0 - 1.0 / c.f);  // extra time per unit of all-reduce work
    if (unit >= 1.0) continue;
    const double capacity =
        c.f * static_cast<double>(c.ns) * counts[static_cast<std::size_t>(sl)] / g;
    auto it = std::find_if(items_.begin(), items_.end(),
                           [unit](const auto& item) { return item.first == unit; });
    if (it == items_.end()) {
      items_.emplace_back(unit, capacity);
    } else {
      it->second += capacity;
    }
  }
  std::sort(items_.begin(), items_.end());
  double extra = 0;
  for (const auto& [unit, capacity] : items_) {
    const double used = std::min(w, capacity);
    extra += unit * used;
    w -= used;
    if (w <= 0) return extra;
  }
  return extra + w;  // the rest with nothing beside it
}

double SplitScorer::bound(const std::vector<std::int64_t>& chunks, double stop) {
  if (!bound_) return 0;
  resolve(chunks);
  // Slack for the engine's rounding of re-rated finish times.
  auto done = [](double x) { return std::max(0.0, x * (1 - 1e-9) - 64.0); };
  const double steps = step_ ? static_cast<double>(repeat_.steps) : 0.0;
  // The compute stream's own chain (a path) over the run and over the step.
  double c_all = 0, c_step = 0, w_all = 0, w_step = 0;
  for (std::size_t sl = 0; sl < slot_op_.size(); ++sl) {
    const auto d = static_cast<double>(slot_costs_[sl]->ns);
    c_all += d * all_count_[sl];
    c_step += d * step_count_[sl];
    w_all += d * comm_all_count_[sl];
    w_step += d * comm_step_count_[sl];
  }
  const double path_scale = contention_ ? 1.0 : std::min(1.0, scale_);
  double total = c_all * path_scale, step = c_step * path_scale;
  if (done(total + steps * step) >= stop) return done(total + steps * step);
  // Work: compute plus the least all-reduce interference.
  if (work_ && (contention_ || scale_ >= 1)) {
    // The step first: it counts repeat_.steps times.
    if (step_) {
      step = std::max(step, c_step + knapsack(step_slots_, step_count_, w_step));
      if (done(total + steps * step) >= stop) return done(total + steps * step);
    }
    total = std::max(total, c_all + knapsack(all_slots_, all_count_, w_all));
    if (done(total + steps * step) >= stop) return done(total + steps * step);
  }
  // Paths: no op starts before its dependencies and its stream predecessor end.
  const std::size_t n = slot_.size();
  double longest = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto d = static_cast<double>(slot_costs_[static_cast<std::size_t>(slot_[i])]->ns);
    d_[i] = d;
    double start = 0;
    for (std::int32_t q = pred_offset_[i]; q < pred_offset_[i + 1]; ++q) {
      start =
          std::max(start, finish_[static_cast<std::size_t>(pred_[static_cast<std::size_t>(q)])]);
    }
    finish_[i] = start + d;
    longest = std::max(longest, finish_[i]);
  }
  total = std::max(total, longest * path_scale);
  if (step_) {
    const auto f1 = static_cast<std::size_t>(first1_);
    from1_[f1] = 0;
    for (std::size_t i = f1 + 1; i < n; ++i) {
      if (!from_first_[i]) continue;
      double at = 0;
      for (std::int32_t q = pred_offset_[i]; q < pred_offset_[i + 1]; ++q) {
        const auto p = static_cast<std::size_t>(pred_[static_cast<std::size_t>(q)]);
        if (from_first_[p]) at = std::max(at, from1_[p] + d_[p]);
      }
      from1_[i] = at;
    }
    step = std::max(step, from1_[static_cast<std::size_t>(first2_)] * path_scale);
  }
  return done(total + steps * step);
}

FullSplitTimer::FullSplitTimer(const sim::Workload& w, const sim::CostModel& cm, StrategyKind kind,
                               std::int64_t k)
    : w_(w), cm_(cm), kind_(kind), k_(k) {}

FullSplitTimer::~FullSplitTimer() = default;

SplitScorer& FullSplitTimer::at(std::int64_t layers) {
  for (auto& [n, s] : scorers_) {
    if (n == layers) return *s;
  }
  scorers_.emplace_back(layers, std::make_unique<SplitScorer>(w_, cm_, kind_, k_, layers));
  return *scorers_.back().second;
}

std::int64_t FullSplitTimer::total_ns(const std::vector<std::int64_t>& chunks) {
  bool shortened = false;
  const std::int64_t t = time_from_runs(
      w_, StrategySpec(kind_, chunks), cm_.exec(),
      [&](std::int64_t layers) {
        SplitScorer& s = at(layers);
        LayerRun r;
        r.total_ns = static_cast<std::int64_t>(s.score_ns(chunks));
        r.skipped = s.ops_skipped();
        r.ops = s.ops();
        return r;
      },
      nullptr, &shortened);
  shortened_ += shortened;
  return t;
}

}  // namespace tpo::planner
