// The GPT-2 split on its own: hand-checked splits (from HF's ByteLevel.pre_tokenize_str), the class
// of every code point against HF's (unicode_classes.txt), and the invalid-UTF-8 boundary rule.
#include "engine/tokenizer/pretokenizer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/tokenizer/utf8.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

using Pieces = std::vector<std::string>;

TEST(Pretokenizer, SplitsLikeHuggingFace) {
  const Pretokenizer pre;
  // Expected values are HF's pieces, mapped back from byte-level characters to text.
  EXPECT_EQ(pre.split(""), Pieces{});
  EXPECT_EQ(pre.split("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(pre.split("I'm  you'LL  \n\n x  "),
            (Pieces{"I", "'m", " ", " you", "'", "LL", "  \n\n", " x", "  "}));
  EXPECT_EQ(pre.split("it's they're we've I'd she'll"),
            (Pieces{"it", "'s", " they", "'re", " we", "'ve", " I", "'d", " she", "'ll"}));
  EXPECT_EQ(pre.split("IT'S it\u2019s"), (Pieces{"IT", "'", "S", " it", "\u2019", "s"}));
  EXPECT_EQ(pre.split("x = f(a, b)+12345;"),
            (Pieces{"x", " =", " f", "(", "a", ",", " b", ")+", "12345", ";"}));
  EXPECT_EQ(pre.split("\tif x:\r\n    return"),
            (Pieces{"\t", "if", " x", ":", "\r\n   ", " return"}));
  EXPECT_EQ(pre.split("a\u00a0b\u3000c"), (Pieces{"a", "\u00a0", "b", "\u3000", "c"}));
  EXPECT_EQ(pre.split("a\u0085!"), (Pieces{"a", "\u0085", "!"}));  // NEL is \s for Oniguruma
  EXPECT_EQ(pre.split("caf\u00e9 e\u0301t\u00e9"),
            (Pieces{"caf\u00e9", " e", "\u0301", "t\u00e9"}));  // combining marks are not \p{L}
  EXPECT_EQ(pre.split("\U0001F44D\U0001F3FD ok"), (Pieces{"\U0001F44D\U0001F3FD", " ok"}));
}

TEST(Pretokenizer, InvalidUtf8RunsAreTheirOwnPieces) {
  const Pretokenizer pre;
  EXPECT_EQ(pre.split("abc\xff"
                      "def"),
            (Pieces{"abc", "\xff", "def"}));
  // A run of invalid bytes is one piece, even when it holds several maximal subparts.
  EXPECT_EQ(pre.split("a \xe4\xb8\x80\xe4\xb8 \xf0\x9f"),
            (Pieces{"a", " \xe4\xb8\x80", "\xe4\xb8", " ", "\xf0\x9f"}));
  EXPECT_EQ(pre.split("\x80\x80\xc0\xaf"), (Pieces{"\x80\x80\xc0\xaf"}));
  // The valid text on each side splits as if it stood alone: trailing spaces stay together.
  EXPECT_EQ(pre.split("x  \xfe  y"), (Pieces{"x", "  ", "\xfe", " ", " y"}));
  // Surrogates and overlongs are invalid, as in Python.
  EXPECT_EQ(pre.split("a\xed\xa0\x80"
                      "b"),
            (Pieces{"a", "\xed\xa0\x80", "b"}));
}

TEST(Pretokenizer, InterpreterMatchesJit) {
  const Pretokenizer jit;
  const Pretokenizer interpreter(/*use_jit=*/false);
  std::printf("PCRE2 JIT: %s\n", jit.jit() ? "on" : "unavailable");
  EXPECT_FALSE(interpreter.jit());
  std::ifstream in(test::data_dir() / "tokenizer" / "parity.jsonl", std::ios::binary);
  ASSERT_TRUE(in);
  int checked = 0;
  for (std::string line; std::getline(in, line); ++checked) {
    const auto text = nlohmann::json::parse(line).at("text").get<std::string>();
    ASSERT_EQ(jit.split(text), interpreter.split(text)) << nlohmann::json(text).dump();
  }
  EXPECT_GE(checked, 3000);
}

TEST(Pretokenizer, LongRunsWithoutSplitPoints) {
  // Whitespace runs make \s+(?!\S) backtrack; neither matcher may hit a PCRE2 limit.
  const std::string spaces(std::size_t{1} << 20, ' ');
  for (const bool use_jit : {true, false}) {
    const Pretokenizer pre(use_jit);
    EXPECT_EQ(pre.split(spaces + "x"), (Pieces{spaces.substr(1), " x"}));
    EXPECT_EQ(pre.split(spaces), (Pieces{spaces}));
    const std::string letters(std::size_t{1} << 20, 'q');
    EXPECT_EQ(pre.split(letters + "1"), (Pieces{letters, "1"}));
  }
}

// The probes of tools/make_tokenizer_fixtures.py: L joins a preceding letter, N a following digit,
// O joins a following "!", S (whitespace) does neither. Counts pieces through the callback: this
// runs 2.2 million splits, and vectors of strings would make it slow in sanitizer builds.
char classify(const Pretokenizer& pre, std::uint32_t code_point) {
  std::string c;
  utf8::append_code_point(c, code_point);
  std::size_t count = 0;
  std::size_t second_size = 0;
  pre.split("a" + c + "1", [&](std::string_view piece) {
    if (++count == 2) second_size = piece.size();
  });
  if (count == 2) return second_size == 1 ? 'L' : 'N';  // ["a" + c, "1"] or ["a", c + "1"]
  count = 0;
  pre.split(c + "!", [&](std::string_view) { ++count; });
  return count == 1 ? 'O' : 'S';
}

TEST(Pretokenizer, EveryCodePointClassifiedAsHuggingFaceDoes) {
  const Pretokenizer pre;
  std::ifstream in(test::data_dir() / "tokenizer" / "unicode_classes.txt");
  ASSERT_TRUE(in);
  std::string line;
  std::uint32_t covered = 0;
  int mismatches = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::uint32_t first = 0;
    std::uint32_t last = 0;
    char expected = 0;
    fields >> std::hex >> first >> last >> expected;
    ASSERT_TRUE(fields) << line;
    for (std::uint32_t cp = first; cp <= last; ++cp, ++covered) {
      const char got = classify(pre, cp);
      if (got != expected && ++mismatches <= 20) {
        ADD_FAILURE() << "U+" << std::hex << std::uppercase << cp << ": HF class " << expected
                      << ", ours " << got;
      }
    }
  }
  EXPECT_EQ(covered, 0x110000u - 0x800u);  // every scalar value
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace offgen
