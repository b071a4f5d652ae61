// Parity of silu_mul against the reference, bit for bit on every set: the header fixes exp (the
// shared fast_exp) and every rounding. Widths around the 8-wide vectors and the CPU's column
// blocks, gates far into both tails (exp overflowing to inf, silu to -0), and guards around the
// output.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/reference/reference.h"
#include "tests/kernels/parity.h"

namespace offgen::test {
namespace {

namespace ref = kernels::reference;

void expect_matches_reference(const KernelSet& impl, const std::vector<Half>& gate_up,
                              std::int64_t rows, int ffn) {
  std::vector<Half> expected(rows * ffn);
  ref::silu_mul({.gate_up = gate_up.data(), .out = expected.data(), .rows = rows, .ffn = ffn});
  Guarded<Half> out(expected.size(), half_nan());
  impl.silu_mul({.gate_up = gate_up.data(), .out = out.data(), .rows = rows, .ffn = ffn});
  EXPECT_TRUE(out.guards_intact());
  // Tolerance: none. exp is the same fast_exp everywhere, computed without FMA contraction, and
  // the rest is one fp32 division and two fp16 roundings (kernels/gated_mlp_args.h).
  EXPECT_TRUE(finite_and_bitwise_equal(out.values(), expected));
}

class SiluMulParity : public ParityTest {};

TEST_P(SiluMulParity, MatchesReferenceBitForBit) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const std::int64_t rows : {1, 3, 17}) {
    for (const int ffn : {1, 7, 8, 13, 100, 2048, 2053, 5504}) {
      SCOPED_TRACE("rows=" + std::to_string(rows) + " ffn=" + std::to_string(ffn));
      // Gate and up columns drawn together: gates in [-12, 12] cover silu's bend and both tails'
      // approach, ups in [-4, 4].
      std::vector<Half> gate_up(rows * 2 * ffn);
      for (std::int64_t r = 0; r < rows; ++r) {
        for (int i = 0; i < 2 * ffn; ++i) {
          const float bound = i < ffn ? 12.0f : 4.0f;
          gate_up[r * 2 * ffn + i] = float_to_half(rng.uniform(-bound, bound));
        }
      }
      expect_matches_reference(impl(), gate_up, rows, ffn);
    }
  }
}

// Gates over fp16's whole range: exp(-g) overflows to inf past g = -88.7 (silu(g) = g / inf = -0),
// underflows to 0 past g = 87.3 (silu(g) = g), and fp16's smallest values stay near g / 2.
TEST_P(SiluMulParity, ExtremeGatesMatchBitForBit) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const std::vector<float> gates = {-65504.0f, -20000.0f, -100.0f, -88.75f, -87.25f, -16.0f,
                                    -1e-3f,    -6e-8f,    0.0f,    6e-8f,   1e-3f,   16.0f,
                                    87.25f,    88.75f,    100.0f,  65504.0f};
  const int ffn = static_cast<int>(gates.size());
  const std::int64_t rows = 3;
  std::vector<Half> gate_up(rows * 2 * ffn);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (int i = 0; i < ffn; ++i) {
      gate_up[r * 2 * ffn + i] = float_to_half(gates[i]);
      gate_up[r * 2 * ffn + ffn + i] = float_to_half(rng.uniform(-1, 1));
    }
  }
  expect_matches_reference(impl(), gate_up, rows, ffn);
}

// Every finite fp16 gate, once with up = 1 (the output is then half(silu(g)) itself) and once with
// random ups. As half(silu(g)) · u is exact in fp32, the up = 1 row matching means every
// (gate, up) pair matches: this is the whole input space.
TEST_P(SiluMulParity, EveryFiniteGateMatchesBitForBit) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  std::vector<Half> gates;
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    if ((bits & 0x7c00) != 0x7c00) gates.push_back(Half{static_cast<std::uint16_t>(bits)});
  }
  const int ffn = static_cast<int>(gates.size());
  std::vector<Half> gate_up = gates;
  gate_up.insert(gate_up.end(), gates.size(), float_to_half(1.0f));
  gate_up.insert(gate_up.end(), gates.begin(), gates.end());
  const auto ups = rng.halves(gates.size(), -1, 1);
  gate_up.insert(gate_up.end(), ups.begin(), ups.end());
  expect_matches_reference(impl(), gate_up, 2, ffn);
}

INSTANTIATE_TEST_SUITE_P(All, SiluMulParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
