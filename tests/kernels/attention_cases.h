// Shapes, inputs and tolerances shared by the attention and KV-cache parity tests
// (prefill_attention_test.cpp, decode_attention_test.cpp, kv_cache_test.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/kernels/parity.h"

namespace offgen::test {

struct PrefillCase {
  int batch, seq, heads, head_dim;
  std::vector<int> pads;  // left padding per sequence
  int kv_heads = 0;       // 0 = heads; fewer: grouped-query attention

  int kv() const { return kv_heads > 0 ? kv_heads : heads; }
  int group() const { return heads / kv(); }
  int qkv_width() const { return (heads + 2 * kv()) * head_dim; }  // halves per token
};

// Odd head dims and lengths; seq 70 spans two 64-query blocks; pads include a sequence with a
// single real token (seq - 1) and one with none (seq). The last four are grouped-query shapes:
// 8 query heads over 2 kv heads, multi-query (4 over 1) with head_dim 24 (not a multiple of the
// GPU's 16-wide tiles), 6 over 3, and tiny-llama-gqa's (4 over 2, head_dim 16, unpadded).
inline const PrefillCase kPrefillCases[] = {
    {1, 1, 1, 8, {0}},
    {2, 5, 3, 16, {0, 2}},
    {3, 33, 2, 64, {0, 7, 32}},
    {2, 70, 2, 80, {5, 69}},
    {2, 9, 2, 8, {0, 9}},
    {2, 70, 8, 80, {5, 69}, 2},
    {3, 33, 4, 24, {0, 7, 33}, 1},
    {2, 9, 6, 8, {0, 2}, 3},
    {4, 5, 4, 16, {0, 0, 0, 0}, 2},
};

inline std::string describe(const PrefillCase& c) {
  std::string pads;
  for (int p : c.pads) pads += std::to_string(p) + ",";
  return "batch=" + std::to_string(c.batch) + " seq=" + std::to_string(c.seq) +
         " heads=" + std::to_string(c.heads) + " kv_heads=" + std::to_string(c.kv()) +
         " head_dim=" + std::to_string(c.head_dim) + " pads=" + pads;
}

inline std::vector<std::uint8_t> left_padding(int seq, const std::vector<int>& pads) {
  std::vector<std::uint8_t> valid;
  for (int p : pads) {
    for (int i = 0; i < seq; ++i) valid.push_back(i >= p ? 1 : 0);
  }
  return valid;
}

struct DecodeCase {
  int batch, heads, head_dim, capacity;
  std::vector<std::int32_t> counts;
  int kv_heads = 0;  // 0 = heads; fewer: grouped-query attention

