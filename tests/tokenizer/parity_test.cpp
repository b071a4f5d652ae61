// Parity with Hugging Face tokenizers: every string in parity.jsonl (made by
// tools/make_tokenizer_fixtures.py from HF's encode) must give HF's ids and decode back exactly.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

struct Case {
  std::size_t line;
  std::string text;
  std::vector<std::int32_t> ids;
};

std::vector<Case> read_parity_cases() {
  const auto path = test::data_dir() / "tokenizer" / "parity.jsonl";
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot open " << path;
  std::vector<Case> cases;
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    const auto record = nlohmann::json::parse(line);
    cases.push_back({number, record.at("text").get<std::string>(),
                     record.at("ids").get<std::vector<std::int32_t>>()});
  }
  return cases;
}

TEST(TokenizerParity, MatchesHuggingFaceIdsAndDecodesBack) {
  const auto tokenizer = Tokenizer::load(test::data_dir() / "tokenizer");
  const std::vector<Case> cases = read_parity_cases();
  ASSERT_GE(cases.size(), 3000u);
  int failures = 0;
  for (const Case& c : cases) {
    const std::vector<std::int32_t> ids = tokenizer->encode(c.text);
    if (ids != c.ids) {
      ADD_FAILURE() << "parity.jsonl line " << c.line << ": ids differ for "
                    << nlohmann::json(c.text).dump() << "\n  expected " << nlohmann::json(c.ids)
                    << "\n  got      " << nlohmann::json(ids);
      if (++failures >= 10) break;
    }
    EXPECT_EQ(tokenizer->decode(c.ids), c.text) << "parity.jsonl line " << c.line;
  }
}

TEST(TokenizerParity, ConcurrentEncodesAgree) {
  // The piece cache is shared; several threads filling it at once must not change any result.
  const auto tokenizer = Tokenizer::load(test::data_dir() / "tokenizer");
  const std::vector<Case> cases = read_parity_cases();
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t i = static_cast<std::size_t>(t); i < cases.size() * 2; i += 3) {
        const Case& c = cases[i % cases.size()];
        if (tokenizer->encode(c.text) != c.ids) ++mismatches;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace offgen
