// Config reading with precise error messages (file + dotted field path).
#include "sim/json_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "sim/bounds.h"
#include "sim/error.h"

namespace tpo {

namespace {
// The regular files this process has read as inputs: (device, inode).
std::mutex g_inputs_mutex;
std::vector<std::pair<dev_t, ino_t>> g_inputs;

void note_input(const std::string& path) {
  struct stat st = {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  const std::lock_guard<std::mutex> lock(g_inputs_mutex);
  const std::pair<dev_t, ino_t> id{st.st_dev, st.st_ino};
  if (std::find(g_inputs.begin(), g_inputs.end(), id) == g_inputs.end()) g_inputs.push_back(id);
}

// A file named in a config reads "path: ...", one given to an option "--opt path: ...".
[[noreturn]] void input_fail(const std::string& path, const std::string& option,
                             const std::string& what) {
  if (option.empty()) throw InputError(path, "", what);
  throw InputError(option, path, what);
}
}  // namespace

void check_input_file(const std::string& path, const std::string& option) {
  auto fail = [&](const std::string& what) { input_fail(path, option, what); };
  if (path.empty()) {
    throw InputError(option.empty() ? "(a file name)" : option, "", "is empty: give a file name");
  }
  struct stat st = {};
  if (::stat(path.c_str(), &st) != 0) {
    fail(std::string("cannot open file (") + std::strerror(errno) +
         "; does it exist and is it readable?)");
  }
  if (S_ISDIR(st.st_mode)) fail("is a folder, not a file");
  // Regular files, and pipes (/dev/stdin, <(...)) and character devices read up to the limit.
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode)) {
    fail("is not a file tpo can read (a block device or a socket)");
  }
  if (S_ISREG(st.st_mode) && st.st_size > kMaxInputFileBytes) {
    fail("is " + std::to_string(st.st_size >> 20) + " MiB; tpo reads files of at most " +
         std::to_string(kMaxInputFileBytes >> 20) + " MiB");
  }
}

std::string read_input_file(const std::string& path, const std::string& option) {
  check_input_file(path, option);
  auto fail = [&](const std::string& what) { input_fail(path, option, what); };
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open file (does it exist and is it readable?)");
  // Read in blocks up to the limit: a device such as /dev/zero never ends.
  std::string text;
  std::vector<char> block(1 << 16);
  while (in.read(block.data(), static_cast<std::streamsize>(block.size())) || in.gcount() > 0) {
    text.append(block.data(), static_cast<std::size_t>(in.gcount()));
    if (static_cast<long long>(text.size()) > kMaxInputFileBytes) {
      fail("is larger than " + std::to_string(kMaxInputFileBytes >> 20) +
           " MiB, the most tpo reads");
    }
  }
  if (in.bad()) fail("could not be read");
  note_input(path);
  return text;
}

