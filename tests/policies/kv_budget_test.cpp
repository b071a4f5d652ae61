#include "policies/kv_budget.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/core/error.h"

namespace offgen {
namespace {

// The message of the offgen::Error that KvBudget::parse(text) throws ("" when it does not throw).
// Below the CLI it names the kv_budget parameter; the CLI words it with the flag.
std::string parse_error(const std::string& text) {
  try {
    KvBudget::parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ParseKvBudget, AcceptsFractionsBelowOneAndWholeTokenCounts) {
  EXPECT_EQ(KvBudget::parse("0.2"), KvBudget::fraction(0.2));
  EXPECT_EQ(KvBudget::parse("0.5"), KvBudget::fraction(0.5));
  EXPECT_EQ(KvBudget::parse("128"), KvBudget::tokens(128));
  EXPECT_EQ(KvBudget::parse("1"), KvBudget::tokens(1));
  EXPECT_EQ(KvBudget::parse("4096"), KvBudget::tokens(4096));
  EXPECT_DOUBLE_EQ(KvBudget::parse("0.2").value(), 0.2);
  EXPECT_DOUBLE_EQ(KvBudget::parse("4096").value(), 4096.0);
  EXPECT_EQ(KvBudget::parse("0.2").kind(), KvBudget::Kind::fraction);
  EXPECT_EQ(KvBudget::parse("128").kind(), KvBudget::Kind::tokens);
  EXPECT_TRUE(KvBudget().whole_sequence());
}

TEST(ParseKvBudget, ANumberIsReadAsItsTextIs) {
  EXPECT_EQ(KvBudget::of(0.2), KvBudget::parse("0.2"));
  EXPECT_EQ(KvBudget::of(6), KvBudget::parse("6"));
  EXPECT_THROW(KvBudget::of(1.5), Error);
  EXPECT_THROW(KvBudget::of(0.0), Error);
}

TEST(ParseKvBudget, RejectsZeroAndNegativeAsNotPositive) {
  for (const std::string text : {"0", "-3", "0.0", "-0.5"}) {
    SCOPED_TRACE(text);
    EXPECT_THROW(KvBudget::parse(text), Error);
    const std::string message = parse_error(text);
    EXPECT_NE(message.find("kv_budget"), std::string::npos) << message;
    EXPECT_NE(message.find("positive"), std::string::npos) << message;
    EXPECT_NE(message.find(text), std::string::npos) << message;
  }
}

TEST(ParseKvBudget, RejectsNonIntegersOfOneOrMore) {
  for (const std::string text : {"1.5", "2.25", "128.5"}) {
    SCOPED_TRACE(text);
    EXPECT_THROW(KvBudget::parse(text), Error);
    const std::string message = parse_error(text);
    EXPECT_NE(message.find("kv_budget"), std::string::npos) << message;
    EXPECT_NE(message.find(text), std::string::npos) << message;
    EXPECT_NE(message.find("whole number"), std::string::npos) << message;
  }
}

TEST(ParseKvBudget, RejectsTextThatIsNotANumber) {
  for (const std::string text : {"abc", "", "12abc", " 0.2", "0.2 ", "nan", "inf", "1e999"}) {
    SCOPED_TRACE("'" + text + "'");
    EXPECT_THROW(KvBudget::parse(text), Error);
    const std::string message = parse_error(text);
    EXPECT_NE(message.find("kv_budget"), std::string::npos) << message;
    EXPECT_NE(message.find("not a number"), std::string::npos) << message;
    EXPECT_NE(message.find("'" + text + "'"), std::string::npos) << message;
  }
}

TEST(KvBudgetTokensFor, FractionOfPromptPlusGenerationRoundedUp) {
  EXPECT_EQ(KvBudget::of(0.2).tokens_for(512 + 512), 205);  // 204.8 -> 205
  EXPECT_EQ(KvBudget::of(0.1).tokens_for(10), 1);
  EXPECT_EQ(KvBudget::of(0.5).tokens_for(3), 2);  // 1.5 -> 2
  EXPECT_EQ(KvBudget::of(0.25).tokens_for(8 + 8), 4);
  EXPECT_EQ(KvBudget::of(0.5).tokens_for(512 + 32), 272);
  EXPECT_EQ(KvBudget::of(0.01).tokens_for(100 + 1), 2);  // 1.01 -> 2
  EXPECT_EQ(KvBudget::of(0.999).tokens_for(1000), 999);
}

// X < 1 is a fraction "rounded up": when X * length is a whole number in decimal, nothing is
// added (0.07 * 100 is 7.000000000000001 in binary floating point, but the user asked for 7).
TEST(KvBudgetTokensFor, FractionThatGivesAWholeNumberIsNotRoundedUpByFloatingPointError) {
  EXPECT_EQ(KvBudget::parse("0.07").tokens_for(100), 7);
  EXPECT_EQ(KvBudget::parse("0.14").tokens_for(25 + 25), 7);
  EXPECT_EQ(KvBudget::parse("0.28").tokens_for(100 + 100), 56);
  EXPECT_EQ(KvBudget::parse("0.5").tokens_for(512 + 512), 512);
  EXPECT_EQ(KvBudget::parse("0.25").tokens_for(1000 + 24), 256);
}

TEST(KvBudgetTokensFor, AbsoluteTokenCounts) {
  EXPECT_EQ(KvBudget::of(128.0).tokens_for(512 + 512), 128);
  EXPECT_EQ(KvBudget::of(1.0).tokens_for(512 + 512), 1);
  EXPECT_EQ(KvBudget::of(1024.0).tokens_for(512 + 512), 1024);
}

TEST(KvBudgetTokensFor, ClampedToTheSequenceLength) {
  EXPECT_EQ(KvBudget::of(2000.0).tokens_for(512 + 512), 1024);
  EXPECT_EQ(KvBudget::of(5.0).tokens_for(2 + 1), 3);
  EXPECT_EQ(KvBudget::of(0.99).tokens_for(1), 1);
}

TEST(KvBudgetTokensFor, AtLeastOneToken) {
  EXPECT_EQ(KvBudget::of(0.001).tokens_for(10), 1);
  EXPECT_EQ(KvBudget::of(1e-9).tokens_for(512 + 512), 1);
  EXPECT_EQ(KvBudget::of(0.5).tokens_for(1), 1);
}

TEST(KvBudgetTokensFor, TheWholeSequenceIsItsLength) {
  EXPECT_EQ(KvBudget().tokens_for(1024), 1024);
  EXPECT_EQ(KvBudget().tokens_for(1), 1);
}

TEST(KvBudgetTokensFor, RejectsAnEmptySequence) {
  EXPECT_THROW(KvBudget::of(0.5).tokens_for(0), Error);
}

TEST(KvBudget, ParseThenResolve) {
  EXPECT_EQ(KvBudget::parse("0.2").tokens_for(512 + 512), 205);
  EXPECT_EQ(KvBudget::parse("128").tokens_for(512 + 512), 128);
  EXPECT_EQ(KvBudget::parse("1").tokens_for(512 + 512), 1);
}

}  // namespace
}  // namespace offgen
