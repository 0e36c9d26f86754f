// Chunk sizes from a chunk count and a split ("1792,2304" or "0.45,0.55"): the text a user
// types, turned into token counts per ISO chunk.
#include "sim/chunk_split.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "sim/error.h"

namespace tpo::sim {

std::vector<std::int64_t> resolve_chunks(std::int64_t seq, std::int64_t chunks,
                                         const std::string& split) {
  std::vector<std::int64_t> tokens;
  // Checked before anything is allocated: a schedule of thousands of chunks is no plan.
  constexpr std::int64_t kMaxChunks = 64;
  if (chunks > kMaxChunks) {
    throw FieldError("chunks", std::to_string(chunks),
                     "at most " + std::to_string(kMaxChunks) + " chunks");
  }
  if (std::count(split.begin(), split.end(), ',') + 1 > kMaxChunks) {
    throw FieldError("split", split.substr(0, 40) + "...",
                     "at most " + std::to_string(kMaxChunks) + " chunks");
  }
  if (split.empty()) {
    if (chunks < 2) throw FieldError("chunks", std::to_string(chunks), "must be >= 2");
    if (chunks > seq) {
      throw FieldError("chunks", std::to_string(chunks),
                       "more chunks than tokens (seq " + std::to_string(seq) + ")");
    }
    for (std::int64_t i = 0; i < chunks; ++i) {
      tokens.push_back(seq * (i + 1) / chunks - seq * i / chunks);
    }
    return tokens;
  }
  std::vector<std::string> parts;
  std::stringstream ss(split);
  for (std::string p; std::getline(ss, p, ',');) parts.push_back(p);
  if (parts.size() < 2) {
    throw FieldError("split", split, "give at least two values separated by commas");
  }
  if (chunks != 0 && static_cast<std::int64_t>(parts.size()) != chunks) {
    throw FieldError(
        "split", split,
        "has " + std::to_string(parts.size()) + " values but chunks is " + std::to_string(chunks));
  }
  bool ratios = split.find('.') != std::string::npos;
  std::vector<double> vals;
  for (const auto& p : parts) {
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(p, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != p.size() || !(v > 0) || !std::isfinite(v)) {
      throw FieldError("split", split, "'" + p + "' is not a positive number");
    }
    vals.push_back(v);
  }
  if (!ratios) {
    std::int64_t sum = 0;
    for (double v : vals) {
      tokens.push_back(static_cast<std::int64_t>(v));
      sum += tokens.back();
    }
    if (sum != seq) {
      throw FieldError("split", split,
                       "token counts sum to " + std::to_string(sum) + " but seq is " +
                           std::to_string(seq) +
                           " (give counts summing to seq, or ratios "
                           "such as 0.45,0.55)");
    }
    return tokens;
  }
  double total = 0;
  for (double v : vals) total += v;
  if (std::abs(total - 1.0) > 1e-6) {
    char sum[32];
    std::snprintf(sum, sizeof sum, "%.6g", total);
    throw FieldError("split", split,
                     std::string("values with a decimal point are ratios and must sum to 1; these "
                                 "sum to ") +
                         sum + (total > 1.5 ? " (token counts must be whole numbers)" : ""));
  }
  double cum = 0;
  std::int64_t prev = 0;
  for (std::size_t i = 0; i < vals.size(); ++i) {
    cum += vals[i];
    const std::int64_t b =
        i + 1 == vals.size() ? seq : std::llround(cum * static_cast<double>(seq));
    if (b <= prev) {
      throw FieldError(
          "split", split,
          "chunk " + std::to_string(i + 1) + " would have no tokens at seq " + std::to_string(seq));
    }
    tokens.push_back(b - prev);
    prev = b;
  }
  return tokens;
}

}  // namespace tpo::sim
