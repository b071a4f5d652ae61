#include "tests/kernels/parity.h"

#include <cstdlib>
#include <sstream>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/softmax.h"

namespace offgen::test {
namespace {

KernelSet cpu_set(std::string name, std::string isa) {
  namespace cpu = kernels::cpu;
  return {std::move(name),
          std::move(isa),
          cpu::gather_rows,
          cpu::add_position_embeddings,
          cpu::layer_norm,
          cpu::linear,
          cpu::logits,
          cpu::add_inplace,
          cpu::log_softmax,
          cpu::token_logprobs,
          cpu::prefill_attention,
          cpu::store_prefill_kv,
          cpu::append_kv,
          cpu::decode_attention};
}

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

std::vector<const KernelSet*> kernel_sets_under_test() {
  static const KernelSet best = cpu_set("cpu", "");
  static const KernelSet avx2 = cpu_set("cpu_avx2", "avx2");
  static const KernelSet portable = cpu_set("cpu_portable", "portable");
  return {&best, &avx2, &portable};
}

void ParityTest::SetUp() {
  if (!impl().cpu_isa.empty()) setenv("OFFGEN_CPU_ISA", impl().cpu_isa.c_str(), 1);
}

void ParityTest::TearDown() {
  if (!impl().cpu_isa.empty()) unsetenv("OFFGEN_CPU_ISA");
}

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
