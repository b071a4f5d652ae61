#include "engine/cli/chat_prompt.h"

#include <fmt/format.h>

#include <utility>

#include "engine/core/error.h"
#include "engine/model/gguf_checkpoint.h"
#include "engine/model/gguf_file.h"
#include "engine/model/gguf_tokenizer.h"
#include "engine/tokenizer/text_file.h"

namespace offgen::cli {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

struct Source {
  std::string text;
  std::string name;
};

// tokenizer_config.json's chat_template: a string, or a list of {name, template} of which
// transformers uses "default".
std::optional<Source> from_tokenizer_config(const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return std::nullopt;
  const Json config = Json::parse(read_text_file(file, "tokenizer config"), nullptr, false);
  OFFGEN_CHECK(!config.is_discarded() && config.is_object(), "{} is not a JSON object",
               file.string());
  if (!config.contains("chat_template") || config["chat_template"].is_null()) return std::nullopt;
  const Json& value = config["chat_template"];
  if (value.is_string()) return Source{value.get<std::string>(), file.string()};
  OFFGEN_CHECK(value.is_array(), "{}: chat_template must be a string or a list of templates",
               file.string());
  for (const Json& entry : value) {
    if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
        entry["template"].is_string()) {
      return Source{entry["template"].get<std::string>(), file.string() + " (default)"};
    }
  }
  fail("{}: chat_template lists templates but none named \"default\"", file.string());
}

std::optional<Source> model_template(const fs::path& dir, std::string* looked) {
  std::error_code ec;
  if (dir.empty()) {
    *looked = "the model has no folder to look in";
    return std::nullopt;
  }
  if (const std::optional<fs::path> gguf = find_gguf_file(dir)) {
    *looked = fmt::format("{} has no tokenizer.chat_template", gguf->string());
    const std::optional<std::string> text = gguf_chat_template(*GgufFile::open(*gguf));
    if (text) return Source{*text, gguf->string()};
    return std::nullopt;
  }
  *looked = fmt::format(
      "{} has no chat_template in tokenizer_config.json and no "
      "chat_template.jinja",
      dir.string());
  // transformers 4.43+ saves the template in its own file and prefers it.
  const fs::path jinja_file = dir / "chat_template.jinja";
  if (fs::is_regular_file(jinja_file, ec)) {
    return Source{read_text_file(jinja_file, "chat template"), jinja_file.string()};
  }
  return from_tokenizer_config(dir / "tokenizer_config.json");
}

// A message's content: a string, null (an assistant turn with only tool calls), or OpenAI's list
// of parts, of which a text model reads the text ones joined by newlines (vLLM's "string"
// content format).
Json content_of(const Json& message, std::size_t index) {
  if (!message.contains("content")) return nullptr;
  const Json& content = message["content"];
  if (content.is_string() || content.is_null()) return content;
  OFFGEN_CHECK(content.is_array(),
               "'messages'[{}].content must be a string or a list of content parts", index);
  std::string text;
  for (const Json& part : content) {
    OFFGEN_CHECK(part.is_object() && part.contains("type") && part["type"].is_string(),
                 "'messages'[{}].content: each part must be an object with a 'type'", index);
    const std::string type = part["type"].get<std::string>();
    OFFGEN_CHECK(type == "text",
                 "'messages'[{}].content: a '{}' part is not supported (offgen runs text models)",
                 index, type);
    OFFGEN_CHECK(part.contains("text") && part["text"].is_string(),
                 "'messages'[{}].content: a text part must have a string 'text'", index);
    if (!text.empty()) text += "\n";
    text += part["text"].get<std::string>();
  }
  return text;
}

Json messages_of(const Json& body) {
  OFFGEN_CHECK(body.contains("messages"), "'body' has no 'messages'");
  const Json& messages = body["messages"];
  OFFGEN_CHECK(messages.is_array() && !messages.empty(),
               "'messages' must be a non-empty list of messages");
  Json out = Json::array();
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    OFFGEN_CHECK(m.is_object(), "'messages'[{}] must be an object", i);
    OFFGEN_CHECK(m.contains("role") && m["role"].is_string(),
                 "'messages'[{}] must have a string 'role'", i);
    Json message = m;
    message["content"] = content_of(m, i);
    out.push_back(std::move(message));
  }
  return out;
}

