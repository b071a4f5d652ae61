// Per-(layer, sequence, head) state of a policy that keeps attention scores (h2o, tova, snapkv):
// each slot's token position and score, and the slot the next token goes to. Unlike the
// position-based policies (policies/cache_slots.h), heads keep different tokens, so the choice is
// made after each layer's attention, in stream order, by eviction ops on the device where the
// cache lives (kernels/eviction_args.h) — nothing goes back to the host.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/device/device.h"
#include "engine/runtime/score_trace.h"
#include "kernels/ops.h"
#include "policies/kv_policy.h"

namespace offgen {

class AttentionScoreState {
 public:
  // One policy per sequence (its own budget C and window R, per layer where the policy has a
  // layer_policy; capacity: the largest cache_slots), all of one kind and options. Throws
  // offgen::Error for a window outside [0, C] or policies that score differently, and
  // OutOfMemoryError when the state does not fit.
  AttentionScoreState(Device& device, Ops& ops, std::span<const KvPolicy* const> policies,
                      int layers, int heads, int capacity, int max_prompt);

  // Where prefill attention writes its per-key probability sums ([batch, heads, seq]) and decode
  // attention its probability rows ([batch, heads, capacity]).
  float* prefill_probs() { return prefill_probs_.as<float>(); }
  // How many of the prompt's last queries the prefill sums cover (PrefillAttentionArgs).
  int prefill_score_queries() const { return prefill_score_queries_; }
  float* decode_probs() { return decode_probs_.as<float>(); }
  // [batch * heads]: where each (sequence, head) writes its next token in `layer`.
  const std::int32_t* write_slots(int layer) const;

  // Enqueues, after layer `layer`'s prefill attention: each head keeps the policy's choice of its
  // sequence's prompt tokens; token_slot ([batch, heads, seq]) gets their slots for
  // store_prefill_kv, -1 elsewhere. valid: the prompts' [batch, seq] mask. Device pointers.
  void after_prefill_attention(int layer, int seq, const std::uint8_t* valid,
                               std::int32_t* token_slot);
  // Enqueues, after layer `layer`'s decode attention: sequences with advancing[b] keep their new
  // token (position[b]) with the step's probabilities added to every cached token's score; a
  // cache holding C + 1 tokens frees the policy's victim. count[b]: slots attended. Device
  // pointers ([batch] each).
  void after_decode_attention(int layer, const std::uint8_t* advancing,
                              const std::int32_t* position, const std::int32_t* count);

  // The state of one layer (device memory, [batch, heads, capacity] / [batch, heads]).
  const std::int32_t* positions(int layer) const;
  const float* scores(int layer) const;

  std::uint64_t bytes() const;

  // Enqueues on `stream` copies that make sequence b's state (every layer: slots, scores, write
  // slots, budget and window) that of sequence from_b of `from`, a batch that prefilled it under
  // the same policy and capacity: the next request of a job taking a finished sequence's caches.
  void adopt(Device& device, Stream& stream, int b, const AttentionScoreState& from, int from_b);

 private:
  Ops& ops_;
  int batch_;
  int heads_;
  int capacity_;
  int max_prompt_;
  int prefill_score_queries_ = 0;
  int pool_kernel_ = 1;
  kernels::ScoreHeads heads_mode_ = kernels::ScoreHeads::per_head;
  kernels::ScoreUpdate update_ = kernels::ScoreUpdate::accumulate;
  std::vector<Buffer> position_, score_, write_slot_;  // per layer
  Buffer prefill_probs_, decode_probs_;
  std::vector<Buffer> budget_, recent_;  // per layer, [batch] int32: each sequence's C and R
  ScoreTrace trace_;
};

}  // namespace offgen