  int kv() const { return kv_heads > 0 ? kv_heads : heads; }
  int group() const { return heads / kv(); }
  int qkv_width() const { return (heads + 2 * kv()) * head_dim; }  // halves per token
};

// Slot counts include an empty cache (0), a single slot and a full cache. The last four are
// grouped-query shapes (8 query heads over 2 kv heads, multi-query 4 over 1 with head_dim 24, 6
// over 3, and tiny-llama-gqa's 4 over 2 with head_dim 16); capacities 300 and 70 make the GPU
// split even a small batch's slots (split decode), capacity 7 keeps it to one split. The last has
// LLaMA's head_dim of 128 (the CPU's widest register-resident row).
inline const DecodeCase kDecodeCases[] = {
    {1, 1, 8, 1, {1}},
    {3, 2, 16, 33, {0, 1, 33}},
    {2, 3, 64, 100, {57, 100}},
    {2, 2, 80, 5, {3, 5}},
    {2, 8, 16, 300, {300, 131}, 2},
    {3, 4, 24, 70, {0, 1, 70}, 1},
    {2, 6, 64, 100, {57, 100}, 3},
    {4, 4, 16, 7, {6, 7, 7, 7}, 2},
    {2, 4, 128, 40, {17, 40}, 2},
};

inline std::string describe(const DecodeCase& c) {
  std::string counts;
  for (int n : c.counts) counts += std::to_string(n) + ",";
  return "batch=" + std::to_string(c.batch) + " heads=" + std::to_string(c.heads) +
         " kv_heads=" + std::to_string(c.kv()) + " head_dim=" + std::to_string(c.head_dim) +
         " capacity=" + std::to_string(c.capacity) + " counts=" + counts;
}

// Grouped-query attention spelled out as multi-head attention: the fused rows of `tokens` tokens
// over `heads` query heads and `kv_heads` kv heads, with each kv head's k and v repeated for every
// query head of its group — [tokens, 3 * heads * head_dim].
inline std::vector<Half> repeat_kv_in_qkv(const std::vector<Half>& qkv, std::size_t tokens,
                                          int heads, int kv_heads, int head_dim) {
  const std::size_t d = std::size_t(head_dim);
  const std::size_t width = std::size_t(heads + 2 * kv_heads) * d;
  const int group = heads / kv_heads;
  std::vector<Half> out;
  out.reserve(tokens * 3 * heads * d);
  for (std::size_t t = 0; t < tokens; ++t) {
    const Half* row = qkv.data() + t * width;
    out.insert(out.end(), row, row + heads * d);  // q as it is
    for (int part = 1; part <= 2; ++part) {       // k, then v
      const Half* kv = row + heads * d + std::size_t(part - 1) * kv_heads * d;
      for (int h = 0; h < heads; ++h) {
        const Half* head = kv + std::size_t(h / group) * d;
        out.insert(out.end(), head, head + d);
      }
    }
  }
  return out;
}

// A [batch, kv_heads, capacity, head_dim] cache as [batch, heads, capacity, head_dim], each kv
// head repeated for the query heads of its group.
inline std::vector<Half> repeat_kv_in_cache(const std::vector<Half>& cache, int batch, int heads,
                                            int kv_heads, int capacity, int head_dim) {
  const std::size_t rows = std::size_t(capacity) * head_dim;  // one (sequence, head)'s cache
  const int group = heads / kv_heads;
  std::vector<Half> out;
  out.reserve(std::size_t(batch) * heads * rows);
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < heads; ++h) {
      const Half* src = cache.data() + (std::size_t(b) * kv_heads + h / group) * rows;
      out.insert(out.end(), src, src + rows);
    }
  }
  return out;
}

// Per-query-head rows [batch, heads, n] -> per-kv-head rows [batch, kv_heads, n]: the fp32 sum of
// a group's rows in ascending head order, as the kernels' contract states it.
inline std::vector<float> sum_groups(const std::vector<float>& per_head, int batch, int heads,
                                     int kv_heads, int n) {
  const int group = heads / kv_heads;
  std::vector<float> out(std::size_t(batch) * kv_heads * n);
  for (int b = 0; b < batch; ++b) {
    for (int c = 0; c < kv_heads; ++c) {
      for (int j = 0; j < n; ++j) {
        float total = per_head[(std::size_t(b) * heads + std::size_t(c) * group) * n + j];
        for (int g = 1; g < group; ++g) {
          total += per_head[(std::size_t(b) * heads + std::size_t(c) * group + g) * n + j];
        }
        out[(std::size_t(b) * kv_heads + c) * n + j] = total;
      }
    }
  }
  return out;
}

inline float attention_scale(int head_dim) {
  return 1.0f / std::sqrt(float(head_dim));
}

// q, k, v in [-1, 1]; n keys per softmax row.
inline double prob_rel_error(int head_dim, float scale, int n) {
  // Scores: fp32 dot of head_dim terms, <= (D+1)·u·scale·Σ|q·k| <= (D+1)·u·scale·D; it enters p
  // twice (the score and the row max), exp adds 2 ulp, the row sum n·u, the division u.
  const double score_err = (head_dim + 1) * kFloatEps * scale * head_dim;
  return 2 * score_err + std::ldexp(1.0, -22) + (n + 2) * kFloatEps;
}

inline Tolerance attention_tolerance(int head_dim, float scale, int n) {
  return {prob_rel_error(head_dim, scale, n) + n * kFloatEps + kHalfMin, kHalfUlp,
          "fp16 output rounding: 1 ulp (2^-10 relative); each probability errs by 2·score error "
          "((D+1)·2^-24·scale·D) + exp's 2 ulp + the row sum's n·2^-24, and the fp32 p·v sum "
          "adds n·2^-24, all times max|v| = 1"};
}

inline Tolerance prob_tolerance(int head_dim, float scale, int n, int terms) {
  return {1e-12, prob_rel_error(head_dim, scale, n) + terms * kFloatEps,
          "fp32 probabilities: relative error of one probability (score, exp, row sum) plus "
          "fp32 summation over `terms` of them"};
}

}  // namespace offgen::test