void refuse_output_over_read_input(const std::string& path, const std::string& option) {
  struct stat st = {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  const std::lock_guard<std::mutex> lock(g_inputs_mutex);
  const std::pair<dev_t, ino_t> id{st.st_dev, st.st_ino};
  if (std::find(g_inputs.begin(), g_inputs.end(), id) != g_inputs.end()) {
    throw InputError(option, path,
                     "is a file this command read as an input (a model, hardware, profile, plan "
                     "or report it names); writing it would replace that input: give another "
                     "file name");
  }
}

nlohmann::json read_json_file(const std::string& path) {
  std::stringstream ss(read_input_file(path, ""));
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

void JsonObject::only_keys(std::initializer_list<const char*> known,
                           const std::string& what) const {
  for (const auto& item : j_.items()) {
    const std::string& key = item.key();  // a named reference: clang 14 cannot capture bindings
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return key == k; })) {
      throw InputError(file_, field(key), "unknown key in " + what + " (misspelt?)");
    }
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
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <atomic>
#include <cctype>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

namespace tpo {

namespace {
// This machine's name as it appears in scratch names: letters, digits and '-' only.
const std::string& host_tag() {
  static const std::string tag = [] {
    char h[256] = {};
    if (::gethostname(h, sizeof h - 1) != 0 || h[0] == 0) return std::string("host");
    std::string t(h);
    for (char& c : t) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '-';
    }
    return t;
  }();
  return tag;
}

// The start of every scratch name beside `path`: path.tmp.HOST. The file name part is cut so
// that the whole scratch name (with PID.N, at most 22 more bytes) stays within the file
// system's 255-byte limit: a valid long output name must not fail after all the work is done.
std::string temp_prefix(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  std::string name = p.filename().string();
  const std::string tail = ".tmp." + host_tag() + ".";
  constexpr std::size_t kNameMax = 255, kPidAndCount = 22;
  const std::size_t room = kNameMax > tail.size() + kPidAndCount + 16
                               ? kNameMax - tail.size() - kPidAndCount
                               : std::size_t{16};
  if (name.size() > room) name.resize(room);
  return (p.has_parent_path() ? (p.parent_path() / name).string() : name) + tail;
}

// A scratch name beside `path` no other file or run uses: path.tmp.HOST.PID.N.
std::string temp_name(const std::string& path) {
  static std::atomic<int> n{0};
  return temp_prefix(path) + std::to_string(::getpid()) + "." + std::to_string(n++);
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 10 && s.find_first_not_of("0123456789") == std::string::npos;
}

// Removes scratch files path.tmp.HOST.PID.N that runs on this machine left when they were
// killed: regular files whose name matches exactly and whose process no longer exists.
void remove_stale_temps(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const std::string prefix = fs::path(temp_prefix(path)).filename().string();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || !e.is_regular_file(ec)) continue;
    const std::string rest = name.substr(prefix.size());  // PID.N
    const auto dot = rest.find('.');
    if (dot == std::string::npos || !all_digits(rest.substr(0, dot)) ||
        !all_digits(rest.substr(dot + 1))) {
      continue;
    }
    const long long pid = std::stoll(rest.substr(0, dot));
    if (pid <= 0 || pid > (1 << 22) || pid == ::getpid()) continue;  // 2^22: Linux's pid_max
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) fs::remove(e.path(), ec);
  }
}

bool write_all(int fd, const std::string& content) {
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
    } else if (!(n < 0 && errno == EINTR)) {
      return false;
    }
  }
  return true;
}

// Defers the signals a user sends to stop a run (Ctrl-C, kill, hang-up) while alive: whichever
// thread receives one only records it (handlers are process-wide, unlike a signal mask); it
// is raised again, under the previous handling, once the outputs are all in place.
volatile std::sig_atomic_t g_deferred_signal = 0;
extern "C" void record_signal(int sig) {
  g_deferred_signal = sig;
}
class DeferSignals {
 public:
  DeferSignals() {
    struct sigaction sa = {};
    sa.sa_handler = record_signal;
    sigemptyset(&sa.sa_mask);
    for (std::size_t i = 0; i < kCount; ++i) ::sigaction(kSignals[i], &sa, &old_[i]);
  }
  ~DeferSignals() {
    for (std::size_t i = 0; i < kCount; ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
    if (const int sig = g_deferred_signal) {
      g_deferred_signal = 0;
      std::raise(sig);
    }
  }
  DeferSignals(const DeferSignals&) = delete;
  DeferSignals& operator=(const DeferSignals&) = delete;

 private:
  static constexpr std::size_t kCount = 4;
  static constexpr int kSignals[kCount] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
  struct sigaction old_[kCount] = {};
};
}  // namespace

// A symbolic link is followed, so its target file is replaced and the link kept (a rename
// over the link itself would replace the link). A path that exists and is not a regular file
// (/dev/stdout, /dev/null, a FIFO) is written in place: renaming a file over it would replace
// the device node or the pipe with a file.
OutputTarget output_target(const std::string& path, const std::string& option) {
  namespace fs = std::filesystem;
  if (path.empty()) throw InputError(option, path, "is empty: give a file name");
  // This process's own descriptors are written through the descriptor itself: a shell's
  // `>> file` keeps appending and `> file` its place (reopening the path would start at 0,
  // and a rename would replace the very file the shell opened).
  // `-` is standard output (the command's text summary then goes to standard error).
  if (path == "-" || path == "/dev/stdout") return {path, true, 1};
  if (path == "/dev/stderr") return {path, true, 2};
  for (const std::string prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    if (path.rfind(prefix, 0) == 0 && all_digits(path.substr(prefix.size()))) {
      return {path, true, std::stoi(path.substr(prefix.size()))};
    }
  }
  struct stat st = {};
  if (::stat(path.c_str(), &st) == 0) {  // follows links
    if (S_ISDIR(st.st_mode)) throw InputError(option, path, "is a folder, give a file name");
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return {path, true};
    if (!S_ISREG(st.st_mode)) {
      throw InputError(option, path, "is not a file tpo writes (a block device or a socket)");
    }
    struct stat lst = {};
    if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
      std::error_code ec;
      const fs::path real = fs::canonical(path, ec);
      if (!ec) return {real.string(), false};
    }
    return {path, false};
  }
  // Missing, or a link to a missing file: the file is made where the links lead.
  fs::path cur(path);
  for (int hops = 0; hops < 40; ++hops) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(cur, ec))) return {cur.string(), false};
    const fs::path next = fs::read_symlink(cur, ec);
    if (ec) return {cur.string(), false};
    cur = next.is_absolute() ? next : cur.parent_path() / next;
  }
  throw InputError(option, path, "too many levels of symbolic links");
}

