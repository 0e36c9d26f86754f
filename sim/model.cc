// Model loading. Our schema uses the Hugging Face key names, so one parser reads both; a
// file with "schema": "tpo.model/1" is ours, anything else is treated as a HF config.json.
#include "sim/model.h"

#include <algorithm>
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

ModelConfig load_model(const std::string& spec) {
  const std::string path = resolve_config("models", spec, "model");
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
  if (!ours && m.name == "config") {
    m.name = fs::absolute(path).parent_path().filename().string();
  }
  if (ours) {  // our schema: a misspelt key is an error, not a silent default
    static const char* known[] = {"schema",
                                  "name",
                                  "num_hidden_layers",
                                  "hidden_size",
                                  "num_attention_heads",
                                  "num_key_value_heads",
                                  "head_dim",
                                  "intermediate_size",
                                  "vocab_size",
                                  "source",
                                  "note"};
    for (const auto& [key, value] : j.items()) {
      if (std::find(std::begin(known), std::end(known), key) == std::end(known)) {
        throw InputError(path, key, "unknown key in a tpo.model/1 file (misspelt?)");
      }
    }
  } else {  // Hugging Face: only dense Llama-style decoders with SwiGLU are modelled
    for (const char* moe : {"num_local_experts", "num_experts", "n_routed_experts"}) {
      if (j.contains(moe) && j.at(moe).is_number() && j.at(moe).get<double>() > 1) {
        throw InputError(path, moe,
                         "mixture-of-experts models are not modelled yet (dense Llama-style "
                         "decoders only)");
      }
    }
    const std::string act = o.string_or("hidden_act", "silu");
    if (act != "silu" && act != "swish") {
      throw InputError(path, "hidden_act",
                       "'" + act + "' is not modelled (SwiGLU MLPs with silu only)");
    }
  }
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
