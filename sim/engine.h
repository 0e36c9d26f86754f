// The discrete-event engine: integer nanoseconds, deterministic (ties broken by insertion
// order). Each rank has a compute and a comm stream; an op starts when it heads its stream
// and its dependencies are done. While ops of different streams of one rank overlap, each
// runs at 1/slowdown of its standalone rate; whenever the set of running ops changes, the
// remaining work is carried over and finish times are recomputed (a fluid model). The
// slowdowns are the cost model's fixed factors, or — with the contention model (OpCosts::
// resources, sim/contention.h) — follow from SMs and HBM bandwidth shared by rule, and a comm
// kernel that arrives while a kernel holds every SM first waits for that kernel's wave to end.
// With eager or graph execution (OpCosts::release_ns) an op also waits for its launch; two
// ops of one rank whose launches coincide start in one event.
// Two loops give the same timelines bit for bit (a test compares them on random graphs): one
// for a graph of one rank, as the builders emit it, with its state in locals; and a general
// one for several ranks and for steady-state skipping.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "sim/cost_model.h"
#include "sim/schedule.h"

namespace tpo::sim {

struct Timeline {
  std::vector<std::int64_t> start_ns;
  std::vector<std::int64_t> end_ns;
  std::int64_t total_ns = 0;
  // Of rank 0 (builders emit one representative rank):
  std::int64_t compute_busy_ns = 0;
  std::int64_t comm_busy_ns = 0;
  std::int64_t hidden_comm_ns = 0;   // comm time during which the compute stream was busy
  std::int64_t exposed_comm_ns = 0;  // comm time with the compute stream idle
  double overlap_efficiency = 0;     // hidden / comm busy (0 when there is no comm)
};

class Engine {
 public:
  // Runs the schedule; keeps its buffers for the next run (the planner runs many graphs).
  // Throws std::logic_error if the graph deadlocks (a dependency cycle or a dependency on a
  // later op of the same stream), naming an op that never started.
  const Timeline& run(const Schedule& s, const OpCosts& costs);
  // The same in two steps, for many runs of one graph with different costs (the split
  // search): load() checks the graph and builds its lists once; run_loaded() runs the graph
  // last loaded, which must still be alive and unchanged. Without `stats` the timeline's
  // busy, hidden and exposed times are left at zero (only starts, ends and the total).
  void load(const Schedule& s);
  const Timeline& run_loaded(const OpCosts& costs, bool stats = true);
  // The same run in two parts, for a caller that may stop early: run_until_started() runs
  // until `op` has started (true) or the run ends (false); timeline() then holds the starts
  // and ends so far, and run_on() runs on to the end.
  bool run_until_started(const OpCosts& costs, std::int32_t op);
  const Timeline& run_on(bool stats = true);
  const Timeline& timeline() const { return tl_; }
  // Finish-time updates in the last run (one per op plus one per re-rating).
  std::uint64_t events_pushed() const { return seq_; }

  // Steady-state skipping, for runs of many identical layers (off by default). At the start of
  // each layer the engine compares its whole state — what runs, with how much work left at
  // which rate, the pending events in their order, every started or partly released op of
  // the frontier, relative to the layer's first op and its start time — with the state at
  // the previous layer's start. Where the two are equal and the graph and its costs repeat op
  // for op one layer further on (same streams, costs, dependencies and successors, shifted by
  // the layer's op count), the run from there is the previous layer's run shifted in time:
  // the engine moves its state as many layers ahead as the repetition lasts and fills in
  // the skipped ops' times from the layer before. The timeline, the statistics and
  // events_pushed() are exactly those of the full run (a test compares them). Applies to
  // full runs (run, run_loaded) without launch times (queued execution).
  // Set before load() (run() loads): loading prepares what the comparison needs.
  void set_skip_steady_state(bool on) { skip_ = on; }
  // Ops whose times the last run filled in instead of simulating.
  std::size_t ops_skipped() const { return skipped_ops_; }

