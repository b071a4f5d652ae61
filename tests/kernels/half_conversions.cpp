// The bulk fp16 <-> fp32 conversions (engine/core/half.h) the kernels run every weight tile and
// cache chunk through: whichever instructions this CPU picks (AVX-512, F16C, portable), every
// value converts to the same bits as the scalar conversion, at every length (the vector loops'
// tails included). Not a kernel parity suite: CPU code only.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "engine/core/half.h"

namespace offgen {
namespace {

std::uint32_t bits_of(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

TEST(HalfConversions, EveryHalfWidensToTheScalarsBitsAtEveryTail) {
  std::vector<Half> all(65536);
  for (std::size_t i = 0; i < all.size(); ++i) {
    all[i] = Half{static_cast<std::uint16_t>(i)};
  }
  for (const std::size_t n : {std::size_t{65536}, std::size_t{65535}, std::size_t{47},
                              std::size_t{33}, std::size_t{16}, std::size_t{15}, std::size_t{1}}) {
    std::vector<float> out(n, -1.0f);
    half_to_float(all.data() + (65536 - n), out.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      const Half h = all[65536 - n + i];
      const float want = half_to_float(h);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(out[i])) << "bits " << h.bits;
      } else {
        ASSERT_EQ(bits_of(out[i]), bits_of(want)) << "bits " << h.bits << " of " << n;
      }
    }
  }
}

TEST(HalfConversions, FloatsNarrowToTheScalarsBitsIncludingTiesAndOverflow) {
  std::mt19937 rng(7);
  std::vector<float> in;
  // Random magnitudes across fp16's range and past it, and exact ties between two halves.
  std::uniform_real_distribution<float> exponent(-26.0f, 17.0f);
  for (int i = 0; i < 20000; ++i) {
    const float magnitude = std::exp2(exponent(rng));
    in.push_back(i % 2 == 0 ? magnitude : -magnitude);
  }
  for (std::uint16_t b = 0x3c00; b < 0x3c40; ++b) {
    const float low = half_to_float(Half{b});
    const float high = half_to_float(Half{static_cast<std::uint16_t>(b + 1)});
    in.push_back((low + high) / 2);  // exact in fp32: rounds to the even one
  }
  in.push_back(0.0f);
  in.push_back(-0.0f);
  in.push_back(65520.0f);  // rounds up past the largest half: infinity
  for (const std::size_t n : {in.size(), in.size() - 1, std::size_t{17}, std::size_t{3}}) {
    std::vector<Half> out(n);
    float_to_half(in.data(), out.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(out[i].bits, float_to_half(in[i]).bits) << in[i] << " of " << n;
    }
  }
}

}  // namespace
}  // namespace offgen
