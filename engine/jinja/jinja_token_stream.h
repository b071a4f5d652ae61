// The cursor over a template's tokens that the statement and expression parsers share: lookahead,
// expectations, errors naming the template and line, and a bound on the parsers' recursion.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/core/error.h"
#include "engine/jinja/jinja_lexer.h"

namespace offgen::jinja {

class TokenStream {
 public:
  TokenStream(std::vector<Token> tokens, std::string_view name)
      : tokens_(std::move(tokens)), name_(name) {}

  // Throws offgen::Error "chat template <name>, line <line>: <message>".
  template <typename... Args>
  [[noreturn]] void fail(int line, fmt::format_string<Args...> format, Args&&... args) const {
    throw Error(fmt::format("chat template {}, line {}: {}", name_, line,
                            fmt::format(format, std::forward<Args>(args)...)));
  }

  const Token& cur() const { return tokens_[pos_]; }
  const Token& look() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  // The current token; moves past it (never past the end-of-template token).
  const Token& next();

  static bool is_op(const Token& t, std::string_view op) {
    return t.type == TokenType::kOperator && t.text == op;
  }
  static bool is_name(const Token& t, std::string_view name) {
    return t.type == TokenType::kName && t.text == name;
  }
  bool at_op(std::string_view op) const { return is_op(cur(), op); }
  bool at_name(std::string_view name) const { return is_name(cur(), name); }
  bool skip_op(std::string_view op);
  bool skip_name(std::string_view name);
  void expect_op(std::string_view op);
  void expect_type(TokenType type, std::string_view what);
  const Token& expect_name();

  // How a token reads in a message: "'x'", "end of template", ...
  static std::string describe(const Token& t);

  // Bounds the recursion of the descent: a template nested deeper than any real one is refused
  // rather than allowed to exhaust the stack.
  class DepthGuard {
   public:
    explicit DepthGuard(TokenStream& stream);
    ~DepthGuard() { --stream_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    TokenStream& stream_;
  };

 private:
  static constexpr int kMaxDepth = 256;

  std::vector<Token> tokens_;
  std::string_view name_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace offgen::jinja
