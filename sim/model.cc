// Model loading. Our schema uses the Hugging Face key names, so one parser reads both; a
// file with "schema": "tpo.model/1" is ours, anything else is treated as a HF config.json.
#include "sim/model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iterator>

#include "sim/config_paths.h"
#include "sim/error.h"
#include "sim/json_io.h"

namespace tpo::sim {

namespace fs = std::filesystem;

std::vector<std::string> shipped_models() {
  return list_shipped("models");
}

const char* activation_name(ModelConfig::Activation a) {
  return a == ModelConfig::Activation::Silu ? "silu" : "gelu";
}

namespace {

// The keys a tpo.model/1 file and a Hugging Face config share, which tpo reads: first the
// dimensions (the first kDimensionKeys, which a multimodal config's text_config must give), then
// the rest. Each kind of file adds its own (read_model, near_miss_notes).
constexpr const char* kModelKeys[] = {"num_hidden_layers",
                                      "hidden_size",
                                      "num_attention_heads",
                                      "num_key_value_heads",
                                      "head_dim",
                                      "intermediate_size",
                                      "vocab_size",
                                      "hidden_act",
                                      "attention_bias",
                                      "mlp_bias",
                                      "tie_word_embeddings",
                                      "rope_theta",
                                      "partial_rotary_factor",
                                      "rms_norm_eps",
                                      "query_pre_attn_scalar",
                                      "attn_logit_softcapping",
                                      "sliding_window",
                                      "layer_types"};
constexpr std::size_t kDimensionKeys = 7;

}  // namespace

namespace {

bool flag(const nlohmann::json& j, const std::string& path, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return false;
  if (!j.at(key).is_boolean()) throw InputError(path, key, "must be true or false");
  return j.at(key).get<bool>();
}

// Families whose MLP is not gated, or whose attention or experts change the cost: refused,
// naming the field, rather than simulated as something they are not.
void refuse_unmodelled(const nlohmann::json& j, const JsonObject& o, const std::string& path) {
  // A key that decides whether the model is modelled at all must have its type: a string
  // "8" experts or window would otherwise be skipped and the model simulated as dense.
  for (const char* key : {"num_local_experts", "num_experts", "n_routed_experts", "sliding_window",
                          "max_position_embeddings"}) {
    if (j.contains(key) && !j.at(key).is_null() && !j.at(key).is_number()) {
      throw InputError(path, key, "must be a number, not " + j.at(key).dump());
    }
  }
  if (j.contains("use_sliding_window") && !j.at("use_sliding_window").is_null() &&
      !j.at("use_sliding_window").is_boolean()) {
    throw InputError(path, "use_sliding_window", "must be true or false");
  }
  for (const char* moe : {"num_local_experts", "num_experts", "n_routed_experts"}) {
    if (j.contains(moe) && j.at(moe).is_number() && j.at(moe).get<double>() > 1) {
      throw InputError(path, moe,
                       "mixture-of-experts models are not modelled yet (dense Llama-style "
                       "decoders only)");
    }
  }
  // Weights other than bf16 change every GEMM's cost: tpo models bf16.
  if (j.contains("quantization_config") && !j.at("quantization_config").is_null() &&
      !j.at("quantization_config").empty()) {
    const auto& q = j.at("quantization_config");
    const std::string method =
        q.is_object() && q.contains("quant_method") && q.at("quant_method").is_string()
            ? q.at("quant_method").get<std::string>() + " "
            : "";
    throw InputError(path, "quantization_config",
                     "quantized weights (" + method +
                         "quantization_config) are not modelled (bf16 weights only); remove the "
                         "field to plan the model in bf16");
  }
  // Multi-head latent attention (DeepSeek-V2/V3, MiniCPM3): low-rank compressed K and V (and
  // Q), a different set of GEMMs and a far smaller KV cache than the heads x head_dim it
  // would be read as.
  for (const char* mla : {"kv_lora_rank", "q_lora_rank"}) {
    if (j.contains(mla) && !j.at(mla).is_null()) {
      throw InputError(path, mla,
                       "multi-head latent attention (compressed K/V) is not modelled: its "
                       "projections and KV cache differ from the heads x head_dim attention "
                       "tpo times (Llama-style attention only)");
    }
  }
  // Cross-attention layers among the self-attention ones (Llama-3.2-Vision's text model).
  if (j.contains("cross_attention_layers") && !j.at("cross_attention_layers").is_null()) {
    throw InputError(path, "cross_attention_layers",
                     "cross-attention layers (to an image encoder's states) are not modelled: "
                     "tpo times self-attention decoder layers only");
  }
  // Layers of two attention shapes (Gemma-4's global layers: their own head_dim and KV heads):
  // tpo times every layer's attention with one shape.
  for (const char* key : {"global_head_dim", "num_global_key_value_heads"}) {
    if (j.contains(key) && !j.at(key).is_null()) {
      throw InputError(path, key,
                       "layers whose attention has another shape (head_dim or KV heads) than "
                       "the rest are not modelled: tpo times one attention shape for all layers");
    }
  }
  const std::string type = o.string_or("model_type", "");
  // Attention and MLP side by side from one norm: the model's own layout is what tpo times as
  // the parallel-block strategy (a change to a Llama model), not its baseline.
  const std::string parallel =
      " attention and the MLP side by side from one norm (a parallel block): not modelled as a "
      "model's own layout; tpo times that layout only as the parallel-block strategy applied to "
      "a sequential model";
  if (type.starts_with("gemma3n")) {
    throw InputError(path, "model_type",
                     "'" + type +
                         "' (Gemma 3n) has layers tpo does not model: AltUp, LAuReL, per-layer "
                         "inputs and KV caches shared between layers");
  }
  if (type == "cohere" || type == "cohere2") {
    throw InputError(path, "model_type", "'" + type + "' runs" + parallel);
  }
  for (const char* key : {"use_parallel_residual", "parallel_attn", "parallel_residual"}) {
    if (flag(j, path, key)) throw InputError(path, key, "true: the model runs" + parallel);
  }
  for (const char* plain : {"gpt2", "gpt_neox", "gptj", "falcon", "opt", "bloom", "phi", "mpt"}) {
    if (type == plain) {
      throw InputError(path, "model_type",
                       "'" + type +
                           "' has a plain (not gated) MLP or parallel layout that is not "
                           "modelled; Llama-style decoders with a gated MLP only");
    }
  }
}

// Qwen2 and Qwen3 configs (and their MoE variants): a window only with use_sliding_window,
// which transformers' config classes default to false, on layers from max_window_layers (28 by
// default) on.
bool qwen_family(const std::string& type) {
  return type.starts_with("qwen2") || type.starts_with("qwen3");
}

// The sliding window a config's attention uses (0: none, turned off as Qwen2's
// use_sliding_window does, or covering every position).
std::int64_t sliding_window_of(const nlohmann::json& j, const std::string& path) {
  const bool on = j.contains("use_sliding_window") && j.at("use_sliding_window").is_boolean() &&
                  j.at("use_sliding_window").get<bool>();
  const std::string type = j.contains("model_type") && j.at("model_type").is_string()
                               ? j.at("model_type").get<std::string>()
                               : "";
  const bool off = (j.contains("use_sliding_window") && !on) || (qwen_family(type) && !on);
  if (off || !j.contains("sliding_window") || !j.at("sliding_window").is_number()) return 0;
  const double window = j.at("sliding_window").get<double>();
  if (!(window >= 1) || window > 2147483648.0 || window != std::floor(window)) {
    throw InputError(path, "sliding_window", "must be a whole number of tokens, at least 1");
  }
  const double positions =
      j.contains("max_position_embeddings") && j.at("max_position_embeddings").is_number()
          ? j.at("max_position_embeddings").get<double>()
          : 0;
  return positions > 0 && window >= positions ? 0 : static_cast<std::int64_t>(window);
}

// Which layers use the sliding window (m.windowed_layers; m.num_layers read), as Hugging Face
// transformers decides it: the config's layer_types where it has them (written by
// transformers since 4.53); else Gemma-2's every other layer from the first, Gemma-3's all
// but every sliding_window_pattern-th (6 by default), Qwen2's layers from max_window_layers
// on (vLLM's Qwen2 windows the layers below it instead; tpo follows transformers); else every
// layer (Mistral).
void read_windowed_layers(const nlohmann::json& j, const JsonObject& o, const std::string& path,
                          ModelConfig& m) {
  const auto n = static_cast<std::size_t>(m.num_layers);
  std::vector<bool> w(n, true);
  const std::string type = o.string_or("model_type", "");
  // layer_types is checked with or without a window: a kind of layer tpo does not time is
  // refused either way.
  const bool typed = j.contains("layer_types") && !j.at("layer_types").is_null();
  if (typed) {
    const auto& t = j.at("layer_types");
    if (!t.is_array() || t.size() != n) {
      throw InputError(
          path, "layer_types",
          "must be a list of " + std::to_string(n) + " entries (one per layer, num_hidden_layers)");
    }
    for (std::size_t i = 0; i < n; ++i) {
      const std::string kind = t[i].is_string() ? t[i].get<std::string>() : t[i].dump();
      if (kind != "sliding_attention" && kind != "full_attention") {
        throw InputError(path, "layer_types",
                         "entry " + std::to_string(i) + " is '" + kind +
                             "': only sliding_attention and full_attention layers are modelled");
      }
      w[i] = kind == "sliding_attention";
    }
  }
  if (m.sliding_window <= 0) return;
  if (!typed) {  // the family's rule
    if (type == "gemma2") {
      for (std::size_t i = 0; i < n; ++i) w[i] = i % 2 == 0;
    } else if (type.starts_with("gemma3")) {
      // Recent transformers save it as _sliding_window_pattern (beside layer_types).
      const std::int64_t pattern = o.has("sliding_window_pattern")
                                       ? o.integer("sliding_window_pattern")
                                       : o.integer_or("_sliding_window_pattern", 6);
      for (std::size_t i = 0; i < n; ++i) {
        w[i] = (static_cast<std::int64_t>(i) + 1) % pattern != 0;
      }
    } else if (o.has("max_window_layers") || qwen_family(type)) {
      const std::int64_t first = o.count_or("max_window_layers", 28);
      for (std::size_t i = 0; i < n; ++i) w[i] = static_cast<std::int64_t>(i) >= first;
      if (first > 0 && first < m.num_layers) {
        m.notes.push_back(
            fs::path(path).filename().string() + "'s max_window_layers " + std::to_string(first) +
            (o.has("max_window_layers") ? "" : " (transformers' default)") +
            " is read as transformers reads it: layers " + std::to_string(first) +
            " and above attend over the window, those below over every key (vLLM's Qwen2 "
            "windows the layers below it instead)");
      }
    }
  }
  if (std::find(w.begin(), w.end(), true) == w.end()) {
    m.sliding_window = 0;  // no layer uses it
  } else if (std::find(w.begin(), w.end(), false) != w.end()) {
    m.windowed_layers = std::move(w);
  }
}

// Activation, biases and tied embeddings, from HF keys (also accepted in tpo.model/1 files).
void read_architecture(const nlohmann::json& j, const JsonObject& o, const std::string& path,
                       ModelConfig& m) {
  // Gemma writes hidden_activation (and an older hidden_act); it wins where both are given.
  const char* key = o.has("hidden_activation") ? "hidden_activation" : "hidden_act";
  // Gemma's config classes default to gelu_pytorch_tanh (a config.json may leave it out).
  const std::string act = o.string_or(
      key, o.string_or("model_type", "").starts_with("gemma") ? "gelu_pytorch_tanh" : "silu");
  if (act == "silu" || act == "swish") {
    m.activation = ModelConfig::Activation::Silu;
  } else if (act.starts_with("gelu")) {  // gelu, gelu_pytorch_tanh, gelu_new, gelu_fast
    // Modelled as a gated MLP (GeGLU): known for Gemma; other gelu families are often plain.
    const std::string family = o.string_or("model_type", "");
    if (!family.empty() && !family.starts_with("gemma")) {
      throw InputError(path, key,
                       "'" + act + "' in a '" + family +
                           "' model: a gelu MLP is modelled as gated (GeGLU) for Gemma-family "
                           "configs only");
    }
    m.activation = ModelConfig::Activation::Gelu;
  } else {
    throw InputError(path, key,
                     "'" + act + "' is not modelled (gated MLPs with silu or gelu only)");
  }
  const std::string type = o.string_or("model_type", "");
  const bool attention_bias = flag(j, path, "attention_bias");
  m.qkv_bias = attention_bias || flag(j, path, "qkv_bias") || type == "qwen2";
  m.o_bias = attention_bias;
  m.mlp_bias = flag(j, path, "mlp_bias");
  // Qwen3 and Gemma-3 normalize each query and key head (q_norm, k_norm; no config key says
  // so); our files say it with qk_norm.
  // Other families say it: StableLM's qk_layernorm (a LayerNorm per head: the same two
  // memory-bound kernels), use_qk_norm.
  m.qk_norm = j.contains("qk_norm")
                  ? flag(j, path, "qk_norm")
                  : type == "qwen3" || type.starts_with("gemma3") ||
                        flag(j, path, "qk_layernorm") || flag(j, path, "use_qk_norm");
  // Gemma-2 and Gemma-3 norm each module's output too (four norms per layer).
  m.post_norms = j.contains("post_norms") ? flag(j, path, "post_norms")
                                          : type == "gemma2" || type.starts_with("gemma3");
  // Gemma's config class ties them by default, and its config.json does not say so.
  m.tied_embeddings = j.contains("tie_word_embeddings") ? flag(j, path, "tie_word_embeddings")
                                                        : type.starts_with("gemma");
}

// Rotary embeddings' theta and rotated dims (m.head_dim read): from the top level or from
// transformers 5's rope_parameters (the top level wins where both are given).
void read_rotary(const nlohmann::json& j, const std::string& path, ModelConfig& m) {
  const nlohmann::json* params =
      j.contains("rope_parameters") && j.at("rope_parameters").is_object()
          ? &j.at("rope_parameters")
          : nullptr;
  // Keyed by layer type (transformers 5's Gemma-3: full_attention, sliding_attention): the full
  // layers' (the runtimes rotate every layer with one theta; the angles change no cost).
  std::string where = "rope_parameters.";
  if (params && !params->contains("rope_theta") && params->contains("full_attention") &&
      params->at("full_attention").is_object()) {
    params = &params->at("full_attention");
    where += "full_attention.";
  }
  // The value of `key` (or `fallback`) and the field it came from.
  auto number = [&](const char* key, double fallback) {
    const bool top = j.contains(key) && !j.at(key).is_null();
    const nlohmann::json* v = top ? &j.at(key)
                              : params && params->contains(key) && !params->at(key).is_null()
                                  ? &params->at(key)
                                  : nullptr;
    if (!v) return std::pair<double, std::string>{fallback, key};
    const std::string field = top ? key : where + key;
    if (!v->is_number()) throw InputError(path, field, "must be a number, not " + v->dump());
    return std::pair<double, std::string>{v->get<double>(), field};
  };
  // transformers' Gemma-3 text config defaults rope_theta to 1e6 (its global layers'; its
  // sliding layers' rope_local_base_freq, 1e4, is not read: one theta for every layer).
  const std::string type = j.contains("model_type") && j.at("model_type").is_string()
                               ? j.at("model_type").get<std::string>()
                               : "";
  const auto [theta, theta_field] =
      number("rope_theta", type.starts_with("gemma3") ? 1e6 : 10000.0);
  if (!(theta > 1.0) || !std::isfinite(theta)) {
    throw InputError(path, theta_field, "must be a number above 1 (the rotary base)");
  }
  m.rope_theta = theta;
  const auto [factor, factor_field] = number("partial_rotary_factor", 1.0);
  const double dims = factor * static_cast<double>(m.head_dim);
  if (!(factor > 0.0 && factor <= 1.0) || dims < 2.0) {
    throw InputError(path, factor_field,
                     "must be above 0 and at most 1, and rotate at least 2 of head_dim's " +
                         std::to_string(m.head_dim) + " values");
  }
  // transformers rotates int(head_dim x factor) values in pairs; an odd count it rounds up,
  // with angles over the odd count, which tpo's kernels do not do.
  m.rotary_dim = static_cast<std::int64_t>(dims);
  if (m.rotary_dim % 2 != 0 && m.rotary_dim == m.head_dim) {  // the whole head: an odd head
    const bool own = j.contains("head_dim") && !j.at("head_dim").is_null();
    throw InputError(path, own ? "head_dim" : "hidden_size",
                     "gives a head_dim of " + std::to_string(m.head_dim) +
                         (own ? "" : " (hidden_size / num_attention_heads)") +
                         ", an odd number: not modelled (rotary embeddings rotate pairs)");
  }
  if (m.rotary_dim % 2 != 0) {
    throw InputError(path, factor_field,
                     "rotates " + std::to_string(m.rotary_dim) + " of head_dim's " +
                         std::to_string(m.head_dim) +
                         " values, an odd number: not modelled (rotary embeddings rotate pairs)");
  }
}

// Edit distance (insertions, deletions, substitutions) between two short keys.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t k = 0; k <= b.size(); ++k) row[k] = k;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t k = 1; k <= b.size(); ++k) {
      const std::size_t up = row[k];
      row[k] = std::min({row[k] + 1, row[k - 1] + 1, diag + (a[i - 1] == b[k - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// A Hugging Face config may hold any key, so one tpo does not read is not an error; but one a
// letter or two from a key tpo reads that the config lacks is likely that key misspelt, and
// tpo would silently take its default (num_key_value_head: every head its own K and V). Said.
void near_miss_notes(const nlohmann::json& j, const std::string& path, ModelConfig& m) {
  // Beside the keys both kinds of model file share, those only a Hugging Face config has.
  static const char* hf_only[] = {"hidden_activation",      "final_logit_softcapping",
                                  "use_sliding_window",     "max_window_layers",
                                  "sliding_window_pattern", "max_position_embeddings",
                                  "rope_scaling",           "model_type"};
  std::vector<std::string> read(std::begin(kModelKeys), std::end(kModelKeys));
  read.insert(read.end(), std::begin(hf_only), std::end(hf_only));
  const std::string file = fs::path(path).filename().string();
  for (const auto& [key, value] : j.items()) {
    // Keys transformers writes with a leading underscore are its own bookkeeping
    // (_name_or_path, Gemma-3's _sliding_window_pattern): not misspellings.
    if (key.starts_with("_") || std::find(read.begin(), read.end(), key) != read.end()) continue;
    for (const std::string& want : read) {
      if (j.contains(want) || key.size() < 6) continue;
      if (edit_distance(key, want) <= 2) {
        m.notes.push_back(file + "'s '" + key + "' is not a key tpo reads: is it " + want +
                          " misspelt? Without " + want +
                          ", tpo takes its default (transformers' for this model type)");
        break;
      }
    }
  }
}

// What a Hugging Face config has that tpo reads as something simpler: said, not refused.
void read_notes(const nlohmann::json& j, const std::string& path, ModelConfig& m) {
  if (j.contains("max_position_embeddings") && j.at("max_position_embeddings").is_number()) {
    m.max_positions = std::max<std::int64_t>(
        0, static_cast<std::int64_t>(j.at("max_position_embeddings").get<double>()));
    // rope_scaling stretches the positions by its factor (from original_max_position_embeddings
    // where given: Llama 3.1's 8192 x 8 stays within its 131072; Qwen's YaRN 32768 x 4 = 131072).
    if (j.contains("rope_scaling") && j.at("rope_scaling").is_object()) {
      const auto& r = j.at("rope_scaling");
      const double factor =
          r.contains("factor") && r.at("factor").is_number() ? r.at("factor").get<double>() : 1.0;
      const double base = r.contains("original_max_position_embeddings") &&
                                  r.at("original_max_position_embeddings").is_number()
                              ? r.at("original_max_position_embeddings").get<double>()
                              : static_cast<double>(m.max_positions);
      if (factor > 1 && std::isfinite(factor) && factor * base < 1e12) {
        m.max_positions = std::max(m.max_positions, static_cast<std::int64_t>(factor * base));
        m.positions_scaled = true;
      }
    }
  }
  const std::string file = fs::path(path).filename().string();
  for (const char* key : {"torch_dtype", "dtype"}) {
    const std::string dtype =
        j.contains(key) && j.at(key).is_string() ? j.at(key).get<std::string>() : "";
    if (dtype == "float32" || dtype == "float64") {
      m.notes.push_back(file + "'s " + key + " is " + dtype +
                        " (the checkpoint's storage type): tpo times 16-bit (bf16) weights and "
                        "activations; vLLM's --dtype auto serves such a checkpoint in fp16, "
                        "which costs the same (docs.vllm.ai, engine arguments)");
      break;
    }
    if (dtype.starts_with("float8") || dtype.starts_with("int") || dtype.starts_with("uint")) {
      m.notes.push_back(file + "'s " + key + " is " + dtype +
                        ": tpo times 16-bit (bf16) weights and activations; 8-bit and smaller "
                        "GEMMs (their rates, their weight bytes) are not modelled, so this "
                        "checkpoint's own times will differ");
      break;
    }
  }
}

// The attention scores' scale and soft cap: Gemma's query_pre_attn_scalar
// (the scores scaled by its inverse square root instead of head_dim's) and Gemma-2's
// attn_logit_softcapping. A null, absent or zero cap is none.
void read_attention_scores(const nlohmann::json& j, const std::string& path, ModelConfig& m) {
  auto positive = [&](const char* key, bool zero_is_none) -> double {
    if (!j.contains(key) || j.at(key).is_null()) return 0;
    const auto& v = j.at(key);
    const double x = v.is_number() ? v.get<double>() : -1;
    if (zero_is_none && x == 0) return 0;
    if (!(x > 0) || !(x < 1e6)) {
      throw InputError(path, key,
                       std::string("must be ") + (zero_is_none ? "0 or null (none) or " : "") +
                           "a number above 0 and below 1e6, not " + v.dump());
    }
    return x;
  };
  if (const double q = positive("query_pre_attn_scalar", false); q > 0) {
    m.attn_scale = 1.0 / std::sqrt(q);
  }
  m.attn_softcap = positive("attn_logit_softcapping", true);
  m.final_softcap = positive("final_logit_softcapping", true);  // a note only (model_notes)
  if (m.attn_softcap > 0) {
    m.notes.push_back(
        "attn_logit_softcapping (a tanh on each attention score) is run by the runtimes and "
        "timed by a profile made since 2026-12-04, but the analytical model charges nothing for "
        "it (an assumption: a fused kernel applies it between its two matrix products)");
  }
}

}  // namespace

std::int64_t ModelConfig::windowed_count(std::int64_t layers) const {
  const std::int64_t n = layers > 0 ? std::min(layers, num_layers) : num_layers;
  std::int64_t k = 0;
  for (std::int64_t l = 0; l < n; ++l) k += window_of(l) > 0;
  return k;
}

bool layers_alike(const ModelConfig& m, std::int64_t layers, std::int64_t positions) {
  if (m.sliding_window <= 0 || positions <= m.sliding_window || m.windowed_layers.empty()) {
    return true;
  }
  for (std::int64_t l = 1; l < layers; ++l) {
    if (m.window_of(l) != m.window_of(0)) return false;
  }
  return true;
}

LayerRepeat layer_repeat(const ModelConfig& m, std::int64_t layers, std::int64_t positions) {
  const auto window = [&](std::int64_t l) { return m.window_at(l, positions); };
  std::int64_t period = 0;
  if (layers_alike(m, layers, positions)) {
    period = 1;
  } else {
    for (std::int64_t p = 2; p <= 8 && period == 0; ++p) {
      bool repeats = true;
      for (std::int64_t l = 0; l + p < layers && repeats; ++l) repeats = window(l) == window(l + p);
      if (repeats) period = p;
    }
  }
  LayerRepeat r{period, layers, 0};
  if (period == 0 || layers <= 1 + 2 * period) return r;
  // Layer 0, then two periods (the step is taken between layers 1 and 1 + period), then the
  // layers that do not fill a whole period; the rest repeats the step.
  r.template_layers = 1 + 2 * period + (layers - 1 - 2 * period) % period;
  r.steps = (layers - r.template_layers) / period;
  return r;
}

std::vector<std::string> model_notes(const ModelConfig& m, std::int64_t positions,
                                     std::int64_t layers, bool lm_head) {
  std::vector<std::string> out = m.notes;
  if (lm_head && m.final_softcap > 0) {
    out.push_back(
        "final_logit_softcapping (a tanh on the LM head's logits, batch x vocab values "
        "per step) is neither run nor timed");
  }
  const std::int64_t n = layers > 0 ? std::min(layers, m.num_layers) : m.num_layers;
  const std::int64_t k = m.windowed_count(n);
  if (k > 0 && positions > m.sliding_window) {
    out.push_back((k == n ? std::string(n == 1 ? "the layer attends" : "every layer attends")
                          : std::to_string(k) + " of the " + std::to_string(n) + " layers " +
                                (k == 1 ? "attends" : "attend")) +
                  " over a sliding window of " + std::to_string(m.sliding_window) +
                  (m.sliding_window == 1 ? " position (" : " positions (") +
                  fs::path(m.origin).filename().string() +
                  "'s sliding_window): " + (k == 1 ? "its" : "their") +
                  " attention is timed over the keys in the window (with --profile, read off the "
                  "profile's attention, measured without a window, at the same keys per query)");
  }
  if (m.max_positions > 0 && positions > m.max_positions) {
    out.push_back(std::to_string(positions) + " positions (prompt + context) exceed " +
                  fs::path(m.origin).filename().string() + "'s " +
                  (m.positions_scaled ? "max_position_embeddings with rope_scaling's factor, "
                                      : "max_position_embeddings ") +
                  std::to_string(m.max_positions) +
                  (m.positions_scaled
                       ? ": the model was not made for them"
                       : ": the model needs rope scaling or a longer-context variant for them"));
  }
  return out;
}

namespace {

// A multimodal config (Gemma-3, LLaVA, Mistral-3) keeps its language model's fields in
// text_config: the language model is read from there, over the top level's other fields
// (torch_dtype) where text_config does not repeat them, and the model keeps the top level's
// name. transformers leaves out of a sub-config every value equal to its config class's
// default, so every dimension tpo reads must be there (or at the top level): a default tpo
// would fill in differently (head_dim as hidden / heads, KV heads as heads) is refused instead.
// Any other config as it is.
nlohmann::json language_model_of(const nlohmann::json& raw, const std::string& path,
                                 bool* multimodal) {
  *multimodal = raw.is_object() && !raw.contains("schema") &&
                (!raw.contains("num_hidden_layers") || raw.at("num_hidden_layers").is_null()) &&
                raw.contains("text_config");
  if (!*multimodal) return raw;
  const auto& t = raw.at("text_config");
  if (!t.is_object()) {
    throw InputError(path, "text_config",
                     "must be an object holding the language model's fields, not " + t.dump());
  }
  nlohmann::json merged = raw;
  for (const char* tower : {"text_config", "vision_config", "audio_config"}) merged.erase(tower);
  for (const auto& [key, value] : t.items()) {
    if (!value.is_null() && key != "_name_or_path" && key != "name") merged[key] = value;
  }
  // Every missing field at once (the first named as the field), so that one edit mends them.
  std::vector<std::string> missing;
  for (std::size_t k = 0; k < kDimensionKeys; ++k) {
    const char* key = kModelKeys[k];
    if (!merged.contains(key) || merged.at(key).is_null()) missing.emplace_back(key);
  }
  if (!missing.empty()) {
    std::string others;
    for (std::size_t i = 1; i < missing.size(); ++i) {
      others += (i > 1 ? ", " : "") + std::string("text_config.") + missing[i];
    }
    throw InputError(path, "text_config." + missing[0],
                     "missing" + (others.empty() ? std::string() : " (and " + others + ")") +
                         ": the language model's fields are read from text_config, and " +
                         (others.empty() ? "this one is" : "these are") +
                         " neither there nor at the top level (transformers leaves a "
                         "sub-config's defaults out; the model card or the config class gives " +
                         (others.empty() ? "it" : "them") + "); add " +
                         (others.empty() ? "it" : "them") + " to text_config");
  }
  return merged;
}

// An error about a field read from text_config names it there ("text_config.sliding_window").
InputError in_text_config(const InputError& e, const nlohmann::json& text_config) {
  const std::string root = e.field().substr(0, e.field().find_first_of(".["));
  const std::string head = e.where() + ": field '" + e.field() + "': ";
  const std::string what = e.what();
  if (!text_config.is_object() || !text_config.contains(root) || !what.starts_with(head)) {
    return e;
  }
  return InputError(e.where(), "text_config." + e.field(), what.substr(head.size()));
}

ModelConfig read_model(const std::string& path, const nlohmann::json& raw);

}  // namespace

ModelConfig load_model(const std::string& spec) {
  const std::string path = resolve_config("models", spec, "model");
  const nlohmann::json raw = read_json_file(path);
  try {
    return read_model(path, raw);
  } catch (const InputError& e) {
    if (raw.is_object() && raw.contains("text_config") && e.where() == path &&
        !e.field().starts_with("text_config")) {
      throw in_text_config(e, raw.at("text_config"));
    }
    throw;
  }
}

namespace {

ModelConfig read_model(const std::string& path, const nlohmann::json& raw) {
  bool multimodal = false;
  const nlohmann::json j = language_model_of(raw, path, &multimodal);
  const JsonObject o(j, path, "");
  ModelConfig m;
  m.origin = path;
  const bool ours = o.has("schema");
  if (ours && o.string("schema") != "tpo.model/1") {
    throw InputError(path, "schema",
                     "expected \"tpo.model/1\", got \"" + o.string("schema") + "\"");
  }
  m.name = o.string_or("name", o.string_or("_name_or_path", fs::path(path).stem().string()));
  if (!ours && m.name == "config") {
    // The folder's name; in a Hugging Face hub cache (models--ORG--NAME/snapshots/HASH/) the
    // repository's, not the snapshot hash.
    const fs::path dir = fs::absolute(path).parent_path();
    m.folder_name = dir.filename().string();
    const std::string repo = dir.parent_path().parent_path().filename().string();
    if (dir.parent_path().filename() == "snapshots" && repo.starts_with("models--")) {
      m.name.clear();  // ORG--NAME: "--" separates the parts of the repository's id
      for (std::size_t i = 8; i < repo.size(); ++i) {
        const bool sep = repo.compare(i, 2, "--") == 0;
        m.name += sep ? '/' : repo[i];
        if (sep) ++i;
      }
    } else {
      m.name = dir.filename().string();
    }
  }
  if (ours) {  // our schema: a misspelt key is an error, not a silent default
    static const char* ours_only[] = {"schema",     "name",   "qkv_bias", "qk_norm",
                                      "post_norms", "source", "note"};
    std::vector<std::string> known(std::begin(kModelKeys), std::end(kModelKeys));
    known.insert(known.end(), std::begin(ours_only), std::end(ours_only));
    for (const auto& [key, value] : j.items()) {
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        throw InputError(
            path, key,
            "unknown key in a tpo.model/1 file (misspelt? or read by a newer tpo than this build)");
      }
    }
    if (j.contains("sliding_window") && !j.at("sliding_window").is_null()) {
      if (!j.at("sliding_window").is_number()) {
        throw InputError(path, "sliding_window",
                         "must be a number, not " + j.at("sliding_window").dump());
      }
      m.sliding_window = sliding_window_of(j, path);
    }
  } else {  // Hugging Face: dense Llama-style decoders with a gated MLP
    refuse_unmodelled(j, o, path);
    m.sliding_window = sliding_window_of(j, path);
    read_notes(j, path, m);
    near_miss_notes(j, path, m);
    if (multimodal) {
      m.notes.push_back("the language model is read from " + fs::path(path).filename().string() +
                        "'s text_config: the vision tower and projector are not timed (a "
                        "prompt's image tokens count as prompt tokens)");
    } else if (j.contains("vision_config") && !j.at("vision_config").is_null()) {
      m.notes.push_back(fs::path(path).filename().string() +
                        " has a vision_config: the vision tower and projector are not timed (a "
                        "prompt's image tokens count as prompt tokens)");
    }
  }
  read_architecture(j, o, path, m);
  m.num_layers = o.integer("num_hidden_layers");
  m.hidden = o.integer("hidden_size");
  m.heads = o.integer("num_attention_heads");
  m.kv_heads = o.integer_or("num_key_value_heads", m.heads);
  m.ffn = o.integer("intermediate_size");
  m.vocab = o.integer("vocab_size");
  if (o.has("head_dim")) {
    m.head_dim = o.integer("head_dim");
  } else if (!ours && o.string_or("model_type", "").starts_with("gemma")) {
    // transformers' Gemma, Gemma-2 and Gemma-3 config classes default head_dim to 256, not to
    // hidden_size / num_attention_heads (Gemma-2-27B: 4608 / 32 = 144, its head_dim 128).
    m.head_dim = 256;
  } else {
    if (m.hidden % m.heads != 0) {
      throw InputError(path, "head_dim",
                       "is missing and hidden_size is not divisible by num_attention_heads");
    }
    m.head_dim = m.hidden / m.heads;
  }
  read_rotary(j, path, m);
  read_attention_scores(j, path, m);
  // Every RMSNorm's epsilon: rms_norm_eps (1e-6, transformers' default, where a config has
  // none). It changes no cost; the runtimes normalize with it.
  if (j.contains("rms_norm_eps") && !j.at("rms_norm_eps").is_null()) {
    const auto& e = j.at("rms_norm_eps");
    if (!e.is_number() || !(e.get<double>() > 0.0 && e.get<double>() < 0.1)) {
      throw InputError(path, "rms_norm_eps",
                       "must be a number above 0 and below 0.1, not " + e.dump());
    }
    m.rms_norm_eps = e.get<double>();
  }
  read_windowed_layers(j, o, path, m);
  if (m.heads % m.kv_heads != 0) {
    throw InputError(path, "num_key_value_heads",
                     "must divide num_attention_heads (" + std::to_string(m.heads) + ")");
  }
  return m;
}

}  // namespace

}  // namespace tpo::sim