 private:
  void reset(const OpCosts& costs);  // checks the costs, fresh state for a run
  void begin_run(const OpCosts& costs);
  bool advance(std::int32_t stop);  // runs until op `stop` started (true) or the end (false)
  // The event loop and its steps; One: the graph has one rank (two streams), as the builders
  // emit it, so the pending events are two and the rank to re-rate is rank 0.
  template <bool One>
  bool advance_impl(std::int32_t stop);
  // The loop for a one-rank graph without steady-state skipping (pair_): an op starts when it
  // heads its stream and the other stream has finished gate_ of its ops, so no successor
  // lists or dependency counters are kept, and the two streams' ops and fluid state are
  // locals. One instance per cost kind: contention model or fixed factors, launch times or
  // queued execution.
  template <bool Contention, bool Release>
  bool advance_lanes(std::int32_t stop);
  const Timeline& end_run(bool stats);
  template <bool One>
  void settle(std::int64_t now);  // re-rates the ranks whose running set changed
  template <bool One>
  void mark_dirty(std::int32_t rank);
  template <bool One>
  void start(std::int32_t op, std::int64_t now);
  template <bool One>
  void try_start(std::int32_t stream, std::int64_t now);
  void rerate(std::int32_t rank, std::int64_t now);
  void rerate_contention(std::int32_t a, std::int32_t b, std::int64_t now);
  void wait_for_sms(std::int32_t comm, std::int32_t compute, std::int64_t now);
  void set_factor(std::int32_t op, double f, std::int64_t now);
  // The rules on an op's state, for both loops (see the definitions).
  struct OpState;
  static void refactor(OpState& x, double f, std::int64_t now, std::uint32_t& seq);
  static double sm_wait(const ContentionParams& p, const OpResources& r, const OpState& a,
                        std::int64_t alone_ns, std::int64_t started, std::int64_t now);
  static void rerate_contended(const ContentionParams& p, const OpResources* ra, OpState* a,
                               const OpResources* rb, OpState* b, std::int64_t alone_b,
                               std::int64_t now, std::uint32_t& seq);
  void push(std::int64_t time_ns, std::int32_t op);  // schedules or re-schedules op's finish
  template <bool One>
  std::int32_t pop() const;  // the op whose event comes first (-1: none)
  bool before(std::int32_t a, std::int32_t b) const;
  void on_layer_start(std::int64_t now);  // steady-state skipping: compare, maybe jump
  // Op i is op i - period one layer on: the same stream and place in the graph, shifted
  // (`shape`), and the same costs (`costs`).
  bool repeats_shape(std::size_t i, std::size_t period) const;
  bool repeats_costs(std::size_t i, std::size_t period) const;
  void fill_skipped();
  struct Span {
    const std::int32_t* begin;
    const std::int32_t* end;
  };
  static void overlap_stats(Span compute, Span comm, Timeline& tl);

  // The fluid state of one op (40 bytes). A run writes each field before it reads it:
  // waiting when the op leaves its stream's queue (try_start), the work, rate and update time
  // when it starts (start), the key when its event is pushed (push); so nothing of it is
  // reset between runs. (The one-rank loop keeps the running ops' states in locals and
  // copies them back whole when it stops, fields not yet written included.)
  struct OpState {
    double remaining_ns;  // standalone-time work left
    double factor;        // current slowdown (0 before the op starts)
    std::int64_t last_update_ns;
    std::int64_t finish_ns;  // the time of its pending event
    std::uint32_t key_seq;   // tie-break: sequence number of the last key update
    // Contention: a comm kernel waiting for SMs (its "work" is the wait), or kUnlaunched:
    // holding its stream until its launch. Not a char type, as the loop's other stores are
    // not: a store through a char may alias anything, and the compiler would then reload
    // every member's pointers after it.
    std::int32_t waiting;
    // Its work (its standalone time) starts now: a new op, or a comm kernel that got its SMs.
    void begin_work(std::int64_t alone_ns, std::int64_t now) {
      remaining_ns = static_cast<double>(alone_ns);
      factor = 0;  // forces a re-rate to schedule the finish
      last_update_ns = now;
      waiting = 0;
    }
  };
  static constexpr std::int32_t kUnlaunched = 2;
  // running_[stream]: the op running on it (>= 0), -1 for none, or held(op) (< -1) while op
  // waits for its launch — negative, so every "is an op running" test skips it for free.
  static std::int32_t held(std::int32_t op) { return -2 - op; }
  static std::int32_t rank_of(std::int32_t stream) {  // stream >= 0
    return static_cast<std::int32_t>(static_cast<std::uint32_t>(stream) / kStreamsPerRank);
  }

