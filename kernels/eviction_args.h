// Arguments of the attention-score eviction ops (h2o, tova, snapkv; design section 5), shared by
// the cpu and cuda kernels. They update the per-(layer, sequence, head) state that lives beside
// the KV cache — each slot's token position (-1 = free) and fp32 score, and the slot the next
// token goes to — right after the attention that produced the probabilities, where the cache
// lives, so nothing goes back to the host. The host-side truth they must agree with is the
// policy's keep_after_prefill and victim (policies/h2o_policy.cpp, tova_policy.cpp,
// snapkv_policy.cpp).
//
// One op per step serves every such policy; the policies differ only in these modes:
//   recent    per sequence: R most recent tokens never evicted (h2o: its window, snapkv: w,
//             tova: 0, so the newest token may itself go)
//   heads     per_head: a head ranks by its own scores (h2o, snapkv); layer_mean: every head of a
//             sequence ranks by the mean over its heads (tova), so all its heads keep the same
//             tokens in the same slots
//   pool      prefill only: the width k of the average pooling of the ranking of the tokens before
//             the window (snapkv; 1 = none)
//   decode    accumulate: score += probability (h2o, snapkv); replace: score = probability (tova)
// `heads` here is always the cache's head count — the kv heads under grouped-query attention,
// whose probabilities attention already sums over each group of query heads
// (kernels/attention_args.h).
#pragma once

#include <cstdint>

namespace offgen::kernels {

enum class ScoreHeads { per_head, layer_mean };
enum class ScoreUpdate { accumulate, replace };

struct ScorePrefillArgs {
  const float* key_prob_sums = nullptr;  // [batch, heads, seq] from prefill attention
  const std::uint8_t* valid = nullptr;   // [batch, seq], left padding = 0
  std::int32_t* token_slot = nullptr;  // out [batch, heads, seq]: slot of each kept token, else -1
  std::int32_t* position = nullptr;    // out [batch, heads, capacity]: kept token's position
  float* score = nullptr;              // out [batch, heads, capacity]
  std::int32_t* write_slot = nullptr;  // out [batch, heads]: where the next token goes
  // Each sequence's own budget (its prompt + max tokens decide it, never its batch-mates).
  const std::int32_t* budget = nullptr;  // [batch]: C, 1 <= C < capacity
  const std::int32_t* recent = nullptr;  // [batch]: R, 0 <= R <= C
  ScoreHeads heads_mode = ScoreHeads::per_head;
  int pool_kernel = 1;  // odd, >= 1
  int batch = 0;
  int seq = 0;
  int heads = 0;
  int capacity = 0;  // slots per (sequence, head): the batch's largest C + 1
};

// score_prefill_keep, per (sequence b, head h), with C = budget[b], R = recent[b] and the
// sequence's P real tokens: a prompt of P <= C is kept whole. Otherwise token i's ranking is
//   r(i) = key_prob_sums[b, h, i]                      (per_head)
//   r(i) = (sum over heads g, in order, of key_prob_sums[b, g, i]) / heads   (layer_mean)
// in fp32; for i < P - R it is pooled, p(i) = (sum of r(j), j from i - k/2 up to i + k/2 within
// [0, P - R), in order) / k; the R most recent tokens stay plus the C - R of the rest with the
// highest p (equal: the newer token stays). Kept tokens take slots 0.. in position order with
// score key_prob_sums[b, h, i] (the head's own, unpooled); the other slots are free (position -1,
// score 0); the next token goes to slot min(P, C).

struct ScoreDecodeArgs {
  const float* probs = nullptr;                // [batch, heads, capacity] from decode attention
  const std::uint8_t* advancing = nullptr;     // [batch]: 0 = this step's token is not kept
  const std::int32_t* new_position = nullptr;  // [batch]: position of this step's token
  const std::int32_t* count = nullptr;         // [batch]: slots attended (cache + itself)
  std::int32_t* position = nullptr;            // [batch, heads, capacity]
  float* score = nullptr;                      // [batch, heads, capacity]
  std::int32_t* write_slot = nullptr;          // [batch, heads]
  const std::int32_t* budget = nullptr;        // [batch]: C, 1 <= C < capacity
  const std::int32_t* recent = nullptr;        // [batch]: R, 0 <= R <= C
  ScoreHeads heads_mode = ScoreHeads::per_head;
  ScoreUpdate update = ScoreUpdate::accumulate;
  int batch = 0;
  int heads = 0;
  int capacity = 0;
};

// score_decode_update, per advancing (sequence b, head h): the new token takes its write slot with
// score 0, then every attended slot s < count adds (accumulate) or takes (replace) its probability
// probs[b, h, s]. While count <= budget[b] the next write slot is `count`, else the victim is
// freed (position -1, score 0) and becomes the next write slot: the lowest ranking — the head's
// score (per_head), or (sum over heads g, in order, of score[b, g, s]) / heads (layer_mean) —
// outside the R = recent[b] most recent positions (ties: the older token). Every token a sequence
// advanced with entered the cache and the window is never evicted, so the R most recent cached
// positions are new_position - R + 1 .. new_position.

}  // namespace offgen::kernels
