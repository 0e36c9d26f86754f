// Plan points written and read as {workload, strategy}; the plan loader and its lookup.
#include "sim/plan_file.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <tuple>

#include "sim/config_paths.h"
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

ojson strategy_params_json(const StrategySpec& s) {
  ojson j = strategy_spec_json(s);
  j.erase("name");
  j.erase("chunks");
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

// A file a plan names (model, hardware, profile) is kept as it was typed when planning,
// relative to the folder tpo ran in then (the file's `made_in`, where it records it). Read
// from another folder, a relative path that is not there is taken from that folder, else from
// beside the plan file. Returns the path to read; `found` says whether it names a file at all
// (shipped names are not paths and are left alone).
std::string beside_file(const std::string& spec, const std::string& file,
                        const std::string& made_in, bool* found) {
  namespace fs = std::filesystem;
  *found = true;
  std::error_code ec;
  if (!is_config_path(spec) || fs::path(spec).is_absolute() || fs::exists(spec, ec)) return spec;
  if (!made_in.empty() && fs::exists(fs::path(made_in) / spec, ec)) {
    return (fs::path(made_in) / spec).string();
  }
  const fs::path there = fs::path(file).parent_path() / spec;
  if (!fs::path(file).parent_path().empty() && fs::exists(there, ec)) return there.string();
  *found = false;
  return spec;
}

WorkloadOptions workload_from_json(const JsonObject& o, const std::string& made_in) {
  WorkloadOptions w;
  w.model = o.string("model");
  bool found = true;
  w.model = beside_file(w.model, o.file(), made_in, &found);
  if (!found) {
    throw InputError(o.file(), o.field("model"),
                     "'" + w.model + "': " + missing_file_text(made_in) +
                         " (a plan keeps paths as typed when it was made: run from that folder)");
  }
  // Resolved now, so that an unknown name is reported against this file and field (later it
  // would read as a --model option nobody gave). The model is the one thing no option of
  // validate --plan replaces.
  try {
    (void)resolve_config("models", w.model, "model");
  } catch (const FieldError& e) {
    throw InputError(o.file(), o.field("model"), "'" + w.model + "': " + e.problem());
  }
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
  // Else an error names it later.
  w.hardware = beside_file(w.hardware, o.file(), made_in, &found);
  w.profile = beside_file(o.string_or("profile", ""), o.file(), made_in, &found);
  w.emulate = beside_file(o.string_or("emulate", ""), o.file(), made_in, &found);
  w.comm_ctas = o.count_or("comm_ctas", 0);
  w.sm_clock = o.count_or("sm_clock", 0);  // plans before --sm-clock: the quoted clock
  // Plans written before the execution modes were predicted for queued execution.
  w.exec = o.string_or("exec", "queued");
  if (o.has("exec")) {
    try {
      parse_exec_mode(w.exec);
    } catch (const FieldError&) {
      throw InputError(o.file(), o.field("exec"), "must be queued, eager or graph");
    }
  }
  w.vocab = o.string_or("vocab", "sharded");
  if (w.vocab != "sharded" && w.vocab != "replicated") {
    throw InputError(o.file(), o.field("vocab"), "must be sharded or replicated");
  }
  // Runs and plans recorded before 2026-12-04 neither ran nor timed rotary embeddings.
  w.rope = o.string_or("rope", "none");
  if (w.rope != "kernel" && w.rope != "none") {
    throw InputError(o.file(), o.field("rope"), "must be kernel or none");
  }
  // Runs and plans recorded before --add-norm ran the add and the norm as two kernels.
  w.add_norm = o.string_or("add_norm", "separate");
  if (w.add_norm != "fused" && w.add_norm != "separate") {
    throw InputError(o.file(), o.field("add_norm"), "must be fused or separate");
  }
  w.allreduce_fusion = o.string_or("allreduce_fusion", "none");
  if (w.allreduce_fusion != "none" && w.allreduce_fusion != "add-norm") {
    throw InputError(o.file(), o.field("allreduce_fusion"), "must be none or add-norm");
  }
  return w;
}

// A point of a plan written before each entry recorded its run: rebuilt from the plan's
// options (model, hardware, TP, phase, context, layers, profile) and the entry's strategy.
PlannedRun legacy_run(const JsonObject& plan, const JsonObject& e, std::int64_t seq) {
  const JsonObject opts = plan.object("options");
  PlannedRun r;
  r.workload.model = opts.string("model");
  r.workload.hardware = opts.string("hardware");
  r.workload.tp = plan.integer("tp");
  r.workload.phase = plan.string("phase");
  r.workload.batch = e.integer("batch");
  r.workload.seq = seq;
  const auto& ctx = opts.raw().contains("context") ? opts.raw().at("context") : nlohmann::json(-1);
  r.workload.context = ctx.is_number_integer() && ctx.get<std::int64_t>() >= 0
                           ? ctx.get<std::int64_t>()
                           : (r.workload.phase == "decode" ? seq : 0);
  r.workload.layers = opts.count_or("layers", 0);
  // Plans of 2026-12-04 on say it in their options; older ones had no rotary kernel.
  r.workload.rope = opts.string_or("rope", "none");
  r.workload.add_norm = opts.string_or("add_norm", "separate");
  r.workload.profile = opts.string_or("profile", "");
  const std::string name = e.string("strategy");
  const StrategyDescriptor* d = find_strategy(name);
  if (!d) throw InputError(e.file(), e.field("strategy"), "unknown strategy '" + name + "'");
  r.spec = StrategySpec(d->kind);
  if (d->uses_chunks()) {
    r.spec.chunk_tokens = token_counts(e, "chunks");
    std::int64_t sum = 0;
    for (auto c : r.spec.chunk_tokens) sum += c;
    if (r.spec.chunk_tokens.size() < 2 || sum != seq) {
      throw InputError(e.file(), e.field("chunks"),
                       "chunks must be >= 2 and sum to seq_len (" + std::to_string(seq) + ")");
    }
  }
  const JsonObject params = e.object("params");
  if (d->uses_ladder_layers()) r.spec.ladder_layers = params.count_or("ladder_layers", 0);
  if (d->uses_pieces()) r.spec.pieces = params.integer_or("pieces", 4);
  return r;
}

// The other allowed candidates of the entry's point (points[] holds them, same seq_len).
std::vector<std::pair<PlannedRun, double>> alternatives_of(const nlohmann::json& j,
                                                           const std::string& path,
                                                           const PlanEntry& e) {
  std::vector<std::pair<PlannedRun, double>> out;
  if (!j.contains("points") || !j.at("points").is_array()) return out;
  for (std::size_t i = 0; i < j.at("points").size(); ++i) {
    const JsonObject pt(j.at("points").at(i), path, "points[" + std::to_string(i) + "]");
    if (pt.integer("seq_len") != e.seq || !pt.raw().contains("candidates")) continue;
    const auto& cands = pt.raw().at("candidates");
    if (!cands.is_array()) throw InputError(path, pt.field("candidates"), "must be a list");
    for (std::size_t k = 0; k < cands.size(); ++k) {
      const JsonObject c(cands.at(k), path, pt.field("candidates") + "[" + std::to_string(k) + "]");
      if (c.raw().contains("allowed") && c.raw().at("allowed") == false) continue;
      PlannedRun r;
      r.workload = e.run.workload;
      if (c.has("comm_ctas") && c.count_or("comm_ctas", 0) > 0) {
        r.workload.comm_ctas = c.count_or("comm_ctas", 0);
      }
      if (c.raw().contains("params") && !c.raw().at("params").is_object()) {
        throw InputError(path, c.field("params"), "must be an object");
      }
      nlohmann::json spec =
          c.raw().contains("params") ? c.raw().at("params") : nlohmann::json::object();
      spec["name"] = c.string("strategy");
      spec["chunks"] = c.raw().contains("chunks") ? c.raw().at("chunks") : nlohmann::json::array();
      r.spec = spec_from_json(JsonObject(spec, path, c.field("strategy")));
      if (r.spec.kind == StrategyKind::None || r == e.run) continue;
      out.emplace_back(std::move(r), c.number("total_us"));
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second < b.second; });
  return out;
}

}  // namespace

