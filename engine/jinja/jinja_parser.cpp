// See jinja_parser.h: the statements (tags) of a template; expressions are
// jinja_expression_parser.h's. Like jinja2's Parser.subparse, text and {{ }} become statements of
// the body, and a block tag parses its body up to one of its end tags.
#include "engine/jinja/jinja_parser.h"

#include <algorithm>
#include <initializer_list>

#include "engine/jinja/jinja_expression_parser.h"
#include "engine/jinja/jinja_lexer.h"
#include "engine/jinja/jinja_token_stream.h"

namespace offgen::jinja {

namespace {

// The first use of a name among `names` in an expression tree, or null.
const Expr* find_name(const Expr* e, std::initializer_list<std::string_view> names) {
  if (e == nullptr) return nullptr;
  if (e->kind == ExprKind::kName && std::find(names.begin(), names.end(), e->name) != names.end()) {
    return e;
  }
  for (const ExprPtr& child : e->children) {
    if (const Expr* found = find_name(child.get(), names)) return found;
  }
  for (const auto& keyword : e->keywords) {
    if (const Expr* found = find_name(keyword.second.get(), names)) return found;
  }
  return nullptr;
}

const Expr* find_name(const Body& body, std::initializer_list<std::string_view> names) {
  for (const StmtPtr& s : body) {
    for (const ExprPtr& e : s->exprs) {
      if (const Expr* found = find_name(e.get(), names)) return found;
    }
    for (const ExprPtr& e : s->defaults) {
      if (const Expr* found = find_name(e.get(), names)) return found;
    }
    for (const Body& inner : s->bodies) {
      if (const Expr* found = find_name(inner, names)) return found;
    }
  }
  return nullptr;
}

StmtPtr make_stmt(StmtKind kind, int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = line;
  return s;
}

class Parser {
 public:
  Parser(std::vector<Token> tokens, std::string_view name)
      : ts_(std::move(tokens), name), expr_(ts_) {}

  Body parse() {
    Body body = subparse({});
    if (ts_.cur().type != TokenType::kEof) {
      ts_.fail(ts_.cur().line, "unexpected {}", TokenStream::describe(ts_.cur()));
    }
    return body;
  }

 private:
  void expect_block_end() { ts_.expect_type(TokenType::kBlockEnd, "the end of the tag ('%}')"); }

  // Statements and text up to a block tag named in `end_tags` (left as the current token), or
  // the end of the template.
  Body subparse(std::initializer_list<std::string_view> end_tags) {
    Body body;
    while (ts_.cur().type != TokenType::kEof) {
      const Token& t = ts_.cur();
      switch (t.type) {
        case TokenType::kData: {
          auto s = make_stmt(StmtKind::kText, t.line);
          s->text = t.text;
          body.push_back(std::move(s));
          ts_.next();
          break;
        }
        case TokenType::kVariableBegin: {
          ts_.next();
          auto s = make_stmt(StmtKind::kPrint, ts_.cur().line);
          s->exprs.push_back(expr_.parse_tuple(true, {}, false));
          ts_.expect_type(TokenType::kVariableEnd, "the end of the expression ('}}')");
          body.push_back(std::move(s));
          break;
        }
        case TokenType::kBlockBegin: {
          ts_.next();
          if (ts_.cur().type == TokenType::kName &&
              std::find(end_tags.begin(), end_tags.end(), ts_.cur().text) != end_tags.end()) {
            return body;
          }
          parse_statement(body);
          expect_block_end();
          break;
        }
        case TokenType::kVariableEnd:
        case TokenType::kBlockEnd:
        case TokenType::kName:
        case TokenType::kString:
        case TokenType::kInteger:
        case TokenType::kFloat:
        case TokenType::kOperator:
        case TokenType::kEof:
          ts_.fail(t.line, "unexpected {}", TokenStream::describe(t));
      }
    }
    return body;
  }

