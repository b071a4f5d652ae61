// Per-(layer, sequence, head) state of a policy that keeps attention scores (h2o): each slot's
// token position and accumulated probability, and the slot the next token goes to. Unlike the
// position-based policies (policies/cache_slots.h), heads keep different tokens, so the choice is
// made after each layer's attention, in stream order, where the cache lives: on the cpu device by
// host tasks on the compute stream over the same memory the kernels use.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/device/device.h"
#include "engine/runtime/ops.h"
#include "policies/kv_policy.h"

namespace offgen {

class ScoredKvState {
 public:
  // Throws offgen::Error when the device's memory cannot be touched by host tasks (the CUDA
  // device needs eviction kernels for this) and OutOfMemoryError when the state does not fit.
  ScoredKvState(Device& device, Ops& ops, const KvPolicy& policy, int layers, int batch, int heads,
                int capacity, int max_prompt);

  // Where prefill attention writes its per-key probability sums ([batch, heads, seq]) and decode
  // attention its probability rows ([batch, heads, capacity]).
  float* prefill_probs() { return prefill_probs_.as<float>(); }
  float* decode_probs() { return decode_probs_.as<float>(); }
  // [batch * heads]: where each (sequence, head) writes its next token in `layer`.
  const std::int32_t* write_slots(int layer) const;

  // Enqueues, after layer `layer`'s prefill attention: each head keeps the policy's choice of its
  // sequence's prompt tokens; token_slot ([batch, heads, seq], device memory) gets their slots for
  // store_prefill_kv, -1 elsewhere. lengths[b]: real tokens of sequence b (left-padded to seq).
  // The spans are read when the task runs: they must stay valid and unchanged until the stream
  // has passed it (the runner keeps them as members and synchronizes before refilling them).
  void after_prefill_attention(int layer, std::span<const int> lengths, int seq,
                               std::int32_t* token_slot);
  // Enqueues, after layer `layer`'s decode attention: sequences with advancing[b] keep their new
  // token (HF position position[b]) with the step's probabilities added to every cached token's
  // score; a cache holding C + 1 tokens frees the policy's victim. count[b]: slots attended.
  void after_decode_attention(int layer, std::span<const std::uint8_t> advancing,
                              std::span<const std::int32_t> position,
                              std::span<const std::int32_t> count);

  std::uint64_t bytes() const;

 private:
  Ops& ops_;
  const KvPolicy& policy_;
  int batch_;
  int heads_;
  int capacity_;
  int max_prompt_;
  std::vector<Buffer> position_, score_, write_slot_;  // per layer
  Buffer prefill_probs_, decode_probs_;
};

}  // namespace offgen
