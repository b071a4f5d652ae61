// bf16 prefill attention (PrefillAttentionArgs::prefill_math bf16, kernels/cpu/attention_bf16.h),
// on AMX where the CPU has it and on the AVX512-BF16 dot product (OFFGEN_CPU_ISA=avx512 leaves
// AMX out): its outputs and key sums against the exact attention of the same bf16 operands,
// within what bf16 probabilities allow; a sequence's bits do not depend on its batch-mates'
// padding nor on how its queries are split into tasks; and without AVX512-BF16 (the avx2 cap
// here), or on the reference, bf16 asks for nothing but the exact kernel.
// (Not a parity suite of the CUDA kernels: the cuda device refuses bf16 prefill.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_bf16.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/linear_amx.h"
#include "kernels/reference/reference.h"
#include "tests/kernels/attention_cases.h"
#include "tests/support/test_support.h"

namespace offgen::test {
namespace {

namespace cpu = kernels::cpu;
namespace ref = kernels::reference;
using kernels::PrefillAttentionArgs;
using kernels::PrefillMath;

double bf16(Half h) {
  return double{bf16_to_float(float_to_bf16(half_to_float(h)))};
}

// The shared cases, and longer ones: several 32-query passes and 48-key panels, LLaMA's head_dim
// of 128, a 64-query block split (batch 1, few heads), head_dim 80's tail of a 32-value step.
std::vector<PrefillCase> bf16_cases() {
  std::vector<PrefillCase> cases(std::begin(kPrefillCases), std::end(kPrefillCases));
  cases.push_back({2, 150, 2, 64, {0, 37}});
  cases.push_back({1, 200, 2, 128, {0}, 1});
  cases.push_back({2, 97, 3, 80, {3, 96}, 3});
  return cases;
}

PrefillAttentionArgs bf16_args(const PrefillCase& c, const std::vector<Half>& qkv,
                               const std::vector<std::uint8_t>& valid, Half* out, float* sums,
                               int sum_queries) {
  PrefillAttentionArgs args{qkv.data(), valid.data(), out,
                            sums,       c.batch,      c.seq,
                            c.heads,    c.head_dim,   attention_scale(c.head_dim)};
  args.kv_heads = c.kv_heads;
  args.key_sum_queries = sum_queries;
  args.prefill_math = PrefillMath::bf16;
  return args;
}

// The exact attention of bf16 q, k and v, in double, and each output's error bound: a rounded
// exponential is within bf16's unit roundoff 2^-8 of itself (relative: 8 bits of precision), and
// their sum within 2^-8 too (a weighted mean of those errors), so each normalised probability is
// within 2·2^-8/(1 − 2^-8) of the exact one (relative; short rows come near it: the sum's errors
// do not average out over a few keys); the scores' fp32 sums move the exponentials by at most their
// error bound (dim·2^-24 of Σ|q·k|, times scale); fp32 sums of the keys add keys·2^-23; fp16's
// rounding of the output half an ulp. Key sums: the same relative bound on each probability added.
struct Exact {
  std::vector<double> out, bound;            // [tokens, heads · dim]
  std::vector<double> key_sums, sums_bound;  // [batch, kv_heads, seq]
};

Exact exact_attention(const PrefillCase& c, const std::vector<Half>& qkv,
                      const std::vector<std::uint8_t>& valid, int sum_queries) {
  const int dim = c.head_dim;
  const float scale = attention_scale(dim);
  Exact e;
  const std::size_t tokens = std::size_t(c.batch) * c.seq;
  e.out.assign(tokens * c.heads * dim, 0.0);
  e.bound.assign(e.out.size(), 0.0);
  e.key_sums.assign(std::size_t(c.batch) * c.kv() * c.seq, 0.0);
  e.sums_bound.assign(e.key_sums.size(), 0.0);
  std::vector<double> rounded(qkv.size());  // every operand as bf16, once
  std::transform(qkv.begin(), qkv.end(), rounded.begin(), bf16);
  auto at = [&](int b, int i, int column) {
    return rounded[(std::size_t(b) * c.seq + i) * c.qkv_width() + column];
  };
  for (int b = 0; b < c.batch; ++b) {
    for (int h = 0; h < c.heads; ++h) {
      const int kv = h / c.group();
      const int k_col = (c.heads + kv) * dim, v_col = (c.heads + c.kv() + kv) * dim;
      for (int i = 0; i < c.seq; ++i) {
        if (!valid[b * c.seq + i]) continue;
        std::vector<double> s(i + 1, -INFINITY);
        double max = -INFINITY, score_error = 0;
        int keys = 0;
        for (int j = 0; j <= i; ++j) {
          if (!valid[b * c.seq + j]) continue;
          double dot = 0, magnitude = 0;
          for (int d = 0; d < dim; ++d) {
            const double p = at(b, i, h * dim + d) * at(b, j, k_col + d);
            dot += p;
            magnitude += std::abs(p);
          }
          s[j] = dot * scale;
          score_error = std::max(score_error, magnitude * scale * dim * std::ldexp(1.0, -24));
          max = std::max(max, s[j]);
          ++keys;
        }
        double total = 0;
        for (int j = 0; j <= i; ++j) {
          s[j] = std::exp(s[j] - max);
          total += s[j];
        }
        const double relative =
            std::ldexp(1.0, -7) * 1.01 + 4 * score_error + (keys + 4) * std::ldexp(1.0, -23);
        const std::size_t row = (std::size_t(b) * c.seq + i) * c.heads * dim + std::size_t(h) * dim;
        for (int d = 0; d < dim; ++d) {
          double sum = 0, weight = 0;
          for (int j = 0; j <= i; ++j) {
            const double v = at(b, j, v_col + d);
            sum += s[j] / total * v;
            weight += s[j] / total * std::abs(v);
          }
          e.out[row + d] = sum;
          e.bound[row + d] =
              relative * weight + std::abs(sum) * std::ldexp(1.0, -10) + std::ldexp(1.0, -24);
        }
        if (sum_queries > 0 && i < c.seq - sum_queries) continue;
        for (int j = 0; j <= i; ++j) {
          const std::size_t at_j = (std::size_t(b) * c.kv() + kv) * c.seq + j;
          e.key_sums[at_j] += s[j] / total;
          e.sums_bound[at_j] += (relative + 1e-6) * s[j] / total + 1e-7;
        }
      }
    }
  }
  return e;
}

// The engines this CPU runs: AMX (no cap) where it has AMX-BF16, and the dot product (the avx512
// cap) wherever it has AVX512-BF16. Each test runs its body once per engine.
struct Engine {
  const char* name;
  const char* cap;  // OFFGEN_CPU_ISA, or null for none
};

std::vector<Engine> engines() {
  std::vector<Engine> found;
  if (cpu::use_amx_bf16()) found.push_back({"AMX", nullptr});
  if (cpu::cpu_features().bf16_gemm()) found.push_back({"AVX512-BF16", "avx512"});
  return found;
}

// OFFGEN_CPU_ISA for one engine's run; the value before it comes back after.
test::ScopedEnv engine_cap(const Engine& e) {
  return test::ScopedEnv("OFFGEN_CPU_ISA",
                         e.cap != nullptr ? std::optional<std::string>(e.cap) : std::nullopt);
}

class Bf16PrefillAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    if (engines().empty()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  }
};

TEST_F(Bf16PrefillAttention, IsWithinBf16sBoundOfTheExactAttention) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const Engine& engine : engines()) {
    SCOPED_TRACE(engine.name);
    const test::ScopedEnv capped = engine_cap(engine);
    ASSERT_TRUE(
        cpu::use_bf16_prefill_attention(PrefillAttentionArgs{.prefill_math = PrefillMath::bf16}));
    for (const PrefillCase& c : bf16_cases()) {
      for (const int sum_queries : {-1, 0, 3, 4}) {
        // 4: key sums over 0 queries (all of them) with padding tokens inside the sequences too,
        // which only a mask can remove (the kernel's max pass then runs; without holes the
        // score tiles keep the maxima).
        const bool holes = sum_queries == 4;
        const bool with_sums = sum_queries >= 0;
        SCOPED_TRACE(
            describe(c) +
            (with_sums ? " key sums over " + std::to_string(holes ? 0 : sum_queries) : "") +
            (holes ? ", with holes" : ""));
        const std::size_t tokens = std::size_t(c.batch) * c.seq;
        // Wide q and k: scores of a few units, so the probabilities are far from uniform.
        const auto qkv = rng.halves(tokens * c.qkv_width(), -2, 2);
        auto valid = left_padding(c.seq, c.pads);
        for (int b = 0; holes && b < c.batch; ++b) {  // two holes after each first real token
          const int len = c.seq - c.pads[b];
          if (len < 8) continue;
          valid[std::size_t(b) * c.seq + c.pads[b] + 2] = 0;
          valid[std::size_t(b) * c.seq + c.pads[b] + len / 2] = 0;
        }
        Guarded<Half> out(tokens * c.heads * c.head_dim, half_nan());
        Guarded<float> sums(std::size_t(c.batch) * c.kv() * c.seq, float_nan());
        cpu::prefill_attention(bf16_args(c, qkv, valid, out.data(),
                                         with_sums ? sums.data() : nullptr,
                                         holes ? 0 : std::max(0, sum_queries)));
        EXPECT_TRUE(out.guards_intact());
        EXPECT_TRUE(sums.guards_intact());
        const Exact e = exact_attention(c, qkv, valid, holes ? 0 : std::max(0, sum_queries));
        const std::vector<Half> got_out = out.values();
        const std::vector<float> got_sums = sums.values();
        for (std::size_t n = 0; n < e.out.size(); ++n) {
          const double got = half_to_float(got_out[n]);
          ASSERT_LE(std::abs(got - e.out[n]), e.bound[n])
              << "token " << n / (c.heads * c.head_dim) << " column " << n % (c.heads * c.head_dim);
        }
        if (!with_sums) continue;
        for (std::size_t n = 0; n < e.key_sums.size(); ++n) {
          ASSERT_LE(std::abs(got_sums[n] - e.key_sums[n]), e.sums_bound[n]) << "key sum " << n;
        }
      }
    }
  }
}

