// CUDA rotary position embedding (semantics: kernels/rotary_args.h). One block per token row: its
// threads first put the row's fp16 cos / sin (held in fp32) in shared memory, computed once per
// (row, i) with the accurate cosf / sinf, then rotate every q and k head with them; each thread
// takes kVec consecutive pairs (i, i + D/2) of a head as two vector loads and stores.
//
// Each product is rounded to fp16 before the add (__float2half_rn in between keeps nvcc from
// fusing them into an FMA), as the reference rounds them.
#include "kernels/cuda/rotary.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "engine/core/cuda_check.h"
#include "kernels/cuda/half_vector.cuh"

namespace offgen::kernels::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kMaxThreads = 256;
// At most this many blocks (rows is 64-bit, a grid's x size is not); a grid-stride loop covers the
// remaining rows.
constexpr std::int64_t kMaxBlocks = 65535;

__device__ float round_to_half(float v) {
  return __half2float(__float2half_rn(v));
}

// Shared memory: cos in [0, half_dim), sin in [half_dim, head_dim), fp16 values as floats.
template <int kVec>
__global__ void __launch_bounds__(kMaxThreads)
    rotary_kernel(__half* qkv, const std::int32_t* positions, const float* inv_freq,
                  float attention_scaling, std::int64_t rows, int rotated_heads, std::int64_t width,
                  int head_dim) {
  extern __shared__ float cos_sin[];
  using Vec = HalfVec<kVec>;
  const int half_dim = head_dim / 2;
  const int vecs_per_head = half_dim / kVec;
  const int work = rotated_heads * vecs_per_head;
  const float* c = cos_sin;
  const float* s = cos_sin + half_dim;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float position = static_cast<float>(max(positions[row], 0));
    for (int i = threadIdx.x; i < half_dim; i += blockDim.x) {
      const float angle = position * inv_freq[i];  // fp32 product
      cos_sin[i] = round_to_half(cosf(angle) * attention_scaling);
      cos_sin[half_dim + i] = round_to_half(sinf(angle) * attention_scaling);
    }
    __syncthreads();
    for (int w = threadIdx.x; w < work; w += blockDim.x) {
      const int head = w / vecs_per_head;
      const int i0 = (w % vecs_per_head) * kVec;
      __half* x = qkv + row * width + std::int64_t{head} * head_dim + i0;
      auto* first = reinterpret_cast<Vec*>(x);
      auto* second = reinterpret_cast<Vec*>(x + half_dim);
      Vec a = *first;
      Vec b = *second;
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float x1 = __half2float(a.h[k]);
        const float x2 = __half2float(b.h[k]);
        const float ci = c[i0 + k];
        const float si = s[i0 + k];
        a.h[k] = __float2half_rn(round_to_half(x1 * ci) - round_to_half(x2 * si));
        b.h[k] = __float2half_rn(round_to_half(x2 * ci) + round_to_half(x1 * si));
      }
      *first = a;
      *second = b;
    }
    __syncthreads();  // the next row's table overwrites this one
  }
}

template <int kVec>
void launch_rotary(const RotaryArgs& args, cudaStream_t stream) {
  const int rotated_heads = args.heads + args.kv_heads;
  const int work = rotated_heads * (args.head_dim / 2 / kVec);
  const int threads = std::clamp((work + kWarp - 1) / kWarp * kWarp, kWarp, kMaxThreads);
  const auto blocks = static_cast<unsigned>(std::min(args.rows, kMaxBlocks));
  const std::int64_t width = std::int64_t{args.heads + 2 * args.kv_heads} * args.head_dim;
  const std::size_t shared = sizeof(float) * static_cast<std::size_t>(args.head_dim);
  rotary_kernel<kVec><<<blocks, threads, shared, stream>>>(
      reinterpret_cast<__half*>(args.qkv), args.positions, args.inv_freq, args.attention_scaling,
      args.rows, rotated_heads, width, args.head_dim);
  OFFGEN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void rotary(const RotaryArgs& args, cudaStream_t stream) {
  OFFGEN_CUDA_REQUIRE(args.head_dim % 2 == 0, "rotary needs an even head_dim");
  if (args.rows <= 0 || args.head_dim <= 0 || args.heads + args.kv_heads <= 0) return;
  // Vectors of pairs: half_dim a multiple of kVec and qkv aligned to it make every head's two
  // halves aligned too (a row is a whole number of heads).
  switch (pick_vec(args.head_dim / 2, {args.qkv})) {
    case 8:
      launch_rotary<8>(args, stream);
      break;
    case 4:
      launch_rotary<4>(args, stream);
      break;
    case 2:
      launch_rotary<2>(args, stream);
      break;
    default:
      launch_rotary<1>(args, stream);
      break;
  }
}

}  // namespace offgen::kernels::cuda
