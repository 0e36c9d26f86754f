// Scores ISO splits for the split search without rebuilding a graph per split, and bounds a
// split's score from below without simulating it, so that the search skips splits that
// cannot beat the best one in hand. Neither changes the answer: the score is the same number
// as Evaluator::surrogate_ns (a test compares them), and a split is skipped only when its
// bound proves its score is no better than a score already found.
//
// The graph's topology does not depend on where the chunk boundaries lie: one template graph
// (the surrogate's 3 layers, or its template for layers that repeat with a longer period,
// sim::layer_repeat) is built per (strategy, chunk count), and a split only changes
// its ops' costs. Ops of one shape (the same op of every layer) share a slot; each slot's
// costs are memoised by the position range of its chunk (sim::resegment gives the op there).
//
// The bound is the larger of two arguments, each valid for every engine rule (fixed factors,
// the contention model, eager and graph launches — all of which only lengthen ops or delay
// their starts):
//  - paths: an op starts no earlier than the longest chain of standalone durations before it,
//    following dependencies and stream order. This bounds the template's total, and the step
//    between the starts of layers 1 and 1 + period (the longest chain from the one op to the
//    other).
//  - work: on the one rank a builder emits, the compute stream runs every compute op of an
//    interval one after another, and while an all-reduce does its work beside compute op i
//    the engine runs op i at 1/F_i of its rate and the all-reduce at 1/G_i (both >= 1; with
//    the contention model F_i and G_i follow from op i's resources alone, as every all-reduce
//    occupies the same; with fixed factors they are the profile's or hardware file's). An
//    interval holding compute ops d_i and all-reduce work W is at least sum d_i plus the
//    least extra time in which the all-reduces can get W done: a fractional knapsack — each
//    unit of all-reduce work done beside op i costs G_i (1 - 1/F_i), done alone it costs 1,
//    and op i can host at most F_i d_i / G_i of it. Applied to the template's whole run, and to
//    the step: its compute is the ops between the two starts on the compute stream, its
//    all-reduces those that follow the first op and precede the second.
// Where a factor below 1 is possible (a measured profile's ratio under 1), durations are
// scaled by the smallest factor and the work argument is dropped.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "sim/cost_model.h"
#include "sim/engine.h"
#include "sim/strategy.h"
#include "sim/workload.h"

namespace tpo::planner {

class SplitScorer {
 public:
  // For `kind` cut into `k` chunks on `w` (w.seq >= k); `cm` must outlive the scorer.
  // `whole_layers` > 0: the graph of that many layers instead of the surrogate's template, and
  // the score its whole run (with the engine's steady-state skipping; no bound): what
  // Evaluator::run_graph gives for that many layers (FullSplitTimer's parts).
  SplitScorer(const sim::Workload& w, const sim::CostModel& cm, sim::StrategyKind kind,
              std::int64_t k, std::int64_t whole_layers = 0);
  // Evaluator::surrogate_ns of the split (chunk token counts). Given a finite `best`, the
  // run may stop as soon as layer 1 + period has started, if the steps so far already show the
  // score cannot be below `best`: it then returns a lower bound >= best and sets *exact false.
  double score_ns(const std::vector<std::int64_t>& chunks,
                  double best = std::numeric_limits<double>::infinity(), bool* exact = nullptr);
  // A lower bound on score_ns (0 where no bound applies).
  double lower_bound_ns(const std::vector<std::int64_t>& chunks) {
    return bound(chunks, std::numeric_limits<double>::infinity());
  }
  // Whether the split's score can be below `best` (false: the bound proves it cannot).
  // Where the bound rarely settles a split (long runs of splits whose bound falls short,
  // as under heavy contention), it is tried only on every 8th split, which leaves the answer
  // unchanged and saves its cost.
  bool can_beat(const std::vector<std::int64_t>& chunks, double best) {
    if (settled_ < 0.05 && ++skipped_ % 8 != 0) return true;
    const bool beat = bound(chunks, best) < best;
    settled_ = 0.9 * settled_ + (beat ? 0.0 : 0.1);
    return beat;
  }
  bool bound_enabled() const { return bound_; }
  // The template's ops, and those the engine skipped in the last whole run.
  std::size_t ops() const { return template_.ops.size(); }
  std::size_t ops_skipped() const { return engine_.ops_skipped(); }

 private:
  struct Cost {
    std::int64_t ns = 0;
    std::array<double, 3> slowdown{1, 1, 1};  // fixed factors beside a GEMM, attention, other
    sim::OpResources resources;               // contention model
    double f = 1, g = 1;                      // compute op: F_i and G_i beside an all-reduce's work
    double lowest = 1;                        // the smallest fixed factor the op can be given
  };
  struct Range {
    std::int64_t begin, end;
    bool operator==(const Range&) const = default;
  };
  // Costs memoised by range: an open-addressing table (linear probing, at most half full)
  // of ranges and where their costs lie in the scorer's pool, so that a miss allocates
  // nothing beyond amortised growth (a search misses once per split).
  class Memo {
   public:
    // The costs stored for `r`; else null, after which insert(r, ...) may be called.
    Cost* find(const Range& r) const;
    void insert(const Range& r, Cost* costs);

