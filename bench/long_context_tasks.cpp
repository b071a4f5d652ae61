#include "bench/long_context_tasks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>

#include "engine/core/error.h"

namespace offgen::bench {
namespace {

constexpr int kCopySpan = 32;
// Tokens a query key may take (" 70412": a space and five digits, at worst one token each).
constexpr int kLongestKey = 6;

// One generator per sample, so a sample does not depend on which others the grid holds.
std::mt19937_64 sample_rng(std::uint64_t seed, LongContextTask task, int length, double depth,
                           int sample) {
  std::seed_seq seq{static_cast<std::uint32_t>(seed),
                    static_cast<std::uint32_t>(seed >> 32),
                    static_cast<std::uint32_t>(task),
                    static_cast<std::uint32_t>(length),
                    static_cast<std::uint32_t>(std::lround(depth * 1e6)),
                    static_cast<std::uint32_t>(sample)};
  return std::mt19937_64(seq);
}

int five_digits(std::mt19937_64& rng) {
  return std::uniform_int_distribution<int>(10000, 99999)(rng);
}

void append(std::vector<std::int32_t>& out, std::span<const std::int32_t> tokens) {
  out.insert(out.end(), tokens.begin(), tokens.end());
}

// The context filler comes from the first half of the filler tokens, copy spans from the second,
// so a span never also occurs in the context around it.
std::span<const std::int32_t> context_window(std::span<const std::int32_t> filler, int count,
                                             std::mt19937_64& rng) {
  const std::size_t half = filler.size() / 2;
  const std::size_t start =
      std::uniform_int_distribution<std::size_t>(0, half - static_cast<std::size_t>(count))(rng);
  return filler.subspan(start, static_cast<std::size_t>(count));
}

int needle_offset(double depth, int room) {
  return static_cast<int>(std::lround(depth * room));
}

// BOS, the context with `needle` inserted after its first `at` tokens.
std::vector<std::int32_t> context_with_needle(std::int32_t bos,
                                              std::span<const std::int32_t> context, int at,
                                              std::span<const std::int32_t> needle) {
  std::vector<std::int32_t> tokens{bos};
  append(tokens, context.first(static_cast<std::size_t>(at)));
  append(tokens, needle);
  append(tokens, context.subspan(static_cast<std::size_t>(at)));
  return tokens;
}

void check_room(LongContextTask task, int length, int room, int fixed) {
  OFFGEN_CHECK(room >= 0,
               "a {} sample of {} tokens cannot hold its needle and question ({} tokens with the "
               "BOS); use longer task lengths",
               task_name(task), length, fixed);
}

// The instruction of the passkey test as Mohtashami and Jaggi (2023) word it: told what to look
// for, SmolLM2-135M-Instruct finds the key far more often than from the bare needle (measured in
// the README's real-model table).
constexpr const char* kPasskeyPreamble =
    " There is an important pass key hidden inside a lot of irrelevant text. Find it and "
    "memorize it. I will quiz you about the pass key.";

TaskSample passkey(const TaskGrid& grid, int length, double depth, int index,
                   std::span<const std::int32_t> filler, const Tokenizer& tokenizer,
                   std::int32_t bos) {
  auto rng = sample_rng(grid.seed, LongContextTask::passkey, length, depth, index);
  const int key = five_digits(rng);
  const auto needle =
      tokenizer.encode(fmt::format(" The pass key is {0}. Remember it. {0} is the pass key.", key));
  const auto question = tokenizer.encode(" What is the pass key? The pass key is");
  const auto preamble = tokenizer.encode(kPasskeyPreamble);
  const int fixed = 1 + static_cast<int>(preamble.size() + needle.size() + question.size());
  const int room = length - fixed;
  check_room(LongContextTask::passkey, length, room, fixed);
  const auto context = context_window(filler, room, rng);
  const int at = needle_offset(depth, room);

  TaskSample s;
  s.tokens = context_with_needle(bos, context, at, needle);
  s.tokens.insert(s.tokens.begin() + 1, preamble.begin(), preamble.end());
  append(s.tokens, question);
  s.answer = tokenizer.encode(fmt::format(" {}", key));
  s.distance = room - at;
  return s;
}

TaskSample kv_recall(const TaskGrid& grid, int length, double depth, int index,
                     std::span<const std::int32_t> filler, const Tokenizer& tokenizer,
                     std::int32_t bos) {
  auto rng = sample_rng(grid.seed, LongContextTask::kv_recall, length, depth, index);
  struct Pair {
    std::vector<std::int32_t> key, value;
  };
  std::vector<Pair> pairs;
  std::set<std::int32_t> last_key_tokens;
  const auto period = tokenizer.encode(".");
  int used = 0;
  const int room = length - 1 - kLongestKey;
  check_room(LongContextTask::kv_recall, length, room, 1 + kLongestKey);
  for (int attempts = 0; attempts < 100000; ++attempts) {
    Pair p{tokenizer.encode(fmt::format(" {}", five_digits(rng))),
           tokenizer.encode(fmt::format(" {}", five_digits(rng)))};
    const int size = static_cast<int>(p.key.size() + p.value.size() + period.size());
    if (used + size > room) break;
    if (!last_key_tokens.insert(p.key.back()).second) continue;  // the last token must name it
    used += size;
    pairs.push_back(std::move(p));
  }
  OFFGEN_CHECK(!pairs.empty(), "a kv-recall sample of {} tokens cannot hold one pair and its query",
               length);
  const int queried = needle_offset(depth, static_cast<int>(pairs.size()) - 1);
  const Pair& asked = pairs[static_cast<std::size_t>(queried)];
  const int lead = length - 1 - used - static_cast<int>(asked.key.size());

  TaskSample s;
  s.tokens.push_back(bos);
  append(s.tokens, context_window(filler, lead, rng));  // pads the list to the exact length
  int after_needle = 0;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    append(s.tokens, pairs[i].key);
    append(s.tokens, pairs[i].value);
    append(s.tokens, period);
    if (static_cast<int>(i) == queried) after_needle = static_cast<int>(s.tokens.size());
  }
  s.distance = static_cast<int>(s.tokens.size()) - after_needle;
  append(s.tokens, asked.key);
  s.answer = asked.value;
  return s;
}

TaskSample copy(const TaskGrid& grid, int length, double depth, int index,
                std::span<const std::int32_t> filler, std::int32_t bos) {
  auto rng = sample_rng(grid.seed, LongContextTask::copy, length, depth, index);
  const int fixed = 1 + 2 * kCopySpan;
  const int room = length - fixed;
  check_room(LongContextTask::copy, length, room, fixed);
  const auto context = context_window(filler, room, rng);
  const std::size_t half = filler.size() / 2;
  const std::size_t span_start =
      half + std::uniform_int_distribution<std::size_t>(0, half - kCopySpan)(rng);
  const auto span = filler.subspan(span_start, kCopySpan);
  const int at = needle_offset(depth, room);

  TaskSample s;
  s.tokens = context_with_needle(bos, context, at, span);
  s.scored_from = static_cast<int>(s.tokens.size());
  append(s.tokens, span);
  s.distance = room - at;
  return s;
}

}  // namespace

