// Batch formation: which requests run together, and the left-padded token matrix they run as.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace offgen {

// The order requests run in: by length, so each block (consecutive requests of this order; its
// size: scheduler/block_sizer.h) wastes little padding; input order among equal lengths, so
// results are reproducible.
std::vector<std::size_t> order_by_length(std::span<const std::size_t> lengths);

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