  // The body of a block statement, through the end tag (one of `end_tags`, left current unless
  // `drop_end`).
  Body parse_statements(std::initializer_list<std::string_view> end_tags, int open_line,
                        std::string_view tag, bool drop_end) {
    ts_.skip_op(":");
    expect_block_end();
    Body body = subparse(end_tags);
    if (ts_.cur().type == TokenType::kEof) {
      const auto closing = std::find_if(end_tags.begin(), end_tags.end(),
                                        [](std::string_view t) { return t.rfind("end", 0) == 0; });
      ts_.fail(open_line, "the {{% {} %}} tag opened here is never closed (expected {{% {} %}})",
               tag, closing != end_tags.end() ? *closing : *end_tags.begin());
    }
    if (drop_end) ts_.next();
    return body;
  }

  void parse_statement(Body& body) {
    const TokenStream::DepthGuard guard(ts_);
    const Token& t = ts_.cur();
    if (t.type != TokenType::kName) {
      ts_.fail(t.line, "expected a tag name, got {}", TokenStream::describe(t));
    }
    const std::string tag = t.text;
    const int line = t.line;
    if (tag == "for") return body.push_back(parse_for());
    if (tag == "if") return body.push_back(parse_if());
    if (tag == "set") return body.push_back(parse_set());
    if (tag == "macro") return body.push_back(parse_macro());
    if (tag == "with") return body.push_back(parse_with());
    if (tag == "filter") return body.push_back(parse_filter_block());
    if (tag == "generation") {
      ts_.next();
      auto s = make_stmt(StmtKind::kGeneration, line);
      // jinja2 renders the body as a function: break / continue cannot leave it.
      const int saved_depth = loop_depth_;
      loop_depth_ = 0;
      s->bodies.push_back(parse_statements({"endgeneration"}, line, "generation", true));
      loop_depth_ = saved_depth;
      return body.push_back(std::move(s));
    }
    if (tag == "print") {
      ts_.next();
      bool first = true;
      while (ts_.cur().type != TokenType::kBlockEnd) {
        if (!first) ts_.expect_op(",");
        first = false;
        auto s = make_stmt(StmtKind::kPrint, line);
        s->exprs.push_back(expr_.parse_expression(true));
        body.push_back(std::move(s));
      }
      return;
    }
    if (tag == "break" || tag == "continue") {
      ts_.next();
      if (loop_depth_ == 0) ts_.fail(line, "'{}' outside a for loop", tag);
      return body.push_back(
          make_stmt(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, line));
    }
    static constexpr std::string_view kUnsupported[] = {"call",   "block", "extends",    "include",
                                                        "import", "from",  "autoescape", "raw"};
    if (std::find(std::begin(kUnsupported), std::end(kUnsupported), tag) !=
        std::end(kUnsupported)) {
      ts_.fail(line, "the {{% {} %}} tag is not supported", tag);
    }
    if (tag.rfind("end", 0) == 0 || tag == "else" || tag == "elif") {
      ts_.fail(line, "unexpected {{% {} %}} (no open tag it closes)", tag);
    }
    ts_.fail(line, "unknown tag '{}'", tag);
  }

  StmtPtr parse_for() {
    const int line = ts_.next().line;
    auto s = make_stmt(StmtKind::kFor, line);
    s->exprs.push_back(expr_.parse_assign_target(true, {"in"}, false));
    if (!ts_.skip_name("in")) {
      ts_.fail(ts_.cur().line, "expected 'in', got {}", TokenStream::describe(ts_.cur()));
    }
    s->exprs.push_back(expr_.parse_tuple(false, {"recursive"}, false));
    ExprPtr test;
    if (ts_.skip_name("if")) test = expr_.parse_expression(true);
    s->exprs.push_back(std::move(test));
    if (ts_.at_name("recursive")) ts_.fail(ts_.cur().line, "recursive for loops are not supported");
    ++loop_depth_;
    s->bodies.push_back(parse_statements({"endfor", "else"}, line, "for", false));
    --loop_depth_;
    if (ts_.next().text == "else") {
      s->bodies.push_back(parse_statements({"endfor"}, line, "for", true));
    } else {
      s->bodies.emplace_back();
    }
    return s;
  }

