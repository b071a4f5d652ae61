#include "engine/runtime/attention_score_state.h"

#include <algorithm>

#include "engine/core/error.h"
#include "scheduler/kv_cache_layout.h"

namespace offgen {

AttentionScoreState::AttentionScoreState(Device& device, Ops& ops,
                                         std::span<const KvPolicy* const> policies, int layers,
                                         int heads, int capacity, int max_prompt)
    : ops_(ops),
      batch_(static_cast<int>(policies.size())),
      heads_(heads),
      capacity_(capacity),
      max_prompt_(max_prompt),
      trace_(device) {
  if (!policies.empty()) {
    const KvPolicy& first = *policies.front();
    prefill_score_queries_ = first.prefill_score_queries();
    pool_kernel_ = first.pool_kernel();
    heads_mode_ = first.head_scores() == HeadScores::layer_mean ? kernels::ScoreHeads::layer_mean
                                                                : kernels::ScoreHeads::per_head;
    update_ = first.decode_scores() == DecodeScores::replace ? kernels::ScoreUpdate::replace
                                                             : kernels::ScoreUpdate::accumulate;
  }
  // [layers][batch]: each layer's C and R of each sequence.
  std::vector<std::vector<std::int32_t>> budgets(static_cast<std::size_t>(layers)),
      recents(static_cast<std::size_t>(layers));
  for (const KvPolicy* policy : policies) {
    // One prefill attention serves the whole batch, and the eviction ops take one mode each.
    OFFGEN_CHECK(policy->prefill_score_queries() == prefill_score_queries_ &&
                     policy->pool_kernel() == pool_kernel_ &&
                     policy->head_scores() == policies.front()->head_scores() &&
                     policy->decode_scores() == policies.front()->decode_scores(),
                 "the sequences of a batch must score their caches alike ({} policy)",
                 policy_name(policy->kind()));
    for (int l = 0; l < layers; ++l) {
      const std::unique_ptr<KvPolicy> layer_policy = policy->layer_policy(l, layers);
      const KvPolicy& p = layer_policy ? *layer_policy : *policy;
      const int budget = p.budget();
      const int recent = p.recent_window();
      OFFGEN_CHECK(recent >= 0 && recent <= budget,
                   "the {} policy's recent window of {} does not fit its budget of {}",
                   policy_name(policy->kind()), recent, budget);
      OFFGEN_CHECK(budget < capacity, "a KV budget of {} does not fit caches of {} slots", budget,
                   capacity);
      budgets[static_cast<std::size_t>(l)].push_back(budget);
      recents[static_cast<std::size_t>(l)].push_back(recent);
    }
  }
  const MemoryLayout layout =
      attention_score_state_layout(batch_, layers, heads, capacity, max_prompt);
  position_ = layout.allocate_all(device, "score positions");
  score_ = layout.allocate_all(device, "scores");
  write_slot_ = layout.allocate_all(device, "score write slots");
  prefill_probs_ = layout.allocate(device, "prefill key probability sums");
  decode_probs_ = layout.allocate(device, "decode probabilities");
  budget_ = layout.allocate_all(device, "budgets");
  recent_ = layout.allocate_all(device, "recent windows");
  Stream& stream = device.stream(StreamRole::compute);
  for (std::size_t l = 0; l < budget_.size(); ++l) {
    device.copy_async(budget_[l].data(), budgets[l].data(),
                      budgets[l].size() * sizeof(std::int32_t), stream);
    device.copy_async(recent_[l].data(), recents[l].data(),
                      recents[l].size() * sizeof(std::int32_t), stream);
  }
  stream.synchronize();  // the host vectors go out of scope
}

void AttentionScoreState::adopt(Device& device, Stream& stream, int b,
                                const AttentionScoreState& from, int from_b) {
  OFFGEN_CHECK(b >= 0 && b < batch_ && from_b >= 0 && from_b < from.batch_ &&
                   from.heads_ == heads_ && from.capacity_ == capacity_ &&
                   from.position_.size() == position_.size() &&
                   from.prefill_score_queries_ == prefill_score_queries_ &&
                   from.pool_kernel_ == pool_kernel_ && from.heads_mode_ == heads_mode_ &&
                   from.update_ == update_,
               "attention scores: sequence {} of {} cannot take sequence {} of {} (capacities {} "
               "and {})",
               b, batch_, from_b, from.batch_, capacity_, from.capacity_);
  const auto slots = static_cast<std::size_t>(heads_) * static_cast<std::size_t>(capacity_);
  const auto heads = static_cast<std::size_t>(heads_);
  const auto to = static_cast<std::size_t>(b);
  const auto at = static_cast<std::size_t>(from_b);
  // One sequence's rows of a [batch, n] array of 4-byte values.
  const auto copy_row = [&](const Buffer& dst, const Buffer& src, std::size_t n) {
    device.copy_async(static_cast<std::int32_t*>(dst.data()) + to * n,
                      static_cast<const std::int32_t*>(src.data()) + at * n, n * 4, stream);
  };
  static_assert(sizeof(float) == 4 && sizeof(std::int32_t) == 4);
  for (std::size_t l = 0; l < position_.size(); ++l) {
    copy_row(position_[l], from.position_[l], slots);
    copy_row(score_[l], from.score_[l], slots);
    copy_row(write_slot_[l], from.write_slot_[l], heads);
    copy_row(budget_[l], from.budget_[l], 1);
    copy_row(recent_[l], from.recent_[l], 1);
  }
}

const std::int32_t* AttentionScoreState::write_slots(int layer) const {
  return write_slot_[static_cast<std::size_t>(layer)].as<std::int32_t>();
}

const std::int32_t* AttentionScoreState::positions(int layer) const {
  return position_[static_cast<std::size_t>(layer)].as<std::int32_t>();
}

const float* AttentionScoreState::scores(int layer) const {
  return score_[static_cast<std::size_t>(layer)].as<float>();
}

std::uint64_t AttentionScoreState::bytes() const {
  std::uint64_t total = prefill_probs_.bytes() + decode_probs_.bytes();
  for (std::size_t l = 0; l < position_.size(); ++l) {
    total += position_[l].bytes() + score_[l].bytes() + write_slot_[l].bytes() +
             budget_[l].bytes() + recent_[l].bytes();
  }
  return total;
}

void AttentionScoreState::after_prefill_attention(int layer, int seq, const std::uint8_t* valid,
                                                  std::int32_t* token_slot) {
  OFFGEN_CHECK(seq <= max_prompt_, "prefill of {} tokens exceeds the {} this state was sized for",
               seq, max_prompt_);
  const auto l = static_cast<std::size_t>(layer);
  kernels::ScorePrefillArgs args;
  args.key_prob_sums = prefill_probs_.as<float>();
  args.valid = valid;
  args.token_slot = token_slot;
  args.position = position_[l].as<std::int32_t>();
  args.score = score_[l].as<float>();
  args.write_slot = write_slot_[l].as<std::int32_t>();
  args.batch = batch_;
  args.seq = seq;
  args.heads = heads_;
  args.capacity = capacity_;
  args.budget = budget_[l].as<const std::int32_t>();
  args.recent = recent_[l].as<const std::int32_t>();
  args.heads_mode = heads_mode_;
  args.pool_kernel = pool_kernel_;
  ops_.score_prefill_keep(args);
  trace_.dump("prefill", layer, batch_, heads_, capacity_, args.position, args.score,
              args.write_slot, args.key_prob_sums, seq);
}

void AttentionScoreState::after_decode_attention(int layer, const std::uint8_t* advancing,
                                                 const std::int32_t* position,
                                                 const std::int32_t* count) {
  const auto l = static_cast<std::size_t>(layer);
  kernels::ScoreDecodeArgs args;
  args.probs = decode_probs_.as<float>();
  args.advancing = advancing;
  args.new_position = position;
  args.count = count;
  args.position = position_[l].as<std::int32_t>();
  args.score = score_[l].as<float>();
  args.write_slot = write_slot_[l].as<std::int32_t>();
  args.batch = batch_;
  args.heads = heads_;
  args.capacity = capacity_;
  args.budget = budget_[l].as<const std::int32_t>();
  args.recent = recent_[l].as<const std::int32_t>();
  args.heads_mode = heads_mode_;
  args.update = update_;
  ops_.score_decode_update(args);
  trace_.dump("decode", layer, batch_, heads_, capacity_, args.position, args.score,
              args.write_slot, args.probs, capacity_);
}

}  // namespace offgen
