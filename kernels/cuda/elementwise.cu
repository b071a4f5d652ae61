// CUDA element-wise ops on fp16 buffers: the residual add y += x (semantics:
// kernels/cpu/elementwise.h). Each element is widened to fp32, added, and rounded to fp16 once, as
// the CPU kernel does. The op is purely memory-bound, so the kernel is a flat grid-stride loop over
// 16-byte vectors whenever the buffers allow it.
#include "kernels/cuda/elementwise.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "engine/core/cuda_check.h"
#include "kernels/cuda/half_vector.cuh"

namespace offgen::kernels::cuda {
namespace {

constexpr int kThreads = 256;
// 4096 blocks x 256 threads is ~4x what an H100 (132 SMs x 2048 threads) holds at once: enough
// to fill it; larger buffers are covered by the grid-stride loop.
constexpr std::int64_t kMaxBlocks = 4096;

template <int kVec>
__global__ void __launch_bounds__(kThreads)
    add_inplace_kernel(__half* y, const __half* x, std::int64_t vecs) {
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t v = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; v < vecs;
       v += stride) {
    auto* py = reinterpret_cast<HalfVec<kVec>*>(y) + v;
    const auto* px = reinterpret_cast<const HalfVec<kVec>*>(x) + v;
    HalfVec<kVec> a = *py;
    const HalfVec<kVec> b = *px;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      a.h[k] = __float2half_rn(__half2float(a.h[k]) + __half2float(b.h[k]));
    }
    *py = a;
  }
}

template <int kVec>
void launch_add_inplace(__half* y, const __half* x, std::int64_t n, cudaStream_t stream) {
  const std::int64_t vecs = n / kVec;
  const auto blocks = static_cast<unsigned>(std::min((vecs + kThreads - 1) / kThreads, kMaxBlocks));
  add_inplace_kernel<kVec><<<blocks, kThreads, 0, stream>>>(y, x, vecs);
  OFFGEN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void add_inplace(Half* y, const Half* x, std::int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  auto* dy = reinterpret_cast<__half*>(y);
  const auto* dx = reinterpret_cast<const __half*>(x);
  switch (pick_vec(n, {y, x})) {
    case 8:
      launch_add_inplace<8>(dy, dx, n, stream);
      break;
    case 4:
      launch_add_inplace<4>(dy, dx, n, stream);
      break;
    case 2:
      launch_add_inplace<2>(dy, dx, n, stream);
      break;
    default:
      launch_add_inplace<1>(dy, dx, n, stream);
      break;
  }
}

}  // namespace offgen::kernels::cuda
