// Arguments and exact semantics of the token pickers — the batched sampler (`sample_rows`) and the
// greedy pick (`argmax_rows`) — shared by the reference, the CPU kernel and the CUDA kernel. Picks
// run where the logits are: only one id per sequence comes back to the host, and no kernel sorts
// the vocabulary.
#pragma once

#include <cstdint>

namespace offgen::kernels {

// One row's sampling parameters, uploaded with each step. `uniform` is the row's draw in [0, 1),
// taken on the host from its request's own random stream, so a request's tokens never depend on
// its batch-mates or on the device.
struct SampleParams {
  float temperature = 0.0f;  // 0 = greedy
  std::int32_t top_k = 0;    // 0 = off
  float top_p = 1.0f;        // 1 = off; in (0, 1]
  float uniform = 0.0f;      // in [0, 1)
  float min_p = 0.0f;        // 0 = off; in [0, 1]
};

struct SampleRowsArgs {
  const float* logits = nullptr;             // [rows, vocab] fp32
  const SampleParams* params = nullptr;      // [rows]
  const std::uint8_t* sampleable = nullptr;  // [vocab]: 0 = never sampled; null = every id
  std::int32_t* out = nullptr;               // [rows]: the picked id
  std::int64_t rows = 0;
  int vocab = 0;
};

// sample_rows, per row r with logits x (a NaN logit counts as -inf):
//   Greedy (temperature 0, or top_k 1): out = argmax over every id, the lowest id among equal
//   maxima (torch.argmax; Hugging Face's greedy search, so greedy rows stay exact to it).
//   Otherwise, in vLLM's order (temperature, top-k and min-p, top-p, draw; Hugging Face's is the
//   same without min-p, which it applies after top-p):
//   1. A = the sampleable ids with x > -inf (if A is empty: the greedy pick); m = max over A.
//   2. top-k, 0 < k < |A|: A keeps the ids whose logit is >= the k-th largest logit of A (ties
//      with the k-th stay, as TopKLogitsWarper keeps them).
//   3. w_i = exp((x_i - m) / T) in fp32 for i in A; w_i = 1 exactly where x_i = m (also when m is
//      +inf: the infinite logits share the draw, every finite one gets 0). min-p > 0: A keeps the
//      ids with w_i >= min_p (a probability at least min_p times the largest one's, whose w is 1).
//   4. top-p < 1: Z = sum of w over A; tau = the largest w_j (j in A) such that the w_i >= w_j
//      sum to at least top_p * Z; A keeps the ids with w_i >= tau (the smallest set of most
//      likely tokens holding top_p of the mass; ties with its last member stay).
//   5. Draw: S = sum of w over A; out = the lowest id i in A whose running sum of w over A in id
//      order exceeds uniform * S; where rounding leaves none, the highest id in A with w > 0.
// Sums are at least fp32 and may be taken in any order, so implementations can differ only where
// a running sum lands within rounding of a threshold. The CPU kernel computes exp with the same
// polynomial as the reference (kernels/cpu/vector_math.h) and sums in double, which makes it
// equal to the reference pick for pick on the test inputs.

// Greedy picks: out[r] = the lowest id of the largest logit of row r (a NaN logit ranks as -inf;
// torch.argmax's ties), so a greedy step copies one id per sequence back instead of the logits.
struct ArgmaxRowsArgs {
  const float* logits = nullptr;  // [rows, vocab] fp32
  std::int32_t* out = nullptr;    // [rows]
  std::int64_t rows = 0;
  int vocab = 0;
};

}  // namespace offgen::kernels
