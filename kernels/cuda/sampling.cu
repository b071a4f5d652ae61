#include "kernels/cuda/sampling.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "engine/core/cuda_check.h"
#include "kernels/cuda/block_reduce.cuh"

namespace offgen::kernels::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr std::int64_t kMaxBlocks = 65535;  // a grid-stride loop covers more rows
constexpr unsigned kOneBits = 0x3F800000u;  // 1.0f: no weight is larger

// fp32 logits as unsigned keys in the same order (-inf lowest, +inf highest).
__device__ unsigned order_key(float x) {
  const unsigned bits = __float_as_uint(x);
  return (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
}
__device__ float from_order_key(unsigned key) {
  return __uint_as_float((key & 0x80000000u) ? key & 0x7FFFFFFFu : ~key);
}

// This thread's contiguous slice of the row: [begin, end). Contiguous (not strided) so the draw's
// running sum in id order is a prefix sum over threads.
struct Slice {
  int begin;
  int end;
};
__device__ Slice slice_of(int vocab) {
  const int chunk = (vocab + static_cast<int>(blockDim.x) - 1) / static_cast<int>(blockDim.x);
  const int begin = min(vocab, static_cast<int>(threadIdx.x) * chunk);
  return {begin, min(vocab, begin + chunk)};
}

struct Row {
  const float* x;
  const std::uint8_t* sampleable;
  __device__ bool candidate(int i) const {
    return (sampleable == nullptr || sampleable[i] != 0) && x[i] > -INFINITY;  // NaN: false
  }
};

// Argmax over every id, the lowest id among equal maxima (NaN ranks as -inf; an all -inf / NaN
// row picks 0).
__device__ int greedy_pick(const float* x, Slice s, int vocab) {
  float best = -INFINITY;
  int best_index = INT_MAX;
  for (int i = s.begin; i < s.end; ++i) {
    const float v = isnan(x[i]) ? -INFINITY : x[i];
    if (v > best || best_index == INT_MAX) {
      best = v;
      best_index = i;
    }
  }
  const float top = block_reduce(best, MaxOp{}, -INFINITY);
  const int index = block_reduce(best == top ? best_index : INT_MAX, MinOp{}, INT_MAX);
  return index == INT_MAX ? 0 : min(index, vocab - 1);
}

// The k-th largest candidate logit: four rounds of an 8-bit radix select from the top digit,
// each counting the candidates that share the digits chosen so far (integer counts: exact).
__device__ float kth_largest(const Row& row, Slice s, int k) {
  __shared__ int histogram[256];
  __shared__ unsigned prefix_shared;
  __shared__ int remaining_shared;
  unsigned prefix = 0;
  int remaining = k;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int d = static_cast<int>(threadIdx.x); d < 256; d += static_cast<int>(blockDim.x)) {
      histogram[d] = 0;
    }
    __syncthreads();
    const unsigned high_mask = shift == 24 ? 0u : ~0u << (shift + 8);
    for (int i = s.begin; i < s.end; ++i) {
      if (!row.candidate(i)) continue;
      const unsigned key = order_key(row.x[i]);
      if ((key & high_mask) == prefix) atomicAdd(&histogram[(key >> shift) & 0xFFu], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int d = 255;
      while (d > 0 && remaining > histogram[d]) remaining -= histogram[d--];
      prefix_shared = prefix | (static_cast<unsigned>(d) << shift);
      remaining_shared = remaining;
    }
    __syncthreads();
    prefix = prefix_shared;
    remaining = remaining_shared;
    __syncthreads();
  }
  return from_order_key(prefix);
}

struct Weights {
  Row row;
  float m;
  float kth;
  float temperature;
  float min_p;  // 0 = off
  __device__ float at(int i) const {
    if (!row.candidate(i) || row.x[i] < kth) return 0.0f;
    const float x = row.x[i];
    const float w = x == m ? 1.0f : expf((x - m) / temperature);
    return w >= min_p ? w : 0.0f;
  }
};

// Sum over the block of the weights >= tau, in double.
__device__ double mass_at_least(const Weights& w, Slice s, float tau) {
  double sum = 0.0;
  for (int i = s.begin; i < s.end; ++i) {
    const float v = w.at(i);
    if (v > 0.0f && v >= tau) sum += v;
  }
  return block_reduce(sum, SumOp{}, 0.0);
}

