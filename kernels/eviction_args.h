// Arguments of the attention-score eviction ops (h2o, design section 5), shared by the cpu and cuda
// kernels. They update the per-(layer, sequence, head) state that lives beside the KV cache —
// each slot's token position (-1 = free) and fp32 score, and the slot the next token goes to —
// right after the attention that produced the probabilities, where the cache lives, so nothing
// goes back to the host. The host-side truth they must agree with is policies/h2o_policy.cpp.
#pragma once

#include <cstdint>

namespace offgen::kernels {

struct H2oPrefillArgs {
  const float* key_prob_sums = nullptr;  // [batch, heads, seq] from prefill attention
  const std::uint8_t* valid = nullptr;   // [batch, seq], left padding = 0
  std::int32_t* token_slot = nullptr;  // out [batch, heads, seq]: slot of each kept token, else -1
  std::int32_t* position = nullptr;    // out [batch, heads, capacity]: kept token's position
  float* score = nullptr;              // out [batch, heads, capacity]
  std::int32_t* write_slot = nullptr;  // out [batch, heads]: where the next token goes
  // Each sequence's own budget (its prompt + max tokens decide it, never its batch-mates).
  const std::int32_t* budget = nullptr;  // [batch]: C, 1 <= C < capacity
  const std::int32_t* recent = nullptr;  // [batch]: R, 1 <= R <= C
  int batch = 0;
  int seq = 0;
  int heads = 0;
  int capacity = 0;  // slots per (sequence, head): the batch's largest C + 1
};

// h2o_prefill_keep, per (sequence b, head), with C = budget[b] and R = recent[b]: a prompt of
// P <= C real tokens is kept whole; otherwise the R most recent plus the C - R highest-scoring of
// the rest (equal scores: the newer token stays). Kept tokens take slots 0.. in position order with
// their prompt scores; the other slots are free (position -1, score 0); the next token goes to
// slot min(P, C).

struct H2oDecodeArgs {
  const float* probs = nullptr;                // [batch, heads, capacity] from decode attention
  const std::uint8_t* advancing = nullptr;     // [batch]: 0 = this step's token is not kept
  const std::int32_t* new_position = nullptr;  // [batch]: position of this step's token
  const std::int32_t* count = nullptr;         // [batch]: slots attended (cache + itself)
  std::int32_t* position = nullptr;            // [batch, heads, capacity]
  float* score = nullptr;                      // [batch, heads, capacity]
  std::int32_t* write_slot = nullptr;          // [batch, heads]
  const std::int32_t* budget = nullptr;        // [batch]: C, 1 <= C < capacity
  const std::int32_t* recent = nullptr;        // [batch]: R, 1 <= R <= C
  int batch = 0;
  int heads = 0;
  int capacity = 0;
};

// h2o_decode_update, per advancing (sequence b, head): the new token takes its write slot, every
// attended slot adds its probability (the new token's score is its own probability); while
// count <= budget[b] the next write slot is `count`, else the victim — the lowest score outside the
// R = recent[b] most recent positions (ties: the older token) — is freed (position -1, score 0) and
// becomes the next write slot. Every token a sequence advanced with entered the cache and the
// window is never evicted, so the R most recent cached positions are new_position - R + 1 ..
// new_position.

}  // namespace offgen::kernels
