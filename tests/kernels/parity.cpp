#include "tests/kernels/parity.h"

#include <cstdlib>
#include <sstream>

namespace offgen::test {
namespace {

// NaN / Inf in either side always fails: a NaN compares false with everything, and an Inf
// "equal" to an Inf would hide an overflow.
::testing::AssertionResult compare(const std::vector<double>& a, const std::vector<double>& e,
                                   const Tolerance& tol) {
  if (a.size() != e.size()) {
    return ::testing::AssertionFailure() << "size " << a.size() << " != expected " << e.size();
  }
  std::ostringstream bad;
  std::size_t failures = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double allowed = tol.abs + tol.rel * std::fabs(e[i]);
    const double err = std::fabs(a[i] - e[i]);
    const bool finite = std::isfinite(a[i]) && std::isfinite(e[i]);
    if (finite && err <= allowed) continue;
    if (failures++ < 8) {
      bad << "\n  [" << i << "] actual " << a[i] << " expected " << e[i] << " |diff| " << err
          << " allowed " << allowed << (finite ? "" : "  (non-finite)");
    }
  }
  if (failures == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << failures << " of " << a.size() << " values out of tolerance (abs " << tol.abs
         << ", rel " << tol.rel << ": " << tol.why << ")" << bad.str();
}

}  // namespace

std::string kernel_set_name(const ::testing::TestParamInfo<const KernelSet*>& info) {
  return info.param->name;
}

Rng::Rng() {
  const char* env = std::getenv("OFFGEN_TEST_SEED");
  seed_ = env != nullptr ? std::strtoull(env, nullptr, 10)
                         : (std::uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  gen_.seed(seed_);
}

std::vector<Half> Rng::halves(std::size_t n, float lo, float hi) {
  std::vector<Half> out(n);
  for (auto& h : out) h = float_to_half(uniform(lo, hi));
  return out;
}

std::vector<float> Rng::floats(std::size_t n, float lo, float hi) {
  std::vector<float> out(n);
  for (auto& f : out) f = uniform(lo, hi);
  return out;
}

std::vector<float> to_floats(const std::vector<Half>& h) {
  std::vector<float> out(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) out[i] = half_to_float(h[i]);
  return out;
}

::testing::AssertionResult all_close(const std::vector<Half>& actual,
                                     const std::vector<Half>& expected, const Tolerance& tol) {
  const auto a = to_floats(actual);
  const auto e = to_floats(expected);
  return compare({a.begin(), a.end()}, {e.begin(), e.end()}, tol);
}

::testing::AssertionResult all_close(const std::vector<float>& actual,
                                     const std::vector<float>& expected, const Tolerance& tol) {
  return compare({actual.begin(), actual.end()}, {expected.begin(), expected.end()}, tol);
}

::testing::AssertionResult bitwise_equal(const std::vector<Half>& actual,
                                         const std::vector<Half>& expected) {
  if (actual.size() != expected.size()) {
    return ::testing::AssertionFailure() << "size " << actual.size() << " != " << expected.size();
  }
  for (std::size_t i = 0; i < actual.size(); ++i) {
    if (actual[i].bits != expected[i].bits) {
      return ::testing::AssertionFailure() << "element " << i << ": bits 0x" << std::hex
                                           << actual[i].bits << " != 0x" << expected[i].bits;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace offgen::test
