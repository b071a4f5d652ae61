#include "policies/full_cache_slots.h"

namespace offgen {

void FullCacheSlots::start(std::span<const int> prompt_lengths) {
  cached_.assign(prompt_lengths.begin(), prompt_lengths.end());
}

void FullCacheSlots::plan_decode(std::int32_t* write_slot, std::int32_t* slot_count) const {
  for (std::size_t b = 0; b < cached_.size(); ++b) {
    write_slot[b] = cached_[b];
    slot_count[b] = cached_[b] + 1;
  }
}

void FullCacheSlots::commit(std::span<const std::uint8_t> advancing) {
  for (std::size_t b = 0; b < cached_.size(); ++b) {
    if (advancing[b]) ++cached_[b];
  }
}

}  // namespace offgen
