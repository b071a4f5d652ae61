// The throughput benchmark: synthetic prompts of exact length, EOS ignored so every sequence
// generates exactly gen_len tokens, prefill and decode timed apart. Throughput is FlexGen's
// metric: generated tokens / (prefill + decode seconds); prefill produces the first token.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/runtime/engine.h"
#include "engine/runtime/slot_use.h"
#include "scheduler/cost_model.h"
#include "scheduler/kv_footprint.h"

namespace offgen::bench {

struct BenchCase {
  int batch = 1;
  int prompt_len = 64;
  int gen_len = 16;
  // How every sequence picks its tokens; sampled on the device like a real run, sequence b
  // drawing from its own stream (seed + b).
  SamplingParams sampling{0.0f, 0, 1.0f};
};

struct BenchRow {
  BenchCase config;
  std::string rank;  // under MPI: the rank that ran it, or "sum" (bench/rank_rows.h); else ""
  std::string policy = "full";  // the engine's KV policy and --kv-budget for the row
  std::string kv_budget;        // as given ("" = the whole sequence)
  Compression compression{};    // the engine's storage of weights and KV
  kernels::PrefillMath prefill_math = kernels::PrefillMath::fp32;  // the engine's prefill GEMMs
  int gpu_batch = 0;  // the block's split: sequences per GPU batch x GPU batches
  int num_gpu_batches = 1;
  // Measured rows ran; a row that does not fit is not measured, and carries the memory it would
  // need and (with a profile) the cost model's projection instead.
  bool measured = false;
  std::uint64_t needed_gpu_bytes = 0;
  std::uint64_t needed_pinned_bytes = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  std::uint64_t kv_bytes = 0;        // KV cache, policy state (and int4's fp16 block) for the batch
  KvFootprint kv_per_sequence;       // what one sequence's KV costs under the engine's policy
  KvFootprint full_kv_per_sequence;  // the same under `full`, for comparison
  double kv_moved_per_step = 0;      // KV bytes read + written per decode step (whole batch)
  double weights_moved_per_step = 0;       // weight bytes copied host-to-device per step
  double kv_pcie_per_step = 0;             // host-resident KV bytes copied in + out per decode step
  double predicted_tokens_per_second = 0;  // the cost model's, with a profile (else 0)
  // Busy seconds of the compute and weight-copy streams during the timed run (negative where the
  // device does not measure them): copies that overlap compute make their sum exceed the wall.
  double compute_busy_seconds = -1;
  double weight_copy_busy_seconds = -1;
  // Share of the weight-copy time hidden behind compute, in [0, 1]; negative when unknown.
  double copy_overlap() const;
  // Token slots the passes computed and those that carried a real token (1:1 here: uniform
  // requests, every one generating its `gen`; a job of mixed lengths reports less).
  SlotUse slots;
  std::uint64_t peak_gpu_bytes = 0;     // gpu tier peak during the case (weights included)
  std::uint64_t peak_pinned_bytes = 0;  // pinned memory peak during the case
  std::string error;                    // non-empty: the case could not run (e.g. does not fit)

  double total_seconds() const { return prefill_seconds + decode_seconds; }
  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;
  double generated_tokens_per_second() const;
};

// Runs one case on the engine's device; a case that does not fit the memory budgets comes back
// with `error` set (and the memory it would need) instead of throwing, so a sweep goes on.
// With a profile, the row also carries the cost model's prediction for the same run. The engine's
// interrupt check is asked before the case and after every step: Interrupted is thrown (the case
// is dropped) when it says stop.
BenchRow run_case(Engine& engine, const BenchCase& config, std::uint64_t seed,
                  const MachineProfile* profile = nullptr);

// Cross product of the lists, in the order batch → prompt → gen, each case with `sampling`.
std::vector<BenchCase> sweep(const std::vector<int>& batches, const std::vector<int>& prompt_lens,
                             const std::vector<int>& gen_lens,
                             const SamplingParams& sampling = {0.0f, 0, 1.0f});

}  // namespace offgen::bench
