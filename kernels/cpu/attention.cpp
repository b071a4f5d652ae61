// CPU attention: prefill (causal + padding mask) and decode over the KV cache, with grouped-query
// attention (query head h reads kv head h / (heads / kv_heads); kernels/attention_args.h).
//
// Prefill runs one task per (sequence, query head, block of queries). A task converts, in one pass
// over its tokens, the keys its queries can see into fp32 K panels (a panel: 32 keys' values,
// dim-major), V into fp32 rows and its queries (scaled) into rows, then handles its queries eight
// at a time, each eight only over the 16-key vectors of keys they can see: scores s[r][j] +=
// q[r][d]·k[j][d] with the keys in lanes (8 queries × 32 keys of register accumulators, each K
// vector feeding eight FMAs), and out[r][d] += p[r][j]·v[j][d] with the dims in lanes (8 queries ×
// 32 dims), no horizontal reductions either way. Query blocks only split a (sequence, head) when
// there are too few of those to keep the workers busy (each block re-converts its keys). When
// key_prob_sums is wanted a task covers all of a (sequence, head)'s queries, so the sums are
// accumulated by one thread in a fixed order (deterministic, no atomics). Under GQA each query
// head's sums go to a row of its own first, and a second pass adds a group's rows in head order
// into its kv head's entry.
//
// Decode is memory-bound (each cached key / value is read once): one task per (sequence, kv head),
// K and V converted in slot chunks with F16C once for all the query heads of the group, while the
// next chunk is prefetched. For a head_dim that is a multiple of 16 the scores come L keys at a
// time over vectors of the target's own width L (16, 8, 4 floats: L register dot products reduced
// by one transposing tree) and p·v accumulates the output row in registers; AVX-512, AVX2 and the
// portable build each run their own instantiation (OFFGEN_CPU_ISA caps the choice, as for the
// prefill). Each query head's probabilities are computed exactly as they would be alone, and the
// group's rows are added in head order.
#include "kernels/cpu/attention.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/half_avx512.h"
#include "engine/core/int_math.h"
#include "kernels/cpu/attention_bf16.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/transpose_avx512.h"
#include "kernels/cpu/vector_math.h"

