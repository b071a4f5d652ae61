// CUDA KV-cache writes (semantics: kernels/kv_cache_args.h): store_prefill_kv copies each prompt
// token's k / v head rows into the slot the policy chose, append_kv the one new token of each
// sequence into its write slot.
//
// Both are one row scatter: entry (b, c, i) of `slots` ([batch, kv_heads, tokens]) is the cache
// slot of token i of sequence b in kv head c, or -1 for "not cached". append_kv is the case
// tokens = 1, for which write_slot[b * kv_heads + c] has exactly that layout. One thread moves one
// vector (up to 8 halves, 16 bytes) of a k row and the same vector of the v row; a grid-stride loop
// covers any size.
//
// A slot outside [0, capacity) is skipped: the CPU path throws on it, but a kernel cannot, and
// skipping is the one choice that never writes outside the (sequence, kv head) cache.
#include "kernels/cuda/kv_cache.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "engine/core/cuda_check.h"
#include "kernels/cuda/half_vector.cuh"

namespace offgen::kernels::cuda {
namespace {

constexpr int kThreads = 256;
// The grid-stride loop covers the rest; 65535 blocks of 256 threads fill any GPU many times over.
constexpr std::int64_t kMaxBlocks = 65535;

// The shape of one scatter: qkv rows of (heads + 2 * kv_heads) * head_dim halves, k of kv head c
// at column (heads + c) * head_dim, its v kv_heads * head_dim further.
struct ScatterShape {
  int batch;
  int tokens;
  int heads;     // query heads
  int kv_heads;  // cache heads
  int head_dim;
  int capacity;
};

// kVec consecutive halves, aligned so one load / store moves them all (kVec = 8: 16 bytes).
template <int kVec>
__global__ void __launch_bounds__(kThreads)
    scatter_kv_kernel(const __half* __restrict__ qkv, const std::int32_t* __restrict__ slots,
                      ScatterShape shape, __half* __restrict__ k_cache,
                      __half* __restrict__ v_cache) {
  const int head_dim = shape.head_dim;
  const int tokens = shape.tokens;
  const int kv_heads = shape.kv_heads;
  const int capacity = shape.capacity;
  const int vecs = head_dim / kVec;                            // vectors per head row
  const std::int64_t kvd = std::int64_t{kv_heads} * head_dim;  // k head c to v head c
  const std::int64_t stride = std::int64_t{shape.heads} * head_dim + 2 * kvd;
  const std::int64_t total = std::int64_t{shape.batch} * kv_heads * tokens * vecs;
  const std::int64_t step = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < total; t += step) {
    const std::int64_t row = t / vecs;  // (b * kv_heads + c) * tokens + i: the index into `slots`
    const int vec = static_cast<int>(t % vecs);
    const std::int32_t slot = slots[row];
    if (slot < 0 || slot >= capacity) continue;
    const std::int64_t bc = row / tokens;
    const std::int64_t i = row % tokens;
    const std::int64_t b = bc / kv_heads;
    const std::int64_t c = bc % kv_heads;
    const std::int64_t column = (shape.heads + c) * head_dim + std::int64_t{vec} * kVec;
    const __half* k = qkv + (b * tokens + i) * stride + column;  // this token's k of kv head c
    const std::int64_t dst = (bc * capacity + slot) * head_dim + std::int64_t{vec} * kVec;
    *reinterpret_cast<HalfVec<kVec>*>(k_cache + dst) = *reinterpret_cast<const HalfVec<kVec>*>(k);
    *reinterpret_cast<HalfVec<kVec>*>(v_cache + dst) =
        *reinterpret_cast<const HalfVec<kVec>*>(k + kvd);
  }
}

template <int kVec>
void launch_scatter(const __half* qkv, const std::int32_t* slots, const ScatterShape& shape,
                    __half* k_cache, __half* v_cache, cudaStream_t stream) {
  const std::int64_t total =
      std::int64_t{shape.batch} * shape.kv_heads * shape.tokens * (shape.head_dim / kVec);
  const auto blocks =
      static_cast<unsigned>(std::min((total + kThreads - 1) / kThreads, kMaxBlocks));
  scatter_kv_kernel<kVec><<<blocks, kThreads, 0, stream>>>(qkv, slots, shape, k_cache, v_cache);
  OFFGEN_CUDA_CHECK_LAUNCH();
}

void scatter_kv(const Half* qkv, const std::int32_t* slots, const ScatterShape& shape,
                Half* k_cache, Half* v_cache, cudaStream_t stream) {
  if (shape.batch <= 0 || shape.tokens <= 0 || shape.heads <= 0 || shape.head_dim <= 0 ||
      shape.capacity <= 0) {
    return;
  }
  OFFGEN_CUDA_REQUIRE(shape.kv_heads > 0 && shape.heads % shape.kv_heads == 0,
                      "kv cache write: the query heads do not split into groups over the kv heads");
  const auto* q = reinterpret_cast<const __half*>(qkv);
  auto* k = reinterpret_cast<__half*>(k_cache);
  auto* v = reinterpret_cast<__half*>(v_cache);
  switch (pick_vec(shape.head_dim, {qkv, k_cache, v_cache})) {
    case 8:
      launch_scatter<8>(q, slots, shape, k, v, stream);
      break;
    case 4:
      launch_scatter<4>(q, slots, shape, k, v, stream);
      break;
    case 2:
      launch_scatter<2>(q, slots, shape, k, v, stream);
      break;
    default:
      launch_scatter<1>(q, slots, shape, k, v, stream);
      break;
  }
}

}  // namespace

void store_prefill_kv(const StorePrefillKvArgs& a, cudaStream_t stream) {
  scatter_kv(a.qkv, a.token_slot,
             {a.batch, a.seq, a.heads, a.kv_head_count(), a.head_dim, a.capacity}, a.k_cache,
             a.v_cache, stream);
}

void append_kv(const AppendKvArgs& a, cudaStream_t stream) {
  scatter_kv(a.qkv, a.write_slot, {a.batch, 1, a.heads, a.kv_head_count(), a.head_dim, a.capacity},
             a.k_cache, a.v_cache, stream);
}

}  // namespace offgen::kernels::cuda
