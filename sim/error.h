// Errors in what the user gave us (a config file, an option). The library throws; only `main`
// decides the exit code: InputError -> 2, anything else -> 1. Every message names where
// (a file or an option) and which field, so the user knows what to fix.
#pragma once

#include <stdexcept>
#include <string>

namespace tpo {

class InputError : public std::runtime_error {
 public:
  // where: a file path or a command-line option such as "--split"; field: the JSON key, or
  // for an option the value given (may be empty); what: what is wrong and how to fix it.
  InputError(std::string where, std::string field, const std::string& what)
      : std::runtime_error(format(where, field, what)),
        where_(std::move(where)),
        field_(std::move(field)) {}

  const std::string& where() const { return where_; }
  const std::string& field() const { return field_; }

 private:
  static std::string format(const std::string& where, const std::string& field,
                            const std::string& what) {
    // An option reads "--tp 3: ...", a file "path: field 'gpu.sms': ...".
    std::string s = where;
    if (!field.empty()) {
      if (where.starts_with("--")) {
        s += " " + field;
      } else if (where.starts_with("field '")) {  // a FieldError: "field 'tp' = 3"
        s += " = " + field;
      } else {
        s += ": field '" + field + "'";
      }
    }
    return printable(s + ": " + what);
  }
  // Control characters from a file (a name holding ESC or NUL) are shown as \xNN: printed raw
  // they would move the terminal's cursor or cut the message short.
  static std::string printable(const std::string& s) {
    static const char* hex = "0123456789abcdef";
    std::string out;
    out.reserve(s.size());
    for (const char c : s) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u == 0x7f) {
        out += "\\x";
        out += hex[u >> 4];
        out += hex[u & 15];
      } else {
        out += c;
      }
    }
    return out;
  }
  std::string where_;
  std::string field_;
};

// An impossible value of a workload or strategy field, thrown by the core, which knows no
// command-line flags or files: "tp", "seq", "split", ... and the value. The CLI names the flag
// it bound to that field (tp -> --tp); a plan reader names its file and the entry's field.
class FieldError : public InputError {
 public:
  FieldError(std::string field, std::string value, std::string what)
      : InputError("field '" + field + "'", value, what),
        name_(std::move(field)),
        value_(std::move(value)),
        problem_(std::move(what)) {}
  const std::string& name() const { return name_; }        // "tp", "ladder_layers", ...
  const std::string& value() const { return value_; }      // the value given
  const std::string& problem() const { return problem_; }  // what is wrong, how to fix it

 private:
  std::string name_, value_, problem_;
};

// A run that could not finish (interrupted, a device failure): exit code 1, a plain message.
class RunFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tpo
