// Strategies as records. Every strategy is one StrategyDescriptor in the registry
// (sim/strategies.cc): its name, whether it keeps the model's function, how it shapes the one
// schedule graph (segments, pieces of the last GEMM, residual delay), when it applies, and
// the variants the planner tries. One harness, build_schedule (sim/graph_builder.cc), builds
// the graph of any of them from its shape — as nccl-tests drives every collective from one
// record. Nothing outside the registry compares a strategy's name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/schedule.h"
#include "sim/workload.h"

namespace tpo::sim {

enum class StrategyKind : std::uint8_t {
  None,
  Iso,
  Ladder,
  ParallelBlock,
  GemmSplit,
  Microbatch,
  IsoLadder
};

struct StrategySpec {
  StrategySpec() = default;
  StrategySpec(StrategyKind k, std::vector<std::int64_t> chunks = {})  // NOLINT: implicit
      : kind(k), chunk_tokens(std::move(chunks)) {}

  StrategyKind kind = StrategyKind::None;
  std::vector<std::int64_t> chunk_tokens;  // prompt chunks: tokens per chunk, summing to seq
  std::int64_t ladder_layers = 0;          // ladder residual: the last N layers; 0 = all
  std::int64_t pieces = 4;                 // split last GEMM: pieces of each module's last GEMM
  bool operator==(const StrategySpec&) const = default;
};

// The overlap decision of `tpo plan` (and of `tpo calibrate`'s decisions): `none` stays unless
// the pick beats it by more than `threshold` (a fraction of the pick's time), in [0, 1).
inline bool keeps_none(double none_time, double pick_time, double threshold) {
  return none_time <= pick_time * (1.0 + threshold);
}
// Throws InputError naming `flag` unless 0 <= threshold < 1 (NaN included).
void check_threshold(double threshold, const char* flag);
// The chunk-count decision of `tpo plan`, the generate scenario and `tpo calibrate`: a prompt cut
// in one chunk more runs only where it beats the best cut of one chunk fewer by more than `gain`
// (a fraction of its time, --chunk-gain): a split the model cannot tell apart from a simpler one
// is not worth the engine's extra chunk.
inline bool chunk_pays(double fewer_time, double more_time, double gain) {
  return more_time * (1.0 + gain) < fewer_time;
}
// Of `n` alternatives, the one to run instead of `pick` (the fastest): stepping down one chunk at
// a time (`chunks(i)`, the prompt's chunks of alternative i) to the fastest (`time(i)`) of the
// alternatives `alike(i, current)` allows, down to 2 chunks, while the extra chunk does not pay
// (chunk_pays). It never steps down to a cut that no longer beats `none_time` by more than
// `threshold` where the current one did (the answer would turn to "don't overlap"); a
// `none_time` of 0: no threshold (a model-changing strategy, which has no fallback to none).
template <class Chunks, class Time, class Alike>
std::size_t fewest_paying_chunks(std::size_t pick, std::size_t n, Chunks&& chunks, Time&& time,
                                 Alike&& alike, double none_time, double threshold, double gain) {
  for (;;) {
    const std::size_t k = chunks(pick);
    if (k < 3) return pick;
    std::size_t fewer = n;
    for (std::size_t i = 0; i < n; ++i) {
      if (chunks(i) == k - 1 && alike(i, pick) && (fewer == n || time(i) < time(fewer))) {
        fewer = i;
      }
    }
    if (fewer == n || chunk_pays(time(fewer), time(pick), gain) ||
        (keeps_none(none_time, time(fewer), threshold) &&
         !keeps_none(none_time, time(pick), threshold))) {
      return pick;
    }
    pick = fewer;
  }
}

// How a strategy cuts the token matrix (requests x positions) into segments, each of which
// runs every module in turn.
enum class Segments : std::uint8_t {
  Whole,          // one segment
  PromptChunks,   // ISO: chunks of the prompt (spec.chunk_tokens), later ones attend to earlier
  RequestGroups,  // micro-batches: the batch's requests in two halves
};

// Everything build_schedule needs to know about a strategy.
struct GraphShape {
  Segments segments = Segments::Whole;
  bool split_last_gemm = false;  // each module's last GEMM in spec.pieces row pieces, each
                                 // piece all-reduced as soon as it is done
  bool ladder_residual = false;  // residual add applied one module late (spec.ladder_layers)
  bool parallel_block = false;   // attention and MLP side by side from one norm, one
                                 // all-reduce per layer
};

struct StrategyDescriptor {
  StrategyKind kind;
  const char* name;         // as on the command line and in every report
  const char* summary;      // one line for --help and the README
  bool preserves_function;  // computes exactly what `none` computes (else needs a retrained model)
  GraphShape shape;
  // The strategy to run in decode where it only shapes prefill (iso+ladder decodes with
  // ladder); its own kind otherwise.
  StrategyKind decode_as;
  // The variants the planner tries besides chunk splits (which it searches itself when
  // shape.segments is PromptChunks): e.g. gemm-split in 2, 4 and 8 pieces.
  std::vector<StrategySpec> (*variants)(const Workload& w);

  bool uses_chunks() const { return shape.segments == Segments::PromptChunks; }
  bool uses_ladder_layers() const { return shape.ladder_residual; }
  bool uses_pieces() const { return shape.split_last_gemm; }
};

// The registry, in the order reports list the strategies.
const std::vector<StrategyDescriptor>& strategies();
const StrategyDescriptor& strategy(StrategyKind k);
// Null when no strategy has that name.
const StrategyDescriptor* find_strategy(std::string_view name);
// "none, iso, ladder, ..." for messages and --help.
std::string strategy_names();

// Shorthands over the registry.
inline const char* strategy_name(StrategyKind k) {
  return strategy(k).name;
}
inline bool preserves_function(StrategyKind k) {
  return strategy(k).preserves_function;
}
std::vector<StrategyKind> all_strategies();

// Why a strategy does not apply to a workload (empty when it does): e.g. iso in decode.
std::string not_applicable_reason(const Workload& w, const StrategySpec& s);

// The variant in words: "2253,1843", "last 40 layers", "4 pieces", "2 groups" or "-".
std::string variant_text(const StrategySpec& s);

// Builds the graph (sim/graph_builder.cc). Throws FieldError for an impossible spec (bad
// chunks, too few pieces, ladder layers beyond the model).
Schedule build_schedule(const Workload& w, const StrategySpec& s);

}  // namespace tpo::sim
