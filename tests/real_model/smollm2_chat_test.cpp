// Chat prompts of the real model, SmolLM2-135M-Instruct, against transformers' apply_chat_template
// on the same tokenizer (tests/data/golden/smollm2-q4_1/chat.json, made by
// tools/make_smollm2_chat_golden.py): the template offgen finds in the GGUF file, the text it
// renders for each conversation (a default system turn, multi-turn, unicode, a literal special
// token in user text, continue_final_message) and the token ids of that text, which transformers
// tokenizes with the special tokens recognised in it. Then a chat line through `offgen generate`
// greedy: the same tokens as a completions line with transformers' ids.
// The rendering check needs no model; the rest skips when it has not been fetched.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/cli/chat_prompt.h"
#include "engine/cli/commands.h"
#include "engine/model/gguf_file.h"
#include "engine/model/gguf_tokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/support/real_model.h"
#include "tests/support/test_support.h"

namespace offgen {
namespace {

using Json = nlohmann::ordered_json;

Json golden() {
  return Json::parse(test::read_file(test::data_dir() / "golden" / "smollm2-q4_1" / "chat.json"));
}

Json body_of(const Json& c) {
  Json body = {{"messages", c["messages"]}, {"add_generation_prompt", c["add_generation_prompt"]}};
  if (c.contains("continue_final_message")) {
    body["continue_final_message"] = c["continue_final_message"];
  }
  return body;
}

TEST(Smollm2Chat, TheTemplateRendersEachConversationAsTransformersDoes) {
  const Json g = golden();
  const cli::ChatPrompt chat =
      cli::ChatPrompt::from_source(g["template"], "smollm2", g["bos_token"], g["eos_token"]);
  ASSERT_GE(g["cases"].size(), 8u);
  for (const Json& c : g["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    EXPECT_EQ(chat.render(body_of(c)), c["text"].get<std::string>());
  }
}

TEST(Smollm2Chat, TheGgufTemplateAndTokenizerGiveTransformersIds) {
  const auto gguf = test::smollm2_gguf();
  if (!gguf) GTEST_SKIP() << test::kNoSmollm2;
  const Json g = golden();
  EXPECT_EQ(gguf_chat_template(*GgufFile::open(*gguf)).value_or(""),
            g["template"].get<std::string>());
  const cli::ChatPrompt chat = cli::ChatPrompt::find(*gguf, "", g["bos_token"], g["eos_token"]);
  ASSERT_TRUE(chat.has_template());
  const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::load(*gguf);
  for (const Json& c : g["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::string text = chat.render(body_of(c));
    EXPECT_EQ(text, c["text"].get<std::string>());
    EXPECT_EQ(tokenizer->encode(text), c["ids"].get<std::vector<std::int32_t>>());
  }
}

// A chat line runs transformers' prompt ids: its greedy answer equals a completions line given
// those ids.
TEST(Smollm2Chat, AChatLineRunsTransformersPromptIds) {
  const auto gguf = test::smollm2_gguf();
  if (!gguf) GTEST_SKIP() << test::kNoSmollm2;
  const Json g = golden();
  const Json& c = g["cases"][1];  // system and user
  const test::TempDir dir;
  Json chat_line = {{"custom_id", "chat"}, {"url", "/v1/chat/completions"}, {"body", body_of(c)}};
  chat_line["body"]["max_tokens"] = 12;
  Json ids_line = {{"custom_id", "ids"},
                   {"url", "/v1/completions"},
                   {"body", {{"prompt", c["ids"]}, {"max_tokens", 12}}}};
  test::write_file(dir.path() / "in.jsonl", chat_line.dump() + "\n" + ids_line.dump() + "\n");
  cli::GenerateOptions options;
  options.common.model = gguf->string();
  options.common.device = "cpu";
  options.common.batch_size = 2;
  options.temperature = 0.0f;
  options.input = (dir.path() / "in.jsonl").string();
  options.output = (dir.path() / "out.jsonl").string();
  ASSERT_EQ(cli::run_generate(options), 0);
  std::istringstream out(test::read_file(options.output));
  std::string chat_text, ids_text;
  std::getline(out, chat_text);
  std::getline(out, ids_text);
  const Json chat = Json::parse(chat_text)["response"]["body"];
  const Json ids = Json::parse(ids_text)["response"]["body"];
  EXPECT_EQ(chat["usage"]["prompt_tokens"], c["ids"].size());
  EXPECT_EQ(chat["choices"][0]["token_ids"], ids["choices"][0]["token_ids"]);
  EXPECT_EQ(chat["choices"][0]["message"]["content"], ids["choices"][0]["text"]);
  std::printf("SmolLM2 answers: %s\n",
              chat["choices"][0]["message"]["content"].get<std::string>().c_str());
}

}  // namespace
}  // namespace offgen
