// Parity of the attention kernels and KV-cache writes against the reference, plus checks of
// properties the reference is trusted for (key sums by brute force, decode rows summing to 1,
// decode agreeing with the last prefill row).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/reference/reference.h"
#include "tests/kernels/parity.h"

namespace offgen::test {
namespace {

namespace ref = kernels::reference;
using kernels::DecodeAttentionArgs;
using kernels::PrefillAttentionArgs;

struct PrefillCase {
  int batch, seq, heads, head_dim;
  std::vector<int> pads;  // left padding per sequence
};

// Odd head dims and lengths; seq 70 spans two 64-query blocks; pads include a sequence with a
// single real token (seq - 1) and one with none (seq).
const PrefillCase kPrefillCases[] = {
    {1, 1, 1, 8, {0}},       {2, 5, 3, 16, {0, 2}}, {3, 33, 2, 64, {0, 7, 32}},
    {2, 70, 2, 80, {5, 69}}, {2, 9, 2, 8, {0, 9}},
};

std::string describe(const PrefillCase& c) {
  std::string pads;
  for (int p : c.pads) pads += std::to_string(p) + ",";
  return "batch=" + std::to_string(c.batch) + " seq=" + std::to_string(c.seq) +
         " heads=" + std::to_string(c.heads) + " head_dim=" + std::to_string(c.head_dim) +
         " pads=" + pads;
}

std::vector<std::uint8_t> left_padding(int seq, const std::vector<int>& pads) {
  std::vector<std::uint8_t> valid;
  for (int p : pads) {
    for (int i = 0; i < seq; ++i) valid.push_back(i >= p ? 1 : 0);
  }
  return valid;
}

// The full policy's prefill layout: real token i of a sequence in slot i of every head.
std::vector<std::int32_t> compact_token_slots(const std::vector<std::uint8_t>& valid, int batch,
                                              int heads, int seq) {
  std::vector<std::int32_t> slots;
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < heads; ++h) {
      int next = 0;
      for (int i = 0; i < seq; ++i) slots.push_back(valid[std::size_t(b) * seq + i] ? next++ : -1);
    }
  }
  return slots;
}

// An eviction policy's prefill layout: each head keeps a random subset of the real tokens in
// random distinct slots (different per head).
std::vector<std::int32_t> random_token_slots(Rng& rng, const std::vector<std::uint8_t>& valid,
                                             int batch, int heads, int seq, int capacity) {
  std::vector<std::int32_t> slots;
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < heads; ++h) {
      std::vector<std::int32_t> free(static_cast<std::size_t>(capacity));
      for (int s = 0; s < capacity; ++s) free[std::size_t(s)] = s;
      for (int i = 0; i < seq; ++i) {
        const bool real = valid[std::size_t(b) * seq + i] != 0;
        if (!real || free.empty() || rng.integer(0, 3) == 0) {  // padding, or dropped
          slots.push_back(-1);
          continue;
        }
        const auto pick = std::size_t(rng.integer(0, int(free.size()) - 1));
        slots.push_back(free[pick]);
        free.erase(free.begin() + std::ptrdiff_t(pick));
      }
    }
  }
  return slots;
}

float attention_scale(int head_dim) {
  return 1.0f / std::sqrt(float(head_dim));
}

// q, k, v in [-1, 1]; n keys per softmax row.
double prob_rel_error(int head_dim, float scale, int n) {
  // Scores: fp32 dot of head_dim terms, <= (D+1)·u·scale·Σ|q·k| <= (D+1)·u·scale·D; it enters p
  // twice (the score and the row max), exp adds 2 ulp, the row sum n·u, the division u.
  const double score_err = (head_dim + 1) * kFloatEps * scale * head_dim;
  return 2 * score_err + std::ldexp(1.0, -22) + (n + 2) * kFloatEps;
}

Tolerance attention_tolerance(int head_dim, float scale, int n) {
  return {prob_rel_error(head_dim, scale, n) + n * kFloatEps + kHalfMin, kHalfUlp,
          "fp16 output rounding: 1 ulp (2^-10 relative); each probability errs by 2·score error "
          "((D+1)·2^-24·scale·D) + exp's 2 ulp + the row sum's n·2^-24, and the fp32 p·v sum "
          "adds n·2^-24, all times max|v| = 1"};
}

Tolerance prob_tolerance(int head_dim, float scale, int n, int terms) {
  return {1e-12, prob_rel_error(head_dim, scale, n) + terms * kFloatEps,
          "fp32 probabilities: relative error of one probability (score, exp, row sum) plus "
          "fp32 summation over `terms` of them"};
}

