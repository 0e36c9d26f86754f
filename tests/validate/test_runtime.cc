// The CPU runtime: every strategy executes the simulator's graph on a tiny model, and its
// output matches the reference forward of its architecture (and `none`'s output when the
// strategy preserves the function); measured timelines respect every dependency; random
// valid schedules never deadlock.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include <random>
#include <sstream>

#include "../sim/toy.h"
#include "sim/strategy.h"
#include "validate/interpreter.h"
#include "validate/kernels/cpu_kernels.h"
#include "validate/runtime.h"
#include "validate/validate_run.h"

using namespace tpo;
using sim::StrategyKind;
using sim::StrategySpec;

namespace {

sim::Workload tiny(sim::Phase phase, std::int64_t batch, std::int64_t seq, std::int64_t context,
                   std::int64_t layers = 3) {
  auto w = test::toy_workload(seq, layers);  // hidden 64, 4 heads on 2 KV heads, TP 2
  w.phase = phase;
  w.batch = batch;
  w.context = context;
  return w;
}

// One measured run, no warm-up: these tests check what is computed, not how fast.
validate::RunOptions once() {
  validate::RunOptions o;
  o.repeat = 1;
  o.warmup = 0;
  return o;
}

// What `none` computes on the CPU runtime for this workload.
std::vector<float> none_output(const sim::Workload& w, const validate::RunOptions& o) {
  return validate::run_cpu(w, sim::build_schedule(w, StrategySpec(StrategyKind::None)), o).output;
}

void check_timeline(const sim::Schedule& s, const validate::RunResult& r) {
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    CHECK(r.end_ns[i] >= r.start_ns[i]);
    for (auto d : s.ops[i].deps) CHECK(r.start_ns[i] >= r.end_ns[static_cast<std::size_t>(d)]);
    // Stream order: the previous op of the same stream ended first.
    for (std::size_t j = i; j-- > 0;) {
      if (s.ops[j].stream == s.ops[i].stream) {
        CHECK(r.start_ns[i] >= r.end_ns[j]);
        break;
      }
    }
  }
}

}  // namespace

TEST_CASE("every strategy runs on a tiny model and computes what its architecture should") {
  const validate::RunOptions o = once();
  for (auto phase : {sim::Phase::Prefill, sim::Phase::Decode}) {
    const auto w = phase == sim::Phase::Prefill ? tiny(phase, 2, 96, 0) : tiny(phase, 4, 1, 40);
    const auto none =
        validate::run_cpu(w, sim::build_schedule(w, StrategySpec(StrategyKind::None)), o);
    for (auto k : sim::all_strategies()) {
      StrategySpec spec(k);
      spec.pieces = 2;
      if (k == StrategyKind::Iso || k == StrategyKind::IsoLadder) spec.chunk_tokens = {32, 64};
      if (k == StrategyKind::Ladder) spec.ladder_layers = 2;
      if (!sim::not_applicable_reason(w, spec).empty()) continue;
      CAPTURE(sim::strategy_name(k));
      CAPTURE(sim::phase_name(phase));
      const sim::Schedule s = sim::build_schedule(w, spec);
      const auto r = validate::run_cpu(w, s, o);
      const auto ref = validate::reference_forward(w, spec, o.seed);
      CHECK(validate::relative_error(r.output, ref) < 1e-5);
      if (sim::preserves_function(k)) {
        CHECK(validate::relative_error(r.output, none.output) < 1e-5);
      } else {
        // A different architecture really computes something else.
        CHECK(validate::relative_error(r.output, none.output) > 1e-3);
      }
      check_timeline(s, r);
    }
  }
}

TEST_CASE("a wrong graph is caught: residual adds out of order change the output") {
  const auto w = tiny(sim::Phase::Prefill, 1, 64, 0, 2);
  sim::Schedule s = sim::build_schedule(w, StrategySpec(StrategyKind::None));
  // Drop the first residual add's effect by pointing it at a module not yet computed.
  for (auto& op : s.ops) {
    if (op.code == sim::OpCode::ResidualAdd) {
      op.residual_of = op.residual_of == 0 ? 1 : op.residual_of;
      break;
    }
  }
  const validate::RunOptions o = once();
  const auto r = validate::run_cpu(w, s, o);
  const auto ref = validate::reference_forward(w, StrategySpec(StrategyKind::None), o.seed);
  CHECK(validate::relative_error(r.output, ref) > 1e-3);
}

TEST_CASE("random valid schedules never deadlock and stay correct") {
  std::mt19937 rng(7);
  const validate::RunOptions o = once();
  for (int trial = 0; trial < 12; ++trial) {
    const std::int64_t seq = 64 + 32 * static_cast<std::int64_t>(rng() % 4);
    const std::int64_t batch = 1 + static_cast<std::int64_t>(rng() % 3);
    const auto w = tiny(sim::Phase::Prefill, batch, seq, 0, 2);
    const auto kinds = sim::all_strategies();
    StrategySpec spec(kinds[rng() % kinds.size()]);
    spec.pieces = 2 + static_cast<std::int64_t>(rng() % 3);
    spec.ladder_layers = static_cast<std::int64_t>(rng() % 3);
    const std::int64_t k = 2 + static_cast<std::int64_t>(rng() % 3);
    std::vector<std::int64_t> cuts;
    std::int64_t left = seq;
    for (std::int64_t i = 0; i + 1 < k; ++i) {
      const std::int64_t c =
          1 + static_cast<std::int64_t>(rng() % static_cast<unsigned>(left - (k - 1 - i)));
      cuts.push_back(c);
      left -= c;
    }
    cuts.push_back(left);
    spec.chunk_tokens = cuts;
    if (!sim::not_applicable_reason(w, spec).empty()) continue;
    CAPTURE(sim::strategy_name(spec.kind));
    const sim::Schedule s = sim::build_schedule(w, spec);
    const auto r = validate::run_cpu(w, s, o);
    CHECK(validate::relative_error(r.output, validate::reference_forward(w, spec, o.seed)) < 1e-5);
    check_timeline(s, r);
  }
}

