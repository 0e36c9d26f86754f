// Reading config JSON with errors that name the file and the field. Used by the model and
// hardware loaders (and later by profile and plan loaders) so every config error reads alike.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpo {

// Parses a whole file; a missing file or malformed JSON throws InputError naming the file.
nlohmann::json read_json_file(const std::string& path);

// The most tpo reads from one input: no config, profile or report comes near it, and a device
// such as /dev/zero would never end.
inline constexpr long long kMaxInputFileBytes = 256LL << 20;
// Throws InputError naming `path` (and `option` when not empty) unless `path` can be read: a
// regular file within kMaxInputFileBytes, or a pipe or character device (/dev/stdin, <(...)).
void check_input_file(const std::string& path, const std::string& option);
// The whole of an input file, read up to kMaxInputFileBytes (an InputError beyond).
std::string read_input_file(const std::string& path, const std::string& option);
// A fingerprint of a file's bytes (64-bit FNV-1a, hex): a plan records its profile's, so that
// validate --plan can tell the profile changed since. Not a cryptographic hash.
std::string file_digest(const std::string& path, const std::string& option);

// A view of one JSON object inside a file; `path` is the dotted field path used in messages.
class JsonObject {
 public:
  JsonObject(const nlohmann::json& j, std::string file, std::string path);

  bool has(const std::string& key) const;
  JsonObject object(const std::string& key) const;
  std::string string(const std::string& key) const;
  std::string string_or(const std::string& key, const std::string& fallback) const;
  // Numbers must be finite; `positive` requires > 0.
  double number(const std::string& key, bool positive = true) const;
  double number_or(const std::string& key, double fallback, bool positive = true) const;
  std::int64_t integer(const std::string& key) const;  // a positive integer
  std::int64_t integer_or(const std::string& key, std::int64_t fallback) const;
  // A non-negative integer (0 allowed), or the fallback when absent.
  std::int64_t count_or(const std::string& key, std::int64_t fallback) const;
  // Throws InputError naming the first key not in `known` (a misspelt key would otherwise be
  // ignored and its default used without a word). `what` names the kind of object.
  void only_keys(std::initializer_list<const char*> known, const std::string& what) const;

  const nlohmann::json& raw() const { return j_; }
  const std::string& file() const { return file_; }
  std::string field(const std::string& key) const;  // "gpu.sms"

 private:
  const nlohmann::json& get(const std::string& key) const;
  const nlohmann::json& j_;
  std::string file_;
  std::string path_;
};

}  // namespace tpo

namespace tpo {
// Every regular file read through read_input_file is remembered (device and inode); an output
// that is one of them is refused: writing it would replace an input of the same command (a
// plan's model, a report read back). Throws InputError naming `option`.
void refuse_output_over_read_input(const std::string& path, const std::string& option);
// Writes `content` to `path` through a temporary file and a rename, so a failed run never
// leaves a half-written output. `option` names the command-line option for error messages.
void write_file_atomic(const std::string& path, const std::string& content,
                       const std::string& option);
// Checks up front that `path` can be written (its folder exists), before any long work.
void check_writable(const std::string& path, const std::string& option);
// Where an output named `path` goes: symbolic links followed to the file they name; `direct`
// when the path exists and is not a regular file (/dev/stdout, /dev/null, a FIFO), which is
// then written in place instead of through a temporary and a rename.
struct OutputTarget {
  std::string path;
  bool direct = false;
  int fd = -1;  // /dev/stdout, /dev/stderr, /dev/fd/N: this process's descriptor N
};
OutputTarget output_target(const std::string& path, const std::string& option);
// How an output is named to the user: "standard output" (or "standard error") for a stream of
// this process, else the path as given.
std::string output_name(const std::string& path);
// Where a hint names the file to use next: the path, or "FILE (saved from standard output)".
std::string output_for_hint(const std::string& path);
// All outputs of one command, written as a set: each goes to a temporary beside it, flushed
// to disk (fsync), and all are renamed into place only once every one was written. A failure
// before that removes the temporaries and changes no output; so does destroying the set
// without commit().
class OutputSet {
 public:
  OutputSet() = default;
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;
  ~OutputSet();
  // Empty paths are skipped. Throws InputError naming `option` when the write fails, or when
  // `path` is a file this process has read as an input (refuse_output_over_read_input) unless
  // `replaces_input` (an update in place: a profile's comm section, a fitted contention block).
  void add(const std::string& path, const std::string& content, const std::string& option,
           bool replaces_input = false);
  void commit();

 private:
  struct Pending {
    std::string path, tmp, option;  // tmp: the named temporary, empty while unnamed
    int fd = -1;                    // the unnamed file (O_TMPFILE) until commit
    bool direct = false;            // not a regular file: `content` is written at commit
    std::string content;
    int own_fd = -1;  // direct to this process's descriptor (written via dup)
  };
  std::vector<Pending> pending_;
};

// Refuses one file named by two output options (one would overwrite the other):
// {path, option} pairs; empty paths are ignored. Throws InputError naming both options.
void check_distinct_outputs(const std::vector<std::pair<std::string, std::string>>& outputs);
}  // namespace tpo
