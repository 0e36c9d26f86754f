// The planner: for each workload point (prompt length, batch), search the strategies and
// ISO chunk splits, keep every candidate's predicted time, and pick the best one that the
// user allows — or "don't overlap" when nothing beats `none` by the threshold.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "sim/cost_model.h"
#include "sim/simulate.h"
#include "sim/strategy.h"
#include "sim/workload.h"

namespace tpo::planner {

struct PlanOptions {
  // Model, hardware, TP, phase, batch, context, layers and profile; its seq is not used (the
  // points are `seq` below), nor its embed_head.
  sim::WorkloadOptions workload;
  std::string seq = "512:16384";   // a list "1024,4096" or a range "A:B" (x2) / "A:B:F" (xF)
  std::string strategies = "all";  // comma list of strategy names, or "all"
  std::int64_t max_chunks = 3;
  std::int64_t align = 64;
  double threshold = 0.02;  // overlap must beat none by more than this fraction
  // A prompt cut in k > 2 chunks must beat the best cut in k - 1 by more than this fraction
  // (sim::chunk_pays); 0: the fastest cut whatever its chunks.
  double chunk_gain = 0.005;
  bool allow_arch_change = false;
  std::int64_t threads = 0;  // 0: all cores
  // Comm SM budgets to search jointly with the strategies ("8,16,32"); empty: the workload's
  // (or the hardware's default) only. Only the contention model prices a budget.
  std::string comm_ctas;
  std::string json_path, csv_path, svg_path;
  bool quiet = false;  // no progress on stderr
  // Skip splits whose lower bound shows they cannot win (split_scorer.h): the same plans,
  // faster; off only to check that claim.
  bool prune = true;
  // The descent's long boundary lines coarse to fine (Evaluator::coarse_lines): off only to
  // compare with every position tried.
  bool coarse_lines = true;
  // With a profile, a candidate whose GEMMs run at rows the profile did not measure is ranked
  // as if this fraction slower (its predicted time is not changed): < 0, the profile's own
  // interpolation error (CostModel::gemm_interpolation_error, --interpolation-risk auto);
  // 0: ranked by prediction alone.
  double interpolation_risk = -1;
};

// The workload options of one planned point of length `seq` (prefill: prompt tokens;
// decode: context tokens), every field explicit: what the plan file records for the point.
sim::WorkloadOptions point_workload(const PlanOptions& o, std::int64_t seq);

struct Candidate {
  sim::StrategySpec spec;
  std::string detail;  // "2253,1843" / "last 40 layers" / "4 pieces"
  std::int64_t total_ns = 0;
  std::int64_t exposed_comm_ns = 0;
  double speedup = 0;                 // none / this
  bool allowed = true;                // false: changes the model and --allow-arch-change is off
  std::int64_t comm_ctas = 0;         // the comm SM budget it was timed with (0: the default)
  bool unmeasured_gemm_rows = false;  // some GEMM at rows the profile did not measure
  std::string strategy() const { return sim::strategy_name(spec.kind); }
  bool preserves_function() const { return sim::preserves_function(spec.kind); }
};

struct PlanPoint {
  std::int64_t seq = 0;
  std::int64_t batch = 1;
  sim::WorkloadOptions workload;                     // the point's workload, every field explicit
  std::vector<Candidate> candidates;                 // candidates[0] is none
  std::size_t best = 0;                              // index into candidates; 0 means don't overlap
  std::int64_t simulations = 0;                      // graphs timed for this point
  std::int64_t best_at_default_budget_ns = 0;        // with a budget search: the best there
  std::map<std::string, std::int64_t> cost_sources;  // of the best candidate's ops
  // The best candidate's GEMM row counts that the profile interpolated (between its measured
  // rows), ascending; empty with the analytical model.
  std::vector<std::int64_t> gemm_rows_interpolated;
  // The ranking's charge on candidates with unmeasured GEMM rows (PlanOptions::
  // interpolation_risk resolved; 0: off or nothing interpolated), and the candidate ranked
  // by prediction alone (== best unless the charge changed the pick).
  double interpolation_risk = 0;
  std::size_t best_by_prediction = 0;
  std::int64_t none_ns() const { return candidates.empty() ? 0 : candidates.front().total_ns; }
};

struct Plan {
  PlanOptions options;
  sim::Workload workload;  // of the first point (seq and context differ per point)
  std::string cost_model;
  std::string overlap_model;         // sim::CostModel::overlap_model of the plan's cost model
  std::string allreduce_text;        // sim::CostModel::allreduce_text of the first point
  nlohmann::ordered_json execution;  // the execution mode and its launch costs
  std::vector<PlanPoint> points;
};

// Parses --seq: "4096", "1024,2048", "512:32768" (powers of two), "512:32768:1.5" (factor,
// rounded to the alignment grid), sorted shortest first. Throws InputError naming --seq.
std::vector<std::int64_t> parse_seq_list(const std::string& text, std::int64_t align);
std::vector<sim::StrategyKind> parse_strategy_list(const std::string& text);
// A comma list of distinct integers in [1, hi] ("1,4,16"); throws InputError naming `option`
// and saying the value is not `what`.
std::vector<std::int64_t> parse_int_list(const std::string& text, const char* option,
                                         std::int64_t hi, const char* what);
// Parses --comm-ctas ("8,16,32"); throws InputError naming --comm-ctas.
std::vector<std::int64_t> parse_budget_list(const std::string& text);

// Validates everything (configs, ranges, output paths) before any work.
Plan make_plan(const PlanOptions& o);
// Runs the search for every point, on o.threads threads; the result does not depend on the
// thread count. `cm` overrides the analytical cost model (tests, profiles).
void run_plan(Plan& plan, const sim::CostModel* cm = nullptr);

class SplitScorer;

// One run of a graph of some number of layers (Evaluator::time_ns's parts): its total and
// exposed communication, the ops the engine skipped in a steady state, and the graph's ops.
struct LayerRun {
  std::int64_t total_ns = 0;
  std::int64_t exposed_ns = 0;
  std::size_t skipped = 0;
  std::size_t ops = 0;
};
// The time of `spec` on `w` from runs of its graph at some layer counts: `run(layers)`. A
// graph of L layers is its builder's graph of K layers with L - K more copies of a middle
// layer (same ops, costs and dependencies, shifted; a test checks this for every strategy).
// The engine's steady-state skipping runs the K-layer graph as: layers until the state at a
// layer's start repeats the previous layer's (layer m, depending only on the graph before it,
// which all lengths share), then a jump over the repeated layers, then the graph's last
// layers, shifted. The L-layer run is the same with L - K more layers jumped, each adding
// the same time, the same busy and the same hidden communication. So where the K- and
// (K+1)-layer runs both jumped, and the second by exactly one layer's ops more, the L-layer
// numbers are the K-layer ones plus L - K times their difference (*shortened set true);
// otherwise (and for a ladder on only the last layers) the full graph is run.
std::int64_t time_from_runs(const sim::Workload& w, const sim::StrategySpec& spec,
                            sim::ExecMode exec, const std::function<LayerRun(std::int64_t)>& run,
                            std::int64_t* exposed, bool* shortened);

// Times candidates. ISO split search scores a split by a 3-layer timeline extrapolated to
// all layers (layers are identical, so the pipeline repeats: each extra layer adds the step
// between the starts of layers 1 and 2; sliding-window and full layers in a pattern repeat by
// the pattern's period instead, sim::layer_repeat); the best split per chunk count is then
// timed in full.
class Evaluator {
 public:
  Evaluator(const sim::Workload& w, const sim::CostModel& cm);
  // Timed in full. A deep model is timed from two shorter graphs of the same workload when
  // the engine shows both in a steady state (see time_ns): exactly the full run's numbers.
  Candidate full(const sim::StrategySpec& spec);
  // The same without that shortcut (for tests), and how many full() calls took it.
  Candidate full_unshortened(const sim::StrategySpec& spec);
  std::int64_t shortened() const { return shortened_; }
  // Counts a simulation made outside the evaluator (a FullSplitTimer's), as full() counts.
  void count_simulation() { ++simulations_; }
  double surrogate_ns(const sim::StrategySpec& spec);
  std::int64_t simulations() const { return simulations_; }
  const sim::Workload& workload() const { return w_; }
  const sim::CostModel& cost_model() const { return cm_; }
  // The split search skips splits whose lower bound (split_scorer.h) shows they cannot win;
  // off, it simulates every split it visits (the same answer, for tests and benchmarks).
  bool pruning() const { return pruning_; }
  void set_pruning(bool on) { pruning_ = on; }
  // The descent tries a long line of boundary positions coarse to fine (split_search.cc);
  // off, every position (slower at long prompts; the same below 16k tokens at align 64).
  bool coarse_lines() const { return coarse_lines_; }
  void set_coarse_lines(bool on) { coarse_lines_ = on; }
  // surrogate_ns of a split of the scorer's strategy and chunk count (split_scorer.h).
  // With a finite `best` the run may stop early, returning a lower bound >= best (see
  // SplitScorer::score_ns).
  // Ranked as 1 + risk times it when a chunk's GEMM rows were not measured (see
  // PlanOptions::interpolation_risk); 0 (the default) ranks by prediction alone.
  double split_score_ns(SplitScorer& scorer, const std::vector<std::int64_t>& chunks,
                        double best = std::numeric_limits<double>::infinity(),
                        bool* exact = nullptr);
  void set_interpolation_risk(double r) { risk_ = r; }
  double interpolation_risk() const { return risk_; }
  // 1 + the risk when some chunk's GEMMs (chunk tokens x batch rows) were not measured, else 1.
  double risk_factor(const std::vector<std::int64_t>& chunks) const;