TEST_CASE("the error with logits: the stream and the logits each on their own scale") {
  // A stream of values near 10 and 4 logits near 0.5, one of them 10% off: 0.5% of the whole
  // output's scale, but 10% of the logits'.
  std::vector<float> want = {10, -8, 9, 7, 0.5f, -0.4f, 0.3f, 0.5f}, got = want;
  got[7] = 0.45f;
  CHECK(validate::relative_error(got, want) < 0.01);
  CHECK(validate::output_error(got, want, 4) == doctest::Approx(0.1).epsilon(1e-3));
  CHECK(validate::output_error(got, want, 0) == validate::relative_error(got, want));
  got = want;
  got[0] = 11;  // the stream 10% off
  CHECK(validate::output_error(got, want, 4) == doctest::Approx(0.1).epsilon(1e-3));
}

TEST_CASE("the error measure: max |difference| / max |reference|, and NaN anywhere is wrong") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(validate::relative_error({1.0f, 2.0f}, {1.0f, 4.0f}) == doctest::Approx(0.5));
  CHECK(validate::relative_error({2.0f, 4.0f}, {2.0f, 4.0f}) == 0.0);
  CHECK(std::isinf(validate::relative_error({nan, 0.0f}, {1.0f, 0.0f})));
  CHECK(std::isinf(validate::relative_error({0.0f, nan}, {1.0f, 0.0f})));
  CHECK(std::isinf(validate::relative_error({1.0f}, {1.0f, 2.0f})));  // sizes differ
}

TEST_CASE("a GeGLU model runs on the CPU and matches its reference, which is not SwiGLU's") {
  const validate::RunOptions o = once();
  auto w = tiny(sim::Phase::Prefill, 1, 64, 0, 2);
  const auto silu_out = none_output(w, o);
  w.model.activation = sim::ModelConfig::Activation::Gelu;
  const StrategySpec iso(StrategyKind::Iso, {32, 32});
  const auto r = validate::run_cpu(w, sim::build_schedule(w, iso), o);
  const auto ref = validate::reference_forward(w, iso, o.seed);
  CHECK(validate::relative_error(r.output, ref) <= 1e-5);
  CHECK(validate::relative_error(r.output, silu_out) > 1e-3);  // the gelu path really ran
}

TEST_CASE("the rotary kernel: rotate-half pairs by position, scores depend on distance only") {
  // theta 100, 4 values rotated of head_dim 6 (partial): pairs (0, 2) and (1, 3); 4 and 5 kept.
  const auto table = validate::cpu::rope_table(40, 4, 100.0);
  CHECK(table[0] == 1.0f);  // position 0: cos 1, sin 0
  CHECK(table[2] == 0.0f);
  // Position 3: pair 0 at angle 3, pair 1 at 3 x 100^(-1/2) = 0.3.
  CHECK(table[3 * 4 + 0] == doctest::Approx(std::cos(3.0)));
  CHECK(table[3 * 4 + 1] == doctest::Approx(std::cos(0.3)));
  CHECK(table[3 * 4 + 3] == doctest::Approx(std::sin(0.3)));
  // Two rows (one request), two heads of 6 values, 2 values of padding per row (pitch 14).
  std::vector<float> x(28);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * static_cast<float>(i % 11) - 0.4f;
  std::vector<float> y = x;
  validate::cpu::rope(y.data(), 14, 2, 6, 4, 2, 3, table.data());  // positions 3 and 4
  // Row 0 (position 3), head 1 (values 6..11): pair 0 = (6, 8) rotated by 3 rad.
  const double c = std::cos(3.0), s = std::sin(3.0);
  CHECK(y[6] == doctest::Approx(x[6] * c - x[8] * s));
  CHECK(y[8] == doctest::Approx(x[8] * c + x[6] * s));
  // Unrotated values and the padding are untouched; each pair keeps its length.
  for (std::size_t i : {4u, 5u, 10u, 11u, 12u, 13u, 18u, 19u, 24u, 25u, 26u, 27u})
    CHECK(y[i] == x[i]);
  CHECK(y[15] * y[15] + y[17] * y[17] == doctest::Approx(x[15] * x[15] + x[17] * x[17]));
  // A query at position p and a key at position p - 5 score the same wherever p is.
  auto score = [&](std::int64_t p, std::int64_t distance = 5) {
    std::vector<float> q(x.begin(), x.begin() + 6), k(x.begin() + 14, x.begin() + 20);
    validate::cpu::rope(q.data(), 6, 1, 6, 4, 1, p, table.data());
    validate::cpu::rope(k.data(), 6, 1, 6, 4, 1, p - distance, table.data());
    double d = 0;
    for (int i = 0; i < 6; ++i)
      d += q[static_cast<std::size_t>(i)] * k[static_cast<std::size_t>(i)];
    return d;
  };
  CHECK(score(7) == doctest::Approx(score(30)).epsilon(1e-5));
  CHECK(score(7) != doctest::Approx(score(7, 2)).epsilon(1e-3));  // the distance matters
  // Requests: each one's rows start again at the same position.
  std::vector<float> two = x;
  validate::cpu::rope(two.data(), 14, 2, 6, 4, 1, 3, table.data(), 2);
  CHECK(std::equal(two.begin(), two.begin() + 14, y.begin()));
  std::vector<float> second(x.begin() + 14, x.end());
  validate::cpu::rope(second.data(), 14, 2, 6, 4, 1, 3, table.data());
  CHECK(std::equal(two.begin() + 14, two.end(), second.begin()));
}

