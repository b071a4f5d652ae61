// CUDA gated-MLP activation (semantics: kernels/gated_mlp_args.h): a flat grid-stride loop over
// 16-byte vectors of each row's gate and up halves when ffn and the pointers allow it; purely
// memory-bound.
//
// exp is a copy of the CPU's fast_exp (kernels/cpu/vector_math.h) written with the _rn
// intrinsics, which nvcc never contracts into FMAs, so every step rounds as on the CPU (built with
// -ffp-contract=off there) and the outputs agree bit for bit. Keep the two in step.
#include "kernels/cuda/gated_mlp.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "engine/core/cuda_check.h"
#include "kernels/cuda/half_vector.cuh"

namespace offgen::kernels::cuda {
namespace {

constexpr int kThreads = 256;
// ~4x what an H100 holds at once; larger buffers are covered by the grid-stride loop.
constexpr std::int64_t kMaxBlocks = 4096;

// kernels/cpu/vector_math.h's fast_exp, operation for operation.
__device__ float fast_exp(float x) {
  const float t = __fmul_rn(x, 1.44269504088896341f);
  const float clamped = t < -126.0f ? -126.0f : (t > 127.0f ? 127.0f : t);
  const float n = __fsub_rn(__fadd_rn(clamped, 12582912.0f), 12582912.0f);
  const float r = __fsub_rn(__fsub_rn(x, __fmul_rn(n, 0.693145751953125f)),
                            __fmul_rn(n, 1.42860682030941723e-6f));
  float p = 1.0f / 5040.0f;
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 720.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 120.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 24.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f / 6.0f);
  p = __fadd_rn(__fmul_rn(p, r), 0.5f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f);
  p = __fadd_rn(__fmul_rn(p, r), 1.0f);
  const float scale = __int_as_float((static_cast<int>(n) + 127) << 23);
  float result = __fmul_rn(p, scale);
  result = x < -87.3f ? 0.0f : result;
  result = x > 88.7f ? __int_as_float(0x7f800000) : result;
  return x != x ? x : result;
}

template <int kVec>
__global__ void __launch_bounds__(kThreads)
    silu_mul_kernel(const __half* __restrict__ gate_up, __half* __restrict__ out, std::int64_t rows,
                    int ffn) {
  using Vec = HalfVec<kVec>;
  const int vecs_per_row = ffn / kVec;
  const std::int64_t vecs = rows * vecs_per_row;
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t v = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; v < vecs;
       v += stride) {
    const std::int64_t row = v / vecs_per_row;
    const std::int64_t column = (v % vecs_per_row) * kVec;
    const __half* gate = gate_up + row * 2 * ffn + column;
    const Vec g = *reinterpret_cast<const Vec*>(gate);
    const Vec u = *reinterpret_cast<const Vec*>(gate + ffn);
    Vec result;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const float x = __half2float(g.h[k]);
      const __half silu = __float2half_rn(__fdiv_rn(x, __fadd_rn(1.0f, fast_exp(-x))));
      // fp16 · fp16 is exact in fp32: one rounding.
      result.h[k] = __float2half_rn(__half2float(silu) * __half2float(u.h[k]));
    }
    *reinterpret_cast<Vec*>(out + row * ffn + column) = result;
  }
}

template <int kVec>
void launch_silu_mul(const __half* gate_up, __half* out, std::int64_t rows, int ffn,
                     cudaStream_t stream) {
  const std::int64_t vecs = rows * (ffn / kVec);
  const auto blocks = static_cast<unsigned>(std::min((vecs + kThreads - 1) / kThreads, kMaxBlocks));
  silu_mul_kernel<kVec><<<blocks, kThreads, 0, stream>>>(gate_up, out, rows, ffn);
  OFFGEN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void silu_mul(const SiluMulArgs& args, cudaStream_t stream) {
  const std::int64_t rows = args.rows;
  const int ffn = args.ffn;
  if (rows <= 0 || ffn <= 0) return;
  const auto* gate_up = reinterpret_cast<const __half*>(args.gate_up);
  auto* out = reinterpret_cast<__half*>(args.out);
  // A vector width that divides ffn keeps every row's gate, up and output starts aligned.
  switch (pick_vec(ffn, {args.gate_up, args.out})) {
    case 8:
      launch_silu_mul<8>(gate_up, out, rows, ffn, stream);
      break;
    case 4:
      launch_silu_mul<4>(gate_up, out, rows, ffn, stream);
      break;
    case 2:
      launch_silu_mul<2>(gate_up, out, rows, ffn, stream);
      break;
    default:
      launch_silu_mul<1>(gate_up, out, rows, ffn, stream);
      break;
  }
}

}  // namespace offgen::kernels::cuda
