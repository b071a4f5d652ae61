// A host simulator of one (layer, sequence, head) KV cache driven by a KvPolicy: C + 1 slots, a
// prefill of P tokens with a given causal attention-probability matrix, then decode steps with a
// given probability row each. It follows the design's semantics literally:
//   prefill: score(t) = column sum of the P x P matrix over the prompt's queries (its last
//            prefill_score_queries() ones when that is set), then keep keep_after_prefill()
//            (packed into slots 0 .. k-1, ascending);
//   decode:  the new token (position P + step) goes into the lowest free slot, the step's row
//            (over the cached tokens in ascending position order, the new token last) is added to
//            their scores (or replaces them: DecodeScores::replace), and when C + 1 tokens are
//            cached victim() picks the slot to free.
// One head: a layer_mean policy's mean over heads is that head's own scores.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "policies/kv_policy.h"

namespace offgen::test {

// A policy from its options, with the design's defaults.
inline std::unique_ptr<KvPolicy> make(PolicyKind kind, int budget, double recent_fraction = 0.5,
                                      int sinks = 4) {
  PolicyOptions options;
  options.kind = kind;
  options.recent_fraction = recent_fraction;
  options.sinks = sinks;
  return make_policy(options, budget);
}

// A snapkv policy with observation window w and pooling width k.
inline std::unique_ptr<KvPolicy> make_snapkv(int budget, int window, int kernel) {
  PolicyOptions options;
  options.kind = PolicyKind::snapkv;
  options.observation_window = window;
  options.pool_kernel = kernel;
  return make_policy(options, budget);
}

// What one decode step did.
struct DecodeStep {
  bool evicted = false;
  int victim_slot = -1;
  int evicted_position = -1;
  // The C + 1 slots as victim() saw them (only when evicted).
  std::vector<std::int32_t> slot_positions;
  std::vector<float> slot_scores;
};

class CacheSimulator {
 public:
  explicit CacheSimulator(const KvPolicy& policy)
      : policy_(policy),
        positions_(static_cast<std::size_t>(policy.budget()) + 1, -1),
        scores_(static_cast<std::size_t>(policy.budget()) + 1, 0.0f) {}

  // rows[q] holds query q's probabilities over keys 0 .. q (a lower-triangular matrix written
  // row by row). Returns the positions kept.
  std::vector<int> prefill(const std::vector<std::vector<float>>& rows) {
    if (next_position_ != 0) throw std::logic_error("prefill twice");
    const int prompt_len = static_cast<int>(rows.size());
    std::vector<float> column_sums(rows.size(), 0.0f);
    const int queries = policy_.prefill_score_queries();
    for (std::size_t q = 0; q < rows.size(); ++q) {
      if (rows[q].size() != q + 1) {
        throw std::logic_error("prefill row " + std::to_string(q) + " must have " +
                               std::to_string(q + 1) + " entries");
      }
      if (queries > 0 && static_cast<int>(q) < prompt_len - queries) continue;
      for (std::size_t k = 0; k <= q; ++k) column_sums[k] += rows[q][k];
    }
    prefill_scores_ = column_sums;
    const std::span<const float> passed = policy_.needs_attention_scores()
                                              ? std::span<const float>(column_sums)
                                              : std::span<const float>();
    std::vector<int> keep = policy_.keep_after_prefill(prompt_len, passed);
    if (static_cast<int>(keep.size()) > policy_.budget()) {
      throw std::logic_error("keep_after_prefill kept more than the budget");
    }
    for (std::size_t i = 0; i < keep.size(); ++i) {
      if (keep[i] < 0 || keep[i] >= prompt_len || (i > 0 && keep[i] <= keep[i - 1])) {
        throw std::logic_error("keep_after_prefill must return ascending prompt positions");
      }
      positions_[i] = keep[i];
      scores_[i] = column_sums[static_cast<std::size_t>(keep[i])];
    }
    next_position_ = prompt_len;
    return kept();
  }

  // `row` covers the cached tokens in ascending position order, then the new token.
  DecodeStep decode(const std::vector<float>& row) {
    const std::vector<int> order = slots_by_position();
    if (row.size() != order.size() + 1) {
      throw std::logic_error("decode row must cover " + std::to_string(order.size()) +
                             " cached tokens plus the new one");
    }
    const auto free_slot = std::find(positions_.begin(), positions_.end(), -1);
    if (free_slot == positions_.end()) throw std::logic_error("no free slot");
    const auto slot = static_cast<std::size_t>(free_slot - positions_.begin());
    positions_[slot] = next_position_++;
    scores_[slot] = 0.0f;
    const bool replace = policy_.decode_scores() == DecodeScores::replace;
    for (std::size_t i = 0; i < order.size(); ++i) {
      float& score = scores_[static_cast<std::size_t>(order[i])];
      score = replace ? row[i] : score + row[i];
    }
    scores_[slot] += row.back();

    DecodeStep step;
    if (cached() == policy_.budget() + 1) {
      step.evicted = true;
      step.slot_positions = positions_;
      step.slot_scores = scores_;
      const std::span<const float> passed = policy_.needs_attention_scores()
                                                ? std::span<const float>(scores_)
                                                : std::span<const float>();
      step.victim_slot = policy_.victim(positions_, passed);
      if (step.victim_slot < 0 || step.victim_slot > policy_.budget()) {
        throw std::logic_error("victim() returned slot " + std::to_string(step.victim_slot));
      }
      const auto v = static_cast<std::size_t>(step.victim_slot);
      step.evicted_position = positions_[v];
      positions_[v] = -1;
      scores_[v] = 0.0f;
    }
    return step;
  }

  // Cached positions, ascending.
  std::vector<int> kept() const {
    std::vector<int> out;
    for (std::int32_t p : positions_) {
      if (p >= 0) out.push_back(p);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  // Scores of the cached tokens, in the order of kept().
  std::vector<float> kept_scores() const {
    std::vector<float> out;
    for (int s : slots_by_position()) out.push_back(scores_[static_cast<std::size_t>(s)]);
    return out;
  }

  int cached() const {
    return static_cast<int>(
        std::count_if(positions_.begin(), positions_.end(), [](std::int32_t p) { return p >= 0; }));
  }
  int next_position() const { return next_position_; }
  const std::vector<float>& prefill_scores() const { return prefill_scores_; }

 private:
  // Occupied slots sorted by their token's position.
  std::vector<int> slots_by_position() const {
    std::vector<int> slots;
    for (std::size_t s = 0; s < positions_.size(); ++s) {
      if (positions_[s] >= 0) slots.push_back(static_cast<int>(s));
    }
    std::sort(slots.begin(), slots.end(), [&](int a, int b) {
      return positions_[static_cast<std::size_t>(a)] < positions_[static_cast<std::size_t>(b)];
    });
    return slots;
  }

  const KvPolicy& policy_;
  std::vector<std::int32_t> positions_;  // per slot; -1 = free
  std::vector<float> scores_;            // per slot
  std::vector<float> prefill_scores_;
  int next_position_ = 0;
};

}  // namespace offgen::test
