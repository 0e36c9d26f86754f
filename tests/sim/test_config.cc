// Config loading: shipped models and hardware, Hugging Face config.json, and every kind of
// bad input, each reported with the file and the field.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "sim/config_paths.h"
#include "sim/contention.h"
#include "sim/error.h"
#include "sim/hardware.h"
#include "sim/json_io.h"
#include "sim/model.h"
#include "sim/profile_cost.h"
#include "sim/simulate.h"
#include "toy.h"

using namespace tpo::sim;

namespace {
const std::string data = TPO_TEST_DATA;

using tpo::test::error_of;
}  // namespace

TEST_CASE("shipped models carry the published dimensions") {
  const ModelConfig m = load_model("llama2-70b");
  CHECK(m.num_layers == 80);
  CHECK(m.hidden == 8192);
  CHECK(m.heads == 64);
  CHECK(m.kv_heads == 8);
  CHECK(m.head_dim == 128);
  CHECK(m.ffn == 28672);
  CHECK(m.vocab == 32000);
  const ModelConfig q = load_model("qwen2.5-72b");
  CHECK(q.ffn == 29568);
  CHECK(q.vocab == 152064);
  for (const char* name : {"llama-30b", "llama2-70b", "llama3-70b", "llama3.1-8b", "llama3.1-405b",
                           "qwen2.5-72b", "ladder-1b", "ladder-3b"}) {
    CAPTURE(name);
    CHECK_NOTHROW(load_model(name));
    const auto j = tpo::read_json_file(resolve_config("models", name, "model"));
    CHECK(j.contains("source"));
  }
}

TEST_CASE("a Hugging Face config.json is read, with defaults for optional keys") {
  const ModelConfig m = load_model(data + "/hf_llama_config.json");
  CHECK(m.name == "example/tiny-llama");
  CHECK(m.hidden == 2048);
  CHECK(m.kv_heads == 4);
  CHECK(m.head_dim == 64);  // hidden / heads when head_dim is absent
  CHECK(m.num_layers == 22);
  const ModelConfig n = load_model(data + "/hf_no_kv_config.json");
  CHECK(n.kv_heads == 16);  // no num_key_value_heads: multi-head attention
  CHECK(n.head_dim == 80);  // explicit head_dim wins
}

