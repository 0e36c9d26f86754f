// Turning a chunk count and a split text into token counts per ISO chunk.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tpo::sim {

// `split` is empty (an even split into `chunks`), token counts ("1792,2304") or ratios summing
// to 1 ("0.45,0.55"). Throws FieldError naming "split" or "chunks".
std::vector<std::int64_t> resolve_chunks(std::int64_t seq, std::int64_t chunks,
                                         const std::string& split);

}  // namespace tpo::sim
