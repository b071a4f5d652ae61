// CUDA log-softmax, target log-probabilities and greedy argmax over fp32 logits rows (semantics:
// kernels/softmax_args.h and kernels/sampling_args.h).
//
// One block per row (up to 1024 threads: a 50272-entry vocabulary row is 200 KB). log-sum-exp is
// max-subtracted fp32: a max pass, then a pass summing exp(x - max), each reduced over the block;
// the row is still in L2 for the second pass. The final max + log(sum) is taken in double, as on
// the CPU. Every reduction has a fixed order, so results are deterministic.
#include "kernels/cuda/softmax.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "engine/core/cuda_check.h"
#include "kernels/cuda/block_reduce.cuh"

namespace offgen::kernels::cuda {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kMaxThreads = 1024;
// At most this many blocks (rows is 64-bit, a grid's x size is not); a grid-stride loop covers the
// remaining rows. 65535 blocks already fill an H100 many times over.
constexpr std::int64_t kMaxBlocks = 65535;

// kVec consecutive floats, aligned so one load / store moves them all (kVec = 4: 16 bytes).
template <int kVec>
struct alignas(4 * kVec) FloatVec {
  float f[kVec];
};

// ---- block reductions (blockDim.x a multiple of 32; every thread gets the result) ------------
// The two barriers make each safe to call repeatedly: the shared slots are only rewritten after
// every thread has read them. Butterfly shuffles leave every lane of a warp with the same value.

__device__ float block_max(float v) {
  return block_reduce(v, MaxOp{}, -INFINITY);
}

// (value, index) candidates for argmax: the larger value wins, equal values the lower index. A
// strict total order on distinct indices, so the result does not depend on the reduction order.
struct Best {
  float value;
  int index;
};

__device__ bool beats(const Best& a, const Best& b) {
  return a.value > b.value || (a.value == b.value && a.index < b.index);
}

__device__ Best warp_best(Best b) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const Best other{__shfl_xor_sync(kFullMask, b.value, offset),
                     __shfl_xor_sync(kFullMask, b.index, offset)};
    if (beats(other, b)) b = other;
  }
  return b;
}

// No candidate: loses to every real element, even a -inf one (by index).
__device__ Best no_candidate() {
  return Best{-INFINITY, INT_MAX};
}

__device__ int block_argmax(Best b) {
  __shared__ Best partial[kWarp];
  __shared__ int total;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  b = warp_best(b);
  if (lane == 0) partial[warp] = b;
  __syncthreads();
  if (warp == 0) {
    b = warp_best(lane < static_cast<int>(blockDim.x) / kWarp ? partial[lane] : no_candidate());
    if (lane == 0) total = b.index;
  }
  __syncthreads();
  return total;
}

// ---- row kernels ---------------------------------------------------------------------------

// log sum exp(row), returned to every thread of the block. The exp sum is fp32: each thread adds
// at most ~cols / blockDim terms (about 50 for 50272 columns and 1024 threads), then a 10-level
// tree, within the (64 + log2 cols) * 2^-24 relative error the CPU's blocked sum allows.
template <int kVec>
__device__ double row_log_sum_exp(const float* row, int cols) {
  const auto* vec_row = reinterpret_cast<const FloatVec<kVec>*>(row);
  const int vecs = cols / kVec;
  const int first = static_cast<int>(threadIdx.x);
  const int stride = static_cast<int>(blockDim.x);
  float max = -INFINITY;
  for (int v = first; v < vecs; v += stride) {
    const FloatVec<kVec> a = vec_row[v];
#pragma unroll
    for (int k = 0; k < kVec; ++k) max = fmaxf(max, a.f[k]);
  }
  max = block_max(max);
  float sum = 0.0f;
  for (int v = first; v < vecs; v += stride) {
    const FloatVec<kVec> a = vec_row[v];
#pragma unroll
    for (int k = 0; k < kVec; ++k) sum += expf(a.f[k] - max);  // expf: within 2 ulp
  }
  sum = block_sum(sum);
  return static_cast<double>(max) + log(static_cast<double>(sum));
}

