// How decode attention on a GPU spreads each (sequence, query head)'s cache slots over thread
// blocks (flash-decoding): the slots are cut into `splits` chunks of `chunk` slots, one block each,
// so that even a batch of one launches several blocks per SM; with more than one split, each block
// leaves its partial results (running max, sum and p·v) in a scratch buffer and a combine pass
// merges them in split order. The plan depends only on the cache's shape and the GPU, so a caller
// plans it once per cache shape, allocates the scratch once, and hands both to every call
// (DecodeAttentionArgs); the cpu kernels ignore them.
#pragma once

#include <algorithm>
#include <cstdint>

namespace offgen::kernels {

// Slots one block scores in shared memory: 4096 covers every OPT context (2048) in one split, so
// large batches need no scratch and no combine pass.
inline constexpr int kDecodeMaxChunk = 4096;
// The smallest split worth a block (64 rows of k and v: 32 KiB at head_dim 128), and the granule.
inline constexpr int kDecodeMinChunk = 64;
// Blocks per SM the split aims for (several resident blocks hide load latency).
inline constexpr int kDecodeBlocksPerSm = 4;

struct DecodeSplit {
  int chunk = 0;   // slots per split
  int splits = 1;  // ceil(capacity / chunk)
};

// The split for `batch` sequences of `heads` (query) heads over caches of `capacity` slots on a GPU
// with `multiprocessors` SMs: enough blocks for kDecodeBlocksPerSm per SM, chunks a multiple of
// kDecodeMinChunk in [kDecodeMinChunk, kDecodeMaxChunk]. Planned from the capacity (the slot
// counts live on the device), so a cache far from full leaves some split blocks with nothing to
// do; they exit at once. multiprocessors <= 0 (a device whose kernels do not split: the cpu one)
// gives one split of every slot.
inline DecodeSplit plan_decode_split(int batch, int heads, int capacity, int multiprocessors) {
  if (multiprocessors <= 0 || batch <= 0 || heads <= 0 || capacity <= 0) {
    return {std::max(capacity, 0), 1};
  }
  const std::int64_t bh = std::int64_t{batch} * heads;
  const std::int64_t target_blocks = std::int64_t{kDecodeBlocksPerSm} * multiprocessors;
  const std::int64_t wanted_splits = std::max<std::int64_t>(1, (target_blocks + bh - 1) / bh);
  std::int64_t chunk = (capacity + wanted_splits - 1) / wanted_splits;
  chunk = (chunk + kDecodeMinChunk - 1) / kDecodeMinChunk * kDecodeMinChunk;
  chunk = std::clamp<std::int64_t>(chunk, kDecodeMinChunk, kDecodeMaxChunk);
  return {static_cast<int>(chunk), static_cast<int>((capacity + chunk - 1) / chunk)};
}

// Bytes of fp32 scratch decode attention needs for this split over `heads` query heads sharing
// `kv_heads` cache heads (0 = heads), in this order:
//   with several splits: (max, sum) per (sequence, query head, split), then head_dim partial p·v
//   sums per (sequence, query head, split);
//   under GQA (kv_heads in (0, heads)): one fp32 probability row per (sequence, query head),
//   `capacity` floats apart (counted as chunk · splits >= capacity), which a group-sum pass adds
//   into the per-kv-head probs (used only when probs are requested, but always counted, so one
//   allocation serves every call).
// 0 for one split without GQA.
inline std::uint64_t decode_split_scratch_bytes(const DecodeSplit& split, int batch, int heads,
                                                int head_dim, int kv_heads = 0) {
  if (batch <= 0 || heads <= 0) return 0;
  const auto bh = static_cast<std::uint64_t>(batch) * static_cast<std::uint64_t>(heads);
  std::uint64_t floats = 0;
  if (split.splits > 1) {
    floats += bh * static_cast<std::uint64_t>(split.splits) *
              (2 + static_cast<std::uint64_t>(std::max(head_dim, 0)));
  }
  if (kv_heads > 0 && kv_heads < heads) {
    floats += bh * static_cast<std::uint64_t>(std::max(split.chunk, 0)) *
              static_cast<std::uint64_t>(std::max(split.splits, 1));
  }
  return floats * sizeof(float);
}

}  // namespace offgen::kernels
