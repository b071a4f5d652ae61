#include "scheduler/batch_formation.h"

#include <algorithm>
#include <numeric>

namespace offgen {

std::vector<std::size_t> order_by_length(std::span<const std::size_t> lengths) {
  std::vector<std::size_t> order(lengths.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return lengths[a] < lengths[b]; });
  return order;
}

PaddedBatch left_pad(std::span<const std::vector<std::int32_t>> sequences, std::int32_t pad_id) {
  PaddedBatch out;
  out.batch = static_cast<int>(sequences.size());
  for (const auto& s : sequences) out.seq = std::max(out.seq, static_cast<int>(s.size()));
  const std::size_t cells = static_cast<std::size_t>(out.batch) * static_cast<std::size_t>(out.seq);
  out.tokens.assign(cells, pad_id);
  out.valid.assign(cells, 0);
  out.positions.assign(cells, -1);
  for (int b = 0; b < out.batch; ++b) {
    const auto& s = sequences[static_cast<std::size_t>(b)];
    const int len = static_cast<int>(s.size());
    out.lengths.push_back(len);
    const std::size_t row = static_cast<std::size_t>(b) * static_cast<std::size_t>(out.seq);
    const int pad = out.seq - len;
    for (int i = 0; i < len; ++i) {
      const std::size_t cell = row + static_cast<std::size_t>(pad + i);
      out.tokens[cell] = s[static_cast<std::size_t>(i)];
      out.valid[cell] = 1;
      out.positions[cell] = i;
    }
  }
  return out;
}

}  // namespace offgen
