// CUDA prefill attention (semantics: kernels/attention_args.h, kernels/cpu/attention.h): causal
// attention with a padding mask — real query i attends real keys j <= i; padding rows output 0.
// Grouped-query attention only changes where a block reads k and v: query head h reads kv head
// h / (heads / kv_heads).
//
// Tiled flash-attention on tensor cores (WMMA, fp16 inputs, fp32 accumulators). One block per
// (sequence, query head, tile of kQTile queries); the block walks the key tiles its queries can
// see. Query and key tiles start at the sequence's first real token, not at token 0, so left
// padding never moves a tile boundary and a real token's bits do not depend on its batch-mates:
//   1. K tile -> shared memory (masked keys as zero rows); S = Q·Kᵀ with WMMA into fp32 smem.
//   2. V tile -> shared memory (replacing K), while each warp runs the online softmax on its rows
//      in fp32 (scale, mask, running max / sum, rescale of its fp32 output rows).
//   3. O += P·V with WMMA, O kept in fp32 shared memory.
// P is fed to the tensor cores as two fp16 matrices, P = P_hi + P_lo (P_lo the rounding error of
// P_hi), so the product carries about 22 bits of P rather than fp16's 11: p·v is effectively an
// fp32 product, rounded to fp16 once at the end, as the contract asks. Skipping P_lo would round
// every probability to fp16 first.
//
// key_prob_sums (optional) needs each row's final max and sum, which only exist once the row has
// seen every key. The first kernel therefore stores each real query's log-sum-exp
// (m + log l) into its query head's row of sums; a second kernel, one block per (sequence, query
// head), walks the key tiles in order, recomputes the scores of every query tile at or after it,
// sums exp(s - lse) per key in a fixed order, and overwrites the key tile's entries — which no
// later key tile needs, since those only read queries after them. Without GQA a query head's row
// is its key_prob_sums row; under GQA the rows live in the caller's key_sum_scratch, and a third
// kernel adds each group's rows, in head order, into its kv head's row. Deterministic, no atomics.
#include <cuda_fp16.h>
#include <mma.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "engine/core/cuda_check.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/block_reduce.cuh"

namespace offgen::kernels::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kWarp = 32;
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * kWarp;
constexpr int kFrag = 16;      // WMMA tile edge (m = n = k = 16)
constexpr int kKeyTile = 64;   // keys per step: two per lane in the softmax pass
constexpr int kPiece = 8;      // halves per 16-byte load
constexpr int kHalfSkew = 8;   // row padding (16 bytes) against shared-memory bank conflicts
constexpr int kFloatSkew = 4;  // the same for fp32 rows
constexpr int kDefaultSmem = 48 * 1024;  // beyond this a kernel must opt in
// Grid of the grid-stride group sum: 65535 blocks of 256 threads fill any GPU many times over.
constexpr std::int64_t kMaxGridStrideBlocks = 65535;
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
static_assert(kKeyTile == 2 * kWarp, "the softmax pass gives each lane two keys");
static_assert(kThreads % kKeyTile == 0, "key sums give each key kThreads / kKeyTile threads");

// Shared memory carve-up, computed identically on the host (for the launch size) and the device.
// Offsets are in bytes, each region 128-byte aligned: WMMA needs 32-byte-aligned tile pointers,
// and with every row stride a multiple of 16 bytes and tile offsets multiples of 16 rows /
// columns, every tile pointer inherits the region's alignment.
struct Layout {
  int dim_pad;  // head_dim rounded up to the WMMA k step; the extra columns are zero
  int ld_h;     // row stride (halves) of the Q, K and V tiles
  int ld_s;     // row stride (floats) of the score tile
  int ld_p;     // row stride (halves) of P_hi / P_lo
  int ld_o;     // row stride (floats) of the output accumulator
  int q, kv, s, p_hi, p_lo, o, row_max, row_sum, q_ok, k_ok, partial;
  int bytes;
};

__host__ __device__ constexpr int align128(int bytes) {
  return (bytes + 127) / 128 * 128;
}