template <int kVec>
__global__ void __launch_bounds__(kMaxThreads)
    log_softmax_kernel(float* values, std::int64_t rows, int cols) {
  const int vecs = cols / kVec;
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float* row = values + r * cols;
    // row_log_sum_exp's final barrier orders all its reads before these in-place writes.
    const auto lse = static_cast<float>(row_log_sum_exp<kVec>(row, cols));
    auto* vec_row = reinterpret_cast<FloatVec<kVec>*>(row);
    for (int v = static_cast<int>(threadIdx.x); v < vecs; v += static_cast<int>(blockDim.x)) {
      FloatVec<kVec> a = vec_row[v];
#pragma unroll
      for (int k = 0; k < kVec; ++k) a.f[k] -= lse;
      vec_row[v] = a;
    }
  }
}

template <int kVec>
__global__ void __launch_bounds__(kMaxThreads)
    token_logprobs_kernel(const float* logits, const std::int32_t* targets, float* out,
                          std::int64_t rows, int vocab) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* row = logits + r * vocab;
    const double lse = row_log_sum_exp<kVec>(row, vocab);
    // Precondition (as on the CPU): 0 <= targets[r] < vocab.
    if (threadIdx.x == 0) out[r] = static_cast<float>(static_cast<double>(row[targets[r]]) - lse);
  }
}

// The block's best element of a row (NaN ranks as -inf) among those `above` beats, returned to
// every thread. Each thread scans its elements in increasing index order, so among equal values
// it keeps its first: its candidate is its lowest-index maximum.
template <int kVec>
__device__ int best_below(const float* row, int vocab, const Best& above) {
  const auto* vec_row = reinterpret_cast<const FloatVec<kVec>*>(row);
  const int vecs = vocab / kVec;
  Best best = no_candidate();
  for (int v = static_cast<int>(threadIdx.x); v < vecs; v += static_cast<int>(blockDim.x)) {
    const FloatVec<kVec> a = vec_row[v];
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const Best candidate{isnan(a.f[e]) ? -INFINITY : a.f[e], v * kVec + e};
      if (beats(above, candidate) && beats(candidate, best)) best = candidate;
    }
  }
  return block_argmax(best);
}

// Beats every element: best_below(row, vocab, above_all()) is the row's argmax.
__device__ Best above_all() {
  return Best{INFINITY, -1};
}

// k block-wide argmax passes per row, pass j over the elements the (j-1)-th pick beats in the
// (rank, id) order, so nothing is excluded by a list and each pass is one read of the row.
template <int kVec>
__global__ void __launch_bounds__(kMaxThreads)
    top_logprobs_kernel(const float* logits, std::int64_t rows, int vocab, int k, std::int32_t* ids,
                        float* values) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* row = logits + r * vocab;
    const double lse = row_log_sum_exp<kVec>(row, vocab);
    Best previous = above_all();
    for (int j = 0; j < k; ++j) {
      const int index = best_below<kVec>(row, vocab, previous);
      previous = Best{isnan(row[index]) ? -INFINITY : row[index], index};
      if (threadIdx.x == 0) {
        ids[r * k + j] = index;
        values[r * k + j] = static_cast<float>(static_cast<double>(row[index]) - lse);
      }
    }
  }
}

// A NaN logit ranks as -inf, as in the sampler's argmax; so does a row of all NaN / -inf pick 0.
template <int kVec>
__global__ void __launch_bounds__(kMaxThreads)
    argmax_rows_kernel(const float* logits, std::int64_t rows, int vocab, std::int32_t* out) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int index = best_below<kVec>(logits + r * vocab, vocab, above_all());
    if (threadIdx.x == 0) out[r] = index;
  }
}

// ---- host side -----------------------------------------------------------------------------

