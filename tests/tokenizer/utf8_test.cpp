// to_valid_utf8() against Python's bytes.decode("utf-8", errors="replace"): hand-written cases for
// each rule, then the random reference strings in utf8_replace.txt.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "engine/tokenizer/tokenizer.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD

std::string times(const std::string& text, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += text;
  return out;
}

TEST(ToValidUtf8, ValidTextPassesThrough) {
  for (const std::string text :
       {"", "hello", "caf\u00e9 \u65e5\u672c\u8a9e \U0001F600", "\x00\x7f", "\xed\x9f\xbf",
        /* U+D7FF */ "\xee\x80\x80", /* U+E000 */ "\xf4\x8f\xbf\xbf" /* max */}) {
    EXPECT_EQ(to_valid_utf8(text), text);
  }
  const std::string nul("a\0b", 3);
  EXPECT_EQ(to_valid_utf8(nul), nul);
}

TEST(ToValidUtf8, ReplacesLikePython) {
  const std::string& r = kReplacement;
  // Truncated characters: the lead and whatever continuation bytes fit become one U+FFFD.
  EXPECT_EQ(to_valid_utf8("\xe4\xb8"), r);
  EXPECT_EQ(to_valid_utf8("\xe4\xb8"
                          "a"),
            r + "a");
  EXPECT_EQ(to_valid_utf8("\xf0\x9f\x98!"), r + "!");
  EXPECT_EQ(to_valid_utf8("\xc2"), r);
  EXPECT_EQ(to_valid_utf8("\xf0\x9f\x98\x80\xf0\x9f"), "\U0001F600" + r);
  EXPECT_EQ(to_valid_utf8("a\xe2\x82\xe2\x82\xac"), "a" + r + "\u20ac");
  EXPECT_EQ(to_valid_utf8("\xe1\x80\xc0"), r + r);  // C0 cuts the sequence and is bad itself
  // Lone continuation bytes and never-valid bytes: one U+FFFD each.
  EXPECT_EQ(to_valid_utf8("\x80"), r);
  EXPECT_EQ(to_valid_utf8("\x80\xbf\x80"), times(r, 3));
  EXPECT_EQ(to_valid_utf8("\xff\xfe"), r + r);
  EXPECT_EQ(to_valid_utf8("\xf5\x80"), r + r);
  // Overlongs: the second byte is out of range for the lead, so each byte is replaced.
  EXPECT_EQ(to_valid_utf8("\xc0\xaf"), r + r);
  EXPECT_EQ(to_valid_utf8("\xc1\xbf"), r + r);
  EXPECT_EQ(to_valid_utf8("\xe0\x80\xaf"), times(r, 3));
  EXPECT_EQ(to_valid_utf8("\xf0\x80\x80\xaf"), times(r, 4));
  // Surrogates (ED A0..BF) and code points above U+10FFFF.
  EXPECT_EQ(to_valid_utf8("\xed\xa0\x80"), times(r, 3));
  EXPECT_EQ(to_valid_utf8("\xed\xbf\xbf"
                          "x"),
            times(r, 3) + "x");
  EXPECT_EQ(to_valid_utf8("\xf4\x90\x80\x80"), times(r, 4));
}

std::string from_hex(const std::string& hex) {
  std::string bytes;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

TEST(ToValidUtf8, MatchesPythonOnRandomBytes) {
  std::ifstream in(test::data_dir() / "tokenizer" / "utf8_replace.txt");
  ASSERT_TRUE(in);
  std::string line;
  int checked = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string input;
    std::string expected;
    fields >> input >> expected;
    EXPECT_EQ(to_valid_utf8(from_hex(input)), from_hex(expected)) << "input " << input;
    ++checked;
  }
  EXPECT_GE(checked, 500);
}

}  // namespace
}  // namespace offgen