// key_sums = false: the attention kernel. true: the key-sum kernel (Q, K, S, flags, partials;
// row_max holds the row's log-sum-exp there). Unused regions get size 0.
__host__ __device__ constexpr Layout make_layout(int q_tile, int head_dim, bool key_sums) {
  Layout l{};
  l.dim_pad = (head_dim + kFrag - 1) / kFrag * kFrag;
  l.ld_h = l.dim_pad + kHalfSkew;
  l.ld_s = kKeyTile + kFloatSkew;
  l.ld_p = kKeyTile + kHalfSkew;
  l.ld_o = l.dim_pad + kFloatSkew;
  const int half = 2;
  const int flt = 4;
  int at = 0;
  auto take = [&at](int bytes) {
    const int offset = at;
    at += align128(bytes);
    return offset;
  };
  l.q = take(q_tile * l.ld_h * half);
  l.kv = take(kKeyTile * l.ld_h * half);
  l.s = take(q_tile * l.ld_s * flt);
  l.p_hi = take(key_sums ? 0 : q_tile * l.ld_p * half);
  l.p_lo = take(key_sums ? 0 : q_tile * l.ld_p * half);
  l.o = take(key_sums ? 0 : q_tile * l.ld_o * flt);
  l.row_max = take(q_tile * flt);
  l.row_sum = take(key_sums ? 0 : q_tile * flt);
  l.q_ok = take(q_tile * flt);
  l.k_ok = take(kKeyTile * flt);
  l.partial = take(key_sums ? kThreads * flt : 0);
  l.bytes = at;
  return l;
}

// Eight halves: one 16-byte load / store.
struct alignas(16) Half8 {
  __half2 v[4];
};

__device__ Half8 zero8() {
  Half8 r;
#pragma unroll
  for (int k = 0; k < 4; ++k) r.v[k] = __float2half2_rn(0.0f);
  return r;
}

// `aligned` is uniform over the grid: the 16-byte path whenever the base pointers allow it.
__device__ Half8 load8(const __half* p, bool aligned) {
  if (aligned) return *reinterpret_cast<const Half8*>(p);
  Half8 r;
#pragma unroll
  for (int k = 0; k < 4; ++k) r.v[k] = __halves2half2(p[2 * k], p[2 * k + 1]);
  return r;
}

__device__ void store8(__half* p, const Half8& v, bool aligned) {
  if (aligned) {
    *reinterpret_cast<Half8*>(p) = v;
    return;
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    p[2 * k] = __low2half(v.v[k]);
    p[2 * k + 1] = __high2half(v.v[k]);
  }
}

// What a block needs to find its (sequence, query head) data.
struct Head {
  const __half* q;            // token 0 of the sequence: this query head's q
  const __half* k;            // token 0: the k of its kv head
  const __half* v;            // token 0: the v of its kv head
  std::int64_t stride;        // halves between tokens ((heads + 2 * kv_heads) * head_dim)
  std::int64_t hd;            // heads * head_dim: halves between rows of out
  const std::uint8_t* valid;  // the sequence's validity flags
};

__device__ Head head_of(const PrefillAttentionArgs& a, int b, int h) {
  const int kv_heads = a.kv_head_count();
  const int c = h / (a.heads / kv_heads);
  const std::int64_t kvd = std::int64_t{kv_heads} * a.head_dim;
  Head x;
  x.hd = std::int64_t{a.heads} * a.head_dim;
  x.stride = x.hd + 2 * kvd;
  const __half* token0 =
      reinterpret_cast<const __half*>(a.qkv) + std::int64_t{b} * a.seq * x.stride;
  x.q = token0 + std::int64_t{h} * a.head_dim;
  x.k = token0 + x.hd + std::int64_t{c} * a.head_dim;
  x.v = x.k + kvd;
  x.valid = a.valid + std::int64_t{b} * a.seq;
  return x;
}

// The sequence's first real token (seq when it has none), returned to every thread of the block.
// Query and key tiles start there rather than at token 0, so a real token meets the same keys in
// the same tile slots, summed in the same order, whatever left padding its batch-mates impose.
__device__ int first_real_token(const std::uint8_t* valid, int seq) {
  int first = seq;
  for (int j = static_cast<int>(threadIdx.x); j < seq; j += static_cast<int>(blockDim.x)) {
    if (valid[j] != 0) {
      first = j;
      break;
    }
  }
  return block_reduce(first, MinOp{}, seq);
}

