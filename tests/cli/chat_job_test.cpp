// Chat requests (/v1/chat/completions) through `offgen generate`: the messages rendered by a chat
// template into exactly the prompt a completions line with that text runs, answered as chat
// completion objects; several choices (n) and a list of prompts in one record; a model without a
// template answers each chat line with an error naming where it looked, while its completion
// lines still run; --input - and --output - (standard input and output).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/cli/chat_prompt.h"
#include "engine/cli/commands.h"
#include "tests/cli/offgen_process.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

using Json = nlohmann::ordered_json;

std::vector<Json> records_of(const std::filesystem::path& path) {
  std::vector<Json> out;
  std::istringstream in(test::read_file(path));
  for (std::string line; std::getline(in, line);) out.push_back(Json::parse(line));
  return out;
}

const std::filesystem::path kTiny = test::data_dir() / "golden" / "tiny-preln";
// Short, for the tiny model's 64 positions.
constexpr const char* kShortTemplate =
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}";

cli::GenerateOptions tiny_options(const test::TempDir& dir) {
  cli::GenerateOptions options;
  options.common.model = kTiny.string();
  options.common.device = "cpu";
  options.common.batch_size = 4;
  options.temperature = 0.0f;
  options.max_tokens = 4;
  options.input = (dir.path() / "in.jsonl").string();
  options.output = (dir.path() / "out.jsonl").string();
  return options;
}

// A chat line runs exactly the prompt its rendered text gives a completions line: same tokens,
// and the record is a chat completion object.
TEST(ChatJob, AChatLineRunsItsRenderedPromptAndAnswersAsAChatCompletion) {
  const test::TempDir dir;
  const Json messages = Json::parse(
      R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}])");
  const cli::ChatPrompt chat =
      cli::ChatPrompt::from_source(kShortTemplate, "short", "</s>", "</s>");
  const std::string rendered = chat.render(Json{{"messages", messages}});
  EXPECT_EQ(rendered, "system: Be brief.\nuser: Hello there\nassistant:");
  test::write_file(dir.path() / "chat.jinja", kShortTemplate);

  Json chat_line = {{"custom_id", "chat"},
                    {"method", "POST"},
                    {"url", "/v1/chat/completions"},
                    {"body", {{"messages", messages}, {"max_completion_tokens", 5}}}};
  Json text_line = {
      {"custom_id", "text"},
      {"url", "/v1/completions"},
      {"body", {{"prompt", rendered}, {"max_tokens", 5}, {"add_special_tokens", false}}}};
  test::write_file(dir.path() / "in.jsonl", chat_line.dump() + "\n" + text_line.dump() + "\n");
  cli::GenerateOptions options = tiny_options(dir);
  options.chat_template = (dir.path() / "chat.jinja").string();
  const int code = cli::run_generate(options);
  const std::vector<Json> out = records_of(options.output);
  ASSERT_EQ(code, 0) << test::read_file(options.output);
  ASSERT_EQ(out.size(), 2u);
  const Json& chat_body = out[0]["response"]["body"];
  const Json& text_body = out[1]["response"]["body"];
  EXPECT_EQ(chat_body["object"], "chat.completion");
  EXPECT_EQ(chat_body["id"], "chatcmpl-0");
  const Json& message = chat_body["choices"][0]["message"];
  EXPECT_EQ(message["role"], "assistant");
  EXPECT_EQ(message["content"], text_body["choices"][0]["text"]);
  EXPECT_EQ(chat_body["choices"][0]["token_ids"], text_body["choices"][0]["token_ids"]);
  EXPECT_EQ(chat_body["choices"][0]["token_ids"].size(), 5u);  // max_completion_tokens
  EXPECT_EQ(chat_body["usage"], text_body["usage"]);
}

TEST(ChatJob, AModelWithoutATemplateRefusesChatLinesAndRunsTheRest) {
  const test::TempDir dir;
  test::write_file(
      dir.path() / "in.jsonl",
      R"({"custom_id": "a", "url": "/v1/chat/completions", "body": {"messages": [{"role": "user", "content": "hi"}]}})"
      "\n"
      R"({"custom_id": "b", "url": "/v1/completions", "body": {"prompt": "hi"}})"
      "\n");
  const cli::GenerateOptions options = tiny_options(dir);
  EXPECT_EQ(cli::run_generate(options), 2);  // one line failed
  const std::vector<Json> out = records_of(options.output);
  ASSERT_EQ(out.size(), 2u);
  const std::string message = out[0]["error"]["message"];
  EXPECT_NE(message.find("the model has no chat template"), std::string::npos) << message;
  EXPECT_NE(message.find("--chat-template FILE"), std::string::npos) << message;
  EXPECT_TRUE(out[1]["error"].is_null());
}

