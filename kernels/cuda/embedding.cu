// CUDA token and position embeddings (semantics: kernels/embedding_args.h): a row gather from the
// token table, and the in-place add of learned position rows (fp32 add, one rounding to fp16).
// One block per output row; each thread moves 16-byte vectors when the row length and pointers
// allow it, so both ops run at copy bandwidth.
#include "kernels/cuda/embedding.h"

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
// At most this many blocks (n is 64-bit, a grid's x size is not); a grid-stride loop covers the
// remaining rows. 65535 blocks already fill an H100 many times over.
constexpr std::int64_t kMaxBlocks = 65535;

// Threads per row: one per vector, in whole warps, at most kMaxThreads (the rest loop).
int row_threads(int dim, int vec) {
  const int vecs = dim / vec;
  return std::clamp((vecs + kWarp - 1) / kWarp * kWarp, kWarp, kMaxThreads);
}

unsigned row_blocks(std::int64_t n) {
  return static_cast<unsigned>(std::min(n, kMaxBlocks));
}

template <int kVec>
__global__ void __launch_bounds__(kMaxThreads)
    gather_rows_kernel(const __half* table, int dim, const std::int32_t* ids, std::int64_t n,
                       __half* out) {
  const int vecs = dim / kVec;
  for (std::int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    // Precondition (as on the CPU): 0 <= ids[i] < table_rows; the engine validates ids.
    const auto* src = reinterpret_cast<const HalfVec<kVec>*>(table + std::int64_t{ids[i]} * dim);
    auto* dst = reinterpret_cast<HalfVec<kVec>*>(out + i * dim);
    for (int v = threadIdx.x; v < vecs; v += blockDim.x) dst[v] = src[v];
  }
}

template <int kVec>
__global__ void __launch_bounds__(kMaxThreads)
    add_position_embeddings_kernel(__half* x, const __half* table, int dim,
                                   const std::int32_t* positions, std::int64_t n, int offset) {
  const int vecs = dim / kVec;
  for (std::int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    // Padding tokens carry position -1 (Hugging Face), so they read row offset - 1.
    const std::int64_t row = std::int64_t{positions[i]} + offset;
    const auto* src = reinterpret_cast<const HalfVec<kVec>*>(table + row * dim);
    auto* dst = reinterpret_cast<HalfVec<kVec>*>(x + i * dim);
    for (int v = threadIdx.x; v < vecs; v += blockDim.x) {
      HalfVec<kVec> a = dst[v];
      const HalfVec<kVec> b = src[v];
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        a.h[k] = __float2half_rn(__half2float(a.h[k]) + __half2float(b.h[k]));
      }
      dst[v] = a;
    }
  }
}

template <int kVec>
void launch_gather_rows(const __half* table, int dim, const std::int32_t* ids, std::int64_t n,
                        __half* out, cudaStream_t stream) {
  gather_rows_kernel<kVec>
      <<<row_blocks(n), row_threads(dim, kVec), 0, stream>>>(table, dim, ids, n, out);
  OFFGEN_CUDA_CHECK_LAUNCH();
}

template <int kVec>
void launch_add_position_embeddings(__half* x, const __half* table, int dim,
                                    const std::int32_t* positions, std::int64_t n, int offset,
                                    cudaStream_t stream) {
  add_position_embeddings_kernel<kVec>
      <<<row_blocks(n), row_threads(dim, kVec), 0, stream>>>(x, table, dim, positions, n, offset);
  OFFGEN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void gather_rows(const GatherRowsArgs& args, cudaStream_t stream) {
  const int dim = args.dim;
  const std::int32_t* ids = args.ids;
  const std::int64_t n = args.rows;
  if (n <= 0 || dim <= 0) return;
  const auto* t = reinterpret_cast<const __half*>(args.table);
  auto* o = reinterpret_cast<__half*>(args.out);
  switch (pick_vec(dim, {args.table, args.out})) {
    case 8:
      launch_gather_rows<8>(t, dim, ids, n, o, stream);
      break;
    case 4:
      launch_gather_rows<4>(t, dim, ids, n, o, stream);
      break;
    case 2:
      launch_gather_rows<2>(t, dim, ids, n, o, stream);
      break;
    default:
      launch_gather_rows<1>(t, dim, ids, n, o, stream);
      break;
  }
}

void add_position_embeddings(const PositionEmbeddingArgs& args, cudaStream_t stream) {
  const int dim = args.dim;
  const std::int32_t* positions = args.positions;
  const std::int64_t n = args.rows;
  const int offset = args.offset;
  if (n <= 0 || dim <= 0) return;
  auto* dx = reinterpret_cast<__half*>(args.x);
  const auto* t = reinterpret_cast<const __half*>(args.table);
  switch (pick_vec(dim, {args.x, args.table})) {
    case 8:
      launch_add_position_embeddings<8>(dx, t, dim, positions, n, offset, stream);
      break;
    case 4:
      launch_add_position_embeddings<4>(dx, t, dim, positions, n, offset, stream);
      break;
    case 2:
      launch_add_position_embeddings<2>(dx, t, dim, positions, n, offset, stream);
      break;
    default:
      launch_add_position_embeddings<1>(dx, t, dim, positions, n, offset, stream);
      break;
  }
}

}  // namespace offgen::kernels::cuda