TEST_CASE("the position limit: max_position_embeddings, stretched by rope_scaling's factor") {
  namespace fs = std::filesystem;
  const std::string p =
      (fs::temp_directory_path() / ("tpo_test_rope_" + std::to_string(::getpid()) + ".json"))
          .string();
  auto cfg = tpo::read_json_file(data + "/hf_llama_config.json");
  const auto notes_at = [&](std::int64_t positions) {
    std::ofstream(p) << cfg.dump();
    std::string all;
    for (const auto& n : model_notes(load_model(p), positions)) all += n + "\n";
    return all;
  };
  cfg["max_position_embeddings"] = 32768;
  CHECK(notes_at(32768).empty());
  CHECK(notes_at(32769).find("32769 positions (prompt + context) exceed") != std::string::npos);
  // Qwen's YaRN: 32768 x 4.
  cfg["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}};
  CHECK(notes_at(131072).empty());
  CHECK(notes_at(131073).find("max_position_embeddings with rope_scaling's factor, 131072") !=
        std::string::npos);
  // Llama 3.1: 8192 x 8 from original_max_position_embeddings, within its own 131072.
  cfg["max_position_embeddings"] = 131072;
  cfg["rope_scaling"] = {
      {"rope_type", "llama3"}, {"factor", 8.0}, {"original_max_position_embeddings", 8192}};
  CHECK(notes_at(131072).empty());
  CHECK_FALSE(notes_at(131073).empty());
  cfg["rope_scaling"] = nullptr;
  CHECK(notes_at(131072).empty());
  fs::remove(p);
}

TEST_CASE(
    "a key a letter or two from one tpo reads and the config lacks is said: likely misspelt") {
  namespace fs = std::filesystem;
  const std::string p =
      (fs::temp_directory_path() / ("tpo_test_typo_" + std::to_string(::getpid()) + ".json"))
          .string();
  auto cfg = tpo::read_json_file(data + "/hf_llama_config.json");
  const auto said = [&] {
    std::ofstream(p) << cfg.dump();
    const ModelConfig m = load_model(p);
    std::string all;
    for (const auto& n : m.notes) all += n + "\n";
    return std::pair{m, all};
  };
  CHECK(said().second.find("misspelt") == std::string::npos);
  const std::int64_t kv = cfg["num_key_value_heads"];
  REQUIRE(kv < cfg["num_attention_heads"].get<std::int64_t>());
  // num_key_value_head: the KV heads default to the query heads, and the note says why.
  cfg["num_key_value_head"] = kv;
  cfg.erase("num_key_value_heads");
  auto [m, notes] = said();
  CHECK(m.kv_heads == m.heads);
  CHECK(notes.find("'num_key_value_head' is not a key tpo reads: is it num_key_value_heads "
                   "misspelt?") != std::string::npos);
  // Beside the key it resembles, it is just another key: nothing said.
  cfg["num_key_value_heads"] = kv;
  CHECK(said().second.find("misspelt") == std::string::npos);
  // Two edits away (rope_tetha) still; three (rope_thx) not.
  cfg["rope_tetha"] = 1e6;
  CHECK(said().second.find("'rope_tetha' is not a key tpo reads: is it rope_theta") !=
        std::string::npos);
  cfg.erase("rope_tetha");
  cfg["rope_thx"] = 1e6;
  CHECK(said().second.find("misspelt") == std::string::npos);
  fs::remove(p);
}

TEST_CASE("a config.json without a name is named by its folder, or by its hub cache repository") {
  namespace fs = std::filesystem;
  const fs::path root =
      fs::temp_directory_path() / ("tpo_test_names_" + std::to_string(::getpid()));
  auto cfg = tpo::read_json_file(data + "/hf_llama_config.json");
  cfg.erase("_name_or_path");
  const fs::path plain = root / "my-llama", cached = root / "models--Org--Some-Model" /
                                                     "snapshots" / "453ed1575b739b5b03ce3758";
  for (const fs::path& d : {plain, cached}) {
    fs::create_directories(d);
    std::ofstream(d / "config.json") << cfg.dump();
  }
  CHECK(load_model((plain / "config.json").string()).name == "my-llama");
  CHECK(load_model((cached / "config.json").string()).name == "Org/Some-Model");
  CHECK(load_model((cached / "config.json").string()).folder_name == "453ed1575b739b5b03ce3758");
  // The folder itself reads its config.json.
  CHECK(load_model(cached.string()).name == "Org/Some-Model");
  CHECK(load_model(plain.string() + "/").hidden == 2048);
  // A folder without one is still refused.
  fs::create_directories(root / "empty");
  CHECK(error_of([&] { load_model((root / "empty").string()); }).find("is a folder") !=
        std::string::npos);
  fs::remove_all(root);
}

TEST_CASE("bad model files name the file and the field") {
  auto e = error_of([] { load_model(data + "/bad_malformed.json"); });
  CHECK(e.find("bad_malformed.json") != std::string::npos);
  CHECK(e.find("malformed JSON") != std::string::npos);
  e = error_of([] { load_model(data + "/bad_missing_hidden.json"); });
  CHECK(e.find("bad_missing_hidden.json") != std::string::npos);
  CHECK(e.find("'hidden_size'") != std::string::npos);
  CHECK(e.find("missing") != std::string::npos);
  e = error_of([] { load_model(data + "/bad_heads_string.json"); });
  CHECK(e.find("'num_attention_heads'") != std::string::npos);
  e = error_of([] { load_model(data + "/does_not_exist.json"); });
  CHECK(e.find("does_not_exist.json") != std::string::npos);
  CHECK(e.find("cannot open") != std::string::npos);
  e = error_of([] { load_model(data + "/bad_typo_model.json"); });
  CHECK(e.find("field 'hed_dim': unknown key in a tpo.model/1 file (misspelt? or read by a "
               "newer tpo than this build)") != std::string::npos);
  e = error_of([] { load_model(data + "/hf_moe_config.json"); });
  CHECK(e.find("field 'num_local_experts'") != std::string::npos);
  e = error_of([] { load_model("llama-9000"); });
  CHECK(e.find("model") != std::string::npos);
  CHECK(e.find("llama2-70b") != std::string::npos);  // lists what is shipped
}

TEST_CASE("TP that does not divide the heads is rejected, naming the model field") {
  WorkloadOptions o;
  o.model = data + "/odd_heads_model.json";
  o.hardware = "h100x8";
  o.tp = 4;
  const auto e = error_of([&] { make_workload(o); });
  CHECK(e.find("odd_heads_model.json") != std::string::npos);
  CHECK(e.find("'num_attention_heads'") != std::string::npos);
  o.model = "llama2-70b";
  o.tp = 16;  // one node of 8
  CHECK(error_of([&] { make_workload(o); }).find("field 'tp' = 16") != std::string::npos);
  o.hardware = "h100x16";
  o.tp = 32;  // two nodes of 8
  CHECK(error_of([&] { make_workload(o); }).find("exceeds the GPUs") != std::string::npos);
}

TEST_CASE("every shipped hardware file loads and cites a source for each block of numbers") {
  const auto names = shipped_hardware();
  CHECK(names.size() >= 7);
  for (const auto& name : names) {
    CAPTURE(name);
    const HardwareConfig h = load_hardware(name);
    CHECK(h.sms > 0);
    CHECK(h.intra.busbw_gbps > 0);
    const auto j = tpo::read_json_file(resolve_config("hardware", name, "hardware"));
    for (const char* block : {"gpu", "efficiency", "interference"}) {
      CHECK(j.at(block).contains("source"));
    }
    CHECK(j.at("node").at("link").contains("source"));
    CHECK(j.at("inter_node").contains("source"));
  }
  CHECK(load_hardware("h100x16").max_tp() == 16);
  CHECK(load_hardware("h100x8").max_tp() == 8);
}

TEST_CASE("the contention model's datasheet values and h200x8's memory-bound share") {
  const HardwareConfig h = load_hardware("h200x8");
  CHECK(h.contention.sms == 132);
  CHECK(h.contention.hbm_gbps == doctest::Approx(4800 * 0.83));
  CHECK(h.contention.memory_bound_share == 0.75);
  // Machines without a contention block keep the rule off.
  CHECK(load_hardware("h100x8").contention.memory_bound_share == 0);
  // A machine of 2 SMs (cpu-host's cores) with a contention block that gives no budget: the
  // default of 16 would leave no SM, so half of them (1) is taken; a budget written in the
  // file that leaves none is still an error naming the field.
  auto j = tpo::read_json_file(resolve_config("hardware", "cpu-host", "hardware"));
  j["contention"] = {{"extra_wave", true}};
  const std::string p = (std::filesystem::temp_directory_path() /
                         ("tpo_test_hw_two_sms_" + std::to_string(::getpid()) + ".json"))
                            .string();
  std::ofstream(p) << j.dump();
  CHECK(load_hardware(p).contention.comm_ctas == 1);
  j["contention"]["comm_ctas"] = 2;
  std::ofstream(p) << j.dump();
  CHECK(error_of([&] { load_hardware(p); }).find("'contention.comm_ctas'") != std::string::npos);
  // One SM leaves nothing to share: a contention block there is refused.
  j["contention"].erase("comm_ctas");
  j["gpu"]["sms"] = 1;
  std::ofstream(p) << j.dump();
  CHECK(error_of([&] { load_hardware(p); }).find("at least 2 SMs") != std::string::npos);
  std::filesystem::remove(p);
}

TEST_CASE("error messages show control characters from files as escapes") {
  const std::string name("ab\x1b[2J\0cd", 9);  // ESC, then a NUL that would cut the message
  const std::string msg = tpo::InputError("m.json", "name", "'" + name + "' is odd").what();
  CHECK(msg == "m.json: field 'name': 'ab\\x1b[2J\\x00cd' is odd");
}

TEST_CASE(
    "gpu_model_token: the GPU model in a name, as nvidia-smi and the hardware files give it") {
  using tpo::sim::gpu_model_token;
  // nvidia-smi's names of the lent GPUs, and the shipped files' gpu.name.
  CHECK(gpu_model_token("NVIDIA H100 80GB HBM3") == "H100");
  CHECK(gpu_model_token("NVIDIA H100 SXM5 80GB") == "H100");
  CHECK(gpu_model_token("NVIDIA H200") == "H200");
  CHECK(gpu_model_token("NVIDIA H200 SXM 141GB") == "H200");
  CHECK(gpu_model_token("NVIDIA A100-SXM4-80GB") == "A100");
  CHECK(gpu_model_token("NVIDIA GeForce RTX 4090") == "4090");
  CHECK(gpu_model_token("NVIDIA GH200 480GB") == "GH200");  // not an H200
  CHECK(gpu_model_token("nvidia h100 pcie") == "H100");
  CHECK(gpu_model_token("host CPU (fp32, one core per rank)") == "");
  CHECK(gpu_model_token("") == "");
  // Copied files' names: a count is not the model; a model written with its form factor is it.
  CHECK(gpu_model_token("8x H100 SXM5") == "H100");
  CHECK(gpu_model_token("2x NVIDIA GeForce RTX 4090") == "4090");
  CHECK(gpu_model_token("RTX4090") == "4090");
  CHECK(gpu_model_token("H100SXM5") == "H100");
  // One part, or two: the model and the form factor (PCIe, NVL, else SXM) both count.
  using tpo::sim::same_gpu_model;
  CHECK(same_gpu_model("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM5 80GB"));
  CHECK(same_gpu_model("NVIDIA H200", "NVIDIA H200 SXM 141GB"));
  CHECK(same_gpu_model("NVIDIA GeForce RTX 4090", "2x RTX4090"));
  CHECK_FALSE(same_gpu_model("NVIDIA H200", "NVIDIA H100 SXM5 80GB"));
  CHECK_FALSE(same_gpu_model("NVIDIA GH200 480GB", "NVIDIA H200 SXM 141GB"));
  CHECK_FALSE(same_gpu_model("NVIDIA H200 NVL", "NVIDIA H200 SXM 141GB"));
  CHECK_FALSE(same_gpu_model("NVIDIA H100 PCIe", "NVIDIA H100 SXM5 80GB"));
  CHECK_FALSE(same_gpu_model("NVIDIA A100-PCIE-40GB", "NVIDIA A100-SXM4-80GB"));
  CHECK(same_gpu_model("my accelerator", "NVIDIA H100 SXM5 80GB"));  // no model: nothing to tell
  // Every shipped GPU file names its model.
  for (const auto& name : tpo::sim::shipped_hardware()) {
    const auto h = tpo::sim::load_hardware(name);
    CHECK_MESSAGE(h.is_cpu == gpu_model_token(h.gpu_name).empty(), name);
  }
}

TEST_CASE("bad hardware files name the field") {
  {
    // The attention curve's half-length and the memory-bound share out of range.
    auto h = tpo::read_json_file(resolve_config("hardware", "h200x8", "hardware"));
    const std::string p =
        (std::filesystem::temp_directory_path() / "tpo_test_bad_hw_attn.json").string();
    h["efficiency"]["attention_kv_half"] = -5;
    std::ofstream(p) << h.dump();
    CHECK(error_of([&] { load_hardware(p); }).find("'efficiency.attention_kv_half'") !=
          std::string::npos);
    h["efficiency"]["attention_kv_half"] = 192;
    h["contention"]["memory_bound_share"] = 1.5;
    std::ofstream(p) << h.dump();
    CHECK(error_of([&] { load_hardware(p); }).find("'contention.memory_bound_share'") !=
          std::string::npos);
    std::filesystem::remove(p);
  }
  auto e = error_of([] { load_hardware(data + "/bad_hw_sms.json"); });
  CHECK(e.find("bad_hw_sms.json") != std::string::npos);
  CHECK(e.find("'gpu.sms'") != std::string::npos);
  e = error_of([] { load_hardware(data + "/bad_hw_slowdown.json"); });
  CHECK(e.find("'interference.comm_slowdown_under_compute.gemm'") != std::string::npos);
  e = error_of([] { load_hardware("dgx-9000"); });
  CHECK(e.find("hardware") != std::string::npos);
  // A switch that is not true or false.
  auto j = tpo::read_json_file(resolve_config("hardware", "h200x8", "hardware"));
  j["efficiency"]["l2_in_place_only"] = "yes";
  const std::string path =
      (std::filesystem::temp_directory_path() / "tpo_test_bad_hw_l2.json").string();
  std::ofstream(path) << j.dump();
  e = error_of([&] { load_hardware(path); });
  CHECK(e.find("'efficiency.l2_in_place_only'") != std::string::npos);
  CHECK(e.find("true or false") != std::string::npos);
  std::filesystem::remove(path);
  j["efficiency"]["l2_in_place_only"] = true;
  std::ofstream(path) << j.dump();
  CHECK(load_hardware(path).l2_in_place_only);
  // A file written from a datasheet: every missing field named in one error, not one per run.
  {
    auto d = j;
    d["gpu"].erase("launch_overhead_us");
    d.erase("efficiency");
    d["node"]["link"].erase("busbw_gbps");
    d.erase("interference");
    std::ofstream(path) << d.dump();
    e = error_of([&] { load_hardware(path); });
    CHECK(e.find("field 'gpu.launch_overhead_us': is missing; also missing: "
                 "efficiency.gemm_max, efficiency.gemm_tile_m") != std::string::npos);
    CHECK(e.find("node.link.busbw_gbps, interference.compute_slowdown_under_comm.gemm") !=
          std::string::npos);
    CHECK(e.find("interference.comm_slowdown_under_compute.memory (docs/hardware-file.md") !=
          std::string::npos);
  }
  // Whole blocks missing or of the wrong type: named, never a crash (a missing node block
  // crashed the first version of this check), and a wrong type is reported as such.
  {
    auto d = j;
    d.erase("node");
    std::ofstream(path) << d.dump();
    CHECK(error_of([&] { load_hardware(path); })
              .find("field 'node.gpus_per_node': is missing; also missing: node.link.class, "
                    "node.link.allreduce_latency_us, node.link.busbw_gbps") != std::string::npos);
    d = j;
    d["node"]["link"]["class"] = 5;
    std::ofstream(path) << d.dump();
    CHECK(error_of([&] { load_hardware(path); }).find("'node.link.class': must be a string") !=
          std::string::npos);
    d = j;
    d["gpu"] = 5;
    std::ofstream(path) << d.dump();
    CHECK(error_of([&] { load_hardware(path); }).find("'gpu': must be a JSON object") !=
          std::string::npos);
    std::ofstream(path) << R"({"schema": "tpo.hardware/1"})";
    CHECK(error_of([&] { load_hardware(path); }).find("field 'gpu.name': is missing; also") !=
          std::string::npos);
    // An inter_node block given on one node is read, and checked, like any other link.
    d = j;
    d["inter_node"] = nlohmann::json::object();
    std::ofstream(path) << d.dump();
    CHECK(error_of([&] { load_hardware(path); }).find("field 'inter_node.class': is missing") !=
          std::string::npos);
  }
  // One node needs no inter_node block; more than one does. An empty GPU name is refused.
  {
    auto d = j;
    d.erase("inter_node");
    std::ofstream(path) << d.dump();
    CHECK(load_hardware(path).inter.cls == "none");
    d["nodes"] = 2;
    std::ofstream(path) << d.dump();
    CHECK(error_of([&] { load_hardware(path); }).find("field 'inter_node.class': is missing") !=
          std::string::npos);
    d = j;
    d["gpu"]["name"] = "";
    std::ofstream(path) << d.dump();
    CHECK(error_of([&] { load_hardware(path); }).find("'gpu.name': is empty") != std::string::npos);
  }
  std::filesystem::remove(path);
}

TEST_CASE("a link's published all-reduce table: loaded as given, bad ones name the field") {
  // h100x8 ships two published tables: 4 GPUs (24 sizes from 1 KiB) and 8 GPUs (32 from 8 B).
  const HardwareConfig h = load_hardware("h100x8");
  REQUIRE(h.intra.tables.size() == 2);
  for (const auto& [tab, ranks, sizes, first] : {std::tuple{h.intra.tables[0], 4, 24u, 1024.0},
                                                 std::tuple{h.intra.tables[1], 8, 32u, 8.0}}) {
    CHECK(tab.ranks == ranks);
    CHECK(tab.points.size() == sizes);
    REQUIRE(tab.points.size() >= 2);
    CHECK(tab.points.front().first == first);
    for (std::size_t i = 1; i < tab.points.size(); ++i) {
      CHECK(tab.points[i].first > tab.points[i - 1].first);
    }
  }
  CHECK(h.intra.table_for(4) == &h.intra.tables[0]);
  CHECK(h.intra.table_for(2) == nullptr);
  // The checks below edit one table object: the shipped file's 8-rank one.
  auto j = tpo::read_json_file(resolve_config("hardware", "h100x8", "hardware"));
  j["node"]["link"]["allreduce_table"] = nlohmann::json(j["node"]["link"]["allreduce_table"][1]);
  const std::string p = (std::filesystem::temp_directory_path() /
                         ("tpo_test_hw_table_" + std::to_string(::getpid()) + ".json"))
                            .string();
  auto error_with = [&](const std::function<void(nlohmann::json&)>& edit) {
    auto k = j;
    edit(k["node"]["link"]["allreduce_table"]);
    std::ofstream(p) << k.dump();
    return error_of([&] { load_hardware(p); });
  };
  // More ranks than the node has GPUs.
  auto e = error_with([](nlohmann::json& t) { t["ranks"] = 16; });
  CHECK(e.find("'node.link.allreduce_table.ranks'") != std::string::npos);
  // Sizes out of order, a point that is not [bytes, us], one point, a zero time, a typo.
  e = error_with([](nlohmann::json& t) { t["points"] = {{16, 1.0}, {8, 2.0}}; });
  CHECK(e.find("'node.link.allreduce_table.points[1]'") != std::string::npos);
  CHECK(e.find("ascending") != std::string::npos);
  e = error_with([](nlohmann::json& t) { t["points"] = {{8, 1.0}, {16}}; });
  CHECK(e.find("'node.link.allreduce_table.points[1]'") != std::string::npos);
  e = error_with([](nlohmann::json& t) { t["points"] = {{8, 1.0}}; });
  CHECK(e.find("2 to 64") != std::string::npos);
  e = error_with([](nlohmann::json& t) { t["points"] = {{8, 1.0}, {16, 0.0}}; });
  CHECK(e.find("'node.link.allreduce_table.points[1]'") != std::string::npos);
  e = error_with([](nlohmann::json& t) { t["points"] = {{8, 1.0}, {16.5, 2.0}}; });
  CHECK(e.find("'node.link.allreduce_table.points[1]'") != std::string::npos);
  CHECK(e.find("whole number") != std::string::npos);
  // The times must say where they were published.
  e = error_with([](nlohmann::json& t) { t.erase("source"); });
  CHECK(e.find("'node.link.allreduce_table.source'") != std::string::npos);
  e = error_with([](nlohmann::json& t) { t["source"] = ""; });
  CHECK(e.find("'node.link.allreduce_table.source'") != std::string::npos);
  e = error_with([](nlohmann::json& t) { t["rank"] = 8; });
  CHECK(e.find("'node.link.allreduce_table.rank'") != std::string::npos);
  // A list of tables, one per rank count, ascending: each read at its own rank count.
  {
    auto k = j;
    auto four = j["node"]["link"]["allreduce_table"];
    four["ranks"] = 4;
    k["node"]["link"]["allreduce_table"] = {four, j["node"]["link"]["allreduce_table"]};
    std::ofstream(p) << k.dump();
    const HardwareConfig two = load_hardware(p);
    REQUIRE(two.intra.tables.size() == 2);
    CHECK(two.intra.table_for(4) == &two.intra.tables[0]);
    CHECK(two.intra.table_for(8) == &two.intra.tables[1]);
    CHECK(two.intra.table_for(2) == nullptr);
    // Out of order, twice the same rank count, or an empty list: refused, naming the entry.
    k["node"]["link"]["allreduce_table"] = {j["node"]["link"]["allreduce_table"], four};
    std::ofstream(p) << k.dump();
    CHECK(error_of([&] { load_hardware(p); }).find("'node.link.allreduce_table[1].ranks'") !=
          std::string::npos);
    k["node"]["link"]["allreduce_table"] = {four, four};
    std::ofstream(p) << k.dump();
    CHECK(error_of([&] { load_hardware(p); }).find("ascending order of ranks") !=
          std::string::npos);
    k["node"]["link"]["allreduce_table"] = nlohmann::json::array();
    std::ofstream(p) << k.dump();
    CHECK(error_of([&] { load_hardware(p); }).find("'node.link.allreduce_table'") !=
          std::string::npos);
    four.erase("source");
    k["node"]["link"]["allreduce_table"] = {four, j["node"]["link"]["allreduce_table"]};
    std::ofstream(p) << k.dump();
    CHECK(error_of([&] { load_hardware(p); }).find("'node.link.allreduce_table[0].source'") !=
          std::string::npos);
  }
  // Only the link inside a node carries one.
  auto k = j;
  k["inter_node"]["allreduce_table"] = j["node"]["link"]["allreduce_table"];
  std::ofstream(p) << k.dump();
  CHECK(error_of([&] { load_hardware(p); }).find("'inter_node.allreduce_table'") !=
        std::string::npos);
  std::filesystem::remove(p);
}

TEST_CASE("model coverage: GeGLU with head dim 256 and tied embeddings, Qwen2 biases, refusals") {
  // Gemma: a gated MLP with gelu (GeGLU): the same GEMMs as SwiGLU.
  const ModelConfig g = load_model(data + "/hf_gemma_config.json");
  CHECK(g.activation == ModelConfig::Activation::Gelu);
  CHECK(g.head_dim == 256);
  CHECK(g.tied_embeddings);
  CHECK_FALSE(g.qkv_bias);
  WorkloadOptions o;
  o.model = data + "/hf_gemma_config.json";
  o.hardware = "h100x8";
  o.tp = 8;
  o.seq = 2048;
  o.layers = 2;
  const Workload gw = make_workload(o);
  const Schedule gs = build_schedule(gw, {StrategyKind::None});
  bool saw_qkv = false;
  for (const auto& op : gs.ops) {
    if (op.code != OpCode::Qkv) continue;
    saw_qkv = true;
    CHECK(op.n == (16 / 8 + 2 * 16 / 8) * 256);  // local q + k + v heads x head dim 256
    CHECK_FALSE(op.bias);
  }
  CHECK(saw_qkv);
  // Qwen2: q/k/v carry a bias (real cost: m x n adds, n values read); o_proj and the MLP do not.
  const ModelConfig q = load_model(data + "/hf_qwen2_config.json");
  CHECK(q.qkv_bias);
  CHECK_FALSE(q.o_bias);
  CHECK_FALSE(q.mlp_bias);
  o.model = data + "/hf_qwen2_config.json";
  o.tp = 4;
  const Workload qw = make_workload(o);
  for (const auto& op : build_schedule(qw, {StrategyKind::None}).ops) {
    if (op.kind != OpKind::Gemm) continue;
    const double mnk =
        2.0 * static_cast<double>(op.m) * static_cast<double>(op.n) * static_cast<double>(op.k);
    CHECK(op.bias == (op.code == OpCode::Qkv));
    CHECK(op.flops == mnk + (op.bias ? static_cast<double>(op.m * op.n) : 0.0));
  }
  // Sliding-window attention (Mistral v0.1, 4096 tokens): simulated at any length since
  // 2026-12-03 (refused past the window before; tests/sim/test_window.cc).
  const ModelConfig sw = load_model(data + "/hf_sliding_config.json");
  CHECK(sw.sliding_window == 4096);
  o.model = data + "/hf_sliding_config.json";
  o.tp = 8;
  o.seq = 4097;
  CHECK_NOTHROW(make_workload(o));
  o.phase = "decode";
  o.seq = 1;
  o.context = 8192;
  CHECK_NOTHROW(make_workload(o));
  o.phase = "prefill";
  o.context = -1;
  o.seq = 4096;
  // Mixture of experts: refused, naming the field.
  auto e = error_of([&] { load_model(data + "/hf_moe_config.json"); });
  CHECK(e.find("experts") != std::string::npos);
  // Written as strings, the same keys are refused too (they used to be skipped, and the model
  // simulated as dense with full attention).
  for (const auto& [file, key] : {std::pair{"hf_moe_config.json", "num_local_experts"},
                                  std::pair{"hf_sliding_config.json", "sliding_window"}}) {
    auto j = tpo::read_json_file(data + "/" + file);
    j[key] = j[key].dump();
    const std::string p = (std::filesystem::temp_directory_path() /
                           ("tpo_test_str_" + std::to_string(::getpid()) + std::string(file)))
                              .string();
    std::ofstream(p) << j.dump();
    CHECK(error_of([&] {
            load_model(p);
          }).find(std::string("field '") + key + "': must be a number") != std::string::npos);
    std::filesystem::remove(p);
  }
  // Quantized weights (timed as bf16 before): refused, saying what to give instead.
  {
    const std::string p = (std::filesystem::temp_directory_path() /
                           ("tpo_test_q_" + std::to_string(::getpid()) + ".json"))
                              .string();
    auto j = tpo::read_json_file(data + "/hf_llama_config.json");
    j["quantization_config"] = {{"quant_method", "awq"}, {"bits", 4}};
    std::ofstream(p) << j.dump();
    CHECK(error_of([&] {
            load_model(p);
          }).find("field 'quantization_config': quantized weights (awq quantization_config) are") !=
          std::string::npos);
    j["quantization_config"] = nlohmann::json::object();  // empty: not quantized
    std::ofstream(p) << j.dump();
    CHECK_NOTHROW(load_model(p));
    // A multimodal config: the language model read from text_config (refused before
    // 2026-12-03), with a note; a field it lacks is named there.
    auto mm = nlohmann::json::object();
    mm["model_type"] = "llava";
    mm["torch_dtype"] = "float32";
    mm["text_config"] = tpo::read_json_file(data + "/hf_llama_config.json");
    mm["text_config"].erase("torch_dtype");  // the top level's is read
    mm["text_config"]["head_dim"] = 64;      // a sub-config must give every dimension
    mm["text_config"]["_name_or_path"] = "some/language-model";  // the top level names it
    mm["_name_or_path"] = "some/multimodal-model";
    mm["vision_config"] = {{"hidden_size", 1024}, {"num_hidden_layers", 24}};
    std::ofstream(p) << mm.dump();
    const ModelConfig lm = load_model(p);
    const ModelConfig plain = load_model(data + "/hf_llama_config.json");
    CHECK(lm.num_layers == plain.num_layers);
    CHECK(lm.hidden == plain.hidden);
    CHECK(lm.vocab == plain.vocab);
    int said = 0;
    for (const auto& n : lm.notes) said += n.find("read from") != std::string::npos;
    CHECK(said == 1);
    for (const auto& n : lm.notes) said += n.find("float32") != std::string::npos;
    CHECK(said == 2);  // the top level's torch_dtype still read
    CHECK(lm.name == "some/multimodal-model");
    CHECK(lm.head_dim == 64);
    // A field transformers left out of the sub-config (its class's default) is asked for,
    // not filled in as tpo would (head_dim as hidden / heads); a null hides nothing.
    auto sparse = mm;
    sparse["text_config"].erase("head_dim");
    std::ofstream(p) << sparse.dump();
    CHECK(error_of([&] { load_model(p); }).find("field 'text_config.head_dim': missing") !=
          std::string::npos);
    sparse = mm;
    sparse["vocab_size"] = sparse["text_config"]["vocab_size"];
    sparse["text_config"]["vocab_size"] = nullptr;
    std::ofstream(p) << sparse.dump();
    CHECK(load_model(p).vocab == plain.vocab);  // the top level's
    sparse["text_config"].erase("vocab_size");
    sparse.erase("vocab_size");
    std::ofstream(p) << sparse.dump();
    CHECK(error_of([&] { load_model(p); }).find("field 'text_config.vocab_size': missing") !=
          std::string::npos);
    // Several missing: all named in one message, the first as the field.
    sparse["text_config"].erase("head_dim");
    sparse["text_config"].erase("num_key_value_heads");
    std::ofstream(p) << sparse.dump();
    CHECK(error_of([&] { load_model(p); })
              .find("field 'text_config.num_key_value_heads': missing (and text_config.head_dim, "
                    "text_config.vocab_size): ") != std::string::npos);
    // Other errors about text_config's fields name them there.
    sparse = mm;
    sparse["text_config"]["sliding_window"] = "4096";
    std::ofstream(p) << sparse.dump();
    CHECK(error_of([&] { load_model(p); }).find("field 'text_config.sliding_window': must be") !=
          std::string::npos);
    // Llama-3.2-Vision's text model: cross-attention layers, refused.
    sparse = mm;
    sparse["text_config"]["cross_attention_layers"] = {3, 8, 13};
    std::ofstream(p) << sparse.dump();
    CHECK(error_of([&] {
            load_model(p);
          }).find("field 'text_config.cross_attention_layers': cross-attention") !=
          std::string::npos);
    // A config with its language model at the top level and a vision_config: a note too.
    auto vl = tpo::read_json_file(data + "/hf_llama_config.json");
    vl["vision_config"] = {{"hidden_size", 1024}};
    std::ofstream(p) << vl.dump();
    said = 0;
    for (const auto& n : load_model(p).notes) said += n.find("vision_config") != std::string::npos;
    CHECK(said == 1);
    // Gemma's config classes default to GELU: a config.json without an activation is GeGLU.
    auto gm = tpo::read_json_file(data + "/hf_gemma_config.json");
    gm.erase("hidden_act");
    gm.erase("hidden_activation");
    std::ofstream(p) << gm.dump();
    CHECK(load_model(p).activation == ModelConfig::Activation::Gelu);
    // Multi-head latent attention (MiniCPM3, DeepSeek-V2 without its experts) and a parallel
    // attention + MLP block (Cohere, StableLM's use_parallel_residual) were timed as Llama
    // blocks: refused, naming the field.
    const auto refused = [&](const char* key, const nlohmann::json& value, const char* field,
                             const char* words) {
      auto k = tpo::read_json_file(data + "/hf_llama_config.json");
      k[key] = value;
      std::ofstream(p) << k.dump();
      const std::string err = error_of([&] { load_model(p); });
      CAPTURE(err);
      CHECK(err.find(std::string("field '") + field + "'") != std::string::npos);
      CHECK(err.find(words) != std::string::npos);
    };
    refused("kv_lora_rank", 512, "kv_lora_rank", "multi-head latent attention");
    refused("q_lora_rank", 768, "q_lora_rank", "multi-head latent attention");
    refused("model_type", "cohere", "model_type", "side by side from one norm");
    refused("use_parallel_residual", true, "use_parallel_residual", "side by side");
    refused("parallel_attn", true, "parallel_attn", "side by side");
    // Present but off: modelled.
    auto k = tpo::read_json_file(data + "/hf_llama_config.json");
    k["use_parallel_residual"] = false;
    k["kv_lora_rank"] = nullptr;
    std::ofstream(p) << k.dump();
    CHECK_NOTHROW(load_model(p));
    std::filesystem::remove(p);
  }
}

TEST_CASE("--sm-clock: a locked clock scales the tensor-core rate and nothing else") {
  WorkloadOptions o;
  o.model = "llama3-70b";
  o.hardware = "h100x8";
  o.tp = 8;
  o.seq = 8192;
  o.layers = 1;
  const Workload base = make_workload(o);
  CHECK(base.hardware.peak_clock_mhz == 1830);
  CHECK(base.hardware.sm_clock_mhz == 0);
  o.sm_clock = 915;  // half the clock the peak is quoted at
  const Workload half = make_workload(o);
  CHECK(half.hardware.sm_clock_mhz == 915);
  CHECK(half.hardware.bf16_dense_tflops == doctest::Approx(base.hardware.bf16_dense_tflops / 2));
  CHECK(half.hardware.memory_bandwidth_gbps == base.hardware.memory_bandwidth_gbps);
  CHECK(half.hardware.kernel_overhead_us == base.hardware.kernel_overhead_us);
  // A compute-bound GEMM takes about twice as long (less its fixed per-kernel time); a norm,
  // bound by HBM, the same.
  const auto time_of = [](const Workload& w, OpCode code) {
    const auto cm = make_cost_model(w, "");
    for (const auto& op : build_schedule(w, {StrategyKind::None}).ops) {
      if (op.code == code) return static_cast<double>(cm->standalone_ns(op));
    }
    return 0.0;
  };
  const double gemm = time_of(base, OpCode::GateUp), gemm_half = time_of(half, OpCode::GateUp);
  REQUIRE(gemm > 0);
  CHECK(gemm_half / gemm > 1.9);
  CHECK(gemm_half / gemm < 2.0);
  CHECK(time_of(half, OpCode::AttnNorm) == time_of(base, OpCode::AttnNorm));
  CHECK(time_of(half, OpCode::Attention) > 1.5 * time_of(base, OpCode::Attention));
  // Refused, naming the flag: no clock to scale from, a CPU, a measured profile, out of range.
  o.sm_clock = 5000;
  CHECK(error_of([&] { make_workload(o); }).find("between 100 and 2745 MHz") != std::string::npos);
  o.sm_clock = -1;
  CHECK(error_of([&] { make_workload(o); }).find("field 'sm_clock' = -1") != std::string::npos);
  o.sm_clock = 1600;
  {
    // A measured profile's compute times are its GPU's clock's: refused when the cost model is
    // made (a profile of all-reduces only is taken; the CLI test has one).
    WorkloadOptions po = o;
    po.model = "llama2-70b";
    po.hardware = "h200x8";
    po.profile = data + "/../../configs/profiles/h200-llama2-70b-tp8.json";
    const Workload pw = make_workload(po);
    CHECK(error_of([&] {
            make_cost_model(pw, po.profile);
          }).find("were measured at its GPU's own clock") != std::string::npos);
  }
  o.profile.clear();
  o.hardware = "cpu-host";
  o.model = "llama3.1-8b";
  o.tp = 2;
  CHECK(error_of([&] { make_workload(o); }).find("is a CPU") != std::string::npos);
  const std::string p = (std::filesystem::temp_directory_path() /
                         ("tpo_test_hw_noclock_" + std::to_string(::getpid()) + ".json"))
                            .string();
  auto j = tpo::read_json_file(resolve_config("hardware", "h100x8", "hardware"));
  j["gpu"].erase("peak_clock_mhz");
  std::ofstream(p) << j.dump();
  o.hardware = p;
  o.model = "llama3-70b";
  o.tp = 8;
  CHECK(error_of([&] { make_workload(o); }).find("add gpu.peak_clock_mhz") != std::string::npos);
  std::filesystem::remove(p);
}

TEST_CASE("rms_norm_eps: read where a config has it (1e-6 where not), a bad one named") {
  const std::string p = (std::filesystem::temp_directory_path() /
                         ("tpo_test_eps_" + std::to_string(::getpid()) + ".json"))
                            .string();
  auto cfg = tpo::read_json_file(data + "/hf_llama_config.json");
  const auto load = [&] {
    std::ofstream(p) << cfg.dump();
    return load_model(p);
  };
  cfg.erase("rms_norm_eps");
  CHECK(load().rms_norm_eps == 1e-6);  // transformers' default for Llama-style configs
  cfg["rms_norm_eps"] = 1e-5;
  CHECK(load().rms_norm_eps == 1e-5);
  for (const nlohmann::json& bad :
       {nlohmann::json(0), nlohmann::json(-1e-6), nlohmann::json("1e-6"), nlohmann::json(0.5)}) {
    cfg["rms_norm_eps"] = bad;
    CAPTURE(bad.dump());
    CHECK(error_of([&] { load(); }).find("field 'rms_norm_eps'") != std::string::npos);
  }
  // A tpo.model/1 file may give it too; the shipped ones carry their config.json's.
  CHECK(load_model("qwen2.5-72b").rms_norm_eps == 1e-6);
  // An odd head (hidden_size / heads) is named as what it is, not as the rotary factor; an
  // 8-bit checkpoint type is noted (timed as 16-bit).
  cfg["rms_norm_eps"] = 1e-6;
  cfg["hidden_size"] = 4000;
  cfg["num_attention_heads"] = 32;
  cfg["num_key_value_heads"] = 8;
  cfg.erase("head_dim");
  CHECK(error_of([&] { load(); })
            .find("field 'hidden_size': gives a head_dim of 125 (hidden_size / "
                  "num_attention_heads), an odd number") != std::string::npos);
  cfg["head_dim"] = 125;
  CHECK(error_of([&] { load(); }).find("field 'head_dim': gives a head_dim of 125, an odd") !=
        std::string::npos);
  cfg["hidden_size"] = 4096;
  cfg["head_dim"] = 128;
  cfg["torch_dtype"] = "float8_e4m3fn";
  bool noted = false;
  for (const auto& n : load().notes)
    noted = noted || n.find("is float8_e4m3fn") != std::string::npos;
  CHECK(noted);
  CHECK(load_model("llama3.1-8b").rms_norm_eps == 1e-5);
  std::filesystem::remove(p);
}

TEST_CASE("rotary embeddings: rope_theta and partial_rotary_factor, top level or rope_parameters") {
  const std::string p = (std::filesystem::temp_directory_path() /
                         ("tpo_test_rotary_" + std::to_string(::getpid()) + ".json"))
                            .string();
  auto cfg = tpo::read_json_file(data + "/hf_llama_config.json");  // head_dim 64
  const auto load = [&] {
    std::ofstream(p) << cfg.dump();
    return load_model(p);
  };
  // transformers' defaults: theta 10000, the whole head rotated.
  ModelConfig m = load();
  CHECK(m.rotary_dim == 64);
  CHECK(m.rope_theta == 10000.0);
  cfg["rope_theta"] = 500000.0;
  cfg["partial_rotary_factor"] = 0.25;
  m = load();
  CHECK(m.rope_theta == 500000.0);
  CHECK(m.rotary_dim == 16);
  // transformers 5 moves them into rope_parameters; the top level wins where both are given.
  cfg.erase("rope_theta");
  cfg.erase("partial_rotary_factor");
  cfg["rope_parameters"] = {
      {"rope_type", "default"}, {"rope_theta", 1e6}, {"partial_rotary_factor", 0.5}};
  m = load();
  CHECK(m.rope_theta == 1e6);
  CHECK(m.rotary_dim == 32);
  cfg["rope_theta"] = 20000.0;
  CHECK(load().rope_theta == 20000.0);
  // int(64 x 0.3) = 19 values: an odd count (transformers rounds it up with other angles) is
  // refused, naming the field it came from.
  cfg["partial_rotary_factor"] = 0.3;
  CHECK(error_of([&] { load(); })
            .find("field 'partial_rotary_factor': rotates 19 of head_dim's 64 "
                  "values, an odd number") != std::string::npos);
  cfg.erase("partial_rotary_factor");
  cfg["rope_parameters"]["partial_rotary_factor"] = 0.3;
  CHECK(error_of([&] { load(); }).find("field 'rope_parameters.partial_rotary_factor'") !=
        std::string::npos);
  cfg["rope_parameters"].erase("partial_rotary_factor");
  // Keyed by layer type (transformers 5's Gemma-3): the full-attention layers' theta.
  cfg.erase("rope_theta");
  cfg["rope_parameters"] = {{"full_attention", {{"rope_theta", 1e6}}},
                            {"sliding_attention", {{"rope_theta", 1e4}}}};
  CHECK(load().rope_theta == 1e6);
  cfg["rope_parameters"]["full_attention"]["rope_theta"] = -1;
  CHECK(error_of([&] { load(); }).find("field 'rope_parameters.full_attention.rope_theta'") !=
        std::string::npos);
  cfg.erase("rope_parameters");
  cfg["partial_rotary_factor"] = 0.25;
  CHECK(load().rotary_dim == 16);
  // Per-head query and key norms: Qwen3's and Gemma-3's, by model type (their configs have no
  // key for them); a tpo.model/1 file says qk_norm. The note that tpo did not time them is gone.
  CHECK_FALSE(load().qk_norm);
  for (const char* type : {"qwen3", "gemma3_text"}) {
    cfg["model_type"] = type;
    if (std::string(type) == "gemma3_text") cfg["hidden_activation"] = "gelu_pytorch_tanh";
    const ModelConfig q = load();
    CHECK(q.qk_norm);
    // Without rope_theta, transformers' Gemma-3 text config's 1e6, others' 10000.
    CHECK(q.rope_theta == (std::string(type) == "gemma3_text" ? 1e6 : 10000.0));
    for (const auto& n : q.notes) CHECK(n.find("q_norm") == std::string::npos);
  }
  cfg.erase("hidden_activation");
  cfg["model_type"] = "llama";
  cfg["qk_layernorm"] = true;  // StableLM's name for them
  CHECK(load().qk_norm);
  cfg.erase("qk_layernorm");
  // Gemma 3n's layers are not modelled: refused, naming the field.
  cfg["model_type"] = "gemma3n_text";
  CHECK(error_of([&] { load(); }).find("field 'model_type': 'gemma3n_text' (Gemma 3n)") !=
        std::string::npos);
  cfg["model_type"] = "llama";
  // Gemma's post-norms: Gemma-2 and Gemma-3 by type; post_norms in a tpo.model/1 file.
  CHECK_FALSE(load().post_norms);
  for (const char* type : {"gemma2", "gemma3_text"}) {
    cfg["model_type"] = type;
    cfg["hidden_activation"] = "gelu_pytorch_tanh";
    CHECK(load().post_norms);
    cfg["post_norms"] = false;  // said otherwise, it wins
    CHECK_FALSE(load().post_norms);
    cfg.erase("post_norms");
  }
  cfg.erase("hidden_activation");
  cfg["model_type"] = "llama";
  // Bad values name the file and the field.
  cfg["partial_rotary_factor"] = 1.5;
  CHECK(error_of([&] { load(); }).find("field 'partial_rotary_factor': must be above 0") !=
        std::string::npos);
  cfg.erase("partial_rotary_factor");
  cfg["rope_parameters"]["partial_rotary_factor"] = "half";
  CHECK(error_of([&] {
          load();
        }).find("field 'rope_parameters.partial_rotary_factor': must be a number") !=
        std::string::npos);
  cfg["rope_parameters"].erase("partial_rotary_factor");
  cfg["rope_theta"] = 0.5;
  const std::string e = error_of([&] { load(); });
  CHECK(e.find(p) != std::string::npos);
  CHECK(e.find("field 'rope_theta': must be a number above 1") != std::string::npos);
  std::filesystem::remove(p);
}
