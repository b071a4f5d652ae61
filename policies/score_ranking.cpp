#include "policies/score_ranking.h"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <numeric>

namespace offgen::policies {

std::vector<int> keep_recent_and_highest(int prompt_len, int budget, int recent,
                                         std::span<const float> ranking) {
  std::vector<int> keep;
  if (prompt_len <= budget) {
    keep.resize(static_cast<std::size_t>(prompt_len));
    std::iota(keep.begin(), keep.end(), 0);
    return keep;
  }
  const int window_start = prompt_len - recent;
  std::vector<int> older(static_cast<std::size_t>(window_start));
  std::iota(older.begin(), older.end(), 0);
  const auto heavy = static_cast<std::ptrdiff_t>(budget - recent);
  std::partial_sort(older.begin(), older.begin() + heavy, older.end(), [&](int a, int b) {
    const float sa = ranking[static_cast<std::size_t>(a)];
    const float sb = ranking[static_cast<std::size_t>(b)];
    return sa > sb || (sa == sb && a > b);
  });
  keep.assign(older.begin(), older.begin() + heavy);
  for (int i = window_start; i < prompt_len; ++i) keep.push_back(i);
  std::sort(keep.begin(), keep.end());
  return keep;
}

int lowest_outside_recent(std::span<const std::int32_t> positions, std::span<const float> scores,
                          int recent) {
  std::int32_t oldest_recent = -1;  // positions >= this are in the window
  if (recent > 0) {
    std::vector<std::int32_t> sorted(positions.begin(), positions.end());
    std::nth_element(sorted.begin(), sorted.begin() + (recent - 1), sorted.end(),
                     std::greater<std::int32_t>());
    oldest_recent = sorted[static_cast<std::size_t>(recent - 1)];
  }
  int best = -1;
  for (std::size_t s = 0; s < positions.size(); ++s) {
    if (recent > 0 && positions[s] >= oldest_recent) continue;
    if (best < 0) {
      best = static_cast<int>(s);
      continue;
    }
    const auto b = static_cast<std::size_t>(best);
    if (scores[s] < scores[b] || (scores[s] == scores[b] && positions[s] < positions[b])) {
      best = static_cast<int>(s);
    }
  }
  return best;
}

std::vector<float> average_pool(std::span<const float> scores, int kernel) {
  const int size = static_cast<int>(scores.size());
  const int half = kernel / 2;
  std::vector<float> out(scores.size());
  for (int i = 0; i < size; ++i) {
    float sum = 0.0f;
    for (int j = std::max(0, i - half); j <= std::min(size - 1, i + half); ++j) {
      sum += scores[static_cast<std::size_t>(j)];
    }
    out[static_cast<std::size_t>(i)] = sum / static_cast<float>(kernel);
  }
  return out;
}

}  // namespace offgen::policies
