// Logit shaping (engine/runtime/logit_edits.h): what LogitEditor sends each step — context and
// generated-token counts, bias, min_tokens' ban and its end — and, through the engine on OPT's
// real head size, that penalties change greedy picks without making a request depend on its
// batch-mates, that min_tokens holds EOS off exactly that long, and that log-probs stay those of
// the raw model under every edit.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "engine/runtime/engine.h"
#include "engine/runtime/logit_edits.h"
#include "tests/runtime/real_vocab_model.h"

namespace offgen {
namespace {

using kernels::LogitEdit;

std::vector<std::pair<int, std::uint32_t>> tokens_and_flags(std::span<const LogitEdit> edits,
                                                            int row) {
  std::vector<std::pair<int, std::uint32_t>> out;
  for (const LogitEdit& e : edits) {
    if (e.row == row) out.emplace_back(e.token, e.flags);
  }
  return out;
}

TEST(LogitEditor, StepsCarryContextCountsBiasAndTheMinTokensBan) {
  LogitShaping a;
  a.repetition_penalty = 1.3f;
  a.frequency_penalty = 0.5f;
  a.logit_bias = {{9, 2.0f}};
  a.min_tokens = 2;
  a.stop_ids = {7};
  LogitShaping c;
  c.presence_penalty = 0.25f;
  const std::vector<std::int32_t> prompt_a = {5, 6, 5}, prompt_b = {1, 2}, prompt_c = {3};
  const std::vector<std::int32_t> eos = {2};
  const std::vector<LogitEditor::Sequence> sequences = {
      {&a, prompt_a, eos, 4}, {nullptr, prompt_b, eos, 4}, {&c, prompt_c, {}, 3}};
  LogitEditor editor(sequences);
  ASSERT_TRUE(editor.any());
  // Row 0: prompt (repetition), bias, EOS and the stop id, generated ids; row 2 (presence only):
  // generated ids alone.
  EXPECT_EQ(editor.capacity(), (3 + 1 + 2 + 4) + 3);

  const std::vector<std::uint8_t> all = {1, 1, 1};
  StepLogitEdits step = editor.step(all);
  using kernels::kEditBanned;
  using kernels::kEditInContext;
  // Row 0: its prompt in context, EOS and the stop id banned, the biased id; sorted by token.
  EXPECT_EQ(
      tokens_and_flags(step.edits, 0),
      (std::vector<std::pair<int, std::uint32_t>>{
          {2, kEditBanned}, {5, kEditInContext}, {6, kEditInContext}, {7, kEditBanned}, {9, 0}}));
  EXPECT_TRUE(tokens_and_flags(step.edits, 1).empty());  // no shaping
  EXPECT_TRUE(tokens_and_flags(step.edits, 2).empty());  // nothing generated yet
  EXPECT_EQ(step.penalties[0].repetition, 1.3f);
  EXPECT_EQ(step.penalties[2].presence, 0.25f);
  EXPECT_TRUE(std::is_sorted(step.edits.begin(), step.edits.end(),
                             [](const LogitEdit& x, const LogitEdit& y) { return x.row < y.row; }));

  editor.record(0, 6);
  editor.record(2, 8);
  step = editor.step(all);
  const auto count_of = [&](int row, int token) {
    for (const LogitEdit& e : step.edits) {
      if (e.row == row && e.token == token) return e.count;
    }
    return -1.0f;
  };
  EXPECT_EQ(count_of(0, 6), 1.0f);
  EXPECT_EQ(count_of(2, 8), 1.0f);
  EXPECT_EQ(tokens_and_flags(step.edits, 0).front(),
            (std::pair<int, std::uint32_t>{2, kEditBanned}));

  editor.record(0, 6);  // the second token: min_tokens reached, the ban ends
  step = editor.step(all);
  EXPECT_EQ(count_of(0, 6), 2.0f);
  for (const auto& [token, flags] : tokens_and_flags(step.edits, 0)) {
    EXPECT_EQ(flags & kEditBanned, 0u) << "token " << token;
  }
  // A finished row sends nothing.
  step = editor.step(std::vector<std::uint8_t>{1, 1, 0});
  EXPECT_TRUE(tokens_and_flags(step.edits, 2).empty());
}

TEST(LogitEditor, NeutralShapingEditsNothing) {
  const LogitShaping neutral;
  const std::vector<std::int32_t> prompt = {4, 5};
  const std::vector<LogitEditor::Sequence> sequences = {{&neutral, prompt, {}, 8}};
  EXPECT_FALSE(LogitEditor(sequences).any());
  EXPECT_FALSE(neutral.edits_logits());
}

TEST(LogitShapingValidation, RangesAreVllms) {
  LogitShaping s;
  s.repetition_penalty = 0.0f;
  EXPECT_THROW(validate(s, 10), Error);
  s = {};
  s.presence_penalty = -2.5f;
  EXPECT_THROW(validate(s, 10), Error);
  s = {};
  s.logit_bias = {{10, 1.0f}};
  EXPECT_THROW(validate(s, 10), Error);
  s = {};
  s.stop_ids = {-1};
  EXPECT_THROW(validate(s, 10), Error);
  s = {};
  s.min_tokens = 3;
  s.frequency_penalty = 2.0f;
  EXPECT_NO_THROW(validate(s, 10));
}

class LogitShapingEngine : public ::testing::Test {
 protected:
  void SetUp() override { test::write_real_vocab_model(dir_.path()); }
  Engine engine(int batch) {
    EngineOptions options;
    options.model = dir_.path().string();
    options.device = DeviceChoice::cpu;
    options.placement.gpu_batch = batch;
    return Engine(options);
  }
  test::TempDir dir_;
};

GenerationRequest request(int i, int max_tokens) {
  GenerationRequest r;
  r.prompt = {2};
  for (int t = 0; t < 3 + (i * 7) % 13; ++t) r.prompt.push_back(4 + (i * 31 + t * 17) % 700);
  r.max_tokens = max_tokens;
  r.seed = 10 + static_cast<std::uint64_t>(i);
  r.ignore_eos = true;
  r.sampling = i % 2 == 0 ? SamplingParams{0.0f, 0, 1.0f} : SamplingParams{1.0f, 40, 0.9f};
  return r;
}

TEST_F(LogitShapingEngine, PenaltiesChangePicksAndNeverDependOnBatchMates) {
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 6; ++i) requests.push_back(request(i, 12));
  std::vector<GenerationRequest> shaped = requests;
  shaped[0].shaping.frequency_penalty = 2.0f;
  shaped[0].shaping.presence_penalty = 2.0f;
  shaped[1].shaping.repetition_penalty = 1.5f;
  shaped[2].shaping.logit_bias = {{17, 100.0f}};
  shaped[3].sampling.min_p = 0.5f;
  shaped[4].shaping.repetition_penalty = 0.7f;  // < 1 rewards the context
  Engine e = engine(4);
  const std::vector<GenerationResult> plain = e.generate(requests);
  const std::vector<GenerationResult> together = e.generate(shaped);
  for (std::size_t i = 0; i < shaped.size(); ++i) {
    SCOPED_TRACE(testing::Message() << "request " << i);
    ASSERT_TRUE(together[i].error.empty()) << together[i].error;
    const GenerationResult alone = engine(1).generate({&shaped[i], 1}).front();
    EXPECT_EQ(together[i].tokens, alone.tokens) << "a request depends on its batch-mates";
  }
  EXPECT_EQ(together[5].tokens, plain[5].tokens);  // unshaped
  std::vector<std::int32_t> sorted = together[0].tokens;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end())
      << "frequency + presence 2 on flat logits leave no token repeated";
  EXPECT_TRUE(std::all_of(together[2].tokens.begin(), together[2].tokens.end(),
                          [](std::int32_t t) { return t == 17; }));
}

