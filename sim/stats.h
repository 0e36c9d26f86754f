// Small statistics shared by the simulator, profiler and calibration.
#pragma once

#include <algorithm>
#include <vector>

namespace tpo::sim {

// The median (the mean of the middle two for an even count); `if_empty` for no values.
inline double median(std::vector<double> v, double if_empty = 0.0) {
  if (v.empty()) return if_empty;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace tpo::sim
