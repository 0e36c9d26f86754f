// Harness: Google Benchmark registration with manual time, statistics, progress, resume.
#include "profiler/harness.h"

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

#include "sim/error.h"

namespace tpo::profiler {

sim::Timing summarize_samples(std::vector<double> s) {
  sim::Timing t;
  if (s.empty()) return t;
  std::sort(s.begin(), s.end());
  const std::size_t n = s.size();
  const double med = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  t.median_us = med * 1e6;
  t.min_us = s.front() * 1e6;
  t.max_us = s.back() * 1e6;
  t.reps = static_cast<std::int64_t>(n);
  return t;
}

namespace {

// Ctrl-C: finish the measurement in progress, skip the rest, keep the resume log. A second
// Ctrl-C kills as usual.
std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) {
  g_interrupted = true;
  std::signal(SIGINT, SIG_DFL);
}

// Google Benchmark needs a reporter; ours prints nothing (the harness shows progress).
class QuietReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

nlohmann::json timing_json(const sim::Timing& t) {
  return {{"median_us", t.median_us}, {"min_us", t.min_us}, {"max_us", t.max_us}, {"reps", t.reps}};
}
sim::Timing timing_from(const nlohmann::json& j) {
  sim::Timing t;
  t.median_us = j.at("median_us").get<double>();
  t.min_us = j.at("min_us").get<double>();
  t.max_us = j.at("max_us").get<double>();
  t.reps = j.at("reps").get<std::int64_t>();
  return t;
}

std::string eta_text(double s) {
  char buf[32];
  if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  }
  return buf;
}

}  // namespace

