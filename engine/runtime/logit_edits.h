// The host side of logit edits (kernels/logit_edit_args.h): what each request of a block asks
// for — vLLM's / OpenAI's logit_bias, presence and frequency penalties, Hugging Face's / vLLM's
// repetition penalty, min_tokens — kept per sequence as the ids its context and output hold, and
// turned into each step's edits. Only the ids a sequence edits cross to the device, sorted by row
// so each output-head chunk takes a contiguous run.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "kernels/logit_edit_args.h"

namespace offgen {

// What a request asks to change in its logits before each pick. Neutral by default.
struct LogitShaping {
  float repetition_penalty = 1.0f;  // > 0: on the prompt's and the generated tokens
  float frequency_penalty = 0.0f;   // [-2, 2]: times each generated token's count
  float presence_penalty = 0.0f;    // [-2, 2]: once per generated token id
  std::vector<std::pair<std::int32_t, float>> logit_bias;  // id, added to its logit
  // The first min_tokens tokens may not end the request: its stop ids (the model's EOS unless
  // ignored, and stop_ids) are banned until then, and stop strings are not looked for.
  int min_tokens = 0;
  std::vector<std::int32_t> stop_ids;  // ids that end the request (stop_token_ids)

  bool edits_logits() const;
};

// Throws offgen::Error naming the first value out of range (vLLM's ranges): a repetition penalty
// <= 0, presence or frequency outside [-2, 2], a bias outside [-100, 100] or an id outside
// [0, vocab), a negative min_tokens.
void validate(const LogitShaping& shaping, int vocab);

// One step's edits for the runner: sorted by row, and each row's penalties.
struct StepLogitEdits {
  std::span<const kernels::LogitEdit> edits;
  std::span<const kernels::RowPenalties> penalties;  // one per row of the block
};

// A block's edits, step by step.
class LogitEditor {
 public:
  // One entry per sequence of the block: its shaping (null: none), prompt and the ids that end it
  // at EOS (empty when it ignores EOS).
  struct Sequence {
    const LogitShaping* shaping = nullptr;
    std::span<const std::int32_t> prompt;
    std::span<const std::int32_t> eos_ids;
    int max_tokens = 0;
  };
  explicit LogitEditor(std::span<const Sequence> sequences);

  // The most edits one step can send for a sequence: the distinct ids its prompt (with a
  // repetition penalty), bias, banned stop ids and generated tokens (with any penalty) can name.
  static std::int64_t capacity_of(const Sequence& sequence);
  // Row b is now `sequence`, which has generated nothing yet (continuous batching: the next
  // request of a job takes a finished one's row).
  void replace(std::size_t b, const Sequence& sequence);
  // Row `from`'s sequence, with what it generated so far, moves to row `to` (whose sequence
  // finished); `from` is left with none (BlockRunner::move_row).
  void move(std::size_t to, std::size_t from);

  // True when some sequence edits its logits (else the runner is given no edits at all).
  bool any() const { return capacity_ > 0; }
  // The most edits one step can send: the runner sizes its buffers for it.
  std::int64_t capacity() const { return capacity_; }
  // The edits of the next pick of every sequence with active[b] != 0.
  StepLogitEdits step(std::span<const std::uint8_t> active);
  // Sequence b generated `token`.
  void record(std::size_t b, std::int32_t token);

 private:
  struct Row {
    const LogitShaping* shaping = nullptr;
    std::vector<std::int32_t> stop_ids;                // EOS and stop ids, banned before min_tokens
    std::map<std::int32_t, kernels::LogitEdit> edits;  // by token: context, counts, bias
    int generated = 0;
    std::int64_t capacity = 0;  // capacity_of its sequence
  };
  void set_row(std::size_t b, const Sequence& sequence);
  std::vector<Row> rows_;
  std::vector<kernels::LogitEdit> step_edits_;
  std::vector<kernels::RowPenalties> penalties_;
  std::int64_t capacity_ = 0;
};

}  // namespace offgen
