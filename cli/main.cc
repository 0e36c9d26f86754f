// tpo: plans compute/communication overlap for tensor-parallel LLM inference.
// Only main decides exit codes: 0 ok, 2 bad input (options, configs), 1 any other failure.
#include <iostream>
#include <new>

#include "cli/commands.h"
#include "cli/gpu_handoff.h"
#include "sim/error.h"
#include "sim/version.h"
#include "tpo/config.h"

int main(int argc, char** argv) {
  CLI::App app{
      "tpo — plans and checks computation/communication overlap (ISO, ladder residual, ...)\n"
      "for tensor-parallel LLM inference. Numbers from `simulate` are predictions.",
      "tpo"};
  app.require_subcommand(1);
  // The version, the git SHA, and the optional parts this build has.
  const std::string parts = std::string(TPO_WITH_CUDA ? " cuda" : "") +
                            (TPO_WITH_NCCL ? " nccl" : "") + (TPO_WITH_MPI ? " mpi" : "") +
                            (TPO_WITH_CUDNN ? " cudnn" : "");
  app.set_version_flag("--version", std::string(tpo::tool_version()) + " (" + tpo::git_sha() + ")" +
                                        (parts.empty() ? "" : "; built with" + parts));
  app.footer(
      "Examples:\n"
      "  tpo simulate --model llama2-70b --hardware rtx4090x8 --tp 8 --seq 4096 --compare\n"
      "  tpo simulate --strategy iso --split 0.55,0.45 --json r.json --trace r.trace.json\n"
      "  tpo plan --model llama2-70b --hardware rtx4090x8 --tp 8 --seq 512:16384 --svg p.svg\n"
      "  tpo profile --backend cpu --model llama3.1-8b --tp 2 --quick --out cpu.json\n"
      "  tpo validate --backend cpu --model llama3.1-8b --hardware cpu-host --tp 2 --seq 256 \\\n"
      "      --strategy iso --profile cpu.json --trace v.trace.json\n"
      "Run `tpo SUBCOMMAND --help` for a subcommand's options.");
  auto run_simulate = tpo::cli::add_simulate(app);
  auto run_plan = tpo::cli::add_plan(app);
  auto run_profile = tpo::cli::add_profile(app);
  auto run_validate = tpo::cli::add_validate(app);
  auto run_calibrate = tpo::cli::add_calibrate(app);
  tpo::cli::remember_command_line(argc, argv);
  // A mistyped command would read as "a subcommand is required".
  if (argc > 1 && argv[1][0] != '-') {
    std::string names;
    std::vector<std::string> list;
    bool known = false;
    for (const auto* sub : app.get_subcommands({})) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
      list.push_back(sub->get_name());
      known = known || sub->get_name() == argv[1];
    }
    if (!known) {
      std::cerr << "tpo: error: '" << argv[1] << "' is not a command"
                << tpo::cli::nearest_hint(argv[1], list) << " (" << names
                << "); tpo --help describes them\n";
      return 2;
    }
  }
  // CLI11's own parse errors carry the same prefix as tpo's.
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    return "tpo: error: " + CLI::FailureMessage::simple(a, e);
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ExtrasError& e) {
    // A misspelt option: name it, the command it was given to, and the nearest option there.
    if (const std::string hint = tpo::cli::unknown_option_hint(app); !hint.empty()) {
      std::cerr << "tpo: error: " << hint << "\n";
      return 2;
    }
    app.exit(e);
    return 2;
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  try {
    tpo::cli::summary_to_stderr_if_report_on_stdout(app);
    tpo::cli::refuse_output_over_input(app);
    if (app.got_subcommand("simulate")) return run_simulate();
    if (app.got_subcommand("plan")) return run_plan();
    if (app.got_subcommand("profile")) return run_profile();
    if (app.got_subcommand("validate")) return run_validate();
    if (app.got_subcommand("calibrate")) return run_calibrate();
    return 2;
  } catch (const tpo::FieldError& e) {  // a core field: name the flag bound to it
    std::cerr << "tpo: error: "
              << tpo::InputError(tpo::cli::flag_for(e.name()), e.value(), e.problem()).what()
              << "\n";
    return 2;
  } catch (const tpo::InputError& e) {
    std::cerr << "tpo: error: " << e.what() << "\n";
    return 2;
  } catch (const tpo::RunFailure& e) {
    std::cerr << "tpo: failed: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "tpo: failed: out of host memory (a CPU validation or profile holds every "
                 "rank's layers in fp32 in this one process, a CUDA validation's float64 "
                 "reference one rank's, and with --embed-head the vocabulary's tables: run "
                 "fewer --layers, a shorter --seq, or leave out --embed-head)\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "tpo: internal error: " << e.what() << "\n";
    return 1;
  }
}