std::string made_in_for(const WorkloadOptions& w) {
  for (const std::string& spec : {w.model, w.hardware, w.profile, w.emulate}) {
    if (is_config_path(spec) && std::filesystem::path(spec).is_relative()) {
      std::error_code ec;
      return std::filesystem::current_path(ec).string();
    }
  }
  return "";
}

std::string missing_file_text(const std::string& made_in) {
  return "no such file, from the current folder, " +
         (made_in.empty() ? std::string() : "the folder the file was made in (" + made_in + "), ") +
         "or beside the file";
}

PlannedRun planned_run_from_json(const nlohmann::json& j, const std::string& file,
                                 const std::string& path, const std::string& made_in) {
  const JsonObject o(j, file, path);
  PlannedRun r;
  r.workload = workload_from_json(o.object("workload"), made_in);
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
  if (at) {
    r = *at;
  } else if (!entries.empty()) {
    r = entries.front();
  }
  r.seq = seq;
  r.run.workload.seq = seq;
  if (r.run.workload.phase == "decode") r.run.workload.context = seq;
  if (!at) {  // shorter than anything planned: don't overlap
    r.run.spec = StrategySpec(StrategyKind::None);
    r.chunk_fractions.clear();
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
    const std::string schema = o.string_or("schema", "");
    throw InputError(path, "schema",
                     schema == "tpo.generate/1"
                         ? "is a generate report (tpo plan --scenario generate): it plans no "
                           "prompt lengths to look up; tpo validate --plan runs its prefills and "
                           "decode steps"
                         : "expected \"tpo.plan/1\" (is this a plan from `tpo plan`?)");
  }
  PlanFile p;
  p.path = path;
  const JsonObject opts = o.object("options");
  p.align = opts.integer_or("align", 64);
  p.profile_digest = o.string_or("profile_digest", "");
  p.made_in = o.string_or("made_in", "");
  if (!o.has("lookup") || !j.at("lookup").is_array() || j.at("lookup").empty()) {
    throw InputError(path, "lookup", "must be a non-empty array");
  }
  for (std::size_t i = 0; i < j.at("lookup").size(); ++i) {
    const std::string where = "lookup[" + std::to_string(i) + "]";
    const JsonObject e(j.at("lookup").at(i), path, where);
    PlanEntry pe;
    pe.where = where;
    pe.run_where = where + ".run";
    pe.seq = e.integer("seq_len");
    pe.run = e.has("run")
                 ? planned_run_from_json(e.raw().at("run"), path, e.field("run"), p.made_in)
                 : legacy_run(o, e, pe.seq);
    const bool decode = pe.run.workload.phase == "decode";
    const std::int64_t planned_at = decode ? pe.run.workload.context : pe.run.workload.seq;
    if (planned_at != pe.seq) {
      throw InputError(path, e.field("run"),
                       "is planned at " + std::to_string(planned_at) + " tokens but seq_len is " +
                           std::to_string(pe.seq));
    }
    if (e.raw().contains("chunk_fractions") && e.raw().at("chunk_fractions").is_array()) {
      for (const auto& f : e.raw().at("chunk_fractions")) {
        if (!f.is_number() || !(f.get<double>() > 0) || !std::isfinite(f.get<double>())) {
          throw InputError(path, e.field("chunk_fractions"), "must be positive numbers");
        }
        pe.chunk_fractions.push_back(f.get<double>());
      }
    }
    if (strategy(pe.run.spec.kind).uses_chunks() && !pe.chunk_fractions.empty() &&
        pe.chunk_fractions.size() != pe.run.spec.chunk_tokens.size()) {
      throw InputError(path, e.field("chunk_fractions"),
                       "has " + std::to_string(pe.chunk_fractions.size()) + " values for " +
                           std::to_string(pe.run.spec.chunk_tokens.size()) + " chunks");
    }
    pe.predicted_us = e.number("predicted_us");
    pe.none_us = e.number("none_us");
    pe.alternatives = alternatives_of(j, path, pe);
    if (!p.entries.empty() && pe.seq <= p.entries.back().seq) {
      throw InputError(path, e.field("seq_len"), "lookup entries must be sorted by seq_len");
    }
    p.entries.push_back(std::move(pe));
  }
  return p;
}

