// Parity-test support: every kernel implementation is checked against kernels/reference with
// fresh random inputs, guard regions around outputs, and per-case tolerances that say why.
//
// An implementation is a KernelSet: host-callable functions with the CPU signatures (each op takes
// its kernels/*_args.h struct). The CPU
// kernels plug in directly (once per micro-kernel ISA); a device implementation plugs in through
// host wrappers that copy inputs over, launch, and copy outputs back into the given buffers.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/core/half.h"
#include "kernels/attention_args.h"
#include "kernels/embedding_args.h"
#include "kernels/eviction_args.h"
#include "kernels/gated_mlp_args.h"
#include "kernels/kv_cache_args.h"
#include "kernels/layer_norm_args.h"
#include "kernels/linear_args.h"
#include "kernels/logit_edit_args.h"
#include "kernels/page_selection_args.h"
#include "kernels/quantize_args.h"
#include "kernels/rms_norm_args.h"
#include "kernels/rotary_args.h"
#include "kernels/sampling_args.h"
#include "kernels/softmax_args.h"

namespace offgen::test {

// ---- implementations under test --------------------------------------------------------------

struct KernelSet {
  template <typename F>
  using Fn = std::function<F>;

  std::string name;
  // Value of OFFGEN_CPU_ISA while this set runs (CPU fallbacks); empty = leave unset.
  std::string cpu_isa;
  Fn<void(const kernels::GatherRowsArgs&)> gather_rows;
  Fn<void(const kernels::PositionEmbeddingArgs&)> add_position_embeddings;
  Fn<void(const kernels::LayerNormArgs&)> layer_norm;
  Fn<void(const kernels::LinearArgs&)> linear;
  Fn<void(const kernels::LogitsArgs&)> logits;
  Fn<void(Half*, const Half*, std::int64_t)> add_inplace;
  Fn<void(const kernels::LogSoftmaxArgs&)> log_softmax;
  Fn<void(const kernels::TokenLogprobsArgs&)> token_logprobs;
  Fn<void(const kernels::TopLogprobsArgs&)> top_logprobs;
  Fn<void(const kernels::PrefillAttentionArgs&)> prefill_attention;
  Fn<void(const kernels::StorePrefillKvArgs&)> store_prefill_kv;
  Fn<void(const kernels::AppendKvArgs&)> append_kv;
  Fn<void(const kernels::DecodeAttentionArgs&)> decode_attention;
  Fn<void(const kernels::SampleRowsArgs&)> sample_rows;
  Fn<void(const kernels::ArgmaxRowsArgs&)> argmax_rows;
  Fn<void(const kernels::ScorePrefillArgs&)> score_prefill_keep;
  Fn<void(const kernels::ScoreDecodeArgs&)> score_decode_update;
  Fn<void(const kernels::QuantizeArgs&)> quantize;
  Fn<void(const kernels::DequantizeArgs&)> dequantize;
  Fn<void(const kernels::QuantizeKvSlotsArgs&)> quantize_kv_slots;
  Fn<void(const kernels::RmsNormArgs&)> rms_norm;
  Fn<void(const kernels::RotaryArgs&)> rotary;
  Fn<void(const kernels::SiluMulArgs&)> silu_mul;
  Fn<void(const kernels::EditLogitsArgs&)> edit_logits;
  Fn<void(const kernels::EditLogitsArgs&)> restore_logits;
  // Whether the set's sampler computes exp and its sums as the reference does, so every pick
  // equals the reference's (the CPU kernels); otherwise picks may differ where a running sum
  // lands within rounding of a threshold (kernels/sampling_args.h).
  bool exact_sampling = true;
  // Whether the set's cosf / sinf are the host libm's, as the reference's are (the CPU kernels),
  // so rotary equals the reference bit for bit; CUDA's are within 2 fp32 ulp instead
  // (kernels/rotary_args.h), which can move a cos / sin value by 1 fp16 ulp.
  bool exact_trig = true;
  // Query-aware page selection (kernels/page_selection_args.h); empty where a set has none
  // (its tests then skip and say so).
  Fn<void(const kernels::PageSummaryArgs&)> page_summary;
  Fn<void(const kernels::PageSelectArgs&)> page_select;
  Fn<void(const kernels::GatherPagesArgs&)> gather_pages;
  // Whether the set refuses bad values it reads from its inputs' memory (page lists, pages per
  // step) with an Error, as the CPU kernels do on the host; a device kernel cannot throw, and
  // clamps them instead.
  bool checks_device_values = true;
};

// Every implementation the parity suites run (one test file per op, kernels/*_test.cpp; the h2o
// eviction ops' truth is the policy code rather than kernels/reference): the CPU kernels once per
// micro-kernel ISA this machine runs (best, avx2, portable). A device implementation appends its
// set(s) here.
std::vector<const KernelSet*> kernel_sets_under_test();

// Fixture for value-parameterised parity suites: applies the set's environment.
class ParityTest : public ::testing::TestWithParam<const KernelSet*> {
 protected:
  void SetUp() override;
  void TearDown() override;
  const KernelSet& impl() const { return *GetParam(); }
};

std::string kernel_set_name(const ::testing::TestParamInfo<const KernelSet*>& info);
inline void PrintTo(const KernelSet* set, std::ostream* os) {
  *os << set->name;
}

// ---- randomness ------------------------------------------------------------------------------

// Seeded from std::random_device (OFFGEN_TEST_SEED=<n> replays one); put
// `SCOPED_TRACE(rng.trace())` right after constructing so any failure prints the seed.
class Rng {
 public:
  Rng();
  std::string trace() const {
    return "random seed " + std::to_string(seed_) + " (OFFGEN_TEST_SEED)";
  }
  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(gen_); }
  int integer(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen_); }
  // fp16 values uniform in [lo, hi] (rounded to fp16).
  std::vector<Half> halves(std::size_t n, float lo, float hi);
  std::vector<float> floats(std::size_t n, float lo, float hi);

 private:
  std::uint64_t seed_;
  std::mt19937_64 gen_;
};

