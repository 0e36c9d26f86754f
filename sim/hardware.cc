// Hardware loading with file + field error messages.
#include "sim/hardware.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>

#include "sim/config_paths.h"
#include "sim/error.h"
#include "sim/json_io.h"

namespace tpo::sim {

namespace fs = std::filesystem;

std::vector<std::string> shipped_hardware() {
  return list_shipped("hardware");
}

namespace {

// One table, {"ranks": R, "points": [[bytes, us], ...], "source": "..."}: measured times of
// one all-reduce on R ranks (nccl-tests), at least two sizes, ascending.
LinkConfig::Table parse_one_table(const JsonObject& t, std::int64_t max_ranks) {
  t.only_keys({"ranks", "points", "source"}, "an allreduce_table");
  if (t.string("source").empty()) {
    throw InputError(t.file(), t.field("source"), "must name where the times were measured");
  }
  LinkConfig::Table out;
  out.ranks = t.integer("ranks");
  if (out.ranks < 2 || out.ranks > max_ranks) {
    throw InputError(
        t.file(), t.field("ranks"),
        "must be between 2 and the GPUs the link joins (" + std::to_string(max_ranks) + ")");
  }
  const nlohmann::json& a = t.raw().contains("points") ? t.raw().at("points") : nlohmann::json();
  const std::string field = t.field("points");
  if (!a.is_array() || a.size() < 2 || a.size() > 64) {
    throw InputError(t.file(), field, "must be a list of 2 to 64 [bytes, us] pairs");
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto& p = a.at(i);
    const std::string f = field + "[" + std::to_string(i) + "]";
    if (!p.is_array() || p.size() != 2 || !p.at(0).is_number() || !p.at(1).is_number()) {
      throw InputError(t.file(), f, "must be [bytes, us]");
    }
    const double bytes = p.at(0).get<double>(), us = p.at(1).get<double>();
    if (!(bytes >= 1 && bytes <= 1e15) || bytes != std::floor(bytes) || !(us > 0 && us <= 1e9)) {
      throw InputError(t.file(), f, "bytes must be a whole number in [1, 1e15] and us in (0, 1e9]");
    }
    if (!out.points.empty() && bytes <= out.points.back().first) {
      throw InputError(t.file(), f, "message sizes must be in ascending order, each once");
    }
    out.points.emplace_back(bytes, us);
  }
  return out;
}

// "allreduce_table": one table, or a list of tables of distinct rank counts, ascending.
void parse_tables(const JsonObject& link, LinkConfig& l, std::int64_t max_ranks) {
  const nlohmann::json& raw = link.raw().at("allreduce_table");
  const std::string field = link.field("allreduce_table");
  if (!raw.is_array()) {
    l.tables.push_back(parse_one_table(link.object("allreduce_table"), max_ranks));
    return;
  }
  if (raw.empty() || raw.size() > 16) {
    throw InputError(link.file(), field, "must be a table, or a list of 1 to 16 tables");
  }
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const std::string f = field + "[" + std::to_string(i) + "]";
    auto t = parse_one_table(JsonObject(raw.at(i), link.file(), f), max_ranks);
    if (!l.tables.empty() && t.ranks <= l.tables.back().ranks) {
      throw InputError(link.file(), f + ".ranks",
                       "tables must be in ascending order of ranks, one per rank count");
    }
    l.tables.push_back(std::move(t));
  }
}

LinkConfig parse_link(const JsonObject& o, std::int64_t max_ranks) {
  LinkConfig l;
  l.cls = o.string("class");
  if (l.cls == "none") return l;
  l.allreduce_latency_us = o.number("allreduce_latency_us", /*positive=*/false);
  l.busbw_gbps = o.number("busbw_gbps");
  if (max_ranks > 0 && o.has("allreduce_table")) parse_tables(o, l, max_ranks);
  return l;
}

SlowdownByKind parse_slowdown(const JsonObject& o) {
  SlowdownByKind s;
  s.gemm = o.number("gemm");
  s.attention = o.number("attention");
  s.memory = o.number("memory");
  for (const char* k : {"gemm", "attention", "memory"}) {
    if (o.number(k) < 1.0) {
      throw InputError(o.file(), o.field(k), "a slowdown factor must be >= 1.0");
    }
  }
  return s;
}

// "gemm_tiles": [[rows, cols, relative efficiency], ...]; absent: the one gemm_tile_m x n.
std::vector<HardwareConfig::GemmTile> parse_tiles(const JsonObject& eff, const HardwareConfig& h) {
  std::vector<HardwareConfig::GemmTile> tiles;
  if (!eff.has("gemm_tiles")) {
    tiles.push_back({h.gemm_tile_m, h.gemm_tile_n, 1.0});
    return tiles;
  }
  const nlohmann::json& a = eff.raw().at("gemm_tiles");
  const std::string field = eff.field("gemm_tiles");
  if (!a.is_array() || a.empty() || a.size() > 16) {
    throw InputError(eff.file(), field, "must be a list of 1 to 16 [rows, cols, efficiency]");
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto& t = a.at(i);
    const std::string f = field + "[" + std::to_string(i) + "]";
    if (!t.is_array() || t.size() != 3 || !t.at(0).is_number_integer() ||
        !t.at(1).is_number_integer() || !t.at(2).is_number()) {
      throw InputError(eff.file(), f, "must be [rows, cols, efficiency]");
    }
    HardwareConfig::GemmTile g{t.at(0).get<std::int64_t>(), t.at(1).get<std::int64_t>(),
                               t.at(2).get<double>()};
    if (g.m < 1 || g.m > 1024 || g.n < 1 || g.n > 1024 || !(g.efficiency > 0) || g.efficiency > 1) {
      throw InputError(eff.file(), f,
                       "rows and cols must be in [1, 1024] and the efficiency in (0, 1]");
    }
    tiles.push_back(g);
  }
  return tiles;
}

// Every required field a file lacks, as dotted paths: a file written from a datasheet is told
// all of them at once, not one per run.
std::vector<std::string> missing_required(const nlohmann::json& j, std::int64_t nodes) {
  std::vector<std::string> out;
  // The object at `path`, or nullptr where a key on the way is absent. A key present with the
  // wrong type is not "missing": the field-by-field reading names it ("must be an object").
  enum class At { Missing, WrongType, Found };
  const auto find = [&](std::initializer_list<const char*> path, const nlohmann::json** found) {
    const nlohmann::json* at = &j;
    for (const char* k : path) {
      if (!at->is_object()) return At::WrongType;
      if (!at->contains(k)) return At::Missing;
      at = &at->at(k);
    }
    if (found) *found = at;
    return At::Found;
  };
  const auto dotted = [](std::initializer_list<const char*> path) {
    std::string name;
    for (const char* k : path) {
      if (!name.empty()) name += '.';
      name += k;
    }
    return name;
  };
  bool wrong_type = false;  // then the field-by-field reading reports that first
  const auto need = [&](std::initializer_list<const char*> path) {
    const At at = find(path, nullptr);
    if (at == At::Missing) out.push_back(dotted(path));
    wrong_type = wrong_type || at == At::WrongType;
  };
  for (const char* k : {"name", "sms", "bf16_dense_tflops", "memory_bandwidth_gbps", "memory_gib",
                        "launch_overhead_us"}) {
    need({"gpu", k});
  }
  for (const char* k :
       {"gemm_max", "gemm_tile_m", "gemm_tile_n", "gemm_k_half", "attention_max", "memory"}) {
    need({"efficiency", k});
  }
  need({"node", "gpus_per_node"});
  // A link's latency and bandwidth, unless its class is "none" (a class of another type is
  // left to the field-by-field reading).
  const auto link = [&](std::initializer_list<const char*> path, const char* a, const char* b) {
    const nlohmann::json* l = nullptr;
    const At at = find(path, &l);
    if (at == At::WrongType || (at == At::Found && !l->is_object()) ||
        (at == At::Found && l->contains("class") && !l->at("class").is_string())) {
      wrong_type = true;
      return;
    }
    if (at == At::Missing || !l->contains("class")) {
      out.push_back(dotted(path) + ".class");
    } else if (l->at("class").get<std::string>() == "none") {
      return;
    }
    for (const char* k : {a, b}) {
      if (at == At::Missing || !l->contains(k)) out.push_back(dotted(path) + "." + k);
    }
  };
  link({"node", "link"}, "allreduce_latency_us", "busbw_gbps");
  // Between nodes: required with more than one node, and checked wherever it is given.
  if (nodes > 1 || (j.is_object() && j.contains("inter_node"))) {
    link({"inter_node"}, "allreduce_latency_us", "busbw_gbps");
  }
  for (const char* side : {"compute_slowdown_under_comm", "comm_slowdown_under_compute"}) {
    for (const char* k : {"gemm", "attention", "memory"}) need({"interference", side, k});
  }
  if (wrong_type) out.clear();
  return out;
}

}  // namespace