   private:
    std::size_t cell(const Range& r) const;       // r's cell, or the empty one where it would go
    std::vector<std::pair<Range, Cost*>> cells_;  // begin -1: empty
    std::size_t used_ = 0;
  };
  // Room for `count` costs that stays put (the memos point into it).
  Cost* pool_take(std::size_t count);
  // A lower bound on the score, cheapest arguments first; it stops once one reaches `stop`.
  double bound(const std::vector<std::int64_t>& chunks, double stop);
  Cost cost_of(std::size_t slot, std::int64_t seq_begin, std::int64_t seq_end) const;
  void resolve(const std::vector<std::int64_t>& chunks);  // slot_costs_ for this split
  // The least extra time for all-reduce work `w` beside compute with the slots' op counts.
  // (`slots` lists the slots with a nonzero count.)
  double knapsack(const std::vector<std::int32_t>& slots, const std::vector<std::int32_t>& counts,
                  double w);

  const sim::CostModel& cm_;
  const sim::ContentionParams* contention_ = nullptr;  // null: fixed factors
  sim::LayerRepeat repeat_;  // the template's layers and how often its step repeats
  std::int64_t context_ = 0;
  sim::Schedule template_;
  sim::OpCosts costs_;         // the template's, rewritten per split
  sim::Engine engine_;         // the template loaded
  bool bound_ = false;         // the bound applies to this graph
  bool step_ = false;          // repeat_.steps > 0: the score has a step term
  bool work_ = false;          // one rank: the work argument applies
  sim::OpResources comm_res_;  // what an all-reduce occupies (contention model)
  // Per template op: its shape slot.
  std::vector<std::int32_t> slot_;
  std::vector<std::uint8_t> from_first_;          // per op: reached from layer 1's first op
  std::vector<std::int32_t> pred_offset_, pred_;  // dependencies and stream predecessor
  std::int32_t first1_ = -1, first2_ = -1;        // first ops of layers 1 and 1 + period
  // Per slot: a template op of that shape, and how many of its ops are compute and comm ops
  // in the whole run and in the step.
  std::vector<sim::Op> slot_op_;
  std::vector<std::int32_t> all_count_, step_count_, comm_all_count_, comm_step_count_;
  std::vector<std::int32_t> all_slots_, step_slots_;  // the slots of nonzero count
  // Compute ops from layer 1 + period's first op to the end of its stream (a chain after its
  // start).
  std::vector<std::int32_t> tail_count_;
  bool tail_ = false;  // the chain applies (the op is on the compute stream)
  // Per chunk: its slots, and their costs memoised by the chunk's position range. Slots of
  // no chunk (embedding, LM head) are costed once.
  // Attention's slots are memoised by the range, the others by the length alone.
  std::vector<std::vector<std::int32_t>> chunk_slots_, chunk_range_slots_;
  std::vector<Memo> memo_, memo_range_;
  std::vector<std::unique_ptr<Cost[]>> pool_;  // blocks
  Cost* pool_next_ = nullptr;                  // the last block's first free cost
  std::size_t pool_left_ = 0;                  // and how many are free
  // Per chunk: its ops, the range its slot costs were resolved at, and whether costs_ still
  // holds its ops' costs at an older range.
  std::vector<std::vector<std::int32_t>> chunk_ops_;
  std::vector<Range> chunk_range_;
  std::vector<std::uint8_t> chunk_dirty_;
  std::vector<Cost> fixed_costs_;  // per slot, for the slots of no chunk
  // Scratch per split.
  std::vector<const Cost*> slot_costs_;
  std::vector<double> d_, finish_, from1_;
  std::vector<std::pair<double, double>> items_;  // knapsack: (cost per unit, capacity)
  double settled_ = 1;                            // running share of splits the bound settled
  std::uint32_t skipped_ = 0;                     // splits since the bound was last tried
  double scale_ = 1;                              // fixed factors: the smallest of the split
  std::array<double, 3> comm_g_{1, 1, 1};         // fixed factors: an all-reduce's least
};

// Times ISO splits in full: exactly Evaluator::full's total (a test compares them), from
// template graphs built once per (strategy, chunk count) and re-costed per split (SplitScorer's
// whole runs) instead of a graph built and costed per split: the 8- and 9-layer graphs of
// Evaluator's shortcut for a deep model (time_from_runs), else the whole model's. For
// search_split_in_full, which times every split it visits this way.
class FullSplitTimer {
 public:
  FullSplitTimer(const sim::Workload& w, const sim::CostModel& cm, sim::StrategyKind kind,
                 std::int64_t k);
  ~FullSplitTimer();
  std::int64_t total_ns(const std::vector<std::int64_t>& chunks);
  // How many total_ns calls took the shortcut.
  std::int64_t shortened() const { return shortened_; }

 private:
  SplitScorer& at(std::int64_t layers);  // built on first use
  const sim::Workload& w_;
  const sim::CostModel& cm_;
  sim::StrategyKind kind_;
  std::int64_t k_;
  std::vector<std::pair<std::int64_t, std::unique_ptr<SplitScorer>>> scorers_;
  std::int64_t shortened_ = 0;
};

}  // namespace tpo::planner