// ---- guarded buffers -------------------------------------------------------------------------

// n elements with kGuard sentinel elements on each side; check_guards() reports any write outside.
template <typename T>
class Guarded {
 public:
  static constexpr std::size_t kGuard = 64;

  // Filled with `fill` (outputs: a NaN poison, so an element the kernel forgot to write fails).
  Guarded(std::size_t n, T fill) : storage_(n + 2 * kGuard, fill), n_(n) {
    for (std::size_t i = 0; i < kGuard; ++i) {
      storage_[i] = sentinel();
      storage_[kGuard + n + i] = sentinel();
    }
  }
  explicit Guarded(const std::vector<T>& values) : Guarded(values.size(), T{}) {
    std::copy(values.begin(), values.end(), data());
  }

  T* data() { return storage_.data() + kGuard; }
  const T* data() const { return storage_.data() + kGuard; }
  std::size_t size() const { return n_; }
  std::vector<T> values() const { return {data(), data() + n_}; }

  ::testing::AssertionResult guards_intact() const {
    for (std::size_t i = 0; i < kGuard; ++i) {
      if (!same(storage_[i], sentinel())) {
        return ::testing::AssertionFailure()
               << "wrote " << (kGuard - i) << " elements before the output";
      }
      if (!same(storage_[kGuard + n_ + i], sentinel())) {
        return ::testing::AssertionFailure()
               << "wrote element " << (n_ + i) << " past the end (size " << n_ << ")";
      }
    }
    return ::testing::AssertionSuccess();
  }

