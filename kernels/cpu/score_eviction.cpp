#include "kernels/cpu/score_eviction.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <vector>

namespace offgen::kernels::cpu {
namespace {

// r(i) for i < n (eviction_args.h): the head's own prefill sums, or their mean over the heads.
std::vector<float> prefill_ranking(const ScorePrefillArgs& a, std::int64_t b, std::int64_t bh,
                                   int pad, int n) {
  std::vector<float> r(static_cast<std::size_t>(n));
  if (a.heads_mode == ScoreHeads::per_head) {
    const float* sums = a.key_prob_sums + bh * a.seq + pad;
    std::copy(sums, sums + n, r.begin());
    return r;
  }
  for (int i = 0; i < n; ++i) {
    float total = 0.0f;
    for (int g = 0; g < a.heads; ++g) total += a.key_prob_sums[(b * a.heads + g) * a.seq + pad + i];
    r[static_cast<std::size_t>(i)] = total / static_cast<float>(a.heads);
  }
  return r;
}

// Average pooling with zero padding counted (eviction_args.h); k = 1 leaves r as it is.
std::vector<float> pooled(std::vector<float> r, int k) {
  if (k == 1) return r;
  const int n = static_cast<int>(r.size());
  std::vector<float> out(r.size());
  for (int i = 0; i < n; ++i) {
    float total = 0.0f;
    for (int j = std::max(0, i - k / 2); j <= std::min(n - 1, i + k / 2); ++j) {
      total += r[static_cast<std::size_t>(j)];
    }
    out[static_cast<std::size_t>(i)] = total / static_cast<float>(k);
  }
  return out;
}

}  // namespace

void score_prefill_keep(const ScorePrefillArgs& a) {
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
      // The C - R best-ranked older tokens (equal: the newer stays), then the window.
      const int window_start = len - recent;
      const std::vector<float> rank =
          pooled(prefill_ranking(a, b, bh, pad, window_start), a.pool_kernel);
      std::vector<int> older(static_cast<std::size_t>(window_start));
      std::iota(older.begin(), older.end(), 0);
      const auto heavy = static_cast<std::ptrdiff_t>(budget - recent);
      std::partial_sort(older.begin(), older.begin() + heavy, older.end(), [&](int x, int y) {
        const float rx = rank[static_cast<std::size_t>(x)];
        const float ry = rank[static_cast<std::size_t>(y)];
        return rx > ry || (rx == ry && x > y);
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

void score_decode_update(const ScoreDecodeArgs& a) {
  // Heads that rank together are one task: the victim needs all of their updated scores.
  const bool together = a.heads_mode == ScoreHeads::layer_mean;
  const std::int64_t tasks = together ? a.batch : std::int64_t{a.batch} * a.heads;
  tbb::parallel_for(std::int64_t{0}, tasks, [&](std::int64_t t) {
    const std::int64_t b = together ? t : t / a.heads;
    if (!a.advancing[b]) return;  // its token is not kept: the state does not change
    const std::int64_t first = together ? b * a.heads : t;
    const std::int64_t last = together ? first + a.heads : t + 1;  // the cells of this task
    const int n = a.count[b];
    for (std::int64_t bh = first; bh < last; ++bh) {
      std::int32_t* position = a.position + bh * a.capacity;
      float* score = a.score + bh * a.capacity;
      const float* row = a.probs + bh * a.capacity;
      const int slot = a.write_slot[bh];
      position[slot] = a.new_position[b];
      score[slot] = 0.0f;
      if (a.update == ScoreUpdate::accumulate) {
        for (int s = 0; s < n; ++s) score[s] += row[s];
      } else {
        std::copy(row, row + n, score);
      }
    }
    if (n <= a.budget[b]) {
      for (std::int64_t bh = first; bh < last; ++bh) {
        a.write_slot[bh] = n;  // valid slots stay a prefix until the cache is full
      }
      return;
    }
    // All cells of the task hold the same positions (layer_mean) or there is one cell.
    const std::int32_t* position = a.position + first * a.capacity;
    auto ranking = [&](int s) {
      if (!together) return a.score[first * a.capacity + s];
      float total = 0.0f;
      for (std::int64_t bh = first; bh < last; ++bh) total += a.score[bh * a.capacity + s];
      return total / static_cast<float>(a.heads);
    };
    const std::int32_t oldest_recent = a.new_position[b] - a.recent[b] + 1;
    int victim = -1;
    float victim_rank = 0.0f;
    for (int s = 0; s < n; ++s) {
      if (position[s] >= oldest_recent) continue;
      const float r = ranking(s);
      if (victim < 0 || r < victim_rank || (r == victim_rank && position[s] < position[victim])) {
        victim = s;
        victim_rank = r;
      }
    }
    if (victim < 0) victim = a.write_slot[first];  // unreachable with R < capacity
    for (std::int64_t bh = first; bh < last; ++bh) {
      a.position[bh * a.capacity + victim] = -1;
      a.score[bh * a.capacity + victim] = 0.0f;
      a.write_slot[bh] = victim;
    }
  });
}

}  // namespace offgen::kernels::cpu
