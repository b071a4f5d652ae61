// Picks the next token from a row of fp32 logits: greedy, or temperature / top-k / top-p sampling
// in Hugging Face's order (temperature, then top-k, then top-p, then a draw).
#pragma once

#include <cstdint>
#include <random>
#include <span>

namespace offgen {

struct SamplingParams {
  float temperature = 1.0f;  // 0 = greedy
  int top_k = 0;             // 0 = off
  float top_p = 1.0f;        // 1 = off
};

// Throws offgen::Error for a negative temperature, a negative top_k or top_p outside (0, 1].
void validate(const SamplingParams& params);

// Greedy picks the lowest id among equal maxima (as torch.argmax does).
std::int32_t argmax(std::span<const float> logits);
std::int32_t sample_token(std::span<const float> logits, const SamplingParams& params,
                          std::mt19937_64& rng);

}  // namespace offgen
