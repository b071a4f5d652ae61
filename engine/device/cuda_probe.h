// Which NVIDIA GPUs this machine has, as the CUDA runtime sees them. Empty when the build has no
// CUDA (OFFGEN_CUDA=OFF), when no driver is installed, or when no GPU is visible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace offgen {

struct GpuInfo {
  int index = 0;
  std::string name;
  int compute_capability = 0;  // e.g. 90 for sm_90
  std::uint64_t memory_bytes = 0;
};

std::vector<GpuInfo> list_cuda_gpus();
bool built_with_cuda();

}  // namespace offgen
