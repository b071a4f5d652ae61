// Jinja expressions, parsed with jinja2's grammar and precedence (the methods mirror
// jinja2/parser.py: parse_tuple, parse_condexpr, parse_or ... parse_postfix, parse_filter_expr),
// so the odd corners come out the same: `-x|abs` is `(-x)|abs`, `~` binds between + and *, `**`
// is left-associative, `is` tests take one bare argument, `a if b` needs no else.
#pragma once

#include <initializer_list>
#include <string_view>

#include "engine/jinja/jinja_ast.h"
#include "engine/jinja/jinja_token_stream.h"

namespace offgen::jinja {

class ExpressionParser {
 public:
  explicit ExpressionParser(TokenStream& tokens) : ts_(tokens) {}

  // An expression, or a tuple where commas separate several (`{{ a, b }}`, `set x = 1, 2`);
  // `extra_end` names that also end a tuple (`in` after a for target).
  ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<std::string_view> extra_end,
                      bool explicit_parentheses);
  ExprPtr parse_expression(bool with_condexpr);
  // A name, a namespace attribute (`ns.x`, where `with_namespace`) or a tuple of those.
  ExprPtr parse_assign_target(bool with_tuple, std::initializer_list<std::string_view> extra_end,
                              bool with_namespace);
  // `| name(args)` chains; a null `node` is the operand of a filter block or `set` block, and
  // `start_inline` starts at the name (after `{% filter`).
  ExprPtr parse_filter(ExprPtr node, bool start_inline);

 private:
  ExprPtr parse_target_primary(bool with_namespace);
  bool is_tuple_end(std::initializer_list<std::string_view> extra_end) const;
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_list();
  ExprPtr parse_dict();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  // An index, or a slice a:b:c (a kSlice whose object parse_subscript fills in).
  ExprPtr parse_subscribed();
  void parse_call_args(Expr& call);
  ExprPtr parse_call(ExprPtr callee);
  ExprPtr parse_test(ExprPtr node);

  TokenStream& ts_;
};

// A node of `kind` at `line`, otherwise empty.
ExprPtr make_expr(ExprKind kind, int line);

}  // namespace offgen::jinja
