// A generate job on a GGUF checkpoint, the path a user takes: a LLaMA-family golden checkpoint
// converted as llama.cpp converts it runs a file of text prompts of mixed lengths, greedy and
// sampled, with stop strings, penalties, logit_bias, min_p and min_tokens, and answers every line
// exactly as the same job on the Hugging Face directory it came from (same weights, same tokenizer,
// read from the file's metadata); a run cut short and finished with --resume gives the same output
// again.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/cli/commands.h"
#include "tests/support/gguf_writer.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

using Json = nlohmann::json;

std::vector<std::string> lines_of(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(GgufJob, GenerateOnTheGgufEqualsTheCheckpointItCameFromAndResumes) {
  const test::TempDir dir;
  const auto checkpoint = test::data_dir() / "golden" / "tiny-llama-gqa";
  const auto gguf = dir.path() / "tiny-llama-gqa.gguf";
  test::convert_gguf_from_checkpoint(checkpoint, gguf, test::GgufStorage::f16);

  std::string text;
  for (int i = 0; i < 24; ++i) {
    std::string prompt = "Request " + std::to_string(i) + ":";
    for (int w = 0; w < (i * 7) % 11; ++w) prompt += " word" + std::to_string(w);
    Json line = {{"prompt", prompt}, {"max_tokens", 2 + (i * 5) % 13}, {"seed", 100 + i}};
    line["temperature"] = i % 3 == 0 ? 0.0 : 0.9;
    if (i % 4 == 1) line["top_p"] = 0.8;
    if (i % 5 == 2) line["stop"] = Json::array({"a", " t"});
    if (i % 6 == 4) {  // vLLM's shaping, on the device
      line["repetition_penalty"] = 1.3;
      line["frequency_penalty"] = 0.5;
      line["presence_penalty"] = 0.4;
      line["logit_bias"] = {{"5", 3.0}};
      line["min_p"] = 0.05;
    }
    if (i == 7) line["min_tokens"] = 3;  // with stop strings: they count after 3 tokens
    text += line.dump() + "\n";
  }
  const auto input = dir.path() / "in.jsonl";
  test::write_file(input, text);

  const auto run = [&](const std::filesystem::path& model, const std::string& output, bool resume) {
    cli::GenerateOptions options;
    options.common.model = model.string();
    options.common.device = "cpu";
    options.common.batch_size = 5;
    options.input = input.string();
    options.output = (dir.path() / output).string();
    options.resume = resume;
    EXPECT_EQ(cli::run_generate(options), 0);
    return lines_of(options.output);
  };
  const std::vector<std::string> from_checkpoint = run(checkpoint, "hf.jsonl", false);
  const std::vector<std::string> from_gguf = run(gguf, "gguf.jsonl", false);
  ASSERT_EQ(from_checkpoint.size(), 24u);
  EXPECT_EQ(from_gguf, from_checkpoint);
  int stopped = 0;
  for (const std::string& line : from_gguf) stopped += Json::parse(line)["finish_reason"] == "stop";
  EXPECT_GT(stopped, 0);  // the stop strings were met

  // Keep the first 9 answers, as a run stopped midway leaves them, and resume.
  std::vector<std::string> kept(from_gguf.begin(), from_gguf.begin() + 9);
  std::string partial;
  for (const std::string& line : kept) partial += line + "\n";
  test::write_file(dir.path() / "resumed.jsonl", partial);
  EXPECT_EQ(run(gguf, "resumed.jsonl", true), from_gguf);
}

}  // namespace
}  // namespace offgen
