// Strategy options -> spec; workload + spec -> graph -> costs -> timeline.
#include "sim/simulate.h"

#include "sim/chunk_split.h"
#include "sim/error.h"

namespace tpo::sim {

StrategyKind parse_strategy_name(const std::string& name) {
  const StrategyDescriptor* d = find_strategy(name);
  if (!d) {
    throw FieldError("strategy", name,
                     "unknown strategy (choose one of: " + strategy_names() + ")");
  }
  return d->kind;
}

StrategySpec make_spec(const StrategyOptions& o, const Workload& w, StrategyKind kind) {
  StrategySpec s;
  s.kind = kind;
  s.ladder_layers = o.ladder_layers;
  s.pieces = o.pieces;
  if (strategy(kind).uses_chunks() && w.phase == Phase::Prefill) {
    s.chunk_tokens =
        resolve_chunks(w.seq, o.split.empty() && o.chunks == 0 ? 2 : o.chunks, o.split);
  }
  return s;
}

SimResult simulate(const Workload& w, const StrategySpec& spec, const CostModel& cm) {
  SimResult r;
  r.spec = spec;
  r.schedule = build_schedule(w, spec);
  r.costs = cost_schedule(r.schedule, cm);
  Engine engine;
  r.timeline = engine.run(r.schedule, r.costs);
  return r;
}

}  // namespace tpo::sim
