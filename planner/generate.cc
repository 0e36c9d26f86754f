// Generation scenario: prefill + decode steps per strategy and batch size.
#include "planner/generate.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iomanip>
#include <limits>
#include <mutex>
#include <sstream>
#include <thread>

#include "planner/plan.h"
#include "sim/error.h"
#include "sim/format.h"
#include "sim/json_io.h"
#include "sim/plan_file.h"
#include "sim/profile_cost.h"
#include "sim/report.h"
#include "sim/version.h"

namespace tpo::planner {

using sim::StrategyKind;
using sim::StrategySpec;

namespace {

std::vector<std::int64_t> parse_batches(const std::string& text) {
  const auto out = parse_int_list(text, "--batch", std::numeric_limits<std::int64_t>::max(),
                                  "a positive integer");
  if (out.empty()) throw InputError("--batch", text, "give at least one batch size");
  return out;
}

// Time of one graph, in ns.
std::int64_t time_of(const sim::Workload& w, const StrategySpec& spec, const sim::CostModel& cm,
                     sim::Engine& engine) {
  const sim::Schedule s = sim::build_schedule(w, spec);
  return engine.run(s, sim::cost_schedule(s, cm)).total_ns;
}

// The fastest variant in this phase; a function-preserving strategy that cannot beat `none` by
// more than `threshold` falls back to `none` (what the planner would answer). A model-changing one
// has no fallback: its model is different in every phase.
StrategySpec choose(const sim::Workload& w, StrategyKind kind, std::int64_t align,
                    std::int64_t max_chunks, double threshold, double chunk_gain,
                    const sim::CostModel& cm, sim::Engine& engine, bool* fell_back) {
  const StrategySpec none(StrategyKind::None);
  const std::int64_t none_ns = time_of(w, none, cm, engine);
  StrategySpec best = none;
  std::int64_t best_ns = std::numeric_limits<std::int64_t>::max();
  Evaluator ev(w, cm);
  std::vector<StrategySpec> specs;
  for (const auto& v : strategy_variants(ev, kind, align, max_chunks)) specs.push_back(v.spec);
  // A model-changing strategy that decodes as another (iso+ladder as ladder) has that one as
  // its one-chunk prefill: the same model, so a variant too (and the only one of a prompt too
  // short to cut).
  if (const StrategyKind one = sim::strategy(kind).decode_as;
      !sim::preserves_function(kind) && one != kind && w.phase == sim::Phase::Prefill) {
    specs.push_back(StrategySpec(one));
  }
  std::vector<std::int64_t> times;
  std::size_t pick = specs.size();
  for (std::size_t i = 0; i < specs.size(); ++i) {
    times.push_back(time_of(w, specs[i], cm, engine));
    if (times[i] < best_ns) {
      best_ns = times[i];
      pick = i;
    }
  }
  if (pick < specs.size()) {
    // A chunk more only where it pays (--chunk-gain), as plan picks; a strategy that keeps the
    // model is held to the threshold below, so never stepped down below it.
    pick = sim::fewest_paying_chunks(
        pick, specs.size(), [&](std::size_t i) { return specs[i].chunk_tokens.size(); },
        [&](std::size_t i) { return static_cast<double>(times[i]); },
        [&](std::size_t i, std::size_t p) { return specs[i].kind == specs[p].kind; },
        sim::preserves_function(kind) ? static_cast<double>(none_ns) : 0.0, threshold, chunk_gain);
    best = specs[pick];
    best_ns = times[pick];
  }
  // None for a strategy that is not none: it did not apply (microbatch of one request) or did
  // not beat none: marked as a fallback either way.
  *fell_back = kind != StrategyKind::None && best.kind == StrategyKind::None;
  if (best.kind == StrategyKind::None) return none;
  // As plan answers: it must beat none by more than the threshold.
  if (sim::preserves_function(kind) &&
      sim::keeps_none(static_cast<double>(none_ns), static_cast<double>(best_ns), threshold)) {
    *fell_back = true;
    return none;
  }
  return best;
}

std::string phase_label(const StrategySpec& s, bool fell_back, StrategyKind asked) {
  const sim::StrategyDescriptor& d = sim::strategy(s.kind);
  std::string t = d.name;
  // iso+ladder's prompt left whole (one chunk) is ladder: said so, not shown as plain ladder.
  if (asked != s.kind && s.kind != StrategyKind::None && !sim::preserves_function(asked)) {
    t += " (uncut)";
  }
  if (d.uses_chunks()) {
    t += " (" + join_tokens(s.chunk_tokens) + ")";
  } else if (d.uses_pieces()) {
    t += " (" + std::to_string(s.pieces) + ")";
  } else if (d.uses_ladder_layers() && s.ladder_layers > 0) {
    t += " (last " + std::to_string(s.ladder_layers) + ")";
  }
  if (fell_back) t += "*";
  return t;
}

GenerateResult run_one(const sim::Workload& prefill_w, StrategyKind kind, std::int64_t new_tokens,
                       std::int64_t align, std::int64_t max_chunks, double threshold,
                       double chunk_gain, const sim::CostModel& cm) {
  sim::Engine engine;
  GenerateResult r;
  r.strategy = sim::strategy_name(kind);
  r.preserves_function = sim::preserves_function(kind);
  bool fb = false;
  const StrategySpec pre =
      choose(prefill_w, kind, align, max_chunks, threshold, chunk_gain, cm, engine, &fb);
  r.prefill_strategy = phase_label(pre, fb, kind);
  r.prefill_spec = pre;
  if (sim::strategy(pre.kind).uses_chunks()) {
    r.detail = join_tokens(pre.chunk_tokens);
  }
  r.prefill_us = static_cast<double>(time_of(prefill_w, pre, cm, engine)) / 1e3;
  // Decode: prefill produced the first new token; new_tokens - 1 steps follow, at contexts
  // prompt + 1 .. prompt + new_tokens - 1. iso+ladder decodes with ladder.
  const std::int64_t steps = new_tokens - 1;
  sim::Workload dw = prefill_w;
  dw.phase = sim::Phase::Decode;
  dw.seq = 1;
  dw.context = sim::generation_middle_context(prefill_w.seq, new_tokens);
  const StrategyKind dkind = sim::strategy(kind).decode_as;
  const StrategySpec dec =
      choose(dw, dkind, align, max_chunks, threshold, chunk_gain, cm, engine, &fb);
  r.decode_strategy = phase_label(dec, fb, dkind);
  r.decode_spec = dec;
  double sum_us = 0;
  if (steps > 0) {
    // Step time sampled at 9 contexts and interpolated linearly in between.
    std::vector<std::pair<std::int64_t, double>> samples;
    for (int i = 0; i <= 8; ++i) {
      const std::int64_t t = 1 + (steps - 1) * i / 8;
      if (!samples.empty() && samples.back().first == t) continue;
      dw.context = prefill_w.seq + t;
      samples.emplace_back(t, static_cast<double>(time_of(dw, dec, cm, engine)) / 1e3);
    }
    std::size_t seg = 0;
    for (std::int64_t t = 1; t <= steps; ++t) {
      while (seg + 1 < samples.size() && samples[seg + 1].first < t) ++seg;
      if (samples.size() == 1) {
        sum_us += samples[0].second;
        continue;
      }
      const auto [t0, y0] = samples[seg];
      const auto [t1, y1] = samples[std::min(seg + 1, samples.size() - 1)];
      sum_us += t1 == t0
                    ? y0
                    : y0 + (y1 - y0) * static_cast<double>(t - t0) / static_cast<double>(t1 - t0);
    }
    r.decode_step_us = sum_us / static_cast<double>(steps);
  }
  r.total_us = r.prefill_us + sum_us;
  r.tokens_per_s = static_cast<double>(prefill_w.batch * new_tokens) / (r.total_us * 1e-6);
  return r;
}

}  // namespace

GenerateReport run_generate(const GenerateOptions& o) {
  const PlanOptions& p = o.plan;
  if (o.prompt < 1) throw InputError("--prompt", std::to_string(o.prompt), "must be >= 1");
  if (o.new_tokens < 1) {
    throw InputError("--new-tokens", std::to_string(o.new_tokens), "must be >= 1");
  }
  sim::check_threshold(p.threshold, "--threshold");
  sim::check_threshold(p.chunk_gain, "--chunk-gain");
  if (!p.json_path.empty()) check_writable(p.json_path, "--json");
  const auto batches = parse_batches(o.batches);
  const auto kinds = parse_strategy_list(p.strategies);
  sim::WorkloadOptions so = p.workload;
  so.phase = "prefill";
  so.context = -1;
  so.seq = o.prompt;
  so.embed_head = true;  // the LM head is a real part of every decode step
  GenerateReport rep;
  rep.options = o;
  std::vector<sim::Workload> ws;
  for (auto b : batches) {
    so.batch = b;
    // Checked up front, prefill and the last decode step alike, and blamed on the options
    // this scenario has: a prompt too long is --prompt's, a context too long --new-tokens'.
    try {
      ws.push_back(sim::make_workload(so));
      sim::Workload last = ws.back();
      last.phase = sim::Phase::Decode;
      last.seq = 1;
      last.context = o.prompt + o.new_tokens - 1;  // the last step's (prompt + 1 .. this)
      sim::validate_workload(last);
    } catch (const FieldError& e) {
      if (e.name() == "seq") throw InputError("--prompt", std::to_string(o.prompt), e.problem());
      if (e.name() == "context") {
        throw InputError("--new-tokens", std::to_string(o.new_tokens),
                         "the last step's context (" + std::to_string(o.prompt + o.new_tokens - 1) +
                             " tokens): " + e.problem());
      }
      throw;
    }
    GenerateBatch gb;
    gb.batch = b;
    gb.prefill = sim::explicit_options(so, ws.back());  // every field explicit (no context -1)
    gb.decode = so;
    gb.decode.phase = "decode";
    gb.decode.context = sim::generation_middle_context(o.prompt, o.new_tokens);
    gb.decode.seq = gb.decode.context;
    gb.decode.layers = ws.back().layers;  // explicit, as the prefill's
    gb.results.resize(kinds.size());
    rep.batches.push_back(std::move(gb));
  }
  rep.model_name = ws.front().model.name;
  rep.hardware_name = ws.front().hardware.name;
  rep.hardware_label = sim::hardware_label(ws.front().hardware);
  rep.cpu = ws.front().hardware.is_cpu;
  rep.clock = sim::sm_clock_text(ws.front().hardware);
  rep.layers = ws.front().layers;
  const auto cm_ptr = sim::make_cost_model(ws.front(), p.workload.profile);
  const sim::CostModel& cm = *cm_ptr;
  rep.cost_model = cm.name();
  rep.overlap_model = cm.overlap_model();
  rep.notes = sim::model_notes(ws.front().model, o.prompt + o.new_tokens, ws.front().layers,
                               /*lm_head=*/true);
  rep.execution = sim::execution_json(cm.exec(), cm.launch());
  rep.allreduce_note = cm.allreduce_text(ws.front());
  if (rep.cost_model == "analytical") {
    if (!rep.allreduce_note.empty())
      rep.allreduce_note +=
          "; decode's small all-reduces are latency-bound, and the latency "
          "depends on the all-reduce implementation (published on 8x Hopper: one-kernel custom "
          "~6-9 us, NCCL ~16-20 us for 512 B-512 KiB; results/independent/README.md)";
  }
  // Jobs (batch, strategy) on a small pool; each writes its own slot, so the result does not
  // depend on the thread count.
  run_jobs(batches.size() * kinds.size(), p.threads, [&](std::size_t j) {
    const std::size_t bi = j / kinds.size(), ki = j % kinds.size();
    rep.batches[bi].results[ki] = run_one(ws[bi], kinds[ki], o.new_tokens, p.align, p.max_chunks,
                                          p.threshold, p.chunk_gain, cm);
  });
  for (auto& b : rep.batches) {
    const double base = b.results[0].tokens_per_s;
    for (auto& r : b.results) r.speedup = base > 0 ? r.tokens_per_s / base : 0;
  }
  return rep;
}

void print_generate(std::ostream& os, const GenerateReport& r) {
  const auto& o = r.options;
  os << "tpo plan --scenario generate — " << r.model_name << " on " << r.hardware_label << ", TP "
     << o.plan.workload.tp << ", prompt " << o.prompt << " + " << o.new_tokens << " new tokens, "
     << r.layers << " layers" << r.clock
     << (o.plan.workload.rope == "none" ? ", no rotary kernel (--rope none)" : "")
     << (o.plan.workload.add_norm == "separate"
             ? ", residual add and norm apart (--add-norm separate)"
             : "")
     << (o.plan.workload.allreduce_fusion == "add-norm"
             ? ", all-reduces add and normalize (--allreduce-fusion add-norm)"
             : "")
     << "; with the embedding, final norm and LM head ("
     << (o.plan.workload.vocab == "replicated" ? "whole on every GPU: --vocab replicated; " : "")
     << "a sweep's prefill leaves them out)\n";
  os << "predicted by the " << r.cost_model << " cost model, "
     << r.execution.value("mode", std::string("queued"))
     << " execution (not measured); tokens/s = batch x new tokens / "
        "(prefill + "
     << o.new_tokens - 1 << " decode steps)\n";
  if (r.execution.value("mode", std::string("queued")) == "queued") {
    os << "launch time hidden; serving engines replay decode steps as CUDA graphs: --exec graph "
          "(or eager) charges launches\n";
  }
  if (!r.allreduce_note.empty()) os << r.allreduce_note << "\n";
  if (r.options.plan.workload.tp > 1 && !r.overlap_model.empty()) {
    os << "overlap: " << r.overlap_model << "\n";
  }
  sim::print_notes(os, r.notes);
  // The chunk rule is said where a strategy that cuts the prompt was compared.
  bool cuts = false;
  for (const auto& b : r.batches) {
    for (const auto& x : b.results) {
      cuts = cuts || sim::strategy(sim::parse_strategy_name(x.strategy)).uses_chunks();
    }
  }
  os << "each strategy runs its best variant in each phase; * = it could not beat none there by "
        "more than "
     << fmt("%.1f%%", 100 * o.plan.threshold)
     << " (--threshold), or is not applicable (microbatch needs 2 requests), so none ran; ";
  if (cuts && o.plan.max_chunks > 2) {
    os << "a prompt is cut in a chunk more only where that beats one fewer by more than "
       << fmt("%.1f%%", 100 * o.plan.chunk_gain) << " (--chunk-gain); ";
  }
  os << "(uncut) = iso+ladder with the prompt in one chunk, i.e. ladder; ISO cuts prompts only, "
        "so iso+ladder decodes as ladder\n";
  const auto& f = fmt;
  for (const auto& b : r.batches) {
    os << "\nbatch " << b.batch << "\n";
    os << std::left << std::setw(16) << "strategy" << std::setw(36) << "prefill / decode"
       << std::right << std::setw(12) << "prefill_ms" << std::setw(16) << "decode_step_ms"
       << std::setw(12) << "tokens/s" << std::setw(9) << "speedup"
       << "  model\n";
    for (const auto& x : b.results) {
      const std::string phases = x.prefill_strategy + " / " + x.decode_strategy;
      os << std::left << std::setw(16) << x.strategy << std::setw(36) << phases << std::right
         << std::setw(12) << f("%.3f", x.prefill_us / 1e3) << std::setw(16)
         << f("%.4f", x.decode_step_us / 1e3) << std::setw(12) << f("%.1f", x.tokens_per_s)
         << std::setw(9) << f("%.3fx", x.speedup) << "  "
         << (x.preserves_function ? "same" : "changed") << "\n";
    }
  }
  // How to measure what this prices, on the user's GPUs: `validate --plan` runs each batch's
  // prefill and one decode step at the middle step's context (the steps are timed at contexts
  // around it), with the embedding and LM head, and compares tokens/s.
  const std::int64_t mid = sim::generation_middle_context(o.prompt, o.new_tokens);
  const std::string& json = o.plan.json_path;
  os << "\nto measure it on " << (r.cpu ? "this CPU" : "your GPUs")
     << (o.new_tokens < 2
             ? std::string(" (each batch's prefill; one new token: no decode step)")
             : " (each batch's prefill and the decode step at the middle step's context, " +
                   std::to_string(mid) + " tokens; tokens/s from the two)")
     << ": tpo validate --backend " << (r.cpu ? "cpu" : "cuda") << " --plan "
     << (json.empty() || json == "-" ? "GEN.json" : json) << (r.layers > 2 ? " --layers 2" : "");
  // Every other strategy of the table too: each phase's pick is measured, none beside every
  // case, and the others are its alternatives (at most every strategy but none and the pick).
  std::size_t others = 0;
  for (const auto& b : r.batches) {
    const bool none_picked =
        std::none_of(b.results.begin() + 1, b.results.end(),
                     [&](const auto& x) { return x.speedup > b.results[0].speedup; });
    others = std::max(others, b.results.size() - (none_picked ? 1 : 2));
  }
  if (others > 0) os << " --alternatives " << others;
  os << (r.cpu ? "" : " (and --comm emulated on one GPU)")
     << (json.empty() || json == "-" ? "; GEN.json: this scenario saved with --json GEN.json" : "")
     << "\n";
}

nlohmann::ordered_json generate_json(const GenerateReport& r) {
  using ojson = nlohmann::ordered_json;
  const auto& o = r.options;
  ojson j = sim::report_header("tpo.generate/1", "predicted");
  j["cost_model"] = r.cost_model;
  j["overlap_model"] = r.overlap_model;
  j["notes"] = r.notes;
  j["execution"] = r.execution;
  j["options"] = ojson{{"model", o.plan.workload.model},
                       {"hardware", o.plan.workload.hardware},
                       {"tp", o.plan.workload.tp},
                       {"prompt", o.prompt},
                       {"new_tokens", o.new_tokens},
                       {"batch", o.batches},
                       {"strategies", o.plan.strategies},
                       {"align", o.plan.align},
                       {"layers", o.plan.workload.layers},
                       {"profile", o.plan.workload.profile},
                       {"sm_clock", o.plan.workload.sm_clock},
                       {"exec", o.plan.workload.exec},
                       {"rope", o.plan.workload.rope},
                       {"vocab", o.plan.workload.vocab},
                       {"add_norm", o.plan.workload.add_norm},
                       {"allreduce_fusion", o.plan.workload.allreduce_fusion},
                       {"threshold", o.plan.threshold},
                       {"chunk_gain", o.plan.chunk_gain}};
  j["model"] = r.model_name;
  j["hardware"] = r.hardware_name;
  j["num_layers"] = r.layers;
  j["embed_head"] = true;
  // The profile as it was planned with, and where relative paths were typed: `tpo validate
  // --plan` reads them as it reads a plan's.
  if (!o.plan.workload.profile.empty()) {
    j["profile_digest"] = file_digest(o.plan.workload.profile, "--profile");
  }
  if (const std::string made_in = sim::made_in_for(o.plan.workload); !made_in.empty()) {
    j["made_in"] = made_in;
  }
  ojson batches = ojson::array();
  for (const auto& b : r.batches) {
    ojson res = ojson::array();
    for (const auto& x : b.results) {
      res.push_back(ojson{{"strategy", x.strategy},
                          {"prefill_strategy", x.prefill_strategy},
                          {"decode_strategy", x.decode_strategy},
                          {"detail", x.detail},
                          {"preserves_function", x.preserves_function},
                          {"prefill_us", x.prefill_us},
                          {"decode_step_us", x.decode_step_us},
                          {"total_us", x.total_us},
                          {"tokens_per_s", x.tokens_per_s},
                          {"speedup", x.speedup},
                          {"prefill_run", sim::planned_run_json({b.prefill, x.prefill_spec})},
                          {"decode_run", sim::planned_run_json({b.decode, x.decode_spec})}});
    }
    batches.push_back(ojson{
        {"batch", b.batch}, {"decode_context", b.decode.context}, {"results", std::move(res)}});
  }
  j["batches"] = std::move(batches);
  return j;
}

}  // namespace tpo::planner
