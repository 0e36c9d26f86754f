// The strategy registry: one record per strategy. Adding a strategy means adding its record
// here (and its test in tests/sim/test_strategies.cc); the graph harness, the planner, the
// reports, the plan files and the runtime all read these records.
#include <algorithm>
#include <cstdio>
#include <string>

#include "sim/error.h"
#include "sim/strategy.h"

namespace tpo::sim {

namespace {

std::vector<StrategySpec> single(StrategyKind k) {
  return {StrategySpec(k)};
}

const std::vector<StrategyDescriptor> kRegistry = {
    {StrategyKind::None, "none",
     "each module (attention, MLP) computes, all-reduces, adds to the residual", true, GraphShape{},
     StrategyKind::None, [](const Workload&) { return single(StrategyKind::None); }},
    {StrategyKind::Iso, "iso",
     "the prompt in k chunks in ping-pong order; one chunk's all-reduce overlaps the next "
     "chunk's compute",
     true, GraphShape{Segments::PromptChunks, false, false, false}, StrategyKind::Iso,
     [](const Workload&) { return std::vector<StrategySpec>{}; }},
    {StrategyKind::Ladder, "ladder",
     "module i reads the residual without module i-1's output, so that all-reduce overlaps "
     "module i (all layers or the last N)",
     false, GraphShape{Segments::Whole, false, true, false}, StrategyKind::Ladder,
     [](const Workload& w) {
       std::vector<StrategySpec> v = single(StrategyKind::Ladder);
       if (w.layers >= 4) {
         v.push_back(StrategySpec(StrategyKind::Ladder));
         v.back().ladder_layers = w.layers / 2;
       }
       return v;
     }},
    {StrategyKind::GemmSplit, "gemm-split",
     "the module's last GEMM in p row pieces, each piece's all-reduce sent when it is done", true,
     GraphShape{Segments::Whole, true, false, false}, StrategyKind::GemmSplit,
     [](const Workload&) {
       std::vector<StrategySpec> v;
       for (std::int64_t p : {2, 4, 8}) {
         v.push_back(StrategySpec(StrategyKind::GemmSplit));
         v.back().pieces = p;
       }
       return v;
     }},
    {StrategyKind::Microbatch, "microbatch",
     "the batch's requests in two groups that alternate (needs batch >= 2)", true,
     GraphShape{Segments::RequestGroups, false, false, false}, StrategyKind::Microbatch,
     [](const Workload&) { return single(StrategyKind::Microbatch); }},
    {StrategyKind::ParallelBlock, "parallel-block",
     "attention and MLP side by side from one norm, one all-reduce per layer", false,
     GraphShape{Segments::Whole, false, false, true}, StrategyKind::ParallelBlock,
     [](const Workload&) { return single(StrategyKind::ParallelBlock); }},
    {StrategyKind::IsoLadder, "iso+ladder", "both iso chunks and ladder residual", false,
     GraphShape{Segments::PromptChunks, false, true, false}, StrategyKind::Ladder,
     [](const Workload&) { return std::vector<StrategySpec>{}; }},
};

}  // namespace

const std::vector<StrategyDescriptor>& strategies() {
  return kRegistry;
}

const StrategyDescriptor& strategy(StrategyKind k) {
  for (const auto& d : kRegistry) {
    if (d.kind == k) return d;
  }
  return kRegistry.front();  // unreachable: every kind has a record (tested)
}

const StrategyDescriptor* find_strategy(std::string_view name) {
  for (const auto& d : kRegistry) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

std::string strategy_names() {
  std::string names;
  for (const auto& d : kRegistry) names += std::string(names.empty() ? "" : ", ") + d.name;
  return names;
}

std::vector<StrategyKind> all_strategies() {
  std::vector<StrategyKind> v;
  for (const auto& d : kRegistry) v.push_back(d.kind);
  return v;
}

std::string not_applicable_reason(const Workload& w, const StrategySpec& s) {
  const StrategyDescriptor& d = strategy(s.kind);
  const std::int64_t rows = w.phase == Phase::Prefill ? w.seq : w.batch;
  const std::string name = d.name;
  switch (d.shape.segments) {
    case Segments::PromptChunks:
      if (w.phase != Phase::Prefill) return name + " cuts a prompt into chunks: prefill only";
      if (w.seq < 2) return name + " needs at least 2 prompt tokens";
      break;
    case Segments::RequestGroups:
      if (w.batch < 2) return name + " needs a batch of at least 2 requests";
      break;
    case Segments::Whole:
      break;
  }
  if (d.shape.split_last_gemm && rows < s.pieces) {
    return name + " needs at least as many rows as pieces (" + std::to_string(s.pieces) + ")";
  }
  return {};
}

void check_threshold(double threshold, const char* flag) {
  if (!(threshold >= 0) || threshold >= 1) {
    char v[32];
    std::snprintf(v, sizeof v, "%g", threshold);
    throw InputError(flag, v, "must be in [0, 1)");
  }
}

std::string variant_text(const StrategySpec& s) {
  const StrategyDescriptor& d = strategy(s.kind);
  if (d.uses_chunks()) {
    std::string t;
    for (auto c : s.chunk_tokens) {
      if (!t.empty()) t += ',';
      t += std::to_string(c);
    }
    return t;
  }
  if (d.uses_pieces()) return std::to_string(s.pieces) + " pieces";
  if (d.shape.segments == Segments::RequestGroups) return "2 groups";
  if (d.uses_ladder_layers()) {
    if (s.ladder_layers == 0) return "all layers";
    std::string t = "last ";
    t += std::to_string(s.ladder_layers);
    t += " layers";
    return t;
  }
  return "-";
}

}  // namespace tpo::sim
