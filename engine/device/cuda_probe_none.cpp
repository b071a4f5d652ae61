// The probe of a build without CUDA.
#include "engine/device/cuda_probe.h"

#ifndef OFFGEN_WITH_CUDA
namespace offgen {

bool built_with_cuda() {
  return false;
}
std::vector<GpuInfo> list_cuda_gpus() {
  return {};
}

}  // namespace offgen
#endif