TEST_CASE("the model's rms_norm_eps: every runtime norm and the reference use it") {
  const validate::RunOptions o = once();
  auto w = tiny(sim::Phase::Prefill, 2, 64, 16, 2);
  w.model.qk_norm = true;
  w.model.post_norms = true;
  w.embed_head = true;  // the final norm too
  StrategySpec iso(StrategyKind::Iso);
  iso.chunk_tokens = std::vector<std::int64_t>{24, 40};
  const auto base = validate::run_cpu(w, sim::build_schedule(w, iso), o).output;
  // A large epsilon, so that it shows against the rows' mean squares (about 1).
  w.model.rms_norm_eps = 0.05;
  const auto r = validate::run_cpu(w, sim::build_schedule(w, iso), o).output;
  CHECK(validate::relative_error(r, validate::reference_forward(w, iso, o.seed)) < 1e-5);
  CHECK(validate::relative_error(r, base) > 1e-3);
}

TEST_CASE("Gemma's attention scores: the runtime and the reference scale and soft-cap alike") {
  const validate::RunOptions o = once();
  auto w = tiny(sim::Phase::Prefill, 2, 64, 16, 2);
  StrategySpec iso(StrategyKind::Iso);
  iso.chunk_tokens = std::vector<std::int64_t>{24, 40};
  const auto base = validate::run_cpu(w, sim::build_schedule(w, iso), o).output;
  std::vector<float> capped;
  // A scale of its own (query_pre_attn_scalar), then with a cap tight enough to bite on these
  // scores.
  for (const double cap : {0.0, 0.2}) {
    CAPTURE(cap);
    w.model.attn_scale = 0.5;
    w.model.attn_softcap = cap;
    for (const auto& spec : {StrategySpec(StrategyKind::None), iso}) {
      const auto r = validate::run_cpu(w, sim::build_schedule(w, spec), o).output;
      CHECK(validate::relative_error(r, validate::reference_forward(w, spec, o.seed)) < 1e-5);
      CHECK(validate::relative_error(r, base) > 1e-3);  // the scale and the cap change the output
      if (cap > 0 && spec.kind == StrategyKind::Iso) capped = r;
    }
  }
  // The cap's own effect, against the same scale without it.
  w.model.attn_softcap = 0;
  const auto uncapped = validate::run_cpu(w, sim::build_schedule(w, iso), o).output;
  CHECK(validate::relative_error(capped, uncapped) > 1e-3);
  // The CPU kernel: cap x tanh(score / cap) on the scaled scores, before the softmax.
  validate::AttentionShape a;
  a.q_tokens = 2;
  a.prefix = 1;
  a.head_dim = 2;
  a.kv_capacity = 3;
  a.scale = 1.0f;
  a.softcap = 0.5f;
  const std::vector<float> q{1, 0, 2, 1}, k{1, 0, 0, 1, 3, 1}, v{1, 0, 0, 1, 2, 2};
  std::vector<float> out(4);
  validate::cpu::attention(q.data(), k.data(), v.data(), out.data(), a);
  // Query 1 (position 2) sees keys 0..2: scores 2, 1, 7, capped 0.5 tanh(4), 0.5 tanh(2),
  // 0.5 tanh(14).
  double p[3], sum = 0;
  const double sc[3] = {2, 1, 7};
  for (int j = 0; j < 3; ++j) sum += p[j] = std::exp(0.5 * std::tanh(sc[j] / 0.5));
  CHECK(out[2] == doctest::Approx((p[0] * 1 + p[1] * 0 + p[2] * 2) / sum).epsilon(1e-5));
  CHECK(out[3] == doctest::Approx((p[0] * 0 + p[1] * 1 + p[2] * 2) / sum).epsilon(1e-5));
}

TEST_CASE("the validation data's rotary table holds bf16 values, as the GPU runtime uploads it") {
  const auto w = tiny(sim::Phase::Prefill, 1, 64, 32, 1);
  const auto m = validate::make_data(w, 7);
  REQUIRE(m.rotary_dim > 0);
  const auto exact = validate::cpu::rope_table(m.cap, m.rotary_dim, w.model.rope_theta);
  REQUIRE(m.rope_table.size() == exact.size());
  int rounded = 0;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &m.rope_table[i], sizeof bits);
    CHECK((bits & 0xFFFFu) == 0);  // a bf16 value: what the upload keeps exactly
    CHECK(std::fabs(m.rope_table[i] - exact[i]) <= std::fabs(exact[i]) / 256.0f + 1e-30f);
    rounded += m.rope_table[i] != exact[i];
  }
  CHECK(rounded > 0);
}

TEST_CASE("rotary embeddings: the runtime rotates at each chunk's positions, --rope none not") {
  const validate::RunOptions o = once();
  auto w = tiny(sim::Phase::Prefill, 2, 64, 16, 2);
  std::vector<float> rotated;
  // The whole head (16 values), half of it (partial_rotary_factor 0.5), then none.
  for (const std::int64_t rot : {16, 8, 0}) {
    const bool rope = rot > 0;
    w.rope = rope;
    if (rope) w.model.rotary_dim = rot;
    CAPTURE(rot);
    for (auto k : {StrategyKind::None, StrategyKind::Iso}) {
      StrategySpec spec(k);
      if (k == StrategyKind::Iso) spec.chunk_tokens = {20, 44};
      const auto r = validate::run_cpu(w, sim::build_schedule(w, spec), o);
      CHECK(validate::relative_error(r.output, validate::reference_forward(w, spec, o.seed)) <
            1e-5);
      // Each rotation changed what was computed (from the whole head's, and without one).
      if (k == StrategyKind::None) {
        if (!rotated.empty()) CHECK(validate::relative_error(r.output, rotated) > 1e-4);
        if (rot == 16) rotated = r.output;
      }
    }
  }
}