// Key sums straight from the spec, in double: independent of reference.cpp.
std::vector<double> brute_key_sums(const std::vector<Half>& qkv,
                                   const std::vector<std::uint8_t>& valid, const PrefillCase& c,
                                   float scale) {
  const int hd = c.heads * c.head_dim;
  std::vector<double> sums(std::size_t(c.batch) * c.heads * c.seq, 0.0);
  auto at = [&](int b, int i, int part, int h, int d) {
    return double(
        half_to_float(qkv[(std::size_t(b) * c.seq + i) * 3 * hd + part * hd + h * c.head_dim + d]));
  };
  for (int b = 0; b < c.batch; ++b) {
    for (int h = 0; h < c.heads; ++h) {
      for (int i = 0; i < c.seq; ++i) {
        if (!valid[b * c.seq + i]) continue;
        std::vector<double> p(i + 1, 0.0);
        double max = -INFINITY, total = 0;
        for (int j = 0; j <= i; ++j) {
          if (!valid[b * c.seq + j]) continue;
          for (int d = 0; d < c.head_dim; ++d) p[j] += at(b, i, 0, h, d) * at(b, j, 1, h, d);
          p[j] *= scale;
          max = std::max(max, p[j]);
        }
        for (int j = 0; j <= i; ++j) {
          p[j] = valid[b * c.seq + j] ? std::exp(p[j] - max) : 0.0;
          total += p[j];
        }
        for (int j = 0; j <= i; ++j) sums[(b * c.heads + h) * c.seq + j] += p[j] / total;
      }
    }
  }
  return sums;
}

class AttentionParity : public ParityTest {};

TEST_P(AttentionParity, PrefillMatchesReference) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const auto& c : kPrefillCases) {
    for (const bool with_sums : {false, true}) {
      SCOPED_TRACE(describe(c) + (with_sums ? " key sums" : ""));
      const int hd = c.heads * c.head_dim;
      const std::size_t tokens = std::size_t(c.batch) * c.seq;
      const auto qkv = rng.halves(tokens * 3 * hd, -1, 1);
      const auto valid = left_padding(c.seq, c.pads);
      const float scale = attention_scale(c.head_dim);
      Guarded<Half> out(tokens * hd, half_nan());
      Guarded<float> sums(std::size_t(c.batch) * c.heads * c.seq, float_nan());
      std::vector<Half> expected_out(tokens * hd);
      std::vector<float> expected_sums(sums.size());

      PrefillAttentionArgs args{
          qkv.data(), valid.data(), out.data(), with_sums ? sums.data() : nullptr, c.batch, c.seq,
          c.heads,    c.head_dim,   scale};
      impl().prefill_attention(args);
      args.out = expected_out.data();
      args.key_prob_sums = with_sums ? expected_sums.data() : nullptr;
      ref::prefill_attention(args);

      EXPECT_TRUE(out.guards_intact());
      EXPECT_TRUE(
          all_close(out.values(), expected_out, attention_tolerance(c.head_dim, scale, c.seq)));
      const auto actual = out.values();
      for (std::size_t t = 0; t < tokens; ++t) {
        if (valid[t]) continue;
        for (int d = 0; d < hd; ++d) {
          ASSERT_EQ(half_to_float(actual[t * hd + d]), 0.0f) << "padding row " << t;
        }
      }
      if (!with_sums) continue;
      EXPECT_TRUE(sums.guards_intact());
      const auto brute = brute_key_sums(qkv, valid, c, scale);
      const std::vector<float> brute_f(brute.begin(), brute.end());
      EXPECT_TRUE(all_close(expected_sums, brute_f,
                            {0, 2 * kFloatEps, "reference: double sums, rounded to fp32 once"}))
          << "reference key sums";
      EXPECT_TRUE(
          all_close(sums.values(), brute_f, prob_tolerance(c.head_dim, scale, c.seq, c.seq)));
    }
  }
}

struct DecodeCase {
  int batch, heads, head_dim, capacity;
  std::vector<std::int32_t> counts;
};

// Slot counts include an empty cache (0), a single slot and a full cache.
const DecodeCase kDecodeCases[] = {
    {1, 1, 8, 1, {1}},
    {3, 2, 16, 33, {0, 1, 33}},
    {2, 3, 64, 100, {57, 100}},
    {2, 2, 80, 5, {3, 5}},
};

