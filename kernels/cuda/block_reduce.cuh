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

// Operators for block_reduce.
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct MinOp {
  __device__ int operator()(int a, int b) const { return min(a, b); }
};
struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

// Reduction of any shuffle-able T (float, double, int) over the block with an associative `op`
// and its identity, returned to every thread; a fixed tree for a given block size, so the result
// is deterministic. Same barrier guarantees as block_sum.
template <typename T, typename Op>
__device__ inline T block_reduce(T v, Op op, T identity) {
  __shared__ T partial[kWarpLanes];
  __shared__ T total;
  const int lane = static_cast<int>(threadIdx.x) % kWarpLanes;
  const int warp = static_cast<int>(threadIdx.x) / kWarpLanes;
#pragma unroll
  for (int offset = kWarpLanes / 2; offset > 0; offset /= 2) {
    v = op(v, __shfl_xor_sync(kAllLanes, v, offset));
  }
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = static_cast<int>(blockDim.x) / kWarpLanes;
    v = lane < warps ? partial[lane] : identity;
#pragma unroll
    for (int offset = kWarpLanes / 2; offset > 0; offset /= 2) {
      v = op(v, __shfl_xor_sync(kAllLanes, v, offset));
    }
    if (lane == 0) total = v;
  }
  __syncthreads();
  return total;
}

// Inclusive prefix sum over the block in thread order: thread t gets v_0 + ... + v_t, and `sum`
// the block's total. Deterministic (fixed order for a given block size).
template <typename T>
__device__ inline T block_inclusive_scan(T v, T& sum) {
  __shared__ T warp_totals[kWarpLanes];
  const int lane = static_cast<int>(threadIdx.x) % kWarpLanes;
  const int warp = static_cast<int>(threadIdx.x) / kWarpLanes;
#pragma unroll
  for (int offset = 1; offset < kWarpLanes; offset *= 2) {
    const T other = __shfl_up_sync(kAllLanes, v, offset);
    if (lane >= offset) v += other;
  }
  if (lane == kWarpLanes - 1) warp_totals[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const int warps = static_cast<int>(blockDim.x) / kWarpLanes;
    T t = lane < warps ? warp_totals[lane] : T{};
#pragma unroll
    for (int offset = 1; offset < kWarpLanes; offset *= 2) {
      const T other = __shfl_up_sync(kAllLanes, t, offset);
      if (lane >= offset) t += other;
    }
    warp_totals[lane] = t;  // inclusive over the warps
  }
  __syncthreads();
  if (warp > 0) v += warp_totals[warp - 1];
  sum = warp_totals[static_cast<int>(blockDim.x) / kWarpLanes - 1];
  __syncthreads();  // warp_totals may be rewritten by the next call
  return v;
}

}  // namespace offgen::kernels::cuda
