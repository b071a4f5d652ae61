#include "policies/cache_slots.h"

#include <span>
#include <utility>

#include "engine/core/error.h"

namespace offgen {

CacheSlots::CacheSlots(std::vector<const KvPolicy*> policies, int capacity)
    : policies_(std::move(policies)), capacity_(capacity) {
  for (const KvPolicy* policy : policies_) {
    OFFGEN_CHECK(!policy->needs_attention_scores(),
                 "the {} policy keeps per-head scores; host slot planning cannot serve it",
                 policy_name(policy->kind()));
    OFFGEN_CHECK(policy->budget() < capacity, "a KV budget of {} does not fit caches of {} slots",
                 policy->budget(), capacity);
  }
}

void CacheSlots::start(std::span<const int> prompt_lengths) {
  OFFGEN_CHECK(prompt_lengths.size() == policies_.size(),
               "cache slots: {} prompts for {} sequences", prompt_lengths.size(), policies_.size());
  sequences_.assign(prompt_lengths.size(), Sequence{});
  for (std::size_t b = 0; b < prompt_lengths.size(); ++b) {
    Sequence& s = sequences_[b];
    const KvPolicy& policy = *policies_[b];
    s.position.assign(static_cast<std::size_t>(capacity()), -1);
    const std::vector<int> keep = policy.keep_after_prefill(prompt_lengths[b], {});
    OFFGEN_CHECK(static_cast<int>(keep.size()) <= policy.budget(),
                 "the {} policy kept {} prompt tokens, more than its budget {}",
                 policy_name(policy.kind()), keep.size(), policy.budget());
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
    const KvPolicy& policy = *policies_[b];
    s.position[static_cast<std::size_t>(s.free_slot)] = position[b];
    ++s.cached;
    if (s.cached <= policy.budget()) {
      s.free_slot = s.cached;  // the valid slots stay a prefix until the cache is full
      continue;
    }
    // The sequence's C + 1 slots, all holding a token now.
    const auto used = std::span<const std::int32_t>(s.position)
                          .first(static_cast<std::size_t>(policy.budget()) + 1);
    const int victim = policy.victim(used, {});
    OFFGEN_CHECK(victim >= 0 && victim <= policy.budget(), "the {} policy chose no slot to evict",
                 policy_name(policy.kind()));
    s.position[static_cast<std::size_t>(victim)] = -1;
    s.free_slot = victim;
    s.cached = policy.budget();
  }
}

void CacheSlots::adopt(int b, const CacheSlots& from, int from_b, const KvPolicy* policy) {
  OFFGEN_CHECK(b >= 0 && static_cast<std::size_t>(b) < sequences_.size() && from_b >= 0 &&
                   static_cast<std::size_t>(from_b) < from.sequences_.size(),
               "cache slots: sequence {} cannot take sequence {} of another batch", b, from_b);
  OFFGEN_CHECK(from.capacity_ == capacity_ && policy->budget() < capacity_ &&
                   policy->budget() == from.policies_[static_cast<std::size_t>(from_b)]->budget(),
               "cache slots: a sequence of caches of {} slots (budget {}) cannot move into caches "
               "of {} slots",
               from.capacity_, policy->budget(), capacity_);
  policies_[static_cast<std::size_t>(b)] = policy;
  sequences_[static_cast<std::size_t>(b)] = from.sequences_[static_cast<std::size_t>(from_b)];
}

int CacheSlots::cached(int b) const {
  return sequences_[static_cast<std::size_t>(b)].cached;
}

}  // namespace offgen
