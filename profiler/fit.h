// Fits over measured tables, with Eigen least squares: the all-reduce's alpha-beta model
// per size range, and GEMM efficiency against M.
#pragma once

#include "sim/profile.h"

namespace tpo::profiler {

// Fills p.allreduce_fit (one alpha-beta line per half of the measured sizes, or one line
// for fewer than 4 points) and p.gemm_m_half (eff(m) = m / (m + m_half) against the best
// FLOP rate of each (n, k)).
void fit_profile(sim::Profile& p);

}  // namespace tpo::profiler
