// See jinja_token_stream.h.
#include "engine/jinja/jinja_token_stream.h"

namespace offgen::jinja {

const Token& TokenStream::next() {
  const Token& t = tokens_[pos_];
  if (pos_ + 1 < tokens_.size()) ++pos_;
  return t;
}

bool TokenStream::skip_op(std::string_view op) {
  if (!is_op(cur(), op)) return false;
  next();
  return true;
}

bool TokenStream::skip_name(std::string_view name) {
  if (!is_name(cur(), name)) return false;
  next();
  return true;
}

void TokenStream::expect_op(std::string_view op) {
  if (!skip_op(op)) fail(cur().line, "expected '{}', got {}", op, describe(cur()));
}

void TokenStream::expect_type(TokenType type, std::string_view what) {
  if (cur().type != type) fail(cur().line, "expected {}, got {}", what, describe(cur()));
  next();
}

const Token& TokenStream::expect_name() {
  if (cur().type != TokenType::kName) fail(cur().line, "expected a name, got {}", describe(cur()));
  return next();
}

std::string TokenStream::describe(const Token& t) {
  switch (t.type) {
    case TokenType::kData:
      return "template data";
    case TokenType::kVariableBegin:
      return "'{{'";
    case TokenType::kVariableEnd:
      return "end of print statement ('}}')";
    case TokenType::kBlockBegin:
      return "'{%'";
    case TokenType::kBlockEnd:
      return "end of statement block ('%}')";
    case TokenType::kName:
    case TokenType::kOperator:
    case TokenType::kInteger:
    case TokenType::kFloat:
      return fmt::format("'{}'", t.text);
    case TokenType::kString:
      return "a string";
    case TokenType::kEof:
      return "end of template";
  }
  return "token";
}

TokenStream::DepthGuard::DepthGuard(TokenStream& stream) : stream_(stream) {
  if (stream_.depth_ >= kMaxDepth) {
    stream_.fail(stream_.cur().line, "the template nests too deeply");
  }
  ++stream_.depth_;
}

}  // namespace offgen::jinja