std::string_view task_name(LongContextTask task) {
  switch (task) {
    case LongContextTask::passkey:
      return "passkey";
    case LongContextTask::kv_recall:
      return "kv-recall";
    case LongContextTask::copy:
      return "copy";
  }
  return "?";
}

LongContextTask parse_task(std::string_view name) {
  for (LongContextTask task :
       {LongContextTask::passkey, LongContextTask::kv_recall, LongContextTask::copy}) {
    if (name == task_name(task)) return task;
  }
  fail("unknown task '{}' (expected passkey, kv-recall or copy)", name);
}

std::size_t filler_needed(const TaskGrid& grid) {
  const int longest =
      grid.lengths.empty() ? 0 : *std::max_element(grid.lengths.begin(), grid.lengths.end());
  return 2 * static_cast<std::size_t>(std::max(longest, kCopySpan));
}

std::vector<std::int32_t> filler_tokens(const Tokenizer& tokenizer, std::string_view text,
                                        std::size_t needed) {
  std::vector<std::int32_t> tokens = tokenizer.encode(text);
  OFFGEN_CHECK(tokens.size() >= needed,
               "the task text has {} tokens; the task lengths need at least {} (twice the longest "
               "length): give a longer text",
               tokens.size(), needed);
  return tokens;
}

std::vector<TaskSample> make_task_samples(LongContextTask task, const TaskGrid& grid,
                                          std::span<const std::int32_t> filler,
                                          const Tokenizer& tokenizer, std::int32_t bos) {
  OFFGEN_CHECK(filler.size() >= filler_needed(grid),
               "the task text has {} tokens; the task lengths need at least {}", filler.size(),
               filler_needed(grid));
  OFFGEN_CHECK(grid.samples >= 1, "tasks need at least one sample per length and depth (got {})",
               grid.samples);
  std::vector<TaskSample> samples;
  for (const int length : grid.lengths) {
    for (const double depth : grid.depths) {
      OFFGEN_CHECK(depth >= 0.0 && depth <= 1.0, "a task depth must be in [0, 1] (got {})", depth);
      for (int i = 0; i < grid.samples; ++i) {
        TaskSample s;
        switch (task) {
          case LongContextTask::passkey:
            s = passkey(grid, length, depth, i, filler, tokenizer, bos);
            break;
          case LongContextTask::kv_recall:
            s = kv_recall(grid, length, depth, i, filler, tokenizer, bos);
            break;
          case LongContextTask::copy:
            s = copy(grid, length, depth, i, filler, bos);
            break;
        }
        s.task = task;
        s.length = length;
        s.depth = depth;
        samples.push_back(std::move(s));
      }
    }
  }
  return samples;
}

}  // namespace offgen::bench
