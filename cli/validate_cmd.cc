// `tpo validate`: execute a planned (or given) schedule with real kernels, check its output,
// and report predicted against measured.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/gpu_handoff.h"
#include "sim/error.h"
#include "sim/json_io.h"
#include "validate/kernels/process_group.h"
#include "validate/validate_run.h"

namespace tpo::cli {

namespace {

// Prints and writes the report (rank 0 only under MPI); false when a result was wrong.
bool report(const validate::ValidateOptions& o, const validate::ValidateReport& r) {
  validate::print_validate(std::cout, r);
  OutputSet out;  // both or neither
  if (!o.json_path.empty())
    out.add(o.json_path, validate::validate_json(r).dump(1) + "\n", "--json");
  if (!o.trace_path.empty()) out.add(o.trace_path, validate::validate_trace(r), "--trace");
  out.commit();
  // The report holds every case now: the resume log's cases are in it.
  if (!r.resume_path.empty()) {
    std::error_code ignored;
    std::filesystem::remove(r.resume_path, ignored);
  }
  if (!o.json_path.empty()) std::cout << "wrote " << output_name(o.json_path) << "\n";
  if (!o.trace_path.empty()) {
    std::cout << "wrote " << output_name(o.trace_path)
              << " (predicted and measured, side by side)\n";
  }
  return r.all_correct();
}

// Under mpirun: every process runs its rank; a failure anywhere ends all of them (the others
// would wait in a collective forever).
int run_under_mpi(const validate::ValidateOptions& o) {
  // One write per rank, so that the ranks' lines do not interleave.
  const auto say = [](const std::exception& e) {
    const auto* field = dynamic_cast<const FieldError*>(&e);
    const std::string line =
        "tpo: rank " + std::to_string(validate::mpi::rank()) + ": " +
        (field ? InputError(flag_for(field->name()), field->value(), field->problem()).what()
               : e.what()) +
        "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  };
  bool ok = true;
  try {
    const auto r = validate::run_validate(o);
    if (validate::mpi::rank() == 0) ok = report(o, r);
  } catch (const validate::SameOnEveryRank& e) {
    // Every process knows of it: the one that found it says it (rank 0 alone where all found
    // it), and all end cleanly with exit 2, no MPI abort.
    using Found = validate::SameOnEveryRank::Found;
    const int rank = validate::mpi::rank();
    if (e.found == Found::Here) {
      try {
        std::rethrow_exception(e.cause);
      } catch (const std::exception& c) {
        say(c);
      }
    }
    validate::mpi::finalize();
    if (e.found == Found::ByAll && rank == 0) {
      if (e.cause) std::rethrow_exception(e.cause);  // as it was thrown (a field keeps its flag)
      throw;
    }
    return 2;
  } catch (const std::exception& e) {
    if (!validate::mpi::initialized()) throw;
    say(e);
    validate::mpi::abort(dynamic_cast<const InputError*>(&e) ? 2 : 1);
  }
  validate::mpi::finalize();
  if (!ok) {
    throw RunFailure(
        "wrong result: a strategy's output differs from its reference by more "
        "than the tolerance (see the result column)");
  }
  return 0;
}

}  // namespace

std::function<int()> add_validate(CLI::App& app) {
  auto o = std::make_shared<validate::ValidateOptions>();
  // Defaults that run on any machine's CPU in seconds to minutes.
  o->workload.layers = 2;
  o->workload.model = "llama3.1-8b";
  o->workload.hardware = "cpu-host";
  o->workload.tp = 2;
  o->workload.seq = 512;
  auto* sub = app.add_subcommand(
      "validate",
      "Execute the very graph the simulator timed with real kernels, check its output against\n"
      "a reference forward of the architecture (and against `none`), and report predicted vs\n"
      "measured time, total and per op. --backend cpu runs anywhere: ranks are threads.");
  sub->footer(
      "Examples:\n"
      "  tpo validate --backend cpu --model llama3.1-8b --hardware cpu-host --tp 2 --seq 256 "
      "--strategy iso --profile cpu.json\n"
      "  tpo validate --backend cuda --plan plan.json --comm emulated   (one GPU: all-reduces "
      "imitated)");
  bind_workload(sub, &o->workload, WorkloadFlags::one_schedule());
  bind_strategy(sub, &o->strategy);
  sub->add_option("--trace", o->trace_path,
                  "Write predicted and measured timelines as one Chrome trace to FILE");
  sub->add_option(
      "--plan", o->plan_path,
      "Validate every point of a plan from `tpo plan --json` exactly as planned (its "
      "model, hardware, TP, phase, batch, prompt, context, layers, strategy and "
      "profile); --hardware, --profile, --emulate, --layers, --exec, --rope, --add-norm, "
      "--allreduce-fusion, --sm-clock and --comm-ctas may replace the plan's. A generate "
      "report (`tpo plan --scenario generate --json`): each batch's prefill and decode step "
      "at the middle step's context, and tokens/s predicted against measured (--batch N: "
      "that batch only)");
  sub->add_option("--alternatives", o->alternatives,
                  "With --plan: also measure each point's N fastest-predicted other candidates "
                  "and report whether the plan's pick was the fastest measured (regret)")
      ->capture_default_str();
  sub->add_option("--attention", o->attention,
                  "cuda: the attention kernel — cudnn (fused), cublas (batched GEMMs) or auto "
                  "(cudnn where available); predict with a profile measured with the same")
      ->capture_default_str();
  sub->add_option("--nccl-timeout", o->nccl_timeout_s,
                  "cuda with NCCL: seconds with no op finishing before the run is aborted "
                  "(exit 1, naming the rank and the op)")
      ->capture_default_str();
  sub->add_option("--backend", o->backend, "cpu (threads, fp32) or cuda")->capture_default_str();
  sub->add_option("--comm", o->comm, "cuda: nccl (real all-reduce) or emulated (copy kernel)")
      ->capture_default_str();
  sub->add_flag("--mpi", o->mpi,
                "One TP rank per process: launch with `mpirun -np TP tpo validate --mpi ...` "
                "(MPI all-reduce on cpu; NCCL across processes and nodes on cuda, one GPU per "
                "process). Rank 0 checks the output and reports");
  sub->add_option("--tolerance", o->tolerance,
                  "Relative output error allowed (default 1e-5 on cpu, 2e-2 on cuda)");
  sub->add_option("--repeat", o->repeat, "Timed runs; the median is reported")
      ->capture_default_str();
  sub->add_option("--warmup", o->warmup, "Untimed runs first")->capture_default_str();
  sub->add_option("--json", o->json_path,
                  "Write the report (schema tpo.validate/1) to FILE (- for standard output; the "
                  "text summary then goes to standard error)");
  return [o, sub] {
    if (o->backend == "cpu") {
      for (const char* opt : {"--comm", "--emulate", "--attention", "--nccl-timeout"}) {
        if (sub->count(opt)) throw InputError(opt, "", "applies to --backend cuda only");
      }
    }
    if (!o->plan_path.empty()) {
      for (const char* opt :
           {"--model", "--tp", "--phase", "--seq", "--context", "--strategy", "--chunks", "--split",
            "--ladder-layers", "--pieces", "--embed-head", "--vocab"}) {
        if (sub->count(opt)) {
          throw InputError(opt, "", "comes from the plan with --plan; drop it");
        }
      }
      // --batch picks one batch of a generate report (a plan's points have their own).
      if (sub->count("--batch")) {
        if (o->workload.batch < 1) {
          throw InputError("--batch", std::to_string(o->workload.batch), "must be >= 1");
        }
        o->plan_batch = o->workload.batch;
      }
      o->hardware_given = sub->count("--hardware") > 0;
      o->profile_given = sub->count("--profile") > 0;
      o->layers_given = sub->count("--layers") > 0;  // then predictions are re-simulated
      o->exec_given = sub->count("--exec") > 0;
      o->rope_given = sub->count("--rope") > 0;
      o->add_norm_given = sub->count("--add-norm") > 0;
      o->allreduce_fusion_given = sub->count("--allreduce-fusion") > 0;
      o->sm_clock_given = sub->count("--sm-clock") > 0;    // 0 included: as quoted
      o->comm_ctas_given = sub->count("--comm-ctas") > 0;  // 0 included: the default
    } else if (sub->count("--alternatives")) {
      throw InputError("--alternatives", "", "applies to --plan (a plan's other candidates)");
    } else {
      check_given(o->workload, o->strategy, *sub, false);
      if (sub->count("--vocab") && !o->workload.embed_head) {
        throw InputError("--vocab", o->workload.vocab,
                         "applies with --embed-head (the embedding and LM head it describes)");
      }
    }
    // Started by mpirun as one of several processes without --mpi: each would run every rank
    // as threads, the copies would time each other, and each would write the same files.
    if (!o->mpi) {
      for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
        const char* v = std::getenv(var);
        if (v && std::atoll(v) > 1) {
          throw InputError("--mpi", "",
                           "this is one of " + std::string(v) + " processes started by mpirun (" +
                               var +
                               "), but --mpi is not given: each would run the whole validation "
                               "with every rank as threads, timing the others' work; add --mpi "
                               "(one TP rank per process) or run tpo without mpirun");
        }
      }
    }
    if (o->backend == "cuda" || o->mpi) hand_gpu_work_to_gpu_binary();
    if (o->mpi) return run_under_mpi(*o);
    if (!report(*o, validate::run_validate(*o))) {
      throw RunFailure(
          "wrong result: a strategy's output differs from its reference by more "
          "than the tolerance (see the result column)");
    }
    return 0;
  };
}

}  // namespace tpo::cli