std::string hardware_label(const HardwareConfig& h) {
  const fs::path file(h.origin);
  if (h.origin.empty() || file.stem().string() == h.name) return h.name;
  return h.name + " (from " + file.filename().string() + ")";
}

namespace {

std::string upper(const std::string& s) {
  std::string up;
  for (char ch : s) up += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return up;
}

bool digit(char ch) {
  return std::isdigit(static_cast<unsigned char>(ch)) != 0;
}

// A word of a GPU's name as its model, or empty where it is not one.
std::string model_word(const std::string& word) {
  std::string up = upper(word);
  const bool plain = !up.empty() && std::all_of(up.begin(), up.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) != 0;
  });
  if (!plain || std::none_of(up.begin(), up.end(), digit) || up.ends_with("GB") ||
      up.starts_with("SXM") || up.starts_with("HBM") || up.starts_with("PCIE")) {
    return "";
  }
  // A count ("8x H100"), not a model.
  if (up.back() == 'X' && std::all_of(up.begin(), up.end() - 1, digit)) return "";
  // Written together: "RTX4090", "H100SXM5", "H100PCIE", "H200NVL".
  if (up.starts_with("RTX") && up.size() > 3 && digit(up[3])) up.erase(0, 3);
  for (const char* form : {"SXM", "PCIE", "NVL"}) {
    const auto at = up.find(form);
    if (at != std::string::npos && at > 0 && digit(up[at - 1])) up.erase(at);
  }
  return up;
}

