// CUDA decode attention (semantics: kernels/attention_args.h, kernels/cpu/attention.h): one query
// per (sequence, query head) over its kv head's cache slots [0, slot_count[b]) (query head h reads
// kv head h / (heads / kv_heads)); fp32 scores, softmax and p·v.
//
// Memory-bound: each cached k and v row is read exactly once, with 16-byte loads. A block owns a
// chunk of one (sequence, head)'s slots ("split"); the caller plans the chunks once per cache shape
// (kernels/decode_split.h) so that even batch 1 launches several blocks per SM (flash-decoding).
// Within a block:
//   1. scores: a group of L lanes reads one k row (L = head_dim / 8 rounded up to a power of two,
//      capped at 32; a lane holds up to two 8-half pieces of the row), dots it with the scaled q
//      and sums over the group with shuffles; scores go to shared memory.
//   2. the chunk's max m and sum l of exp(s - m), by fixed-order block reductions.
//   3. p·v: the same lane groups read v rows and accumulate p·v per lane in fp32; the groups of a
//      warp, then the warps, are summed in a fixed order.
// With one split the block writes the output (and the probabilities) directly. With several, each
// block writes (m, l, unnormalised p·v) to the caller's scratch and a combine kernel merges the
// splits in split order — deterministic, no atomics. Probabilities then go out as raw scores first
// and are normalised by the combine kernel, which alone knows the global max and sum.
// Probabilities are rows per query head: the probs rows themselves without GQA; under GQA rows in
// the caller's scratch, which a group-sum kernel adds, in head order, into each kv head's row.
// (The query heads of a group read the same k and v rows in neighbouring blocks, so the repeats
// mostly hit L2.)
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "engine/core/cuda_check.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/block_reduce.cuh"

namespace offgen::kernels::cuda {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * kWarp;
constexpr int kPiece = 8;             // halves per 16-byte load
constexpr int kMaxPiecesPerLane = 2;  // so head_dim <= 32 lanes * 2 pieces * 8 = 512
constexpr int kMaxHeadDim = kWarp * kMaxPiecesPerLane * kPiece;
// Rows each lane group loads before it uses any: four 16-byte loads in flight per lane and piece,
// which is what keeps enough bytes in flight per SM for HBM.
constexpr int kUnroll = 4;
// Slots per block: their fp32 scores live in shared memory (16 KiB).
constexpr int kMaxChunk = kDecodeMaxChunk;
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
// Grid of the grid-stride group sum: 65535 blocks of 128 threads cover any batch in a few passes.
constexpr std::int64_t kMaxGridStrideBlocks = 65535;

// Eight halves: one 16-byte load.
struct alignas(16) Half8 {
  __half2 v[4];
};

template <bool kAligned>
__device__ Half8 load8(const __half* p) {
  if constexpr (kAligned) {
    return *reinterpret_cast<const Half8*>(p);
  } else {
    Half8 r;
#pragma unroll
    for (int k = 0; k < 4; ++k) r.v[k] = __halves2half2(p[2 * k], p[2 * k + 1]);
    return r;
  }
}

__device__ Half8 zero8() {
  Half8 r;
#pragma unroll
  for (int k = 0; k < 4; ++k) r.v[k] = __float2half2_rn(0.0f);
  return r;
}

// Block-wide max / sum returned to every thread. The barriers order every earlier shared-memory
// write before anything after the call, and make back-to-back calls safe.
template <bool kMax>
__device__ float block_reduce(float v) {
  __shared__ float partial[kWarps];
  __shared__ float total;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  v = kMax ? warp_max(v) : warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = partial[0];
    for (int w = 1; w < kWarps; ++w) t = kMax ? fmaxf(t, partial[w]) : t + partial[w];
    total = t;
  }
  __syncthreads();
  return total;
}

// What the host decided, shared by both kernels.
struct Plan {
  int pieces;         // head_dim / 8
  int lanes_per_row;  // L: a power of two >= pieces, at most 32
  int chunk;          // slots per split (the caller's DecodeSplit)
  int splits;         // ceil(capacity / chunk)
};

// The slots (sequence b, kv head c) attends: slot_count clamped to [0, capacity] (the CPU path
// checks it); with page selection, the valid slots of its chosen pages — ascending, so only the
// last can be partly filled — counted as one run (slot j of it is slot_of's).
__device__ int attended(const DecodeAttentionArgs& a, int b, int c) {
  const int count = min(max(a.slot_count[b], 0), a.capacity);
  if (a.pages == nullptr) return count;
  const std::int64_t bc = std::int64_t{b} * a.kv_head_count() + c;
  const int chosen = a.page_count[bc];
  if (chosen <= 0) return 0;
  const int last = a.pages[bc * a.max_selected + chosen - 1];
  return (chosen - 1) * a.page_size + min(max(count - last * a.page_size, 0), a.page_size);
}

