// Model loading. Our schema uses the Hugging Face key names, so one parser reads both; a
// file with "schema": "tpo.model/1" is ours, anything else is treated as a HF config.json.
#include "sim/model.h"

#include <filesystem>

#include "sim/config_paths.h"
#include "sim/error.h"
#include "sim/json_io.h"

namespace tpo::sim {

namespace fs = std::filesystem;

std::vector<std::string> shipped_models() {
  return list_shipped("models");
}

ModelConfig load_model(const std::string& spec) {
  const std::string path = resolve_config("models", spec, "--model");
  const nlohmann::json j = read_json_file(path);
  const JsonObject o(j, path, "");
  ModelConfig m;
  m.origin = path;
  const bool ours = o.has("schema");
  if (ours && o.string("schema") != "tpo.model/1") {
    throw InputError(path, "schema",
                     "expected \"tpo.model/1\", got \"" + o.string("schema") + "\"");
  }
  m.name = o.string_or("name", o.string_or("_name_or_path", fs::path(path).stem().string()));
  if (!ours && m.name == "config") m.name = fs::path(path).parent_path().filename().string();
  m.num_layers = o.integer("num_hidden_layers");
  m.hidden = o.integer("hidden_size");
  m.heads = o.integer("num_attention_heads");
  m.kv_heads = o.integer_or("num_key_value_heads", m.heads);
  m.ffn = o.integer("intermediate_size");
  m.vocab = o.integer("vocab_size");
  if (o.has("head_dim")) {
    m.head_dim = o.integer("head_dim");
  } else {
    if (m.hidden % m.heads != 0) {
      throw InputError(path, "head_dim",
                       "is missing and hidden_size is not divisible by num_attention_heads");
    }
    m.head_dim = m.hidden / m.heads;
  }
  if (m.heads % m.kv_heads != 0) {
    throw InputError(path, "num_key_value_heads",
                     "must divide num_attention_heads (" + std::to_string(m.heads) + ")");
  }
  return m;
}

}  // namespace tpo::sim
