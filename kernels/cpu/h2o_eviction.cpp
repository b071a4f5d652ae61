#include "kernels/cpu/h2o_eviction.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <vector>

namespace offgen::kernels::cpu {

void h2o_prefill_keep(const H2oPrefillArgs& a) {
  const std::int64_t cells = std::int64_t{a.batch} * a.heads;
  tbb::parallel_for(std::int64_t{0}, cells, [&](std::int64_t bh) {
    const std::int64_t b = bh / a.heads;
    const std::uint8_t* valid = a.valid + b * a.seq;
    const int len = static_cast<int>(std::count(valid, valid + a.seq, std::uint8_t{1}));
    const int pad = a.seq - len;
    const float* sums = a.key_prob_sums + bh * a.seq + pad;
    std::int32_t* token_slot = a.token_slot + bh * a.seq;
    std::int32_t* position = a.position + bh * a.capacity;
    float* score = a.score + bh * a.capacity;

    const int budget = a.budget[b];
    const int recent = a.recent[b];
    std::vector<int> keep;
    if (len <= budget) {
      keep.resize(static_cast<std::size_t>(len));
      std::iota(keep.begin(), keep.end(), 0);
    } else {
      // The H highest-scoring older tokens (equal scores: the newer stays), then the window.
      const int window_start = len - recent;
      std::vector<int> older(static_cast<std::size_t>(window_start));
      std::iota(older.begin(), older.end(), 0);
      const auto heavy = static_cast<std::ptrdiff_t>(budget - recent);
      std::partial_sort(older.begin(), older.begin() + heavy, older.end(), [&](int x, int y) {
        return sums[x] > sums[y] || (sums[x] == sums[y] && x > y);
      });
      keep.assign(older.begin(), older.begin() + heavy);
      std::sort(keep.begin(), keep.end());
      for (int i = window_start; i < len; ++i) keep.push_back(i);
    }
    std::fill(token_slot, token_slot + a.seq, -1);
    std::fill(position, position + a.capacity, -1);
    std::fill(score, score + a.capacity, 0.0f);
    for (std::size_t slot = 0; slot < keep.size(); ++slot) {
      const int i = keep[slot];
      position[slot] = i;
      score[slot] = sums[i];
      token_slot[pad + i] = static_cast<std::int32_t>(slot);
    }
    a.write_slot[bh] = static_cast<std::int32_t>(keep.size());
  });
}

void h2o_decode_update(const H2oDecodeArgs& a) {
  const std::int64_t cells = std::int64_t{a.batch} * a.heads;
  tbb::parallel_for(std::int64_t{0}, cells, [&](std::int64_t bh) {
    const std::int64_t b = bh / a.heads;
    if (!a.advancing[b]) return;  // its token is not kept: the state does not change
    std::int32_t* position = a.position + bh * a.capacity;
    float* score = a.score + bh * a.capacity;
    const float* row = a.probs + bh * a.capacity;
    const int n = a.count[b];
    const int slot = a.write_slot[bh];
    position[slot] = a.new_position[b];
    score[slot] = 0.0f;
    for (int s = 0; s < n; ++s) score[s] += row[s];
    if (n <= a.budget[b]) {
      a.write_slot[bh] = n;  // valid slots stay a prefix until the cache is full
      return;
    }
    const std::int32_t oldest_recent = a.new_position[b] - a.recent[b] + 1;
    int victim = -1;
    for (int s = 0; s < n; ++s) {
      if (position[s] >= oldest_recent) continue;
      if (victim < 0 || score[s] < score[victim] ||
          (score[s] == score[victim] && position[s] < position[victim])) {
        victim = s;
      }
    }
    if (victim < 0) victim = slot;  // unreachable with R < capacity
    position[victim] = -1;
    score[victim] = 0.0f;
    a.write_slot[bh] = victim;
  });
}

}  // namespace offgen::kernels::cpu
