// Engine speed: the event engine on a 126-layer Llama-3.1-405B ISO graph (TP 16 on two
// H100 nodes, 8192 tokens in 2 chunks), in simulated ops per second, beside the floor any
// event engine pays: a bare std::priority_queue hold loop (pop the earliest, push one later)
// over the same number of events, with the same small heap the engine keeps.
#include <benchmark/benchmark.h>

#include <queue>

#include "sim/cost_model.h"
#include "sim/engine.h"
#include "sim/simulate.h"

namespace {

using namespace tpo::sim;

struct Fixture {
  Schedule schedule;
  OpCosts costs;
  std::uint64_t events = 0;
  Fixture() {
    WorkloadOptions o;
    o.model = "llama3.1-405b";
    o.hardware = "h100x16";
    o.tp = 16;
    o.seq = 8192;
    const Workload w = make_workload(o);
    schedule = build_schedule(w, make_spec(StrategyOptions{}, w, StrategyKind::Iso));
    costs = cost_schedule(schedule, AnalyticalCostModel(w.hardware, w.tp));
    Engine e;
    e.run(schedule, costs);
    events = e.events_pushed();
  }
};

const Fixture& fixture() {
  static const Fixture f;
  return f;
}

void BM_EngineIso405B(benchmark::State& state) {
  const Fixture& f = fixture();
  Engine engine;
  for (auto _ : state) {
    const Timeline& tl = engine.run(f.schedule, f.costs);
    benchmark::DoNotOptimize(tl.total_ns);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(f.schedule.ops.size()));
  state.counters["ops"] = static_cast<double>(f.schedule.ops.size());
  state.counters["events"] = static_cast<double>(f.events);
}
BENCHMARK(BM_EngineIso405B)->Unit(benchmark::kMicrosecond);

// The same runs on a graph loaded once (Engine::load), as the split search runs its template:
// what one run costs beyond checking the graph and building its lists.
void BM_EngineIso405BLoaded(benchmark::State& state) {
  const Fixture& f = fixture();
  Engine engine;
  engine.load(f.schedule);
  for (auto _ : state) {
    const Timeline& tl = engine.run_loaded(f.costs);
    benchmark::DoNotOptimize(tl.total_ns);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(f.schedule.ops.size()));
  state.counters["ops"] = static_cast<double>(f.schedule.ops.size());
}
BENCHMARK(BM_EngineIso405BLoaded)->Unit(benchmark::kMicrosecond);

// The same graph with the contention model on (h200x8's fitted parameters): SM and HBM
// sharing, and comm kernels waiting for waves, re-rated at every change of the running set.
void BM_EngineIso405BContention(benchmark::State& state) {
  const Fixture& f = fixture();
  OpCosts costs = f.costs;
  const HardwareConfig h200 = load_hardware("h200x8");
  costs.contention = h200.contention;
  for (std::size_t i = 0; i < f.schedule.ops.size(); ++i) {
    costs.resources.push_back(
        op_resources(f.schedule.ops[i], costs.standalone_ns[i], h200.contention));
  }
  Engine engine;
  for (auto _ : state) {
    const Timeline& tl = engine.run(f.schedule, costs);
    benchmark::DoNotOptimize(tl.total_ns);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(f.schedule.ops.size()));
  state.counters["ops"] = static_cast<double>(f.schedule.ops.size());
}
BENCHMARK(BM_EngineIso405BContention)->Unit(benchmark::kMicrosecond);

struct Ev {
  std::int64_t t;
  std::uint64_t seq;
  bool operator>(const Ev& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

// items = the engine's op count, so items_per_second compares directly with the engine's.
void BM_BarePriorityQueueFloor(benchmark::State& state) {
  const Fixture& f = fixture();
  const std::uint64_t n = f.events;
  for (auto _ : state) {
    std::priority_queue<Ev, std::vector<Ev>, std::greater<Ev>> q;
    std::uint64_t seq = 0;
    q.push({100, seq++});
    q.push({250, seq++});
    std::int64_t sum = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      const Ev e = q.top();
      q.pop();
      sum += e.t;
      q.push({e.t + 100 + static_cast<std::int64_t>(i % 7) * 13, seq++});
    }
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(f.schedule.ops.size()));
  state.counters["events"] = static_cast<double>(n);
}
BENCHMARK(BM_BarePriorityQueueFloor)->Unit(benchmark::kMicrosecond);

// The textbook loop: push all N events (times in a shuffled order), then pop them all.
void BM_BarePriorityQueuePushAllPopAll(benchmark::State& state) {
  const Fixture& f = fixture();
  const std::uint64_t n = f.events;
  std::vector<std::int64_t> times(n);
  for (std::uint64_t i = 0; i < n; ++i)
    times[i] = static_cast<std::int64_t>((i * 2654435761u) % 1000003u);
  for (auto _ : state) {
    std::priority_queue<Ev, std::vector<Ev>, std::greater<Ev>> q;
    std::uint64_t seq = 0;
    for (std::uint64_t i = 0; i < n; ++i) q.push({times[i], seq++});
    std::int64_t sum = 0;
    while (!q.empty()) {
      sum += q.top().t;
      q.pop();
    }
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(f.schedule.ops.size()));
  state.counters["events"] = static_cast<double>(n);
}
BENCHMARK(BM_BarePriorityQueuePushAllPopAll)->Unit(benchmark::kMicrosecond);

}  // namespace
