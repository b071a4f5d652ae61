// See jinja_expression_parser.h.
#include "engine/jinja/jinja_expression_parser.h"

#include <algorithm>
#include <optional>

#include "engine/jinja/jinja_filters.h"
#include "engine/jinja/jinja_tests.h"

namespace offgen::jinja {

namespace {

ExprPtr binary_node(ExprKind kind, ExprPtr left, ExprPtr right, int line) {
  auto e = make_expr(kind, line);
  e->children.push_back(std::move(left));
  e->children.push_back(std::move(right));
  return e;
}

ExprPtr binary_op(BinaryOp op, ExprPtr left, ExprPtr right, int line) {
  auto e = binary_node(ExprKind::kBinary, std::move(left), std::move(right), line);
  e->op = op;
  return e;
}

}  // namespace

ExprPtr make_expr(ExprKind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

// A name, a namespace attribute (ns.x, with_namespace) or a tuple of those.
ExprPtr ExpressionParser::parse_assign_target(bool with_tuple,
                                              std::initializer_list<std::string_view> extra_end,
                                              bool with_namespace) {
  const int line = ts_.cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) ts_.expect_op(",");
    if (is_tuple_end(extra_end)) break;
    items.push_back(parse_target_primary(with_namespace));
    if (with_tuple && ts_.at_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (items.empty()) {
      ts_.fail(line, "expected an assignment target, got {}", TokenStream::describe(ts_.cur()));
    }
    return std::move(items.front());
  }
  auto t = make_expr(ExprKind::kTuple, line);
  t->children = std::move(items);
  return t;
}

ExprPtr ExpressionParser::parse_target_primary(bool with_namespace) {
  const Token& t = ts_.cur();
  if (t.type == TokenType::kName) {
    ts_.next();
    static constexpr std::string_view kConstants[] = {"true",  "false", "True",
                                                      "False", "none",  "None"};
    if (std::find(std::begin(kConstants), std::end(kConstants), t.text) != std::end(kConstants)) {
      ts_.fail(t.line, "can't assign to the constant '{}'", t.text);
    }
    if (with_namespace && ts_.at_op(".")) {
      ts_.next();
      auto e = make_expr(ExprKind::kNamespaceRef, t.line);
      e->name = t.text;
      e->attribute = ts_.expect_name().text;
      return e;
    }
    auto e = make_expr(ExprKind::kName, t.line);
    e->name = t.text;
    return e;
  }
  if (TokenStream::is_op(t, "(")) {
    ts_.next();
    ExprPtr inner = parse_assign_target(true, {}, with_namespace);
    ts_.expect_op(")");
    return inner;
  }
  ts_.fail(t.line, "can't assign to {}", TokenStream::describe(t));
}

bool ExpressionParser::is_tuple_end(std::initializer_list<std::string_view> extra_end) const {
  const Token& t = ts_.cur();
  if (t.type == TokenType::kVariableEnd || t.type == TokenType::kBlockEnd ||
      TokenStream::is_op(t, ")")) {
    return true;
  }
  return t.type == TokenType::kName &&
         std::find(extra_end.begin(), extra_end.end(), t.text) != extra_end.end();
}

ExprPtr ExpressionParser::parse_tuple(bool with_condexpr,
                                      std::initializer_list<std::string_view> extra_end,
                                      bool explicit_parentheses) {
  const int line = ts_.cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) ts_.expect_op(",");
    if (is_tuple_end(extra_end)) break;
    items.push_back(parse_expression(with_condexpr));
    if (ts_.at_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items.front());
    if (!explicit_parentheses) {
      ts_.fail(ts_.cur().line, "expected an expression, got {}", TokenStream::describe(ts_.cur()));
    }
  }
  auto t = make_expr(ExprKind::kTuple, line);
  t->children = std::move(items);
  return t;
}

