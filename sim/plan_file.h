// A plan file ("tpo.plan/1", written by `tpo plan`) as the rest of tpo reads it. Each planned
// point is written and read back as {workload, strategy} through one pair of functions, so
// that `tpo validate --plan` runs exactly what was planned — its model, hardware, TP, phase,
// batch, prompt, context, layers and profile — and a serving engine finds the strategy and
// chunk split for a prompt length with lookup().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/strategy.h"
#include "sim/workload.h"

namespace tpo::sim {

// One run: what is run and how it is scheduled.
struct PlannedRun {
  WorkloadOptions workload;
  StrategySpec spec;
  bool operator==(const PlannedRun&) const = default;
};

// {"name", "chunks"} and the parameters the strategy's record says it uses.
nlohmann::ordered_json strategy_spec_json(const StrategySpec& s);
// The parameters the strategy reads besides its chunks (ladder_layers, pieces), or {}.
nlohmann::ordered_json strategy_params_json(const StrategySpec& s);
// {"workload": {...every WorkloadOptions field...}, "strategy": strategy_spec_json}.
nlohmann::ordered_json planned_run_json(const PlannedRun& r);
// The inverse of planned_run_json. `path` is the JSON path of the object inside `file`, for
// errors (InputError naming the file and the field). `made_in`: the folder the file was
// written from (its "made_in"), where relative paths in it are also looked for.
PlannedRun planned_run_from_json(const nlohmann::json& j, const std::string& file,
                                 const std::string& path, const std::string& made_in = "");
// "no such file, from the current folder, the folder the file was made in (...), or beside
// the file", for a relative path a plan or report names that is found nowhere.
std::string missing_file_text(const std::string& made_in);
// The folder tpo runs in, where `w` names a file by a relative path (a plan or report then
// records it as "made_in"); "" where every file is a shipped name or an absolute path.
std::string made_in_for(const WorkloadOptions& w);

struct PlanEntry {
  std::int64_t seq = 0;  // prompt length (decode: context length) this entry was planned for
  PlannedRun run;
  std::vector<double> chunk_fractions;  // chunk_tokens / seq, to scale the split
  double predicted_us = 0;
  double none_us = 0;
  std::string where;      // "lookup[2]": the entry's place in the file, for errors
  std::string run_where;  // the field path of `run` ("lookup[2].run"), for errors
  // The point's other allowed candidates (not none, not the pick), fastest predicted first,
  // each with its predicted time: what `validate --plan --alternatives N` also measures.
  std::vector<std::pair<PlannedRun, double>> alternatives;
  // Where each alternative's run is in the file, for errors (a generate report's); empty: the
  // pick's run_where (a plan's candidates are the pick's workload with another strategy).
  std::vector<std::string> alternatives_where;
};

// The decode step at the middle of a generation's steps (contexts prompt + 1 .. prompt +
// new_tokens - 1; the prompt's where there is none): where `plan --scenario generate` chooses
// the decode strategy and what `tpo validate --plan` measures.
inline std::int64_t generation_middle_context(std::int64_t prompt, std::int64_t new_tokens) {
  const std::int64_t steps = new_tokens - 1;
  return steps >= 1 ? prompt + 1 + (steps - 1) / 2 : prompt;
}

// One strategy of a generate report (tpo.generate/1): the runs of its two phases, as
// `tpo validate --plan` measures them (the decode step at the middle step's context).
struct GenerationPoint {
  std::int64_t batch = 1;
  std::string strategy;
  bool picked = false;  // the report's fastest predicted tokens/s in its batch
  PlannedRun prefill, decode;
  // Its batch's two entries; decode_point is npos where there is no decode step (one new token).
  std::size_t prefill_point = 0, decode_point = 0;
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  double predicted_speedup = 0;  // the report's: its decode steps averaged over their contexts
  std::string where;             // "batches[0].results[2]", for errors
};

struct PlanFile {
  std::string path;
  std::int64_t align = 64;
  std::string profile_digest;      // of the profile planned with (file_digest); empty: none/old
  std::string made_in;             // the folder tpo was run in to make it ("" in older plans)
  std::vector<PlanEntry> entries;  // sorted by seq (a plan; a generate report's: per batch)
  // A generate report read by load_points: its prompt and new tokens, and every strategy of
  // every batch. Empty for a plan.
  std::int64_t prompt = 0, new_tokens = 0;
  std::vector<GenerationPoint> generation;
  // What to run for a prompt of `seq` tokens: the entry of the largest planned length <= seq,
  // its chunk fractions scaled to seq with boundaries on the align grid. Shorter than every
  // planned length (or too short to cut): strategy none.
  PlanEntry lookup(std::int64_t seq) const;
};

// Throws InputError naming the file and the field when the plan is malformed.
PlanFile load_plan(const std::string& path);

// What `tpo validate --plan` runs: a plan's points (load_plan), or a generate report's
// (tpo.generate/1): per batch a prefill point and a decode point, each the run of the
// strategy with the fastest predicted tokens/s, the other strategies' runs in that phase its
// alternatives (fastest predicted first, none and repeats left out); `generation` lists every
// strategy's two runs. Not for lookup(): a generate report plans no prompt lengths.
PlanFile load_points(const std::string& path);

}  // namespace tpo::sim
