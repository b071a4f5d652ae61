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
};

// Odd head dims and lengths; seq 70 spans two 64-query blocks; pads include a sequence with a
// single real token (seq - 1) and one with none (seq).
inline const PrefillCase kPrefillCases[] = {
    {1, 1, 1, 8, {0}},       {2, 5, 3, 16, {0, 2}}, {3, 33, 2, 64, {0, 7, 32}},
    {2, 70, 2, 80, {5, 69}}, {2, 9, 2, 8, {0, 9}},
};

inline std::string describe(const PrefillCase& c) {
  std::string pads;
  for (int p : c.pads) pads += std::to_string(p) + ",";
  return "batch=" + std::to_string(c.batch) + " seq=" + std::to_string(c.seq) +
         " heads=" + std::to_string(c.heads) + " head_dim=" + std::to_string(c.head_dim) +
         " pads=" + pads;
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
};

// Slot counts include an empty cache (0), a single slot and a full cache.
inline const DecodeCase kDecodeCases[] = {
    {1, 1, 8, 1, {1}},
    {3, 2, 16, 33, {0, 1, 33}},
    {2, 3, 64, 100, {57, 100}},
    {2, 2, 80, 5, {3, 5}},
};

inline std::string describe(const DecodeCase& c) {
  std::string counts;
  for (int n : c.counts) counts += std::to_string(n) + ",";
  return "batch=" + std::to_string(c.batch) + " heads=" + std::to_string(c.heads) +
         " head_dim=" + std::to_string(c.head_dim) + " capacity=" + std::to_string(c.capacity) +
         " counts=" + counts;
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
