#include "policies/kv_budget.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/core/error.h"

namespace offgen {
namespace {

// The message of the offgen::Error that parse_kv_budget(text) throws ("" when it does not throw).
std::string parse_error(const std::string& text) {
  try {
    parse_kv_budget(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ParseKvBudget, AcceptsFractionsBelowOneAndWholeTokenCounts) {
  EXPECT_DOUBLE_EQ(parse_kv_budget("0.2"), 0.2);
  EXPECT_DOUBLE_EQ(parse_kv_budget("0.5"), 0.5);
  EXPECT_DOUBLE_EQ(parse_kv_budget("128"), 128.0);
  EXPECT_DOUBLE_EQ(parse_kv_budget("1"), 1.0);
  EXPECT_DOUBLE_EQ(parse_kv_budget("4096"), 4096.0);
}

TEST(ParseKvBudget, RejectsZeroAndNegativeAsNotPositive) {
  for (const std::string text : {"0", "-3", "0.0", "-0.5"}) {
    SCOPED_TRACE(text);
    EXPECT_THROW(parse_kv_budget(text), Error);
    const std::string message = parse_error(text);
    EXPECT_NE(message.find("--kv-budget"), std::string::npos) << message;
    EXPECT_NE(message.find("positive"), std::string::npos) << message;
    EXPECT_NE(message.find(text), std::string::npos) << message;
  }
}

TEST(ParseKvBudget, RejectsNonIntegersOfOneOrMore) {
  for (const std::string text : {"1.5", "2.25", "128.5"}) {
    SCOPED_TRACE(text);
    EXPECT_THROW(parse_kv_budget(text), Error);
    const std::string message = parse_error(text);
    EXPECT_NE(message.find("--kv-budget"), std::string::npos) << message;
    EXPECT_NE(message.find(text), std::string::npos) << message;
    EXPECT_NE(message.find("whole number"), std::string::npos) << message;
  }
}

TEST(ParseKvBudget, RejectsTextThatIsNotANumber) {
  for (const std::string text : {"abc", "", "12abc", " 0.2", "0.2 ", "nan", "inf", "1e999"}) {
    SCOPED_TRACE("'" + text + "'");
    EXPECT_THROW(parse_kv_budget(text), Error);
    const std::string message = parse_error(text);
    EXPECT_NE(message.find("--kv-budget"), std::string::npos) << message;
    EXPECT_NE(message.find("not a number"), std::string::npos) << message;
    EXPECT_NE(message.find("'" + text + "'"), std::string::npos) << message;
  }
}

TEST(ResolveKvBudget, FractionOfPromptPlusGenerationRoundedUp) {
  EXPECT_EQ(resolve_kv_budget(0.2, 512, 512), 205);  // 204.8 -> 205
  EXPECT_EQ(resolve_kv_budget(0.1, 10, 0), 1);
  EXPECT_EQ(resolve_kv_budget(0.5, 3, 0), 2);  // 1.5 -> 2
  EXPECT_EQ(resolve_kv_budget(0.25, 8, 8), 4);
  EXPECT_EQ(resolve_kv_budget(0.5, 512, 32), 272);
  EXPECT_EQ(resolve_kv_budget(0.01, 100, 1), 2);  // 1.01 -> 2
  EXPECT_EQ(resolve_kv_budget(0.999, 1000, 0), 999);
}

// X < 1 is a fraction "rounded up": when X * length is a whole number in decimal, nothing is
// added (0.07 * 100 is 7.000000000000001 in binary floating point, but the user asked for 7).
TEST(ResolveKvBudget, FractionThatGivesAWholeNumberIsNotRoundedUpByFloatingPointError) {
  EXPECT_EQ(resolve_kv_budget(parse_kv_budget("0.07"), 100, 0), 7);
  EXPECT_EQ(resolve_kv_budget(parse_kv_budget("0.14"), 25, 25), 7);
  EXPECT_EQ(resolve_kv_budget(parse_kv_budget("0.28"), 100, 100), 56);
  EXPECT_EQ(resolve_kv_budget(parse_kv_budget("0.5"), 512, 512), 512);
  EXPECT_EQ(resolve_kv_budget(parse_kv_budget("0.25"), 1000, 24), 256);
}

TEST(ResolveKvBudget, AbsoluteTokenCounts) {
  EXPECT_EQ(resolve_kv_budget(128.0, 512, 512), 128);
  EXPECT_EQ(resolve_kv_budget(1.0, 512, 512), 1);
  EXPECT_EQ(resolve_kv_budget(1024.0, 512, 512), 1024);
}

TEST(ResolveKvBudget, ClampedToTheSequenceLength) {
  EXPECT_EQ(resolve_kv_budget(2000.0, 512, 512), 1024);
  EXPECT_EQ(resolve_kv_budget(5.0, 2, 1), 3);
  EXPECT_EQ(resolve_kv_budget(0.99, 1, 0), 1);
}

TEST(ResolveKvBudget, AtLeastOneToken) {
  EXPECT_EQ(resolve_kv_budget(0.001, 10, 0), 1);
  EXPECT_EQ(resolve_kv_budget(1e-9, 512, 512), 1);
  EXPECT_EQ(resolve_kv_budget(0.5, 1, 0), 1);
}

TEST(ResolveKvBudget, RejectsAnEmptySequence) {
  EXPECT_THROW(resolve_kv_budget(0.5, 0, 0), Error);
}

TEST(KvBudget, ParseThenResolve) {
  EXPECT_EQ(resolve_kv_budget(parse_kv_budget("0.2"), 512, 512), 205);
  EXPECT_EQ(resolve_kv_budget(parse_kv_budget("128"), 512, 512), 128);
  EXPECT_EQ(resolve_kv_budget(parse_kv_budget("1"), 512, 512), 1);
}

}  // namespace
}  // namespace offgen