// Each sequence of a padded batch against itself alone and unpadded, and the batch with its key
// sums (every query of a head in one task) against without (64-query tasks at these sizes): the
// same bits.
TEST_F(Bf16PrefillAttention, ASequencesBitsDependOnItselfAlone) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const Engine& engine : engines()) {
    SCOPED_TRACE(engine.name);
    const test::ScopedEnv capped = engine_cap(engine);
    for (const PrefillCase& c : bf16_cases()) {
      SCOPED_TRACE(describe(c));
      const std::size_t tokens = std::size_t(c.batch) * c.seq;
      const int hd = c.heads * c.head_dim;
      const auto qkv = rng.halves(tokens * c.qkv_width(), -2, 2);
      const auto valid = left_padding(c.seq, c.pads);
      std::vector<Half> together(tokens * hd), with_sums(tokens * hd);
      std::vector<float> sums(std::size_t(c.batch) * c.kv() * c.seq);
      cpu::prefill_attention(bf16_args(c, qkv, valid, together.data(), nullptr, 0));
      cpu::prefill_attention(bf16_args(c, qkv, valid, with_sums.data(), sums.data(), 0));
      EXPECT_TRUE(bitwise_equal(with_sums, together));
      for (int b = 0; b < c.batch; ++b) {
        const int pad = c.pads[b];
        const int len = c.seq - pad;
        if (len == 0) continue;
        SCOPED_TRACE("sequence " + std::to_string(b));
        PrefillCase alone = c;
        alone.batch = 1;
        alone.seq = len;
        alone.pads = {0};
        const auto first = qkv.begin() + (std::size_t(b) * c.seq + pad) * c.qkv_width();
        const std::vector<Half> own(first, first + std::size_t(len) * c.qkv_width());
        const std::vector<std::uint8_t> own_valid(len, 1);
        std::vector<Half> out(std::size_t(len) * hd);
        std::vector<float> own_sums(std::size_t(c.kv()) * len);
        cpu::prefill_attention(bf16_args(alone, own, own_valid, out.data(), own_sums.data(), 0));
        const auto rows = together.begin() + (std::size_t(b) * c.seq + pad) * hd;
        EXPECT_TRUE(bitwise_equal(out, std::vector<Half>(rows, rows + std::size_t(len) * hd)));
        for (int kv = 0; kv < c.kv(); ++kv) {
          for (int j = 0; j < len; ++j) {
            ASSERT_EQ(own_sums[std::size_t(kv) * len + j],
                      sums[(std::size_t(b) * c.kv() + kv) * c.seq + pad + j])
                << "kv head " << kv << " key " << j;
          }
        }
      }
    }
  }
}