ExprPtr ExpressionParser::parse_expression(bool with_condexpr) {
  const TokenStream::DepthGuard guard(ts_);
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr ExpressionParser::parse_condexpr() {
  const TokenStream::DepthGuard guard(ts_);
  int line = ts_.cur().line;
  ExprPtr expr1 = parse_or();
  while (ts_.skip_name("if")) {
    ExprPtr expr2 = parse_or();
    ExprPtr expr3 = ts_.skip_name("else") ? parse_condexpr() : nullptr;
    auto c = make_expr(ExprKind::kCondition, line);
    c->children.push_back(std::move(expr2));
    c->children.push_back(std::move(expr1));
    c->children.push_back(std::move(expr3));
    expr1 = std::move(c);
    line = ts_.cur().line;
  }
  return expr1;
}

ExprPtr ExpressionParser::parse_or() {
  const int line = ts_.cur().line;
  ExprPtr left = parse_and();
  while (ts_.skip_name("or")) left = binary_node(ExprKind::kOr, std::move(left), parse_and(), line);
  return left;
}

ExprPtr ExpressionParser::parse_and() {
  const int line = ts_.cur().line;
  ExprPtr left = parse_not();
  while (ts_.skip_name("and")) {
    left = binary_node(ExprKind::kAnd, std::move(left), parse_not(), line);
  }
  return left;
}

ExprPtr ExpressionParser::parse_not() {
  const TokenStream::DepthGuard guard(ts_);
  if (ts_.at_name("not")) {
    const int line = ts_.next().line;
    auto e = make_expr(ExprKind::kNot, line);
    e->children.push_back(parse_not());
    return e;
  }
  return parse_compare();
}

ExprPtr ExpressionParser::parse_compare() {
  const int line = ts_.cur().line;
  ExprPtr expr = parse_math1();
  std::vector<CompareOp> ops;
  std::vector<ExprPtr> operands;
  while (true) {
    const Token& t = ts_.cur();
    std::optional<CompareOp> op;
    if (t.type == TokenType::kOperator) {
      if (t.text == "==") op = CompareOp::kEq;
      if (t.text == "!=") op = CompareOp::kNe;
      if (t.text == "<") op = CompareOp::kLt;
      if (t.text == "<=") op = CompareOp::kLe;
      if (t.text == ">") op = CompareOp::kGt;
      if (t.text == ">=") op = CompareOp::kGe;
      if (op) ts_.next();
    } else if (TokenStream::is_name(t, "in")) {
      ts_.next();
      op = CompareOp::kIn;
    } else if (TokenStream::is_name(t, "not") && TokenStream::is_name(ts_.look(), "in")) {
      ts_.next();
      ts_.next();
      op = CompareOp::kNotIn;
    }
    if (!op) break;
    ops.push_back(*op);
    operands.push_back(parse_math1());
  }
  if (ops.empty()) return expr;
  auto c = make_expr(ExprKind::kCompare, line);
  c->children.push_back(std::move(expr));
  for (auto& operand : operands) c->children.push_back(std::move(operand));
  c->compare_ops = std::move(ops);
  return c;
}

ExprPtr ExpressionParser::parse_math1() {
  const int line = ts_.cur().line;
  ExprPtr left = parse_concat();
  while (ts_.at_op("+") || ts_.at_op("-")) {
    const BinaryOp op = ts_.next().text == "+" ? BinaryOp::kAdd : BinaryOp::kSub;
    left = binary_op(op, std::move(left), parse_concat(), line);
  }
  return left;
}

ExprPtr ExpressionParser::parse_concat() {
  const int line = ts_.cur().line;
  ExprPtr first = parse_math2();
  if (!ts_.at_op("~")) return first;
  auto c = make_expr(ExprKind::kConcat, line);
  c->children.push_back(std::move(first));
  while (ts_.skip_op("~")) c->children.push_back(parse_math2());
  return c;
}

ExprPtr ExpressionParser::parse_math2() {
  const int line = ts_.cur().line;
  ExprPtr left = parse_pow();
  while (true) {
    std::optional<BinaryOp> op;
    if (ts_.at_op("*")) op = BinaryOp::kMul;
    if (ts_.at_op("/")) op = BinaryOp::kDiv;
    if (ts_.at_op("//")) op = BinaryOp::kFloorDiv;
    if (ts_.at_op("%")) op = BinaryOp::kMod;
    if (!op) break;
    ts_.next();
    left = binary_op(*op, std::move(left), parse_pow(), line);
  }
  return left;
}

ExprPtr ExpressionParser::parse_pow() {
  const int line = ts_.cur().line;
  ExprPtr left = parse_unary(true);
  while (ts_.skip_op("**")) {
    left = binary_op(BinaryOp::kPow, std::move(left), parse_unary(true), line);
  }
  return left;
}

ExprPtr ExpressionParser::parse_unary(bool with_filter) {
  const TokenStream::DepthGuard guard(ts_);
  const int line = ts_.cur().line;
  ExprPtr node;
  if (ts_.at_op("-") || ts_.at_op("+")) {
    const bool negate = ts_.next().text == "-";
    node = make_expr(negate ? ExprKind::kNegate : ExprKind::kPlus, line);
    node->children.push_back(parse_unary(false));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr ExpressionParser::parse_primary() {
  const Token& t = ts_.cur();
  switch (t.type) {
    case TokenType::kName: {
      ts_.next();
      if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
        auto c = make_expr(ExprKind::kConstant, t.line);
        c->constant = Value::boolean(t.text == "true" || t.text == "True");
        return c;
      }
      if (t.text == "none" || t.text == "None") {
        auto c = make_expr(ExprKind::kConstant, t.line);
        c->constant = Value::none();
        return c;
      }
      auto n = make_expr(ExprKind::kName, t.line);
      n->name = t.text;
      return n;
    }
    case TokenType::kString: {
      auto c = make_expr(ExprKind::kConstant, t.line);
      std::string joined;
      while (ts_.cur().type == TokenType::kString) joined += ts_.next().text;  // 'a' 'b' is 'ab'
      c->constant = Value::string(std::move(joined));
      return c;
    }
    case TokenType::kInteger:
    case TokenType::kFloat: {
      ts_.next();
      auto c = make_expr(ExprKind::kConstant, t.line);
      c->constant =
          t.type == TokenType::kInteger ? Value::integer(t.integer) : Value::floating(t.floating);
      return c;
    }
    case TokenType::kOperator:
      if (t.text == "(") {
        ts_.next();
        ExprPtr inner = parse_tuple(true, {}, true);
        ts_.expect_op(")");
        return inner;
      }
      if (t.text == "[") return parse_list();
      if (t.text == "{") return parse_dict();
      break;
    case TokenType::kData:
    case TokenType::kVariableBegin:
    case TokenType::kVariableEnd:
    case TokenType::kBlockBegin:
    case TokenType::kBlockEnd:
    case TokenType::kEof:
      break;
  }
  ts_.fail(t.line, "unexpected {}", TokenStream::describe(t));
}

ExprPtr ExpressionParser::parse_list() {
  auto l = make_expr(ExprKind::kList, ts_.next().line);
  while (!ts_.at_op("]")) {
    if (!l->children.empty()) ts_.expect_op(",");
    if (ts_.at_op("]")) break;
    l->children.push_back(parse_expression(true));
  }
  ts_.expect_op("]");
  return l;
}

ExprPtr ExpressionParser::parse_dict() {
  auto d = make_expr(ExprKind::kDict, ts_.next().line);
  while (!ts_.at_op("}")) {
    if (!d->children.empty()) ts_.expect_op(",");
    if (ts_.at_op("}")) break;
    d->children.push_back(parse_expression(true));
    ts_.expect_op(":");
    d->children.push_back(parse_expression(true));
  }
  ts_.expect_op("}");
  return d;
}

ExprPtr ExpressionParser::parse_postfix(ExprPtr node) {
  while (true) {
    if (ts_.at_op(".") || ts_.at_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (ts_.at_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr ExpressionParser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (ts_.at_op("|")) {
      node = parse_filter(std::move(node), false);
    } else if (ts_.at_name("is")) {
      node = parse_test(std::move(node));
    } else if (ts_.at_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr ExpressionParser::parse_subscript(ExprPtr node) {
  const Token& t = ts_.next();
  if (t.text == ".") {
    const Token& attr = ts_.next();
    if (attr.type == TokenType::kName) {
      auto e = make_expr(ExprKind::kAttribute, t.line);
      e->name = attr.text;
      e->children.push_back(std::move(node));
      return e;
    }
    if (attr.type != TokenType::kInteger) {
      ts_.fail(attr.line, "expected a name or number after '.'");
    }
    auto index = make_expr(ExprKind::kConstant, attr.line);
    index->constant = Value::integer(attr.integer);
    auto e = make_expr(ExprKind::kItem, t.line);
    e->children.push_back(std::move(node));
    e->children.push_back(std::move(index));
    return e;
  }
  std::vector<ExprPtr> args;
  while (!ts_.at_op("]")) {
    if (!args.empty()) ts_.expect_op(",");
    args.push_back(parse_subscribed());
  }
  ts_.expect_op("]");
  if (args.size() == 1 && args.front()->kind == ExprKind::kSlice) {
    ExprPtr slice = std::move(args.front());
    slice->children.front() = std::move(node);
    return slice;
  }
  if (args.size() != 1) {
    ts_.fail(t.line, "subscripts with several indices ([a, b]) are not supported");
  }
  auto e = make_expr(ExprKind::kItem, t.line);
  e->children.push_back(std::move(node));
  e->children.push_back(std::move(args.front()));
  return e;
}

// An index or a slice a:b:c (returned as kSlice with a null object to fill in).
ExprPtr ExpressionParser::parse_subscribed() {
  const int line = ts_.cur().line;
  ExprPtr start;
  if (!ts_.at_op(":")) {
    start = parse_expression(true);
    if (!ts_.at_op(":")) return start;
  }
  ts_.next();  // the first ':'
  auto slice = make_expr(ExprKind::kSlice, line);
  slice->children.push_back(nullptr);  // the object, set by parse_subscript
  slice->children.push_back(std::move(start));
  const auto bound_end = [&] { return ts_.at_op("]") || ts_.at_op(",") || ts_.at_op(":"); };
  slice->children.push_back(bound_end() ? nullptr : parse_expression(true));
  ExprPtr step;
  if (ts_.skip_op(":") && !ts_.at_op("]") && !ts_.at_op(",")) step = parse_expression(true);
  slice->children.push_back(std::move(step));
  return slice;
}

void ExpressionParser::parse_call_args(Expr& call) {
  const int line = ts_.cur().line;
  ts_.expect_op("(");
  bool require_comma = false;
  while (!ts_.at_op(")")) {
    if (require_comma) {
      ts_.expect_op(",");
      if (ts_.at_op(")")) break;
    }
    if (ts_.at_op("*") || ts_.at_op("**")) {
      ts_.fail(ts_.cur().line, "unpacking arguments (*args, **kwargs) in a call is not supported");
    }
    if (ts_.cur().type == TokenType::kName && TokenStream::is_op(ts_.look(), "=")) {
      std::string key = ts_.next().text;
      ts_.next();
      call.keywords.emplace_back(std::move(key), parse_expression(true));
    } else {
      if (!call.keywords.empty()) {
        ts_.fail(line, "a positional argument follows a keyword argument");
      }
      call.children.push_back(parse_expression(true));
    }
    require_comma = true;
  }
  ts_.expect_op(")");
}

ExprPtr ExpressionParser::parse_call(ExprPtr callee) {
  auto e = make_expr(ExprKind::kCall, ts_.cur().line);
  e->children.push_back(std::move(callee));
  parse_call_args(*e);
  return e;
}

// `| name(args)` chains; a null `node` is the operand of a filter block or `set` block.
ExprPtr ExpressionParser::parse_filter(ExprPtr node, bool start_inline) {
  while (ts_.at_op("|") || start_inline) {
    if (!start_inline) ts_.next();
    start_inline = false;
    const Token& t = ts_.expect_name();
    std::string name = t.text;
    while (ts_.skip_op(".")) name += "." + ts_.expect_name().text;
    // jinja2 fails on a filter it does not know when it compiles the template.
    if (!jinja2_has_filter(name)) ts_.fail(t.line, "no filter named '{}'", name);
    auto e = make_expr(ExprKind::kFilter, t.line);
    e->name = name;
    e->children.push_back(std::move(node));
    if (ts_.at_op("(")) parse_call_args(*e);
    node = std::move(e);
  }
  return node;
}

ExprPtr ExpressionParser::parse_test(ExprPtr node) {
  const int line = ts_.next().line;  // 'is'
  const bool negated = ts_.skip_name("not");
  const Token& t = ts_.expect_name();
  std::string name = t.text;
  while (ts_.skip_op(".")) name += "." + ts_.expect_name().text;
  if (!jinja2_has_test(name)) ts_.fail(t.line, "no test named '{}'", name);
  auto e = make_expr(ExprKind::kTest, line);
  e->name = name;
  e->children.push_back(std::move(node));
  const Token& arg = ts_.cur();
  if (TokenStream::is_op(arg, "(")) {
    parse_call_args(*e);
  } else if ((arg.type == TokenType::kName || arg.type == TokenType::kString ||
              arg.type == TokenType::kInteger || arg.type == TokenType::kFloat ||
              TokenStream::is_op(arg, "[") || TokenStream::is_op(arg, "{")) &&
             !TokenStream::is_name(arg, "else") && !TokenStream::is_name(arg, "or") &&
             !TokenStream::is_name(arg, "and")) {
    if (TokenStream::is_name(arg, "is")) {
      ts_.fail(arg.line, "you cannot chain multiple tests with 'is'");
    }
    e->children.push_back(parse_postfix(parse_primary()));
  }
  if (!negated) return e;
  auto n = make_expr(ExprKind::kNot, line);
  n->children.push_back(std::move(e));
  return n;
}

}  // namespace offgen::jinja