bool flag(const Json& body, const char* key, bool fallback) {
  if (!body.contains(key) || body[key].is_null()) return fallback;
  OFFGEN_CHECK(body[key].is_boolean(), "'{}' must be true or false", key);
  return body[key].get<bool>();
}

// transformers' continue_final_message: the rendered chat ends right after the final message's
// text, so that the model continues it rather than starting a new turn.
std::string cut_after_final_message(const std::string& rendered, const Json& messages) {
  const Json& last = messages.back()["content"];
  OFFGEN_CHECK(last.is_string(), "continue_final_message needs a final message with text");
  const std::string& text = last.get_ref<const std::string&>();
  const auto is_space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  };
  std::size_t first = 0, end = text.size();
  while (first < end && is_space(text[first])) ++first;
  while (end > first && is_space(text[end - 1])) --end;
  const std::string stripped = text.substr(first, end - first);
  const std::size_t at = rendered.rfind(stripped);
  OFFGEN_CHECK(at != std::string::npos,
               "continue_final_message: the template does not write the final message's text "
               "as given");
  const std::string lstripped = text.substr(first);
  if (rendered.compare(at, lstripped.size(), lstripped) == 0) {
    return rendered.substr(0, at + lstripped.size());
  }
  return rendered.substr(0, at + stripped.size());
}

}  // namespace

ChatPrompt ChatPrompt::find(const fs::path& dir, const std::string& override_file,
                            std::string bos_token, std::string eos_token) {
  std::string why_none;
  const std::optional<Source> source =
      override_file.empty()
          ? model_template(dir, &why_none)
          : Source{read_text_file(override_file, "--chat-template"), override_file};
  if (source)
    return from_source(source->text, source->name, std::move(bos_token), std::move(eos_token));
  ChatPrompt prompt;
  prompt.why_none_ = std::move(why_none);
  prompt.bos_token_ = std::move(bos_token);
  prompt.eos_token_ = std::move(eos_token);
  return prompt;
}

ChatPrompt ChatPrompt::for_model(const fs::path& dir, const std::string& override_file,
                                 const ModelConfig& config, const Tokenizer& tokenizer) {
  const auto text = [&](std::int32_t id) {
    return tokenizer.has_id(id) ? tokenizer.decode(std::vector<std::int32_t>{id}) : std::string();
  };
  return find(dir, override_file, text(config.bos_token_id), text(config.eos_token_id));
}

ChatPrompt ChatPrompt::from_source(const std::string& source, const std::string& name,
                                   std::string bos_token, std::string eos_token) {
  ChatPrompt prompt;
  prompt.bos_token_ = std::move(bos_token);
  prompt.eos_token_ = std::move(eos_token);
  prompt.template_ = std::make_shared<const jinja::ChatTemplate>(source, name);
  prompt.source_ = source;
  return prompt;
}

std::string ChatPrompt::render(const Json& body) const {
  std::shared_ptr<const jinja::ChatTemplate> tmpl = template_;
  if (body.contains("chat_template") && !body["chat_template"].is_null()) {
    OFFGEN_CHECK(body["chat_template"].is_string(), "'chat_template' must be a string");
    tmpl = std::make_shared<const jinja::ChatTemplate>(body["chat_template"].get<std::string>(),
                                                       "the line's chat_template");
  }
  OFFGEN_CHECK(tmpl != nullptr,
               "the model has no chat template ({}): pass --chat-template FILE, or give the "
               "line a 'chat_template'",
               why_none_);
  const Json messages = messages_of(body);
  const bool continue_final = flag(body, "continue_final_message", false);
  // vLLM's default; with continue_final_message the caller must turn it off, as in transformers.
  const bool generation_prompt = flag(body, "add_generation_prompt", !continue_final);
  OFFGEN_CHECK(!(continue_final && generation_prompt),
               "'continue_final_message' and 'add_generation_prompt' cannot both be true");
  // As transformers builds it: the special tokens, then the caller's kwargs (which may replace
  // them), then messages and the generation flag.
  Json context = {{"bos_token", bos_token_}, {"eos_token", eos_token_}};
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    OFFGEN_CHECK(body["chat_template_kwargs"].is_object(),
                 "'chat_template_kwargs' must be an object");
    context.update(body["chat_template_kwargs"]);
  }
  context["messages"] = messages;
  context["add_generation_prompt"] = generation_prompt;
  const std::string rendered = tmpl->render(context);
  return continue_final ? cut_after_final_message(rendered, messages) : rendered;
}

}  // namespace offgen::cli
