// Slot bookkeeping of a cache that keeps every real token (the `full` policy): token i of sequence
// b lives in slot i of each of its (layer, head) caches. It answers what the engine asks of a
// cache: how many slots a sequence needs, where each decode step writes, and how many slots it
// attends over. Eviction policies (kv_policy.h) decide with a budget C instead of the full length.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace offgen {

class FullCacheSlots {
 public:
  // Slots per (layer, sequence, head) for prompts up to `max_prompt` real tokens plus `max_new`
  // decode steps, plus one spare slot that a sequence which no longer advances (finished, or past
  // the end of its text) keeps overwriting so the batch can step together.
  static int capacity(int max_prompt, int max_new) { return max_prompt + max_new + 1; }

  // After prefill: sequence b holds prompt_lengths[b] tokens in slots [0, len).
  void start(std::span<const int> prompt_lengths);

  // The next decode step: write_slot[b] is where the new k/v go, slot_count[b] the slots attended
  // ([0, slot_count[b]), the new token included).
  void plan_decode(std::int32_t* write_slot, std::int32_t* slot_count) const;
  // advancing[b] = 1 keeps the step's token of sequence b; 0 drops it (its slot is the spare one
  // the next step overwrites).
  void commit(std::span<const std::uint8_t> advancing);

  int cached(int b) const { return cached_[static_cast<std::size_t>(b)]; }

 private:
  std::vector<int> cached_;
};

}  // namespace offgen
