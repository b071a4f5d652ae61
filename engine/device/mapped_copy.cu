#include "engine/device/mapped_copy.h"

#include <algorithm>
#include <cstdint>

#include "engine/core/cuda_check.h"

namespace offgen {
namespace {

constexpr int kThreads = 256;
// Enough blocks to keep many PCIe reads in flight (each is a round trip to host memory).
constexpr int kMaxBlocks = 256;

// 16-byte words when both ends are 16-byte aligned (the buffers offgen allocates are 256-byte
// aligned), single bytes for the rest.
__global__ void mapped_copy_kernel(unsigned char* __restrict__ dst,
                                   const unsigned char* __restrict__ src, std::size_t bytes) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  const std::size_t first = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  std::size_t words = 0;
  if ((reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src)) % 16 == 0) {
    words = bytes / 16;
    const auto* in = reinterpret_cast<const uint4*>(src);
    auto* out = reinterpret_cast<uint4*>(dst);
    for (std::size_t i = first; i < words; i += stride) out[i] = in[i];
  }
  for (std::size_t i = words * 16 + first; i < bytes; i += stride) dst[i] = src[i];
}

}  // namespace

void enqueue_mapped_copy(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  const std::size_t units = (bytes + 15) / 16;
  const auto blocks =
      static_cast<int>(std::min<std::size_t>(kMaxBlocks, (units + kThreads - 1) / kThreads));
  mapped_copy_kernel<<<blocks, kThreads, 0, stream>>>(
      static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src), bytes);
  OFFGEN_CUDA_CHECK_LAUNCH();
}

}  // namespace offgen