  StmtPtr parse_if() {
    const int line = ts_.next().line;
    auto s = make_stmt(StmtKind::kIf, line);
    while (true) {
      s->exprs.push_back(expr_.parse_tuple(false, {}, false));
      s->bodies.push_back(parse_statements({"elif", "else", "endif"}, line, "if", false));
      const std::string tag = ts_.next().text;
      if (tag == "elif") continue;
      if (tag == "else") s->bodies.push_back(parse_statements({"endif"}, line, "if", true));
      break;
    }
    return s;
  }

  StmtPtr parse_set() {
    const int line = ts_.next().line;
    ExprPtr target = expr_.parse_assign_target(true, {}, true);
    if (ts_.skip_op("=")) {
      auto s = make_stmt(StmtKind::kSet, line);
      s->exprs.push_back(std::move(target));
      s->exprs.push_back(expr_.parse_tuple(true, {}, false));
      return s;
    }
    auto s = make_stmt(StmtKind::kSetBlock, line);
    s->exprs.push_back(std::move(target));
    s->exprs.push_back(ts_.at_op("|") ? expr_.parse_filter(nullptr, false) : nullptr);
    s->bodies.push_back(parse_statements({"endset"}, line, "set", true));
    return s;
  }

  StmtPtr parse_macro() {
    const int line = ts_.next().line;
    auto s = make_stmt(StmtKind::kMacro, line);
    s->name = ts_.expect_name().text;
    ts_.expect_op("(");
    while (!ts_.at_op(")")) {
      if (!s->params.empty()) ts_.expect_op(",");
      s->params.push_back(ts_.expect_name().text);
      if (ts_.skip_op("=")) {
        s->defaults.push_back(expr_.parse_expression(true));
      } else {
        if (std::any_of(s->defaults.begin(), s->defaults.end(),
                        [](const ExprPtr& d) { return d != nullptr; })) {
          ts_.fail(ts_.cur().line, "non-default argument follows default argument");
        }
        s->defaults.push_back(nullptr);
      }
    }
    ts_.expect_op(")");
    const int saved_depth = loop_depth_;
    loop_depth_ = 0;  // a macro body is a function: break cannot leave it
    s->bodies.push_back(parse_statements({"endmacro"}, line, "macro", true));
    loop_depth_ = saved_depth;
    // In a macro these names are jinja2's extra arguments and {% call %} body.
    if (const Expr* special = find_name(s->bodies[0], {"varargs", "kwargs", "caller"})) {
      ts_.fail(special->line, "'{}' in a macro is not supported", special->name);
    }
    return s;
  }

  StmtPtr parse_with() {
    const int line = ts_.next().line;
    auto s = make_stmt(StmtKind::kWith, line);
    while (ts_.cur().type != TokenType::kBlockEnd) {
      if (!s->exprs.empty()) ts_.expect_op(",");
      s->exprs.push_back(expr_.parse_assign_target(true, {}, false));
      ts_.expect_op("=");
      s->exprs.push_back(expr_.parse_expression(true));
    }
    s->bodies.push_back(parse_statements({"endwith"}, line, "with", true));
    return s;
  }

  StmtPtr parse_filter_block() {
    const int line = ts_.next().line;
    auto s = make_stmt(StmtKind::kFilterBlock, line);
    s->exprs.push_back(expr_.parse_filter(nullptr, true));
    s->bodies.push_back(parse_statements({"endfilter"}, line, "filter", true));
    return s;
  }

  TokenStream ts_;
  ExpressionParser expr_;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(std::string_view source, std::string_view name) {
  return Parser(tokenize(source, name), name).parse();
}

}  // namespace offgen::jinja
