// Plan points written and read as {workload, strategy}; the plan loader and its lookup.
#include "sim/plan_file.h"

#include <algorithm>
#include <cmath>

#include "sim/error.h"
#include "sim/json_io.h"
#include "sim/report.h"

namespace tpo::sim {

using ojson = nlohmann::ordered_json;

ojson strategy_spec_json(const StrategySpec& s) {
  const StrategyDescriptor& d = strategy(s.kind);
  ojson j{{"name", d.name}};
  j["chunks"] = d.uses_chunks() ? s.chunk_tokens : std::vector<std::int64_t>{};
  if (d.uses_ladder_layers()) j["ladder_layers"] = s.ladder_layers;
  if (d.uses_pieces()) j["pieces"] = s.pieces;
  return j;
}

ojson planned_run_json(const PlannedRun& r) {
  return ojson{{"workload", workload_options_json(r.workload)},
               {"strategy", strategy_spec_json(r.spec)}};
}

namespace {

std::vector<std::int64_t> token_counts(const JsonObject& o, const std::string& key) {
  const auto& raw = o.raw();
  if (!raw.contains(key) || !raw.at(key).is_array()) {
    throw InputError(o.file(), o.field(key), "must be an array of token counts");
  }
  std::vector<std::int64_t> v;
  for (const auto& c : raw.at(key)) {
    if (!c.is_number_integer() || c.get<std::int64_t>() < 1) {
      throw InputError(o.file(), o.field(key), "token counts must be positive integers");
    }
    v.push_back(c.get<std::int64_t>());
  }
  return v;
}

StrategySpec spec_from_json(const JsonObject& o) {
  const std::string name = o.string("name");
  const StrategyDescriptor* d = find_strategy(name);
  if (!d) {
    throw InputError(o.file(), o.field("name"),
                     "unknown strategy '" + name + "' (known: " + strategy_names() + ")");
  }
  StrategySpec s(d->kind);
  if (d->uses_chunks()) {
    s.chunk_tokens = token_counts(o, "chunks");
    if (s.chunk_tokens.size() < 2) {
      throw InputError(o.file(), o.field("chunks"), "needs at least 2 chunks");
    }
  }
  if (d->uses_ladder_layers()) s.ladder_layers = o.count_or("ladder_layers", 0);
  if (d->uses_pieces()) s.pieces = o.integer_or("pieces", 4);
  return s;
}

WorkloadOptions workload_from_json(const JsonObject& o) {
  WorkloadOptions w;
  w.model = o.string("model");
  w.hardware = o.string("hardware");
  w.tp = o.integer("tp");
  w.phase = o.string("phase");
  w.batch = o.integer("batch");
  w.seq = o.integer("seq");
  // -1: the default (prefill 0, decode seq); tpo plan writes it explicit.
  w.context = o.has("context") && o.raw().at("context") == -1 ? -1 : o.count_or("context", 0);
  w.layers = o.count_or("layers", 0);
  if (o.has("embed_head")) {
    if (!o.raw().at("embed_head").is_boolean()) {
      throw InputError(o.file(), o.field("embed_head"), "must be true or false");
    }
    w.embed_head = o.raw().at("embed_head").get<bool>();
  }
  w.profile = o.string_or("profile", "");
  w.emulate = o.string_or("emulate", "");
  return w;
}

}  // namespace

PlannedRun planned_run_from_json(const nlohmann::json& j, const std::string& file,
                                 const std::string& path) {
  const JsonObject o(j, file, path);
  PlannedRun r;
  r.workload = workload_from_json(o.object("workload"));
  r.spec = spec_from_json(o.object("strategy"));
  if (strategy(r.spec.kind).uses_chunks() && r.workload.phase == "prefill") {
    std::int64_t sum = 0;
    for (auto c : r.spec.chunk_tokens) sum += c;
    if (sum != r.workload.seq) {
      throw InputError(file, o.object("strategy").field("chunks"),
                       "chunk tokens sum to " + std::to_string(sum) + ", not the workload's seq (" +
                           std::to_string(r.workload.seq) + ")");
    }
  }
  return r;
}

PlanEntry PlanFile::lookup(std::int64_t seq) const {
  const PlanEntry* at = nullptr;
  for (const auto& e : entries) {
    if (e.seq <= seq) at = &e;
  }
  PlanEntry r;
  if (at) r = *at;
  r.seq = seq;
  r.run.workload.seq = seq;
  if (!at) {  // shorter than anything planned: don't overlap
    r.run.spec = StrategySpec(StrategyKind::None);
    return r;
  }
  if (!strategy(r.run.spec.kind).uses_chunks() || r.chunk_fractions.size() < 2) return r;
  // Scale the planned split to this length, boundaries on the grid.
  std::vector<std::int64_t> chunks;
  double cum = 0;
  std::int64_t prev = 0;
  for (std::size_t i = 0; i + 1 < r.chunk_fractions.size(); ++i) {
    cum += r.chunk_fractions[i];
    std::int64_t b =
        std::llround(cum * static_cast<double>(seq) / static_cast<double>(align)) * align;
    b = std::max(b, prev + align);
    if (b >= seq) {  // too short to cut into that many chunks
      r.run.spec = StrategySpec(StrategyKind::None);
      r.chunk_fractions.clear();
      return r;
    }
    chunks.push_back(b - prev);
    prev = b;
  }
  chunks.push_back(seq - prev);
  r.run.spec.chunk_tokens = chunks;
  return r;
}

PlanFile load_plan(const std::string& path) {
  const nlohmann::json j = read_json_file(path);
  const JsonObject o(j, path, "");
  if (o.string("schema") != "tpo.plan/1") {
    throw InputError(path, "schema", "expected \"tpo.plan/1\" (is this a plan from `tpo plan`?)");
  }
  PlanFile p;
  p.path = path;
  const JsonObject opts = o.object("options");
  p.align = opts.integer_or("align", 64);
  if (!o.has("lookup") || !j.at("lookup").is_array() || j.at("lookup").empty()) {
    throw InputError(path, "lookup", "must be a non-empty array");
  }
  for (std::size_t i = 0; i < j.at("lookup").size(); ++i) {
    const std::string where = "lookup[" + std::to_string(i) + "]";
    const JsonObject e(j.at("lookup").at(i), path, where);
    PlanEntry pe;
    pe.where = where;
    pe.seq = e.integer("seq_len");
    if (!e.has("run")) {
      throw InputError(path, e.field("run"),
                       "is missing: this plan was written by an older tpo that did not record "
                       "each point's workload; run `tpo plan` again");
    }
    pe.run = planned_run_from_json(e.raw().at("run"), path, e.field("run"));
    if (e.raw().contains("chunk_fractions") && e.raw().at("chunk_fractions").is_array()) {
      for (const auto& f : e.raw().at("chunk_fractions")) {
        if (!f.is_number() || !(f.get<double>() > 0) || !std::isfinite(f.get<double>())) {
          throw InputError(path, e.field("chunk_fractions"), "must be positive numbers");
        }
        pe.chunk_fractions.push_back(f.get<double>());
      }
    }
    pe.predicted_us = e.number("predicted_us");
    pe.none_us = e.number("none_us");
    if (!p.entries.empty() && pe.seq <= p.entries.back().seq) {
      throw InputError(path, e.field("seq_len"), "lookup entries must be sorted by seq_len");
    }
    p.entries.push_back(std::move(pe));
  }
  return p;
}

}  // namespace tpo::sim
