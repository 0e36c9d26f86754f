// Shipped-config lookup shared by the model, hardware (and later profile) loaders.
#include "sim/config_paths.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "sim/error.h"
#include "tpo/config.h"

namespace tpo::sim {

namespace fs = std::filesystem;

std::string config_dir() {
  if (const char* env = std::getenv("TPO_CONFIG_DIR"); env && *env) return env;
  std::error_code ec;
  if (fs::is_directory(TPO_SOURCE_CONFIG_DIR, ec)) return TPO_SOURCE_CONFIG_DIR;
  // A binary moved to another checkout (build/cli/tpo): the configs/ two folders up.
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path();
         dir = dir.parent_path()) {
      if (fs::is_directory(dir / "configs" / "models", ec)) return (dir / "configs").string();
    }
  }
  return TPO_SOURCE_CONFIG_DIR;
}

std::vector<std::string> list_shipped(const std::string& sub) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(config_dir()) / sub, ec)) {
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string resolve_config(const std::string& sub, const std::string& spec,
                           const std::string& field) {
  if (is_config_path(spec)) {
    // A model's folder (a Hugging Face download): its config.json.
    std::error_code ec;
    if (sub == "models" && fs::is_directory(spec, ec) &&
        fs::is_regular_file(fs::path(spec) / "config.json", ec)) {
      return (fs::path(spec) / "config.json").string();
    }
    return spec;
  }
  const std::string path = (fs::path(config_dir()) / sub / (spec + ".json")).string();
  if (fs::exists(path)) return path;
  std::string names;
  for (const auto& n : list_shipped(sub)) {
    if (!names.empty()) names += ", ";
    names += n;
  }
  if (names.empty()) {  // the folder itself is missing or empty: say where tpo looked
    const char* env = std::getenv("TPO_CONFIG_DIR");
    throw FieldError(field, spec,
                     "no shipped " + sub + " configs found: " +
                         (fs::path(config_dir()) / sub).string() + " has none" +
                         (env && *env ? " (from TPO_CONFIG_DIR; point it at the checkout's "
                                        "configs/ folder)"
                                      : "") +
                         "; or pass a path to a JSON file");
  }
  std::error_code ec;
  const std::string here =
      fs::exists(spec, ec) ? "; '" + spec + "' here is read as a path when written ./" + spec : "";
  // What the JSON file is: a machine's is written from its datasheet (a copy of the closest
  // shipped one); a model's is its Hugging Face config.json.
  const std::string what =
      sub == "hardware"
          ? "or describe the machine in a JSON file and pass its path (copy the closest shipped "
            "file from " +
                (fs::path(config_dir()) / sub).string() +
                " and change its numbers to the datasheet's; docs/hardware-file.md lists every "
                "field)"
      : sub == "models" ? "or pass a path to the model's Hugging Face config.json (or its "
                          "folder) or to a tpo.model/1 JSON file"
                        : "or pass a path to a JSON file";
  const std::string kind = sub == "models" ? "model" : sub;
  throw FieldError(
      field, spec,
      "no shipped " + kind + " config of that name (shipped: " + names + "); " + what + here);
}

}  // namespace tpo::sim
