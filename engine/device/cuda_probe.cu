#include <cuda_runtime.h>

#include "engine/device/cuda_probe.h"

namespace offgen {

bool built_with_cuda() {
  return true;
}

std::vector<GpuInfo> list_cuda_gpus() {
  std::vector<GpuInfo> gpus;
  int count = 0;
  // No driver or no device is an answer here ("none"), not an error.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return gpus;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    gpus.push_back({i, prop.name, prop.major * 10 + prop.minor,
                    static_cast<std::uint64_t>(prop.totalGlobalMem)});
  }
  return gpus;
}

}  // namespace offgen
