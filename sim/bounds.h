// The physical bounds of every number tpo reads from a file: one table, next to nothing else,
// so a reader sees in one place what tpo accepts. A value outside its bounds is refused at load
// time with exit 2, naming the file, the field and the range — not passed on to become a
// negative time or an overflow. Fields are matched by the end of their dotted path
// ("gpu.sms", "busbw_gbps", "gemm[3].median_us").
#pragma once

#include <string>

namespace tpo {

struct FieldBound {
  const char* field;  // the end of the dotted path it guards
  double lo, hi;      // allowed range
  bool lo_open;       // (lo, hi] instead of [lo, hi]
  const char* what;   // unit or meaning, for the message
};

// The bound of a field, or null when the table has none.
const FieldBound* bound_of(const std::string& dotted_field);

// Throws InputError naming `file`, `field` and the range when `x` is outside the bound.
void check_bound(const std::string& file, const std::string& field, double x);

}  // namespace tpo
