// Sliding-window attention: which layers a config windows (as Hugging Face transformers does),
// the (query, key) pairs and bytes of a windowed attention op, its cost under the analytical
// and the profile model, and the graph the builder makes past the window.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "sim/config_paths.h"
#include "sim/error.h"
#include "sim/json_io.h"
#include "sim/model.h"
#include "sim/profile_cost.h"
#include "sim/simulate.h"
#include "toy.h"

using namespace tpo::sim;

namespace {
const std::string data = TPO_TEST_DATA;

using tpo::test::error_of;

// A copy of a test config with `edit` applied, written to a temporary file.
std::string edited(const std::string& file, auto&& edit) {
  auto j = tpo::read_json_file(data + "/" + file);
  edit(j);
  static int n = 0;
  const std::string p =
      (std::filesystem::temp_directory_path() /
       ("tpo_window_" + std::to_string(::getpid()) + "_" + std::to_string(++n) + ".json"))
          .string();
  std::ofstream(p) << j.dump();
  return p;
}

// Pairs counted one query at a time.
double pairs_by_hand(std::int64_t q, std::int64_t prefix, std::int64_t window) {
  double n = 0;
  for (std::int64_t t = prefix; t < prefix + q; ++t) {
    const std::int64_t keys = t + 1;
    n += static_cast<double>(window > 0 ? std::min(keys, window) : keys);
  }
  return n;
}

std::vector<Op> attention_ops(const Workload& w) {
  std::vector<Op> out;
  for (const Op& op :
       build_schedule(w, StrategySpec(StrategyKind::Iso, {w.seq / 2, w.seq / 2})).ops) {
    if (op.kind == OpKind::Attention) out.push_back(op);
  }
  return out;
}
// Llama-3.1-8B at TP 2 priced by the committed H200 profile, and its one attention op of `seq`
// queries after `context` cached tokens.
struct ProfiledAttention {
  std::unique_ptr<CostModel> cm;
  Op op;
};
ProfiledAttention profiled_attention(std::int64_t seq, std::int64_t context) {
  WorkloadOptions o;
  o.model = "llama3.1-8b";
  o.hardware = "h200x8";
  o.tp = 2;
  o.seq = seq;
  o.context = context;
  o.layers = 1;
  o.profile = config_dir() + "/profiles/h200-llama3.1-8b-tp2.json";
  const Workload w = make_workload(o);
  ProfiledAttention r{make_cost_model(w, o.profile), {}};
  for (const Op& x : build_schedule(w, StrategySpec(StrategyKind::None)).ops) {
    if (x.kind == OpKind::Attention) r.op = x;
  }
  return r;
}
}  // namespace

TEST_CASE("windowed attention: pairs and bytes count the keys in each query's window") {
  for (const std::int64_t q : {1, 7, 100, 513}) {
    for (const std::int64_t prefix : {0, 1, 50, 99, 1000}) {
      for (const std::int64_t window : {0, 1, 2, 64, 100, 101, 600, 5000}) {
        CAPTURE(q);
        CAPTURE(prefix);
        CAPTURE(window);
        CHECK(attention_pairs(q, prefix, window) == pairs_by_hand(q, prefix, window));
        Op op;
        op.kind = OpKind::Attention;
        op.req_begin = 0;
        op.req_end = 1;
        op.seq_begin = prefix;
        op.seq_end = prefix + q;
        set_attention_work(op, 1, q, prefix, 4, 2, 8, window);
        CHECK(op.window == window);
        CHECK(attention_keys_per_query(op) ==
              doctest::Approx(pairs_by_hand(q, prefix, window) / static_cast<double>(q)));
        Op full = op;
        set_attention_work(full, 1, q, prefix, 4, 2, 8, 0);
        const bool restricts = window > 0 && window < prefix + q;
        CHECK((op.flops < full.flops) == restricts);
        CHECK((op.bytes < full.bytes) == (window > 0 && window < prefix + 1));
        // Bytes: Q read and O written, K and V of every position some query sees, the chunk's
        // K and V written; positions counted one by one.
        std::int64_t seen = 0;
        for (std::int64_t pos = 0; pos < prefix + q; ++pos) {
          bool any = false;
          for (std::int64_t t = std::max(pos, prefix); t < prefix + q && !any; ++t) {
            any = window <= 0 || t - pos < window;
          }
          seen += any;
        }
        const double d = 8, hq = 4, hkv = 2, qq = static_cast<double>(q);
        CHECK(op.bytes == 2.0 * (2.0 * qq * hq * d + 2.0 * static_cast<double>(seen) * hkv * d +
                                 2.0 * qq * hkv * d));
        // The full attention of the same queries with the equivalent prefix has the same keys
        // per query; without a restriction it is the op's own prefix, exactly.
        const double eq = attention_equivalent_prefix(op);
        if (!restricts) CHECK(eq == static_cast<double>(prefix));
        if (restricts && eq > 0) {
          CHECK(eq + 0.5 * static_cast<double>(q + 1) ==
                doctest::Approx(attention_keys_per_query(op)));
        }
      }
    }
  }
}