// The part's form factor where its name says it: "pcie", "nvl", or "" (SXM, or not said).
std::string gpu_form_factor(const std::string& gpu_name) {
  const std::string up = upper(gpu_name);
  if (up.find("NVL") != std::string::npos) return "nvl";
  if (up.find("PCIE") != std::string::npos) return "pcie";
  return "";
}

}  // namespace

std::string gpu_model_token(const std::string& gpu_name) {
  std::string word;
  for (std::size_t i = 0; i <= gpu_name.size(); ++i) {
    const char ch = i < gpu_name.size() ? gpu_name[i] : ' ';
    if (ch == ' ' || ch == '-' || ch == '_') {
      if (std::string m = model_word(word); !m.empty()) return m;
      word.clear();
    } else {
      word += ch;
    }
  }
  return "";
}

bool same_gpu_model(const std::string& a, const std::string& b) {
  const std::string ta = gpu_model_token(a), tb = gpu_model_token(b);
  if (ta.empty() || tb.empty()) return true;  // one of them names no model: nothing to tell
  return ta == tb && gpu_form_factor(a) == gpu_form_factor(b);
}

HardwareConfig load_hardware(const std::string& spec, const std::string& field) {
  const std::string path = resolve_config("hardware", spec, field);
  return hardware_from_json(read_json_file(path), path);
}