 private:
  std::int64_t time_ns(const sim::Workload& w, const sim::StrategySpec& spec,
                       std::int64_t* exposed);
  // One run of the graph; `skipped`: the ops the engine skipped, `ops`: the graph's.
  std::int64_t run_graph(const sim::Workload& w, const sim::StrategySpec& spec,
                         std::int64_t* exposed, std::size_t* skipped, std::size_t* ops);
  sim::Workload w_;
  const sim::CostModel& cm_;
  sim::Engine engine_;
  std::int64_t simulations_ = 0;
  std::int64_t shortened_ = 0;
  bool pruning_ = true;
  bool coarse_lines_ = true;
  double risk_ = 0;
};

struct SplitResult {
  std::vector<std::int64_t> chunks;
  double score_ns = 0;
};
// Chunk boundaries lie on multiples of `align`. Exhaustive for k = 2, and for k > 2 while
// the combinations number at most kExhaustiveLimit; beyond that, coordinate descent (each
// boundary in turn moved to its best grid position between its neighbours, until a round
// improves nothing) from several starts: the even split, and `seed` (the best split with
// k - 1 chunks) with its first, largest or last chunk cut in two. Empty when the grid has
// fewer than k - 1 boundaries.
constexpr std::int64_t kExhaustiveLimit = 2000;  // k = 3 up to 4096 tokens at align 64
SplitResult search_split(Evaluator& ev, sim::StrategyKind kind, std::int64_t k, std::int64_t align,
                         const std::vector<std::int64_t>& seed = {});
// The same search with every split timed in full (Evaluator::full, ranked with the risk
// factor): coordinate descent from each of `starts` (chunk lengths, as many as the first
// start's; those off the grid or of another count are skipped), every grid position of a line
// within 32, coarse to fine (16 steps, then halving) beyond. For where the surrogate (3 layers, or
// a window pattern's template) is not the full timeline (a pipeline not yet in its steady state, as
// a comm-bound iso+ladder): each split a whole simulation.
SplitResult search_split_in_full(Evaluator& ev, sim::StrategyKind kind,
                                 const std::vector<std::vector<std::int64_t>>& starts,
                                 std::int64_t align);
// What the planner takes: search_split, then its split timed in full; where that differs from
// its surrogate score by more than kSurrogateTolerance, search_split_in_full from that split
// and the surrogate search's own starts (score_ns is then the full time, ranked). 0.5%: in an
// instrumented run of the benchmark sweep (5 models x 6 machines x 16 lengths, 2026-12-03) a
// full search after a smaller difference gained at most 0.01%, after larger ones up to 14%.
constexpr double kSurrogateTolerance = 5e-3;
SplitResult plan_split(Evaluator& ev, sim::StrategyKind kind, std::int64_t k, std::int64_t align,
                       const std::vector<std::int64_t>& seed = {});
std::string join_tokens(const std::vector<std::int64_t>& v);  // "2253,1843"

// The variants of a strategy the planner tries on the evaluator's workload, each with its
// label: ISO with 2..max_chunks chunks at the best split found, ladder on all layers and on
// the last half, gemm-split in 2, 4 or 8 pieces, microbatch, parallel-block; variants that
// do not apply to the workload are left out. `plan` and `--scenario generate` share it.
struct Variant {
  sim::StrategySpec spec;
  std::string detail;  // "2253,1843", "last 40 layers", "4 pieces", ...
};
std::vector<Variant> strategy_variants(Evaluator& ev, sim::StrategyKind kind, std::int64_t align,
                                       std::int64_t max_chunks);

// job(i) for i in [0, n) on up to `threads` threads (0: one per core), this thread among
// them; after each job, done(count finished) under a lock. The first exception is rethrown
// once all threads have stopped.
void run_jobs(std::size_t n, int threads, const std::function<void(std::size_t)>& job,
              const std::function<void(std::size_t)>& done = {});

// Every combination of boundaries (for tests on small cases).
SplitResult brute_force_split(Evaluator& ev, sim::StrategyKind kind, std::int64_t k,
                              std::int64_t align);

}  // namespace tpo::planner
