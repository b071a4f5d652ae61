// The ranking rules the attention-score policies (h2o, tova, snapkv) share: which prompt tokens a
// prefill keeps and which cached token a full cache frees, given each token's score.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace offgen::policies {

// The prompt positions (ascending) a prefill of prompt_len tokens keeps under budget C: all when
// prompt_len <= C, else the `recent` most recent plus the C - recent of the rest with the highest
// `ranking` (ranking[i] for i < prompt_len - recent; equal rankings: the newer token stays).
std::vector<int> keep_recent_and_highest(int prompt_len, int budget, int recent,
                                         std::span<const float> ranking);

// The slot of the lowest-scoring token outside the `recent` most recent positions (recent = 0:
// any token, the newest included); ties: the older token.
int lowest_outside_recent(std::span<const std::int32_t> positions, std::span<const float> scores,
                          int recent);

// SnapKV's pooling: out[i] = (sum of scores[j] over |j - i| <= kernel / 2, 0 <= j < size) / kernel
// — PyTorch's avg_pool1d(kernel, stride 1, padding kernel / 2) with count_include_pad: positions
// past either end count as zeros. The sum runs in ascending j, in fp32. kernel: odd, >= 1.
std::vector<float> average_pool(std::span<const float> scores, int kernel);

}  // namespace offgen::policies
