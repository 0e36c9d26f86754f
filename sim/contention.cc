// Op resources and the contention rules' small pieces (see contention.h).
#include "sim/contention.h"

#include <algorithm>
#include <cmath>

#include "sim/error.h"
#include "sim/json_io.h"

namespace tpo::sim {

double wave_factor(double waves, std::int64_t sms, std::int64_t taken, bool stream_k,
                   bool extra_wave) {
  if (waves <= 0 || taken <= 0 || sms <= 0) return 1.0;
  if (taken >= sms) return 1e6;  // no SM left: it waits (never the case with sane budgets)
  // No more blocks than the SMs left (a fused attention, or gemm_fill off): they all run at
  // once, under every rule. waves is blocks / SMs in a float (OpResources): block counts are
  // compared, and waves rounded up, with a tolerance well above its rounding and well below
  // 1 / SMs.
  if (fits_beside(waves, sms, taken)) return 1.0;
  if (extra_wave) {
    const double w = std::max(1.0, waves);
    return std::max(1.0 + 1.0 / w, static_cast<double>(sms) / static_cast<double>(sms - taken));
  }
  if (stream_k) {
    const double beside = waves * static_cast<double>(sms) / static_cast<double>(sms - taken);
    return std::max(1.0, beside) / std::max(1.0, waves);
  }
  const double alone = std::ceil(waves - 1e-4);
  const double beside =
      std::ceil(waves * static_cast<double>(sms) / static_cast<double>(sms - taken) - 1e-4);
  return beside / std::max(1.0, alone);
}

double comm_budget_factor(const ContentionParams& p) {
  if (!p.enabled || p.comm_ctas_full <= 0 || p.comm_ctas <= 0 || p.comm_ctas >= p.comm_ctas_full) {
    return 1.0;
  }
  return static_cast<double>(p.comm_ctas_full) / static_cast<double>(p.comm_ctas);
}

OpResources op_resources(const Op& op, std::int64_t standalone_ns, const ContentionParams& p) {
  OpResources r;
  const double ns = static_cast<double>(std::max<std::int64_t>(standalone_ns, 1));
  const double sms = static_cast<double>(std::max<std::int64_t>(p.sms, 1));
  switch (op.kind) {
    case OpKind::Gemm: {
      const std::int64_t tiles =
          ((op.m + p.gemm_cta_m - 1) / p.gemm_cta_m) * ((op.n + p.gemm_cta_n - 1) / p.gemm_cta_n);
      // Fewer tiles than SMs: split-K or stream-K spread the work over every SM (gemm_fill).
      r.waves = static_cast<float>(
          (p.gemm_fill ? std::max(static_cast<double>(tiles), sms) : static_cast<double>(tiles)) /
          sms);
      // qkv's per-head norms, rotary kernel and KV-cache write stream their bytes too (their time
      // is in standalone_ns).
      r.hbm_gbps = static_cast<float>(hbm_bytes(op) / ns);
      break;
    }
    case OpKind::Attention: {
      const std::int64_t q = op.seq_end - op.seq_begin, heads = op.n * (op.req_end - op.req_begin);
      // The batched-GEMM attention's largest kernel is its score GEMM, keys x queries per head
      // (a GEMM: it fills every SM, as gemm_fill); a fused kernel runs one block per 128 query
      // rows per head, and with fewer blocks than SMs holds only theirs (since 2026-12-05;
      // before, every SM, so beside a comm kernel it took a second wave, while the cost models
      // price it as those blocks alone, its busiest one deciding). A split-KV kernel
      // (FlashAttention 3's for few blocks) would fill the SMs and run faster alone: not modelled.
      const std::int64_t tiles = std::max<std::int64_t>(
          1, p.attention_batched_gemm ? ((op.seq_end + p.gemm_cta_m - 1) / p.gemm_cta_m) *
                                            ((q + p.gemm_cta_n - 1) / p.gemm_cta_n) * heads
                                      : ((q + 127) / 128) * heads);
      r.waves =
          static_cast<float>((p.attention_batched_gemm ? std::max(static_cast<double>(tiles), sms)
                                                       : static_cast<double>(tiles)) /
                             sms);
      r.hbm_gbps = static_cast<float>(op.bytes / ns);
      break;
    }
    case OpKind::Norm:
    case OpKind::Elementwise:
      // A residual add's post-norm and fused norm stream their bytes too (their time is in
      // standalone_ns).
      r.hbm_gbps = static_cast<float>(hbm_bytes(op) / ns);
      break;
    case OpKind::AllReduce: {
      r.comm = true;
      r.hbm_gbps = static_cast<float>(p.comm_hbm_gbps_per_cta * static_cast<double>(p.comm_ctas));
      // One that also adds and normalizes (--allreduce-fusion) streams those bytes too.
      if (op.residual_of >= 0) {
        const Op add = allreduce_add_op(op);
        r.hbm_gbps += static_cast<float>(hbm_bytes(add) / ns);
      }
      break;
    }
  }
  if (!r.comm) r.beside_comm = wave_factor(r.waves, p.sms, p.comm_ctas, p.stream_k, p.extra_wave);
  // A GEMM or attention kernel that nearly saturates HBM alone (decode's large GEMMs) is
  // memory-bound: its blocks wait on HBM, not on SMs, so beside a comm kernel it loses no wave
  // and only the HBM it draws is shared. It keeps its waves: its blocks still hold every SM, so
  // a comm kernel that arrives waits for them to retire.
  if (r.waves > 0 && p.memory_bound_share > 0 && p.hbm_gbps > 0 &&
      r.hbm_gbps >= p.memory_bound_share * p.hbm_gbps) {
    r.beside_comm = 1.0;
  }
  return r;
}

ContentionParams contention_from_json(const nlohmann::json& j, const std::string& file,
                                      const std::string& path, ContentionParams p) {
  const JsonObject o(j, file, path);
  if (p.sms > 0 && p.sms < 2) {
    throw InputError(file, path,
                     "the contention model shares SMs between a comm kernel and others: it "
                     "needs a GPU of at least 2 SMs");
  }
  o.only_keys({"comm_ctas", "comm_ctas_full", "gemm_cta_m", "gemm_cta_n", "gemm_fill", "stream_k",
               "extra_wave", "hbm_gbps", "memory_bound_share", "comm_hbm_gbps_per_cta",
               "compute_extra", "comm_extra", "source"},
              "a contention block");
  p.enabled = true;
  p.comm_ctas = o.integer_or("comm_ctas", p.comm_ctas);
  p.comm_ctas_full = o.count_or("comm_ctas_full", p.comm_ctas_full);
  p.gemm_cta_m = o.integer_or("gemm_cta_m", p.gemm_cta_m);
  p.gemm_cta_n = o.integer_or("gemm_cta_n", p.gemm_cta_n);
  for (auto [k, field] : {std::pair<const char*, bool*>{"gemm_fill", &p.gemm_fill},
                          {"stream_k", &p.stream_k},
                          {"extra_wave", &p.extra_wave}}) {
    if (!o.has(k)) continue;
    if (!o.raw().at(k).is_boolean()) throw InputError(file, o.field(k), "must be true or false");
    *field = o.raw().at(k).get<bool>();
  }
  p.hbm_gbps = o.number_or("hbm_gbps", p.hbm_gbps);
  p.memory_bound_share =
      o.number_or("memory_bound_share", p.memory_bound_share, /*positive=*/false);
  p.comm_hbm_gbps_per_cta =
      o.number_or("comm_hbm_gbps_per_cta", p.comm_hbm_gbps_per_cta, /*positive=*/false);
  p.compute_extra = o.number_or("compute_extra", p.compute_extra, /*positive=*/false);
  p.comm_extra = o.number_or("comm_extra", p.comm_extra, /*positive=*/false);
  if (p.memory_bound_share > 1) {
    throw InputError(file, o.field("memory_bound_share"),
                     "must be a share of the HBM bandwidth, between 0 and 1");
  }
  p.source = o.string_or("source", p.source);
  // The base's default budget is already below the SMs (load_hardware): only a budget written
  // here can leave none.
  if (p.sms > 0 && p.comm_ctas >= p.sms) {
    throw InputError(file, o.field("comm_ctas"),
                     "must be below the GPU's " + std::to_string(p.sms) + " SMs");
  }
  return p;
}

nlohmann::ordered_json contention_json(const ContentionParams& p) {
  // comm_ctas is a knob of each run (--comm-ctas), not a fitted value: not written.
  return nlohmann::ordered_json{{"gemm_cta_m", p.gemm_cta_m},
                                {"gemm_cta_n", p.gemm_cta_n},
                                {"gemm_fill", p.gemm_fill},
                                {"stream_k", p.stream_k},
                                {"extra_wave", p.extra_wave},
                                {"hbm_gbps", p.hbm_gbps},
                                {"memory_bound_share", p.memory_bound_share},
                                {"comm_hbm_gbps_per_cta", p.comm_hbm_gbps_per_cta},
                                {"compute_extra", p.compute_extra},
                                {"comm_extra", p.comm_extra},
                                {"source", p.source}};
}

}  // namespace tpo::sim
