// Batch formation: which requests run together, and the left-padded token matrix they run as.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "scheduler/block_sizer.h"

namespace offgen {

// The order requests run in. A block (consecutive requests of this order; its size:
// scheduler/block_sizer.h) pads every prompt to its longest and runs every row until its longest
// request is done, so requests are grouped by prompt length within a factor of kLengthGroup
// (padding at most a third of a block's prompt columns), and inside a group ordered by steps, so
// a block's rows finish close together instead of idling behind its longest; then by length, and
// input order among equal works, so results are reproducible. (Ordered by prompt length alone, a
// file of mixed lengths computed about half its slots as rows of finished sequences.)
inline constexpr double kLengthGroup = 1.5;
std::vector<std::size_t> order_for_blocks(std::span<const SequenceWork> works);

// A batch of sequences, left-padded to the longest, with Hugging Face's position ids
// (cumsum(mask) - 1; padding gets -1) — row-major [batch, seq].
struct PaddedBatch {
  int batch = 0;
  int seq = 0;
  std::vector<std::int32_t> tokens;  // padding holds pad_id
  std::vector<std::uint8_t> valid;   // 1 = real token
  std::vector<std::int32_t> positions;
  std::vector<int> lengths;  // real tokens per sequence
};

PaddedBatch left_pad(std::span<const std::vector<std::int32_t>> sequences, std::int32_t pad_id);

}  // namespace offgen