std::string describe(const DecodeCase& c) {
  std::string counts;
  for (int n : c.counts) counts += std::to_string(n) + ",";
  return "batch=" + std::to_string(c.batch) + " heads=" + std::to_string(c.heads) +
         " head_dim=" + std::to_string(c.head_dim) + " capacity=" + std::to_string(c.capacity) +
         " counts=" + counts;
}

TEST_P(AttentionParity, DecodeMatchesReference) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const auto& c : kDecodeCases) {
    for (const bool with_probs : {false, true}) {
      SCOPED_TRACE(describe(c) + (with_probs ? " probs" : ""));
      const int hd = c.heads * c.head_dim;
      const std::size_t cache_size = std::size_t(c.batch) * c.heads * c.capacity * c.head_dim;
      const auto qkv = rng.halves(std::size_t(c.batch) * 3 * hd, -1, 1);
      const auto k_cache = rng.halves(cache_size, -1, 1);
      const auto v_cache = rng.halves(cache_size, -1, 1);
      const float scale = attention_scale(c.head_dim);
      const std::size_t probs_size = std::size_t(c.batch) * c.heads * c.capacity;
      Guarded<Half> out(std::size_t(c.batch) * hd, half_nan());
      Guarded<float> probs(probs_size, float_nan());
      std::vector<Half> expected_out(out.size());
      std::vector<float> expected_probs(probs_size);

      DecodeAttentionArgs args{qkv.data(),      k_cache.data(), v_cache.data(),
                               c.counts.data(), out.data(),     with_probs ? probs.data() : nullptr,
                               c.batch,         c.heads,        c.head_dim,
                               c.capacity,      scale};
      impl().decode_attention(args);
      args.out = expected_out.data();
      args.probs = with_probs ? expected_probs.data() : nullptr;
      ref::decode_attention(args);

      EXPECT_TRUE(out.guards_intact());
      EXPECT_TRUE(all_close(out.values(), expected_out,
                            attention_tolerance(c.head_dim, scale, c.capacity)));
      if (!with_probs) continue;
      EXPECT_TRUE(probs.guards_intact());
      EXPECT_TRUE(all_close(probs.values(), expected_probs,
                            prob_tolerance(c.head_dim, scale, c.capacity, 1)));
      const auto p = probs.values();
      for (int b = 0; b < c.batch; ++b) {
        for (int h = 0; h < c.heads; ++h) {
          const float* row = p.data() + (std::size_t(b) * c.heads + h) * c.capacity;
          double total = 0;
          for (int j = 0; j < c.counts[b]; ++j) total += row[j];
          for (int j = c.counts[b]; j < c.capacity; ++j) {
            ASSERT_EQ(row[j], 0.0f) << "slot " << j << " past slot_count of sequence " << b;
          }
          if (c.counts[b] > 0) {
            EXPECT_NEAR(total, 1.0,
                        prob_rel_error(c.head_dim, scale, c.capacity) + c.capacity * kFloatEps)
                << "probabilities of sequence " << b << " head " << h;
          }
        }
      }
    }
  }
}

TEST_P(AttentionParity, StorePrefillKvMatchesReference) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const auto& c : kPrefillCases) {
    SCOPED_TRACE(describe(c));
    const int hd = c.heads * c.head_dim;
    const auto qkv = rng.halves(std::size_t(c.batch) * c.seq * 3 * hd, -1, 1);
    const auto valid = left_padding(c.seq, c.pads);
    for (const int capacity : {c.seq, c.seq + 3}) {  // exactly full, and with free slots
      const std::size_t size = std::size_t(c.batch) * c.heads * capacity * c.head_dim;
      const auto k_init = rng.halves(size, -1, 1);  // slots not written must stay as they were
      const auto v_init = rng.halves(size, -1, 1);
      Guarded<Half> k(k_init), v(v_init);
      std::vector<Half> k_expected = k_init, v_expected = v_init;
      const auto slots = random_token_slots(rng, valid, c.batch, c.heads, c.seq, capacity);
      kernels::StorePrefillKvArgs args{.qkv = qkv.data(),
                                       .token_slot = slots.data(),
                                       .k_cache = k.data(),
                                       .v_cache = v.data(),
                                       .batch = c.batch,
                                       .seq = c.seq,
                                       .heads = c.heads,
                                       .head_dim = c.head_dim,
                                       .capacity = capacity};
      impl().store_prefill_kv(args);
      args.k_cache = k_expected.data();
      args.v_cache = v_expected.data();
      ref::store_prefill_kv(args);
      EXPECT_TRUE(k.guards_intact());
      EXPECT_TRUE(v.guards_intact());
      EXPECT_TRUE(bitwise_equal(k.values(), k_expected));
      EXPECT_TRUE(bitwise_equal(v.values(), v_expected));
    }
  }
}

