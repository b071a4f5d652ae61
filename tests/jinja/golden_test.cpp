// The chat templates of tests/data/chat_templates/ rendered against Python's jinja2 with
// transformers' environment (tools/make_chat_template_goldens.py): every case must come out
// byte for byte, and the cases where the template calls raise_exception must fail with its
// message. Also SmolLM2's real template against transformers' own apply_chat_template output.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/jinja/chat_template.h"
#include "tests/support/test_support.h"

namespace offgen::jinja {
namespace {

using Json = nlohmann::ordered_json;

const std::filesystem::path kTemplates = offgen::test::data_dir() / "chat_templates";

TEST(ChatTemplateGolden, EveryTemplateAndScenarioMatchesJinja2) {
  const Json goldens = Json::parse(offgen::test::read_file(kTemplates / "goldens.json"));
  const auto now = std::chrono::system_clock::from_time_t(goldens.at("now").get<std::time_t>());
  std::map<std::string, ChatTemplate> templates;
  std::map<std::string, int> per_template;
  int errors = 0;
  for (const Json& c : goldens.at("cases")) {
    const auto name = c.at("template").get<std::string>();
    SCOPED_TRACE(name + " / " + c.at("scenario").get<std::string>());
    auto it = templates.find(name);
    if (it == templates.end()) {
      it = templates.emplace(name, ChatTemplate(offgen::test::read_file(kTemplates / name), name))
               .first;
    }
    ++per_template[name];
    if (c.contains("expected")) {
      EXPECT_EQ(it->second.render(c.at("context"), now), c.at("expected").get<std::string>());
    } else {
      ++errors;
      const std::string error =
          offgen::test::error_of([&] { it->second.render(c.at("context"), now); });
      EXPECT_NE(error, "");
      EXPECT_NE(error.find("the template raised an error: " + c.at("error").get<std::string>()),
                std::string::npos)
          << error;
      EXPECT_NE(error.find("chat template " + name + ", line "), std::string::npos) << error;
    }
  }
  // Every template in the folder is covered, most scenarios render, some raise.
  EXPECT_EQ(per_template.size(), 11u);
  for (const auto& [name, count] : per_template) EXPECT_GE(count, 10) << name;
  EXPECT_GE(goldens.at("cases").size(), 120u);
  EXPECT_GE(errors, 15);
}

// SmolLM2-135M-Instruct's template as transformers 5 renders it
// (tools/make_smollm2_chat_golden.py). continue_final_message is transformers cutting the rendered
// text, not the template: left out.
TEST(ChatTemplateGolden, SmolLm2MatchesTransformersApplyChatTemplate) {
  const auto path = offgen::test::data_dir() / "golden" / "smollm2-q4_1" / "chat.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is not there";
  const Json golden = Json::parse(offgen::test::read_file(path));
  const ChatTemplate chat(golden.at("template").get<std::string>(), "smollm2");
  int checked = 0;
  for (const Json& c : golden.at("cases")) {
    if (c.value("continue_final_message", false)) continue;
    SCOPED_TRACE(c.at("name").get<std::string>());
    Json context = {{"messages", c.at("messages")},
                    {"add_generation_prompt", c.at("add_generation_prompt")},
                    {"bos_token", golden.at("bos_token")},
                    {"eos_token", golden.at("eos_token")}};
    EXPECT_EQ(chat.render(context), c.at("text").get<std::string>());
    ++checked;
  }
  EXPECT_GE(checked, 5);
}

}  // namespace
}  // namespace offgen::jinja