// Rows r < rows of `tile` (ld halves apart) get token first + r of `src` (tokens `stride` halves
// apart) when ok[r], else zeros; columns [head_dim, dim_pad) are zero. ok[] must be visible to
// every thread (written before a barrier). Each thread issues kLoadBatch 16-byte loads before it
// stores any, so several global loads are in flight per thread rather than one.
__device__ void load_rows(__half* tile, int ld, int rows, const __half* src, std::int64_t stride,
                          int first, const int* ok, int head_dim, int dim_pad, bool aligned) {
  constexpr int kLoadBatch = 4;
  const int pieces = dim_pad / kPiece;
  const int total = rows * pieces;
  for (int t0 = static_cast<int>(threadIdx.x); t0 < total; t0 += kLoadBatch * kThreads) {
    Half8 v[kLoadBatch];
#pragma unroll
    for (int u = 0; u < kLoadBatch; ++u) {
      const int t = t0 + u * kThreads;
      const int r = t / pieces;
      const int d = t % pieces * kPiece;
      v[u] = zero8();
      if (t < total && ok[r] != 0 && d < head_dim) {
        v[u] = load8(src + (first + r) * stride + d, aligned);
      }
    }
#pragma unroll
    for (int u = 0; u < kLoadBatch; ++u) {
      const int t = t0 + u * kThreads;
      if (t < total) *reinterpret_cast<Half8*>(tile + t / pieces * ld + t % pieces * kPiece) = v[u];
    }
  }
}

// S[kQTile, kKeyTile] = Q·Kᵀ (unscaled dot products, fp32). Warps take 16x16 output tiles in turn.
// Kᵀ as WMMA's col-major B: element (k, n) = K[n][k] sits at k_tile[n * ld + k].
template <int kQTile>
__device__ void scores_tile(const __half* q_tile, const __half* k_tile, float* s, const Layout& l) {
  constexpr int kCols = kKeyTile / kFrag;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  for (int f = warp; f < kQTile / kFrag * kCols; f += kWarps) {
    const int fr = f / kCols;
    const int fc = f % kCols;
    wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < l.dim_pad; k += kFrag) {
      wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, __half, wmma::row_major> qa;
      wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, __half, wmma::col_major> kb;
      wmma::load_matrix_sync(qa, q_tile + fr * kFrag * l.ld_h + k, l.ld_h);
      wmma::load_matrix_sync(kb, k_tile + fc * kFrag * l.ld_h + k, l.ld_h);
      wmma::mma_sync(acc, qa, kb, acc);
    }
    wmma::store_matrix_sync(s + fr * kFrag * l.ld_s + fc * kFrag, acc, l.ld_s, wmma::mem_row_major);
  }
}

// O[kQTile, dim_pad] += P_hi·V + P_lo·V. Each warp owns whole 16x16 output tiles, loads them from
// shared memory, accumulates, and stores them back.
template <int kQTile>
__device__ void accumulate_pv(const __half* p_hi, const __half* p_lo, const __half* v_tile,
                              float* o, const Layout& l) {
  const int cols = l.dim_pad / kFrag;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  for (int f = warp; f < kQTile / kFrag * cols; f += kWarps) {
    const int fr = f / cols;
    const int fc = f % cols;
    float* o_tile = o + fr * kFrag * l.ld_o + fc * kFrag;
    wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> acc;
    wmma::load_matrix_sync(acc, o_tile, l.ld_o, wmma::mem_row_major);
    for (int k = 0; k < kKeyTile; k += kFrag) {
      wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, __half, wmma::row_major> pa;
      wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, __half, wmma::row_major> vb;
      wmma::load_matrix_sync(vb, v_tile + k * l.ld_h + fc * kFrag, l.ld_h);
      wmma::load_matrix_sync(pa, p_hi + fr * kFrag * l.ld_p + k, l.ld_p);
      wmma::mma_sync(acc, pa, vb, acc);
      wmma::load_matrix_sync(pa, p_lo + fr * kFrag * l.ld_p + k, l.ld_p);
      wmma::mma_sync(acc, pa, vb, acc);
    }
    wmma::store_matrix_sync(o_tile, acc, l.ld_o, wmma::mem_row_major);
  }
}