// The cache slot of the j-th attended slot of (b, c).
__device__ int slot_of(const DecodeAttentionArgs& a, int b, int c, int j) {
  if (a.pages == nullptr) return j;
  const std::int64_t bc = std::int64_t{b} * a.kv_head_count() + c;
  return a.pages[bc * a.max_selected + j / a.page_size] * a.page_size + j % a.page_size;
}

// One block per (split, sequence, query head); blockIdx.x = (b * heads + h) * splits + split.
// part_ml [bh * splits][2] and part_acc [bh * splits][head_dim] are only used when splits > 1.
// head_probs: [batch, heads, capacity] probability rows per query head, or null (not wanted).
template <bool kAligned>
__global__ void __launch_bounds__(kThreads)
    decode_split_kernel(DecodeAttentionArgs a, Plan plan, float* part_ml, float* part_acc,
                        float* head_probs) {
  __shared__ float scores[kMaxChunk];
  __shared__ float warp_acc[kWarps][kMaxHeadDim];

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % kWarp;
  const int warp = tid / kWarp;
  const int split = static_cast<int>(blockIdx.x % static_cast<unsigned>(plan.splits));
  const std::int64_t bh = blockIdx.x / static_cast<unsigned>(plan.splits);
  const int b = static_cast<int>(bh / a.heads);
  const int h = static_cast<int>(bh % a.heads);
  const int dim = a.head_dim;
  const std::int64_t hd = std::int64_t{a.heads} * dim;
  const int kv_heads = a.kv_head_count();
  const int c = h / (a.heads / kv_heads);  // the kv head this query head reads

  const int count = attended(a, b, c);
  const int s0 = split * plan.chunk;  // < capacity: splits = ceil(capacity / chunk)
  const int range_end = static_cast<int>(std::min<std::int64_t>(
      std::int64_t{s0} + plan.chunk, a.capacity));  // slots whose probs this block writes
  const int s_end = min(range_end, count);          // slots this block attends: [s0, s_end)
  const std::int64_t row0 = (std::int64_t{b} * kv_heads + c) * a.capacity;  // cache row of slot 0
  float* const probs = head_probs != nullptr ? head_probs + bh * a.capacity : nullptr;
  __half* const out = reinterpret_cast<__half*>(a.out) + b * hd + std::int64_t{h} * dim;

  if (probs != nullptr && a.pages == nullptr) {  // with pages, launch zeroed the whole rows
    for (int j = max(s0, count) + tid; j < range_end; j += kThreads) probs[j] = 0.0f;
  }
  if (s0 >= s_end) {  // nothing attended here; with splits the combine kernel writes the output
    if (plan.splits == 1) {
      for (int d = tid; d < dim; d += kThreads) out[d] = __float2half_rn(0.0f);
    }
    return;
  }

  const int group = plan.lanes_per_row;
  const int sub = lane % group;          // which pieces of a row this lane reads
  const int row_in_warp = lane / group;  // which row of the warp's step
  const int rows_per_warp = kWarp / group;
  const int rows_per_step = kWarps * rows_per_warp;
  const int first = s0 + warp * rows_per_warp + row_in_warp;

  // This lane's pieces of q, scaled in fp32 (as the CPU path does); absent pieces are 0.
  float q[kMaxPiecesPerLane][kPiece];
  {
    const __half* q_row = reinterpret_cast<const __half*>(a.qkv) +
                          b * (hd + 2 * std::int64_t{kv_heads} * dim) + std::int64_t{h} * dim;
#pragma unroll
    for (int k = 0; k < kMaxPiecesPerLane; ++k) {
      const int piece = sub + k * group;
      const Half8 raw = piece < plan.pieces ? load8<kAligned>(q_row + piece * kPiece) : zero8();
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float2 f = __half22float2(raw.v[e]);
        q[k][2 * e] = f.x * a.scale;
        q[k][2 * e + 1] = f.y * a.scale;
      }
    }
  }

  // 1. Scores. The loop bound is uniform across a warp (shuffles need every lane); rows past
  //    s_end load nothing and are not stored.
  const __half* k_rows = reinterpret_cast<const __half*>(a.k_cache) + row0 * dim;
  for (int base = first; base - row_in_warp < s_end; base += kUnroll * rows_per_step) {
    Half8 raw[kUnroll][kMaxPiecesPerLane];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int slot = base + u * rows_per_step;
#pragma unroll
      for (int k = 0; k < kMaxPiecesPerLane; ++k) {
        const int piece = sub + k * group;
        raw[u][k] = slot < s_end && piece < plan.pieces
                        ? load8<kAligned>(k_rows + std::int64_t{slot_of(a, b, c, slot)} * dim +
                                          piece * kPiece)
                        : zero8();
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float dot = 0.0f;
#pragma unroll
      for (int k = 0; k < kMaxPiecesPerLane; ++k) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 f = __half22float2(raw[u][k].v[e]);
          dot = fmaf(q[k][2 * e], f.x, dot);
          dot = fmaf(q[k][2 * e + 1], f.y, dot);
        }
      }
      for (int offset = group / 2; offset > 0; offset /= 2) {
        dot += __shfl_xor_sync(kFullMask, dot, offset);
      }
      const int slot = base + u * rows_per_step;
      if (sub == 0 && slot < s_end) {
        scores[slot - s0] = dot;
        // combine normalises it
        if (probs != nullptr && plan.splits > 1) probs[slot_of(a, b, c, slot)] = dot;
      }
    }
  }
  __syncthreads();

  // 2. This chunk's softmax statistics; scores become exp(s - m).
  const int n = s_end - s0;
  float m = kMinusInf;
  for (int j = tid; j < n; j += kThreads) m = fmaxf(m, scores[j]);
  m = block_reduce<true>(m);
  float l = 0.0f;
  for (int j = tid; j < n; j += kThreads) {
    const float p = expf(scores[j] - m);
    scores[j] = p;
    l += p;
  }
  l = block_reduce<false>(l);    // its barriers also publish the p values written above
  const float inv_l = 1.0f / l;  // l >= 1: the max slot contributes exp(0)
  if (probs != nullptr && plan.splits == 1) {
    for (int j = tid; j < n; j += kThreads) probs[slot_of(a, b, c, s0 + j)] = scores[j] * inv_l;
  }

  // 3. p·v.
  const __half* v_rows = reinterpret_cast<const __half*>(a.v_cache) + row0 * dim;
  float acc[kMaxPiecesPerLane][kPiece] = {};
  for (int base = first; base - row_in_warp < s_end; base += kUnroll * rows_per_step) {
    Half8 raw[kUnroll][kMaxPiecesPerLane];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int slot = base + u * rows_per_step;
#pragma unroll
      for (int k = 0; k < kMaxPiecesPerLane; ++k) {
        const int piece = sub + k * group;
        raw[u][k] = slot < s_end && piece < plan.pieces
                        ? load8<kAligned>(v_rows + std::int64_t{slot_of(a, b, c, slot)} * dim +
                                          piece * kPiece)
                        : zero8();
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int slot = base + u * rows_per_step;
      const float p = slot < s_end ? scores[slot - s0] : 0.0f;
#pragma unroll
      for (int k = 0; k < kMaxPiecesPerLane; ++k) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 f = __half22float2(raw[u][k].v[e]);
          acc[k][2 * e] = fmaf(p, f.x, acc[k][2 * e]);
          acc[k][2 * e + 1] = fmaf(p, f.y, acc[k][2 * e + 1]);
        }
      }
    }
  }
  // Sum the row groups of the warp (lanes with the same `sub`), then the warps, in fixed order.
