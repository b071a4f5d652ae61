// Token choice parameters and the host side of sampling: validation and each request's own random
// stream. The draw itself runs on the device (Ops::sample_rows, semantics in
// kernels/sampling_args.h): Hugging Face's order, temperature, then top-k, then top-p, then a draw.
#pragma once

#include <cstdint>
#include <random>

#include "kernels/sampling_args.h"

namespace offgen {

struct SamplingParams {
  float temperature = 1.0f;  // 0 = greedy
  int top_k = 0;             // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off: vLLM's, a probability at least min_p times the largest
};

// Throws offgen::Error for a negative temperature, a negative top_k, top_p outside (0, 1] or
// min_p outside [0, 1].
void validate(const SamplingParams& params);

// True when `params` picks greedily (temperature 0 or top_k 1): no draw is taken.
bool is_greedy(const SamplingParams& params);

// A uniform draw in [0, 1) with 24 random bits (exactly representable in fp32, never 1.0): the
// same on every platform, unlike std::uniform_real_distribution.
float uniform_draw(std::mt19937_64& rng);

// The device parameters of one sequence's next token: its sampling parameters and, unless it is
// greedy, the next draw of its own stream (one draw per sampled token, so a request's tokens
// depend only on its seed, never on its batch-mates).
kernels::SampleParams next_sample(const SamplingParams& params, std::mt19937_64& rng);

}  // namespace offgen
