// Long-context tasks for `offgen compare`: prompts that can only be answered by attending to one
// token span far back in the context, so a KV policy that evicts it fails where full does not.
// Every sample is built from a filler text (any text file) and a seed, so the same grid gives the
// same samples on every run and every policy.
//
//   passkey    an instruction (" There is an important pass key hidden inside a lot of irrelevant
//              text. Find it and memorize it. I will quiz you about the pass key."), then filler
//              with " The pass key is 48213. Remember it. 48213 is the pass key." hidden at a
//              depth, ending " What is the pass key? The pass key is"; correct when the greedy
//              continuation is exactly " 48213". A filler without numbers of its own (licence
//              texts, prose) keeps the key the only number to recall; Bible verse numbers compete.
//   kv-recall  a list of " 70412 55130." pairs (random 5-digit key, value), ending with one of
//              the keys, the one at the depth; correct when the greedy continuation is exactly its
//              value. Keys end in distinct tokens, so the last token names one pair.
//   copy       filler with a 32-token span of other text, and the same span again at the end;
//              the mean log-probability of the second copy (its first token left out) measures
//              copying across the distance between the two.
//
// depth: where the needle (pass key, queried pair, first copy) starts in the context between the
// BOS (and passkey's instruction) and the question; 0 = the start, 1 = right before the question. A
// sample's length is its prompt's (passkey, kv-recall) or whole text's (copy) tokens, BOS included.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.h"

namespace offgen::bench {

enum class LongContextTask { passkey, kv_recall, copy };

std::string_view task_name(LongContextTask task);  // "passkey", "kv-recall", "copy"
// Throws offgen::Error naming the choices for an unknown name.
LongContextTask parse_task(std::string_view name);

struct TaskGrid {
  std::vector<int> lengths = {256, 512, 1000};
  std::vector<double> depths = {0.0, 0.25, 0.5, 0.75, 1.0};
  int samples = 8;  // per (length, depth)
  std::uint64_t seed = 0;
};

struct TaskSample {
  LongContextTask task = LongContextTask::passkey;
  int length = 0;
  double depth = 0.0;
  std::vector<std::int32_t> tokens;  // the prompt (passkey, kv-recall) or the whole text (copy)
  std::vector<std::int32_t> answer;  // passkey, kv-recall: the expected greedy continuation
  int scored_from = 0;  // copy: tokens[scored_from + 1 ..] are scored (the second copy)
  int distance = 0;     // tokens between the needle's end and the question's start
};

// Tokens of a text the samples take their filler from; at least `needed` of them (throws
// offgen::Error naming the shortfall).
std::vector<std::int32_t> filler_tokens(const Tokenizer& tokenizer, std::string_view text,
                                        std::size_t needed);

// The grid's samples of `task`, length-major then depth then sample. Throws offgen::Error when a
// length cannot hold the task's needle and question, or the filler is too short.
std::vector<TaskSample> make_task_samples(LongContextTask task, const TaskGrid& grid,
                                          std::span<const std::int32_t> filler,
                                          const Tokenizer& tokenizer, std::int32_t bos);

// Filler tokens `make_task_samples` needs for the grid's longest sample.
std::size_t filler_needed(const TaskGrid& grid);

}  // namespace offgen::bench