#pragma unroll
  for (int k = 0; k < kMaxPiecesPerLane; ++k) {
#pragma unroll
    for (int e = 0; e < kPiece; ++e) {
      for (int offset = group; offset < kWarp; offset *= 2) {
        acc[k][e] += __shfl_xor_sync(kFullMask, acc[k][e], offset);
      }
    }
  }
  if (row_in_warp == 0) {
#pragma unroll
    for (int k = 0; k < kMaxPiecesPerLane; ++k) {
      const int piece = sub + k * group;
      if (piece < plan.pieces) {
#pragma unroll
        for (int e = 0; e < kPiece; ++e) warp_acc[warp][piece * kPiece + e] = acc[k][e];
      }
    }
  }
  __syncthreads();
  const std::int64_t part = bh * plan.splits + split;
  for (int d = tid; d < dim; d += kThreads) {
    float total = warp_acc[0][d];
    for (int w = 1; w < kWarps; ++w) total += warp_acc[w][d];
    if (plan.splits == 1) {
      out[d] = __float2half_rn(total * inv_l);
    } else {
      part_acc[part * dim + d] = total;
    }
  }
  if (plan.splits > 1 && tid == 0) {
    part_ml[2 * part] = m;
    part_ml[2 * part + 1] = l;
  }
}

