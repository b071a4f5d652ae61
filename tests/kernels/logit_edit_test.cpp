// Logit edits (kernels/logit_edit_args.h): the reference against values worked out by hand for
// each step (bias, repetition both signs, frequency, presence, a ban, a chunk's row offset), and
// every implementation against the reference bit for bit on random rows of OPT's head size,
// with restore_logits giving back the raw logits exactly.
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <vector>

#include "kernels/reference/reference.h"
#include "tests/kernels/parity.h"

namespace offgen::test {
namespace {

using kernels::LogitEdit;
using kernels::RowPenalties;

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(LogitEditReference, EachStepAsSpecified) {
  // Rows 3 and 4 of a block, held as rows 0 and 1 of a chunk that starts at row 3.
  std::vector<float> logits = {2.0f, -2.0f, 0.5f, 3.0f, 0.0f,   // row 3
                               1.0f, -2.0f, 4.0f, 0.0f, 0.0f};  // row 4
  const std::vector<float> raw = logits;
  std::vector<RowPenalties> penalties(5);
  penalties[3] = {2.0f, 0.5f, 0.25f};
  const std::vector<LogitEdit> edits = {
      {3, 0, 2.0f, 0.0f, kernels::kEditInContext},  // 2 / 2 - 0.5 * 2 - 0.25
      {3, 1, 0.0f, 0.0f, kernels::kEditInContext},  // -2 * 2
      {3, 2, 1.0f, 1.5f, 0},                        // 0.5 + 1.5 - 0.5 - 0.25
      {3, 3, 0.0f, 5.0f, kernels::kEditBanned},     // banned, whatever its bias
      {3, 4, 0.0f, 0.0f, kernels::kEditInContext},  // 0 * 2
      {4, 1, 0.0f, -100.0f, 0},                     // neutral penalties: the bias alone
      {4, 2, 3.0f, 0.0f, kernels::kEditInContext},  // neutral penalties: unchanged
  };
  std::vector<float> saved(edits.size(), std::nanf(""));
  const kernels::EditLogitsArgs args{.logits = logits.data(),
                                     .edits = edits.data(),
                                     .penalties = penalties.data(),
                                     .saved = saved.data(),
                                     .count = static_cast<std::int64_t>(edits.size()),
                                     .first_row = 3,
                                     .vocab = 5};
  kernels::reference::edit_logits(args);
  const std::vector<float> expected = {-0.25f, -4.0f,   1.25f, -kInf, 0.0f,
                                       1.0f,   -102.0f, 4.0f,  0.0f,  0.0f};
  EXPECT_EQ(logits, expected);
  EXPECT_EQ(saved, (std::vector<float>{2.0f, -2.0f, 0.5f, 3.0f, 0.0f, -2.0f, 4.0f}));
  kernels::reference::restore_logits(args);
  EXPECT_EQ(logits, raw);
}

class LogitEditParity : public ParityTest {};

TEST_P(LogitEditParity, MatchesTheReferenceBitForBitAndRestoresTheRawLogits) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const int vocab = 50272;
  const int block = 12, first_row = 4, rows = 6;  // a chunk of rows [4, 10) of the block
  std::vector<float> logits = rng.floats(static_cast<std::size_t>(rows) * vocab, -12.0f, 12.0f);
  logits[7] = 0.0f;  // a zero logit in context: neither branch of the repetition penalty moves it
  std::vector<RowPenalties> penalties(block);
  for (RowPenalties& p : penalties) {
    p = {rng.uniform(0.5f, 2.0f), rng.uniform(-2.0f, 2.0f), rng.uniform(-2.0f, 2.0f)};
  }
  penalties[first_row + 1] = {};  // a row with only bias and bans
  std::vector<LogitEdit> edits;
  for (int r = first_row; r < first_row + rows; ++r) {
    if (r == first_row + 2) continue;  // a row without edits
    std::set<int> tokens = {7};
    while (tokens.size() < 300) tokens.insert(rng.integer(0, vocab - 1));
    for (const int token : tokens) {
      LogitEdit e{r, token, static_cast<float>(rng.integer(0, 3)), 0.0f, 0};
      if (rng.integer(0, 3) == 0) e.bias = rng.uniform(-100.0f, 100.0f);
      if (rng.integer(0, 1) == 0) e.flags |= kernels::kEditInContext;
      if (rng.integer(0, 20) == 0) e.flags |= kernels::kEditBanned;
      edits.push_back(e);
    }
  }
  const auto count = static_cast<std::int64_t>(edits.size());
  std::vector<float> expected = logits;
  std::vector<float> expected_saved(edits.size());
  kernels::reference::edit_logits({expected.data(), edits.data(), penalties.data(),
                                   expected_saved.data(), count, first_row, vocab});

  std::vector<float> actual = logits;
  Guarded<float> saved(edits.size(), std::nanf(""));
  const kernels::EditLogitsArgs args{
      actual.data(), edits.data(), penalties.data(), saved.data(), count, first_row, vocab};
  impl().edit_logits(args);
  EXPECT_TRUE(saved.guards_intact());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    ASSERT_EQ(std::bit_cast<std::uint32_t>(actual[i]), std::bit_cast<std::uint32_t>(expected[i]))
        << "logit " << i << ": " << actual[i] << " vs " << expected[i];
  }
  EXPECT_EQ(saved.values(), expected_saved);
  impl().restore_logits(args);
  EXPECT_EQ(actual, logits);
}

INSTANTIATE_TEST_SUITE_P(All, LogitEditParity, ::testing::ValuesIn(kernel_sets_under_test()),
                         kernel_set_name);

}  // namespace
}  // namespace offgen::test
