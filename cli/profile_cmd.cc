// `tpo profile`: measure op and interference costs on this machine (cpu or cuda backend),
// `tpo profile import-nccl-tests` and `import-allreduce`: turn nccl-tests output, or a CSV of one's
// own all-reduce times, into a profile's comm section or a hardware file's all-reduce table.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/gpu_handoff.h"
#include "profiler/fit.h"
#include "profiler/profile_run.h"
#include "sim/config_paths.h"
#include "sim/error.h"
#include "sim/hardware.h"
#include "sim/json_io.h"
#include "sim/profile.h"
#include "sim/report.h"
#include "sim/version.h"

namespace tpo::cli {

namespace {

struct AccuracyCli {
  std::vector<std::string> files;
  std::string hardware;
  std::string json;
};

// The analytical model of a hardware file against the measurements committed in profiles.
int run_accuracy(const AccuracyCli& c) {
  if (!c.json.empty()) check_writable(c.json, "--json");
  nlohmann::ordered_json report = sim::report_header("tpo.accuracy/1", "predicted and measured");
  report["profiles"] = nlohmann::ordered_json::array();
  for (const auto& f : c.files) {
    const sim::Profile p = sim::load_profile(f);
    const std::string hw_name = !c.hardware.empty()
                                    ? c.hardware
                                    : JsonObject(p.options, f, "options").string_or("hardware", "");
    if (hw_name.empty()) {
      throw InputError("--hardware", "", f + " does not say its hardware; name one");
    }
    const sim::HardwareConfig hw = sim::load_hardware(hw_name);
    const std::string device =
        p.device.value("name", p.device.value("backend", std::string("an unnamed device")));
    // A CPU's measurements against a GPU's analytical model (or the other way) say nothing
    // about either: refused, as simulate refuses the pair.
    const bool measured_on_cpu = p.device.value("backend", std::string()) == "cpu";
    if (p.device.contains("backend") && measured_on_cpu != hw.is_cpu) {
      throw InputError(!c.hardware.empty() ? "--hardware" : f, hw_name,
                       std::string("is a ") + (hw.is_cpu ? "CPU" : "GPU") + " hardware file, but " +
                           f + " was measured on a " + (measured_on_cpu ? "CPU" : "GPU") +
                           ": compare a profile with the hardware file of the machine it ran on");
    }
    const std::string measured_for = JsonObject(p.options, f, "options").string_or("hardware", "");
    if (!measured_for.empty() && measured_for != hw.name && measured_for != hw.origin) {
      std::cout << "note: " << f << " was profiled for hardware '" << measured_for
                << "'; this compares it with " << hw.name << "'s analytical model\n";
    }
    std::cout << f << " (" << (p.model.empty() ? std::string("links only") : p.model) << ", TP "
              << p.tp << ", measured on " << device << ")";
    nlohmann::json t =
        profiler::analytical_vs_measured(hw, p.tp, profiler::measurements_of(p), std::cout);
    report["profiles"].push_back({{"profile", f},
                                  {"model", p.model},
                                  {"tp", p.tp},
                                  {"device", device},
                                  {"hardware", hw.name},
                                  {"summary", t.at("summary")},
                                  {"points", t.at("points")}});
  }
  if (!c.json.empty()) {
    write_file_atomic(c.json, report.dump(1) + "\n", "--json");
    std::cout << "wrote " << output_name(c.json) << "\n";
  }
  return 0;
}

struct ImportCli {
  std::string file, hardware, out, hardware_out;
  std::int64_t ranks = 0;
  bool in_place = false;
  bool csv = false;  // import-allreduce: a CSV of one's own times, not nccl-tests output
  std::string note;  // the CSV's first comment line (where the times are from)
};

// What the imported times are, for messages and source texts.
std::string what_was_imported(const ImportCli& c, const char* column) {
  if (c.csv) return "all-reduce times (bytes,time_us CSV)";
  return "nccl-tests all_reduce_perf, " + std::string(column) + " times";
}

// The hardware file `spec` with the run's times as its node link's allreduce_table (the
// analytical model then reads them at that rank count), named after `out`.
std::string hardware_with_table(const std::string& spec, const sim::HardwareConfig& hw,
                                const std::vector<sim::AllReducePoint>& pts, const ImportCli& c,
                                const char* column, const profiler::NcclTestsHeader& run) {
  const std::int64_t ranks = pts.front().ranks;
  if (ranks > hw.gpus_per_node) {
    throw InputError(c.ranks > 0 ? "--ranks" : c.file,
                     c.ranks > 0 ? std::to_string(c.ranks) : std::string("nGpus"),
                     "the run spans " + std::to_string(ranks) + " ranks, more than the " +
                         std::to_string(hw.gpus_per_node) + " GPUs of one " + hw.name +
                         " node; --hardware-out holds the link inside a node: give a run on at "
                         "most that many GPUs (or use --out for a profile)");
  }
  nlohmann::ordered_json points = nlohmann::ordered_json::array();
  for (const auto& p : pts) points.push_back({p.bytes, p.t.median_us});  // ascending (parser)
  if (points.size() > 64) {
    throw InputError(c.file, c.csv ? "rows" : "size",
                     std::to_string(points.size()) +
                         " sizes; an allreduce_table holds at most 64 (" +
                         (c.csv ? std::string("give fewer sizes, e.g. doubling")
                                : std::string("run all_reduce_perf with -f 2")) +
                         ")");
  }
  auto j = nlohmann::ordered_json::parse(
      read_input_file(sim::resolve_config("hardware", spec, "hardware"), "--hardware"));
  // Named by the file; written to a stream, by the machine it extends.
  j["name"] = output_name(c.hardware_out) == c.hardware_out
                  ? std::filesystem::path(c.hardware_out).stem().string()
                  : hw.name + "-imported";
  std::string source = what_was_imported(c, column) + ", " + std::to_string(ranks) +
                       " ranks, imported by tpo profile " +
                       (c.csv ? "import-allreduce" : "import-nccl-tests") + " on " +
                       profiler::today() + " from " + c.file;
  if (!c.note.empty()) source += " (the file says: " + c.note + ")";
  if (run.graph_launches > 0) {
    source += " (captured as a CUDA graph: no host launch time in the times)";
  } else if (run.gpus_per_thread > 1) {
    source += " (one thread drove " + std::to_string(run.gpus_per_thread) +
              " GPUs: small-message times may include host launch time)";
  }
  // The run's table replaces one of the same rank count; the file's tables of other rank counts
  // stay (one table: an object; several: a list by ranks).
  auto& link = j["node"]["link"];
  nlohmann::ordered_json tables = nlohmann::ordered_json::array();
  if (link.contains("allreduce_table")) {
    const auto& old = link["allreduce_table"];
    for (const auto& t : old.is_array() ? old : nlohmann::ordered_json::array({old})) {
      if (t.is_object() && t.value("ranks", std::int64_t{0}) != ranks) tables.push_back(t);
    }
  }
  tables.push_back({{"ranks", ranks}, {"points", std::move(points)}, {"source", source}});
  std::sort(tables.begin(), tables.end(), [](const auto& a, const auto& b) {
    return a.value("ranks", std::int64_t{0}) < b.value("ranks", std::int64_t{0});
  });
  link["allreduce_table"] = tables.size() == 1 ? tables[0] : tables;
  return j.dump(2) + "\n";
}

int run_import(ImportCli c) {
  if (c.out.empty() && c.hardware_out.empty()) {
    throw InputError("--out", "",
                     "give the profile to write (--out FILE), or a hardware file with the run "
                     "as its all-reduce table (--hardware-out FILE), or both");
  }
  // The hardware the links belong to must be one simulate can load with this profile.
  const std::string spec = c.hardware;
  const sim::HardwareConfig hw = sim::load_hardware(c.hardware);
  c.hardware = hw.name;
  if (!c.out.empty()) check_writable(c.out, "--out");
  if (!c.hardware_out.empty()) check_writable(c.hardware_out, "--hardware-out");
  check_distinct_outputs({{c.out, "--out"}, {c.hardware_out, "--hardware-out"}});
  profiler::NcclTestsHeader run;
  const auto pts = c.csv ? profiler::parse_allreduce_csv(c.file, c.ranks, &c.note)
                         : profiler::parse_nccl_tests(c.file, c.ranks, c.in_place, &run);
  const char* column = c.csv ? "time_us" : c.in_place ? "in-place" : "out-of-place";
  if (const std::int64_t gpus = hw.nodes * hw.gpus_per_node; pts.front().ranks > gpus) {
    throw InputError(c.ranks > 0 ? "--ranks" : c.file,
                     c.ranks > 0 ? std::to_string(c.ranks) : std::string("nGpus"),
                     "the all-reduce ran on " + std::to_string(pts.front().ranks) + " ranks, but " +
                         hw.name + " has " + std::to_string(gpus) + " GPUs");
  }
  std::cout << "imported " << pts.size() << " all-reduce sizes on " << pts.front().ranks
            << " ranks from " << c.file << " ("
            << (c.csv ? std::string("its time_us column") : std::string(column) + " times")
            << "; message bytes read as bf16 values)\n";
  if (run.graph_launches > 0) {
    std::cout << "note: the timed iterations were captured as a CUDA graph (graph: "
              << run.graph_launches
              << " in the header): the times hold no host launch time, as a serving engine's "
                 "graph-replayed steps\n";
  } else if (run.gpus_per_thread > 1) {
    std::cout << "note: one thread drove " << run.gpus_per_thread
              << " GPUs (nGpus in the header): its small-message times may include host launch "
                 "time that a stack with a thread or process per GPU (serving engines, tpo "
                 "validate) does not pay\n";
  }
  OutputSet outputs;  // both files, or (on any error) neither
  std::string held;   // the rank counts the written hardware file has tables for
  if (!c.hardware_out.empty()) {
    const std::string text = hardware_with_table(spec, hw, pts, c, column, run);
    // Read as tpo will read it, before anything is written.
    for (const auto& t :
         sim::hardware_from_json(nlohmann::json::parse(text), c.hardware_out).intra.tables) {
      held += (held.empty() ? "" : ", ") + std::to_string(t.ranks);
    }
    // A hardware file updated in place (--hardware-out the --hardware read) is meant.
    outputs.add(c.hardware_out, text, "--hardware-out", /*replaces_input=*/true);
  }
  sim::Profile p;
  if (!c.out.empty()) {
    if (const OutputTarget t = output_target(c.out, "--out");
        !t.direct && std::filesystem::is_regular_file(t.path)) {
      p = sim::load_profile(c.out);  // replace the comm section of an existing profile
      const std::string measured_for =
          JsonObject(p.options, c.out, "options").string_or("hardware", "");
      if (!measured_for.empty() && measured_for != hw.name && measured_for != hw.origin) {
        throw InputError("--out", c.out,
                         "is a profile measured for hardware '" + measured_for + "', not '" +
                             hw.name +
                             "' (--hardware): simulate would refuse it; "
                             "import with --hardware " +
                             measured_for + ", or into a new file");
      }
      if (p.tp != pts.front().ranks) {
        throw InputError("--out", c.out,
                         "is a profile for TP " + std::to_string(p.tp) + " but " + c.file +
                             " ran on " + std::to_string(pts.front().ranks) +
                             " ranks; import into a new file or a profile of that TP");
      }
    } else {
      p.tool_version = tool_version();
      p.git_sha = git_sha();
      p.dtype = "bf16";
      p.date = profiler::today();
      p.device = {{"backend", c.csv ? "all-reduce CSV import" : "nccl-tests import"},
                  {"hardware", c.hardware}};
      p.options = {{"imported_from", c.file}, {"hardware", c.hardware}};
      p.tp = pts.front().ranks;
    }
    p.allreduce = pts;
    profiler::fit_profile(p);
    p.device["allreduce_source"] =
        c.csv ? what_was_imported(c, column) + ": " + c.file +
                    (c.note.empty() ? "" : " (" + c.note + ")")
              : "nccl-tests all_reduce_perf (" + std::string(column) + " times): " + c.file;
    // What an earlier import into this profile said about its run.
    if (p.device.is_object()) {
      p.device.erase("allreduce_gpus_per_thread");
      p.device.erase("allreduce_cuda_graph");
    }
    if (run.gpus_per_thread > 0) p.device["allreduce_gpus_per_thread"] = run.gpus_per_thread;
    if (run.graph_launches > 0) p.device["allreduce_cuda_graph"] = true;
    // An existing profile's comm section is replaced in place.
    outputs.add(c.out, sim::profile_to_json(p).dump(1) + "\n", "--out", /*replaces_input=*/true);
  }
  outputs.commit();
  if (!c.hardware_out.empty()) {
    std::cout << "wrote " << output_name(c.hardware_out) << " (" << hw.name
              << " with these times as its " << pts.front().ranks
              << "-rank all-reduce table; tables for " << held << " ranks; use with --hardware "
              << output_for_hint(c.hardware_out) << ")\n";
  }
  if (!c.out.empty()) {
    for (const auto& f : p.allreduce_fit) {
      std::cout << "  fit " << f.lo_bytes << ".." << f.hi_bytes << " B: " << f.alpha_us << " us + "
                << f.beta_us_per_byte * 1e3 << " us/KB\n";
    }
    std::cout << "wrote " << output_name(c.out) << " ("
              << (c.csv ? "from " + c.file : "measured by nccl-tests") << "; use with --profile "
              << output_for_hint(c.out) << " --hardware " << spec << ")\n";
  }
  return 0;
}

}  // namespace

std::function<int()> add_profile(CLI::App& app) {
  auto o = std::make_shared<profiler::ProfileOptions>();
  auto imp = std::make_shared<ImportCli>();
  auto acc = std::make_shared<AccuracyCli>();
  auto* sub = app.add_subcommand(
      "profile",
      "Measure the costs of the ops the model's schedule graphs contain — GEMMs per chunk size,\n"
      "attention with a KV prefix, norms, all-reduces — and how much they slow each other when\n"
      "overlapped, on this machine. The profile feeds `simulate --profile` and `plan --profile`.");
  sub->add_option("--backend", o->backend, "cpu (fp32 kernels, ranks as threads) or cuda")
      ->capture_default_str();
  WorkloadFlags f;
  f.seq = f.phase_batch_context = f.layers = f.profile = false;
  bind_workload(sub, &o->workload, f);
  sub->add_option("--attention", o->attention,
                  "cuda: the attention kernel measured — cudnn (fused), cublas (batched GEMMs), "
                  "or auto (cudnn where available); the profile records which")
      ->capture_default_str();
  sub->add_flag(
      "--quick", o->quick,
      "Fewer sizes (powers of two only, smaller maximum; no default decode rows for GEMMs and "
      "row-wise ops, attention's decode points kept; the LM head at 1 x --align only)");
  sub->add_option("--out", o->out,
                  "Profile file to write (an interrupted run resumes from "
                  "FILE.partial)");
  sub->add_option("--max-tokens", o->max_tokens,
                  "Largest chunk measured (default 512 on cpu, 256 with --quick; 8192 on cuda)");
  sub->add_option("--align", o->align, "Token grid of the sizes measured")->capture_default_str();
  sub->add_option("--gemm-step", o->gemm_step,
                  "GEMMs also at every multiple of N rows up to 4096, where the planner puts chunk "
                  "boundaries (a GEMM's time steps with the library's kernel choice; 0: the grid "
                  "only; default: --align on cuda without --quick, 0 otherwise)");
  sub->add_option("--decode-rows", o->decode_rows,
                  "GEMMs and row-wise ops also at these rows below --align: decode batches (one "
                  "token per request), else extrapolated from the grid's smallest size (default: "
                  "1,8,32 without --quick, none with it; 0: none)")
      ->delimiter(',');
  sub->add_option("--reps", o->reps, "Timed repetitions per measurement")->capture_default_str();
  sub->add_option("--warmup", o->warmup, "Untimed runs before them")->capture_default_str();
  sub->add_flag("--no-accuracy")
      ->description("Skip the held-back accuracy check of the profile model");
  sub->add_flag("--quiet")->description("No progress bar");
  sub->footer(
      "Examples:\n"
      "  tpo profile --backend cpu --model llama3.1-8b --tp 2 --quick --out cpu.json\n"
      "  tpo profile --backend cuda --model llama3-70b --tp 8 --hardware h100x8 --out prof.json"
      "   (on an H100 SXM: --hardware names the GPU it runs on)\n"
      "Run `tpo profile SUBCOMMAND --help` for the imports and the accuracy check.");
  sub->get_option("--hardware")
      ->description(
          "Shipped hardware name (see configs/hardware) or a path to a hardware JSON: the "
          "machine the profile is labelled as measured on (default: cpu-host with --backend "
          "cpu, h200x8 with cuda on an H200; on another GPU it must be named)");
  auto* im = sub->add_subcommand(
      "import-nccl-tests",
      "Turn the output of nccl-tests' all_reduce_perf into a profile's all-reduce table (new\n"
      "profile, or the comm section of an existing --out profile is replaced)");
  // What both imports take: where the times were measured, and what to write.
  const auto add_import_outputs = [](CLI::App* c, ImportCli& to) {
    c->add_option("--hardware", to.hardware,
                  "The machine the times were measured on (a shipped hardware name or file)")
        ->required();
    c->add_option("--out", to.out, "Profile to write (for --profile)");
    c->add_option("--hardware-out", to.hardware_out,
                  "Also (or instead) write a copy of --hardware whose node link reads these "
                  "times as its allreduce_table (for --hardware; the analytical model then uses "
                  "them at this rank count; runs inside one node only)");
  };
  im->add_option("file", imp->file, "all_reduce_perf output (text)")->required();
  add_import_outputs(im, *imp);
  im->add_option("--ranks", imp->ranks, "Ranks of the run, when the file does not say (nGpus)");
  im->add_flag("--in-place", imp->in_place,
               "Read the in-place times (tpo's runtime all-reduces in place; default: the "
               "out-of-place times)");
  auto csv = std::make_shared<ImportCli>();
  csv->csv = true;
  auto* ia = sub->add_subcommand(
      "import-allreduce",
      "Turn a CSV of your own all-reduce times (torch.distributed, a custom kernel, a serving\n"
      "engine's benchmark) into a profile's all-reduce table, or into a copy of the hardware file\n"
      "that reads them (the analytical model then charges your stack's all-reduce)");
  ia->add_option("file", csv->file,
                 "CSV: # comment lines (the first is kept as the times' source), then a header "
                 "naming a bytes column and a time_us column (one all-reduce, microseconds), then "
                 "one row per message size, ascending")
      ->required();
  ia->add_option("--ranks", csv->ranks, "Ranks the all-reduces ran on")->required();
  add_import_outputs(ia, *csv);
  ia->footer(
      "Example (times.csv: a line 'bytes,time_us', then one line per size):\n"
      "  tpo profile import-allreduce times.csv --ranks 8 --hardware h100x8 --hardware-out "
      "mine.json\n"
      "  tpo plan --model llama3-70b --hardware mine.json --tp 8 --seq 512:32768");
  im->footer(
      "Example:\n"
      "  all_reduce_perf -b 1K -e 1G -f 2 -g 8 > ar.txt\n"
      "  tpo profile import-nccl-tests ar.txt --hardware h100x8 --hardware-out mine.json\n"
      "  tpo plan --model llama3-70b --hardware mine.json --tp 8 --seq 512:32768");
  auto* ac = sub->add_subcommand(
      "accuracy",
      "The analytical model of a hardware file against the measurements in profiles: median,\n"
      "p90 and worst |error| per op kind (no GPU needed; the profiles hold the measurements)");
  ac->add_option("files", acc->files, "Profiles (tpo.profile/1)")->required()->expected(1, -1);
  ac->add_option("--hardware", acc->hardware,
                 "Hardware whose analytical model is compared (default: the profile's)");
  ac->add_option("--json", acc->json,
                 "Write every shape's measured and predicted time and signed error (FILE)");
  ac->footer(
      "Example:\n"
      "  tpo profile accuracy configs/profiles/h200-llama3.1-8b-tp2.json "
      "configs/profiles/h200-llama2-70b-tp8.json");
  return [o, imp, csv, acc, sub, im, ia, ac] {
    if (sub->got_subcommand(ia)) {
      if (csv->ranks < 2) {
        throw InputError("--ranks", std::to_string(csv->ranks), "must be 2 or more ranks");
      }
      return run_import(*csv);
    }
    if (sub->got_subcommand(im)) {
      if (im->count("--ranks") && imp->ranks < 2) {
        throw InputError("--ranks", std::to_string(imp->ranks), "must be 2 or more ranks");
      }
      return run_import(*imp);
    }
    if (sub->got_subcommand(ac)) return run_accuracy(*acc);
    if (sub->count("--gemm-step") && o->gemm_step < 0) {
      throw InputError("--gemm-step", std::to_string(o->gemm_step),
                       "must be >= 0 (0: the grid only)");
    }
    o->decode_rows_given = sub->count("--decode-rows") > 0;
    o->accuracy = sub->count("--no-accuracy") == 0;
    o->progress = sub->count("--quiet") == 0;
    if (sub->count("--max-tokens") && o->max_tokens <= 0) {
      throw InputError("--max-tokens", std::to_string(o->max_tokens), "must be > 0 (or left out)");
    }
    if (o->backend == "cuda") hand_gpu_work_to_gpu_binary();
    return profiler::run_profile(*o, std::cout);
  };
}

}  // namespace tpo::cli
