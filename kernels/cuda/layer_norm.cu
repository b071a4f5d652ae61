// CUDA layer norm (semantics: kernels/layer_norm_args.h): fp32 two-pass statistics (mean, then the
// mean of squared deviations), fp32 affine step, one rounding to fp16.
//
// One block per row. The row is read three times (sum, centred squares, output) straight from
// global memory: only the first pass reaches DRAM, since a row (<= tens of KB) is still in L1/L2
// for the next two. That keeps a single code path for every dim, with no shared-memory or register
// staging sized for a maximum row length.
#include "kernels/cuda/layer_norm.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "engine/core/cuda_check.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/half_vector.cuh"

namespace offgen::kernels::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kMaxThreads = 512;
// At most this many blocks (rows is 64-bit, a grid's x size is not); a grid-stride loop covers the
// remaining rows. 65535 blocks already fill an H100 many times over.
constexpr std::int64_t kMaxBlocks = 65535;

// kVec consecutive halves, aligned so one load / store moves them all (kVec = 8: 16 bytes).
// Takes the vector by value: the caller's copy is one whole-vector load (a reference into global
// memory lets nvcc split it into per-__half loads).
template <int kVec>
__device__ void to_floats(const HalfVec<kVec> h, float (&out)[kVec]) {
#pragma unroll
  for (int k = 0; k < kVec; ++k) out[k] = __half2float(h.h[k]);
}

// gamma / beta values of vector v in fp32; a null pointer (no affine parameters) reads as `absent`.
template <int kVec>
__device__ void affine_param(const HalfVec<kVec>* p, int v, float absent, float (&out)[kVec]) {
  if (p != nullptr) {
    to_floats<kVec>(p[v], out);
  } else {
#pragma unroll
    for (int k = 0; k < kVec; ++k) out[k] = absent;
  }
}

// x and y may alias, so neither is __restrict__: every read of a row happens before the second
// block_sum's barrier, and the output pass reads and writes each element from the same thread.
template <int kVec>
__global__ void __launch_bounds__(kMaxThreads)
    layer_norm_kernel(const __half* x, const __half* gamma, const __half* beta, __half* y,
                      std::int64_t rows, int dim, float eps) {
  using Vec = HalfVec<kVec>;
  const int vecs = dim / kVec;
  const int first = static_cast<int>(threadIdx.x);
  const int stride = static_cast<int>(blockDim.x);
  const auto* g = reinterpret_cast<const Vec*>(gamma);
  const auto* b = reinterpret_cast<const Vec*>(beta);
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    // Whole-vector accesses through Vec pointers (not per-__half ones) are what nvcc reliably
    // turns into single 16-byte loads and stores.
    const auto* in = reinterpret_cast<const Vec*>(x + row * dim);
    auto* out = reinterpret_cast<Vec*>(y + row * dim);

    float sum = 0.0f;
    for (int v = first; v < vecs; v += stride) {
      float a[kVec];
      to_floats<kVec>(in[v], a);
#pragma unroll
      for (int k = 0; k < kVec; ++k) sum += a[k];
    }
    const float mean = block_sum(sum) / static_cast<float>(dim);

    // Second pass over the centred values: no cancellation from E[x^2] - E[x]^2.
    float squares = 0.0f;
    for (int v = first; v < vecs; v += stride) {
      float a[kVec];
      to_floats<kVec>(in[v], a);
#pragma unroll
      for (int k = 0; k < kVec; ++k) squares += (a[k] - mean) * (a[k] - mean);
    }
    // Biased variance, as torch.nn.LayerNorm; 1 / sqrt (both correctly rounded) as on the CPU.
    const float inv_std = 1.0f / sqrtf(block_sum(squares) / static_cast<float>(dim) + eps);

    for (int v = first; v < vecs; v += stride) {
      float a[kVec];
      float scale[kVec];
      float shift[kVec];
      to_floats<kVec>(in[v], a);
      affine_param<kVec>(g, v, 1.0f, scale);
      affine_param<kVec>(b, v, 0.0f, shift);
      Vec result;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        result.h[k] = __float2half_rn((a[k] - mean) * inv_std * scale[k] + shift[k]);
      }
      out[v] = result;
    }
  }
}

template <int kVec>
void launch_layer_norm(const __half* x, const __half* gamma, const __half* beta, __half* y,
                       std::int64_t rows, int dim, float eps, cudaStream_t stream) {
  // One thread per vector, in whole warps (block_sum needs them), at most kMaxThreads (the rest
  // loop): dim 768 gets 96 threads of one 16-byte vector each, dim 12288 gets 512 of three.
  const int vecs = dim / kVec;
  const int threads = std::clamp((vecs + kWarp - 1) / kWarp * kWarp, kWarp, kMaxThreads);
  const auto blocks = static_cast<unsigned>(std::min(rows, kMaxBlocks));
  layer_norm_kernel<kVec><<<blocks, threads, 0, stream>>>(x, gamma, beta, y, rows, dim, eps);
  OFFGEN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void layer_norm(const LayerNormArgs& args, cudaStream_t stream) {
  const std::int64_t rows = args.rows;
  const int dim = args.dim;
  const float eps = args.eps;
  if (rows <= 0 || dim <= 0) return;
  const auto* dx = reinterpret_cast<const __half*>(args.x);
  const auto* dg = reinterpret_cast<const __half*>(args.gamma);
  const auto* db = reinterpret_cast<const __half*>(args.beta);
  auto* dy = reinterpret_cast<__half*>(args.y);
  switch (pick_vec(dim, {args.x, args.gamma, args.beta, args.y})) {
    case 8:
      launch_layer_norm<8>(dx, dg, db, dy, rows, dim, eps, stream);
      break;
    case 4:
      launch_layer_norm<4>(dx, dg, db, dy, rows, dim, eps, stream);
      break;
    case 2:
      launch_layer_norm<2>(dx, dg, db, dy, rows, dim, eps, stream);
      break;
    default:
      launch_layer_norm<1>(dx, dg, db, dy, rows, dim, eps, stream);
      break;
  }
}

}  // namespace offgen::kernels::cuda