TEST(ChatJob, ATemplateThatRaisesAnswersThatLineWithItsMessage) {
  const test::TempDir dir;
  test::write_file(
      dir.path() / "in.jsonl",
      R"({"custom_id": "a", "url": "/v1/chat/completions", "body": {"messages": [{"role": "assistant", "content": "first"}]}})"
      "\n"
      R"({"custom_id": "b", "url": "/v1/chat/completions", "body": {"messages": [{"role": "user", "content": "hi"}]}})"
      "\n");
  cli::GenerateOptions options = tiny_options(dir);
  options.chat_template = (test::data_dir() / "chat_templates" / "llama2.jinja").string();
  EXPECT_EQ(cli::run_generate(options), 2);
  const std::vector<Json> out = records_of(options.output);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_NE(out[0]["error"]["message"].get<std::string>().find("raised"), std::string::npos)
      << out[0];
  EXPECT_TRUE(out[1]["error"].is_null()) << out[1];
}

// Several choices and several prompts in one line: one record, OpenAI's choice order, each
// choice the same as a line of its own with that prompt and seed.
TEST(ChatJob, ChoicesOfOneLineEqualTheirOwnLines) {
  const test::TempDir dir;
  test::write_file(
      dir.path() / "in.jsonl",
      R"({"custom_id": "many", "body": {"prompt": ["One two", "Three"], "n": 2, "temperature": 1, "seed": 3}})"
      "\n"
      R"({"custom_id": "first", "body": {"prompt": "One two", "temperature": 1, "seed": 3}})"
      "\n"
      R"({"custom_id": "second", "body": {"prompt": "Three", "temperature": 1, "seed": 3}})"
      "\n");
  cli::GenerateOptions options = tiny_options(dir);
  options.max_tokens = 6;
  ASSERT_EQ(cli::run_generate(options), 0);
  const std::vector<Json> out = records_of(options.output);
  ASSERT_EQ(out.size(), 3u);
  const Json& choices = out[0]["response"]["body"]["choices"];
  ASSERT_EQ(choices.size(), 4u);
  EXPECT_EQ(choices[0]["token_ids"], out[1]["response"]["body"]["choices"][0]["token_ids"]);
  EXPECT_EQ(choices[2]["token_ids"], out[2]["response"]["body"]["choices"][0]["token_ids"]);
  EXPECT_NE(choices[0]["token_ids"], choices[1]["token_ids"]);  // sample 1: its own stream
  EXPECT_EQ(out[0]["response"]["body"]["usage"]["completion_tokens"], 4 * 6);
}

// --input - reads standard input; --output - writes the records to standard output in input
// order, and nothing else goes there.
TEST(ChatJob, StandardInputAndOutput) {
  const test::TempDir dir;
  std::string input;
  for (int i = 0; i < 5; ++i) {
    input +=
        Json{{"prompt", "Line " + std::to_string(i)}, {"max_tokens", 1 + i % 3}, {"temperature", 0}}
            .dump() +
        "\n";
  }
  test::write_file(dir.path() / "in.jsonl", input);
  cli::GenerateOptions options = tiny_options(dir);
  ASSERT_EQ(cli::run_generate(options), 0);

  // The shell gives the binary its standard input and keeps its two outputs apart.
  const auto shell = [&](const std::string& flags, const std::string& name) {
    const std::string command = fmt::format(
        "'{}' generate --model '{}' --device cpu --max-tokens 4 --temperature 0 {} < '{}' > '{}' "
        "2> '{}'",
        OFFGEN_CLI_BINARY, kTiny.string(), flags, (dir.path() / "in.jsonl").string(),
        (dir.path() / (name + ".out")).string(), (dir.path() / (name + ".err")).string());
    return test::run_program({"/bin/sh", "-c", command}, dir.path() / (name + ".log")).code;
  };
  ASSERT_EQ(shell("--input - --output -", "piped"), 0);
  EXPECT_EQ(test::read_file(dir.path() / "piped.out"), test::read_file(options.output));
  EXPECT_NE(test::read_file(dir.path() / "piped.err").find("-> standard output"),
            std::string::npos);

  EXPECT_NE(shell("--input - --output - --resume", "resume"), 0);
  EXPECT_NE(test::read_file(dir.path() / "resume.err").find("--resume needs an --output file"),
            std::string::npos);
  EXPECT_EQ(test::read_file(dir.path() / "resume.out"), "");
}

// A run that fails before its first record (here: the model is not there) leaves no empty
// output file behind.
TEST(ChatJob, ARunThatFailsBeforeAnyRecordLeavesNoOutputFile) {
  const test::TempDir dir;
  test::write_file(dir.path() / "in.jsonl", R"({"prompt_token_ids": [2, 5]})"
                                            "\n");
  cli::GenerateOptions options = tiny_options(dir);
  options.common.model = (dir.path() / "missing-model").string();
  EXPECT_THROW(cli::run_generate(options), Error);
  EXPECT_FALSE(std::filesystem::exists(options.output));
}

}  // namespace
}  // namespace offgen
