// Splits a template into tokens the way jinja2's lexer does with transformers' settings
// (trim_blocks and lstrip_blocks on, keep_trailing_newline off). All whitespace control happens
// here, so the data tokens hold exactly the text jinja2 would output:
//   - `{%-` / `{{-` / `{#-` strip all whitespace before the tag, `-%}` / `-}}` / `-#}` after it;
//   - trim_blocks drops the first newline after `%}` and `#}` (not after `}}`); `+%}` keeps it;
//   - lstrip_blocks drops spaces and tabs between the start of a line and `{%` or `{#` (not
//     `{{`); `{%+` keeps them;
//   - one trailing newline of the template is dropped; \r\n and \r become \n.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace offgen::jinja {

enum class TokenType {
  kData,           // template text to output
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,  // text holds the unescaped value
  kInteger,
  kFloat,
  kOperator,  // text holds the operator: + - * / // % ** ~ [ ] ( ) { } == != < <= > >= = . : | , ;
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string text;
  std::int64_t integer = 0;
  double floating = 0.0;
  int line = 1;
};

// The tokens of `source`, ending with kEof. Throws offgen::Error naming `name` and the line for
// a syntax error (an unclosed tag, comment or string, a character Jinja does not know).
std::vector<Token> tokenize(std::string_view source, std::string_view name);

}  // namespace offgen::jinja