std::string output_name(const std::string& path) {
  try {
    const OutputTarget t = output_target(path, "");
    if (t.fd == 1) return "standard output";
    if (t.fd == 2) return "standard error";
  } catch (const InputError&) {
  }
  return path;
}

std::string output_for_hint(const std::string& path) {
  const std::string name = output_name(path);
  return name == path ? path : "FILE (what went to " + name + ", saved)";
}

namespace {
// check_writable for a target already resolved (`given` is what the user wrote).
void check_target_writable(const OutputTarget& target, const std::string& given,
                           const std::string& option) {
  namespace fs = std::filesystem;
  if (target.fd >= 0) {
    if (::fcntl(target.fd, F_GETFL) < 0) throw InputError(option, given, "is not open");
    return;
  }
  if (target.direct) {
    if (::access(target.path.c_str(), W_OK) != 0) {
      throw InputError(option, given, "cannot be written (permissions?)");
    }
    return;
  }
  const std::string& path = target.path;
  const fs::path p(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw InputError(option, path, "folder '" + dir.string() + "' does not exist");
  }
  if (fs::is_directory(p, ec)) throw InputError(option, path, "is a folder, give a file name");
#ifdef O_TMPFILE
  // Try a file in the folder now, so an unwritable place fails before any work and before any
  // other output is written. An unnamed file (O_TMPFILE) where the file system has them: it
  // leaves nothing behind even if the process is killed right here. Elsewhere the very
  // temporary file the final write will use, removed at once (a run killed between the two
  // leaves it; the next run that writes this output removes it).
  const int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  if (fd >= 0) {
    ::close(fd);
    return;
  }
  if (errno == EACCES || errno == EROFS || errno == EPERM) {
    throw InputError(option, path, "cannot be written (permissions?)");
  }
#endif
  const std::string tmp = temp_name(path);
  {
    std::ofstream probe(tmp, std::ios::binary | std::ios::trunc);
    if (!probe) throw InputError(option, path, "cannot be written (permissions?)");
  }
  fs::remove(tmp, ec);
}

}  // namespace

void check_writable(const std::string& given, const std::string& option) {
  check_target_writable(output_target(given, option), given, option);
}

void write_file_atomic(const std::string& path, const std::string& content,
                       const std::string& option) {
  OutputSet out;
  out.add(path, content, option);
  out.commit();
}

std::string file_digest(const std::string& path, const std::string& option) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : read_input_file(path, option)) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

void check_distinct_outputs(const std::vector<std::pair<std::string, std::string>>& outputs) {
  namespace fs = std::filesystem;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    for (std::size_t j = i + 1; j < outputs.size(); ++j) {
      const auto& [a, oa] = outputs[i];
      const auto& [b, ob] = outputs[j];
      if (a.empty() || b.empty()) continue;
      // Where each really goes (through links); streams and devices may be shared.
      const OutputTarget ta = output_target(a, oa), tb = output_target(b, ob);
      if (ta.fd >= 0 && ta.fd == tb.fd) {
        throw InputError(ob, b,
                         "is also given to " + oa + "; both would be written to the same " +
                             (ta.fd == 1   ? std::string("standard output")
                              : ta.fd == 2 ? std::string("standard error")
                                           : "descriptor " + std::to_string(ta.fd)) +
                             ", one after the other");
      }
      if (ta.direct || tb.direct) continue;
      // Absolute first: weakly_canonical keeps a path relative when no part of it exists yet.
      if (fs::weakly_canonical(fs::absolute(ta.path)) ==
          fs::weakly_canonical(fs::absolute(tb.path))) {
        throw InputError(ob, b, "is also given to " + oa + "; one would overwrite the other");
      }
    }
  }
}

