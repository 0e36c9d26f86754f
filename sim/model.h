// A Llama-style decoder model's dimensions, loaded from our JSON ("tpo.model/1"), from a
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
  std::int64_t num_layers = 0;
  std::int64_t hidden = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t ffn = 0;  // intermediate_size
  std::int64_t vocab = 0;
};

// `spec` is a shipped name ("llama2-70b"), or a path to a JSON file (ours or HF config.json).
ModelConfig load_model(const std::string& spec);
std::vector<std::string> shipped_models();

}  // namespace tpo::sim
