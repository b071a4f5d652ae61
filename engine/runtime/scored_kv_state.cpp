#include "engine/runtime/scored_kv_state.h"

#include <algorithm>

#include "engine/core/error.h"

namespace offgen {

ScoredKvState::ScoredKvState(Device& device, Ops& ops, const KvPolicy& policy, int layers,
                             int batch, int heads, int capacity, int max_prompt)
    : ops_(ops),
      policy_(policy),
      batch_(batch),
      heads_(heads),
      capacity_(capacity),
      max_prompt_(max_prompt) {
  OFFGEN_CHECK(ops.host_can_touch_device_memory(),
               "the {} policy needs eviction kernels on this device, which it does not have yet; "
               "use --device cpu or a position-based policy (local, streaming)",
               policy_name(policy.kind()));
  const auto cells = static_cast<std::size_t>(batch) * static_cast<std::size_t>(heads);
  const auto slots = cells * static_cast<std::size_t>(capacity);
  for (int l = 0; l < layers; ++l) {
    position_.push_back(device.allocate(Tier::gpu, slots * sizeof(std::int32_t)));
    score_.push_back(device.allocate(Tier::gpu, slots * sizeof(float)));
    write_slot_.push_back(device.allocate(Tier::gpu, cells * sizeof(std::int32_t)));
  }
  prefill_probs_ =
      device.allocate(Tier::gpu, cells * static_cast<std::size_t>(max_prompt) * sizeof(float));
  decode_probs_ = device.allocate(Tier::gpu, slots * sizeof(float));
}

const std::int32_t* ScoredKvState::write_slots(int layer) const {
  return write_slot_[static_cast<std::size_t>(layer)].as<std::int32_t>();
}

std::uint64_t ScoredKvState::bytes() const {
  std::uint64_t total = prefill_probs_.bytes() + decode_probs_.bytes();
  for (std::size_t l = 0; l < position_.size(); ++l) {
    total += position_[l].bytes() + score_[l].bytes() + write_slot_[l].bytes();
  }
  return total;
}

void ScoredKvState::after_prefill_attention(int layer, std::span<const int> lengths, int seq,
                                            std::int32_t* token_slot) {
  OFFGEN_CHECK(seq <= max_prompt_, "prefill of {} tokens exceeds the {} this state was sized for",
               seq, max_prompt_);
  auto* position = position_[static_cast<std::size_t>(layer)].as<std::int32_t>();
  auto* score = score_[static_cast<std::size_t>(layer)].as<float>();
  auto* write_slot = write_slot_[static_cast<std::size_t>(layer)].as<std::int32_t>();
  const float* sums = prefill_probs();
  ops_.host_task([this, lengths, seq, token_slot, position, score, write_slot, sums] {
    const int cap = capacity_;
    std::fill(token_slot, token_slot + static_cast<std::ptrdiff_t>(batch_) * heads_ * seq, -1);
    for (int b = 0; b < batch_; ++b) {
      const int len = lengths[static_cast<std::size_t>(b)];
      const int pad = seq - len;
      for (int h = 0; h < heads_; ++h) {
        const std::ptrdiff_t bh = static_cast<std::ptrdiff_t>(b) * heads_ + h;
        const float* token_scores = sums + bh * seq + pad;
        const std::vector<int> keep =
            policy_.keep_after_prefill(len, std::span<const float>(token_scores, len));
        std::int32_t* slot_position = position + bh * cap;
        float* slot_score = score + bh * cap;
        std::fill(slot_position, slot_position + cap, -1);
        std::fill(slot_score, slot_score + cap, 0.0f);
        for (std::size_t k = 0; k < keep.size(); ++k) {
          slot_position[k] = keep[k];
          slot_score[k] = token_scores[keep[k]];
          token_slot[bh * seq + pad + keep[k]] = static_cast<std::int32_t>(k);
        }
        write_slot[bh] = static_cast<std::int32_t>(keep.size());
      }
    }
  });
}

void ScoredKvState::after_decode_attention(int layer, std::span<const std::uint8_t> advancing,
                                           std::span<const std::int32_t> new_position,
                                           std::span<const std::int32_t> count) {
  auto* position = position_[static_cast<std::size_t>(layer)].as<std::int32_t>();
  auto* score = score_[static_cast<std::size_t>(layer)].as<float>();
  auto* write_slot = write_slot_[static_cast<std::size_t>(layer)].as<std::int32_t>();
  const float* probs = decode_probs();
  ops_.host_task([this, advancing, new_position, count, position, score, write_slot, probs] {
    const int cap = capacity_;
    for (int b = 0; b < batch_; ++b) {
      if (!advancing[static_cast<std::size_t>(b)]) continue;  // its token is dropped
      const int n = count[static_cast<std::size_t>(b)];
      for (int h = 0; h < heads_; ++h) {
        const std::ptrdiff_t bh = static_cast<std::ptrdiff_t>(b) * heads_ + h;
        std::int32_t* slot_position = position + bh * cap;
        float* slot_score = score + bh * cap;
        const float* row = probs + bh * cap;
        const int slot = write_slot[bh];
        slot_position[slot] = new_position[static_cast<std::size_t>(b)];
        slot_score[slot] = 0.0f;
        for (int s = 0; s < n; ++s) slot_score[s] += row[s];
        if (n < cap) {
          write_slot[bh] = n;  // valid slots stay a prefix until the cache is full
          continue;
        }
        const int victim = policy_.victim(std::span<const std::int32_t>(slot_position, cap),
                                          std::span<const float>(slot_score, cap));
        slot_position[victim] = -1;
        slot_score[victim] = 0.0f;
        write_slot[bh] = victim;
      }
    }
  });
}

}  // namespace offgen