TEST_CASE("which layers a config windows: layer_types, Gemma-2, Gemma-3, Qwen2, Mistral") {
  const ModelConfig mistral = load_model(data + "/hf_sliding_config.json");
  CHECK(mistral.sliding_window == 4096);
  CHECK(mistral.windowed_count() == 32);
  CHECK(mistral.window_of(0) == 4096);
  CHECK(mistral.window_of(31) == 4096);

  // Gemma-2: every other layer from the first (transformers: not layer_idx % 2).
  const ModelConfig g2 = load_model(data + "/hf_gemma2_config.json");
  CHECK(g2.windowed_count() == 21);
  CHECK(g2.window_of(0) == 4096);
  CHECK(g2.window_of(1) == 0);
  CHECK(g2.window_of(40) == 4096);
  CHECK(g2.window_of(41) == 0);

  // Gemma-3: all but every sliding_window_pattern-th layer.
  const ModelConfig g3 = load_model(data + "/hf_gemma3_text_config.json");
  CHECK(g3.sliding_window == 1024);
  CHECK(g3.windowed_count() == 52);  // layers 5, 11, ..., 59 are full
  CHECK(g3.window_of(4) == 1024);
  CHECK(g3.window_of(5) == 0);
  CHECK(g3.window_of(6) == 1024);
  const ModelConfig g3p = load_model(
      edited("hf_gemma3_text_config.json", [](auto& j) { j["sliding_window_pattern"] = 2; }));
  CHECK(g3p.windowed_count() == 31);
  // As recent transformers save it: _sliding_window_pattern, read alike, and not taken for a
  // misspelt key.
  const ModelConfig g3u = load_model(edited("hf_gemma3_text_config.json", [](auto& j) {
    j.erase("sliding_window_pattern");
    j["_sliding_window_pattern"] = 2;
  }));
  CHECK(g3u.windowed_count() == 31);
  for (const auto& n : g3u.notes) CHECK(n.find("misspelt") == std::string::npos);

  // layer_types wins over the family's rule.
  const ModelConfig lt = load_model(edited("hf_gemma2_config.json", [](auto& j) {
    j["layer_types"] = nlohmann::json::array();
    for (int i = 0; i < 42; ++i)
      j["layer_types"].push_back(i < 40 ? "full_attention" : "sliding_attention");
  }));
  CHECK(lt.windowed_count() == 2);
  CHECK(lt.window_of(0) == 0);
  CHECK(lt.window_of(41) == 4096);
  // A layer_types of full layers only: no window at all.
  const ModelConfig none = load_model(edited("hf_sliding_config.json", [](auto& j) {
    j["layer_types"] = std::vector<std::string>(32, "full_attention");
  }));
  CHECK(none.sliding_window == 0);
  CHECK(none.window_of(3) == 0);

  // Qwen2: layers from max_window_layers on, where use_sliding_window is on.
  const ModelConfig q2 = load_model(edited("hf_qwen2_config.json", [](auto& j) {
    j["use_sliding_window"] = true;
    j["sliding_window"] = 4096;
    j["max_window_layers"] = 20;
  }));
  CHECK(q2.window_of(19) == 0);
  CHECK(q2.window_of(20) == 4096);
  // Which convention, said (vLLM's Qwen2 windows the layers below instead).
  const auto said = [](const ModelConfig& m) {
    for (const auto& n : m.notes) {
      if (n.find("max_window_layers 20 is read as transformers reads it: layers 20 and above "
                 "attend over the window") != std::string::npos) {
        return true;
      }
    }
    return false;
  };
  CHECK(said(q2));
  const ModelConfig q2off = load_model(edited("hf_qwen2_config.json", [](auto& j) {
    j["use_sliding_window"] = false;
    j["sliding_window"] = 4096;
    j["max_window_layers"] = 20;
  }));
  CHECK(q2off.sliding_window == 0);
  CHECK_FALSE(said(q2off));
  // transformers' Qwen2 defaults: no window without use_sliding_window; max_window_layers 28.
  CHECK(load_model(edited("hf_qwen2_config.json", [](auto& j) {
          j.erase("use_sliding_window");
          j["sliding_window"] = 4096;
        })).sliding_window == 0);
  const ModelConfig q2d = load_model(edited("hf_qwen2_config.json", [](auto& j) {
    j["use_sliding_window"] = true;
    j["sliding_window"] = 4096;
    j["num_hidden_layers"] = 32;
  }));
  CHECK(q2d.windowed_count() == 4);  // layers 28..31
  CHECK(q2d.window_of(27) == 0);
  CHECK(q2d.window_of(28) == 4096);
  // layer_types of a kind tpo does not time is refused with no window too.
  CHECK(error_of([] {
          load_model(edited("hf_llama_config.json", [](auto& j) {
            j["layer_types"] = std::vector<std::string>(22, "linear_attention");
          }));
        }).find("field 'layer_types'") != std::string::npos);
  CHECK(error_of([] {
          load_model(edited("tiny_model.json", [](auto& j) {
            j["layer_types"] = {"full_attention", "full_attention", "full_attention"};
          }));
        }).find("must be a list of 2 entries") != std::string::npos);

  // What is not modelled is refused, naming the file and the field.
  auto e = error_of([] {
    load_model(edited("hf_gemma2_config.json", [](auto& j) {
      j["layer_types"] = std::vector<std::string>(42, "chunked_attention");
    }));
  });
  CHECK(e.find("field 'layer_types'") != std::string::npos);
  CHECK(e.find("chunked_attention") != std::string::npos);
  e = error_of([] {
    load_model(edited("hf_gemma2_config.json", [](auto& j) {
      j["layer_types"] = std::vector<std::string>(41, "full_attention");
    }));
  });
  CHECK(e.find("must be a list of 42 entries") != std::string::npos);
  // Gemma-4's global layers have their own attention shape: refused.
  e = error_of([] {
    load_model(edited("hf_gemma2_config.json", [](auto& j) { j["global_head_dim"] = 512; }));
  });
  CHECK(e.find("field 'global_head_dim'") != std::string::npos);
  // Our own model schema takes a window too (every layer, or by layer_types).
  const ModelConfig ours = load_model(edited("tiny_model.json", [](auto& j) {
    j["sliding_window"] = 16;
    j["layer_types"] = {"sliding_attention", "full_attention"};
  }));
  CHECK(ours.window_of(0) == 16);
  CHECK(ours.window_of(1) == 0);
  CHECK(error_of([] {
          load_model(edited("tiny_model.json", [](auto& j) { j["sliding_window"] = "16"; }));
        }).find("field 'sliding_window': must be a number") != std::string::npos);
}

