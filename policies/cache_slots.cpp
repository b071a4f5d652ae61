#include "policies/cache_slots.h"

#include "engine/core/error.h"

namespace offgen {

CacheSlots::CacheSlots(const KvPolicy& policy) : policy_(policy) {
  OFFGEN_CHECK(!policy.needs_scores(),
               "the {} policy keeps per-head scores; host slot planning cannot serve it",
               policy_name(policy.kind()));
}

void CacheSlots::start(std::span<const int> prompt_lengths) {
  sequences_.assign(prompt_lengths.size(), Sequence{});
  for (std::size_t b = 0; b < prompt_lengths.size(); ++b) {
    Sequence& s = sequences_[b];
    s.position.assign(static_cast<std::size_t>(capacity()), -1);
    const std::vector<int> keep = policy_.keep_after_prefill(prompt_lengths[b], {});
    OFFGEN_CHECK(static_cast<int>(keep.size()) <= policy_.budget(),
                 "the {} policy kept {} prompt tokens, more than its budget {}",
                 policy_name(policy_.kind()), keep.size(), policy_.budget());
    for (std::size_t slot = 0; slot < keep.size(); ++slot) s.position[slot] = keep[slot];
    s.cached = static_cast<int>(keep.size());
    s.free_slot = s.cached;
  }
}

std::vector<std::int32_t> CacheSlots::prompt_slots(int b, int prompt_len) const {
  std::vector<std::int32_t> out(static_cast<std::size_t>(prompt_len), -1);
  const auto& slots = sequences_[static_cast<std::size_t>(b)].position;
  for (std::size_t slot = 0; slot < slots.size(); ++slot) {
    if (slots[slot] >= 0 && slots[slot] < prompt_len) {
      out[static_cast<std::size_t>(slots[slot])] = static_cast<std::int32_t>(slot);
    }
  }
  return out;
}

void CacheSlots::plan_decode(std::int32_t* write_slot, std::int32_t* slot_count) const {
  for (std::size_t b = 0; b < sequences_.size(); ++b) {
    write_slot[b] = sequences_[b].free_slot;
    slot_count[b] = sequences_[b].cached + 1;
  }
}

void CacheSlots::commit(std::span<const std::uint8_t> advancing,
                        std::span<const std::int32_t> position) {
  for (std::size_t b = 0; b < sequences_.size(); ++b) {
    if (!advancing[b]) continue;
    Sequence& s = sequences_[b];
    s.position[static_cast<std::size_t>(s.free_slot)] = position[b];
    ++s.cached;
    if (s.cached <= policy_.budget()) {
      s.free_slot = s.cached;  // the valid slots stay a prefix until the cache is full
      continue;
    }
    const int victim = policy_.victim(s.position, {});
    OFFGEN_CHECK(victim >= 0 && victim < capacity(), "the {} policy chose no slot to evict",
                 policy_name(policy_.kind()));
    s.position[static_cast<std::size_t>(victim)] = -1;
    s.free_slot = victim;
    s.cached = policy_.budget();
  }
}

int CacheSlots::cached(int b) const {
  return sequences_[static_cast<std::size_t>(b)].cached;
}

}  // namespace offgen
