// The workload and strategy flags, bound once for every subcommand that has them, and the
// mapping from a core field name (in a FieldError) back to its flag.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "sim/config_paths.h"
#include "sim/error.h"
#include "sim/json_io.h"

namespace tpo::cli {

std::string flag_for(const std::string& field) {
  if (field == "chunk_tokens") return "--split";
  std::string f = "--" + field;
  for (char& c : f) c = c == '_' ? '-' : c;
  return f;
}

namespace {

// Edits between a and b: insertions, deletions, substitutions and swaps of two neighbours
// (paln -> plan is one).
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string nearest_hint(const std::string& word, const std::vector<std::string>& names) {
  // Options compare without their dashes.
  const auto bare = [](const std::string& s) { return s.substr(s.rfind("--", 0) == 0 ? 2 : 0); };
  const std::string w = bare(word);
  // The start of exactly one name, of 3 letters or more (sim, --strat).
  std::string prefixed;
  int starts = 0;
  for (const auto& name : names) {
    if (w.size() >= 3 && bare(name).rfind(w, 0) == 0) {
      prefixed = name;
      ++starts;
    }
  }
  if (starts == 1) return " (did you mean " + prefixed + "?)";
  std::string best;
  std::size_t best_d = std::string::npos;
  for (const auto& name : names) {
    const std::size_t d = edit_distance(w, bare(name));
    if (d < best_d) {
      best_d = d;
      best = name;
    }
  }
  // A guess only when it is close: at most one edit in three letters (--stratgy, simluate).
  if (best.empty() || best_d > std::max<std::size_t>(1, w.size() / 3)) return "";
  return " (did you mean " + best + "?)";
}

namespace {

// The command the arguments were given to: the deepest subcommand parsed; `path` gets its
// name as typed ("tpo profile import-nccl-tests").
const CLI::App* parsed_command(const CLI::App& app, std::string* path = nullptr) {
  const CLI::App* at = &app;
  if (path) *path = at->get_name();
  for (bool deeper = true; deeper;) {
    deeper = false;
    for (const CLI::App* sub : at->get_subcommands()) {
      at = sub;
      if (path) *path += " " + sub->get_name();
      deeper = true;
      break;
    }
  }
  return at;
}

}  // namespace

std::string unknown_option_hint(const CLI::App& app) {
  std::string path;
  const CLI::App* at = parsed_command(app, &path);
  std::string unknown;
  for (const std::string& arg : at->remaining()) {
    if (arg.rfind("--", 0) == 0 && arg.substr(0, arg.find('=')).size() > 2) {
      unknown = arg.substr(0, arg.find('='));
      break;
    }
  }
  if (unknown.empty()) return "";
  std::vector<std::string> names;
  for (const CLI::Option* opt : at->get_options()) {
    for (const std::string& name : opt->get_lnames()) names.push_back("--" + name);
  }
  std::string hint = "unknown option " + unknown + " for `" + path + "`";
  if (const std::string near = nearest_hint(unknown, names); !near.empty()) {
    hint += near;
  } else if ((unknown == "--out" || unknown == "--output" || unknown == "--o") &&
             at->get_option_no_throw("--json") != nullptr) {
    hint += " (the report is written by --json FILE)";
  }
  return hint + "; `" + path + " --help` lists its options";
}

namespace {
constexpr const char* kOutputOptions[] = {"--json", "--trace", "--csv",
                                          "--svg",  "--out",   "--hardware-out"};
}  // namespace

void refuse_output_over_input(const CLI::App& app) {
  namespace fs = std::filesystem;
  const CLI::App* at = parsed_command(app);
  // Every file an option or argument names that is not an output, shipped names resolved.
  std::vector<std::pair<std::string, std::string>> inputs;  // option, path
  for (const CLI::Option* opt : at->get_options()) {
    const std::string name =
        opt->get_lnames().empty() ? opt->get_name(true) : "--" + opt->get_lnames().front();
    if (std::find(std::begin(kOutputOptions), std::end(kOutputOptions), name) !=
        std::end(kOutputOptions)) {
      continue;
    }
    // Left at its default, --model and --hardware still read a file (the shipped one).
    std::vector<std::string> values = opt->results();
    if (opt->count() == 0 && (name == "--model" || name == "--hardware") &&
        !opt->get_default_str().empty()) {
      values = {opt->get_default_str()};
    }
    for (const std::string& v : values) {
      std::string path = v;
      try {
        if (name == "--model") path = sim::resolve_config("models", v, "model");
        if (name == "--hardware") path = sim::resolve_config("hardware", v, "hardware");
      } catch (const std::exception&) {
        continue;  // the command reports it
      }
      std::error_code ec;
      if (fs::is_regular_file(path, ec)) inputs.emplace_back(name, path);
    }
  }
  for (const char* out : kOutputOptions) {
    const CLI::Option* opt = at->get_option_no_throw(out);
    if (opt == nullptr || opt->count() == 0) continue;
    const std::string given = opt->as<std::string>();
    std::error_code ec;
    if (given.empty() || !fs::is_regular_file(given, ec)) continue;  // new, or not a file
    for (const auto& [option, path] : inputs) {
      // Updating a hardware file in place with an imported table is meant.
      if (std::string(out) == "--hardware-out" && option == "--hardware") continue;
      if (fs::equivalent(given, path, ec)) {
        throw InputError(
            out, given,
            "is also the input " +
                (option.starts_with("--") ? "given to " + option : std::string("file")) + " (" +
                path +
                "); writing it would replace that input: give "
                "another file name");
      }
    }
  }
}

bool summary_to_stderr_if_report_on_stdout(const CLI::App& app) {
  // The command the arguments were given to, and its output options that go to descriptor 1.
  const CLI::App* at = parsed_command(app);
  // The descriptor an output option writes to (-1: a file, or a path the command reports).
  const auto fd_of = [&](const char* name) {
    const CLI::Option* opt = at->get_option_no_throw(name);
    if (opt == nullptr || opt->count() == 0) return -1;
    try {
      return output_target(opt->as<std::string>(), name).fd;
    } catch (const InputError&) {
      return -1;
    }
  };
  for (const char* name : kOutputOptions) {
    if (fd_of(name) != 1) continue;
    // The summary then goes to standard error: an output there would be mixed with it.
    for (const char* other : kOutputOptions) {
      if (fd_of(other) == 2) {
        throw InputError(other, at->get_option(other)->as<std::string>(),
                         std::string("goes to standard error, where the text summary goes while ") +
                             name + " writes to standard output: give a file name");
      }
    }
    std::cout.flush();
    std::cout.rdbuf(std::cerr.rdbuf());
    return true;
  }
  return false;
}

void bind_workload(CLI::App* sub, sim::WorkloadOptions* w, const WorkloadFlags& f) {
  sub->add_option("--model", w->model,
                  "Shipped model name (see configs/models), a path to a tpo model JSON, a "
                  "Hugging Face config.json, or a model's folder holding one (a path has a '/')")
      ->capture_default_str();
  sub->add_option("--hardware", w->hardware,
                  "Shipped hardware name (see configs/hardware) or a path to a hardware JSON")
      ->capture_default_str();
  sub->add_option("--tp", w->tp, "Tensor-parallel degree (GPUs sharing each layer)")
      ->capture_default_str();
  if (f.phase_batch_context) {
    sub->add_option("--phase", w->phase,
                    "prefill (a batch of prompts) or decode (one token per request)")
        ->capture_default_str();
    sub->add_option("--context", w->context,
                    "Tokens already in each request's KV cache (prefill default 0; decode "
                    "default --seq)");
  }
  if (f.seq) {
    sub->add_option("--batch", w->batch, "Requests in the batch")->capture_default_str();
    sub->add_option("--seq", w->seq,
                    "Prefill: prompt tokens per request. Decode: the context length when "
                    "--context is not given")
        ->capture_default_str();
  }
  if (f.layers) {
    sub->add_option("--layers", w->layers, "Only the first N layers (0 = all)")
        ->capture_default_str();
  }
  if (f.embed_head) {
    sub->add_flag("--embed-head", w->embed_head,
                  "Include the embedding, final norm and LM head (last token of each request)");
  }
  if (f.emulate) {
    sub->add_option("--emulate", w->emulate,
                    "Links of another machine: every all-reduce is priced (and, in validate "
                    "--comm emulated, lasts) as on this hardware's links, compute as on "
                    "--hardware's GPUs (default: --hardware's own; validate --plan: the plan's)");
  }
  if (f.comm_ctas) {
    sub->add_option(
           "--comm-ctas", w->comm_ctas,
           "SMs (CTAs) each all-reduce kernel holds: NCCL's CTA budget, or the "
           "emulated copy kernel's CTAs (0 = the hardware file's default, 16; it changes a "
           "prediction only where the hardware file has a contention model, e.g. "
           "h200x8)")
        ->capture_default_str();
  }
  if (f.sm_clock) {
    sub->add_option(
           "--sm-clock", w->sm_clock,
           "The GPUs' SM clock in MHz when locked or capped (nvidia-smi -lgc): GEMM and "
           "attention rates scale from the clock the hardware file's peak is quoted at "
           "(gpu.peak_clock_mhz); memory bandwidth, the L2 rate and per-kernel times are "
           "held (0 = as quoted; the analytical model's compute only: refused with a profile "
           "that measured compute)")
        ->capture_default_str();
  }
  if (f.exec) {
    sub->add_option("--exec", w->exec,
                    "How the schedule reaches the GPU: queued (the whole schedule queued before "
                    "the GPU starts; launch time hidden), eager (one host launch call per op, "
                    "issued in order; an op waits for its launch) or graph (one CUDA graph "
                    "launch); launch costs from the profile or the hardware file. eager charges "
                    "the CUDA launch calls only, not a framework's Python and dispatch time "
                    "around them (as vLLM's --enforce-eager spends)")
        ->capture_default_str();
  }
  if (f.rope) {
    sub->add_option("--rope", w->rope,
                    "Rotary position embeddings: kernel (their own memory-bound kernel after "
                    "each qkv GEMM, as vLLM and SGLang run them) or none (not run or timed, as "
                    "an engine that fuses them into attention costs about nothing for them)")
        ->capture_default_str();
  }
  if (f.add_norm) {
    sub->add_option("--add-norm", w->add_norm,
                    "A residual add and the norm after it: fused (one kernel adds and "
                    "normalizes, as vLLM's and SGLang's fused_add_rms_norm and torch.compile run "
                    "them) or separate (an add kernel, then the norm's own, as Hugging Face "
                    "transformers' eager forward runs them)")
        ->capture_default_str();
  }
  if (f.add_norm) {
    sub->add_option(
           "--allreduce-fusion", w->allreduce_fusion,
           "What each all-reduce's kernel also does: none (the residual add and norm "
           "run on the compute stream, vLLM's and SGLang's default) or add-norm (it adds "
           "the reduced output to the residual and, with --add-norm fused, runs the next norm, as "
           "TensorRT-LLM's "
           "fused all-reduce, FlashInfer's all-reduce fusion and TokenWeave do; a "
           "ladder-delayed add stays a kernel of its own)")
        ->capture_default_str();
  }
  if (f.embed_head || f.vocab) {
    sub->add_option("--vocab", w->vocab,
                    std::string("The embedding and LM head (") +
                        (f.embed_head ? "with --embed-head" : "with --scenario generate") +
                        "): sharded (vocab-parallel as vLLM runs them: an all-reduce after "
                        "the embedding, the logits gathered) or replicated (whole on every GPU, "
                        "no collective: gpt-fast)")
        ->capture_default_str();
  }
  if (f.profile) {
    sub->add_option("--profile", w->profile,
                    "Use op costs measured by `tpo profile` (FILE); the analytical model fills "
                    "what the profile lacks");
  }
}

void bind_strategy(CLI::App* sub, sim::StrategyOptions* s) {
  std::string names;
  for (const auto& d : sim::strategies()) names += std::string(names.empty() ? "" : " | ") + d.name;
  sub->add_option("--strategy", s->strategy, names)->capture_default_str();
  sub->add_option("--chunks", s->chunks,
                  "iso: number of chunks (default 2; even split unless --split is given)");
  sub->add_option("--split", s->split,
                  "iso: chunk sizes as token counts summing to --seq (1792,2304) or ratios "
                  "summing to 1 (0.45,0.55)");
  sub->add_option("--ladder-layers", s->ladder_layers,
                  "ladder: convert only the last N layers (0 = all)")
      ->capture_default_str();
  sub->add_option("--pieces", s->pieces, "gemm-split: pieces of each block's last GEMM")
      ->capture_default_str();
}

void check_given(const sim::WorkloadOptions& w, const sim::StrategyOptions& s, const CLI::App& sub,
                 bool compare) {
  auto given = [&](const char* name) { return sub.count(name) > 0; };
  if (given("--context") && w.context < 0) {
    throw InputError("--context", std::to_string(w.context), "must be >= 0");
  }
  if (w.phase == "decode" && given("--seq") && given("--context")) {
    throw InputError("--seq", std::to_string(w.seq),
                     "in decode --seq only stands in for --context; give one of them");
  }
  if (given("--chunks") && s.chunks < 2) {
    throw InputError("--chunks", std::to_string(s.chunks), "must be 2 or more");
  }
  if (s.pieces < 2 || s.pieces > 64) {
    throw InputError("--pieces", std::to_string(s.pieces), "must be between 2 and 64");
  }
  if (s.ladder_layers < 0) {
    throw InputError("--ladder-layers", std::to_string(s.ladder_layers), "must be >= 0");
  }
  if (compare) {
    // --compare runs every strategy (--chunks, --split, --pieces and --ladder-layers shape
    // theirs): one named would be ignored.
    if (given("--strategy")) {
      throw InputError("--strategy", s.strategy,
                       "does not apply with --compare, which runs every strategy; drop one of "
                       "them");
    }
    return;
  }
  const sim::StrategyDescriptor& d = sim::strategy(sim::parse_strategy_name(s.strategy));
  auto users = [](bool (sim::StrategyDescriptor::*uses)() const) {
    std::string t;
    for (const auto& x : sim::strategies()) {
      if ((x.*uses)()) t += std::string(t.empty() ? "" : " or ") + x.name;
    }
    return t;
  };
  if (!d.uses_chunks() && (given("--chunks") || given("--split"))) {
    throw InputError(given("--split") ? "--split" : "--chunks", "",
                     "applies to --strategy " + users(&sim::StrategyDescriptor::uses_chunks) +
                         ", not " + s.strategy);
  }
  if (!d.uses_ladder_layers() && given("--ladder-layers")) {
    throw InputError(
        "--ladder-layers", "",
        "applies to --strategy " + users(&sim::StrategyDescriptor::uses_ladder_layers));
  }
  if (!d.uses_pieces() && given("--pieces")) {
    throw InputError("--pieces", "",
                     "applies to --strategy " + users(&sim::StrategyDescriptor::uses_pieces));
  }
}

}  // namespace tpo::cli
