// `tpo calibrate`: fit the contention model on measured schedules (validation reports) and
// report its error on the cases fitted and on those kept out.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "profiler/calibrate.h"

namespace tpo::cli {

std::function<int()> add_calibrate(CLI::App& app) {
  auto o = std::make_shared<profiler::CalibrateOptions>();
  auto* sub = app.add_subcommand(
      "calibrate",
      "Fit the contention model (SMs held by comm kernels, waves, HBM sharing) on measured\n"
      "schedules from `tpo validate --json` reports, keeping the cases of the models not named\n"
      "by --fit-on out of the fit, and report the error on both sets.");
  sub->footer(
      "Example (the committed H200 runs, fitted on one model and tested on the other; the "
      "shipped fit):\n"
      "  tpo calibrate --reports results/h200/2026-11-29/validate-*.json --profile "
      "configs/profiles/h200-llama3.1-8b-tp2.json configs/profiles/h200-llama2-70b-tp8.json "
      "--fit-on llama3.1-8b --fit-ops --wave-rule extra-wave --comm-hbm-per-cta profile "
      "--out cal.json");
  sub->add_option("--reports", o->reports, "Validation reports (tpo.validate/1)")
      ->required()
      ->expected(1, -1);
  sub->add_option("--profile", o->profiles,
                  "The profiles the runs were predicted with (matched by model and TP)")
      ->required()
      ->expected(1, -1);
  sub->add_option("--fit-on", o->fit_on,
                  "Models whose cases are fitted (the rest are held out); required unless "
                  "--params-from")
      ->expected(1, -1);
  sub->add_option("--params-from", o->params_from,
                  "Fit no contention parameter: check this hardware file's contention block (a "
                  "name in configs/hardware or a path, e.g. h200x8) on the reports, with the SMs "
                  "and HBM bandwidth the runs' hardware file gives; --fit-on then names the "
                  "models whose cases are reported as the fit set (those the block was fitted "
                  "on), and without it every case is held out");
  sub->add_option("--out", o->out, "Write the calibration report (tpo.calibration/1)");
  sub->add_flag("--fit-microbenchmarks", o->fit_microbenchmarks,
                "Also fit the --fit-on models' interference microbenchmarks (pairs measured by "
                "tpo profile); the other models' pairs are held out");
  auto* wave =
      sub->add_option("--wave-rule", o->wave_rule,
                      "A kernel's waves beside a comm kernel: re-quantized over the SMs left "
                      "(requantize), one wave more (extra-wave), or chosen by the fit (auto)")
          ->check(CLI::IsMember({"auto", "requantize", "extra-wave"}))
          ->capture_default_str();
  sub->add_flag("--ops", o->ops,
                "Per op: each case's ops predicted by the fitted model beside their measured "
                "starts and durations in --out, and the held-out ops it misses most printed");
  sub->add_flag("--fit-ops", o->fit_ops,
                "Also fit each case's measured op durations summed by class (GEMM, attention, "
                "norms/elementwise, all-reduce), not only its total");
  sub->add_option("--legacy-copies", o->legacy_copies,
                  "CUDA reports made before 2026-12-02, whose runtime copied Q out of the qkv "
                  "rows before attention and wrote the KV cache with two strided copies, which "
                  "the profiles never timed: add those copies, each one's cost fitted on the "
                  "--fit-on models' ops that ran beside nothing (fit), or leave them out (off)")
      ->check(CLI::IsMember({"fit", "off"}))
      ->capture_default_str();
  sub->add_option("--threshold", o->threshold,
                  "Decisions: overlap is picked only when it is predicted to beat none by more "
                  "than this fraction, in [0, 1), as tpo plan --threshold")
      ->capture_default_str();
  sub->add_option("--chunk-gain", o->chunk_gain,
                  "Decisions: a split in one chunk more is picked only when it is predicted to "
                  "beat the best of one fewer by more than this fraction, as tpo plan "
                  "--chunk-gain")
      ->capture_default_str();
  auto* hbm =
      sub->add_option(
             "--comm-hbm-per-cta", o->comm_hbm,
             "The comm kernel's HBM draw per CTA: fit (searched with the rest), profile "
             "(measured: the fit-on profiles' (with --params-from and no --fit-on, every "
             "profile's) long copies alone on the hardware file's comm "
             "budget, 16 CTAs unless it says otherwise, read and written), or a number of GB/s "
             "held as given; with --params-from: "
             "the block's unless profile or a number is given")
          ->capture_default_str();
  sub->add_flag("--update-profiles", o->update_profiles,
                "Write the fitted parameters, with both errors, into each profile");
  sub->footer(std::string(sub->get_footer()) +
              "\nCheck the shipped block on runs of your own GPU (nothing fitted, every case held "
              "out):\n  tpo calibrate --reports my-run/validate-*.json --profile "
              "my-run/profile-*.json --params-from h200x8");
  return [o, wave, hbm] {
    o->wave_rule_given = wave->count() > 0;
    o->comm_hbm_given = hbm->count() > 0;
    return profiler::run_calibrate(*o, std::cout);
  };
}

}  // namespace tpo::cli
