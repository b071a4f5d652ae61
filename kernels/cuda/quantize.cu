// CUDA 4-bit group-wise quantization (semantics: kernels/quantize_args.h; both recipes, fp16 ops
// for the KV cache and fp32 ops for weights, chosen per call). Every step of the recipe is an
// explicit round-to-nearest intrinsic (__fsub_rn, __fdiv_rn, __float2half_rn, ...),
// so no compiler flag (fast math, FMA contraction) can change a bit, and the NaN of 0 · inf is
// sent to code 0 by comparisons only (a min / max clamp would turn it into 15).
//
// Threads follow memory:
//   quantize, inner > 1 (weights): one thread per group, a warp's threads at consecutive inner
//     indices, so each of the group's 64 rows is one coalesced read and each byte row one write.
//   quantize, inner 1 (KV rows) and quantize_kv_slots: one warp per group, lane l holding values
//     2l and 2l + 1 and writing byte l; min and max by butterfly.
//   dequantize: one thread per packed byte, in the bytes' own order, which is coalesced for any
//     inner (inner 1: a warp writes 128 contiguous bytes).
#include "kernels/cuda/quantize.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "engine/core/cuda_check.h"
#include "kernels/cuda/block_reduce.cuh"

namespace offgen::kernels::cuda {
namespace {

constexpr int kThreads = 256;
// The grid-stride loops cover the rest; 65535 blocks of 256 threads fill any GPU many times over.
constexpr std::int64_t kMaxBlocks = 65535;
constexpr int kGroup = kQuantGroupSize;
constexpr int kBytes = kGroup / 2;
constexpr unsigned short kNaN = 0x7E00;

unsigned blocks_for(std::int64_t threads) {
  return static_cast<unsigned>(std::min((threads + kThreads - 1) / kThreads, kMaxBlocks));
}

// One PyTorch fp16 op's rounding of its float result.
__device__ __forceinline__ float h(float x) {
  return __half2float(__float2half_rn(x));
}

struct GroupParams {
  float scale;
  float mn;
};

// The recipe's rounding of one op's result: fp16 ops (the KV cache) round it to fp16, fp32 ops
// (weights) keep the float.
__device__ __forceinline__ float op(float x, bool fp16_ops) {
  return fp16_ops ? h(x) : x;
}

// From the group's min and max (padding zeros included).
__device__ __forceinline__ GroupParams group_params(float mn, float mx, bool fp16_ops) {
  mn = __fadd_rn(mn, 0.0f);  // -0 + +0 = +0: a zero min or max is +0 whichever zero it was
  mx = __fadd_rn(mx, 0.0f);
  const float d = op(__fsub_rn(mx, mn), fp16_ops);
  const float r = op(__fdiv_rn(1.0f, d), fp16_ops);
  return {op(__fmul_rn(r, 15.0f), fp16_ops), mn};
}

__device__ __forceinline__ unsigned code(float x, const GroupParams& p, bool fp16_ops) {
  const float u = op(__fmul_rn(op(__fsub_rn(x, p.mn), fp16_ops), p.scale), fp16_ops);
  if (!(u > 0.0f)) return 0;  // also NaN (0 · inf of a group of equal values)
  return static_cast<unsigned>(__float2int_rn(u > 15.0f ? 15.0f : u));
}

__device__ __forceinline__ __half decode(unsigned q, float scale, float mn) {
  const __half y = __float2half_rn(__fadd_rn(h(__fdiv_rn(static_cast<float>(q), scale)), mn));
  return __hisnan(y) ? __ushort_as_half(kNaN) : y;
}

// inner > 1: thread t quantizes group (o, g) at inner index i, t = (o * G + g) * inner + i.
__global__ void __launch_bounds__(kThreads)
    quantize_columns_kernel(const __half* __restrict__ x, std::uint8_t* __restrict__ data,
                            __half* __restrict__ params, std::int64_t outer, std::int64_t dim,
                            std::int64_t inner, std::int64_t groups, bool fp16_ops) {
  const std::int64_t total = outer * groups * inner;
  const std::int64_t step = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < total; t += step) {
    const std::int64_t i = t % inner;
    const std::int64_t og = t / inner;
    const std::int64_t g = og % groups;
    const int rows = static_cast<int>(min(std::int64_t{kGroup}, dim - g * kGroup));
    const __half* src = x + ((og / groups) * dim + g * kGroup) * inner + i;
    float mn = rows < kGroup ? 0.0f : __half2float(src[0]);
    float mx = mn;
    for (int r = 0; r < rows; ++r) {
      const float v = __half2float(src[r * inner]);
      mn = fminf(mn, v);
      mx = fmaxf(mx, v);
    }
    const GroupParams p = group_params(mn, mx, fp16_ops);
    std::uint8_t* out = data + og * kBytes * inner + i;
    for (int j = 0; j < kBytes; ++j) {
      const float even = 2 * j < rows ? __half2float(src[2 * j * inner]) : 0.0f;
      const float odd = 2 * j + 1 < rows ? __half2float(src[(2 * j + 1) * inner]) : 0.0f;
      out[j * inner] =
          static_cast<std::uint8_t>(code(even, p, fp16_ops) << 4 | code(odd, p, fp16_ops));
    }
    params[og * 2 * inner + i] = __float2half_rn(p.scale);
    params[(og * 2 + 1) * inner + i] = __float2half_rn(p.mn);
  }
}

// One warp quantizes the `rows` contiguous values at src (+ zero padding): lane l packs values
// 2l and 2l + 1 into byte l; lane 0 writes the params.
__device__ __forceinline__ void quantize_group_warp(const __half* src, int rows, std::uint8_t* data,
                                                    __half* params, int lane, bool fp16_ops) {
  const float even = 2 * lane < rows ? __half2float(src[2 * lane]) : 0.0f;
  const float odd = 2 * lane + 1 < rows ? __half2float(src[2 * lane + 1]) : 0.0f;
  float mn = fminf(even, odd);
  float mx = fmaxf(even, odd);
#pragma unroll
  for (int offset = kWarpLanes / 2; offset > 0; offset /= 2) {
    mn = fminf(mn, __shfl_xor_sync(kAllLanes, mn, offset));
    mx = fmaxf(mx, __shfl_xor_sync(kAllLanes, mx, offset));
  }
  const GroupParams p = group_params(mn, mx, fp16_ops);
  data[lane] = static_cast<std::uint8_t>(code(even, p, fp16_ops) << 4 | code(odd, p, fp16_ops));
  if (lane == 0) {
    params[0] = __float2half_rn(p.scale);
    params[1] = __float2half_rn(p.mn);
  }
}

// inner 1: warp k quantizes group k of the [outer * G] contiguous ones.
__global__ void __launch_bounds__(kThreads)
    quantize_rows_kernel(const __half* __restrict__ x, std::uint8_t* __restrict__ data,
                         __half* __restrict__ params, std::int64_t outer, std::int64_t dim,
                         std::int64_t groups, bool fp16_ops) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpLanes;
  const std::int64_t warps = std::int64_t{gridDim.x} * (blockDim.x / kWarpLanes);
  for (std::int64_t k = (std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / kWarpLanes;
       k < outer * groups; k += warps) {
    const std::int64_t g = k % groups;
    const int rows = static_cast<int>(min(std::int64_t{kGroup}, dim - g * kGroup));
    quantize_group_warp(x + (k / groups) * dim + g * kGroup, rows, data + k * kBytes,
                        params + k * 2, lane, fp16_ops);
  }
}

// Warp k quantizes group g of the row at write_slot[bh] of cache (b, h), k = bh * G + g.
__global__ void __launch_bounds__(kThreads)
    quantize_kv_slots_kernel(const __half* __restrict__ cache,
                             const std::int32_t* __restrict__ write_slot,
                             std::uint8_t* __restrict__ data, __half* __restrict__ params,
                             std::int64_t cells, int capacity, int head_dim, std::int64_t groups) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpLanes;
  const std::int64_t warps = std::int64_t{gridDim.x} * (blockDim.x / kWarpLanes);
  for (std::int64_t k = (std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / kWarpLanes;
       k < cells * groups; k += warps) {
    const std::int64_t bh = k / groups;
    const std::int64_t g = k % groups;
    const std::int32_t slot = write_slot[bh];
    if (slot < 0 || slot >= capacity) continue;  // the whole warp: one slot per (b, h)
    const std::int64_t row = bh * capacity + slot;
    const int rows = static_cast<int>(min(std::int64_t{kGroup}, head_dim - g * kGroup));
    quantize_group_warp(cache + row * head_dim + g * kGroup, rows,
                        data + (row * groups + g) * kBytes, params + (row * groups + g) * 2, lane,
                        true);  // KV: fp16 ops
  }
}

// Thread t expands packed byte t = ((o * G + g) * 32 + j) * inner + i into positions 2j and
// 2j + 1 of its group, where they are real (not padding).
__global__ void __launch_bounds__(kThreads)
    dequantize_kernel(const std::uint8_t* __restrict__ data, const __half* __restrict__ params,
                      __half* __restrict__ x, std::int64_t outer, std::int64_t dim,
                      std::int64_t inner, std::int64_t groups) {
  const std::int64_t total = outer * groups * kBytes * inner;
  const std::int64_t step = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < total; t += step) {
    const std::int64_t i = t % inner;
    const std::int64_t row = t / inner;  // (o * G + g) * 32 + j
    const std::int64_t og = row / kBytes;
    const std::int64_t first = (og % groups) * kGroup + 2 * (row % kBytes);  // along dim
    const unsigned byte = data[t];
    const float scale = __half2float(params[og * 2 * inner + i]);
    const float mn = __half2float(params[(og * 2 + 1) * inner + i]);
    __half* out = x + ((og / groups) * dim + first) * inner + i;
    if (first < dim) out[0] = decode(byte >> 4, scale, mn);
    if (first + 1 < dim) out[inner] = decode(byte & 15u, scale, mn);
  }
}

}  // namespace