TEST_CASE("past the window: windowed layers' attention counts the window's keys, others all") {
  WorkloadOptions o;
  o.model = data + "/hf_gemma2_config.json";
  o.hardware = "h200x8";
  o.tp = 8;
  o.layers = 4;
  o.seq = 4096;  // within the window: every layer's attention is the same op, no window set
  Workload w = make_workload(o);
  CHECK(layers_alike(w.model, w.layers, w.seq + w.context));
  for (const Op& op : attention_ops(w)) CHECK(op.window == 0);

  o.seq = 8192;  // past it (refused before 2026-12-03)
  w = make_workload(o);
  CHECK_FALSE(layers_alike(w.model, w.layers, w.seq + w.context));
  const AnalyticalCostModel cm(w.hardware, w.tp);
  const auto ops = attention_ops(w);
  REQUIRE(ops.size() == 8);  // 2 chunks x 4 layers
  for (const Op& op : ops) {
    CAPTURE(op.layer);
    CHECK(op.window == (op.layer % 2 == 0 ? 4096 : 0));
  }
  // Layer 0 (windowed) against layer 1 (full), second chunk: positions 4096..8191.
  const Op& local = ops[1];
  const Op& global = ops[3];
  REQUIRE(local.layer == 0);
  REQUIRE(global.layer == 1);
  REQUIRE(local.seq_begin == 4096);
  CHECK(local.flops / global.flops == doctest::Approx(4096.0 / (4096 + 2048.5)));
  CHECK(cm.standalone_ns(local) < cm.standalone_ns(global));
  // The first chunk is within the window for every layer: the same work either way.
  CHECK(ops[0].flops == ops[2].flops);

  // Every layer windowed (Mistral): the layers are alike, and the planner's extrapolation holds.
  o.model = data + "/hf_sliding_config.json";
  w = make_workload(o);
  CHECK(layers_alike(w.model, w.layers, w.seq + w.context));
  for (const Op& op : attention_ops(w)) CHECK(op.window == 4096);
}

