// Config reading with precise error messages (file + dotted field path).
#include "sim/json_io.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include "sim/bounds.h"
#include "sim/error.h"

namespace tpo {

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path, "", "cannot open file (does it exist and is it readable?)");
  std::stringstream ss;
  ss << in.rdbuf();
  // Duplicate keys (the last would silently win) and absurd nesting are errors.
  constexpr int kMaxDepth = 64;
  std::vector<std::vector<std::string>> keys;  // per open object
  std::string problem;
  auto cb = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (!problem.empty()) return true;
    if (depth > kMaxDepth) {
      problem = "nested deeper than " + std::to_string(kMaxDepth) + " levels";
    } else if (event == E::object_start) {
      keys.emplace_back();
    } else if (event == E::object_end && !keys.empty()) {
      keys.pop_back();
    } else if (event == E::key && !keys.empty()) {
      const std::string k = parsed.get<std::string>();
      auto& seen = keys.back();
      if (std::find(seen.begin(), seen.end(), k) != seen.end()) {
        problem = "key '" + k + "' appears twice in one object (which one is meant?)";
      }
      seen.push_back(k);
    }
    return true;
  };
  try {
    nlohmann::json j = nlohmann::json::parse(ss.str(), cb);
    if (!problem.empty()) throw InputError(path, "", problem);
    return j;
  } catch (const nlohmann::json::exception& e) {  // syntax, number overflow (1e999), ...
    if (!problem.empty()) throw InputError(path, "", problem);
    throw InputError(path, "", std::string("malformed JSON: ") + e.what());
  }
}

JsonObject::JsonObject(const nlohmann::json& j, std::string file, std::string path)
    : j_(j), file_(std::move(file)), path_(std::move(path)) {
  if (!j_.is_object()) {
    throw InputError(file_, path_.empty() ? "(top level)" : path_, "must be a JSON object");
  }
}

std::string JsonObject::field(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

bool JsonObject::has(const std::string& key) const {
  return j_.contains(key) && !j_.at(key).is_null();
}

const nlohmann::json& JsonObject::get(const std::string& key) const {
  if (!has(key)) throw InputError(file_, field(key), "is missing");
  return j_.at(key);
}

JsonObject JsonObject::object(const std::string& key) const {
  return JsonObject(get(key), file_, field(key));
}

std::string JsonObject::string(const std::string& key) const {
  const auto& v = get(key);
  if (!v.is_string()) throw InputError(file_, field(key), "must be a string");
  return v.get<std::string>();
}

std::string JsonObject::string_or(const std::string& key, const std::string& fallback) const {
  return has(key) ? string(key) : fallback;
}

double JsonObject::number(const std::string& key, bool positive) const {
  const auto& v = get(key);
  if (!v.is_number()) {
    throw InputError(file_, field(key), "must be a number, got " + std::string(v.type_name()));
  }
  const double x = v.get<double>();
  if (!std::isfinite(x)) throw InputError(file_, field(key), "must be finite");
  check_bound(file_, field(key), x);
  if (positive && !(x > 0)) {
    throw InputError(file_, field(key), "must be > 0, got " + v.dump());
  }
  if (!positive && x < 0) throw InputError(file_, field(key), "must be >= 0, got " + v.dump());
  return x;
}

double JsonObject::number_or(const std::string& key, double fallback, bool positive) const {
  return has(key) ? number(key, positive) : fallback;
}

std::int64_t JsonObject::integer(const std::string& key) const {
  const auto& v = get(key);
  if (!v.is_number_integer() &&
      !(v.is_number_float() && std::floor(v.get<double>()) == v.get<double>())) {
    throw InputError(file_, field(key), "must be an integer, got " + v.dump());
  }
  // Beyond 2^53 an integer is not exact in a double, and no count tpo reads is that large.
  constexpr double kMax = 9007199254740992.0;
  const double d = v.get<double>();
  if (!(std::fabs(d) <= kMax) ||
      (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(kMax))) {
    throw InputError(file_, field(key), "is too large, got " + v.dump());
  }
  const auto x =
      v.is_number_integer() ? v.get<std::int64_t>() : static_cast<std::int64_t>(v.get<double>());
  if (x <= 0) throw InputError(file_, field(key), "must be a positive integer, got " + v.dump());
  check_bound(file_, field(key), static_cast<double>(x));
  return x;
}

std::int64_t JsonObject::integer_or(const std::string& key, std::int64_t fallback) const {
  return has(key) ? integer(key) : fallback;
}

std::int64_t JsonObject::count_or(const std::string& key, std::int64_t fallback) const {
  if (!has(key)) return fallback;
  const auto& v = get(key);
  if (v.is_number_integer() && v.get<std::int64_t>() == 0) return 0;
  return integer(key);
}

}  // namespace tpo

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <atomic>
#include <filesystem>

