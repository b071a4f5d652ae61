// The throughput benchmark: synthetic prompts of exact length, EOS ignored so every sequence
// generates exactly gen_len tokens, prefill and decode timed apart. Throughput is FlexGen's
// metric: generated tokens / (prefill + decode seconds); prefill produces the first token.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/runtime/engine.h"

namespace offgen::bench {

struct BenchCase {
  int batch = 1;
  int prompt_len = 64;
  int gen_len = 16;
};

struct BenchRow {
  BenchCase config;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  std::uint64_t kv_bytes = 0;        // KV cache allocated for the batch
  std::uint64_t peak_gpu_bytes = 0;  // gpu tier peak during the case (weights included)
  std::string error;                 // non-empty: the case could not run (e.g. does not fit)

  double total_seconds() const { return prefill_seconds + decode_seconds; }
  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;
  double generated_tokens_per_second() const;
};

// Runs one case on the engine's device; a case that does not fit the memory budgets comes back
// with `error` set instead of throwing, so a sweep goes on.
BenchRow run_case(Engine& engine, const BenchCase& config, std::uint64_t seed);

// Cross product of the lists, in the order batch → prompt → gen.
std::vector<BenchCase> sweep(const std::vector<int>& batches, const std::vector<int>& prompt_lens,
                             const std::vector<int>& gen_lens);

}  // namespace offgen::bench
