// The long-context task generators: exact lengths, the needle where the depth puts it, answers
// that the context holds, the same samples for the same seed whatever else the grid holds, and
// clear errors for lengths or texts too short.
#include "bench/long_context_tasks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tests/support/test_support.h"

namespace offgen::bench {
namespace {

constexpr std::int32_t kBos = 2;

const Tokenizer& tokenizer() {
  static const auto tok = Tokenizer::load(test::data_dir().parent_path().parent_path() / "models" /
                                          "opt-tiny-kjv-docs");
  return *tok;
}

std::vector<std::int32_t> filler() {
  std::string text;
  for (int i = 0; i < 400; ++i) {
    text +=
        "And it came to pass in those days, that there went out a decree from Caesar "
        "Augustus, that all the world should be taxed. Line " +
        std::to_string(i) + " of the filler.\n";
  }
  return tokenizer().encode(text);
}

TaskGrid grid() {
  TaskGrid g;
  g.lengths = {200, 600};
  g.depths = {0.0, 0.5, 1.0};
  g.samples = 3;
  g.seed = 7;
  return g;
}

bool contains(std::span<const std::int32_t> haystack, std::span<const std::int32_t> needle) {
  return std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end()) !=
         haystack.end();
}

TEST(LongContextTasks, NamesRoundTripAndUnknownNamesAreRefused) {
  for (auto task : {LongContextTask::passkey, LongContextTask::kv_recall, LongContextTask::copy}) {
    EXPECT_EQ(parse_task(task_name(task)), task);
  }
  EXPECT_NE(test::error_of([] { parse_task("needle"); }).find("passkey, kv-recall or copy"),
            std::string::npos);
}

TEST(LongContextTasks, EverySampleHasItsExactLengthAndStartsWithBos) {
  const auto text = filler();
  for (auto task : {LongContextTask::passkey, LongContextTask::kv_recall, LongContextTask::copy}) {
    const auto samples = make_task_samples(task, grid(), text, tokenizer(), kBos);
    ASSERT_EQ(samples.size(), 2u * 3u * 3u) << task_name(task);
    for (const TaskSample& s : samples) {
      EXPECT_EQ(static_cast<int>(s.tokens.size()), s.length) << task_name(task);
      EXPECT_EQ(s.tokens.front(), kBos);
      EXPECT_EQ(std::count(s.tokens.begin(), s.tokens.end(), kBos), 1);
      EXPECT_EQ(s.task, task);
    }
  }
}

TEST(LongContextTasks, PasskeyHidesItsKeyAtTheDepthAndAsksForIt) {
  const auto samples =
      make_task_samples(LongContextTask::passkey, grid(), filler(), tokenizer(), kBos);
  for (const TaskSample& s : samples) {
    const std::string prompt = tokenizer().decode(s.tokens);
    const std::string key = tokenizer().decode(s.answer);
    ASSERT_EQ(key.size(), 6u) << key;  // " 48213"
    EXPECT_NE(prompt.find("The pass key is" + key + ". Remember it."), std::string::npos);
    EXPECT_TRUE(prompt.ends_with("What is the pass key? The pass key is")) << prompt;
    const auto needle =
        tokenizer().encode(" The pass key is" + key + ". Remember it." + key + " is the pass key.");
    const auto question = tokenizer().encode(" What is the pass key? The pass key is");
    // The instruction comes right after the BOS.
    const auto preamble = tokenizer().encode(
        " There is an important pass key hidden inside a lot of irrelevant text. Find it and "
        "memorize it. I will quiz you about the pass key.");
    ASSERT_TRUE(std::equal(preamble.begin(), preamble.end(), s.tokens.begin() + 1));
    const int room =
        s.length - 1 - static_cast<int>(preamble.size() + needle.size() + question.size());
    const int at = static_cast<int>(std::lround(s.depth * room));
    // The needle starts `at` filler tokens after the instruction.
    ASSERT_TRUE(std::equal(needle.begin(), needle.end(),
                           s.tokens.begin() + 1 + static_cast<long>(preamble.size()) + at));
    EXPECT_EQ(s.distance, room - at);
  }
  // Depth 1 puts the needle right before the question; depth 0 right after the instruction.
  EXPECT_EQ(samples[2 * 3].distance, 0);  // length 200, depth 1, sample 0
}

TEST(LongContextTasks, KvRecallEndsWithAKeyWhoseValueFollowsItOnceInTheList) {
  const auto samples =
      make_task_samples(LongContextTask::kv_recall, grid(), filler(), tokenizer(), kBos);
  for (const TaskSample& s : samples) {
    const std::string prompt = tokenizer().decode(s.tokens);
    const std::string value = tokenizer().decode(s.answer);
    ASSERT_EQ(value.size(), 6u);
    // The prompt ends with " <key>", and " <key> <value>." is in the list.
    const std::string key = prompt.substr(prompt.size() - 6);
    EXPECT_EQ(key[0], ' ');
    EXPECT_NE(prompt.find(key + value + "."), std::string::npos) << prompt;
    // No other pair's key ends in the same token as the queried one.
    const auto key_tokens = tokenizer().encode(key);
    std::vector<std::int32_t> pair = key_tokens;
    pair.insert(pair.end(), s.answer.begin(), s.answer.end());
    EXPECT_TRUE(contains(s.tokens, pair));
    EXPECT_GT(s.distance, -1);
  }
}

TEST(LongContextTasks, CopyRepeatsASpanAtTheDepthAndScoresTheSecondCopy) {
  const auto samples =
      make_task_samples(LongContextTask::copy, grid(), filler(), tokenizer(), kBos);
  for (const TaskSample& s : samples) {
    const int span = s.length - s.scored_from;
    ASSERT_EQ(span, 32);
    const int room = s.length - 1 - 2 * span;
    const int at = static_cast<int>(std::lround(s.depth * room));
    EXPECT_TRUE(std::equal(s.tokens.begin() + 1 + at, s.tokens.begin() + 1 + at + span,
                           s.tokens.begin() + s.scored_from));
    EXPECT_EQ(s.distance, s.scored_from - (1 + at + span));
    EXPECT_TRUE(s.answer.empty());
  }
}

TEST(LongContextTasks, TheSameSeedGivesTheSameSamplesWhateverElseTheGridHolds) {
  const auto text = filler();
  TaskGrid small = grid();
  small.lengths = {600};
  small.depths = {0.5};
  for (auto task : {LongContextTask::passkey, LongContextTask::kv_recall, LongContextTask::copy}) {
    const auto all = make_task_samples(task, grid(), text, tokenizer(), kBos);
    const auto one = make_task_samples(task, small, text, tokenizer(), kBos);
    // length 600 is the second length; depth 0.5 the second depth.
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(one[static_cast<std::size_t>(i)].tokens,
                all[9 + 3 + static_cast<std::size_t>(i)].tokens)
          << task_name(task);
    }
    TaskGrid other = grid();
    other.seed = 8;
    EXPECT_NE(make_task_samples(task, other, text, tokenizer(), kBos)[0].tokens, all[0].tokens);
  }
}

TEST(LongContextTasks, TooShortLengthsAndTextsAreNamed) {
  const auto text = filler();
  TaskGrid g = grid();
  g.lengths = {20};
  EXPECT_NE(test::error_of([&] {
              make_task_samples(LongContextTask::passkey, g, text, tokenizer(), kBos);
            }).find("a passkey sample of 20 tokens cannot hold its needle and question"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] {
              make_task_samples(LongContextTask::copy, g, text, tokenizer(), kBos);
            }).find("a copy sample of 20 tokens"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] {
              filler_tokens(tokenizer(), "a few words", 1200);
            }).find("give a longer text"),
            std::string::npos);
  g = grid();
  g.depths = {1.5};
  EXPECT_NE(test::error_of([&] {
              make_task_samples(LongContextTask::copy, g, text, tokenizer(), kBos);
            }).find("depth must be in [0, 1]"),
            std::string::npos);
}

}  // namespace
}  // namespace offgen::bench
