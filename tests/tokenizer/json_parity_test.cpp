// Parity with Hugging Face tokenizers for tokenizer.json files: the trained tokenizers of
// tests/data/tokenizer/json (made by tools/make_tokenizer_json_fixtures.py, each configured as a
// LLaMA 3, LLaMA 2, Qwen2 or Metaspace-style LLaMA file; and by
// tools/make_tokenizer_pretok_fixtures.py as SmolLM2's Digits + ByteLevel, and chains of
// Punctuation, Digits, Whitespace, WhitespaceSplit, Strip and Lowercase) must give `tokenizers`'
// ids for every string of parity.jsonl and its decode of those ids, and its decode of the random id
// sequences of decode.jsonl.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

std::filesystem::path style_dir(const std::string& style) {
  return test::data_dir() / "tokenizer" / "json" / style;
}

std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot open " << path;
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  }
  return lines;
}

class JsonTokenizerParity : public ::testing::TestWithParam<std::string> {};

TEST_P(JsonTokenizerParity, EncodesAndDecodesAsHuggingFace) {
  const auto tokenizer = Tokenizer::load(style_dir(GetParam()));
  const std::vector<nlohmann::json> cases = read_jsonl(style_dir(GetParam()) / "parity.jsonl");
  ASSERT_GE(cases.size(), 1000u);
  int failures = 0;
  for (std::size_t line = 1; line <= cases.size(); ++line) {
    const nlohmann::json& c = cases[line - 1];
    const auto text = c.at("text").get<std::string>();
    const auto expected = c.at("ids").get<std::vector<std::int32_t>>();
    const auto decoded = c.value("decoded", text);
    const std::vector<std::int32_t> ids = tokenizer->encode(text);
    if (ids != expected) {
      ADD_FAILURE() << GetParam() << "/parity.jsonl line " << line << ": ids differ for "
                    << nlohmann::json(text).dump() << "\n  expected " << nlohmann::json(expected)
                    << "\n  got      " << nlohmann::json(ids);
      if (++failures >= 10) break;
    }
    const std::string got = tokenizer->decode(expected);
    if (got != decoded) {
      ADD_FAILURE() << GetParam() << "/parity.jsonl line " << line << ": decode differs\n"
                    << "  expected " << nlohmann::json(decoded).dump() << "\n  got      "
                    << nlohmann::json(to_valid_utf8(got)).dump();
      if (++failures >= 10) break;
    }
  }
}

TEST_P(JsonTokenizerParity, DecodesRandomIdsAsHuggingFace) {
  const auto tokenizer = Tokenizer::load(style_dir(GetParam()));
  const std::vector<nlohmann::json> cases = read_jsonl(style_dir(GetParam()) / "decode.jsonl");
  ASSERT_GE(cases.size(), 300u);
  for (std::size_t line = 1; line <= cases.size(); ++line) {
    const auto ids = cases[line - 1].at("ids").get<std::vector<std::int32_t>>();
    const auto expected = cases[line - 1].at("text").get<std::string>();
    EXPECT_EQ(tokenizer->decode(ids), expected)
        << GetParam() << "/decode.jsonl line " << line << ": ids " << nlohmann::json(ids);
  }
}

TEST_P(JsonTokenizerParity, ConcurrentEncodesAgree) {
  // The BPE cache is shared; threads filling it at once must not change any result.
  const auto tokenizer = Tokenizer::load(style_dir(GetParam()));
  const std::vector<nlohmann::json> cases = read_jsonl(style_dir(GetParam()) / "parity.jsonl");
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t i = static_cast<std::size_t>(t); i < cases.size() * 2; i += 3) {
        const nlohmann::json& c = cases[i % cases.size()];
        if (tokenizer->encode(c.at("text").get<std::string>()) !=
            c.at("ids").get<std::vector<std::int32_t>>()) {
          ++mismatches;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST_P(JsonTokenizerParity, EncodesAMegabyteQuickly) {
  // 1 MB made of the parity strings joined by newlines. Reported, and checked against a bound
  // loose enough for debug and sanitizer builds; release builds take tens of milliseconds.
  const auto tokenizer = Tokenizer::load(style_dir(GetParam()));
  std::string corpus;
  for (const nlohmann::json& c : read_jsonl(style_dir(GetParam()) / "parity.jsonl")) {
    corpus += c.at("text").get<std::string>() + "\n";
  }
  std::string text;
  while (text.size() < (std::size_t{1} << 20)) text += corpus;
  text.resize(std::size_t{1} << 20);
  text = to_valid_utf8(text);  // the cut may split a character
  const auto start = std::chrono::steady_clock::now();
  const auto ids = tokenizer->encode(text);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s encode: %zu bytes -> %zu ids in %.1f ms (%.1f MB/s)\n", GetParam().c_str(),
              text.size(), ids.size(), seconds * 1e3,
              static_cast<double>(text.size()) / seconds / 1e6);
  EXPECT_FALSE(ids.empty());
  EXPECT_LT(seconds, 5.0);
}

INSTANTIATE_TEST_SUITE_P(Styles, JsonTokenizerParity,
                         ::testing::Values("llama3-style", "llama2-style", "qwen2-style",
                                           "metaspace-style", "smollm-style", "falcon-style",
                                           "whitespace-style", "wsplit-style"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string name = param.param;
                           name.erase(name.find('-'));
                           return name;
                         });

// The fixtures hold strings on which each feature decides the ids: the same file with one
// feature switched off must disagree with `tokenizers` on some of them.
int disagreements(const std::string& style, const std::function<void(nlohmann::json&)>& spoil) {
  auto file = nlohmann::json::parse(test::read_file(style_dir(style) / "tokenizer.json"));
  spoil(file);
  const test::TempDir dir;
  test::write_file(dir.path() / "tokenizer.json", file.dump());
  const auto tokenizer = Tokenizer::load_json(dir.path() / "tokenizer.json");
  int count = 0;
  for (const nlohmann::json& c : read_jsonl(style_dir(style) / "parity.jsonl")) {
    if (tokenizer->encode(c.at("text").get<std::string>()) !=
        c.at("ids").get<std::vector<std::int32_t>>()) {
      ++count;
    }
  }
  return count;
}

TEST(JsonTokenizerFixtures, DependOnEachFeature) {
  EXPECT_GE(disagreements("llama3-style", [](auto& f) { f["model"]["ignore_merges"] = false; }),
            20);
  EXPECT_GE(
      disagreements("llama3-style", [](auto& f) { f["added_tokens"] = nlohmann::json::array(); }),
      100);
  EXPECT_GE(disagreements("llama2-style", [](auto& f) { f["model"]["byte_fallback"] = false; }),
            100);
  EXPECT_GE(disagreements("qwen2-style", [](auto& f) { f["normalizer"] = nullptr; }), 10);
  for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
    EXPECT_GE(disagreements("qwen2-style",
                            [&](auto& f) {
                              for (auto& token : f["added_tokens"]) token[flag] = false;
                            }),
              3)
        << flag;
  }
  EXPECT_GE(disagreements("metaspace-style",
                          [](auto& f) { f["pre_tokenizer"]["prepend_scheme"] = "always"; }),
            10);
}

}  // namespace
}  // namespace offgen