std::vector<Measurement> run_sweep(Backend& backend, const std::vector<Item>& items,
                                   const HarnessOptions& o) {
  // Finished measurements from an interrupted run with the same options.
  std::map<std::string, nlohmann::json> done;
  if (!o.resume_path.empty() && std::filesystem::exists(o.resume_path)) {
    std::ifstream in(o.resume_path);
    std::string line;
    if (std::getline(in, line)) {
      const auto head = nlohmann::json::parse(line, nullptr, false);
      if (head.is_discarded() || head.value("fingerprint", "") != o.fingerprint) {
        throw InputError(o.resume_path, "fingerprint",
                         "an interrupted profile with other options is here; delete it, or "
                         "rerun with the same options to resume");
      }
    }
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.contains("key")) done[j.at("key").get<std::string>()] = j;
    }
  }
  std::ofstream log;
  if (!o.resume_path.empty()) {
    const bool fresh = !std::filesystem::exists(o.resume_path);
    log.open(o.resume_path, std::ios::app);
    if (!log) throw InputError("--out", o.resume_path, "cannot write the resume log");
    if (fresh) log << nlohmann::json{{"fingerprint", o.fingerprint}}.dump() << "\n" << std::flush;
  }

  std::vector<Measurement> out(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) out[i].item = items[i];  // t.reps 0: not measured
  std::vector<bool> have(items.size(), false);
  std::size_t finished = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (auto it = done.find(items[i].key); it != done.end()) {
      out[i].t = timing_from(it->second.at("t"));
      if (it->second.contains("alone")) out[i].alone = timing_from(it->second.at("alone"));
      if (it->second.contains("other_us") && it->second.at("other_us").is_number()) {
        out[i].other_us = it->second.at("other_us").get<double>();
      }
      if (it->second.contains("kernel") && it->second.at("kernel").is_string()) {
        out[i].kernel = it->second.at("kernel").get<std::string>();
      }
      have[i] = true;
      ++finished;
    }
  }
  const std::size_t resumed = finished;
  if (resumed > 0) {
    std::fprintf(stderr, "resuming from %s: %zu of %zu measurements already done\n",
                 o.resume_path.c_str(), resumed, items.size());
  }
  g_interrupted = false;
  auto* previous_handler = std::signal(SIGINT, on_sigint);
  const bool tty = o.progress && isatty(2);
  const auto t0 = std::chrono::steady_clock::now();
  std::size_t logged_step = 0;  // not a terminal: the last 5% step and time a line was written
  double logged_at_s = 0;
  std::string error;
  bool throw_stop = false;
  std::vector<std::string> skipped;

  auto measure = [&](Runner& r, benchmark::State* st) {
    for (int w = 0; w < o.warmup; ++w) r.run_once();
    std::vector<double> samples;
    if (st) {
      for (auto _ : *st) {
        const double t = r.run_once();
        st->SetIterationTime(t);
        samples.push_back(t);
      }
    } else {
      for (int k = 0; k < o.reps; ++k) samples.push_back(r.run_once());
    }
    return summarize_samples(samples);
  };

  for (std::size_t i = 0; i < items.size(); ++i) {
    if (have[i]) continue;
    const Item item = items[i];
    benchmark::RegisterBenchmark(
        item.key.c_str(),
        [&, i, item](benchmark::State& st) {
          if (throw_stop || g_interrupted) {
            st.SkipWithError("stopped");
            if (g_interrupted && error.empty()) error = "interrupted (Ctrl-C)";
            return;
          }
          try {
            Measurement m;
            m.item = item;
            if (is_interference(item.kind)) {
              auto alone = backend.prepare_alone(item);
              m.alone = measure(*alone, nullptr);
            }
            auto runner = backend.prepare(item);
            m.t = measure(*runner, &st);
            m.other_us = runner->other_seconds() * 1e6;
            m.kernel = runner->kernel();
            out[i] = m;
            have[i] = true;
            if (log) {
              nlohmann::json line{{"key", item.key}, {"t", timing_json(m.t)}};
              if (m.alone.reps) line["alone"] = timing_json(m.alone);
              if (m.other_us > 0) line["other_us"] = m.other_us;
              if (!m.kernel.empty()) line["kernel"] = m.kernel;
              log << line.dump() << "\n" << std::flush;
            }
          } catch (const SkipItem& e) {
            st.SkipWithError(e.what());
            skipped.push_back(item.key + ": " + e.what());
          } catch (const std::exception& e) {
            st.SkipWithError(e.what());
            if (error.empty()) error = item.key + ": " + e.what();
          }
          ++finished;
          // Test hook: pretend the run is interrupted after N measurements.
          if (const char* stop = std::getenv("TPO_PROFILE_STOP_AFTER");
              stop && finished - resumed >= static_cast<std::size_t>(std::atoll(stop))) {
            if (error.empty())
              error =
                  "stopped after " + std::string(stop) + " measurements (TPO_PROFILE_STOP_AFTER)";
            st.SkipWithError("stopped");
            throw_stop = true;
          }
          // On a terminal the bar is redrawn in place; into a log, a line per 5% of the
          // measurements or per 30 s, whichever comes first, and the last one.
          const double el =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          const std::size_t step = 20 * finished / items.size();
          const bool log_line =
              finished == items.size() || step > logged_step || el - logged_at_s >= 30.0;
          if (o.progress && (tty || log_line)) {
            if (!tty) {
              logged_step = step;
              logged_at_s = el;
            }
            const std::size_t fresh = finished - resumed;
            const double eta = fresh ? el / static_cast<double>(fresh) *
                                           static_cast<double>(items.size() - finished)
                                     : 0;
            const int width = 30;
            const int fill = static_cast<int>(width * finished / items.size());
            std::fprintf(stderr, "%s[%.*s%*s] %zu/%zu %-36s ETA %s%s", tty ? "\r" : "", fill,
                         "##############################", width - fill, "", finished, items.size(),
                         item.key.c_str(), eta_text(eta).c_str(), tty ? "   " : "\n");
            std::fflush(stderr);
          }
        })
        ->UseManualTime()
        ->Iterations(o.reps)
        ->Unit(benchmark::kMicrosecond);
  }
  if (resumed < items.size()) {
    static bool initialized = false;
    if (!initialized) {
      int argc = 1;
      char name[] = "tpo-profile";
      char* argv[] = {name, nullptr};
      benchmark::Initialize(&argc, argv);
      initialized = true;
    }
    QuietReporter quiet;
    benchmark::RunSpecifiedBenchmarks(&quiet);
    benchmark::ClearRegisteredBenchmarks();
  }
  std::signal(SIGINT, previous_handler);
  if (tty) std::fprintf(stderr, "\n");
  if (!skipped.empty()) {
    std::fprintf(stderr, "skipped %zu measurement(s) this machine cannot make, e.g. %s\n",
                 skipped.size(), skipped.front().c_str());
  }
  if (!error.empty()) {
    throw RunFailure("profiling stopped: " + error +
                     (o.resume_path.empty()
                          ? std::string()
                          : "; finished measurements are kept in " + o.resume_path +
                                ": rerun the same command to resume"));
  }
  return out;
}

}  // namespace tpo::profiler
