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
      s += where.starts_with("--") ? " " + field : ": field '" + field + "'";
    }
    return s + ": " + what;
  }
  std::string where_;
  std::string field_;
};

// A run that could not finish (interrupted, a device failure): exit code 1, a plain message.
class RunFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tpo