TEST_CASE("biases (Qwen2's qkv, Llama's attention_bias and mlp_bias): the runtime adds them") {
  const validate::RunOptions o = once();
  auto w = tiny(sim::Phase::Prefill, 2, 64, 16, 2);
  const auto plain = none_output(w, o);
  // Each bias alone changes the output; with all three every strategy matches its reference
  // (the row-parallel biases added once, by rank 0, before the all-reduce).
  int ran = 0;
  for (const int which : {0, 1, 2, 3}) {
    w.model.qkv_bias = which == 0 || which == 3;
    w.model.o_bias = which == 1 || which == 3;
    w.model.mlp_bias = which == 2 || which == 3;
    CAPTURE(which);
    for (auto k : {StrategyKind::None, StrategyKind::Iso, StrategyKind::ParallelBlock,
                   StrategyKind::GemmSplit}) {
      if (which < 3 && k != StrategyKind::None) continue;
      const StrategySpec spec =
          k == StrategyKind::Iso ? StrategySpec(k, {20, 44}) : StrategySpec(k);
      if (!sim::not_applicable_reason(w, spec).empty()) continue;
      CAPTURE(sim::strategy_name(k));
      ++ran;
      const auto r = validate::run_cpu(w, sim::build_schedule(w, spec), o);
      CHECK(validate::relative_error(r.output, validate::reference_forward(w, spec, o.seed)) <
            1e-5);
      if (k == StrategyKind::None) CHECK(validate::relative_error(r.output, plain) > 1e-4);
    }
  }
  CHECK(ran == 7);  // each bias alone unsplit (3), then all of them in four strategies
}

TEST_CASE("Gemma's post-norms: every strategy's runtime matches its reference, which is changed") {
  const validate::RunOptions o = once();
  auto w = tiny(sim::Phase::Prefill, 2, 64, 16, 2);
  const auto plain = none_output(w, o);
  w.model.post_norms = true;
  int ran = 0;
  for (auto k : {StrategyKind::None, StrategyKind::Iso, StrategyKind::Ladder,
                 StrategyKind::ParallelBlock, StrategyKind::GemmSplit, StrategyKind::IsoLadder}) {
    StrategySpec spec(k);
    if (k == StrategyKind::Iso || k == StrategyKind::IsoLadder) spec.chunk_tokens = {20, 44};
    if (!sim::not_applicable_reason(w, spec).empty()) continue;
    CAPTURE(sim::strategy_name(k));
    ++ran;
    const sim::Schedule s = sim::build_schedule(w, spec);
    const auto r = validate::run_cpu(w, s, o);
    CHECK(validate::relative_error(r.output, validate::reference_forward(w, spec, o.seed)) < 1e-5);
    if (k == StrategyKind::None) CHECK(validate::relative_error(r.output, plain) > 1e-4);
    check_timeline(s, r);
  }
  CHECK(ran == 6);
}

TEST_CASE(
    "per-head query and key norms (Qwen3): the runtime matches its reference, which is changed") {
  const validate::RunOptions o = once();
  for (auto phase : {sim::Phase::Prefill, sim::Phase::Decode}) {
    auto w = phase == sim::Phase::Prefill ? tiny(phase, 2, 64, 16, 2) : tiny(phase, 3, 1, 40, 2);
    CAPTURE(sim::phase_name(phase));
    const auto plain = none_output(w, o);
    w.model.qk_norm = true;
    for (auto k : {StrategyKind::None, StrategyKind::Iso}) {
      StrategySpec spec(k);
      if (k == StrategyKind::Iso) spec.chunk_tokens = {20, 44};
      if (!sim::not_applicable_reason(w, spec).empty()) continue;
      const auto r = validate::run_cpu(w, sim::build_schedule(w, spec), o);
      CHECK(validate::relative_error(r.output, validate::reference_forward(w, spec, o.seed)) <
            1e-5);
      if (k == StrategyKind::None) CHECK(validate::relative_error(r.output, plain) > 1e-4);
    }
  }
  // The kernel: each head of a strided row normalized alone, the rest of the row untouched.
  std::vector<float> x(2 * 10), w = {1.0f, 2.0f, 0.5f, 1.0f};
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  std::vector<float> y = x;
  validate::cpu::head_rmsnorm(y.data(), 10, 2, 4, w.data(), 2);
  for (std::int64_t r = 0; r < 2; ++r) {
    for (std::int64_t h = 0; h < 2; ++h) {
      const float* in = x.data() + r * 10 + h * 4;
      double ss = 0;
      for (int c = 0; c < 4; ++c) ss += in[c] * in[c];
      const double inv = 1.0 / std::sqrt(ss / 4 + 1e-5);
      for (int c = 0; c < 4; ++c) {
        CHECK(y[static_cast<std::size_t>(r * 10 + h * 4 + c)] ==
              doctest::Approx(in[c] * inv * w[static_cast<std::size_t>(c)]));
      }
    }
    CHECK(y[static_cast<std::size_t>(r * 10 + 8)] == x[static_cast<std::size_t>(r * 10 + 8)]);
    CHECK(y[static_cast<std::size_t>(r * 10 + 9)] == x[static_cast<std::size_t>(r * 10 + 9)]);
  }
}

TEST_CASE("sliding-window layers run on the CPU past the window and match their reference") {
  // Layers 0 and 2 attend over the last 24 positions, layer 1 over all (Gemma-2's pattern);
  // prompts and contexts reach past the window, in prefill and decode, cut into ISO chunks.
  const validate::RunOptions o = once();
  for (auto phase : {sim::Phase::Prefill, sim::Phase::Decode}) {
    auto w = phase == sim::Phase::Prefill ? tiny(phase, 2, 64, 16) : tiny(phase, 3, 1, 40);
    CAPTURE(sim::phase_name(phase));
    const auto full_out = none_output(w, o);
    w.model.sliding_window = 24;
    w.model.windowed_layers = {true, false, true};
    for (auto k : {StrategyKind::None, StrategyKind::Iso, StrategyKind::Ladder}) {
      StrategySpec spec(k);
      if (k == StrategyKind::Iso) spec.chunk_tokens = {20, 44};
      if (!sim::not_applicable_reason(w, spec).empty()) continue;
      CAPTURE(sim::strategy_name(k));
      const sim::Schedule s = sim::build_schedule(w, spec);
      for (const auto& op : s.ops) {
        if (op.kind == sim::OpKind::Attention) CHECK(op.window == (op.layer == 1 ? 0 : 24));
      }
      const auto r = validate::run_cpu(w, s, o);
      const auto ref = validate::reference_forward(w, spec, o.seed);
      CHECK(validate::relative_error(r.output, ref) < 1e-5);
      // The window really changed what was computed.
      if (k == StrategyKind::None) CHECK(validate::relative_error(r.output, full_out) > 1e-4);
      check_timeline(s, r);
    }
  }
}