// Widest vector (in floats) that divides cols and to which the row pointer is aligned; with cols a
// multiple of it, every row start is aligned too.
int pick_vec(int cols, const void* p) {
  for (int vec = 4; vec > 1; vec /= 2) {
    if (cols % vec == 0 && reinterpret_cast<std::uintptr_t>(p) % (sizeof(float) * vec) == 0) {
      return vec;
    }
  }
  return 1;
}

struct Launch {
  unsigned blocks;
  int threads;
};

// One thread per vector, in whole warps (the block reductions need them), at most kMaxThreads.
Launch row_launch(std::int64_t rows, int cols, int vec) {
  const int vecs = cols / vec;
  return {static_cast<unsigned>(std::min(rows, kMaxBlocks)),
          std::clamp((vecs + kWarp - 1) / kWarp * kWarp, kWarp, kMaxThreads)};
}

// Calls f(std::integral_constant<int, vec>{}) for the runtime vector width.
template <typename F>
void with_vec(int vec, F&& f) {
  switch (vec) {
    case 4:
      f(std::integral_constant<int, 4>{});
      break;
    case 2:
      f(std::integral_constant<int, 2>{});
      break;
    default:
      f(std::integral_constant<int, 1>{});
      break;
  }
}

}  // namespace

void log_softmax(const LogSoftmaxArgs& args, cudaStream_t stream) {
  float* const values = args.values;
  const std::int64_t rows = args.rows;
  const int cols = args.cols;
  if (rows <= 0 || cols <= 0) return;
  const int vec = pick_vec(cols, values);
  const Launch l = row_launch(rows, cols, vec);
  with_vec(vec, [&](auto v) {
    log_softmax_kernel<decltype(v)::value><<<l.blocks, l.threads, 0, stream>>>(values, rows, cols);
  });
  OFFGEN_CUDA_CHECK_LAUNCH();
}

void token_logprobs(const TokenLogprobsArgs& args, cudaStream_t stream) {
  const float* const logits = args.logits;
  const std::int32_t* const targets = args.targets;
  float* const out = args.out;
  const std::int64_t rows = args.rows;
  const int vocab = args.vocab;
  if (rows <= 0 || vocab <= 0) return;
  const int vec = pick_vec(vocab, logits);
  const Launch l = row_launch(rows, vocab, vec);
  with_vec(vec, [&](auto v) {
    token_logprobs_kernel<decltype(v)::value>
        <<<l.blocks, l.threads, 0, stream>>>(logits, targets, out, rows, vocab);
  });
  OFFGEN_CUDA_CHECK_LAUNCH();
}

void top_logprobs(const TopLogprobsArgs& args, cudaStream_t stream) {
  if (args.rows <= 0 || args.vocab <= 0 || args.k <= 0) return;
  const int vec = pick_vec(args.vocab, args.logits);
  const Launch l = row_launch(args.rows, args.vocab, vec);
  with_vec(vec, [&](auto v) {
    top_logprobs_kernel<decltype(v)::value><<<l.blocks, l.threads, 0, stream>>>(
        args.logits, args.rows, args.vocab, args.k, args.ids, args.values);
  });
  OFFGEN_CUDA_CHECK_LAUNCH();
}

void argmax_rows(const ArgmaxRowsArgs& args, cudaStream_t stream) {
  const float* const logits = args.logits;
  std::int32_t* const out = args.out;
  const std::int64_t rows = args.rows;
  const int vocab = args.vocab;
  if (rows <= 0 || vocab <= 0) return;
  const int vec = pick_vec(vocab, logits);
  const Launch l = row_launch(rows, vocab, vec);
  with_vec(vec, [&](auto v) {
    argmax_rows_kernel<decltype(v)::value>
        <<<l.blocks, l.threads, 0, stream>>>(logits, rows, vocab, out);
  });
  OFFGEN_CUDA_CHECK_LAUNCH();
}

}  // namespace offgen::kernels::cuda
