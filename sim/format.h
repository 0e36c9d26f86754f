// Small formatting helpers shared by the reporters (console tables, JSON times).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace tpo {

// Nanoseconds to microseconds, the unit of every report.
inline double to_us(std::int64_t ns) {
  return static_cast<double>(ns) / 1e3;
}

// printf-style formatting of one number ("%.3f").
inline std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, x);
  return buf;
}

}  // namespace tpo
