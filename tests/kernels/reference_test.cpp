// Hand-computed checks of the reference kernels (the parity suite's truth), of the test helpers,
// and of CPU-only behaviour (fast_exp accuracy, precondition errors).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/core/error.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/kv_cache.h"
#include "kernels/cpu/vector_math.h"
#include "kernels/reference/reference.h"
#include "tests/kernels/parity.h"

namespace offgen::test {
namespace {

namespace ref = kernels::reference;
using kernels::Activation;

std::vector<Half> halves(std::initializer_list<float> values) {
  std::vector<Half> out;
  for (float v : values) out.push_back(float_to_half(v));
  return out;
}

TEST(Reference, LinearOfSmallIntegersIsExact) {
  const auto x = halves({1, 2, 3, 4});   // [2, 2]
  const auto w = halves({1, 0, 2, -1});  // [n=2, k=2]
  const auto b = halves({1, -10});
  std::vector<Half> y(4);
  kernels::LinearArgs args{.x = x.data(),
                           .weight = w.data(),
                           .bias = b.data(),
                           .y = y.data(),
                           .rows = 2,
                           .out_features = 2,
                           .in_features = 2};
  ref::linear(args);
  EXPECT_EQ(to_floats(y), (std::vector<float>{2, -10, 4, -8}));
  args.activation = Activation::relu;
  ref::linear(args);
  EXPECT_EQ(to_floats(y), (std::vector<float>{2, 0, 4, 0}));
  args.bias = nullptr;
  args.activation = Activation::none;
  ref::linear(args);
  EXPECT_EQ(to_floats(y), (std::vector<float>{1, 0, 3, 2}));
  std::vector<float> logits(4);
  ref::logits(
      {.x = x.data(), .embed = w.data(), .out = logits.data(), .rows = 2, .vocab = 2, .dim = 2});
  EXPECT_EQ(logits, (std::vector<float>{1, 0, 3, 2}));
}

TEST(Reference, LayerNormOfConstantRowIsBeta) {
  const auto x = halves({3, 3, 3});
  const auto gamma = halves({2, 2, 2});
  const auto beta = halves({0.5f, -1, 7});
  std::vector<Half> y(3);
  ref::layer_norm({.x = x.data(),
                   .gamma = gamma.data(),
                   .beta = beta.data(),
                   .y = y.data(),
                   .rows = 1,
                   .dim = 3,
                   .eps = 1e-5f});
  EXPECT_EQ(to_floats(y), (std::vector<float>{0.5f, -1, 7}));
}

TEST(Reference, LayerNormWithoutAffineNormalises) {
  // mean 0, variance 1: y = x / sqrt(1 + eps), which rounds to x in fp16.
  auto x = halves({1, -1, 1, -1});
  ref::layer_norm({.x = x.data(), .y = x.data(), .rows = 1, .dim = 4, .eps = 1e-5f});  // in place
  EXPECT_EQ(to_floats(x), (std::vector<float>{1, -1, 1, -1}));
}

TEST(Reference, LogSoftmaxOfEqualValuesIsUniform) {
  std::vector<float> v(8, 3.25f);
  ref::log_softmax({.values = v.data(), .rows = 1, .cols = 8});
  for (float x : v) EXPECT_FLOAT_EQ(x, -std::log(8.0f));
  const std::vector<float> logits = {0.0f, 0.0f, std::log(2.0f)};  // p = 1/4, 1/4, 1/2
  const std::vector<std::int32_t> targets = {2};
  float out = 0;
  ref::token_logprobs(
      {.logits = logits.data(), .targets = targets.data(), .out = &out, .rows = 1, .vocab = 3});
  EXPECT_FLOAT_EQ(out, std::log(0.5f));
}

TEST(Reference, DecodeWithEqualScoresAveragesValues) {
  // One head, head_dim 2, 4 slots with identical keys: uniform weights, output = mean of v.
  const auto qkv = halves({1, 1, 9, 9, 9, 9});
  const auto k = halves({0.5f, 0.25f, 0.5f, 0.25f, 0.5f, 0.25f, 0.5f, 0.25f});
  const auto v = halves({1, 0, 2, 0, 3, 0, 6, 4});
  const std::vector<std::int32_t> count = {4};
  std::vector<Half> out(2);
  std::vector<float> probs(5, -1);
  ref::decode_attention({.qkv = qkv.data(),
                         .k_cache = k.data(),
                         .v_cache = v.data(),
                         .slot_count = count.data(),
                         .out = out.data(),
                         .probs = probs.data(),
                         .batch = 1,
                         .heads = 1,
                         .head_dim = 2,
                         .capacity = 4,
                         .scale = 0.7f});
  EXPECT_EQ(to_floats(out), (std::vector<float>{3, 1}));
  EXPECT_EQ(probs, (std::vector<float>{0.25f, 0.25f, 0.25f, 0.25f, -1}));  // capacity 4 only
}

TEST(Reference, DecodeOfEmptyCacheIsZero) {
  const auto qkv = halves({1, 1, 1});
  const auto kv = halves({5, 5});
  const std::vector<std::int32_t> count = {0};
  std::vector<Half> out = halves({7});
  std::vector<float> probs = {7, 7};
  ref::decode_attention({.qkv = qkv.data(),
                         .k_cache = kv.data(),
                         .v_cache = kv.data(),
                         .slot_count = count.data(),
                         .out = out.data(),
                         .probs = probs.data(),
                         .batch = 1,
                         .heads = 1,
                         .head_dim = 1,
                         .capacity = 2,
                         .scale = 1.0f});
  EXPECT_EQ(to_floats(out), (std::vector<float>{0}));
  EXPECT_EQ(probs, (std::vector<float>{0, 0}));
}

TEST(Reference, PrefillTwoTokensByHand) {
  // head_dim 1, scale 1. Token 0: q=1 k=0 v=0; token 1: q=1 k=1 v=1.
  // Query 0 sees key 0 only: out = v0 = 0. Query 1: scores (0, 1), p1 = e / (1 + e).
  const auto qkv = halves({1, 0, 0, 1, 1, 1});
  const std::vector<std::uint8_t> valid = {1, 1};
  std::vector<Half> out(2);
  std::vector<float> sums(2);
  ref::prefill_attention({qkv.data(), valid.data(), out.data(), sums.data(), 1, 2, 1, 1, 1.0f});
  const double p1 = std::exp(1.0) / (1 + std::exp(1.0));
  EXPECT_EQ(half_to_float(out[0]), 0.0f);
  EXPECT_EQ(out[1].bits, float_to_half(float(p1)).bits);
  EXPECT_FLOAT_EQ(sums[0], float(1 + (1 - p1)));  // query 0 (p = 1) and query 1
  EXPECT_FLOAT_EQ(sums[1], float(p1));
}

TEST(Reference, PrefillIgnoresPaddingAndZeroesItsRows) {
  // Token 0 is padding with a huge key; token 1 must attend only to itself: out = v1.
  const auto qkv = halves({1, 100, 5, 1, 1, 0.375f});
  const std::vector<std::uint8_t> valid = {0, 1};
  std::vector<Half> out = halves({9, 9});
  std::vector<float> sums = {9, 9};
  ref::prefill_attention({qkv.data(), valid.data(), out.data(), sums.data(), 1, 2, 1, 1, 1.0f});
  EXPECT_EQ(to_floats(out), (std::vector<float>{0, 0.375f}));
  EXPECT_EQ(sums, (std::vector<float>{0, 1}));
}

TEST(Reference, StorePrefillKvPutsTokensInTheirSlotsAndAppendWritesOneSlot) {
  // heads 1, head_dim 1: qkv rows are (q, k, v). Sequence: padding, then tokens k=2,v=3 / k=4,v=5.
  const auto qkv = halves({0, 9, 9, 1, 2, 3, 1, 4, 5});
  const std::vector<std::int32_t> token_slot = {-1, 0, 1};  // padding is not cached
  auto k = halves({-1, -1, -1});
  auto v = halves({-1, -1, -1});
  ref::store_prefill_kv({.qkv = qkv.data(),
                         .token_slot = token_slot.data(),
                         .k_cache = k.data(),
                         .v_cache = v.data(),
                         .batch = 1,
                         .seq = 3,
                         .heads = 1,
                         .head_dim = 1,
                         .capacity = 3});
  EXPECT_EQ(to_floats(k), (std::vector<float>{2, 4, -1}));
  EXPECT_EQ(to_floats(v), (std::vector<float>{3, 5, -1}));
  const auto step = halves({0, 6, 7});
  const std::vector<std::int32_t> slot = {2};
  ref::append_kv({.qkv = step.data(),
                  .write_slot = slot.data(),
                  .k_cache = k.data(),
                  .v_cache = v.data(),
                  .batch = 1,
                  .heads = 1,
                  .head_dim = 1,
                  .capacity = 3});
  EXPECT_EQ(to_floats(k), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(to_floats(v), (std::vector<float>{3, 5, 7}));
}

TEST(Reference, HeadsOfOneSequenceCanUseDifferentSlots) {
  // heads 2, head_dim 1: qkv row = (q0, q1, k0, k1, v0, v1). Two tokens: head 0 keeps both in
  // reverse order, head 1 keeps only the second (an eviction policy's choice).
  const auto qkv = halves({0, 0, 1, 2, 3, 4, 0, 0, 5, 6, 7, 8});
  const std::vector<std::int32_t> token_slot = {1, 0, -1, 0};  // [batch 1, heads 2, seq 2]
  auto k = halves({-1, -1, -1, -1});                           // [1, 2 heads, capacity 2, 1]
  auto v = halves({-1, -1, -1, -1});
  ref::store_prefill_kv({.qkv = qkv.data(),
                         .token_slot = token_slot.data(),
                         .k_cache = k.data(),
                         .v_cache = v.data(),
                         .batch = 1,
                         .seq = 2,
                         .heads = 2,
                         .head_dim = 1,
                         .capacity = 2});
  EXPECT_EQ(to_floats(k), (std::vector<float>{5, 1, 6, -1}));
  EXPECT_EQ(to_floats(v), (std::vector<float>{7, 3, 8, -1}));
  const auto step = halves({0, 0, 9, 10, 11, 12});
  const std::vector<std::int32_t> slots = {0, 1};  // per (sequence, head)
  ref::append_kv({.qkv = step.data(),
                  .write_slot = slots.data(),
                  .k_cache = k.data(),
                  .v_cache = v.data(),
                  .batch = 1,
                  .heads = 2,
                  .head_dim = 1,
                  .capacity = 2});
  EXPECT_EQ(to_floats(k), (std::vector<float>{9, 1, 6, 10}));
  EXPECT_EQ(to_floats(v), (std::vector<float>{11, 3, 8, 12}));
}

TEST(Reference, EmbeddingsAndResidualAdd) {
  const auto table = halves({10, 11, 20, 21, 30, 31});  // 3 rows, dim 2
  const std::vector<std::int32_t> ids = {2, 0};
  std::vector<Half> out(4);
  ref::gather_rows({.table = table.data(),
                    .ids = ids.data(),
                    .out = out.data(),
                    .table_rows = 3,
                    .rows = 2,
                    .dim = 2});
  EXPECT_EQ(to_floats(out), (std::vector<float>{30, 31, 10, 11}));
  // Position -1 (padding) with offset 2 reads row 1; position 0 reads row 2.
  auto x = halves({0.5f, 0.25f, 1, 2});
  const std::vector<std::int32_t> positions = {-1, 0};
  ref::add_position_embeddings({.x = x.data(),
                                .table = table.data(),
                                .positions = positions.data(),
                                .rows = 2,
                                .dim = 2,
                                .offset = 2});
  EXPECT_EQ(to_floats(x), (std::vector<float>{20.5f, 21.25f, 31, 33}));
  auto y = halves({1.5f, -2});
  const auto r = halves({2.25f, 0.5f});
  ref::add_inplace(y.data(), r.data(), 2);
  EXPECT_EQ(to_floats(y), (std::vector<float>{3.75f, -1.5f}));
}

// A constant row c has mean square c^2, so each value normalises to c / sqrt(c^2 + eps): with
// c = 2 and eps = 2.25, 2 · fp32(1 / 2.5) = 0.8f, whose fp16 is 0.7998046875 (1638 · 2^-11). The
// weight multiplies that fp16 value: 1.001953125 · 0.7998046875 = 0.80136871... rounds to
// 0.80126953125 (1641 · 2^-11), where 1.001953125 · 0.8 would round to 0.8017578125.
TEST(Reference, RmsNormOfConstantRowRoundsBeforeTheWeight) {
  auto x = halves({2, 2, 2, 2});
  const auto gamma = halves({1.001953125f, 1, -2, 0.5f});
  ref::rms_norm(
      {.x = x.data(), .gamma = gamma.data(), .y = x.data(), .rows = 1, .dim = 4, .eps = 2.25f});
  EXPECT_EQ(to_floats(x),
            (std::vector<float>{0.80126953125f, 0.7998046875f, -1.599609375f, 0.39990234375f}));
}

// The quarter turn (angle fp32(pi / 2), position 1): cosf gives -4.37e-8, whose fp16 is the
// smallest subnormal, -2^-24 (not 0), and sinf gives 1. q = (1, 0) becomes (c, s) itself; k =
// (3, 5) becomes (-5, 3), the products of the tiny cosine vanishing in the fp16 sums; v stays.
TEST(Reference, RotaryQuarterTurnByHand) {
  auto qkv = halves({1, 0, 3, 5, 7, 9});  // heads 1, kv_heads 1, head_dim 2
  const std::vector<std::int32_t> positions = {1};
  const std::vector<float> inv_freq = {1.57079637f};
  ref::rotary({.qkv = qkv.data(),
               .positions = positions.data(),
               .inv_freq = inv_freq.data(),
               .rows = 1,
               .heads = 1,
               .kv_heads = 1,
               .head_dim = 2});
  EXPECT_EQ(qkv[0].bits, 0x8001);  // -2^-24
  EXPECT_EQ(to_floats(qkv), (std::vector<float>{-0x1p-24f, 1, -5, 3, 7, 9}));
}

// Position 0 (and a negative position, read as 0) rotates by nothing: every q and k head of both
// tokens comes back as it was (grouped: 2 q heads, 1 k head), and so does v.
TEST(Reference, RotaryAtPositionZeroIsIdentity) {
  std::vector<Half> qkv;
  for (int i = 1; i <= 32; ++i) qkv.push_back(float_to_half(float(i % 7 - 3) / 4 + 0.125f));
  const std::vector<Half> before = qkv;
  const std::vector<std::int32_t> positions = {0, -3};
  const std::vector<float> inv_freq = {1.0f, 0.01f};
  ref::rotary({.qkv = qkv.data(),
               .positions = positions.data(),
               .inv_freq = inv_freq.data(),
               .rows = 2,
               .heads = 2,
               .kv_heads = 1,
               .head_dim = 4});
  EXPECT_TRUE(bitwise_equal(qkv, before));
}

// silu(0) · 5 = 0; silu(1) = 1 / (1 + e^-1) = 0.7310586 rounds to 0.73095703125 (1497 · 2^-11)
// before the up value multiplies it, so · 2.001953125 gives 1.462890625 (0.7310586 · 2.001953125
// would round to 1.4638671875); silu(20) = 20 (e^-20 vanishes beside 1); silu(-20000) =
// -20000 / inf = -0.
TEST(Reference, SiluMulByHand) {
  const auto gate_up = halves({0, 1, 20, -20000, 5, 2.001953125f, 0.5f, 3});  // ffn 4
  std::vector<Half> out(4);
  ref::silu_mul({.gate_up = gate_up.data(), .out = out.data(), .rows = 1, .ffn = 4});
  EXPECT_EQ(to_floats(out), (std::vector<float>{0, 1.462890625f, 10, 0}));
  EXPECT_EQ(out[0].bits, 0x0000);
  EXPECT_EQ(out[3].bits, 0x8000);  // -0
}

TEST(ParityHelpers, NonFiniteNeverPasses) {
  const Tolerance loose{1e9, 1e9, "anything finite"};
  EXPECT_TRUE(all_close(std::vector<float>{1, 2}, std::vector<float>{1e6f, -1e6f}, loose));
  EXPECT_FALSE(all_close(std::vector<float>{float_nan()}, std::vector<float>{1}, loose));
  EXPECT_FALSE(all_close(std::vector<float>{INFINITY}, std::vector<float>{INFINITY}, loose));
  EXPECT_FALSE(all_close(std::vector<Half>{half_nan()}, std::vector<Half>{half_nan()}, loose));
  EXPECT_FALSE(all_close(std::vector<float>{1, 2}, std::vector<float>{1}, loose));
  EXPECT_FALSE(finite_and_bitwise_equal({half_nan()}, {half_nan()}));
  EXPECT_FALSE(finite_and_bitwise_equal({Half{0x7c00}}, {Half{0x7c00}}));  // +inf
  EXPECT_TRUE(finite_and_bitwise_equal({Half{0x8000}}, {Half{0x8000}}));
  EXPECT_FALSE(finite_and_bitwise_equal({Half{0x8000}}, {Half{0x0000}}));  // -0 is not +0
}

TEST(ParityHelpers, ToleranceIsMixedAbsoluteRelative) {
  const Tolerance tol{0.1, 0.01, "test"};
  EXPECT_TRUE(all_close(std::vector<float>{100.9f}, std::vector<float>{100}, tol));  // 0.1 + 1
  EXPECT_FALSE(all_close(std::vector<float>{101.2f}, std::vector<float>{100}, tol));
  EXPECT_TRUE(all_close(std::vector<float>{0.09f}, std::vector<float>{0}, tol));
}

TEST(ParityHelpers, GuardsCatchWritesOutside) {
  Guarded<float> buffer(3, 0.0f);
  EXPECT_TRUE(buffer.guards_intact());
  buffer.data()[3] = 1.0f;
  EXPECT_FALSE(buffer.guards_intact());
  Guarded<Half> halves_buffer(2, Half{});
  halves_buffer.data()[-1] = Half{};
  EXPECT_FALSE(halves_buffer.guards_intact());
}

TEST(CpuKernels, FastExpIsWithinTwoUlp) {
  for (float x = -87.0f; x < 88.5f; x += 0.01f) {
    const float expected = float(std::exp(double(x)));
    const float actual = kernels::cpu::fast_exp(x);
    EXPECT_LE(std::abs(std::bit_cast<std::int32_t>(actual) - std::bit_cast<std::int32_t>(expected)),
              2)
        << "x = " << x;
  }
  EXPECT_EQ(kernels::cpu::fast_exp(-INFINITY), 0.0f);
  EXPECT_EQ(kernels::cpu::fast_exp(-100.0f), 0.0f);
  EXPECT_EQ(kernels::cpu::fast_exp(100.0f), INFINITY);
  EXPECT_TRUE(std::isnan(kernels::cpu::fast_exp(float_nan())));
}

TEST(CpuKernels, CacheWritesRejectSlotsOutsideCapacity) {
  const auto qkv = halves({0, 1, 2, 0, 3, 4});  // 2 tokens, heads 1, head_dim 1
  const std::vector<std::int32_t> token_slot = {0, 1};
  std::vector<Half> k(1), v(1);
  EXPECT_THROW(kernels::cpu::store_prefill_kv({.qkv = qkv.data(),
                                               .token_slot = token_slot.data(),
                                               .k_cache = k.data(),
                                               .v_cache = v.data(),
                                               .batch = 1,
                                               .seq = 2,
                                               .heads = 1,
                                               .head_dim = 1,
                                               .capacity = 1}),
               Error);
  const std::vector<std::int32_t> slot = {1};
  EXPECT_THROW(kernels::cpu::append_kv({.qkv = qkv.data(),
                                        .write_slot = slot.data(),
                                        .k_cache = k.data(),
                                        .v_cache = v.data(),
                                        .batch = 1,
                                        .heads = 1,
                                        .head_dim = 1,
                                        .capacity = 1}),
               Error);
  const std::vector<std::int32_t> count = {2};
  std::vector<Half> out(1);
  EXPECT_THROW(kernels::cpu::decode_attention({.qkv = qkv.data(),
                                               .k_cache = k.data(),
                                               .v_cache = v.data(),
                                               .slot_count = count.data(),
                                               .out = out.data(),
                                               .batch = 1,
                                               .heads = 1,
                                               .head_dim = 1,
                                               .capacity = 1,
                                               .scale = 1.0f}),
               Error);
}

}  // namespace
}  // namespace offgen::test