namespace {
// Counts the interpreter's kernel calls, and the requests of each store_kv and attention.
struct CountingKernels : validate::RankKernels {
  int calls = 0;
  std::vector<std::int64_t> batched;  // requests per rope / store_kv / attention call
  void qk_norm(std::int64_t, std::int64_t, std::int64_t) override { ++calls; }
  void rope(std::int64_t, std::int64_t, std::int64_t, std::int64_t requests) override {
    ++calls;
    batched.push_back(requests);
  }
  void rmsnorm(std::int64_t, bool, std::int64_t, std::int64_t) override { ++calls; }
  void gemm(validate::Weight, std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool,
            bool) override {
    ++calls;
  }
  void store_kv(std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                std::int64_t requests) override {
    ++calls;
    batched.push_back(requests);
  }
  void attention(std::int64_t, std::int64_t, std::int64_t requests, std::int64_t, std::int64_t,
                 std::int64_t) override {
    ++calls;
    batched.push_back(requests);
  }
  void gated_act(std::int64_t, std::int64_t) override { ++calls; }
  void residual_add(std::int64_t, std::int64_t, std::int64_t, std::int64_t, int, std::int64_t,
                    int) override {
    ++calls;
  }
  std::int64_t allreduce(std::int64_t, std::int64_t, std::int64_t) override {
    ++calls;
    return 0;
  }
  void embed(std::int64_t, std::int64_t) override { ++calls; }
  void final_norm(const validate::HeadRows& h) override {
    ++calls;
    batched.push_back(h.requests);
  }
  void lm_head(const validate::HeadRows& h) override {
    ++calls;
    batched.push_back(h.requests);
  }
  std::int64_t gather_logits() override {
    ++calls;
    return 0;
  }
};
}  // namespace

TEST_CASE("a batch cut into ISO chunks: rows chunk by chunk, one kernel per chunk op") {
  const auto w = tiny(sim::Phase::Prefill, 3, 96, 0, 2);
  StrategySpec spec(StrategyKind::Iso);
  spec.chunk_tokens = {32, 64};
  const sim::Schedule s = sim::build_schedule(w, spec);
  const auto m = validate::make_data(w, 1);
  const validate::RowLayout l = validate::row_layout(m, s);
  REQUIRE(l.starts == std::vector<std::int64_t>{0, 32, 96});
  // Chunk 0 of the 3 requests takes rows 0..95, chunk 1 rows 96..287.
  CHECK(l.row(0, 0) == 0);
  CHECK(l.row(2, 31) == 95);
  CHECK(l.row(0, 32) == 96);
  CHECK(l.row(1, 32) == 160);
  CHECK(l.row(2, 95) == 287);
  // The permutation and its inverse.
  std::vector<float> x(3 * 96 * 2);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  const auto y = validate::to_layout(l, x, 2);
  CHECK(y[2 * 96] == x[2 * 32]);  // row 96 of the layout: request 0, position 32
  CHECK(validate::from_layout(l, y, 2) == x);
  // Every op of the graph covers one chunk of all three requests: one block, one call.
  for (const auto& op : s.ops) {
    CAPTURE(sim::op_code_name(op.code));
    const auto blocks = validate::row_blocks(l, m.context, op);
    REQUIRE(blocks.size() == 1);
    CHECK(blocks[0].requests == 3);
    CountingKernels k;
    validate::interpret(m, l, op, k);
    // qkv: the GEMM, the rotary kernel and the KV-cache write.
    CHECK(k.calls == (op.code == sim::OpCode::Qkv ? 3 : 1));
    for (auto r : k.batched) CHECK(r == 3);
  }
  // Without chunks the rows stay request by request.
  const sim::Schedule none = sim::build_schedule(w, StrategySpec(StrategyKind::None));
  const validate::RowLayout n = validate::row_layout(m, none);
  CHECK(n.row(2, 5) == 2 * 96 + 5);
}

TEST_CASE("fused add and norm: the runtimes run the norm in the add's call, the output unchanged") {
  const validate::RunOptions o = once();
  auto w = tiny(sim::Phase::Prefill, 2, 64, 16, 2);
  w.model.post_norms = true;  // the post-norm, then the fused add and norm
  int ran = 0;
  for (auto k :
       {StrategyKind::None, StrategyKind::Iso, StrategyKind::Ladder, StrategyKind::ParallelBlock,
        StrategyKind::GemmSplit, StrategyKind::IsoLadder, StrategyKind::Microbatch}) {
    StrategySpec spec(k);
    if (k == StrategyKind::Iso || k == StrategyKind::IsoLadder)
      spec.chunk_tokens = std::vector<std::int64_t>{20, 44};
    if (!sim::not_applicable_reason(w, spec).empty()) continue;
    CAPTURE(sim::strategy_name(k));
    ++ran;
    w.fused_add_norm = false;
    const sim::Schedule apart = sim::build_schedule(w, spec);
    const auto a = validate::run_cpu(w, apart, o);
    w.fused_add_norm = true;
    const sim::Schedule fused = sim::build_schedule(w, spec);
    REQUIRE(fused.ops.size() < apart.ops.size());
    const auto f = validate::run_cpu(w, fused, o);
    // The same arithmetic in the same order (cpu::add_rmsnorm is add_inplace then rmsnorm).
    CHECK(validate::relative_error(f.output, a.output) < 1e-6);
    CHECK(validate::relative_error(f.output, validate::reference_forward(w, spec, o.seed)) < 1e-5);
    check_timeline(fused, f);
  }
  CHECK(ran == 7);
  // The kernel: x += o, y = rmsnorm(x), as the two kernels apart.
  std::vector<float> x = {1, -2, 3, 0.5f, 2, 2, -1, 4}, out = {0.5f, 1, -1, 2, 0, -3, 1, 1};
  const std::vector<float> wt = {1.0f, 0.5f, 2.0f, 1.5f};
  std::vector<float> x2 = x, y(8), y2(8);
  validate::cpu::add_rmsnorm(x.data(), out.data(), wt.data(), y.data(), 2, 4);
  validate::cpu::add_inplace(x2.data(), out.data(), 8);
  validate::cpu::rmsnorm(x2.data(), wt.data(), y2.data(), 2, 4);
  CHECK(x == x2);
  CHECK(y == y2);
  CHECK(x[1] == -1.0f);
}