  const Schedule* s_ = nullptr;  // the graph loaded
  const OpCosts* c_ = nullptr;
  // The run's costs, as raw pointers (null: that vector is empty).
  const std::int64_t* alone_ = nullptr;
  const std::array<double, 3>* slow_ = nullptr;
  const OpResources* res_ = nullptr;
  const std::int64_t* release_ = nullptr;
  Timeline tl_;
  std::vector<OpState> st_;  // per op
  // Per op, as loaded: its global stream, slowdown class and dependency count (the last for
  // the general loop only: not filled for pair_); and its dependencies not yet finished in
  // this run (general loop).
  std::vector<std::int32_t> op_stream_, deps_init_, deps_left_;
  std::vector<std::uint8_t> op_cls_;
  std::vector<std::int32_t> dep_flat_;  // every op's dependencies in op order (skipping only)
  std::uint32_t seq_ = 0;
  std::size_t done_ = 0;  // ops finished in this run
  std::int64_t now_ = 0;  // the time of the last event
  // Successors, in op order: up to kSuccInline per op inline (nearly every op has one or
  // two), or — when some op has more — the CSR lists succ_offset_/succ_ for every op.
  static constexpr int kSuccInline = 3;
  struct SuccList {
    std::int32_t n;
    std::int32_t s[kSuccInline];
  };
  std::vector<SuccList> succ_small_;
  bool succ_csr_ = false;
  std::vector<std::int32_t> succ_offset_, succ_, fill_;
  const std::int32_t* succ_begin(std::size_t i) const {
    return succ_csr_ ? succ_.data() + succ_offset_[i] : succ_small_[i].s;
  }
  const std::int32_t* succ_end(std::size_t i) const {
    return succ_csr_ ? succ_.data() + succ_offset_[i + 1] : succ_small_[i].s + succ_small_[i].n;
  }
  std::vector<std::int32_t> stream_offset_, stream_ops_, stream_head_;
  // One-rank graphs (pair_): the streams' ops run in order, so an op's dependencies are done
  // once its own stream reaches it and the other stream has finished as many ops as its
  // gate: one more than the place of its last dependency on the other stream (kNever: a
  // dependency on itself or a later op of its own stream); gate_ per op while loading,
  // gate_place_ per place in stream_ops_.
  bool pair_ = false;
  bool fresh_ = false;  // pair_: the run's first ops are still to start
  std::vector<std::int32_t> gate_, gate_place_;
  std::int32_t finished_[kStreamsPerRank] = {};  // ops finished per stream (pair_)
  // pair_: time with an op running on the compute stream, on the comm stream, on both so far
  // (an op held for its launch does not run; a comm kernel waiting for SMs does).
  std::int64_t busy_[3] = {};
  static constexpr std::int32_t kNever = std::numeric_limits<std::int32_t>::max();
  std::vector<std::int32_t> running_;     // per stream: see held(); also the pending events
  std::vector<std::int32_t> rank_dirty_;  // not char: see OpState::waiting
  std::vector<std::int32_t> dirty_ranks_;

  // Steady-state skipping (see set_skip_steady_state).
  bool skip_ = false;
  std::vector<std::int32_t> layer_first_;      // per layer: its first op (-1: none)
  std::vector<std::int32_t> dep_offset_;       // per op: where its dependencies start in dep_flat_
  std::vector<std::int32_t> succ_max_;         // per op: its largest successor (-1: none)
  std::vector<std::int32_t> succ_max_before_;  // per op i: the largest successor of ops < i
  std::int32_t watch_ = -1;      // the op whose start triggers the next comparison (-1: off)
  std::int32_t next_layer_ = 0;  // the layer watch_ begins
  struct Snapshot {
    std::int32_t base = -1;  // the layer's first op
    std::int64_t t = 0;      // its start
    std::uint32_t seq = 0;
    std::int32_t lo = 0, hi = 0;      // the frontier: every op below lo is done, above hi untouched
    std::vector<std::int64_t> state;  // relative to base and t, bit for bit
  };
  Snapshot prev_, cur_;
  struct Skip {
    std::int32_t from, to, period;
    std::int64_t delta;
  };
  std::vector<Skip> skips_;
  std::size_t skipped_ops_ = 0;
};

}  // namespace tpo::sim
