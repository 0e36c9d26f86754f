// Where shipped configs live and how a --model/--hardware argument becomes a file path:
// a name is looked up in configs/SUB/NAME.json, anything with a '/' or ending in .json is a path.
#pragma once

#include <string>
#include <vector>

namespace tpo::sim {

// Whether a --model/--hardware/--profile argument names a file (a '/' or ".json") rather than
// a shipped name.
inline bool is_config_path(const std::string& spec) {
  return spec.find('/') != std::string::npos || spec.ends_with(".json");
}

// $TPO_CONFIG_DIR if set, else the source tree's configs/.
std::string config_dir();
std::vector<std::string> list_shipped(const std::string& sub);
// Throws FieldError naming `field` ("model", "hardware") and listing the shipped names when
// the name is unknown.
std::string resolve_config(const std::string& sub, const std::string& spec,
                           const std::string& field);

}  // namespace tpo::sim