HardwareConfig hardware_from_json(const nlohmann::json& j, const std::string& path) {
  const JsonObject o(j, path, "");
  if (o.string("schema") != "tpo.hardware/1") {
    throw InputError(path, "schema", "expected \"tpo.hardware/1\"");
  }
  // Missing fields, all named at once (a wrong type or value is still reported one by one).
  const std::int64_t nodes = j.contains("nodes") && j.at("nodes").is_number_integer()
                                 ? j.at("nodes").get<std::int64_t>()
                                 : 1;
  if (const auto missing = missing_required(j, nodes); !missing.empty()) {
    std::string also;
    for (std::size_t i = 1; i < missing.size(); ++i) {
      if (i > 1) also += ", ";
      also += missing[i];
    }
    throw InputError(path, missing.front(),
                     "is missing" + (also.empty() ? std::string() : "; also missing: " + also) +
                         " (docs/hardware-file.md lists every field)");
  }
  // A misspelt key (kernel_overhead_usec) would leave its default in place without a word.
  const std::string kind = "a tpo.hardware/1 file";
  o.only_keys({"schema", "name", "description", "nodes", "gpu", "efficiency", "node", "inter_node",
               "interference", "contention", "note"},
              kind);
  o.object("gpu").only_keys({"name", "kind", "sms", "bf16_dense_tflops", "peak_clock_mhz",
                             "memory_bandwidth_gbps", "memory_gib", "launch_overhead_us",
                             "kernel_overhead_us", "graph_launch_us", "launch_source", "source"},
                            kind);
  o.object("efficiency")
      .only_keys(
          {"gemm_max", "gemm_tile_m", "gemm_tile_n", "gemm_k_half", "gemm_tiles", "gemm_stream_k",
           "gemm_overhead_us", "gemm_split_k_us", "attention_max", "attention_kv_half", "memory",
           "l2_resident_mib", "l2_gbps", "l2_in_place_only", "norm_blocks_per_sm", "source"},
          kind);
  o.object("node").only_keys({"gpus_per_node", "link"}, kind);
  // A published table belongs to the link inside a node (its rank count is that node's GPUs).
  o.object("node").object("link").only_keys(
      {"class", "allreduce_latency_us", "busbw_gbps", "allreduce_table", "source"}, kind);
  if (o.has("inter_node")) {
    o.object("inter_node")
        .only_keys({"class", "allreduce_latency_us", "busbw_gbps", "source"}, kind);
  }
  const JsonObject interference = o.object("interference");
  interference.only_keys({"compute_slowdown_under_comm", "comm_slowdown_under_compute", "source"},
                         kind);
  for (const char* k : {"compute_slowdown_under_comm", "comm_slowdown_under_compute"}) {
    interference.object(k).only_keys({"gemm", "attention", "memory", "source"}, kind);
  }
  HardwareConfig h;
  h.origin = path;
  h.name = o.string_or("name", fs::path(path).stem().string());
  h.description = o.string_or("description", "");
  const JsonObject gpu = o.object("gpu");
  h.gpu_name = gpu.string("name");
  if (h.gpu_name.empty()) throw InputError(path, gpu.field("name"), "is empty: name the GPU");
  const std::string gpu_kind = gpu.string_or("kind", "gpu");
  if (gpu_kind != "gpu" && gpu_kind != "cpu") {
    throw InputError(path, gpu.field("kind"), "must be gpu or cpu (the CPU backend's machine)");
  }
  h.is_cpu = gpu_kind == "cpu";
  h.sms = gpu.integer("sms");
  h.bf16_dense_tflops = gpu.number("bf16_dense_tflops");
  h.peak_clock_mhz = gpu.number_or("peak_clock_mhz", 0, /*positive=*/false);
  h.memory_bandwidth_gbps = gpu.number("memory_bandwidth_gbps");
  h.memory_gib = gpu.number("memory_gib");
  h.launch_overhead_us = gpu.number("launch_overhead_us", /*positive=*/false);
  // Files written before the execution modes existed charged launch_overhead_us on the GPU.
  h.kernel_overhead_us =
      gpu.number_or("kernel_overhead_us", h.launch_overhead_us, /*positive=*/false);
  h.graph_launch_us = gpu.number_or("graph_launch_us", h.launch_overhead_us, /*positive=*/false);
  h.launch = uniform_launch(h.launch_overhead_us, h.graph_launch_us,
                            gpu.string_or("launch_source", "hardware file " + path));
  const JsonObject eff = o.object("efficiency");
  h.gemm_max_efficiency = eff.number("gemm_max");
  h.gemm_tile_m = eff.integer("gemm_tile_m");
  h.gemm_tile_n = eff.integer("gemm_tile_n");
  h.gemm_k_half = eff.number("gemm_k_half", /*positive=*/false);
  h.attention_max_efficiency = eff.number("attention_max");
  h.attention_kv_half = eff.number_or("attention_kv_half", 0, /*positive=*/false);
  h.memory_efficiency = eff.number("memory");
  for (const char* k : {"gemm_max", "attention_max", "memory"}) {
    if (eff.number(k) > 1.0) throw InputError(path, eff.field(k), "an efficiency must be <= 1.0");
  }
  h.gemm_tiles = parse_tiles(eff, h);
  if (eff.has("gemm_stream_k")) {
    if (!eff.raw().at("gemm_stream_k").is_boolean()) {
      throw InputError(path, eff.field("gemm_stream_k"), "must be true or false");
    }
    h.gemm_stream_k = eff.raw().at("gemm_stream_k").get<bool>();
  }
  h.gemm_overhead_us = eff.number_or("gemm_overhead_us", h.kernel_overhead_us, false);
  h.gemm_split_k_us = eff.number_or("gemm_split_k_us", 0, false);
  h.l2_resident_mib = eff.number_or("l2_resident_mib", 0, /*positive=*/false);
  h.l2_gbps = eff.number_or("l2_gbps", 0, /*positive=*/false);
  if (h.l2_resident_mib > 0 && h.l2_gbps < 1) {
    throw InputError(path, eff.field("l2_gbps"),
                     "must be given (at least 1 GB/s) with l2_resident_mib");
  }
  if (eff.has("l2_in_place_only")) {
    if (!eff.raw().at("l2_in_place_only").is_boolean()) {
      throw InputError(path, eff.field("l2_in_place_only"), "must be true or false");
    }
    h.l2_in_place_only = eff.raw().at("l2_in_place_only").get<bool>();
  }
  h.norm_blocks_per_sm = eff.number_or("norm_blocks_per_sm", 0, /*positive=*/false);
  const JsonObject node = o.object("node");
  h.gpus_per_node = node.integer("gpus_per_node");
  h.intra = parse_link(node.object("link"), h.gpus_per_node);
  if (h.intra.cls == "none") {
    throw InputError(path, "node.link.class", "a node needs a link between its GPUs");
  }
  // A single node needs no inter_node block (it reads as class none).
  h.inter.cls = "none";
  if (o.has("inter_node")) h.inter = parse_link(o.object("inter_node"), 0);
  h.nodes = o.integer_or("nodes", 1);
  if (h.nodes > 1 && h.inter.cls == "none") {
    throw InputError(path, "inter_node.class",
                     "is none but the machine has " + std::to_string(h.nodes) + " nodes");
  }
  const JsonObject inter = o.object("interference");
  h.compute_under_comm = parse_slowdown(inter.object("compute_slowdown_under_comm"));
  h.comm_under_compute = parse_slowdown(inter.object("comm_slowdown_under_compute"));
  h.interference_assumed = inter.string_or("source", "").rfind("assumption", 0) == 0;
  h.contention.sms = h.sms;
  // The default budget (16) on a machine of few SMs (cpu-host's 2 cores) would leave none.
  if (h.contention.comm_ctas >= h.sms) h.contention.comm_ctas = default_comm_ctas(h.sms);
  h.contention.hbm_gbps = h.memory_bandwidth_gbps * h.memory_efficiency;
  if (o.has("contention")) {
    h.contention = contention_from_json(j.at("contention"), path, "contention", h.contention);
  }
  return h;
}

}  // namespace tpo::sim
