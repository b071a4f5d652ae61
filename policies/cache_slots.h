// Slot bookkeeping, on the host, of the KV caches of one batch under a policy whose choices depend
// only on token positions (full, local, streaming): every layer and head of a sequence then keeps
// the same tokens in the same slots, so the host can plan each step and the device only follows.
//
// Each sequence has its own policy and budget C (its own length decides it, never its
// batch-mates'); every cache has the batch's largest C + 1 slots, of which a sequence uses its
// first C + 1. At attention time the valid slots are always [0, slot_count): a decode step writes
// its token into the one free slot, attends over all of them, and — if the cache now holds C + 1
// tokens — frees the policy's victim for the next step.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "policies/kv_policy.h"

namespace offgen {

class CacheSlots {
 public:
  // One policy per sequence; none may need scores (h2o keeps per-head state on the device
  // instead), and each must outlive this object. capacity: slots per cache, at least every
  // budget + 1.
  CacheSlots(std::vector<const KvPolicy*> policies, int capacity);

  // Slots per (layer, sequence, head) cache.
  int capacity() const { return capacity_; }

  // Prefill of sequences with prompt_lengths[b] real tokens (positions 0 .. len-1), one per
  // policy.
  void start(std::span<const int> prompt_lengths);
  // After start(): the slot of each of sequence b's prompt positions (-1: not kept).
  std::vector<std::int32_t> prompt_slots(int b, int prompt_len) const;

  // The next decode step: write_slot[b] is where sequence b's new token goes (every layer and
  // head), slot_count[b] the slots it attends over (the new token included).
  void plan_decode(std::int32_t* write_slot, std::int32_t* slot_count) const;
  // After the step: sequences with advancing[b] = 1 keep their token at `position[b]` (evicting
  // the policy's victim if the cache is over budget); the others drop it.
  void commit(std::span<const std::uint8_t> advancing, std::span<const std::int32_t> position);

  int cached(int b) const;  // tokens held by sequence b's caches

  // Sequence b is replaced by sequence from_b of `from` (a batch that prefilled it), now under
  // `policy` (its own, which must outlive this object and match from's for that sequence): a
  // finished sequence's slots taken by the next request of a job (continuous batching).
  void adopt(int b, const CacheSlots& from, int from_b, const KvPolicy* policy);
  // Sequence b has finished; `policy` (outliving this object) stands in for it until a sequence
  // is adopted there.
  void park(int b, const KvPolicy* policy) { policies_[static_cast<std::size_t>(b)] = policy; }

 private:
  struct Sequence {
    std::vector<std::int32_t> position;  // per slot; -1 = free
    int cached = 0;
    int free_slot = 0;
  };
  std::vector<const KvPolicy*> policies_;
  int capacity_;
  std::vector<Sequence> sequences_;
};

}  // namespace offgen