 private:
  // A NaN payload no kernel computes, so "unchanged" is a bit comparison.
  static T sentinel() {
    if constexpr (std::is_same_v<T, Half>) {
      return Half{0x7E5A};
    } else if constexpr (std::is_same_v<T, float>) {
      return std::bit_cast<float>(0x7FA5A5A5u);
    } else {
      return static_cast<T>(0x5A);
    }
  }
  static bool same(const T& a, const T& b) { return std::memcmp(&a, &b, sizeof(T)) == 0; }

  std::vector<T> storage_;
  std::size_t n_;
};

inline Half half_nan() {
  return Half{0x7E00};
}
inline float float_nan() {
  return std::numeric_limits<float>::quiet_NaN();
}

// ---- comparisons -----------------------------------------------------------------------------

constexpr double kHalfUlp = 1.0 / 1024;       // fp16 spacing relative to |x| (2^-10)
constexpr double kHalfMin = 1.0 / 16777216;   // fp16 subnormal spacing (2^-24)
constexpr double kFloatEps = 1.0 / 16777216;  // fp32 unit roundoff u (2^-24)

// |actual - expected| <= abs + rel * |expected|, and every actual value finite. `why` says
// where the allowance comes from; it is printed with any failure.
struct Tolerance {
  double abs = 0.0;
  double rel = 0.0;
  std::string why;
};

::testing::AssertionResult all_close(const std::vector<Half>& actual,
                                     const std::vector<Half>& expected, const Tolerance& tol);
::testing::AssertionResult all_close(const std::vector<float>& actual,
                                     const std::vector<float>& expected, const Tolerance& tol);
// Exact equality (copies): bit patterns must match.
::testing::AssertionResult bitwise_equal(const std::vector<Half>& actual,
                                         const std::vector<Half>& expected);
// bitwise_equal for outputs that must be finite: a NaN or Inf fails even where it matches.
inline ::testing::AssertionResult finite_and_bitwise_equal(const std::vector<Half>& actual,
                                                           const std::vector<Half>& expected) {
  for (std::size_t i = 0; i < actual.size(); ++i) {
    if (!std::isfinite(half_to_float(actual[i]))) {
      return ::testing::AssertionFailure()
             << "element " << i << " is not finite (bits 0x" << std::hex << actual[i].bits << ")";
    }
  }
  return bitwise_equal(actual, expected);
}

std::vector<float> to_floats(const std::vector<Half>& h);

// ---- tolerances shared by more than one op ---------------------------------------------------

// add_position_embeddings and add_inplace: one fp16 + fp16 sum per element.
inline const Tolerance kSumOfTwoHalves{
    kHalfMin, kHalfUlp,
    "fp16 + fp16 in fp32 is exact unless the exponents differ by more than 13; only then can "
    "rounding twice (to fp32, then fp16) land 1 fp16 ulp (2^-10 relative) from the reference's "
    "single rounding"};

// log_softmax and token_logprobs: a log-sum-exp over `cols` fp32 logits in [-r, r].
inline Tolerance log_sum_exp_tolerance(int cols, double r) {
  const double lse_max = r + std::log(double(cols));
  return {std::ldexp(1.0, -22) + (64 + std::log2(double(cols))) * kFloatEps + lse_max * kFloatEps,
          kFloatEps,
          "log-sum-exp error: exp within 2 ulp (2^-22 relative); the sum of positive terms "
          "in fp32 blocks of <= 64 or a tree, (64 + log2 cols)·2^-24 relative, which log turns "
          "into absolute; lse rounded to fp32, 2^-24·|lse|; the subtraction's rounding, "
          "2^-24 relative"};
}

// Sets OFFGEN_CPU_ISA for a scope ("": leaves it unset): the CPU kernels read it per call.
struct IsaCap {
  explicit IsaCap(const std::string& cap) {
    if (!cap.empty()) setenv("OFFGEN_CPU_ISA", cap.c_str(), 1);
  }
  ~IsaCap() { unsetenv("OFFGEN_CPU_ISA"); }
  IsaCap(const IsaCap&) = delete;
  IsaCap& operator=(const IsaCap&) = delete;
};

}  // namespace offgen::test