// One block per (sequence, query head): merges the splits that attended anything, in split order.
__global__ void __launch_bounds__(kThreads)
    decode_combine_kernel(DecodeAttentionArgs a, Plan plan, const float* part_ml,
                          const float* part_acc, float* head_probs) {
  const int tid = static_cast<int>(threadIdx.x);
  const std::int64_t bh = blockIdx.x;
  const int b = static_cast<int>(bh / a.heads);
  const int h = static_cast<int>(bh % a.heads);
  const int dim = a.head_dim;
  __half* const out =
      reinterpret_cast<__half*>(a.out) + b * std::int64_t{a.heads} * dim + std::int64_t{h} * dim;
  const int c = h / (a.heads / a.kv_head_count());
  const int count = attended(a, b, c);
  const int active = (count + plan.chunk - 1) / plan.chunk;  // splits holding >= 1 slot
  if (active == 0) {  // slot_count 0: zeros (the split blocks already zeroed the probs)
    for (int d = tid; d < dim; d += kThreads) out[d] = __float2half_rn(0.0f);
    return;
  }
  const float* ml = part_ml + 2 * bh * plan.splits;
  const float* acc = part_acc + bh * plan.splits * dim;
  // Every thread derives the same global max and sum (same values, same order).
  float m = kMinusInf;
  for (int s = 0; s < active; ++s) m = fmaxf(m, ml[2 * s]);
  float l = 0.0f;
  for (int s = 0; s < active; ++s) l += ml[2 * s + 1] * expf(ml[2 * s] - m);
  const float inv_l = 1.0f / l;
  for (int d = tid; d < dim; d += kThreads) {
    float total = 0.0f;
    for (int s = 0; s < active; ++s) total += acc[s * std::int64_t{dim} + d] * expf(ml[2 * s] - m);
    out[d] = __float2half_rn(total * inv_l);
  }
  if (head_probs != nullptr) {  // raw scores -> probabilities
    float* const row = head_probs + bh * a.capacity;
    for (int j = tid; j < count; j += kThreads) {
      const int slot = slot_of(a, b, c, j);
      row[slot] = expf(row[slot] - m) * inv_l;
    }
  }
}

// Under GQA: probs[b, c, j] = the sum over g in [0, G), in order, of head_probs[b, c·G + g, j].
// One thread per entry, grid-stride.
__global__ void __launch_bounds__(kThreads)
    group_probs_kernel(const float* __restrict__ head_probs, float* __restrict__ probs,
                       std::int64_t kv_rows, int group, int capacity) {
  const std::int64_t total = kv_rows * capacity;
  const std::int64_t step = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < total; t += step) {
    const std::int64_t row = t / capacity;  // b * kv_heads + c
    const std::int64_t j = t % capacity;
    const float* first = head_probs + row * group * capacity + j;  // query head c·G of sequence b
    float sum = first[0];
    for (int g = 1; g < group; ++g) sum += first[std::int64_t{g} * capacity];
    probs[t] = sum;
  }
}