void quantize(const QuantizeArgs& a, cudaStream_t stream) {
  const QuantShape& s = a.shape;
  const std::int64_t G = s.groups();
  if (s.outer <= 0 || G <= 0 || s.inner <= 0) return;
  const auto* x = reinterpret_cast<const __half*>(a.x);
  auto* params = reinterpret_cast<__half*>(a.params);
  const bool fp16_ops = a.recipe == QuantRecipe::fp16_ops;
  if (s.inner == 1) {
    quantize_rows_kernel<<<blocks_for(s.outer * G * kWarpLanes), kThreads, 0, stream>>>(
        x, a.data, params, s.outer, s.dim, G, fp16_ops);
  } else {
    quantize_columns_kernel<<<blocks_for(s.outer * G * s.inner), kThreads, 0, stream>>>(
        x, a.data, params, s.outer, s.dim, s.inner, G, fp16_ops);
  }
  OFFGEN_CUDA_CHECK_LAUNCH();
}

void dequantize(const DequantizeArgs& a, cudaStream_t stream) {
  const QuantShape& s = a.shape;
  const std::int64_t G = s.groups();
  if (s.outer <= 0 || G <= 0 || s.inner <= 0) return;
  dequantize_kernel<<<blocks_for(s.data_bytes()), kThreads, 0, stream>>>(
      a.data, reinterpret_cast<const __half*>(a.params), reinterpret_cast<__half*>(a.x), s.outer,
      s.dim, s.inner, G);
  OFFGEN_CUDA_CHECK_LAUNCH();
}

void quantize_kv_slots(const QuantizeKvSlotsArgs& a, cudaStream_t stream) {
  const std::int64_t cells = std::int64_t{a.batch} * a.heads;
  const std::int64_t G = QuantShape{.outer = 1, .dim = a.head_dim, .inner = 1}.groups();
  if (cells <= 0 || G <= 0 || a.capacity <= 0) return;
  quantize_kv_slots_kernel<<<blocks_for(cells * G * kWarpLanes), kThreads, 0, stream>>>(
      reinterpret_cast<const __half*>(a.cache), a.write_slot, a.data,
      reinterpret_cast<__half*>(a.params), cells, a.capacity, a.head_dim, G);
  OFFGEN_CUDA_CHECK_LAUNCH();
}

}  // namespace offgen::kernels::cuda
