// A chat request's prompt: the OpenAI `messages` of a /v1/chat/completions body rendered by the
// checkpoint's chat template, as transformers' apply_chat_template renders it (engine/jinja), then
// tokenized without special tokens added (the template writes BOS itself where the model wants
// one), as vLLM's chat endpoint does.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "engine/jinja/chat_template.h"
#include "engine/model/model_config.h"
#include "engine/tokenizer/tokenizer.h"

namespace offgen::cli {

class ChatPrompt {
 public:
  // The model's template, from the first of: `override_file` (--chat-template FILE);
  // tokenizer_config.json's chat_template (a string, or the entry named "default" of a list) or
  // chat_template.jinja in `dir` (a checkpoint folder); the tokenizer.chat_template of the GGUF
  // file `dir` names. A model without one gets a ChatPrompt that refuses every chat line, saying
  // where offgen looked (a line may still bring its own "chat_template"). bos_token / eos_token:
  // the special tokens' text the template may write. Throws offgen::Error for an unreadable
  // file or a template the renderer cannot parse (naming the construct and line).
  static ChatPrompt find(const std::filesystem::path& dir, const std::string& override_file,
                         std::string bos_token, std::string eos_token);

  // find() with bos_token / eos_token as the model's tokenizer writes its BOS and EOS ids (empty
  // where it has no such id).
  static ChatPrompt for_model(const std::filesystem::path& dir, const std::string& override_file,
                              const ModelConfig& config, const Tokenizer& tokenizer);

  // A template given as text; errors name `name`.
  static ChatPrompt from_source(const std::string& source, const std::string& name,
                                std::string bos_token, std::string eos_token);

  bool has_template() const { return template_ != nullptr; }
  // The model's template text (empty without one): what lm-evaluation-harness logs and hashes.
  const std::string& source() const { return source_; }

  // The prompt text of a chat body: its messages (OpenAI's shape; a content given as a list of
  // text parts is joined with newlines, as vLLM does for text models), add_generation_prompt
  // (default true), continue_final_message (default false) and chat_template_kwargs (extra names
  // the template sees). A body's own "chat_template" (a template string, vLLM's extension)
  // replaces the model's. Throws offgen::Error with the problem: malformed messages, both
  // generation flags, no template, a template that raises (its message), an unsupported
  // construct.
  std::string render(const nlohmann::ordered_json& body) const;

 private:
  std::shared_ptr<const jinja::ChatTemplate> template_;  // null: the model has none
  std::string source_;
  std::string why_none_;
  std::string bos_token_;
  std::string eos_token_;
};

}  // namespace offgen::cli