// Where AVX512-BF16 is not used (OFFGEN_CPU_ISA=avx2 here, or the reference), bf16 attention is
// the exact kernel's, bit for bit.
TEST(Bf16PrefillAttentionFallback, IsTheExactKernelWithoutAvx512Bf16) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const PrefillCase c{2, 70, 2, 80, {5, 69}, 1};
  const std::size_t tokens = std::size_t(c.batch) * c.seq;
  const auto qkv = rng.halves(tokens * c.qkv_width(), -2, 2);
  const auto valid = left_padding(c.seq, c.pads);
  std::vector<Half> exact(tokens * c.heads * c.head_dim), bf16_out(exact.size());
  std::vector<float> exact_sums(std::size_t(c.batch) * c.kv() * c.seq),
      bf16_sums(exact_sums.size());
  for (const bool reference : {false, true}) {
    SCOPED_TRACE(reference ? "reference" : "cpu kernel capped at avx2");
    const auto run = reference ? ref::prefill_attention : cpu::prefill_attention;
    const test::ScopedEnv capped("OFFGEN_CPU_ISA", std::optional<std::string>("avx2"));
    PrefillAttentionArgs args = bf16_args(c, qkv, valid, bf16_out.data(), bf16_sums.data(), 0);
    EXPECT_FALSE(!reference && cpu::use_bf16_prefill_attention(args));
    run(args);
    args.prefill_math = PrefillMath::fp32;
    args.out = exact.data();
    args.key_prob_sums = exact_sums.data();
    run(args);
    EXPECT_TRUE(bitwise_equal(bf16_out, exact));
    EXPECT_EQ(bf16_sums, exact_sums);
  }
}

}  // namespace
}  // namespace offgen::test
