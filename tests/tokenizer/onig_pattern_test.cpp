// The Oniguruma -> PCRE2 rewrite: each construct on its own, the constructs refused, and LLaMA 3's
// split pattern classifying every code point as `tokenizers` does (unicode_classes.txt, made from
// HF's GPT-2 split, which uses the same \s, \p{L} and \p{N}).
#include "engine/tokenizer/onig_pattern.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/tokenizer/text_pattern.h"
#include "engine/tokenizer/unicode_classes.h"
#include "engine/tokenizer/utf8.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

const std::string kWhite(unicode_classes::kWhiteSpace);
const std::string kLetters = R"(\p{L})" + std::string(unicode_classes::kNewLetters);

TEST(OnigPattern, RewritesWhatPcre2SpellsDifferently) {
  EXPECT_EQ(onig_to_pcre2(R"(\s+(?!\S))"), "[" + kWhite + "]+(?![^" + kWhite + "])");
  EXPECT_EQ(onig_to_pcre2(R"([^\s\p{L}])"), "[^" + kWhite + kLetters + "]");
  EXPECT_EQ(onig_to_pcre2(R"(\p{L}+|\P{L})"), "[" + kLetters + "]+|[^" + kLetters + "]");
  EXPECT_EQ(onig_to_pcre2(R"(\p{^L})"), "[^" + kLetters + "]");
  EXPECT_EQ(onig_to_pcre2(R"(\p{Lu}\P{Nd})"), R"(\p{Lu}\P{Nd})");  // PCRE2's own tables
  EXPECT_EQ(onig_to_pcre2(R"(\pL)"), "pL");                        // no braces: two letters
  EXPECT_EQ(onig_to_pcre2(R"(\h\H[\h])"), "[0-9A-Fa-f][^0-9A-Fa-f][0-9A-Fa-f]");
  EXPECT_EQ(onig_to_pcre2(R"(\v)"), R"(\x{0B})");
  EXPECT_EQ(onig_to_pcre2(R"(\u00e9)"), R"(\x{00e9})");
  EXPECT_EQ(onig_to_pcre2("(?m:.)(?im)(?i:'s)(?=a)(?<n>b)"), "(?s:.)(?is)(?i:'s)(?=a)(?<n>b)");
  EXPECT_EQ(onig_to_pcre2(R"([]a\]\[][[:alpha:]\d])"), R"([]a\]\[][[:alpha:]\d])");
  EXPECT_EQ(onig_to_pcre2(R"(\d\b\A\z\\s)"), R"(\d\b\A\z\\s)");
}

TEST(OnigPattern, RefusesWhatPcre2CannotSayTheSameWay) {
  for (const char* pattern : {R"([\S])", R"([\W])", R"([\H])", R"([\P{L}])", R"([a-z&&[^aeiou]])",
                              R"([a[bc]])", R"(\u12)", R"(\p{L)", "a\\"}) {
    const std::string message = test::error_of([&] { onig_to_pcre2(pattern); });
    EXPECT_NE(message.find("Oniguruma pattern"), std::string::npos) << pattern << ": " << message;
  }
}

TEST(OnigPattern, FindsMatchesAsOnigurumasIteratorDoes) {
  const TextPattern star(TextPattern::Kind::regex, "x*", "test");
  std::vector<TextPattern::Span> spans;
  star.find_matches("axxb", spans);
  // An empty match at 0, "xx", no empty match right after it, an empty match at the end.
  const std::vector<std::tuple<std::size_t, std::size_t, bool>> expected = {
      {0, 0, true}, {0, 1, false}, {1, 3, true}, {3, 4, false}, {4, 4, true}};
  ASSERT_EQ(spans.size(), expected.size());
  for (std::size_t i = 0; i < spans.size(); ++i) {
    EXPECT_EQ(std::make_tuple(spans[i].begin, spans[i].end, spans[i].is_match), expected[i]) << i;
  }
  star.find_matches("", spans);
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_FALSE(spans[0].is_match);
  const TextPattern literal(TextPattern::Kind::literal, "a.b", "test");
  EXPECT_EQ(literal.replace_all("a.b axb a.b", "_"), "_ axb _");
}

// LLaMA 3's pattern splits "a" + c into one piece only for a letter c, c + "1" only for a number,
// c + "!" only for other (neither letter, number nor whitespace).
std::size_t piece_count(const TextPattern& pattern, const std::string& text,
                        std::vector<TextPattern::Span>& spans) {
  pattern.find_matches(text, spans);
  return spans.size();
}

TEST(OnigPattern, Llama3PatternClassifiesEveryCodePointAsHuggingFace) {
  const TextPattern llama3(
      TextPattern::Kind::regex,
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
      "LLaMA 3");
  std::ifstream in(test::data_dir() / "tokenizer" / "unicode_classes.txt");
  ASSERT_TRUE(in);
  std::vector<TextPattern::Span> spans;
  std::uint32_t covered = 0;
  int mismatches = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::uint32_t first = 0;
    std::uint32_t last = 0;
    char expected = 0;
    fields >> std::hex >> first >> last >> expected;
    ASSERT_TRUE(fields) << line;
    for (std::uint32_t cp = first; cp <= last; ++cp, ++covered) {
      // GPT-2's probes put U+0020 with the numbers (its " ?\p{N}+" takes the space along), a
      // quirk of that pattern rather than a class of the character.
      if (cp == ' ') continue;
      std::string c;
      utf8::append_code_point(c, cp);
      char got = 'S';
      if (piece_count(llama3, "a" + c, spans) == 1) {
        got = 'L';
      } else if (piece_count(llama3, c + "1", spans) == 1) {
        got = 'N';
      } else if (piece_count(llama3, c + "!", spans) == 1) {
        got = 'O';
      }
      if (got != expected && ++mismatches <= 20) {
        ADD_FAILURE() << "U+" << std::hex << std::uppercase << cp << ": HF class " << expected
                      << ", ours " << got;
      }
    }
  }
  EXPECT_EQ(covered, 0x110000u - 0x800u);
  EXPECT_EQ(mismatches, 0);
}

}  // namespace
}  // namespace offgen