TEST_CASE(
    "--allreduce-fusion add-norm: the comm thread adds and normalizes, the output unchanged") {
  const validate::RunOptions o = once();
  int ran = 0;
  // With and without Gemma's post-norms, the norm fused into the add or apart; ladder on its
  // last layer only too (the first layer's all-reduces add, the ladder layer's do not).
  for (const bool post : {false, true}) {
    for (const bool fused_norm : {true, false}) {
      auto w = tiny(sim::Phase::Prefill, 2, 64, 16, 2);
      w.model.post_norms = post;
      w.fused_add_norm = fused_norm;
      for (auto k : {StrategyKind::None, StrategyKind::Iso, StrategyKind::Ladder,
                     StrategyKind::ParallelBlock, StrategyKind::GemmSplit, StrategyKind::IsoLadder,
                     StrategyKind::Microbatch}) {
        for (const std::int64_t ladder_layers : {0, 1}) {
          StrategySpec spec(k);
          if (ladder_layers > 0 && k != StrategyKind::Ladder) continue;
          spec.ladder_layers = ladder_layers;
          if (k == StrategyKind::Iso || k == StrategyKind::IsoLadder) {
            spec.chunk_tokens = std::vector<std::int64_t>{20, 44};
          }
          if (!sim::not_applicable_reason(w, spec).empty()) continue;
          CAPTURE(sim::strategy_name(k));
          CAPTURE(ladder_layers);
          CAPTURE(post);
          CAPTURE(fused_norm);
          ++ran;
          w.allreduce_add = false;
          const auto plain = validate::run_cpu(w, sim::build_schedule(w, spec), o);
          w.allreduce_add = true;
          const sim::Schedule s = sim::build_schedule(w, spec);
          const auto f = validate::run_cpu(w, s, o);
          CHECK(validate::relative_error(f.output, plain.output) < 1e-6);
          CHECK(validate::relative_error(f.output, validate::reference_forward(w, spec, o.seed)) <
                1e-5);
          check_timeline(s, f);
        }
      }
    }
  }
  CHECK(ran == 4 * 8);
}

TEST_CASE("--embed-head: the runtime embeds token ids and ends with the gathered logits") {
  const validate::RunOptions o = once();
  int ran = 0;
  for (const bool replicated : {false, true}) {
    for (const bool fused_norm : {true, false}) {
      for (const std::int64_t tp : {1, 2}) {
        for (auto phase : {sim::Phase::Prefill, sim::Phase::Decode}) {
          auto w =
              phase == sim::Phase::Prefill ? tiny(phase, 3, 64, 16, 2) : tiny(phase, 4, 1, 24, 2);
          w.tp = tp;
          w.embed_head = true;
          w.vocab_replicated = replicated;
          w.fused_add_norm = fused_norm;
          // The all-reduces that add (the last ones run the final norm): beside the sharded
          // embedding's all-reduce and the gather too.
          w.allreduce_add = fused_norm && tp == 2;
          for (auto k : sim::all_strategies()) {
            StrategySpec spec(k);
            spec.pieces = 2;
            if (k == StrategyKind::Iso || k == StrategyKind::IsoLadder) {
              spec.chunk_tokens = std::vector<std::int64_t>{20, 44};
            }
            if (!sim::not_applicable_reason(w, spec).empty()) continue;
            CAPTURE(sim::strategy_name(k));
            CAPTURE(sim::phase_name(phase));
            CAPTURE(replicated);
            CAPTURE(fused_norm);
            CAPTURE(tp);
            ++ran;
            const sim::Schedule s = sim::build_schedule(w, spec);
            // The CUDA runtime enqueues ops in order and waits on earlier ops' events only:
            // every dependency must come before its op (it refuses a schedule otherwise).
            for (std::size_t i = 0; i < s.ops.size(); ++i) {
              for (auto dep : s.ops[i].deps) CHECK(std::size_t(dep) < i);
            }
            const auto r = validate::run_cpu(w, s, o);
            const auto ref = validate::reference_forward(w, spec, o.seed);
            const auto d = sim::validate_workload(w);
            // The residual stream, then each request's logits over every slice.
            const std::int64_t vocab = replicated ? 100 : (100 + tp - 1) / tp * tp;
            REQUIRE(d.vocab * (replicated ? 1 : tp) == vocab);
            REQUIRE(r.output.size() ==
                    static_cast<std::size_t>(w.batch * w.seq * 64 + w.batch * vocab));
            CHECK(validate::relative_error(r.output, ref) < 1e-5);
            // The logits alone: right, and not zero.
            const std::vector<float> logits(r.output.end() - w.batch * vocab, r.output.end());
            const std::vector<float> ref_logits(ref.end() - w.batch * vocab, ref.end());
            CHECK(validate::relative_error(logits, ref_logits) < 1e-5);
            double most = 0;
            for (float v : ref_logits) most = std::max(most, std::fabs(static_cast<double>(v)));
            CHECK(most > 0.1);
            check_timeline(s, r);
          }
        }
      }
    }
  }
  CHECK(ran == 2 * 2 * 2 * (7 + 5));  // prefill: all 7 strategies; decode: the 5 that apply
  // The embedding starts the stream: without it (x0 instead) the output differs.
  auto w = tiny(sim::Phase::Prefill, 2, 32, 0, 1);
  w.embed_head = true;
  const auto with = validate::reference_forward(w, StrategySpec(StrategyKind::None), o.seed);
  w.embed_head = false;
  const auto without = validate::reference_forward(w, StrategySpec(StrategyKind::None), o.seed);
  REQUIRE(with.size() > without.size());
  CHECK(validate::relative_error(std::vector<float>(with.begin(), with.begin() + 2 * 32 * 64),
                                 without) > 0.1);
  // The lookup: a row of the slice where it holds the id, zeros elsewhere.
  const std::vector<std::int32_t> ids = {5, 2, 9};
  const std::vector<float> table = {1, 2, 3, 4, 5, 6};  // rows 2..4 of a 2-wide table
  std::vector<float> x(6, -1.0f);
  validate::cpu::embed(ids.data(), table.data(), 2, 3, x.data(), 3, 2);
  CHECK(x == std::vector<float>{0, 0, 1, 2, 0, 0});
}

