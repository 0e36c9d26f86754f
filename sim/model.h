// A Llama-style decoder model's dimensions (gated MLP, GQA, RMSNorm; optional biases, GeGLU,
// tied embeddings), loaded from our JSON ("tpo.model/1"), from a
// Hugging Face config.json, or by shipped name (configs/models/NAME.json). Dimensions only:
// tpo never loads weights.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tpo::sim {

struct ModelConfig {
  std::string name;
  std::string origin;  // the file it came from
  // A config.json without a name: its folder's name, which tpo named such a model by before it
  // read hub caches (models--ORG--NAME/snapshots/HASH: the hash); a profile made under it
  // still matches. Empty otherwise.
  std::string folder_name;
  std::int64_t num_layers = 0;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t ffn = 0;  // intermediate_size
  std::int64_t vocab = 0;
  // The gated MLP's activation: act(gate) * up. SwiGLU (silu, Llama, Qwen) or GeGLU (gelu,
  // Gemma): the same GEMMs, a different elementwise op.
  enum class Activation { Silu, Gelu } activation = Activation::Silu;
  bool qkv_bias = false;         // bias on the Q/K/V projection (Qwen2; Llama's attention_bias)
  bool o_bias = false;           // bias on the attention output projection (Llama's attention_bias)
  bool mlp_bias = false;         // biases on the MLP projections (Llama's mlp_bias)
  bool tied_embeddings = false;  // the LM head is the embedding matrix (Gemma)
  // Rotary position embeddings (every model tpo reads has them): the first rotary_dim values of
  // each query and key head are rotated, rotate-half (NeoX) pairs i and i + rotary_dim / 2 by
  // position x rope_theta^(-2i / rotary_dim). rotary_dim: head_dim x partial_rotary_factor.
  std::int64_t rotary_dim = 0;
  double rope_theta = 10000.0;
  // Every RMSNorm's epsilon (rms_norm_eps; where a config has none, 1e-6: the default of
  // transformers' Llama, Mistral, Qwen2 and Gemma config classes, which a sub-config such as
  // LLaVA's text_config leaves out when it is that).
  double rms_norm_eps = 1e-6;
  // An RMSNorm over each query and each key head (head_dim values, its own weight) between the
  // qkv projection and the rotary embeddings: Qwen3's and Gemma-3's q_norm and k_norm.
  bool qk_norm = false;
  // The attention scores' scale: query_pre_attn_scalar^-1/2 where a config gives it (Gemma;
  // 0: 1 / sqrt(head_dim)), and Gemma-2's soft cap on the scaled scores before the softmax,
  // cap x tanh(score / cap) (attn_logit_softcapping; 0: none). The runtimes compute with both;
  // neither changes a cost the model charges (a fused kernel applies the cap between its two
  // matrix products: an assumption that it costs nothing measurable beside them).
  double attn_scale = 0;
  double attn_softcap = 0;
  // Gemma-2's cap on the LM head's logits (final_logit_softcapping; 0: none): neither run nor
  // timed, a note where the workload runs the LM head.
  double final_softcap = 0;
  // An RMSNorm on each attention's and each MLP's output (after its all-reduce) before the
  // residual add: Gemma-2's and Gemma-3's post_attention_layernorm and
  // post_feedforward_layernorm.
  bool post_norms = false;
  // Sliding-window attention: a windowed layer's query sees the last sliding_window
  // positions, itself included (Mistral v0.1: every layer; Gemma-2: every other layer;
  // Gemma-3: five of every six). 0: full attention in every layer.
  std::int64_t sliding_window = 0;
  // Which layers use the window, one entry per layer; empty (with a window): all of them.
  std::vector<bool> windowed_layers;
  // Layer `layer`'s window (0: full attention).
  std::int64_t window_of(std::int64_t layer) const {
    if (sliding_window <= 0) return 0;
    const auto l = static_cast<std::size_t>(layer);
    return windowed_layers.empty() || (l < windowed_layers.size() && windowed_layers[l])
               ? sliding_window
               : 0;
  }
  // Layer `layer`'s window where `positions` (prompt + context) reach past it, else 0: the
  // window its attention ops carry (within it the layer is full attention).
  std::int64_t window_at(std::int64_t layer, std::int64_t positions) const {
    const std::int64_t w = window_of(layer);
    return w > 0 && positions > w ? w : 0;
  }
  // How many of the model's first `layers` layers (0: all) use the window.
  std::int64_t windowed_count(std::int64_t layers = 0) const;
  // The config's max_position_embeddings (0: not given): a prompt and context past it is
  // simulated, with a note (rope scaling or a longer-context variant would be needed).
  std::int64_t max_positions = 0;
  bool positions_scaled = false;  // max_positions includes rope_scaling's factor
  // What the config has that tpo does not time, or reads differently (a float32 torch_dtype
  // modelled as bf16, Gemma-2's extra norms, ...): said with every prediction.
  std::vector<std::string> notes;
};
// Whether every one of the first `layers` layers attends alike over `positions` (prompt +
// context): false where some use a sliding window the positions reach past and some do not.
// Where true, the planner extrapolates a few layers' timeline to all of them.
bool layers_alike(const ModelConfig& m, std::int64_t layers, std::int64_t positions);
// How the planner's surrogate times `layers` layers over `positions` (prompt + context): a
// template of `template_layers` layers whose step from layer 1 to layer 1 + `period` repeats
// `steps` more times. Layers that attend alike repeat with period 1 (3 layers, then the step
// between layers 1 and 2); sliding-window and full layers in a pattern (Gemma-2: 2, Gemma-3: 6)
// repeat with the pattern's period, up to 8; no period (or too few layers for one): the whole
// run (steps 0).
struct LayerRepeat {
  std::int64_t period = 1, template_layers = 3, steps = 0;
};
LayerRepeat layer_repeat(const ModelConfig& m, std::int64_t layers, std::int64_t positions);
// The model's notes, one on the layers that attend over a sliding window `positions` (prompt +
// context) reach past, and one on `positions` past max_position_embeddings. `layers`: the
// layers simulated (0: all), of which the window note counts those that use one.
// `lm_head`: the workload runs the LM head (--embed-head, generate), where a note on its logits'
// soft cap applies.
std::vector<std::string> model_notes(const ModelConfig& m, std::int64_t positions,
                                     std::int64_t layers = 0, bool lm_head = false);
const char* activation_name(ModelConfig::Activation a);

// `spec` is a shipped name ("llama2-70b"), or a path to a JSON file (ours or HF config.json).
ModelConfig load_model(const std::string& spec);
std::vector<std::string> shipped_models();

}  // namespace tpo::sim
