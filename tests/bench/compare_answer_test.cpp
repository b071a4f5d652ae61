// The report's first paragraph: it names the cell that keeps quality with the least KV memory,
// says which policies never keep it, and does not judge by a task the model cannot do.
#include "bench/compare_answer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "bench/task_eval.h"

namespace offgen::bench {
namespace {

CompareCell cell(PolicyKind policy, double budget, int c, int passkey_correct, double ppl) {
  CompareCell out;
  out.policy = policy;
  out.budget = policy == PolicyKind::full ? KvBudget{} : KvBudget::of(budget);
  out.budget_tokens = c;
  out.kv_per_sequence = static_cast<std::uint64_t>(c) * 1024;
  out.largest_batch = 1000000 / static_cast<std::uint64_t>(c);
  out.throughput.prefill_seconds = 1.0;
  out.throughput.config = {8, 512, 32};
  out.tokens_per_second = {100.0};
  out.perplexity = ppl;
  out.agreement = std::nan("");
  // 40 passkey samples over two depths.
  out.tasks.push_back({LongContextTask::passkey, 1000, 0.0, 20, passkey_correct / 2});
  out.tasks.push_back(
      {LongContextTask::passkey, 1000, 1.0, 20, passkey_correct - passkey_correct / 2});
  return out;
}

CompareResult result(std::vector<CompareCell> cells) {
  CompareResult r;
  r.kv_memory = 1 << 30;
  r.cells = std::move(cells);
  r.cells_planned = r.cells.size();
  return r;
}

TEST(CompareAnswer, NamesTheCheapestCellThatKeepsQualityAndThePoliciesThatNeverDo) {
  const CompareResult r = result({
      cell(PolicyKind::full, 0, 1024, 38, 20.0),
      cell(PolicyKind::local, 0.1, 103, 4, 20.1),
      cell(PolicyKind::local, 0.5, 512, 22, 20.0),
      cell(PolicyKind::h2o, 0.1, 103, 30, 20.3),
      cell(PolicyKind::h2o, 0.2, 205, 37, 20.4),
      cell(PolicyKind::h2o, 0.5, 512, 38, 20.0),
  });
  const std::string text = compare_answer(r);
  EXPECT_EQ(text.find("**h2o at budget 0.2** (C = 205 tokens)"), 0u) << text;
  EXPECT_NE(text.find("local does not keep quality at any budget tried; at its best (budget "
                      "0.5) passkey 55% against full's 95%"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("h2o keeps quality down to budget 0.2"), std::string::npos) << text;
  EXPECT_NE(text.find("sequences fit in"), std::string::npos);
}

// quest caches every token (full's KV memory) and moves only the pages it attends: the answer
// names it beside the cell with the least memory when it moves the least KV per step.
TEST(CompareAnswer, NamesTheCellMovingTheLeastKvWhenItIsNotTheOneStoringTheLeast) {
  CompareCell full = cell(PolicyKind::full, 0, 1024, 38, 20.0);
  full.throughput.kv_moved_per_step = 64.0 * 1024 * 1024;
  CompareCell h2o = cell(PolicyKind::h2o, 0.5, 512, 38, 20.0);
  h2o.throughput.kv_moved_per_step = 32.0 * 1024 * 1024;
  CompareCell quest = cell(PolicyKind::quest, 0.2, 205, 37, 20.1);
  quest.kv_per_sequence = full.kv_per_sequence;  // it keeps the whole cache
  quest.throughput.kv_moved_per_step = 14.0 * 1024 * 1024;
  const std::string text = compare_answer(result({full, h2o, quest}));
  EXPECT_EQ(text.find("**h2o at budget 0.5**"), 0u) << text;
  EXPECT_NE(text.find("**quest at budget 0.2** moves the least KV per decode step of those "
                      "cells: 14.00 MiB against full's 64.00 MiB"),
            std::string::npos)
      << text;
  // When the cell storing the least also moves the least, one name says both.
  quest.throughput.kv_moved_per_step = 40.0 * 1024 * 1024;
  EXPECT_EQ(compare_answer(result({full, h2o, quest})).find("moves the least"), std::string::npos);
}

TEST(CompareAnswer, PerplexityAloneDecidesWhenItIsTheOnlyMeasure) {
  CompareCell full = cell(PolicyKind::full, 0, 1024, 0, 20.0);
  CompareCell ok = cell(PolicyKind::local, 0.2, 205, 0, 20.9);   // +4.5%
  CompareCell bad = cell(PolicyKind::local, 0.1, 103, 0, 21.2);  // +6%
  for (CompareCell* c : {&full, &ok, &bad}) c->tasks.clear();
  EXPECT_TRUE(quality_vs_full(ok, full).keeps);
  EXPECT_FALSE(quality_vs_full(bad, full).keeps);
  EXPECT_NE(quality_vs_full(bad, full).worst.find("perplexity +6.0%"), std::string::npos);
}

TEST(CompareAnswer, GreedyAgreementBelowNinetyPercentDoesNotKeepQuality) {
  CompareCell full = cell(PolicyKind::full, 0, 1024, 38, 20.0);
  CompareCell close = cell(PolicyKind::local, 0.2, 205, 38, 20.0);
  full.agreement = 1.0;
  close.agreement = 0.92;
  EXPECT_TRUE(quality_vs_full(close, full).keeps);
  close.agreement = 0.686;
  const QualityVsFull q = quality_vs_full(close, full);
  EXPECT_FALSE(q.keeps);
  EXPECT_EQ(q.worst, "greedy agreement 68.6% with full");
}

TEST(CompareAnswer, ATaskFullCannotDoJudgesNoPolicy) {
  const CompareResult r = result({
      cell(PolicyKind::full, 0, 1024, 2, 20.0),
      cell(PolicyKind::local, 0.1, 103, 0, 20.1),
  });
  const std::string text = compare_answer(r);
  EXPECT_EQ(text.find("**local at budget 0.1**"), 0u) << text;
  EXPECT_NE(text.find("Full itself answers passkey (5%) below 50%"), std::string::npos) << text;
}

TEST(CompareAnswer, WithoutAnyQualityMeasureItSaysSo) {
  CompareCell full = cell(PolicyKind::full, 0, 1024, 0, 0);
  CompareCell local = cell(PolicyKind::local, 0.1, 103, 0, 0);
  for (CompareCell* c : {&full, &local}) {
    c->tasks.clear();
    c->perplexity = std::nan("");
  }
  EXPECT_NE(compare_answer(result({full, local})).find("No quality was measured"),
            std::string::npos);
}

// With --tasks alone and full failing them, the answer says what was measured and why it judges
// no policy, rather than that nothing was measured.
TEST(CompareAnswer, OnlyTasksFullCannotDoSayWhyNoPolicyIsJudged) {
  CompareCell full = cell(PolicyKind::full, 0, 1024, 17, 0);
  CompareCell local = cell(PolicyKind::local, 0.1, 103, 3, 0);
  for (CompareCell* c : {&full, &local}) c->perplexity = std::nan("");  // tasks only
  const std::string text = compare_answer(result({full, local}));
  EXPECT_EQ(text.find("No quality was measured"), std::string::npos) << text;
  EXPECT_NE(text.find("**No policy can be judged**: quality was measured only by that task, and "
                      "full itself answers passkey (42%) below 50%"),
            std::string::npos)
      << text;
}

TEST(WilsonInterval, MatchesTheTextbookValues) {
  const Interval none = wilson_interval(0, 10);
  EXPECT_DOUBLE_EQ(none.low, 0.0);
  EXPECT_NEAR(none.high, 0.2775, 1e-4);
  const Interval half = wilson_interval(5, 10);
  EXPECT_NEAR(half.low, 0.2366, 1e-4);
  EXPECT_NEAR(half.high, 0.7634, 1e-4);
  const Interval all = wilson_interval(10, 10);
  EXPECT_NEAR(all.low, 0.7225, 1e-4);
  EXPECT_DOUBLE_EQ(all.high, 1.0);
}

}  // namespace
}  // namespace offgen::bench
