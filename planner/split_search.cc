// The ISO split search: chunk boundaries on the --align grid, exhaustive where affordable,
// coordinate descent from several starts beyond that; each split scored by the evaluator's
// surrogate (3 layers, or a window pattern's template; see plan.h), or timed in full where that
// surrogate is not to be trusted.
#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "planner/plan.h"
#include "planner/split_scorer.h"

namespace tpo::planner {

using sim::StrategyKind;
using sim::StrategySpec;

namespace {

// Chunk lengths from the boundaries, into `c` (reused: the searches score many splits).
void chunks_into(const std::vector<std::int64_t>& bounds, std::int64_t seq,
                 std::vector<std::int64_t>& c) {
  c.clear();
  std::int64_t prev = 0;
  for (auto b : bounds) {
    c.push_back(b - prev);
    prev = b;
  }
  c.push_back(seq - prev);
}

std::vector<std::int64_t> chunks_from(const std::vector<std::int64_t>& bounds, std::int64_t seq) {
  std::vector<std::int64_t> c;
  chunks_into(bounds, seq, c);
  return c;
}

// Scores already computed in one search, by boundaries: the descent's later rounds and its
// other starts revisit many splits, and a split's score never changes within a search. A
// run stopped early leaves only a lower bound, good against any best up to it.
struct Scored {
  double ns;
  bool exact;
};
struct BoundsHash {
  std::size_t operator()(const std::vector<std::int64_t>& b) const {
    std::uint64_t h = 0x9e3779b97f4a7c15ULL;
    for (auto x : b) h = (h ^ static_cast<std::uint64_t>(x)) * 0x100000001b3ULL;
    return static_cast<std::size_t>(h ^ (h >> 29));
  }
};
using ScoreCache = std::unordered_map<std::vector<std::int64_t>, Scored, BoundsHash>;

// The score of the split, exact when it is below `best` (else possibly a bound >= best).
// `scratch` is a buffer for the chunk lengths; what it holds afterwards is unspecified.
double cached_score(Evaluator& ev, SplitScorer& scorer, const std::vector<std::int64_t>& bounds,
                    ScoreCache& cache, double best, std::vector<std::int64_t>& scratch) {
  const auto it = cache.find(bounds);
  if (it != cache.end() && (it->second.exact || it->second.ns >= best)) return it->second.ns;
  bool exact = true;
  chunks_into(bounds, ev.workload().seq, scratch);
  const double s = ev.split_score_ns(scorer, scratch, best, &exact);
  if (it != cache.end()) {
    it->second = {s, exact};
  } else {
    cache.emplace(bounds, Scored{s, exact});
  }
  return s;
}

// Coordinate descent from one start: each boundary in turn moves to its best grid position
// between its neighbours, until a full round improves nothing. With coarse lines (the
// default), a boundary with more than kFineLine positions is first tried on a coarser grid
// of at most kCoarseSteps steps (multiples of a power of two times `align`), then refined
// around the best by halving the step down to `align`: about 64 + 2 log2(step) scores
// instead of one per position. Within kFineLine positions (every prompt up to 16k tokens on the
// 64-token grid) every position is tried.
constexpr std::int64_t kFineLine = 256, kCoarseSteps = 64;
// Timed in full, a split costs a whole simulation: lines are tried coarse to fine beyond 32
// positions, on at most 16 coarse steps.
constexpr std::int64_t kFullFineLine = 32, kFullCoarseSteps = 16;

// Tries a boundary at the positions of its line [lo, hi] as described above; `best_pos` is
// where try_at last found the best, refined around when the line was tried coarse first.
template <class TryAt>
void search_line(std::int64_t lo, std::int64_t hi, std::int64_t align, bool coarse,
                 const std::int64_t& best_pos, TryAt&& try_at, std::int64_t fine_line,
                 std::int64_t coarse_steps) {
  const std::int64_t positions = (hi - lo) / align + 1;
  if (!coarse || positions <= fine_line) {
    for (std::int64_t p = lo; p <= hi; p += align) try_at(p);
    return;
  }
  std::int64_t step = 1;
  while (step * coarse_steps < positions) step *= 2;
  // On multiples of the coarse step (so chunk lengths stay round, where the GEMM tiles' and
  // attention's costs dip), and the line's ends.
  const std::int64_t s = step * align;
  try_at(lo);
  for (std::int64_t p = (lo + s - 1) / s * s; p <= hi; p += s) try_at(p);
  try_at(hi);
  for (step /= 2; step >= 1; step /= 2) {
    const std::int64_t at = best_pos;
    try_at(at - step * align);
    try_at(at + step * align);
  }
}

// Coordinate descent: each boundary of `b` in turn moves to its best position between its
// neighbours, tried along its line by search_line, until a round improves nothing (at most 8
// rounds). `score(trial, cur)` scores a split's boundaries (anything >= cur when it cannot beat
// `cur`); returns the best score, `b` left at its split.
template <class Score>
double coordinate_descent(std::vector<std::int64_t>& b, std::int64_t align, std::int64_t grid,
                          double cur, bool coarse, std::int64_t fine_line,
                          std::int64_t coarse_steps, Score&& score) {
  std::vector<std::int64_t> trial;
  for (int round = 0; round < 8; ++round) {
    bool improved = false;
    for (std::size_t i = 0; i < b.size(); ++i) {
      const std::int64_t lo = i == 0 ? align : b[i - 1] + align;
      const std::int64_t hi = i + 1 == b.size() ? grid * align : b[i + 1] - align;
      std::int64_t best_pos = b[i];
      trial = b;
      search_line(
          lo, hi, align, coarse, best_pos,
          [&](std::int64_t p) {
            if (p == b[i] || p < lo || p > hi) return;
            trial[i] = p;
            if (const double t = score(trial, cur); t < cur) {
              cur = t;
              best_pos = p;
              improved = true;
            }
          },
          fine_line, coarse_steps);
      b[i] = best_pos;
    }
    if (!improved) break;
  }
  return cur;
}

SplitResult descend(Evaluator& ev, SplitScorer& scorer, std::vector<std::int64_t> b,
                    std::int64_t align, std::int64_t grid, ScoreCache& cache) {
  const bool prune = ev.pruning() && scorer.bound_enabled();
  std::vector<std::int64_t> chunks;
  double cur = cached_score(ev, scorer, b, cache, std::numeric_limits<double>::infinity(), chunks);
  cur = coordinate_descent(b, align, grid, cur, ev.coarse_lines(), kFineLine, kCoarseSteps,
                           [&](const std::vector<std::int64_t>& trial, double best) {
                             // A split whose bound is no better than the current one cannot be
                             // taken.
                             if (prune && cache.find(trial) == cache.end()) {
                               chunks_into(trial, ev.workload().seq, chunks);
                               if (!scorer.can_beat(chunks, best)) return best;
                             }
                             return cached_score(ev, scorer, trial, cache, best, chunks);
                           });
  return {chunks_from(b, ev.workload().seq), cur};
}

std::vector<std::int64_t> bounds_of(const std::vector<std::int64_t>& chunks) {
  std::vector<std::int64_t> b;
  std::int64_t at = 0;
  for (std::size_t i = 0; i + 1 < chunks.size(); ++i) b.push_back(at += chunks[i]);
  return b;
}

// Number of ways to place k-1 boundaries on `grid` points, capped at `cap`.
std::int64_t combinations(std::int64_t grid, std::int64_t r, std::int64_t cap) {
  double c = 1;
  for (std::int64_t i = 0; i < r; ++i) {
    c = c * static_cast<double>(grid - i) / static_cast<double>(i + 1);
    if (c > static_cast<double>(cap)) return cap + 1;
  }
  return static_cast<std::int64_t>(c);
}

// The boundaries of the even split into k chunks, on the grid.
std::vector<std::int64_t> even_bounds(std::int64_t seq, std::int64_t k, std::int64_t align) {
  const std::int64_t grid = (seq - 1) / align;
  std::vector<std::int64_t> even;
  for (std::int64_t i = 0; i < k - 1; ++i) {
    std::int64_t g = std::llround(static_cast<double>(seq) * static_cast<double>(i + 1) /
                                  static_cast<double>(k) / static_cast<double>(align));
    g = std::clamp<std::int64_t>(g, i + 1, grid - (k - 2 - i));
    if (i > 0) g = std::max(g, even.back() / align + 1);
    even.push_back(g * align);
  }
  return even;
}

// Where the descents start (boundaries): the even split, and the best split with one chunk
// fewer (`seed`) with its first, largest or last chunk cut in two.
std::vector<std::vector<std::int64_t>> descent_starts(std::int64_t seq, std::int64_t k,
                                                      std::int64_t align,
                                                      const std::vector<std::int64_t>& seed) {
  std::vector<std::vector<std::int64_t>> starts{even_bounds(seq, k, align)};
  if (static_cast<std::int64_t>(seed.size()) == k - 1) {
    const std::size_t largest =
        static_cast<std::size_t>(std::max_element(seed.begin(), seed.end()) - seed.begin());
    for (std::size_t cut : {std::size_t{0}, largest, seed.size() - 1}) {
      std::vector<std::int64_t> chunks = seed;
      const std::int64_t half = chunks[cut] / 2 / align * align;
      if (half < align || chunks[cut] - half < 1) continue;
      chunks[cut] -= half;
      chunks.insert(chunks.begin() + static_cast<long>(cut), half);
      auto b = bounds_of(chunks);
      bool on_grid = true;
      for (auto x : b) on_grid = on_grid && x % align == 0 && x < seq;
      if (on_grid && std::find(starts.begin(), starts.end(), b) == starts.end()) {
        starts.push_back(b);
      }
    }
  }
  return starts;
}

}  // namespace

SplitResult search_split(Evaluator& ev, StrategyKind kind, std::int64_t k, std::int64_t align,
                         const std::vector<std::int64_t>& seed) {
  const std::int64_t seq = ev.workload().seq;
  const std::int64_t grid = (seq - 1) / align;  // boundaries align, 2 align, ... < seq
  if (k < 2 || grid < k - 1) return {};
  // Exhaustive whenever that is affordable (always for 2 chunks).
  if (k == 2 || combinations(grid, k - 1, kExhaustiveLimit) <= kExhaustiveLimit) {
    return brute_force_split(ev, kind, k, align);
  }
  // Otherwise coordinate descent from several starts.
  const std::vector<std::vector<std::int64_t>> starts = descent_starts(seq, k, align, seed);
  SplitResult best;
  ScoreCache cache;
  SplitScorer scorer(ev.workload(), ev.cost_model(), kind, k);
  for (const auto& st : starts) {
    SplitResult r = descend(ev, scorer, st, align, grid, cache);
    if (best.chunks.empty() || r.score_ns < best.score_ns) best = r;
  }
  return best;
}

SplitResult search_split_in_full(Evaluator& ev, StrategyKind kind,
                                 const std::vector<std::vector<std::int64_t>>& starts,
                                 std::int64_t align) {
  const std::int64_t seq = ev.workload().seq;
  const std::int64_t grid = (seq - 1) / align;
  if (starts.empty()) return {};
  // Each split timed as ev.full times it, on graphs built once.
  FullSplitTimer timer(ev.workload(), ev.cost_model(), kind,
                       static_cast<std::int64_t>(starts.front().size()));
  std::unordered_map<std::vector<std::int64_t>, double, BoundsHash> timed;
  auto time_of = [&](const std::vector<std::int64_t>& b) {
    const auto it = timed.find(b);
    if (it != timed.end()) return it->second;
    const auto chunks = chunks_from(b, seq);
    ev.count_simulation();
    const double t = static_cast<double>(timer.total_ns(chunks)) * ev.risk_factor(chunks);
    timed.emplace(b, t);
    return t;
  };
  SplitResult best;
  for (const auto& start : starts) {
    std::vector<std::int64_t> b = bounds_of(start);
    bool on_grid = !b.empty() && start.size() == starts.front().size();
    for (std::size_t i = 0; i < b.size(); ++i) {
      on_grid = on_grid && b[i] % align == 0 && b[i] > (i ? b[i - 1] : 0) && b[i] < seq;
    }
    if (!on_grid) continue;
    const double cur = coordinate_descent(
        b, align, grid, time_of(b), ev.coarse_lines(), kFullFineLine, kFullCoarseSteps,
        [&](const std::vector<std::int64_t>& trial, double) { return time_of(trial); });
    if (best.chunks.empty() || cur < best.score_ns) best = {chunks_from(b, seq), cur};
  }
  return best;
}

SplitResult plan_split(Evaluator& ev, StrategyKind kind, std::int64_t k, std::int64_t align,
                       const std::vector<std::int64_t>& seed) {
  SplitResult r = search_split(ev, kind, k, align, seed);
  if (r.chunks.empty()) return r;
  const double full = static_cast<double>(ev.full(StrategySpec(kind, r.chunks)).total_ns) *
                      ev.risk_factor(r.chunks);
  if (std::abs(full - r.score_ns) <= kSurrogateTolerance * full) return r;
  const std::int64_t seq = ev.workload().seq;
  // From the surrogate's pick and every start the surrogate's search had.
  std::vector<std::vector<std::int64_t>> starts{r.chunks};
  for (const auto& b : descent_starts(seq, k, align, seed)) starts.push_back(chunks_from(b, seq));
  SplitResult f = search_split_in_full(ev, kind, starts, align);
  return f.chunks.empty() ? r : f;
}

SplitResult brute_force_split(Evaluator& ev, StrategyKind kind, std::int64_t k,
                              std::int64_t align) {
  const std::int64_t seq = ev.workload().seq;
  const std::int64_t grid = (seq - 1) / align;
  SplitResult best;
  best.score_ns = std::numeric_limits<double>::infinity();
  if (k < 2 || grid < k - 1) return {};
  SplitScorer scorer(ev.workload(), ev.cost_model(), kind, k);
  const bool prune = ev.pruning() && scorer.bound_enabled();
  std::vector<std::int64_t> idx(static_cast<std::size_t>(k - 1));
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<std::int64_t>(i) + 1;
  std::vector<std::int64_t> b, chunks;
  for (;;) {
    b.clear();
    for (auto g : idx) b.push_back(g * align);
    // Splits are taken only when strictly better: one whose bound reaches the best is skipped.
    chunks_into(b, seq, chunks);
    const bool skip = prune && !scorer.can_beat(chunks, best.score_ns);
    const double t = skip ? best.score_ns : ev.split_score_ns(scorer, chunks, best.score_ns);
    if (t < best.score_ns) {
      best.score_ns = t;
      best.chunks = chunks;
    }
    // Next combination of k-1 increasing grid indices in [1, grid].
    std::int64_t i = static_cast<std::int64_t>(idx.size()) - 1;
    while (i >= 0 && idx[static_cast<std::size_t>(i)] == grid - (k - 2 - i)) --i;
    if (i < 0) break;
    ++idx[static_cast<std::size_t>(i)];
    for (std::size_t j = static_cast<std::size_t>(i) + 1; j < idx.size(); ++j) {
      idx[j] = idx[j - 1] + 1;
    }
  }
  return best;
}

}  // namespace tpo::planner