template <bool kAligned>
void launch(const DecodeAttentionArgs& args, const Plan& plan, cudaStream_t stream) {
  const std::int64_t bh = std::int64_t{args.batch} * args.heads;
  const std::int64_t blocks = bh * plan.splits;
  OFFGEN_CUDA_REQUIRE(blocks <= std::numeric_limits<int>::max(),
                      "decode_attention: too many blocks for one grid");
  // The caller's scratch (decode_split_scratch_bytes): with several splits (m, l) and head_dim
  // partial sums per split; then, under GQA, the per-query-head probability rows.
  float* part_ml = nullptr;
  float* part_acc = nullptr;
  std::int64_t used = 0;
  if (plan.splits > 1) {
    part_ml = args.split_scratch;
    part_acc = part_ml + 2 * blocks;
    used = blocks * (2 + std::int64_t{args.head_dim});
  }
  const int group = args.heads / args.kv_head_count();
  float* const head_probs = args.probs == nullptr ? nullptr
                            : group == 1          ? args.probs
                                                  : args.split_scratch + used;

  if (head_probs != nullptr && args.pages != nullptr) {  // the slots no page chose stay 0
    OFFGEN_CUDA_CHECK(cudaMemsetAsync(
        head_probs, 0, static_cast<std::size_t>(bh) * args.capacity * sizeof(float), stream));
  }
  decode_split_kernel<kAligned><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      args, plan, part_ml, part_acc, head_probs);
  OFFGEN_CUDA_CHECK_LAUNCH();
  if (plan.splits > 1) {
    decode_combine_kernel<<<static_cast<unsigned>(bh), kThreads, 0, stream>>>(args, plan, part_ml,
                                                                              part_acc, head_probs);
    OFFGEN_CUDA_CHECK_LAUNCH();
  }
  if (head_probs != nullptr && group > 1) {
    const std::int64_t kv_rows = std::int64_t{args.batch} * args.kv_head_count();
    const std::int64_t total = kv_rows * args.capacity;
    const auto sum_blocks = static_cast<unsigned>(
        std::min<std::int64_t>((total + kThreads - 1) / kThreads, kMaxGridStrideBlocks));
    group_probs_kernel<<<sum_blocks, kThreads, 0, stream>>>(head_probs, args.probs, kv_rows, group,
                                                            args.capacity);
    OFFGEN_CUDA_CHECK_LAUNCH();
  }
}

bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

}  // namespace

DecodeSplit plan_decode_attention(int batch, int heads, int capacity) {
  int device = 0;
  int sms = 0;
  OFFGEN_CUDA_CHECK(cudaGetDevice(&device));
  OFFGEN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return plan_decode_split(batch, heads, capacity, sms);
}

void decode_attention(const DecodeAttentionArgs& args, cudaStream_t stream) {
  if (args.batch <= 0 || args.heads <= 0) return;
  OFFGEN_CUDA_REQUIRE(
      args.head_dim > 0 && args.head_dim % kPiece == 0 && args.head_dim <= kMaxHeadDim,
      "decode_attention: head_dim must be a multiple of 8 in [8, 512]");
  OFFGEN_CUDA_REQUIRE(args.pages == nullptr || (args.page_count != nullptr && args.page_size > 0 &&
                                                args.max_selected > 0),
                      "decode_attention: page selection needs its counts, a page size and a "
                      "max_selected");
  if (args.capacity <= 0) {  // no slots: every output is 0, and probs has no entries
    OFFGEN_CUDA_CHECK(cudaMemsetAsync(
        args.out, 0,
        static_cast<std::size_t>(args.batch) * args.heads * args.head_dim * sizeof(Half), stream));
    return;
  }

  Plan plan{};
  plan.pieces = args.head_dim / kPiece;
  plan.lanes_per_row = 1;
  while (plan.lanes_per_row < plan.pieces && plan.lanes_per_row < kWarp) plan.lanes_per_row *= 2;

  // The caller's split must cover every slot with chunks that fit shared memory, and bring its
  // scratch when there is more than one.
  const DecodeSplit& split = args.split;
  OFFGEN_CUDA_REQUIRE(split.splits >= 1 && split.chunk >= 1 && split.chunk <= kMaxChunk &&
                          std::int64_t{split.chunk} * split.splits >= args.capacity &&
                          std::int64_t{split.chunk} * (split.splits - 1) < args.capacity,
                      "decode_attention: the split does not cover the capacity (plan it with "
                      "plan_decode_attention)");
  const int kv_heads = args.kv_head_count();
  OFFGEN_CUDA_REQUIRE(kv_heads > 0 && args.heads % kv_heads == 0,
                      "decode_attention: the query heads do not split into groups over the kv "
                      "heads");
  OFFGEN_CUDA_REQUIRE(split.splits == 1 || args.split_scratch != nullptr,
                      "decode_attention: a split of several chunks needs its scratch");
  OFFGEN_CUDA_REQUIRE(
      args.probs == nullptr || kv_heads == args.heads || args.split_scratch != nullptr,
      "decode_attention: probabilities under grouped-query attention need the "
      "split scratch (decode_split_scratch_bytes with kv_heads)");
  plan.chunk = split.chunk;
  plan.splits = split.splits;

  // head_dim % 8 == 0 makes every row start as aligned as the base pointers.
  if (aligned16(args.qkv) && aligned16(args.k_cache) && aligned16(args.v_cache)) {
    launch<true>(args, plan, stream);
  } else {
    launch<false>(args, plan, stream);
  }
}

}  // namespace offgen::kernels::cuda
