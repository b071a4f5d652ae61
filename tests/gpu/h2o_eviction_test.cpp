// CPU and CUDA keep the same tokens: the CUDA h2o eviction kernels, driven through the same
// random prefill + decode sequences as the cpu kernels (tests/support/h2o_state_check.h), must
// match the policy code exactly — positions, scores and write slots after every call.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "engine/core/cuda_check.h"
#include "engine/device/cuda_probe.h"
#include "kernels/cuda/h2o_eviction.h"
#include "tests/support/h2o_state_check.h"

namespace offgen {
namespace {

// Device copy of a host array that is copied back on request.
template <typename T>
struct Mirror {
  Mirror(const T* host, std::size_t n) : count(n) {
    OFFGEN_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&device), n * sizeof(T) + 1));
    OFFGEN_CUDA_CHECK(cudaMemcpy(device, host, n * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~Mirror() { cudaFree(device); }
  void back(T* host) const {
    OFFGEN_CUDA_CHECK(cudaMemcpy(host, device, count * sizeof(T), cudaMemcpyDeviceToHost));
  }
  T* device = nullptr;
  std::size_t count;
};

TEST(CudaH2oEviction, KeepsWhatThePolicyKeeps) {
  if (list_cuda_gpus().empty()) GTEST_SKIP() << "no CUDA GPU";
  for (const test::H2oCase& c : test::h2o_cases()) {
    SCOPED_TRACE("case seed " + std::to_string(c.seed));
    const std::size_t cells = static_cast<std::size_t>(c.batch) * c.heads;
    const std::size_t slots = cells * static_cast<std::size_t>(c.budget + 1);
    auto prefill = [&](const kernels::H2oPrefillArgs& a) {
      const std::size_t tokens = static_cast<std::size_t>(a.batch) * a.seq;
      Mirror<float> sums(a.key_prob_sums, cells * a.seq);
      Mirror<std::uint8_t> valid(a.valid, tokens);
      Mirror<std::int32_t> token_slot(a.token_slot, cells * a.seq);
      Mirror<std::int32_t> position(a.position, slots);
      Mirror<float> score(a.score, slots);
      Mirror<std::int32_t> write_slot(a.write_slot, cells);
      kernels::H2oPrefillArgs d = a;
      d.key_prob_sums = sums.device;
      d.valid = valid.device;
      d.token_slot = token_slot.device;
      d.position = position.device;
      d.score = score.device;
      d.write_slot = write_slot.device;
      kernels::cuda::h2o_prefill_keep(d, nullptr);
      OFFGEN_CUDA_CHECK(cudaDeviceSynchronize());
      token_slot.back(a.token_slot);
      position.back(a.position);
      score.back(a.score);
      write_slot.back(a.write_slot);
    };
    auto decode = [&](const kernels::H2oDecodeArgs& a) {
      Mirror<float> probs(a.probs, slots);
      Mirror<std::uint8_t> advancing(a.advancing, static_cast<std::size_t>(a.batch));
      Mirror<std::int32_t> new_position(a.new_position, static_cast<std::size_t>(a.batch));
      Mirror<std::int32_t> count(a.count, static_cast<std::size_t>(a.batch));
      Mirror<std::int32_t> position(a.position, slots);
      Mirror<float> score(a.score, slots);
      Mirror<std::int32_t> write_slot(a.write_slot, cells);
      kernels::H2oDecodeArgs d = a;
      d.probs = probs.device;
      d.advancing = advancing.device;
      d.new_position = new_position.device;
      d.count = count.device;
      d.position = position.device;
      d.score = score.device;
      d.write_slot = write_slot.device;
      kernels::cuda::h2o_decode_update(d, nullptr);
      OFFGEN_CUDA_CHECK(cudaDeviceSynchronize());
      position.back(a.position);
      score.back(a.score);
      write_slot.back(a.write_slot);
    };
    EXPECT_TRUE(test::h2o_matches_policy(c, prefill, decode));
  }
}

}  // namespace
}  // namespace offgen
