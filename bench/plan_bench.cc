// Planner speed: a full sweep of 5 models x 6 hardware configs x 16 prompt lengths (512 to
// 16k), ISO with k <= 3 on the 64-token grid plus every other strategy, on 1 and 2 threads.
#include <benchmark/benchmark.h>

#include "planner/plan.h"

namespace {

using namespace tpo::planner;

void BM_PlanSweep5x6x16(benchmark::State& state) {
  // LLaMA-30B's 52 heads do not split over 8 GPUs: it is planned at TP 4.
  const std::pair<const char*, int> models[] = {{"llama-30b", 4},
                                                {"llama2-70b", 8},
                                                {"llama3-70b", 8},
                                                {"qwen2.5-72b", 8},
                                                {"llama3.1-8b", 8}};
  const char* hws[] = {"rtx4090x8", "a800x8", "a100x8", "h100x8", "h100x8-nop2p", "h200x8"};
  std::int64_t points = 0;
  for (auto _ : state) {
    for (const auto& [m, tp] : models) {
      for (const char* h : hws) {
        PlanOptions o;
        o.workload.model = m;
        o.workload.hardware = h;
        o.workload.tp = tp;
        o.seq = "512:16384:1.26";  // 16 lengths
        o.max_chunks = 3;
        o.threads = state.range(0);
        o.quiet = true;
        Plan p = make_plan(o);
        run_plan(p);
        points += static_cast<std::int64_t>(p.points.size());
      }
    }
  }
  state.counters["points"] =
      benchmark::Counter(static_cast<double>(points), benchmark::Counter::kAvgIterations);
  state.SetItemsProcessed(points);
}
BENCHMARK(BM_PlanSweep5x6x16)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->UseRealTime();

}  // namespace
// How planning one point grows with the prompt length, the chunk count searched and the layer
// count: Llama-3-70B on h200x8 (the contention model, where the split search's bound prunes
// least), every strategy, on one thread. Up to 3 chunks (and 4 up to 4096 tokens on the
// 64-token grid) the split search is exhaustive; beyond, coordinate descent.
void BM_PlanGrowth(benchmark::State& state) {
  PlanOptions o;
  o.workload.model = "llama3-70b";
  o.workload.hardware = "h200x8";
  o.workload.tp = 8;
  o.workload.layers = state.range(2);
  o.seq = std::to_string(state.range(0));
  o.max_chunks = state.range(1);
  o.threads = 1;
  o.quiet = true;
  std::int64_t sims = 0;
  for (auto _ : state) {
    Plan p = make_plan(o);
    run_plan(p);
    sims = p.points.front().simulations;
  }
  state.counters["simulations"] = static_cast<double>(sims);
}
BENCHMARK(BM_PlanGrowth)
    ->ArgNames({"seq", "chunks", "layers"})
    ->ArgsProduct({{1024, 4096, 16384, 65536, 131072}, {2, 3, 4, 6}, {80}})
    ->ArgsProduct({{16384}, {3}, {8, 20, 40}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1)
    ->UseRealTime();

BENCHMARK_MAIN();
