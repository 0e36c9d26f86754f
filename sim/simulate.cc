// Options -> workload -> graph -> costs -> timeline.
#include "sim/simulate.h"

#include "sim/error.h"

namespace tpo::sim {

Workload make_workload(const SimulateOptions& o) {
  Workload w;
  w.model = load_model(o.model);
  w.hardware = load_hardware(o.hardware);
  w.tp = o.tp;
  if (o.phase == "prefill") {
    w.phase = Phase::Prefill;
    w.seq = o.seq;
    w.context = o.context < 0 ? 0 : o.context;
  } else if (o.phase == "decode") {
    w.phase = Phase::Decode;
    w.seq = 1;
    w.context = o.context < 0 ? o.seq : o.context;
  } else {
    throw InputError("--phase", o.phase, "must be prefill or decode");
  }
  w.batch = o.batch;
  w.layers = o.layers == 0 ? w.model.num_layers : o.layers;
  w.embed_head = o.embed_head;
  validate_workload(w);
  return w;
}

StrategySpec make_spec(const SimulateOptions& o, const Workload& w, StrategyKind kind) {
  StrategySpec s;
  s.kind = kind;
  s.ladder_layers = o.ladder_layers;
  s.pieces = o.pieces;
  if ((kind == StrategyKind::Iso || kind == StrategyKind::IsoLadder) && w.phase == Phase::Prefill) {
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