TEST_F(LogitShapingEngine, MinTokensHoldsEosOffThenEosEndsTheRequest) {
  Engine e = engine(2);
  GenerationRequest r = request(0, 10);
  r.ignore_eos = false;
  r.shaping.logit_bias = {{2, 100.0f}};  // EOS (id 2) as soon as it may come
  GenerationRequest held = r;
  held.shaping.min_tokens = 4;
  const auto results = e.generate(std::vector<GenerationRequest>{r, held});
  EXPECT_EQ(results[0].tokens, (std::vector<std::int32_t>{2}));
  EXPECT_EQ(results[0].finish, FinishReason::stop);
  ASSERT_EQ(results[1].tokens.size(), 5u);
  for (int t = 0; t < 4; ++t) EXPECT_NE(results[1].tokens[static_cast<std::size_t>(t)], 2);
  EXPECT_EQ(results[1].tokens.back(), 2);
  EXPECT_EQ(results[1].finish, FinishReason::stop);
  // A stop callback is not consulted before min_tokens either.
  GenerationRequest stop_any = request(1, 10);
  stop_any.shaping.min_tokens = 3;
  stop_any.stop = [](std::span<const std::int32_t>) { return true; };
  const auto stopped = e.generate({&stop_any, 1});
  EXPECT_EQ(stopped[0].tokens.size(), 3u);
  EXPECT_EQ(stopped[0].finish, FinishReason::stop);
}

TEST_F(LogitShapingEngine, LogprobsAreOfTheRawModelUnderEveryEdit) {
  Engine e = engine(3);
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 3; ++i) {
    GenerationRequest r = request(i, 6);
    r.logprobs = true;
    r.shaping.repetition_penalty = 1.4f;
    r.shaping.frequency_penalty = 1.0f;
    r.shaping.logit_bias = {{30 + i, 5.0f}};
    requests.push_back(r);
  }
  const auto results = e.generate(requests);
  const std::vector<ScoreResult> scores = test::scores_of_generated(e, requests, results);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    ASSERT_EQ(results[i].token_logprobs.size(), results[i].tokens.size());
    for (std::size_t t = 0; t < results[i].tokens.size(); ++t) {
      EXPECT_NEAR(results[i].token_logprobs[t],
                  scores[i].token_logprobs[requests[i].prompt.size() + t], 2e-3f)
          << "request " << i << " token " << t;
    }
  }
}

}  // namespace
}  // namespace offgen