// The Vec helpers of vector_math.h take and return Vecs by value, always inlined into the target
// clone that calls them (vector_math.h says why GCC's ABI warning does not apply).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace offgen::kernels::cpu {
namespace {

constexpr int kQueryBlock = 64;  // queries per prefill task (without key sums)

float* grow(std::vector<float>& v, std::int64_t n) {
  if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
  return v.data();
}

// Half{} has bits 0: +0.0.
void zero_half(Half* p, int n) {
  std::fill(p, p + n, Half{});
}

// Asks for n halves from p into the caches.
inline void prefetch_halves(const Half* p, std::int64_t n) {
  prefetch_bytes(p, n * static_cast<std::int64_t>(sizeof(Half)));
}

// Vectors of the target's own width: zmm, ymm, xmm. (GCC lowers a wider one through memory
// wherever a scalar meets it: the AVX2 clones of these kernels, written over 16-float vectors,
// ran 3x (decode) and 1.4x (prefill) slower than the portable ones.)
using Floats16 = Vec;
using Floats8 = float __attribute__((vector_size(32)));
using Floats4 = float __attribute__((vector_size(16)));

// The lane sums of L vectors of L lanes as one vector (sums[t]: the sum of v[t]'s lanes), by a
// transposing tree: each level adds neighbouring partial sums of every vector at once, so L
// reductions cost L - 1 adds and 2(L - 1) shuffles instead of L horizontal reductions. Every lane
// is summed in the same balanced-tree order: ((l0 + l1) + (l2 + l3)) + ... .
[[gnu::always_inline]] inline Floats4 lane_tree(const Floats4 v[4]) {
  Floats4 t[2];
  for (int i = 0; i < 2; ++i) {  // [a0+a1, b0+b1, a2+a3, b2+b3]
    t[i] = __builtin_shufflevector(v[2 * i], v[2 * i + 1], 0, 4, 2, 6) +
           __builtin_shufflevector(v[2 * i], v[2 * i + 1], 1, 5, 3, 7);
  }
  return __builtin_shufflevector(t[0], t[1], 0, 1, 4, 5) +
         __builtin_shufflevector(t[0], t[1], 2, 3, 6, 7);
}

[[gnu::always_inline]] inline Floats8 lane_tree(const Floats8 v[8]) {
  Floats8 t[4];
  for (int i = 0; i < 4; ++i) {  // [a0+a1, b0+b1, a2+a3, b2+b3, ...]
    t[i] = __builtin_shufflevector(v[2 * i], v[2 * i + 1], 0, 8, 2, 10, 4, 12, 6, 14) +
           __builtin_shufflevector(v[2 * i], v[2 * i + 1], 1, 9, 3, 11, 5, 13, 7, 15);
  }
  Floats8 u[2];
  for (int i = 0; i < 2; ++i) {  // four vectors' partials side by side, two per vector
    u[i] = __builtin_shufflevector(t[2 * i], t[2 * i + 1], 0, 1, 8, 9, 4, 5, 12, 13) +
           __builtin_shufflevector(t[2 * i], t[2 * i + 1], 2, 3, 10, 11, 6, 7, 14, 15);
  }
  return __builtin_shufflevector(u[0], u[1], 0, 1, 2, 3, 8, 9, 10, 11) +
         __builtin_shufflevector(u[0], u[1], 4, 5, 6, 7, 12, 13, 14, 15);
}

[[gnu::always_inline]] inline Floats16 lane_tree(const Floats16 v[16]) {
  Floats16 t[8];
  for (int i = 0; i < 8; ++i) {  // [a0+a1, b0+b1, a2+a3, b2+b3, ...]
    t[i] = __builtin_shufflevector(v[2 * i], v[2 * i + 1], 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10,
                                   26, 12, 28, 14, 30) +
           __builtin_shufflevector(v[2 * i], v[2 * i + 1], 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11,
                                   27, 13, 29, 15, 31);
  }
  Floats16 u[4];
  for (int i = 0; i < 4; ++i) {  // four vectors' partials side by side, four per vector
    u[i] = __builtin_shufflevector(t[2 * i], t[2 * i + 1], 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25,
                                   12, 13, 28, 29) +
           __builtin_shufflevector(t[2 * i], t[2 * i + 1], 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26,
                                   27, 14, 15, 30, 31);
  }
  Floats16 w[2];
  for (int i = 0; i < 2; ++i) {  // eight vectors' partials, two per vector
    w[i] = __builtin_shufflevector(u[2 * i], u[2 * i + 1], 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11,
                                   24, 25, 26, 27) +
           __builtin_shufflevector(u[2 * i], u[2 * i + 1], 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14,
                                   15, 28, 29, 30, 31);
  }
  return __builtin_shufflevector(w[0], w[1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22,
                                 23) +
         __builtin_shufflevector(w[0], w[1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29,
                                 30, 31);
}

// Decode sums a score in 16 running lanes, then the lanes by the 16-lane tree, whatever the
// target's width: a narrower target keeps a 16-lane vector in P = 16 / L parts and finishes the
// tree over the parts' own trees. (The same order on every target; the bits still differ where a
// target contracts a product and its sum into an FMA and another has none.)
template <int P, typename V>
[[gnu::always_inline]] inline V join_parts(const V part[P]) {
  static_assert(P == 1 || P == 2 || P == 4);
  if constexpr (P == 1) return part[0];
  if constexpr (P == 2) return part[0] + part[1];
  if constexpr (P == 4) return (part[0] + part[1]) + (part[2] + part[3]);
}

// The largest lane of v, by a tree of swaps (log2 L shuffles and selects, where a scalar walk
// over the lanes was a chain of L compares). Exact in any order; the lanes hold no NaN (the running
// maxima they come from skip one).
[[gnu::always_inline]] inline Floats4 max_lanes_step(Floats4 v, Floats4 w) {
  return w > v ? w : v;
}
[[gnu::always_inline]] inline float lane_max(Floats4 v) {
  v = max_lanes_step(v, __builtin_shufflevector(v, v, 2, 3, 0, 1));
  v = max_lanes_step(v, __builtin_shufflevector(v, v, 1, 0, 3, 2));
  return v[0];
}
[[gnu::always_inline]] inline float lane_max(Floats8 v) {
  const Floats4 lo = __builtin_shufflevector(v, v, 0, 1, 2, 3);
  const Floats4 hi = __builtin_shufflevector(v, v, 4, 5, 6, 7);
  return lane_max(max_lanes_step(lo, hi));
}
[[gnu::always_inline]] inline float lane_max(Floats16 v) {
  const Floats8 lo = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
  const Floats8 hi = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  return lane_max(Floats8{hi > lo ? hi : lo});
}

// Decode's inner loops for a head_dim of 16·DV over vectors V of L lanes: scores[j] = q · rows[j]
// for n rows, L at a time (the 16 lanes of q · k summed in order of d within each lane, then the
// lanes by the tree); and acc += Σ_j p[j] · rows[j], in order of j per lane.
template <int DV, typename V>
[[gnu::always_inline]] inline void dot_rows(const float* q, const float* rows, int n,
                                            float* scores) {
  constexpr int L = kLanes<V>;
  constexpr int P = 16 / L;
  // q stays in registers where it fits beside the L products (AVX-512's 32 zmm); elsewhere each
  // product reads its q vector from L1.
  constexpr bool kHoist = L == 16;
  V qv[kHoist ? DV : 1];
  if constexpr (kHoist) {
    for (int v = 0; v < DV; ++v) std::memcpy(&qv[v], q + 16 * v, sizeof(V));
  }
  for (int j0 = 0; j0 < n; j0 += L) {
    const int m = std::min(L, n - j0);
    V part[P];
    for (int c = 0; c < P; ++c) {  // lanes c·L .. c·L + L of the 16
      V prod[L];
      for (int t = 0; t < L; ++t) {
        prod[t] = V{};
        if (t >= m) continue;
        const float* r = rows + std::int64_t{j0 + t} * 16 * DV + L * c;
        for (int v = 0; v < DV; ++v) {
          V qc, rv;
          if constexpr (kHoist) {
            qc = qv[v];
          } else {
            std::memcpy(&qc, q + 16 * v + L * c, sizeof(V));
          }
          std::memcpy(&rv, r + 16 * v, sizeof(V));
          prod[t] += qc * rv;
        }
      }
      part[c] = lane_tree(prod);
    }
    const V sums = join_parts<P>(part);
    std::memcpy(scores + j0, &sums, sizeof(float) * static_cast<std::size_t>(m));
  }
}

// acc[0, NV·L) += Σ_j p[j] · row j of `rows` (rows `stride` floats apart), NV vectors in registers.
template <int NV, typename V>
[[gnu::always_inline]] inline void weigh_block(const float* p, const float* rows,
                                               std::int64_t stride, int n, float* acc) {
  constexpr int L = kLanes<V>;
  V a[NV];
  for (int v = 0; v < NV; ++v) std::memcpy(&a[v], acc + L * v, sizeof(V));
  for (int j = 0; j < n; ++j) {
    const float* r = rows + j * stride;
    for (int v = 0; v < NV; ++v) {
      V rv;
      std::memcpy(&rv, r + L * v, sizeof(V));
      a[v] += p[j] * rv;
    }
  }
  for (int v = 0; v < NV; ++v) std::memcpy(acc + L * v, &a[v], sizeof(V));
}

// The output row in blocks of at most 8 vectors (a 128-dim row is 16 ymm: all of AVX2's).
template <int DV, typename V>
[[gnu::always_inline]] inline void weigh_rows(const float* p, const float* rows, int n,
                                              float* acc) {
  constexpr int L = kLanes<V>;
  constexpr int W = 16 * DV / L;  // vectors per row
  constexpr int B = 8;
  for (int b = 0; b + B <= W; b += B) weigh_block<B, V>(p, rows + L * b, 16 * DV, n, acc + L * b);
  if constexpr (W % B != 0) {
    constexpr int b = W - W % B;
    weigh_block<W % B, V>(p, rows + L * b, 16 * DV, n, acc + L * b);
  }
}

// Calls f.template operator()<DV>() for dim = 16·DV (DV 1..8), else f.template operator()<0>().
// Always inlined, so each SIMD clone of the caller gets its own instantiations.
template <typename F>
[[gnu::always_inline]] inline void with_vecs_per_row(int dim, F&& f) {
  switch (dim % 16 == 0 ? dim / 16 : 0) {
    case 1:
      return f.template operator()<1>();
    case 2:
      return f.template operator()<2>();
    case 3:
      return f.template operator()<3>();
    case 4:
      return f.template operator()<4>();
    case 5:
      return f.template operator()<5>();
    case 6:
      return f.template operator()<6>();
    case 7:
      return f.template operator()<7>();
    case 8:
      return f.template operator()<8>();
    default:
      return f.template operator()<0>();
  }
}

// The register tiles of the fp32 prefill kernel, per target (V: its vector of L floats): scores
// come kQueries queries × kKeyVecs·L keys at a time, p·v kPvQueries queries × kPvVecs·L dims at
// a time, each with kQueries·kKeyVecs (kPvQueries·kPvVecs) accumulators that cover the FMA
// latency and leave registers for the operands.
template <int Queries, int KeyVecs, int PvQueries, int PvVecs, typename Rows, typename V>
struct PrefillTile {
  using Convert = Rows;  // fp16 <-> fp32 of a row of head_dim values
  using Vector = V;
  static constexpr int kLanes = cpu::kLanes<V>;
  static constexpr int kQueries = Queries;
  static constexpr int kKeyVecs = KeyVecs;
  static constexpr int kKeys = kLanes * KeyVecs;  // keys per score step: a K panel's width
  static constexpr int kPvQueries = PvQueries;
  static constexpr int kPvVecs = PvVecs;
  static_assert(Queries % PvQueries == 0);
};
// A row of n fp16 values to fp32 and back, through the bulk converters.
struct BulkRows {
  static void to_floats(const Half* in, float* out, int n) {
    half_to_float(in, out, static_cast<std::size_t>(n));
  }
  static void to_halves(const float* in, Half* out, int n) {
    float_to_half(in, out, static_cast<std::size_t>(n));
  }
};

#if defined(__x86_64__)
// The same inlined into the AVX-512 clone, without the bulk converters' per-call check of the CPU.
struct Avx512Rows {
  __attribute__((target("avx512f"))) static void to_floats(const Half* in, float* out, int n) {
    half_to_float_avx512(in, out, static_cast<std::size_t>(n));
  }
  __attribute__((target("avx512f"))) static void to_halves(const float* in, Half* out, int n) {
    float_to_half_avx512(in, out, static_cast<std::size_t>(n));
  }
};
using PrefillTileAvx512 = PrefillTile<8, 2, 8, 2, Avx512Rows, Floats16>;  // 16 + 16 of 32 zmm
#endif
using PrefillTileAvx2 = PrefillTile<4, 2, 4, 2, BulkRows, Floats8>;      // 8 + 8 of 16 ymm
using PrefillTilePortable = PrefillTile<4, 2, 4, 2, BulkRows, Floats4>;  // 8 + 8 of 16 xmm

#if defined(__x86_64__)
// Sixteen keys' fp32 rows (stage[i·dim + d], dim a multiple of 16) into their K panel's columns:
// column[d·ld + i] = stage[i·dim + d], sixteen values of d per 16 × 16 transpose (one scalar store
// per value took a twentieth of a 1 × 128 prefill's attention).
__attribute__((target("avx512f"))) inline void store_key_columns16(const float* stage, int dim,
                                                                   float* column, int ld) {
  for (int d0 = 0; d0 < dim; d0 += 16) {
    __m512 r[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(stage + i * dim + d0);
    transpose16(r);
    for (int t = 0; t < 16; ++t) _mm512_storeu_ps(column + std::int64_t{d0 + t} * ld, r[t]);
  }
}
#endif

// acc[r][c] (r < PQ, c < NV) = Σ_{j in [j0, j1)} p[r·ldp + j] · v[j·ldv + L·c .. + L], j in
// order: the output of PQ queries over NV·L dims, summed sequentially along the keys.
template <int PQ, int NV, typename V>
[[gnu::always_inline]] inline void weigh_values(const float* p, std::int64_t ldp, const float* v,
                                                std::int64_t ldv, int j0, int j1,
                                                V (&acc)[PQ][NV]) {
  constexpr int L = kLanes<V>;
  for (int r = 0; r < PQ; ++r) {
    for (int c = 0; c < NV; ++c) acc[r][c] = V{};
  }
  for (int j = j0; j < j1; ++j) {
    const float* row = v + std::int64_t{j} * ldv;
    V vv[NV];
    for (int c = 0; c < NV; ++c) std::memcpy(&vv[c], row + L * c, sizeof(V));
    for (int r = 0; r < PQ; ++r) {
      const float pj = p[r * ldp + j];
      for (int c = 0; c < NV; ++c) acc[r][c] += pj * vv[c];
    }
  }
}

// Calls f.template operator()<N>() for n in [1, Max] (Max <= 4).
template <int Max, typename F>
[[gnu::always_inline]] inline void with_count(int n, F&& f) {
  static_assert(Max >= 1 && Max <= 4);
  if constexpr (Max >= 4) {
    if (n >= 4) return f.template operator()<4>();
  }
  if constexpr (Max >= 3) {
    if (n == 3) return f.template operator()<3>();
  }
  if constexpr (Max >= 2) {
    if (n == 2) return f.template operator()<2>();
  }
  f.template operator()<1>();
}

// Row r of R score rows (p[r], with its mask) as unnormalised probabilities: p[r][j] =
// exp(p[r][j] + mask[j] - max[r]) for j < len[r], in blocks of L (V's lanes) from p[r][0], and
// lanes past len[r] written as zeros (a row needs round_up(len[r], L) floats); inv[r] = 1 / Σ_j
// p[r][j], the sum in L running lanes over those blocks, then the lanes in order (ordered_sum's
// order where L = 16), so the same bits whatever padding precedes the row. Rows with
// len[r] = 0 are left alone. row_max[r]: L partial maxima of row r's masked scores.
// key_sums[r]: where row r's probabilities p[r][j]·inv[r] are added, or null. The rows go
// through each step together, so one row's lane reductions overlap the others' instead of
// waiting on their own latency.
template <int R, typename V>
[[gnu::always_inline]] inline void exponentiate_rows(float* const (&p)[R], const float* mask,
                                                     const int (&len)[R], const V (&row_max)[R],
                                                     float* const (&key_sums)[R], float (&inv)[R]) {
  constexpr int L = kLanes<V>;
  float max[R], sum[R];
  for (int r = 0; r < R; ++r) max[r] = lane_max(row_max[r]);
  alignas(64) float part[R][L] = {};  // each row's lane sums
  for (int r = 0; r < R; ++r) {
    const int tail = len[r] % L, whole = len[r] - tail;
    V lanes = {}, v, masks;
    for (int j = 0; j < len[r]; j += L) {
      std::memcpy(&v, p[r] + j, sizeof v);
      std::memcpy(&masks, mask + j, sizeof masks);
      V e = fast_exp_lanes(v + masks - max[r]);
      if (j == whole) e = lanes_below<V>(tail) ? e : V{};
      std::memcpy(p[r] + j, &e, sizeof e);
      lanes += e;
    }
    std::memcpy(part[r], &lanes, sizeof lanes);
  }
  for (int r = 0; r < R; ++r) sum[r] = 0.0f;
  for (int l = 0; l < L; ++l) {  // lane after lane
    for (int r = 0; r < R; ++r) sum[r] += part[r][l];
  }
  for (int r = 0; r < R; ++r) {
    inv[r] = 1.0f / sum[r];
    if (key_sums[r] == nullptr) continue;
    const int tail = len[r] % L, whole = len[r] - tail;
    for (int j = 0; j < len[r]; j += L) {
      V e;
      std::memcpy(&e, p[r] + j, sizeof e);
      e *= inv[r];
      if (j < whole) {
        V k;
        std::memcpy(&k, key_sums[r] + j, sizeof k);
        k += e;
        std::memcpy(key_sums[r] + j, &k, sizeof k);
      } else {
        for (int l = 0; l < tail; ++l) key_sums[r][j + l] += e[l];
      }
    }
  }
}

// Queries [q0, q1) of sequence b, query head h. key_sums: that (b, h)'s row, zeroed, or null.
//
// K is converted into panels of Tile::kKeys keys (kp[panel][d][key]: a score step reads one
// contiguous panel) and V into fp32 rows; keys before the sequence's first real one are never
// read. Per group of Tile::kQueries queries: the scores of every panel up to the group's last
// query (each K vector feeds kQueries FMAs against broadcast q), the softmax row by row over the
// keys each query sees, then p·v with the dims in lanes, each output summed sequentially along
// the keys from the first real one — so a sequence's bits do not depend on its left padding.
template <typename Tile>
[[gnu::always_inline]] inline void prefill_block_impl(const PrefillAttentionArgs& a, int b, int h,
                                                      int q0, int q1, float* key_sums) {
  constexpr int kQ = Tile::kQueries;
  constexpr int kKeys = Tile::kKeys;
  constexpr int kPq = Tile::kPvQueries;
  constexpr int kPv = Tile::kPvVecs;
  constexpr int L = Tile::kLanes;
  using V = typename Tile::Vector;
  const int dim = a.head_dim;
  const int kv_heads = a.kv_head_count();
  const int kv_head = h / (a.heads / kv_heads);
  const std::int64_t hd = std::int64_t{a.heads} * dim;
  const std::int64_t kvd = std::int64_t{kv_heads} * dim;  // k head c to v head c
  const std::int64_t stride = hd + 2 * kvd;
  const std::uint8_t* valid = a.valid + std::int64_t{b} * a.seq;
  const Half* tokens = a.qkv + std::int64_t{b} * a.seq * stride;
  Half* out = a.out + std::int64_t{b} * a.seq * hd + std::int64_t{h} * dim;

  int last = q1 - 1;  // last real query of the block: keys [0, last] are all it needs
  while (last >= q0 && valid[last] == 0) --last;
  int first = 0;  // first real key: the left padding ends here
  while (first < q1 && valid[first] == 0) ++first;
  for (int i = q0; i < q1; ++i) {
    if (valid[i] == 0) zero_half(out + i * hd, dim);
  }
  if (last < q0) return;
  const int keys = last + 1;
  const int panel0 = first / kKeys;  // the first panel holding a real key
  const int panels = ceil_div(keys, kKeys);
  const std::int64_t panel_size = std::int64_t{dim} * kKeys;
  const int ldv = round_up(dim, L);  // v row stride; dims past `dim` are zero
  // Score rows' stride: whole panels, and sixteen more, so that rows of a power-of-two length do
  // not fall into the same L1 sets.
  const int lds = panels * kKeys + 16;

  thread_local std::vector<float> kp_buf, v_buf, mask_buf, s_buf, q_buf, o_buf, row_buf, stage_buf;
  float* const kp = grow(kp_buf, panels * panel_size);
  float* const v = grow(v_buf, std::int64_t{keys} * ldv);
  float* const mask = grow(mask_buf, lds);  // 0 for real keys, -inf for padding
  float* const s = grow(s_buf, std::int64_t{kQ} * lds);
  const int g0 = q0 + std::max(0, first - q0) / kQ * kQ;  // the first group's first query
  const int q_rows = round_up(last + 1 - g0, kQ);         // the groups' queries, scaled
  float* const q_all = grow(q_buf, std::int64_t{q_rows} * dim);
  float* const o = grow(o_buf, std::int64_t{kQ} * ldv);  // the group's outputs
  float* const row = grow(row_buf, dim);
#if defined(__x86_64__)
  // AVX-512: K rows staged sixteen at a time and transposed into the panels.
  const bool staged = L == 16 && dim % 16 == 0;
#else
  const bool staged = false;
#endif
  float* const stage = grow(stage_buf, staged ? 16 * std::int64_t{dim} : 0);

  // One pass over the task's tokens for K, V and the queries: a token's q, k and v sit in one
  // row of qkv, a page or more apart (opt-125m: 4.6 KB), so each row is fetched once, a few
  // tokens ahead of its use (the queries were converted group by group, each waiting on its rows).
  constexpr int kAhead = 8;  // tokens
  const std::int64_t row_bytes = std::int64_t{dim} * static_cast<std::int64_t>(sizeof(Half));
  auto q_row = [&](int i) { return tokens + i * stride + std::int64_t{h} * dim; };
  auto k_row = [&](int j) { return tokens + j * stride + hd + std::int64_t{kv_head} * dim; };
  auto q_at = [&](int i) { return q_all + std::int64_t{i - g0} * dim; };
  for (int j = panel0 * kKeys; j < panels * kKeys; ++j) {
    const int ahead = j + kAhead;
    if (ahead < keys) {
      prefetch_bytes(k_row(ahead), row_bytes);
      prefetch_bytes(k_row(ahead) + kvd, row_bytes);
      if (ahead >= g0) prefetch_bytes(q_row(ahead), row_bytes);
    }
    float* const panel = kp + (j / kKeys) * panel_size + j % kKeys;
    const bool real = j < keys && valid[j] != 0;
    if (j >= g0 && j < keys) {
      float* const qj = q_at(j);
      if (real) {
        Tile::Convert::to_floats(q_row(j), qj, dim);
        for (int d = 0; d < dim; ++d) qj[d] *= a.scale;
      } else {
        std::fill(qj, qj + dim, 0.0f);
      }
    }
    mask[j] = real ? 0.0f : kMinusInf;
    float* const k_to = staged ? stage + std::int64_t{j % 16} * dim : row;
    if (real) {
      Tile::Convert::to_floats(k_row(j), k_to, dim);
      float* const v_row = v + std::int64_t{j} * ldv;
      Tile::Convert::to_floats(k_row(j) + kvd, v_row, dim);
      std::fill(v_row + dim, v_row + ldv, 0.0f);
    } else {  // finite zeros: the mask, not the data, removes padding keys
      std::fill(k_to, k_to + dim, 0.0f);
      if (j < keys) std::fill(v + std::int64_t{j} * ldv, v + std::int64_t{j + 1} * ldv, 0.0f);
    }
#if defined(__x86_64__)
    if constexpr (L == 16) {
      // Panels start at multiples of 32 keys and the loop ends at one, so every 16 fill up.
      if (staged) {
        if (j % 16 == 15) store_key_columns16(stage, dim, panel - 15, kKeys);
        continue;
      }
    }
#endif
    for (int d = 0; d < dim; ++d) panel[std::int64_t{d} * kKeys] = row[d];
  }
  std::fill(q_at(keys), q_at(g0 + q_rows), 0.0f);  // the last group's rows past the block

  // Groups from the one holding the first real query (the padding's rows are zero already).
  for (int i0 = g0; i0 <= last; i0 += kQ) {
    const int rows = std::min(kQ, last + 1 - i0);
    const int n = i0 + rows;  // keys any query of the group can see
    const float* const q = q_at(i0);
    // Scores, a panel of keys × kQ queries per step: each K vector feeds kQ FMAs (broadcast q);
    // with each row's running maximum of its masked scores over the keys it sees, lane by lane.
    V row_max[kQ];
    for (int r = 0; r < kQ; ++r) row_max[r] = splat<V>(kMinusInf);
    for (int pn = panel0; pn * kKeys < n; ++pn) {
      const float* const panel = kp + pn * panel_size;
      // The group's last panel only as far as its keys: the vectors past them hold no key the
      // group sees (a 32-key panel at a 16-key diagonal was half waste).
      const int vecs = std::min(Tile::kKeyVecs, ceil_div(n - pn * kKeys, L));
      with_count<Tile::kKeyVecs>(
          vecs, [&]<int NV>() __attribute__((always_inline)) {
            V acc[kQ][NV] = {};
            for (int d = 0; d < dim; ++d) {
              V k[NV];
              for (int c = 0; c < NV; ++c) {
                std::memcpy(&k[c], panel + std::int64_t{d} * kKeys + L * c, sizeof(V));
              }
              for (int r = 0; r < kQ; ++r) {
                const float qd = q[r * dim + d];
                for (int c = 0; c < NV; ++c) acc[r][c] += qd * k[c];
              }
            }
            for (int r = 0; r < kQ; ++r) {
              std::memcpy(s + r * lds + pn * kKeys, acc[r], sizeof acc[r]);
            }
            for (int c = 0; c < NV; ++c) {
              const int j0 = pn * kKeys + L * c;
              V masks;
              std::memcpy(&masks, mask + j0, sizeof masks);
              for (int r = 0; r < kQ; ++r) {
                V scores = acc[r][c] + masks;
                const int seen = i0 + r + 1 - j0;  // lanes at or before query i0 + r
                if (seen < L) scores = lanes_below<V>(seen) ? scores : splat<V>(kMinusInf);
                // a NaN is skipped; exp keeps it
                row_max[r] = scores > row_max[r] ? scores : row_max[r];
              }
            }
          });
    }
    // Softmax per row over keys [first, i] (masked): exponentials overwrite s, zero past i and for
    // padding; each row's 1 / Σ scales its output after p·V.
    float* rows_p[kQ];
    int lengths[kQ];
    float* sums[kQ];
    float inv[kQ];
    for (int r = 0; r < kQ; ++r) {
      const int i = i0 + r;
      const bool live = r < rows && valid[i] != 0;
      rows_p[r] = s + r * lds + first;
      lengths[r] = live ? i + 1 - first : 0;
      sums[r] =
          live && key_sums != nullptr && (a.key_sum_queries == 0 || i >= a.seq - a.key_sum_queries)
              ? key_sums + first
              : nullptr;
    }
    exponentiate_rows<kQ, V>(rows_p, mask + first, lengths, row_max, sums, inv);
    for (int r = 0; r < kQ; ++r) {  // zeros past each row's last key, up to the group's
      std::fill(rows_p[r] + lengths[r], s + r * lds + n, 0.0f);
    }
    // p·V, kPq queries × kPv·L dims per pass: each V vector feeds kPq FMAs (broadcast p).
    for (int r0 = 0; r0 < rows; r0 += kPq) {
      for (int d0 = 0; d0 < dim; d0 += L * kPv) {
        with_count<kPv>(
            std::min(kPv, ceil_div(dim - d0, L)), [&]<int NV>() __attribute__((always_inline)) {
              V acc[kPq][NV];
              weigh_values<kPq, NV, V>(s + r0 * lds, lds, v + d0, ldv, first, n, acc);
              for (int r = 0; r < kPq; ++r) {
                for (int c = 0; c < NV; ++c) acc[r][c] *= inv[r0 + r];
                std::memcpy(o + (r0 + r) * ldv + d0, acc[r], sizeof acc[r]);
              }
            });
      }
    }
    for (int r = 0; r < rows; ++r) {
      if (valid[i0 + r] != 0) Tile::Convert::to_halves(o + r * ldv, out + (i0 + r) * hd, dim);
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,avx2,fma"))) void prefill_block_avx512(const PrefillAttentionArgs& a,
                                                                      int b, int h, int q0, int q1,
                                                                      float* key_sums) {
  prefill_block_impl<PrefillTileAvx512>(a, b, h, q0, q1, key_sums);
}
__attribute__((target("avx2,fma"))) void prefill_block_avx2(const PrefillAttentionArgs& a, int b,
                                                            int h, int q0, int q1,
                                                            float* key_sums) {
  prefill_block_impl<PrefillTileAvx2>(a, b, h, q0, q1, key_sums);
}
#endif

enum class Isa { baseline, avx2, avx512 };

// Best instantiation this CPU runs, capped by OFFGEN_CPU_ISA=avx2|portable as in linear.cpp.
Isa select_isa() {
  const IsaCap cap = cpu_isa_cap();
  if (cap == IsaCap::portable) return Isa::baseline;
#if defined(__x86_64__) && defined(__GNUC__)
  const CpuFeatures& f = cpu_features();
  if (f.avx512f && cap != IsaCap::avx2) return Isa::avx512;
  if (f.avx2_fma) return Isa::avx2;
#endif
  return Isa::baseline;
}

void prefill_block(Isa isa, const PrefillAttentionArgs& a, int b, int h, int q0, int q1,
                   float* key_sums) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (isa == Isa::avx512) return prefill_block_avx512(a, b, h, q0, q1, key_sums);
  if (isa == Isa::avx2) return prefill_block_avx2(a, b, h, q0, q1, key_sums);
#endif
  (void)isa;
  prefill_block_impl<PrefillTilePortable>(a, b, h, q0, q1, key_sums);
}

// The K / V rows one (sequence, kv head) attends over, in slot order: its cache's first `count`
// slots, or the chosen pages' slots gathered into contiguous rows (page selection).
struct AttendedRows {
  const Half* k = nullptr;
  const Half* v = nullptr;
  int count = 0;
  float* probs = nullptr;  // where the group's probabilities go: [count] (null: not wanted)
};

// The query heads of kv head c of sequence b over `rows`: each one's scores, softmax and p·v
// exactly as a head of its own, with every K / V chunk converted once for the whole group.
template <typename V>
[[gnu::always_inline]] inline void attend_kv_head_impl(const DecodeAttentionArgs& a, int b, int c,
                                                       const AttendedRows& attended) {
  const int dim = a.head_dim;
  const int kv_heads = a.kv_head_count();
  const int group = a.heads / kv_heads;
  const int h0 = c * group;  // first query head of the group
  const std::int64_t hd = std::int64_t{a.heads} * dim;
  const int count = attended.count;
  Half* const out = a.out + std::int64_t{b} * hd + std::int64_t{h0} * dim;  // the group's rows
  float* const probs_row = attended.probs;
  if (count == 0) {
    zero_half(out, group * dim);
    return;
  }

  constexpr int kChunk = 64;  // slots converted at a time (F16C), L1-sized for D <= 128
  thread_local std::vector<float> q_buf, rows_buf, p_buf, acc_buf;
  float* const q = grow(q_buf, std::int64_t{group} * dim);
  float* const rows = grow(rows_buf, std::int64_t{kChunk} * dim);
  // Query head g's probabilities at p + g * count; alone (group 1) straight into probs.
  float* const p =
      probs_row != nullptr && group == 1 ? probs_row : grow(p_buf, std::int64_t{group} * count);
  float* const acc = grow(acc_buf, std::int64_t{group} * dim);

  const Half* q_half =
      a.qkv + std::int64_t{b} * (hd + 2 * std::int64_t{kv_heads} * dim) + std::int64_t{h0} * dim;
  half_to_float(q_half, q, static_cast<std::size_t>(group) * dim);
  for (int d = 0; d < group * dim; ++d) q[d] *= a.scale;
  for (int j0 = 0; j0 < count; j0 += kChunk) {
    const int n = std::min(kChunk, count - j0);
    half_to_float(attended.k + std::int64_t{j0} * dim, rows, static_cast<std::size_t>(n) * dim);
    // The next chunk's keys (or the first values) start arriving while this one is computed.
    // (No further than the rows there are: page selection's gathered rows end at `count`.)
    const bool more_keys = j0 + kChunk < count;
    prefetch_halves(more_keys ? attended.k + std::int64_t{j0 + kChunk} * dim : attended.v,
                    std::int64_t{std::min(kChunk, more_keys ? count - j0 - kChunk : count)} * dim);
    for (int g = 0; g < group; ++g) {
      const float* qg = q + std::int64_t{g} * dim;
      float* const pg = p + std::int64_t{g} * count;
      with_vecs_per_row(
          dim, [&]<int DV>() __attribute__((always_inline)) {
            if constexpr (DV > 0) {
              dot_rows<DV, V>(qg, rows, n, pg + j0);
            } else {
              for (int j = 0; j < n; ++j) {
                const float* kr = rows + std::int64_t{j} * dim;
                float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
                for (int d = 0; d < dim; ++d) dot += qg[d] * kr[d];
                pg[j0 + j] = dot;
              }
            }
          });
    }
  }
  for (int g = 0; g < group; ++g) {
    float* const pg = p + std::int64_t{g} * count;
    float max = kMinusInf;
#pragma omp simd reduction(max : max)
    for (int j = 0; j < count; ++j) max = vmax(max, pg[j]);
#pragma omp simd
    for (int j = 0; j < count; ++j) pg[j] = fast_exp(pg[j] - max);
    const float inv = 1.0f / ordered_sum(pg, count);
#pragma omp simd
    for (int j = 0; j < count; ++j) pg[j] *= inv;
  }

  std::fill(acc, acc + std::int64_t{group} * dim, 0.0f);
  for (int j0 = 0; j0 < count; j0 += kChunk) {
    const int n = std::min(kChunk, count - j0);
    half_to_float(attended.v + std::int64_t{j0} * dim, rows, static_cast<std::size_t>(n) * dim);
    if (j0 + kChunk < count) {
      prefetch_halves(attended.v + std::int64_t{j0 + kChunk} * dim,
                      std::int64_t{std::min(kChunk, count - j0 - kChunk)} * dim);
    }
    for (int g = 0; g < group; ++g) {
      const float* pg = p + std::int64_t{g} * count;
      float* const ag = acc + std::int64_t{g} * dim;
      with_vecs_per_row(
          dim, [&]<int DV>() __attribute__((always_inline)) {
            if constexpr (DV > 0) {
              weigh_rows<DV, V>(pg + j0, rows, n, ag);
            } else {
              for (int j = 0; j < n; ++j) {
                const float* vr = rows + std::int64_t{j} * dim;
                const float pj = pg[j0 + j];
#pragma omp simd
                for (int d = 0; d < dim; ++d) ag[d] += pj * vr[d];
              }
            }
          });
    }
  }
  float_to_half(acc, out, static_cast<std::size_t>(group) * dim);

  if (probs_row != nullptr && group > 1) {  // the group's rows, added in head order
    std::copy(p, p + count, probs_row);
    for (int g = 1; g < group; ++g) {
      const float* pg = p + std::int64_t{g} * count;
#pragma omp simd
      for (int j = 0; j < count; ++j) probs_row[j] += pg[j];
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,avx2,fma"))) void attend_kv_head_avx512(
    const DecodeAttentionArgs& a, int b, int c, const AttendedRows& attended) {
  attend_kv_head_impl<Floats16>(a, b, c, attended);
}
__attribute__((target("avx2,fma"))) void attend_kv_head_avx2(const DecodeAttentionArgs& a, int b,
                                                             int c, const AttendedRows& attended) {
  attend_kv_head_impl<Floats8>(a, b, c, attended);
}
#endif

void attend_kv_head(Isa isa, const DecodeAttentionArgs& a, int b, int c,
                    const AttendedRows& attended) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (isa == Isa::avx512) return attend_kv_head_avx512(a, b, c, attended);
  if (isa == Isa::avx2) return attend_kv_head_avx2(a, b, c, attended);
#endif
  (void)isa;
  attend_kv_head_impl<Floats4>(a, b, c, attended);
}

// Kv head c of sequence b: its cache's first slot_count[b] slots, or (page selection) the chosen
// pages' slots, gathered page by page in slot order, with their probabilities scattered back.
void decode_kv_head(Isa isa, const DecodeAttentionArgs& a, int b, int c) {
  const int dim = a.head_dim;
  const int kv_heads = a.kv_head_count();
  const int count = a.slot_count[b];
  const std::int64_t cache = (std::int64_t{b} * kv_heads + c) * a.capacity;
  float* const probs_row = a.probs != nullptr ? a.probs + cache : nullptr;
  if (a.pages == nullptr) {
    if (probs_row != nullptr) std::fill(probs_row + count, probs_row + a.capacity, 0.0f);
    attend_kv_head(isa, a, b, c,
                   {a.k_cache + cache * dim, a.v_cache + cache * dim, count, probs_row});
    return;
  }
  thread_local std::vector<Half> k_buf, v_buf;
  thread_local std::vector<float> p_buf;
  const std::int64_t row = std::int64_t{b} * kv_heads + c;
  const std::int32_t* pages = a.pages + row * a.max_selected;
  const int chosen = a.page_count[row];
  // A chosen page's valid slots: [first, end) of the cache, a contiguous run of rows.
  auto run = [&](int i) {
    const int first = pages[i] * a.page_size;
    return std::pair{first, std::max(first, std::min(count, first + a.page_size))};
  };
  int n = 0;
  for (int i = 0; i < chosen; ++i) n += run(i).second - run(i).first;
  k_buf.resize(static_cast<std::size_t>(std::int64_t{n} * dim));
  v_buf.resize(k_buf.size());
  for (int i = 0, at = 0; i < chosen; ++i) {
    const auto [first, end] = run(i);
    const std::int64_t from = (cache + first) * dim, length = std::int64_t{end - first} * dim;
    std::copy_n(a.k_cache + from, length, k_buf.data() + std::int64_t{at} * dim);
    std::copy_n(a.v_cache + from, length, v_buf.data() + std::int64_t{at} * dim);
    at += end - first;
  }
  float* p = nullptr;
  if (probs_row != nullptr) {
    p_buf.resize(static_cast<std::size_t>(n));
    p = p_buf.data();
  }
  attend_kv_head(isa, a, b, c, {k_buf.data(), v_buf.data(), n, p});
  if (probs_row != nullptr) {
    std::fill(probs_row, probs_row + a.capacity, 0.0f);
    for (int i = 0, at = 0; i < chosen; ++i) {
      const auto [first, end] = run(i);
      std::copy(p + at, p + at + (end - first), probs_row + first);
      at += end - first;
    }
  }
}

// Grouped-query attention needs whole groups (kernels/attention_args.h).
void check_groups(const char* op, int heads, int kv_heads) {
  OFFGEN_CHECK(kv_heads > 0 && heads % kv_heads == 0,
               "{}: {} query heads do not split into groups over {} kv heads", op, heads, kv_heads);
}

}  // namespace

void prefill_attention(const PrefillAttentionArgs& args) {
  if (args.batch <= 0 || args.seq <= 0 || args.heads <= 0) return;
  const int kv_heads = args.kv_head_count();
  check_groups("prefill_attention", args.heads, kv_heads);
  const int group = args.heads / kv_heads;
  // Key sums need every query of a (sequence, head) in one task (fixed summation order); with
  // enough (sequence, head) pairs, whole ones also avoid converting shared keys twice.
  const bool whole = args.key_prob_sums != nullptr ||
                     std::int64_t{args.batch} * args.heads >=
                         4 * std::int64_t{tbb::this_task_arena::max_concurrency()};
  const int block = whole ? args.seq : kQueryBlock;
  const Isa isa = select_isa();
  [[maybe_unused]] const bool bf16 = use_bf16_prefill_attention(args);
  const std::int64_t blocks = (args.seq + block - 1) / block;
  const std::int64_t tasks = std::int64_t{args.batch} * args.heads * blocks;
  // Each query head's key sums: the output row itself without GQA, else a row of its own that the
  // group pass below adds into the kv head's. Not thread_local: this thread may run another
  // prefill_attention while it waits in parallel_for below.
  std::vector<float> head_sums_buf;
  if (args.key_prob_sums != nullptr && group > 1) {
    head_sums_buf.resize(static_cast<std::size_t>(args.batch) * args.heads * args.seq);
  }
  float* const head_sums = args.key_prob_sums == nullptr ? nullptr
                           : group == 1                  ? args.key_prob_sums
                                                         : head_sums_buf.data();
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, tasks, 1), [&](const auto& r) {
    for (std::int64_t t = r.begin(); t != r.end(); ++t) {
      const auto bh = static_cast<int>(t / blocks);
      const auto q0 = static_cast<int>(t % blocks) * block;
      const int b = bh / args.heads;
      const int h = bh % args.heads;
      float* key_sums = nullptr;
      if (head_sums != nullptr) {
        key_sums = head_sums + std::int64_t{bh} * args.seq;
        std::fill(key_sums, key_sums + args.seq, 0.0f);
      }
#if defined(__x86_64__)
      if (bf16) {
        prefill_block_bf16(args, b, h, q0, std::min(args.seq, q0 + block), key_sums);
        continue;
      }
#endif
      prefill_block(isa, args, b, h, q0, std::min(args.seq, q0 + block), key_sums);
    }
  });
  if (head_sums == nullptr || group == 1) return;
  tbb::parallel_for(0, args.batch * kv_heads, [&](int bc) {
    float* const sums = args.key_prob_sums + std::int64_t{bc} * args.seq;
    const float* first = head_sums + std::int64_t{bc} * group * args.seq;  // query head bc·G
    std::copy(first, first + args.seq, sums);
    for (int g = 1; g < group; ++g) {
      const float* row = first + std::int64_t{g} * args.seq;
#pragma omp simd
      for (int j = 0; j < args.seq; ++j) sums[j] += row[j];
    }
  });
}

void decode_attention(const DecodeAttentionArgs& args) {
  if (args.batch <= 0 || args.heads <= 0) return;
  const int kv_heads = args.kv_head_count();
  check_groups("decode_attention", args.heads, kv_heads);
  for (int b = 0; b < args.batch; ++b) {
    OFFGEN_CHECK(args.slot_count[b] >= 0 && args.slot_count[b] <= args.capacity,
                 "decode_attention: slot_count {} of sequence {} is outside [0, {}]",
                 args.slot_count[b], b, args.capacity);
  }
  if (args.pages != nullptr) {  // chosen pages: ascending, at most max_selected, inside the cache
    OFFGEN_CHECK(args.page_size > 0 && args.page_count != nullptr,
                 "decode_attention: page selection needs page_size >= 1 and page counts");
    for (std::int64_t row = 0; row < std::int64_t{args.batch} * kv_heads; ++row) {
      const int n = args.page_count[row];
      OFFGEN_CHECK(n >= 0 && n <= args.max_selected,
                   "decode_attention: {} chosen pages for row {}, outside [0, {}]", n, row,
                   args.max_selected);
      for (int i = 0; i < n; ++i) {
        const int page = args.pages[row * args.max_selected + i];
        OFFGEN_CHECK(page >= 0 && std::int64_t{page} * args.page_size < args.capacity &&
                         (i == 0 || page > args.pages[row * args.max_selected + i - 1]),
                     "decode_attention: chosen page {} of row {} is out of order or past the cache",
                     page, row);
      }
    }
  }
  const std::int64_t tasks = std::int64_t{args.batch} * kv_heads;
  const Isa isa = select_isa();
  tbb::parallel_for(tbb::blocked_range<std::int64_t>(0, tasks, 1), [&](const auto& r) {
    for (std::int64_t t = r.begin(); t != r.end(); ++t) {
      decode_kv_head(isa, args, static_cast<int>(t / kv_heads), static_cast<int>(t % kv_heads));
    }
  });
}

}  // namespace offgen::kernels::cpu