// Block order: blockIdx.x = tile_from_end * (batch * heads) + b * heads + h, so the last query
// tiles — which see the most keys — are scheduled first and the short ones fill the tail.
// head_sums: [batch, heads, seq] rows for each real query's log-sum-exp, or null (no key sums).
template <int kQTile>
__global__ void __launch_bounds__(kThreads)
    prefill_attention_kernel(PrefillAttentionArgs a, bool aligned, float* head_sums) {
  extern __shared__ __align__(128) unsigned char smem[];
  const Layout l = make_layout(kQTile, a.head_dim, false);
  auto* q_tile = reinterpret_cast<__half*>(smem + l.q);
  auto* kv_tile = reinterpret_cast<__half*>(smem + l.kv);
  auto* s = reinterpret_cast<float*>(smem + l.s);
  auto* p_hi = reinterpret_cast<__half*>(smem + l.p_hi);
  auto* p_lo = reinterpret_cast<__half*>(smem + l.p_lo);
  auto* o = reinterpret_cast<float*>(smem + l.o);
  auto* row_max = reinterpret_cast<float*>(smem + l.row_max);
  auto* row_sum = reinterpret_cast<float*>(smem + l.row_sum);
  auto* q_ok = reinterpret_cast<int*>(smem + l.q_ok);
  auto* k_ok = reinterpret_cast<int*>(smem + l.k_ok);

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % kWarp;
  const int warp = tid / kWarp;
  const std::int64_t heads_total = std::int64_t{a.batch} * a.heads;
  const int q_tiles = (a.seq + kQTile - 1) / kQTile;
  const int tile = q_tiles - 1 - static_cast<int>(blockIdx.x / heads_total);
  const std::int64_t bh = blockIdx.x % heads_total;
  const int b = static_cast<int>(bh / a.heads);
  const int h = static_cast<int>(bh % a.heads);
  const Head x = head_of(a, b, h);
  const int dim = a.head_dim;
  __half* const out =
      reinterpret_cast<__half*>(a.out) + std::int64_t{b} * a.seq * x.hd + std::int64_t{h} * dim;
  float* const lse = head_sums != nullptr ? head_sums + bh * a.seq : nullptr;
  const int pieces = dim / kPiece;

  // Tiles count from the first real token. The grid has a tile per kQTile tokens of the padded
  // sequence, so tile t also zeroes the leading padding rows [t·kQTile, (t+1)·kQTile) ∩ [0, first).
  const int first = first_real_token(x.valid, a.seq);
  const int pad_end = min(first, (tile + 1) * kQTile);
  for (int t = tid; t < max(0, pad_end - tile * kQTile) * pieces; t += kThreads) {
    store8(out + (tile * kQTile + t / pieces) * x.hd + t % pieces * kPiece, zero8(), aligned);
  }
  if (lse != nullptr && tid < pad_end - tile * kQTile) lse[tile * kQTile + tid] = 0.0f;
  const int q0 = first + tile * kQTile;
  if (q0 >= a.seq) return;                    // uniform over the block
  const int q_end = min(a.seq, q0 + kQTile);  // queries [q0, q_end) see keys [first, q_end)

  bool real_query = false;
  if (tid < kQTile) {
    const int i = q0 + tid;
    real_query = i < q_end && x.valid[i] != 0;
    q_ok[tid] = real_query ? 1 : 0;
    row_max[tid] = kMinusInf;
    row_sum[tid] = 0.0f;
  }
  if (__syncthreads_or(real_query) == 0) {  // only padding (or past the end): zero rows
    for (int t = tid; t < (q_end - q0) * pieces; t += kThreads) {
      store8(out + (q0 + t / pieces) * x.hd + t % pieces * kPiece, zero8(), aligned);
    }
    if (lse != nullptr && tid < q_end - q0) lse[q0 + tid] = 0.0f;  // placeholder, never read
    return;
  }
  load_rows(q_tile, l.ld_h, kQTile, x.q, x.stride, q0, q_ok, dim, l.dim_pad, aligned);
  for (int t = tid; t < kQTile * l.ld_o; t += kThreads) o[t] = 0.0f;

  for (int k0 = first; k0 < q_end; k0 += kKeyTile) {
    bool real_key = false;
    if (tid < kKeyTile) {
      const int j = k0 + tid;
      real_key = j < q_end && x.valid[j] != 0;
      k_ok[tid] = real_key ? 1 : 0;
    }
    // Also the barrier after the previous step's last reads of k_ok, K / V and P.
    if (__syncthreads_or(real_key) == 0) continue;  // only padding keys: nothing to add

    load_rows(kv_tile, l.ld_h, kKeyTile, x.k, x.stride, k0, k_ok, dim, l.dim_pad, aligned);
    __syncthreads();
    scores_tile<kQTile>(q_tile, kv_tile, s, l);
    __syncthreads();

    // V replaces K (every warp is past its last K read), overlapping the softmax below.
    load_rows(kv_tile, l.ld_h, kKeyTile, x.v, x.stride, k0, k_ok, dim, l.dim_pad, aligned);
    // Online softmax, one warp per row. A masked entry is -inf and gets p = 0 exactly; a row with
    // nothing visible yet keeps max -inf and sum 0 (its alpha is 0, and its O row is still 0).
    for (int r = warp; r < kQTile; r += kWarps) {
      const int i = q0 + r;
      const bool row_ok = q_ok[r] != 0;
      const float m_old = row_max[r];
      float score[2];
      bool use[2];
      float tile_max = kMinusInf;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = lane + e * kWarp;
        use[e] = row_ok && k_ok[c] != 0 && k0 + c <= i;
        score[e] = use[e] ? s[r * l.ld_s + c] * a.scale : kMinusInf;
        tile_max = fmaxf(tile_max, score[e]);
      }
      const float m_new = fmaxf(m_old, warp_max(tile_max));
      float sum = 0.0f;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = lane + e * kWarp;
        const float p = use[e] ? expf(score[e] - m_new) : 0.0f;  // use => m_new is finite
        const __half hi = __float2half_rn(p);
        p_hi[r * l.ld_p + c] = hi;
        p_lo[r * l.ld_p + c] = __float2half_rn(p - __half2float(hi));
        sum += p;
      }
      sum = warp_sum(sum);
      const float alpha = m_old == kMinusInf ? 0.0f : expf(m_old - m_new);
      if (alpha != 1.0f) {  // uniform over the warp
        for (int d = lane; d < l.dim_pad; d += kWarp) o[r * l.ld_o + d] *= alpha;
      }
      __syncwarp();  // every lane has read row_max[r] above
      if (lane == 0) {
        row_max[r] = m_new;
        row_sum[r] = row_sum[r] * alpha + sum;
      }
    }
    __syncthreads();
    accumulate_pv<kQTile>(p_hi, p_lo, kv_tile, o, l);
    __syncthreads();
  }
  // Every path out of the loop ended at a barrier, so O and the row statistics are complete.

  for (int t = tid; t < (q_end - q0) * pieces; t += kThreads) {
    const int r = t / pieces;
    const int d = t % pieces * kPiece;
    Half8 v = zero8();
    if (q_ok[r] != 0) {
      const float inv = 1.0f / row_sum[r];  // >= 1: the row's own key contributed exp(0)
      const float* src = o + r * l.ld_o + d;
#pragma unroll
      for (int k = 0; k < 4; ++k)
        v.v[k] = __floats2half2_rn(src[2 * k] * inv, src[2 * k + 1] * inv);
    }
    store8(out + (q0 + r) * x.hd + d, v, aligned);
  }
  if (lse != nullptr && tid < q_end - q0) {
    lse[q0 + tid] = q_ok[tid] != 0 ? row_max[tid] + logf(row_sum[tid]) : 0.0f;
  }
}