OutputSet::~OutputSet() {
  std::error_code ec;
  for (const auto& p : pending_) {
    if (p.fd >= 0) ::close(p.fd);
    if (!p.tmp.empty()) std::filesystem::remove(p.tmp, ec);
  }
}

// The content goes to an unnamed file in the output's folder (O_TMPFILE: a run killed before
// commit leaves nothing behind), or, where the file system cannot do that, to a named
// temporary beside the output.
void OutputSet::add(const std::string& given, const std::string& content, const std::string& option,
                    bool replaces_input) {
  if (given.empty()) return;
  const OutputTarget target = output_target(given, option);
  check_target_writable(target, given, option);
  if (!replaces_input && !target.direct) refuse_output_over_read_input(target.path, option);
  if (target.direct) {  // written at commit, before any rename
    pending_.push_back(Pending{target.path, "", option, -1, true, content, target.fd});
    return;
  }
  const std::string& path = target.path;
  remove_stale_temps(path);
  namespace fs = std::filesystem;
  const fs::path p(path);
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : std::string(".");
  Pending pe{path, "", option, -1, false, {}, -1};
#ifdef O_TMPFILE
  // Naming it at commit goes through /proc/self/fd; without /proc, a named temporary.
  static const bool proc_fd = ::access("/proc/self/fd", F_OK) == 0;
  if (proc_fd) pe.fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
#endif
  if (pe.fd < 0) {
    pe.tmp = temp_name(path);
    pe.fd = ::open(pe.tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  pending_.push_back(pe);
  Pending& q = pending_.back();
  if (q.fd < 0) throw InputError(option, path, "cannot open for writing");
  bool ok = write_all(q.fd, content) && ::fsync(q.fd) == 0;
  if (!q.tmp.empty()) {  // a named temporary is complete: close it now
    ok = (::close(q.fd) == 0) && ok;
    q.fd = -1;
  }
  if (!ok) throw InputError(option, path, "write failed (disk full?); no output was changed");
}

// Every output is already written and flushed; what is left takes microseconds: name each
// unnamed file (linkat through /proc/self/fd), then rename all into place, with stop signals
// held back so that Ctrl-C or kill cannot leave a mixed set (SIGKILL cannot be held back).
void OutputSet::commit() {
  // Outputs that are not regular files (/dev/stdout, a FIFO) first: they cannot be renamed
  // into place, so a failed write there (/dev/full) still leaves every file of the set as it
  // was. Not under DeferSignals: a pipe whose reader stopped reading must stay stoppable.
  std::cout.flush();  // what the command printed comes before what goes to a shared stdout
  for (auto& p : pending_) {
    if (!p.direct) continue;
    const int fd =
        p.own_fd >= 0 ? ::dup(p.own_fd) : ::open(p.path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
      throw InputError(p.option, p.path,
                       std::string("cannot open for writing: ") + std::strerror(errno));
    }
    const bool ok = write_all(fd, p.content);
    const int write_errno = errno;
    const bool closed = ::close(fd) == 0;
    if (!ok || !closed) {
      throw InputError(p.option, p.path,
                       std::string("write failed: ") + std::strerror(ok ? errno : write_errno));
    }
    p.content.clear();
  }
  DeferSignals hold;
  for (auto& p : pending_) {
    if (p.direct) continue;
    if (p.tmp.empty()) {
      const std::string tmp = temp_name(p.path);
      const std::string proc = "/proc/self/fd/" + std::to_string(p.fd);
      if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, tmp.c_str(), AT_SYMLINK_FOLLOW) != 0) {
        throw InputError(p.option, p.path,
                         std::string("cannot name the written file: ") + std::strerror(errno));
      }
      p.tmp = tmp;
      ::close(p.fd);
      p.fd = -1;
    }
  }
  for (auto& p : pending_) {
    if (p.direct) continue;
    std::error_code ec;
    std::filesystem::rename(p.tmp, p.path, ec);
    if (ec) {
      throw InputError(p.option, p.path, "cannot rename into place: " + ec.message());
    }
    p.tmp.clear();
  }
  pending_.clear();
}

}  // namespace tpo