namespace tpo {

namespace {
// A scratch name beside `path` no other file or run uses: path.tmp.PID.N.
std::string temp_name(const std::string& path) {
  static std::atomic<int> n{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(n++);
}
}  // namespace

void check_writable(const std::string& path, const std::string& option) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw InputError(option, path, "folder '" + dir.string() + "' does not exist");
  }
  if (fs::is_directory(p, ec)) throw InputError(option, path, "is a folder, give a file name");
  // Try the very temporary file the final write will use, so an unwritable place fails now,
  // before any work and before any other output is written.
  const std::string tmp = temp_name(path);
  {
    std::ofstream probe(tmp, std::ios::binary | std::ios::trunc);
    if (!probe) throw InputError(option, path, "cannot be written (permissions?)");
  }
  fs::remove(tmp, ec);
}

void write_file_atomic(const std::string& path, const std::string& content,
                       const std::string& option) {
  check_writable(path, option);
  const std::string tmp = temp_name(path);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(option, path, "cannot open for writing");
    out << content;
    out.flush();
    if (!out) {
      std::filesystem::remove(tmp);
      throw InputError(option, path, "write failed (disk full?)");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    throw InputError(option, path, "cannot rename into place: " + ec.message());
  }
}

void check_distinct_outputs(const std::vector<std::pair<std::string, std::string>>& outputs) {
  namespace fs = std::filesystem;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    for (std::size_t j = i + 1; j < outputs.size(); ++j) {
      const auto& [a, oa] = outputs[i];
      const auto& [b, ob] = outputs[j];
      if (a.empty() || b.empty()) continue;
      if (fs::weakly_canonical(a) == fs::weakly_canonical(b)) {
        throw InputError(ob, b, "is also given to " + oa + "; one would overwrite the other");
      }
    }
  }
}

OutputSet::~OutputSet() {
  std::error_code ec;
  for (const auto& p : pending_) std::filesystem::remove(p.tmp, ec);
}

void OutputSet::add(const std::string& path, const std::string& content,
                    const std::string& option) {
  if (path.empty()) return;
  check_writable(path, option);
  const std::string tmp = temp_name(path);
  pending_.push_back({path, tmp, option});
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw InputError(option, path, "cannot open for writing");
  std::size_t done = 0;
  bool ok = true;
  while (ok && done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (!(n < 0 && errno == EINTR)) {
      ok = false;
    }
  }
  ok = ok && ::fsync(fd) == 0;
  ok = (::close(fd) == 0) && ok;
  if (!ok) throw InputError(option, path, "write failed (disk full?); no output was changed");
}

void OutputSet::commit() {
  for (std::size_t i = 0; i < pending_.size(); ++i) {
    std::error_code ec;
    std::filesystem::rename(pending_[i].tmp, pending_[i].path, ec);
    if (ec) {
      throw InputError(pending_[i].option, pending_[i].path,
                       "cannot rename into place: " + ec.message());
    }
    pending_[i].tmp.clear();
  }
  pending_.clear();
}

}  // namespace tpo
