// Warp and block-wide fp32 reductions shared by the row kernels (layer norm, softmax, attention):
// warp butterflies, then one warp over the per-warp partials, so the summation order is fixed for a
// given block size.
#pragma once

#include <cuda_runtime.h>

namespace offgen::kernels::cuda {

inline constexpr int kWarpLanes = 32;
inline constexpr unsigned kAllLanes = 0xffffffffu;

// Butterfly sum: every lane ends with the same total (each step adds the same two values).
__device__ inline float warp_sum(float v) {
#pragma unroll
  for (int offset = kWarpLanes / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(kAllLanes, v, offset);
  }
  return v;
}

__device__ inline float warp_max(float v) {
#pragma unroll
  for (int offset = kWarpLanes / 2; offset > 0; offset /= 2) {
    v = fmaxf(v, __shfl_xor_sync(kAllLanes, v, offset));
  }
  return v;
}

// Sum over the block (blockDim.x a multiple of 32), returned to every thread. Its barriers also
// order all of the block's earlier memory reads before anything after the call, and make it safe
// to call repeatedly (the shared slots are only rewritten after every thread has read them).
__device__ inline float block_sum(float v) {
  __shared__ float partial[kWarpLanes];
  __shared__ float total;
  const int lane = static_cast<int>(threadIdx.x) % kWarpLanes;
  const int warp = static_cast<int>(threadIdx.x) / kWarpLanes;
  v = warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = static_cast<int>(blockDim.x) / kWarpLanes;
    v = warp_sum(lane < warps ? partial[lane] : 0.0f);
    if (lane == 0) total = v;
  }
  __syncthreads();
  return total;
}

}  // namespace offgen::kernels::cuda