TEST_P(AttentionParity, AppendKvMatchesReference) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const auto& c : kDecodeCases) {
    SCOPED_TRACE(describe(c));
    const int hd = c.heads * c.head_dim;
    const std::size_t size = std::size_t(c.batch) * c.heads * c.capacity * c.head_dim;
    const auto qkv = rng.halves(std::size_t(c.batch) * 3 * hd, -1, 1);
    std::vector<std::int32_t> slots(std::size_t(c.batch) * c.heads);  // per (sequence, head)
    for (auto& s : slots) s = rng.integer(0, c.capacity - 1);
    slots.back() = c.capacity - 1;
    const auto k_init = rng.halves(size, -1, 1);
    const auto v_init = rng.halves(size, -1, 1);
    Guarded<Half> k(k_init), v(v_init);
    std::vector<Half> k_expected = k_init, v_expected = v_init;
    kernels::AppendKvArgs args{.qkv = qkv.data(),
                               .write_slot = slots.data(),
                               .k_cache = k.data(),
                               .v_cache = v.data(),
                               .batch = c.batch,
                               .heads = c.heads,
                               .head_dim = c.head_dim,
                               .capacity = c.capacity};
    impl().append_kv(args);
    args.k_cache = k_expected.data();
    args.v_cache = v_expected.data();
    ref::append_kv(args);
    EXPECT_TRUE(k.guards_intact());
    EXPECT_TRUE(v.guards_intact());
    EXPECT_TRUE(bitwise_equal(k.values(), k_expected));
    EXPECT_TRUE(bitwise_equal(v.values(), v_expected));
  }
}

// The engine's contract between the two attention paths: after store_prefill_kv, decoding the
// last prompt token's query over the cache gives that token's prefill output.
TEST_P(AttentionParity, DecodeOverStoredPrefillMatchesLastPrefillRow) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const auto& c : kPrefillCases) {
    SCOPED_TRACE(describe(c));
    const int hd = c.heads * c.head_dim;
    const auto qkv = rng.halves(std::size_t(c.batch) * c.seq * 3 * hd, -1, 1);
    const auto valid = left_padding(c.seq, c.pads);
    const float scale = attention_scale(c.head_dim);
    std::vector<Half> prefill_out(std::size_t(c.batch) * c.seq * hd);
    impl().prefill_attention({qkv.data(), valid.data(), prefill_out.data(), nullptr, c.batch, c.seq,
                              c.heads, c.head_dim, scale});
    const int capacity = c.seq + 2;
    const std::size_t size = std::size_t(c.batch) * c.heads * capacity * c.head_dim;
    std::vector<Half> k(size), v(size);
    const auto slots = compact_token_slots(valid, c.batch, c.heads, c.seq);
    impl().store_prefill_kv({.qkv = qkv.data(),
                             .token_slot = slots.data(),
                             .k_cache = k.data(),
                             .v_cache = v.data(),
                             .batch = c.batch,
                             .seq = c.seq,
                             .heads = c.heads,
                             .head_dim = c.head_dim,
                             .capacity = capacity});
    std::vector<Half> last_qkv, expected;
    std::vector<std::int32_t> counts;
    for (int b = 0; b < c.batch; ++b) {
      const auto* row = qkv.data() + (std::size_t(b) * c.seq + c.seq - 1) * 3 * hd;
      last_qkv.insert(last_qkv.end(), row, row + 3 * hd);
      const auto* out = prefill_out.data() + (std::size_t(b) * c.seq + c.seq - 1) * hd;
      expected.insert(expected.end(), out, out + hd);
      counts.push_back(c.seq - c.pads[b]);
    }
    Guarded<Half> decoded(std::size_t(c.batch) * hd, half_nan());
    impl().decode_attention({last_qkv.data(), k.data(), v.data(), counts.data(), decoded.data(),
                             nullptr, c.batch, c.heads, c.head_dim, capacity, scale});
    EXPECT_TRUE(decoded.guards_intact());
    auto tol = attention_tolerance(c.head_dim, scale, c.seq);
    tol.abs *= 2;  // both sides carry their own error
    tol.rel *= 2;
    EXPECT_TRUE(all_close(decoded.values(), expected, tol));
  }
}

INSTANTIATE_TEST_SUITE_P(All, AttentionParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
