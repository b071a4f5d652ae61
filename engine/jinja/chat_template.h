// A Hugging Face chat template (tokenizer_config.json's chat_template, chat_template.jinja, or a
// GGUF file's tokenizer.chat_template), rendered exactly as transformers' apply_chat_template
// renders it with Python's jinja2: an ImmutableSandboxedEnvironment with trim_blocks,
// lstrip_blocks and the loopcontrols extension, transformers' tojson (json.dumps with
// ensure_ascii=False) and its globals raise_exception(message) and strftime_now(format).
//
// offgen interprets the part of Jinja that chat templates use (README in engine/jinja/). A
// template that needs more is refused with an offgen::Error naming the construct and its line,
// when it is loaded where the construct is a tag, filter or test, or when it is rendered where it
// is an operation on values (a str method offgen lacks, an integer past 64 bits, ...): never a
// render that could differ from Python's.
//
// A ChatTemplate is immutable after construction; render() may be called from several threads.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace offgen::jinja {

struct ParsedTemplate;

class ChatTemplate {
 public:
  // Parses `source`; `name` (e.g. the file it came from) is used in error messages. Throws
  // offgen::Error "chat template <name>, line <n>: <what>" for a syntax error or an unsupported
  // construct.
  ChatTemplate(std::string source, std::string name);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // Renders with `context`, a JSON object of the template's variables (messages,
  // add_generation_prompt, bos_token, eos_token, tools, ...). Throws offgen::Error when the
  // template calls raise_exception ("chat template <name>, line <n>: the template raised an
  // error: <its message>") or does something offgen does not support.
  std::string render(const nlohmann::ordered_json& context) const;

  // As render(context), with strftime_now() formatting `now` (in local time) instead of the
  // current time: for reproducible output.
  std::string render(const nlohmann::ordered_json& context,
                     std::chrono::system_clock::time_point now) const;

  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::unique_ptr<const ParsedTemplate> parsed_;
};

}  // namespace offgen::jinja
