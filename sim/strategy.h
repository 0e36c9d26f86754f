// Strategies: each is a builder from a workload to a schedule graph. The simulator times the
// graph; the validation runtime executes it unchanged.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/schedule.h"
#include "sim/workload.h"

namespace tpo::sim {

enum class StrategyKind { None, Iso, Ladder, ParallelBlock, GemmSplit, Microbatch, IsoLadder };

const char* strategy_name(StrategyKind k);
std::optional<StrategyKind> parse_strategy(const std::string& name);
std::vector<StrategyKind> all_strategies();
// ladder and parallel-block change the model (they need a retrained model); the rest compute
// exactly what `none` computes.
bool preserves_function(StrategyKind k);

struct StrategySpec {
  StrategySpec() = default;
  StrategySpec(StrategyKind k, std::vector<std::int64_t> chunks = {})  // NOLINT: implicit
      : kind(k), chunk_tokens(std::move(chunks)) {}

  StrategyKind kind = StrategyKind::None;
  std::vector<std::int64_t> chunk_tokens;  // iso / iso+ladder: tokens per chunk, summing to seq
  std::int64_t ladder_layers = 0;          // ladder: last N layers use ladder residual; 0 = all
  std::int64_t pieces = 4;                 // gemm-split: pieces of each block's last GEMM
};

// Why a strategy does not apply to a workload (empty when it does): e.g. iso in decode.
std::string not_applicable_reason(const Workload& w, const StrategySpec& s);

// Builds the graph. Throws InputError for an impossible spec (bad chunks, too many pieces).
Schedule build_schedule(const Workload& w, const StrategySpec& s);

// Turns --chunks/--split into token counts per chunk. `split` is empty (even split), token
// counts ("1792,2304") or ratios summing to 1 ("0.45,0.55"). Throws InputError naming --split.
std::vector<std::int64_t> resolve_chunks(std::int64_t seq, std::int64_t chunks,
                                         const std::string& split);

}  // namespace tpo::sim