TEST_CASE("a first op that starts much later than predicted is noted, with its share") {
  validate::ValidateReport r;
  r.options.backend = "cpu";
  auto with_start = [](std::int64_t predicted_first, std::int64_t measured_first,
                       std::int64_t measured_total) {
    validate::CaseResult c;
    c.predicted.start_ns = {predicted_first, predicted_first + 1000};
    c.measured.start_ns = {measured_first + 1000, measured_first};  // the first op is the min
    c.measured.total_ns = measured_total;
    return c;
  };
  // 10 us late of 500: below both thresholds; 120 us of 500 (24%): noted.
  r.cases = {with_start(0, 10'000, 500'000)};
  CHECK(validate::late_start_note(r).empty());
  r.cases.push_back(with_start(0, 120'000, 500'000));
  auto note = validate::late_start_note(r);
  CHECK(note.find("in 1 of 2 cases the first op started 120 us later than predicted") !=
        std::string::npos);
  CHECK(note.find("up to 24% of the measured time") != std::string::npos);
  CHECK(note.find("hand-off to its rank threads") != std::string::npos);
  // Late by as much as predicted (a launch the prediction charges): not noted. 30 us of a
  // 100 ms run: below 10%.
  r.cases = {with_start(120'000, 125'000, 500'000), with_start(0, 30'000, 100'000'000)};
  CHECK(validate::late_start_note(r).empty());
  // Two late cases give a range; on CUDA the words change.
  r.options.backend = "cuda";
  r.cases = {with_start(0, 60'000, 200'000), with_start(0, 150'000, 1'000'000)};
  note = validate::late_start_note(r);
  CHECK(note.find("in 2 of 2 cases the first op started 60-150 us later") != std::string::npos);
  CHECK(note.find("up to 30%") != std::string::npos);
  CHECK(note.find("before the first kernel started") != std::string::npos);
}

namespace {

// A case of Llama-3.1-8B at TP 2, one layer, on `hardware`, predicted with `profile` (none: "").
validate::CaseResult case_of_8b(const std::string& hardware, std::int64_t seq,
                                const std::string& profile) {
  sim::WorkloadOptions o;
  o.model = "llama3.1-8b";
  o.hardware = hardware;
  o.tp = 2;
  o.seq = seq;
  o.layers = 1;
  validate::CaseResult c;
  c.workload = sim::make_workload(o);
  c.run.workload = o;
  c.run.workload.profile = profile;
  return c;
}

}  // namespace

TEST_CASE("predictions far off without a profile: a note says how to profile the machine") {
  validate::ValidateReport r;
  r.options.backend = "cpu";
  auto with_totals = [&](std::int64_t predicted, std::int64_t measured, std::string profile) {
    validate::CaseResult c = case_of_8b("cpu-host", 64, profile);
    c.predicted.total_ns = predicted;
    c.measured.total_ns = measured;
    return c;
  };
  // Median |error| 20%: no note; 70%: the note, with the command for this workload.
  r.cases = {with_totals(80, 100, ""), with_totals(120, 100, ""), with_totals(30, 100, "")};
  CHECK(validate::unprofiled_note(r).empty());
  r.cases = {with_totals(30, 100, ""), with_totals(170, 100, ""), with_totals(80, 100, "")};
  const auto note = validate::unprofiled_note(r);
  CHECK(note.find("70% off (median)") != std::string::npos);
  CHECK(note.find("tpo profile --backend cpu --model llama3.1-8b --tp 2 --hardware cpu-host") !=
        std::string::npos);
  // With a profile the error is the profile's to explain: no note.
  r.cases.back().run.workload.profile = "prof.json";
  CHECK(validate::unprofiled_note(r).empty());
}

TEST_CASE("the report's attention kernel: one name, 'per case' when cases differ, empty on CPU") {
  validate::ValidateReport r;
  r.cases.resize(3);
  CHECK(validate::attention_kernels(r).empty());
  for (auto& c : r.cases) c.measured.attention_kernel = "cudnn-sdpa";
  CHECK(validate::attention_kernels(r) == "cudnn-sdpa");
  r.cases[2].measured.attention_kernel = "cublas-batched";
  CHECK(validate::attention_kernels(r) == "per case");
}

TEST_CASE("a GPU run predicted for another GPU is noted, and the report names the GPU measured") {
  validate::ValidateReport r;
  r.options.backend = "cuda";
  auto on = [&](const std::string& device, const std::string& profile) {
    validate::CaseResult c = case_of_8b("h100x8", 256, profile);
    c.measured.device = device;
    return c;
  };
  auto noted = [&](const std::string& text) {
    for (const auto& n : validate::validate_notes(r)) {
      if (n.find(text) != std::string::npos) return true;
    }
    return false;
  };
  // An H100 (nvidia-smi's name) predicted by h100x8: nothing to say.
  r.cases = {on("NVIDIA H100 80GB HBM3", "")};
  CHECK_FALSE(noted("another GPU's"));
  CHECK(validate::measured_devices(r) == "NVIDIA H100 80GB HBM3");
  // An H200 predicted by h100x8's analytical model: two GPUs' times.
  r.cases = {on("NVIDIA H200", "")};
  CHECK(
      noted("measured on NVIDIA H200, but the hardware file predicting it, h100x8, is another "
            "GPU's (NVIDIA H100 SXM5 80GB)"));
  CHECK(noted("not the model's error"));
  // With a profile measured on an H200, the ops it holds are this GPU's.
  const std::string prof =
      std::string(TPO_TEST_DATA) + "/../../configs/profiles/h200-llama3.1-8b-tp2.json";
  r.cases = {on("NVIDIA H200", prof), on("NVIDIA H100 80GB HBM3", "")};
  CHECK(noted("the ops the profile measured are this GPU's"));
  CHECK_FALSE(noted("not the model's error"));
  CHECK(validate::measured_devices(r) == "per case");
  // The CPU runtime names no GPU: nothing.
  r.cases = {on("", "")};
  CHECK_FALSE(noted("another GPU's"));
  CHECK(validate::measured_devices(r).empty());
}

TEST_CASE("a regret within the runs' spread is said to be no measured difference") {
  validate::ValidateReport r;
  const auto add = [&](StrategyKind k, std::vector<std::int64_t> runs, bool picked) {
    validate::CaseResult c;
    c.group = 0;
    c.picked = picked;
    c.spec = StrategySpec(k);
    c.measured.totals_ns = runs;
    std::sort(runs.begin(), runs.end());
    c.measured.total_ns = runs[runs.size() / 2];
    c.measured_none_ns = 130;
    r.cases.push_back(c);
  };
  add(StrategyKind::Ladder, {120, 100, 110}, true);  // the pick: 110, spread 20 / 110
  add(StrategyKind::ParallelBlock, {99, 100, 101}, false);
  CHECK(validate::run_spread(r.cases[0].measured) == doctest::Approx(20.0 / 110));
  auto d = validate::decisions(r);
  REQUIRE(d.size() == 1);
  CHECK(d[0].regret == doctest::Approx(0.1));
  CHECK(d[0].noise == doctest::Approx(20.0 / 110));
  CHECK(d[0].regret_within_noise());
  // Runs that agree: the same regret is a measured difference.
  r.cases[0].measured.totals_ns = {109, 110, 111};
  d = validate::decisions(r);
  CHECK(d[0].noise == doctest::Approx(0.02));  // the alternative's 2 / 100
  CHECK_FALSE(d[0].regret_within_noise());
  // The none times measured beside the cases scatter too: counted.
  r.cases[1].measured_none_ns = 100;
  d = validate::decisions(r);
  // none: the median of {100, 130} is their mean, 115 (the upper one, 130, until 2026-12-05).
  CHECK(d[0].noise == doctest::Approx(30.0 / 115));
  // One timed run: no spread to judge by.
  CHECK(validate::run_spread(validate::RunResult{}) == 0);
}

TEST_CASE(
    "a CUDA graph run's untimed launches, and the emulated copy as measured, are in the report") {
  // The CUDA runtime fills untimed_totals_ns (--exec graph); the report shows the median of them
  // against the timed median, per case, in the text and the JSON, and nothing where empty.
  validate::ValidateReport r;
  r.cost_model = "analytical";
  r.measured_on = "a test";
  r.execution = {{"mode", "graph"}};
  for (const bool graph : {true, false}) {
    validate::CaseResult c;
    c.workload = tiny(sim::Phase::Prefill, 1, 64, 0, 1);
    c.spec = StrategySpec(StrategyKind::None);
    c.schedule = sim::build_schedule(c.workload, c.spec);
    const std::size_t n = c.schedule.ops.size();  // per-op times, as a run has them
    c.predicted.start_ns = c.predicted.end_ns = c.measured.start_ns = c.measured.end_ns =
        std::vector<std::int64_t>(n, 0);
    c.predicted.total_ns = 1'000'000;
    c.predicted_none_ns = c.measured_none_ns = 1'000'000;
    c.measured.total_ns = 1'100'000;
    c.measured.totals_ns = {1'050'000, 1'100'000, 1'200'000};
    if (graph) c.measured.untimed_totals_ns = {1'200'000, 1'000'000, 900'000};
    if (graph) {  // and the emulated all-reduce's copy kernel as the CUDA runtime measured it
      c.measured.copy_gbps = 530;
      c.measured.copy_fixed_us = 3.5;
      c.measured.copy_ctas = 16;
    }
    c.correct = true;
    r.cases.push_back(std::move(c));
  }
  std::ostringstream os;
  validate::print_validate(os, r);
  const std::string text = os.str();
  CHECK(text.find("without their per-op timing events") != std::string::npos);
  // The runs spread 14% (1.05 to 1.2 ms over 1.1): said, naming the case.
  CHECK(text.find("note: a case's timed runs spread up to 14% (none at 64 tokens;") !=
        std::string::npos);
  {  // Runs within 5%: nothing said.
    validate::ValidateReport tight = r;
    for (auto& c : tight.cases) c.measured.totals_ns = {1'090'000, 1'100'000, 1'120'000};
    std::ostringstream o2;
    validate::print_validate(o2, tight);
    CHECK(o2.str().find("timed runs spread") == std::string::npos);
  }
  CHECK(text.find("1.000 ms untimed, 1.100 ms timed: the events cost +10.0%") != std::string::npos);
  // One line: the second case has none.
  CHECK(text.find("ms untimed") == text.rfind("ms untimed"));
  const auto j = validate::validate_json(r);
  REQUIRE(j["cases"].size() == 2);
  CHECK(j["cases"][0]["measured_untimed_runs_us"].size() == 3);
  CHECK(j["cases"][0]["measured_untimed_runs_us"][1].get<double>() == doctest::Approx(1000.0));
  CHECK_FALSE(j["cases"][1].contains("measured_untimed_runs_us"));
  CHECK(j["cases"][0]["emulated_copy"]["fixed_us"].get<double>() == doctest::Approx(3.5));
  CHECK(j["cases"][0]["emulated_copy"]["ctas"] == 16);
  CHECK_FALSE(j["cases"][1].contains("emulated_copy"));
}