namespace {

// A generate report's phase run, checked to be that phase of that batch.
PlannedRun generation_run(const JsonObject& res, const std::string& key, const std::string& phase,
                          std::int64_t batch, const std::string& made_in) {
  if (!res.raw().contains(key)) {
    throw InputError(res.file(), res.field(key),
                     "missing: the report was written before tpo validate could run generate "
                     "reports (2026-12-04); make it again with tpo plan --scenario generate "
                     "--json");
  }
  PlannedRun r = planned_run_from_json(res.raw().at(key), res.file(), res.field(key), made_in);
  if (r.workload.phase != phase || r.workload.batch != batch || !r.workload.embed_head) {
    throw InputError(res.file(), res.field(key) + ".workload",
                     "must be a " + phase + " of batch " + std::to_string(batch) +
                         " with the embedding and LM head (embed_head true)");
  }
  return r;
}

}  // namespace

PlanFile load_points(const std::string& path) {
  const nlohmann::json j = read_json_file(path);
  const JsonObject o(j, path, "");
  const std::string schema = o.string_or("schema", "");
  if (schema != "tpo.generate/1") {
    if (schema != "tpo.plan/1") {
      throw InputError(path, "schema",
                       "expected \"tpo.plan/1\" (a plan: tpo plan --json) or \"tpo.generate/1\" "
                       "(a generate report: tpo plan --scenario generate --json)" +
                           (schema.empty() ? std::string() : ", not \"" + schema + "\""));
    }
    return load_plan(path);
  }
  PlanFile p;
  p.path = path;
  p.profile_digest = o.string_or("profile_digest", "");
  p.made_in = o.string_or("made_in", "");
  const JsonObject opts = o.object("options");
  p.align = opts.integer_or("align", 64);
  p.prompt = opts.integer("prompt");
  p.new_tokens = opts.integer("new_tokens");
  // The pick in each batch as `tpo plan` decides (reports without a threshold: its default).
  const double threshold = opts.number_or("threshold", 0.02, /*positive=*/false);
  if (!o.has("batches") || !j.at("batches").is_array() || j.at("batches").empty()) {
    throw InputError(path, "batches", "must be a non-empty array");
  }
  std::vector<std::int64_t> batches_seen;
  for (std::size_t i = 0; i < j.at("batches").size(); ++i) {
    const JsonObject b(j.at("batches").at(i), path, "batches[" + std::to_string(i) + "]");
    const std::int64_t batch = b.integer("batch");
    if (std::find(batches_seen.begin(), batches_seen.end(), batch) != batches_seen.end()) {
      throw InputError(path, b.field("batch"),
                       std::to_string(batch) + " appears twice: one entry per batch size");
    }
    batches_seen.push_back(batch);
    if (!b.has("results") || !b.raw().at("results").is_array() || b.raw().at("results").empty()) {
      throw InputError(path, b.field("results"), "must be a non-empty array");
    }
    const auto& results = b.raw().at("results");
    std::vector<GenerationPoint> pts;
    std::vector<double> prefill_us, step_us;
    double res_tps0 = 0;
    std::size_t pick = 0;
    for (std::size_t k = 0; k < results.size(); ++k) {
      const JsonObject res(results.at(k), path, b.field("results") + "[" + std::to_string(k) + "]");
      GenerationPoint g;
      g.batch = batch;
      g.where = b.field("results") + "[" + std::to_string(k) + "]";
      g.strategy = res.string("strategy");
      const StrategyDescriptor* sd = find_strategy(g.strategy);
      if (!sd) {
        throw InputError(path, res.field("strategy"),
                         "unknown strategy '" + g.strategy + "' (known: " + strategy_names() + ")");
      }
      // The speedups are over results[0]: none, as tpo writes it.
      if (k == 0 && sd->kind != StrategyKind::None) {
        throw InputError(
            path, res.field("strategy"),
            "'" + g.strategy + "': the first result must be none (the speedups' base)");
      }
      if (std::any_of(pts.begin(), pts.end(),
                      [&](const GenerationPoint& q) { return q.strategy == g.strategy; })) {
        throw InputError(path, res.field("strategy"),
                         "'" + g.strategy + "' appears twice in this batch");
      }
      g.prefill = generation_run(res, "prefill_run", "prefill", batch, p.made_in);
      g.decode = generation_run(res, "decode_run", "decode", batch, p.made_in);
      // What ran in each phase is the strategy, none where it fell back, or what it decodes as
      // (iso+ladder's prompt left whole is ladder; it decodes as ladder).
      const auto ran_ok = [&](const PlannedRun& r) {
        return r.spec.kind == sd->kind || r.spec.kind == StrategyKind::None ||
               r.spec.kind == sd->decode_as;
      };
      for (const auto& [key, run] :
           {std::pair<const char*, const PlannedRun*>{"prefill_run", &g.prefill},
            {"decode_run", &g.decode}}) {
        if (!ran_ok(*run)) {
          throw InputError(path, res.field(key) + ".strategy.name",
                           "'" + std::string(strategy_name(run->spec.kind)) + "' is not what " +
                               g.strategy +
                               " runs (itself, none where it falls back, or what it decodes as)");
        }
      }
      // Every strategy of a batch runs the same prefill and the same decode step: one point per
      // phase, measured alike.
      if (k > 0) {
        if (!(g.prefill.workload == pts[0].prefill.workload)) {
          throw InputError(path, res.field("prefill_run") + ".workload",
                           "differs from results[0]'s: every strategy of a batch prefills the "
                           "same prompt");
        }
        if (!(g.decode.workload == pts[0].decode.workload)) {
          throw InputError(path, res.field("decode_run") + ".workload",
                           "differs from results[0]'s: every strategy of a batch decodes at the "
                           "same context");
        }
      }
      g.predicted_speedup = res.number("speedup");
      prefill_us.push_back(res.number("prefill_us"));
      step_us.push_back(res.number("decode_step_us", false));
      // The figures agree with each other: tokens/s from the times, the speedup from tokens/s.
      const double tps = res.number("tokens_per_s");
      const double total = prefill_us.back() + step_us.back() * double(p.new_tokens - 1);
      const auto near = [](double a, double b) { return std::abs(a - b) <= 1e-6 * std::abs(b); };
      if (!near(tps, double(batch * p.new_tokens) / (total * 1e-6))) {
        throw InputError(path, res.field("tokens_per_s"),
                         "does not agree with prefill_us, decode_step_us and the batch's tokens "
                         "(batch x options.new_tokens / (prefill + (new_tokens - 1) steps))");
      }
      if (k > 0 && !near(g.predicted_speedup * res_tps0, tps)) {
        throw InputError(path, res.field("speedup"),
                         "does not agree with tokens_per_s over results[0]'s (none's)");
      }
      if (k == 0) res_tps0 = tps;
      pts.push_back(std::move(g));
      // The fastest predicted of the strategies that keep the model (generate cannot allow
      // others, as plan does only with --allow-arch-change), and none unless it beats none by
      // more than the threshold (until 2026-12-05 the fastest of all, by however little: a
      // model-changing strategy 0.02% ahead was the pick).
      if (sd->preserves_function && pts.back().predicted_speedup > pts[pick].predicted_speedup) {
        pick = k;
      }
    }
    if (keeps_none(1.0, pts[pick].predicted_speedup > 0 ? 1.0 / pts[pick].predicted_speedup : 1.0,
                   threshold)) {
      pick = 0;
    }
    if (pts[0].prefill.workload.seq != p.prompt) {
      throw InputError(path, pts[0].where + ".prefill_run.workload.seq",
                       std::to_string(pts[0].prefill.workload.seq) + ": the report's prompt is " +
                           std::to_string(p.prompt) + " (options.prompt)");
    }
    if (const std::int64_t mid = generation_middle_context(p.prompt, p.new_tokens);
        pts[0].decode.workload.context != mid) {
      throw InputError(path, pts[0].where + ".decode_run.workload.context",
                       std::to_string(pts[0].decode.workload.context) +
                           ": the middle of the decode steps of options.prompt " +
                           std::to_string(p.prompt) + " and options.new_tokens " +
                           std::to_string(p.new_tokens) + " is " + std::to_string(mid));
    }
    if (b.has("decode_context") && b.integer("decode_context") != pts[0].decode.workload.context) {
      throw InputError(path, pts[0].where + ".decode_run.workload.context",
                       std::to_string(pts[0].decode.workload.context) +
                           ": the batch's decode_context is " +
                           std::to_string(b.integer("decode_context")));
    }
    pts[pick].picked = true;
    // One point per phase: the pick's run, the others' (not none, not the pick's, once each)
    // its alternatives, fastest predicted first.
    // One new token: no decode step to measure.
    for (const bool decode : {false, true}) {
      if (decode && p.new_tokens < 2) {
        for (auto& g : pts) g.decode_point = GenerationPoint::npos;
        continue;
      }
      PlanEntry e;
      e.where = pts[pick].where;
      e.run_where = e.where + (decode ? ".decode_run" : ".prefill_run");
      e.run = decode ? pts[pick].decode : pts[pick].prefill;
      e.seq = decode ? e.run.workload.context : e.run.workload.seq;
      e.predicted_us = decode ? step_us[pick] : prefill_us[pick];
      e.none_us = decode ? step_us[0] : prefill_us[0];
      std::vector<std::tuple<PlannedRun, double, std::string>> alts;
      for (std::size_t k = 0; k < pts.size(); ++k) {
        const PlannedRun& r = decode ? pts[k].decode : pts[k].prefill;
        if (r.spec.kind == StrategyKind::None || r == e.run) continue;
        if (std::any_of(alts.begin(), alts.end(),
                        [&](const auto& a) { return std::get<0>(a) == r; })) {
          continue;
        }
        alts.emplace_back(r, decode ? step_us[k] : prefill_us[k],
                          pts[k].where + (decode ? ".decode_run" : ".prefill_run"));
      }
      std::stable_sort(alts.begin(), alts.end(), [](const auto& a, const auto& b) {
        return std::get<1>(a) < std::get<1>(b);
      });
      for (auto& [r, us, where] : alts) {
        e.alternatives.emplace_back(std::move(r), us);
        e.alternatives_where.push_back(std::move(where));
      }
      for (auto& g : pts) (decode ? g.decode_point : g.prefill_point) = p.entries.size();
      p.entries.push_back(std::move(e));
    }
    for (auto& g : pts) p.generation.push_back(std::move(g));
  }
  return p;
}

}  // namespace tpo::sim
