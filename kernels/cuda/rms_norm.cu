// CUDA RMS norm (semantics: kernels/rms_norm_args.h). One warp per row: lane k sums x[j]^2 for
// j ≡ k (mod 32) in increasing j and the warp's butterfly (offsets 16, 8, 4, 2, 1) halves the 32
// partials, which is exactly the order the header fixes; 1 / sqrtf and the divisions are IEEE
// (nvcc's default -prec-div / -prec-sqrt), so every bit matches the CPU.
//
// Each warp access covers 64 contiguous bytes of a row (2-byte loads): wider per-lane vectors
// would hand a lane other elements than the header's j % 32. A second pass re-reads the row from
// L1 / L2 for the output, as layer_norm does.
#include "kernels/cuda/rms_norm.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "engine/core/cuda_check.h"
#include "kernels/cuda/block_reduce.cuh"

namespace offgen::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kThreads = kWarpsPerBlock * kWarpLanes;
// At most this many blocks (rows is 64-bit, a grid's x size is not); a grid-stride loop covers the
// remaining rows.
constexpr std::int64_t kMaxBlocks = 65535;

// x and y may alias, so neither is __restrict__: every lane's reads of the row happen before the
// butterfly (whose shuffles wait for the whole warp), and afterwards a lane reads and writes only
// its own elements.
__global__ void __launch_bounds__(kThreads)
    rms_norm_kernel(const __half* x, const __half* gamma, __half* y, std::int64_t rows, int dim,
                    float eps) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpLanes;
  const int warp = static_cast<int>(threadIdx.x) / kWarpLanes;
  const std::int64_t stride = std::int64_t{gridDim.x} * kWarpsPerBlock;
  for (std::int64_t row = std::int64_t{blockIdx.x} * kWarpsPerBlock + warp; row < rows;
       row += stride) {
    const __half* in = x + row * dim;
    __half* out = y + row * dim;
    float squares = 0.0f;
#pragma unroll 4
    for (int j = lane; j < dim; j += kWarpLanes) {
      const float v = __half2float(in[j]);
      squares += v * v;  // exact square: a contracted FMA gives the same sum
    }
    const float mean_square = warp_sum(squares) / static_cast<float>(dim);
    const float inv_rms = 1.0f / sqrtf(mean_square + eps);
#pragma unroll 4
    for (int j = lane; j < dim; j += kWarpLanes) {
      // half(x · rsqrt(...)) first, as Hugging Face rounds before the weight; fp16 · fp16 is exact
      // in fp32, so the output is rounded once more.
      const __half normalized = __float2half_rn(__half2float(in[j]) * inv_rms);
      out[j] = __float2half_rn(__half2float(gamma[j]) * __half2float(normalized));
    }
  }
}

}  // namespace

void rms_norm(const RmsNormArgs& args, cudaStream_t stream) {
  const std::int64_t rows = args.rows;
  const int dim = args.dim;
  if (rows <= 0 || dim <= 0) return;
  const std::int64_t blocks = std::min((rows + kWarpsPerBlock - 1) / kWarpsPerBlock, kMaxBlocks);
  rms_norm_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      reinterpret_cast<const __half*>(args.x), reinterpret_cast<const __half*>(args.gamma),
      reinterpret_cast<__half*>(args.y), rows, dim, args.eps);
  OFFGEN_CUDA_CHECK_LAUNCH();
}

}  // namespace offgen::kernels::cuda
