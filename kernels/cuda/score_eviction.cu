// Attention-score eviction kernels (contract: kernels/cuda/score_eviction.h). One block per
// (sequence, head), or per sequence where its heads rank together at decode: the state of one cache
// is at most a few thousand slots, so a block holds it comfortably and every choice is a
// block-wide reduction — no host round trip, no atomics, deterministic.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <cstdint>

#include "engine/core/cuda_check.h"
#include "kernels/cuda/score_eviction.h"

namespace offgen::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// Order-preserving map of a float to an unsigned key: a > b  <=>  key(a) > key(b).
__device__ std::uint32_t ordered_key(float value) {
  const std::uint32_t bits = __float_as_uint(value);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// ---- prefill ---------------------------------------------------------------------------------

// Whether prefill ranks by something other than the head's own sums (then staged in shared memory).
__host__ __device__ bool staged_ranking(const ScorePrefillArgs& a) {
  return a.heads_mode == ScoreHeads::layer_mean || a.pool_kernel > 1;
}

__global__ void __launch_bounds__(kThreads) score_prefill_keep_kernel(ScorePrefillArgs a) {
  extern __shared__ float staged[];  // [2 * seq] when staged_ranking: r, then the pooled r
  using Reduce = cub::BlockReduce<int, kThreads>;
  using Scan = cub::BlockScan<int, kThreads>;
  __shared__ union {
    typename Reduce::TempStorage reduce;
    typename Scan::TempStorage scan;
  } temp;
  __shared__ int shared_int;
  __shared__ std::uint32_t shared_key;

  const int b = blockIdx.x / a.heads;
  const std::int64_t bh = blockIdx.x;
  const int seq = a.seq;
  const std::uint8_t* valid = a.valid + static_cast<std::int64_t>(b) * seq;
  const float* sums = a.key_prob_sums + bh * seq;
  std::int32_t* token_slot = a.token_slot + bh * seq;
  std::int32_t* position = a.position + bh * a.capacity;
  float* score = a.score + bh * a.capacity;

  // Real tokens of this sequence; left padding puts them at [pad, seq).
  int local = 0;
  for (int i = threadIdx.x; i < seq; i += kThreads) local += valid[i] ? 1 : 0;
  const int total = Reduce(temp.reduce).Sum(local);
  if (threadIdx.x == 0) shared_int = total;
  __syncthreads();
  const int len = shared_int;
  const int pad = seq - len;

  // Which prompt tokens stay: all when they fit, else the R most recent plus the H = C - R
  // highest-scoring older ones. The H-th largest score T is found by a radix select over the
  // order-preserving keys (32 block-wide counts, any prompt length); tokens above T stay, and of
  // those equal to T the newest stay (ties: the older token goes).
  const int budget = a.budget[b];
  const int recent = a.recent[b];
  const bool keep_all = len <= budget;
  const int window_start = keep_all ? 0 : len - recent;
  const int heavy = keep_all ? 0 : budget - recent;

  // The ranking of the older tokens (eviction_args.h): the head's own sums, or staged — their
  // mean over the heads, then pooled — each entry by one thread in the CPU kernel's order.
  const bool staged_rank = !keep_all && heavy > 0 && staged_ranking(a);
  float* const raw = staged;
  float* const pooled = staged + seq;
  if (staged_rank) {
    const float* head0 = a.key_prob_sums + static_cast<std::int64_t>(b) * a.heads * seq + pad;
    for (int i = threadIdx.x; i < window_start; i += kThreads) {
      if (a.heads_mode == ScoreHeads::layer_mean) {
        float sum = 0.0f;
        for (int g = 0; g < a.heads; ++g) sum += head0[static_cast<std::int64_t>(g) * seq + i];
        raw[i] = sum / static_cast<float>(a.heads);
      } else {
        raw[i] = sums[pad + i];
      }
    }
    __syncthreads();
    const int k = a.pool_kernel;
    for (int i = threadIdx.x; i < window_start; i += kThreads) {
      if (k == 1) {
        pooled[i] = raw[i];
        continue;
      }
      float sum = 0.0f;
      for (int j = max(0, i - k / 2); j <= min(window_start - 1, i + k / 2); ++j) sum += raw[j];
      pooled[i] = sum / static_cast<float>(k);
    }
    __syncthreads();
  }
  auto rank = [&](int i) { return staged_rank ? pooled[i] : sums[pad + i]; };
  std::uint32_t threshold = 0;
  int ties_to_keep = 0;
  if (!keep_all && heavy > 0) {
    std::uint32_t prefix = 0;
    std::uint32_t mask = 0;
    int want = heavy;  // rank of T among the older tokens, counted from the largest
    for (int bit = 31; bit >= 0; --bit) {
      const std::uint32_t candidate = prefix | (1u << bit);
      const std::uint32_t candidate_mask = mask | (1u << bit);
      int count = 0;
      for (int i = threadIdx.x; i < window_start; i += kThreads) {
        count += (ordered_key(rank(i)) & candidate_mask) == candidate ? 1 : 0;
      }
      const int matching = Reduce(temp.reduce).Sum(count);
      if (threadIdx.x == 0) shared_int = matching;
      __syncthreads();
      const int c = shared_int;
      __syncthreads();  // everyone has read shared_int before the next round writes it
      if (c >= want) {
        prefix = candidate;
      } else {
        want -= c;
      }
      mask = candidate_mask;
    }
    threshold = prefix;
    ties_to_keep = want;
  }
  if (threadIdx.x == 0) shared_key = threshold;
  __syncthreads();
  threshold = shared_key;

  // Each thread owns a contiguous chunk of the prompt, so "newest ties" and "slot = rank in
  // position order" become two block scans over per-thread counts.
  const int chunk = (len + kThreads - 1) / kThreads;
  const int begin = min(len, static_cast<int>(threadIdx.x) * chunk);
  const int end = min(len, begin + chunk);

  // Ties counted from the newest end: a thread keeps its ties while the ties of newer chunks
  // plus its own so far are fewer than ties_to_keep.
  int my_ties = 0;
  if (!keep_all && heavy > 0) {
    for (int i = begin; i < min(end, window_start); ++i) {
      my_ties += ordered_key(rank(i)) == threshold ? 1 : 0;
    }
  }
  // Suffix sum = total - inclusive prefix sum.
  int ties_before_or_mine = 0;
  Scan(temp.scan).InclusiveSum(my_ties, ties_before_or_mine);
  __syncthreads();
  const int all_ties = Reduce(temp.reduce).Sum(my_ties);
  if (threadIdx.x == 0) shared_int = all_ties;
  __syncthreads();
  const int newer_ties = shared_int - ties_before_or_mine;  // in chunks after this thread's
  __syncthreads();

  // Whether token i stays. Called for i walking forward through this thread's chunk;
  // ties_after holds the chunk's ties not yet walked past (at or after i).
  const bool selecting = !keep_all && heavy > 0;
  auto stays = [&](int i, int& ties_after) {
    if (keep_all || i >= window_start) return true;
    if (heavy == 0) return false;
    const std::uint32_t key = ordered_key(rank(i));
    if (key != threshold) return key > threshold;
    --ties_after;  // now: this chunk's ties newer than i
    return newer_ties + ties_after < ties_to_keep;
  };

  // First walk counts what stays, so a scan can give each thread its first slot (slots go in
  // position order); the second walk writes.
  int my_kept = 0;
  {
    int ties_after = selecting ? my_ties : 0;
    for (int i = begin; i < end; ++i) my_kept += stays(i, ties_after) ? 1 : 0;
  }
  int slot = 0;
  Scan(temp.scan).ExclusiveSum(my_kept, slot);
  __syncthreads();

  // Clear the state; slots past the kept ones stay free.
  for (int s = threadIdx.x; s < a.capacity; s += kThreads) {
    position[s] = -1;
    score[s] = 0.0f;
  }
  for (int i = threadIdx.x; i < pad; i += kThreads) token_slot[i] = -1;
  __syncthreads();
  {
    int ties_after = selecting ? my_ties : 0;
    for (int i = begin; i < end; ++i) {
      if (stays(i, ties_after)) {
        position[slot] = i;
        score[slot] = sums[pad + i];
        token_slot[pad + i] = slot;
        ++slot;
      } else {
        token_slot[pad + i] = -1;
      }
    }
  }
  if (threadIdx.x == 0) a.write_slot[bh] = keep_all ? len : budget;
}

// ---- decode ----------------------------------------------------------------------------------

struct Candidate {
  float score;
  std::int32_t position;
  std::int32_t slot;
};

// The better victim: lower score, then the older token; slot -1 means "none".
struct BetterVictim {
  __device__ Candidate operator()(const Candidate& x, const Candidate& y) const {
    if (x.slot < 0) return y;
    if (y.slot < 0) return x;
    if (x.score != y.score) return x.score < y.score ? x : y;
    if (x.position != y.position) return x.position < y.position ? x : y;
    return x.slot < y.slot ? x : y;  // a strict total order: the result is reduction-order free
  }
};

constexpr int kDecodeThreads = 128;

__global__ void __launch_bounds__(kDecodeThreads) score_decode_update_kernel(ScoreDecodeArgs a) {
  using Reduce = cub::BlockReduce<Candidate, kDecodeThreads>;
  __shared__ typename Reduce::TempStorage temp;
  // layer_mean: one block per sequence handles all its heads; else one block per (sequence, head).
  const bool together = a.heads_mode == ScoreHeads::layer_mean;
  const int b = together ? static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x) / a.heads;
  if (!a.advancing[b]) return;  // its token is not kept: the state does not change
  const std::int64_t first = together ? static_cast<std::int64_t>(b) * a.heads : blockIdx.x;
  const std::int64_t last = together ? first + a.heads : first + 1;  // this block's cells
  const int n = a.count[b];
  const std::int32_t newest = a.new_position[b];
  const bool accumulate = a.update == ScoreUpdate::accumulate;

  // The new token's slot starts from 0; then every attended slot (itself included) adds or takes
  // its probability. Each slot belongs to one thread, so no ordering between threads is needed.
  for (std::int64_t bh = first; bh < last; ++bh) {
    std::int32_t* position = a.position + bh * a.capacity;
    float* score = a.score + bh * a.capacity;
    const float* row = a.probs + bh * a.capacity;
    const int slot = a.write_slot[bh];
    for (int s = threadIdx.x; s < n; s += kDecodeThreads) {
      if (s == slot) {
        position[s] = newest;
        score[s] = row[s];
      } else {
        score[s] = accumulate ? score[s] + row[s] : row[s];
      }
    }
  }
  // Every thread has read write_slot (`slot`, above) and written its slots before thread 0 may
  // overwrite write_slot below or anyone reads another thread's scores.
  __syncthreads();
  if (n <= a.budget[b]) {
    if (threadIdx.x == 0) {
      for (std::int64_t bh = first; bh < last; ++bh) a.write_slot[bh] = n;  // still a prefix
    }
    return;
  }
  // Full: evict the lowest ranking outside the R most recent tokens. Every token a sequence
  // advanced with entered the cache and the window is never evicted, so the R most recent cached
  // positions are exactly newest - R + 1 .. newest (the CPU policy finds them by sorting; the gpu
  // test checks both agree). The cells of a block hold the same positions.
  const std::int32_t oldest_recent = newest - a.recent[b] + 1;
  const std::int32_t* position = a.position + first * a.capacity;
  Candidate best{0.0f, 0, -1};
  for (int s = threadIdx.x; s < n; s += kDecodeThreads) {
    const std::int32_t p = position[s];
    if (p >= oldest_recent) continue;
    float r = a.score[first * a.capacity + s];
    if (together) {
      for (std::int64_t bh = first + 1; bh < last; ++bh) r += a.score[bh * a.capacity + s];
      r /= static_cast<float>(a.heads);
    }
    best = BetterVictim{}(best, Candidate{r, p, s});
  }
  const Candidate victim = Reduce(temp).Reduce(best, BetterVictim{});
  if (threadIdx.x == 0) {
    // Unreachable with R <= C (C + 1 slots, at most R in the window); kept defensive.
    const int v = victim.slot >= 0 ? victim.slot : a.write_slot[first];
    for (std::int64_t bh = first; bh < last; ++bh) {
      a.position[bh * a.capacity + v] = -1;
      a.score[bh * a.capacity + v] = 0.0f;
      a.write_slot[bh] = v;
    }
  }
}

}  // namespace