TEST_CASE("a profile reads a windowed op at the full attention with the same keys per query") {
  const auto [cm, op] = profiled_attention(512, 4096);
  REQUIRE(op.seq_begin == 4096);
  // A window of 2048: every query sees 2048 keys, as a full attention of 512 queries after a
  // prefix of 1791.5 would on average. Its time lies between those after 1791 and 1792.
  Op windowed = op;
  set_attention_work(windowed, 1, 512, 4096, op.n, op.kv_heads, op.k, 2048);
  CHECK(attention_equivalent_prefix(windowed) == doctest::Approx(1791.5));
  Op lo = op, hi = op;
  resegment(lo, 1791, 1791 + 512);
  resegment(hi, 1792, 1792 + 512);
  const auto t = cm->standalone_ns(windowed), t_lo = cm->standalone_ns(lo),
             t_hi = cm->standalone_ns(hi), t_full = cm->standalone_ns(op);
  CHECK(t_lo <= t);
  CHECK(t <= t_hi);
  CHECK(t_hi < t_full);
}

TEST_CASE("the KV cache of a windowed layer holds the new tokens and the window before them") {
  // Gemma-3-27B at TP 8 on H200s, decoding after 128k tokens: 62 layers of every position
  // (8.3 GB per request per GPU) would fit 16 requests; 10 full layers and 52 of 1024
  // positions (1.4 GB) fit 32 easily, and 128 not.
  WorkloadOptions o;
  o.model = data + "/hf_gemma3_text_config.json";
  o.hardware = "h200x8";
  o.tp = 8;
  o.phase = "decode";
  o.seq = 1;
  o.context = 131071;
  o.batch = 32;
  CHECK_NOTHROW(make_workload(o));
  o.batch = 128;
  const std::string e = error_of([&] { make_workload(o); });
  CHECK(e.find("field 'context' = 131071") != std::string::npos);
  CHECK(e.find("KV cache") != std::string::npos);
  // Without the window, 32 requests do not fit.
  o.model = edited("hf_gemma3_text_config.json", [](auto& j) { j.erase("sliding_window"); });
  o.batch = 32;
  CHECK(error_of([&] { make_workload(o); }).find("KV cache") != std::string::npos);
}

TEST_CASE("a window much shorter than its chunk: read at the same keys per query, extrapolated") {
  const auto [cm, op] = profiled_attention(8192, 0);
  // 8192 queries over a window of 1024: about 960 keys per query, fewer than any full causal
  // attention of 8192 queries sees (4096.5). The same keys per query: 1919 queries, no prefix.
  Op windowed = op;
  set_attention_work(windowed, 1, 8192, 0, op.n, op.kv_heads, op.k, 1024);
  CHECK(attention_keys_per_query(windowed) == doctest::Approx(960.06).epsilon(1e-4));
  Op proxy = op;
  resegment(proxy, 0, 1919);
  const double per_flop = static_cast<double>(cm->standalone_ns(proxy)) / proxy.flops;
  CHECK(static_cast<double>(cm->standalone_ns(windowed)) / windowed.flops ==
        doctest::Approx(per_flop).epsilon(1e-3));
  CHECK(cm->origin(windowed) == "extrapolated");
  // Fewer keys per query than the full op: a lower rate per FLOP.
  CHECK(per_flop > static_cast<double>(cm->standalone_ns(op)) / op.flops);
}

TEST_CASE("the planner's layer template: period 1 when layers alike, the pattern's past a window") {
  const ModelConfig g2 = load_model(data + "/hf_gemma2_config.json");
  const ModelConfig g3 = load_model(data + "/hf_gemma3_text_config.json");
  // Within the window every layer is alike: 3 layers, then the step between layers 1 and 2.
  auto r = layer_repeat(g2, 42, 4096);
  CHECK((r.period == 1 && r.template_layers == 3 && r.steps == 39));
  // Past it, Gemma-2 repeats every 2 layers: layer 0, two periods and one layer left over.
  r = layer_repeat(g2, 42, 8192);
  CHECK((r.period == 2 && r.template_layers == 6 && r.steps == 18));
  CHECK(r.template_layers + r.period * r.steps == 42);
  r = layer_repeat(g3, 62, 8192);
  CHECK((r.period == 6 && r.template_layers == 14 && r.steps == 8));
  CHECK(r.template_layers + r.period * r.steps == 62);
  // Too few layers for a step: the whole run.
  r = layer_repeat(g3, 13, 8192);
  CHECK((r.template_layers == 13 && r.steps == 0));
  // No period up to 8 (Qwen2's layout: full layers, then windowed ones): the whole run.
  const ModelConfig q2 = load_model(edited("hf_qwen2_config.json", [](auto& j) {
    j["use_sliding_window"] = true;
    j["sliding_window"] = 4096;
    j["max_window_layers"] = 20;
  }));
  r = layer_repeat(q2, 28, 8192);
  CHECK((r.period == 0 && r.template_layers == 28 && r.steps == 0));
}