// head_sums[b, h, j] = sum over real queries i >= j (and i >= seq - key_sum_queries when that
// is set) of exp(s_ij - lse_i), where lse_i is what the attention kernel left in
// head_sums[b, h, i]. One block per (sequence, query head): key tiles
// in increasing order from the first real token; a key tile reads the lse of queries at or after
// its first key (k0 - first is a multiple of kQTile), then overwrites its own entries, which later
// key tiles never read.
// Thread t sums key t % kKeyTile over rows r ≡ t / kKeyTile (mod kGroups) of every query tile;
// the kGroups partials are then added in group order.
template <int kQTile>
__global__ void __launch_bounds__(kThreads)
    key_prob_sums_kernel(PrefillAttentionArgs a, bool aligned, float* head_sums) {
  constexpr int kGroups = kThreads / kKeyTile;
  static_assert(kKeyTile % kQTile == 0, "key tiles must start on query tile boundaries");
  extern __shared__ __align__(128) unsigned char smem[];
  const Layout l = make_layout(kQTile, a.head_dim, true);
  auto* q_tile = reinterpret_cast<__half*>(smem + l.q);
  auto* k_tile = reinterpret_cast<__half*>(smem + l.kv);
  auto* s = reinterpret_cast<float*>(smem + l.s);
  auto* row_lse = reinterpret_cast<float*>(smem + l.row_max);
  auto* q_ok = reinterpret_cast<int*>(smem + l.q_ok);
  auto* k_ok = reinterpret_cast<int*>(smem + l.k_ok);
  auto* partial = reinterpret_cast<float*>(smem + l.partial);  // [kGroups][kKeyTile]

  const int tid = static_cast<int>(threadIdx.x);
  const std::int64_t bh = blockIdx.x;
  const int b = static_cast<int>(bh / a.heads);
  const int h = static_cast<int>(bh % a.heads);
  const Head x = head_of(a, b, h);
  const int seq = a.seq;
  float* const sums = head_sums + bh * seq;
  const int col = tid % kKeyTile;
  const int group = tid / kKeyTile;
  // Key and query tiles from the first real token, as in the attention kernel; the entries of the
  // leading padding keys keep the 0 that kernel wrote there.
  const int first = first_real_token(x.valid, seq);
  const int first_query = a.key_sum_queries > 0 ? max(first, seq - a.key_sum_queries) : first;
  const int first_tile = first + (first_query - first) / kQTile * kQTile;

  for (int k0 = first; k0 < seq; k0 += kKeyTile) {
    bool real_key = false;
    if (tid < kKeyTile) {
      const int j = k0 + tid;
      real_key = j < seq && x.valid[j] != 0;
      k_ok[tid] = real_key ? 1 : 0;
    }
    float part = 0.0f;
    if (__syncthreads_or(real_key) != 0) {
      load_rows(k_tile, l.ld_h, kKeyTile, x.k, x.stride, k0, k_ok, a.head_dim, l.dim_pad, aligned);
      // Queries before first_query do not count (key_sum_queries); whole tiles of them are
      // skipped. k0 - first is a multiple of kKeyTile, so of kQTile: a query tile boundary.
      for (int q0 = max(k0, first_tile); q0 < seq; q0 += kQTile) {
        bool real_query = false;
        if (tid < kQTile) {
          const int i = q0 + tid;
          real_query = i < seq && i >= first_query && x.valid[i] != 0;
          q_ok[tid] = real_query ? 1 : 0;
          row_lse[tid] = real_query ? sums[i] : 0.0f;
        }
        if (__syncthreads_or(real_query) == 0) continue;
        load_rows(q_tile, l.ld_h, kQTile, x.q, x.stride, q0, q_ok, a.head_dim, l.dim_pad, aligned);
        __syncthreads();
        scores_tile<kQTile>(q_tile, k_tile, s, l);
        __syncthreads();
        if (k_ok[col] != 0) {
          const int j = k0 + col;
          for (int r = group; r < kQTile; r += kGroups) {
            if (q_ok[r] != 0 && j <= q0 + r) {
              part += expf(s[r * l.ld_s + col] * a.scale - row_lse[r]);
            }
          }
        }
        __syncthreads();  // the next query tile rewrites q_ok, row_lse, Q and S
      }
    }
    partial[group * kKeyTile + col] = part;
    __syncthreads();  // also: every lse read of this key tile is done before the writes below
    if (tid < kKeyTile && k0 + tid < seq) {
      float total = 0.0f;
      for (int g = 0; g < kGroups; ++g) total += partial[g * kKeyTile + tid];
      sums[k0 + tid] = total;
    }
    // The next write of `partial` comes after the next key tile's barriers.
  }
}