void score_prefill_keep(const ScorePrefillArgs& args, cudaStream_t stream) {
  // seq == 0 still launches: as on the cpu, every (sequence, head) then gets an empty state.
  if (args.batch == 0 || args.heads == 0) return;
  // The per-sequence budgets are device memory: AttentionScoreState checks them when it uploads
  // them.
  OFFGEN_CUDA_REQUIRE(args.budget != nullptr && args.recent != nullptr && args.capacity >= 2,
                      "score_prefill_keep: needs per-sequence budgets and capacity >= 2");
  const unsigned blocks = static_cast<unsigned>(args.batch) * static_cast<unsigned>(args.heads);
  const int smem = staged_ranking(args) ? 2 * args.seq * static_cast<int>(sizeof(float)) : 0;
  if (smem > 48 * 1024) {
    OFFGEN_CUDA_CHECK(cudaFuncSetAttribute(score_prefill_keep_kernel,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  }
  score_prefill_keep_kernel<<<blocks, kThreads, smem, stream>>>(args);
  OFFGEN_CUDA_CHECK_LAUNCH();
}

void score_decode_update(const ScoreDecodeArgs& args, cudaStream_t stream) {
  if (args.batch == 0 || args.heads == 0) return;
  OFFGEN_CUDA_REQUIRE(args.budget != nullptr && args.recent != nullptr && args.capacity >= 2,
                      "score_decode_update: needs per-sequence budgets and capacity >= 2");
  const unsigned blocks =
      args.heads_mode == ScoreHeads::layer_mean
          ? static_cast<unsigned>(args.batch)
          : static_cast<unsigned>(args.batch) * static_cast<unsigned>(args.heads);
  score_decode_update_kernel<<<blocks, kDecodeThreads, 0, stream>>>(args);
  OFFGEN_CUDA_CHECK_LAUNCH();
}

}  // namespace offgen::kernels::cuda