__global__ void __launch_bounds__(kThreads) sample_rows_kernel(SampleRowsArgs args) {
  const Slice s = slice_of(args.vocab);
  for (std::int64_t r = blockIdx.x; r < args.rows; r += gridDim.x) {
    const float* x = args.logits + r * args.vocab;
    const SampleParams p = args.params[r];
    const Row row{x, args.sampleable};
    bool greedy = p.temperature == 0.0f || p.top_k == 1;
    float m = -INFINITY;
    int count = 0;
    if (!greedy) {
      for (int i = s.begin; i < s.end; ++i) {
        if (row.candidate(i)) {
          m = fmaxf(m, x[i]);
          ++count;
        }
      }
      m = block_reduce(m, MaxOp{}, -INFINITY);
      count = block_reduce(count, SumOp{}, 0);
      greedy = count == 0;
    }
    if (greedy) {
      const int pick = greedy_pick(x, s, args.vocab);
      if (threadIdx.x == 0) args.out[r] = pick;
      continue;
    }
    const float kth = p.top_k > 0 && p.top_k < count ? kth_largest(row, s, p.top_k) : -INFINITY;
    const Weights w{row, m, kth, p.temperature, p.min_p};
    // top-p: the largest tau (as fp32 bits) whose weights >= tau still hold top_p of the mass.
    float tau = 0.0f;
    if (p.top_p < 1.0f) {
      const double z = mass_at_least(w, s, 0.0f);
      const double target = static_cast<double>(p.top_p) * z;
      unsigned lo = 1, hi = kOneBits + 1;  // mass(lo) = z >= target; mass(hi) = 0 < target
      while (hi - lo > 1) {
        const unsigned mid = lo + (hi - lo) / 2;
        if (mass_at_least(w, s, __uint_as_float(mid)) >= target) {
          lo = mid;
        } else {
          hi = mid;
        }
      }
      tau = __uint_as_float(lo);
    }
    // The draw: thread t's kept mass is its slice's. The first thread with kept mass whose
    // inclusive prefix sum passes uniform * total walks its slice from the sum before it. (The
    // scan associates differently per thread, so "first" is taken by a reduction, never by
    // comparing neighbours' sums: exactly one thread picks.)
    double own = 0.0;
    for (int i = s.begin; i < s.end; ++i) {
      const float v = w.at(i);
      if (v > 0.0f && v >= tau) own += v;
    }
    __shared__ double inclusive_of[kThreads];
    double total = 0.0;
    const double inclusive = block_inclusive_scan(own, total);
    inclusive_of[threadIdx.x] = inclusive;
    const double target = static_cast<double>(p.uniform) * total;
    const int t = static_cast<int>(threadIdx.x);
    int chosen = block_reduce(own > 0.0 && target < inclusive ? t : INT_MAX, MinOp{}, INT_MAX);
    if (chosen == INT_MAX) {  // rounding: the last thread with kept mass
      chosen = -block_reduce(own > 0.0 ? -t : INT_MAX, MinOp{}, INT_MAX);
    }
    if (t == chosen) {
      double running = t == 0 ? 0.0 : inclusive_of[t - 1];
      int pick = -1;
      for (int i = s.begin; i < s.end; ++i) {
        const float v = w.at(i);
        if (v <= 0.0f || v < tau) continue;
        running += v;
        pick = i;
        if (running > target) break;
      }
      args.out[r] = pick;  // rounding short of the target: the slice's last kept id
    }
    __syncthreads();  // the next row reuses the reductions' shared memory
  }
}

}  // namespace

void sample_rows(const SampleRowsArgs& args, cudaStream_t stream) {
  if (args.rows <= 0 || args.vocab <= 0) return;
  const int threads = std::clamp((args.vocab + 31) / 32 * 32, 32, kThreads);
  const auto blocks = static_cast<unsigned>(std::min(args.rows, kMaxBlocks));
  sample_rows_kernel<<<blocks, threads, 0, stream>>>(args);
  OFFGEN_CUDA_CHECK_LAUNCH();
}

}  // namespace offgen::kernels::cuda