// Under GQA: key_prob_sums[b, c, j] = the sum over g in [0, G), in order, of
// head_sums[b, c·G + g, j]. One thread per entry, grid-stride.
__global__ void __launch_bounds__(kThreads)
    group_key_sums_kernel(const float* __restrict__ head_sums, float* __restrict__ key_prob_sums,
                          std::int64_t kv_rows, int group, int seq) {
  const std::int64_t total = kv_rows * seq;
  const std::int64_t step = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < total; t += step) {
    const std::int64_t row = t / seq;  // b * kv_heads + c
    const std::int64_t j = t % seq;
    const float* first = head_sums + row * group * seq + j;  // query head c·G of sequence b
    float total_p = first[0];
    for (int g = 1; g < group; ++g) total_p += first[std::int64_t{g} * seq];
    key_prob_sums[t] = total_p;
  }
}

bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

int smem_limit() {
  int device = 0;
  int limit = 0;
  OFFGEN_CUDA_CHECK(cudaGetDevice(&device));
  OFFGEN_CUDA_CHECK(
      cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return limit;
}

template <typename Kernel>
void allow_smem(Kernel kernel, int bytes) {
  if (bytes > kDefaultSmem) {
    OFFGEN_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  }
}

template <int kQTile>
void launch(const PrefillAttentionArgs& args, bool aligned, cudaStream_t stream) {
  const int q_tiles = (args.seq + kQTile - 1) / kQTile;
  const std::int64_t heads_total = std::int64_t{args.batch} * args.heads;
  const std::int64_t blocks = heads_total * q_tiles;
  OFFGEN_CUDA_REQUIRE(blocks <= std::numeric_limits<int>::max(),
                      "prefill_attention: too many blocks for one grid");

  // Each query head's row of sums: the output's own row without GQA, else the caller's scratch.
  const int group = args.heads / args.kv_head_count();
  float* const head_sums = args.key_prob_sums == nullptr ? nullptr
                           : group == 1                  ? args.key_prob_sums
                                                         : args.key_sum_scratch;

  const int bytes = make_layout(kQTile, args.head_dim, false).bytes;
  allow_smem(prefill_attention_kernel<kQTile>, bytes);
  prefill_attention_kernel<kQTile>
      <<<static_cast<unsigned>(blocks), kThreads, bytes, stream>>>(args, aligned, head_sums);
  OFFGEN_CUDA_CHECK_LAUNCH();

  if (head_sums != nullptr) {
    const int sum_bytes = make_layout(kQTile, args.head_dim, true).bytes;
    allow_smem(key_prob_sums_kernel<kQTile>, sum_bytes);
    key_prob_sums_kernel<kQTile>
        <<<static_cast<unsigned>(heads_total), kThreads, sum_bytes, stream>>>(args, aligned,
                                                                              head_sums);
    OFFGEN_CUDA_CHECK_LAUNCH();
  }
  if (head_sums != nullptr && group > 1) {
    const std::int64_t kv_rows = std::int64_t{args.batch} * args.kv_head_count();
    const std::int64_t total = kv_rows * args.seq;
    const auto sum_blocks = static_cast<unsigned>(
        std::min<std::int64_t>((total + kThreads - 1) / kThreads, kMaxGridStrideBlocks));
    group_key_sums_kernel<<<sum_blocks, kThreads, 0, stream>>>(head_sums, args.key_prob_sums,
                                                               kv_rows, group, args.seq);
    OFFGEN_CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

void prefill_attention(const PrefillAttentionArgs& args, cudaStream_t stream) {
  if (args.batch <= 0 || args.seq <= 0 || args.heads <= 0) return;
  OFFGEN_CUDA_REQUIRE(args.head_dim > 0 && args.head_dim % kPiece == 0,
                      "prefill_attention: head_dim must be a positive multiple of 8");
  OFFGEN_CUDA_REQUIRE(args.valid != nullptr, "prefill_attention: no validity mask");
  const int kv_heads = args.kv_head_count();
  OFFGEN_CUDA_REQUIRE(kv_heads > 0 && args.heads % kv_heads == 0,
                      "prefill_attention: the query heads do not split into groups over the kv "
                      "heads");
  OFFGEN_CUDA_REQUIRE(
      args.key_prob_sums == nullptr || kv_heads == args.heads || args.key_sum_scratch != nullptr,
      "prefill_attention: key sums under grouped-query attention need "
      "key_sum_scratch (prefill_key_sum_scratch_bytes)");
  // head_dim % 8 == 0 makes every row start as aligned as the base pointers.
  const bool aligned = aligned16(args.qkv) && aligned16(args.out);

  // The largest query tile whose shared memory fits (the key-sum kernel always needs less). At
  // head_dim 128: 64 rows take ~103 KiB (two blocks per H100 SM); Ada's 99 KiB limit gets 32.
  const int limit = smem_limit();
  if (make_layout(64, args.head_dim, false).bytes <= limit) {
    launch<64>(args, aligned, stream);
  } else if (make_layout(32, args.head_dim, false).bytes <= limit) {
    launch<32>(args, aligned, stream);
  } else {
    OFFGEN_CUDA_REQUIRE(make_layout(16, args.head_dim, false).bytes <= limit,
                        "prefill_attention: head_dim too large for the shared memory of this GPU");
    launch<16>(args, aligned, stream);
  }
}

}  // namespace offgen::kernels::cuda
