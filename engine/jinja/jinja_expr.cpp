// Expression evaluation of the Renderer (jinja_eval.h). Each node catches the RenderError of the
// helpers it calls and rethrows it located at its own line, so an error names the innermost
// expression that failed.
#include "engine/jinja/jinja_access.h"
#include "engine/jinja/jinja_error.h"
#include "engine/jinja/jinja_eval.h"
#include "engine/jinja/jinja_filters.h"
#include "engine/jinja/jinja_operators.h"
#include "engine/jinja/jinja_tests.h"

namespace offgen::jinja {

Value Renderer::eval(const Expr& expr, const ScopePtr& scope) {
  try {
    return eval_expression(expr, scope);
  } catch (const RenderError&) {
    rethrow_located(expr.line);
  }
}

CallArgs Renderer::eval_arguments(const Expr& call, std::size_t first, const ScopePtr& scope) {
  CallArgs args;
  for (std::size_t i = first; i < call.children.size(); ++i) {
    args.positional.push_back(eval(*call.children[i], scope));
  }
  for (const auto& [key, value] : call.keywords) {
    args.keyword.emplace_back(key, eval(*value, scope));
  }
  return args;
}

Value Renderer::eval_filter(const Expr& filter, const ScopePtr& scope, const Value* block_input) {
  try {
    const Expr* operand = filter.children[0].get();
    Value input;
    if (operand == nullptr) {
      input = *block_input;
    } else if (operand->kind == ExprKind::kFilter) {
      input = eval_filter(*operand, scope, block_input);
    } else {
      input = eval(*operand, scope);
    }
    CallArgs args = eval_arguments(filter, 1, scope);
    return call_filter(filter.name, input, args);
  } catch (const RenderError&) {
    rethrow_located(filter.line);
  }
}

Value Renderer::eval_call(const Expr& call, const ScopePtr& scope) {
  const Value callee = eval(*call.children[0], scope);
  CallArgs args = eval_arguments(call, 1, scope);
  switch (callee.kind()) {
    case Value::Kind::kFunction:
      return callee.as_function().call(args);
    case Value::Kind::kUndefined:
      fail_undefined(callee);
    case Value::Kind::kObject:
      if (callee.as_object().kind == ObjectKind::kLoop) {
        render_fail("recursive loop calls (loop(...)) are not supported");
      }
      break;
    case Value::Kind::kNone:
    case Value::Kind::kBool:
    case Value::Kind::kInt:
    case Value::Kind::kFloat:
    case Value::Kind::kString:
    case Value::Kind::kSequence:
    case Value::Kind::kDict:
    case Value::Kind::kIterator:
      break;
  }
  render_fail("'{}' object is not callable", type_name(callee));
}

Value Renderer::eval_compare(const Expr& compare_expr, const ScopePtr& scope) {
  // a < b < c is (a < b) and (b < c), each operand evaluated once, stopping at the first false.
  Value left = eval(*compare_expr.children[0], scope);
  for (std::size_t i = 0; i < compare_expr.compare_ops.size(); ++i) {
    Value right = eval(*compare_expr.children[i + 1], scope);
    if (!compare(compare_expr.compare_ops[i], left, right)) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Renderer::eval_expression(const Expr& expr, const ScopePtr& scope) {
  switch (expr.kind) {
    case ExprKind::kConstant:
      return expr.constant;
    case ExprKind::kName:
      if (const Value* v = scope->find(expr.name)) return *v;
      return Value::undefined(fmt::format("'{}' is undefined", expr.name));
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      items.reserve(expr.children.size());
      for (const ExprPtr& child : expr.children) items.push_back(eval(*child, scope));
      return expr.kind == ExprKind::kList ? Value::list(std::move(items))
                                          : Value::tuple(std::move(items));
    }
    case ExprKind::kDict: {
      Dict dict;
      for (std::size_t i = 0; i + 1 < expr.children.size(); i += 2) {
        Value key = eval(*expr.children[i], scope);
        if (!hashable(key)) render_fail("unhashable type: '{}'", type_name(key));
        dict.set(std::move(key), eval(*expr.children[i + 1], scope));
      }
      return Value::dict(std::move(dict));
    }
    case ExprKind::kAttribute:
      return get_attribute(eval(*expr.children[0], scope), expr.name);
    case ExprKind::kItem:
      return get_item(eval(*expr.children[0], scope), eval(*expr.children[1], scope));
    case ExprKind::kSlice: {
      const Value object = eval(*expr.children[0], scope);
      const auto bound = [&](std::size_t i) {
        return expr.children[i] ? eval(*expr.children[i], scope) : Value::none();
      };
      const Value start = bound(1);
      const Value stop = bound(2);
      const Value step = bound(3);
      return get_slice(object, start, stop, step);
    }
    case ExprKind::kCall:
      return eval_call(expr, scope);
    case ExprKind::kFilter:
      return eval_filter(expr, scope, nullptr);
    case ExprKind::kTest: {
      const Value value = eval(*expr.children[0], scope);
      CallArgs args = eval_arguments(expr, 1, scope);
      return Value::boolean(call_test(expr.name, value, args));
    }
    case ExprKind::kNot:
      return Value::boolean(!truthy(eval(*expr.children[0], scope)));
    case ExprKind::kNegate:
      return negate(eval(*expr.children[0], scope));
    case ExprKind::kPlus:
      return unary_plus(eval(*expr.children[0], scope));
    case ExprKind::kBinary: {
      const Value left = eval(*expr.children[0], scope);
      const Value right = eval(*expr.children[1], scope);
      return binary_operation(expr.op, left, right);
    }
    case ExprKind::kAnd: {
      Value left = eval(*expr.children[0], scope);
      return truthy(left) ? eval(*expr.children[1], scope) : left;
    }
    case ExprKind::kOr: {
      Value left = eval(*expr.children[0], scope);
      return truthy(left) ? left : eval(*expr.children[1], scope);
    }
    case ExprKind::kConcat: {
      std::string out;
      for (const ExprPtr& child : expr.children) out += to_str(eval(*child, scope));
      return Value::string(std::move(out));
    }
    case ExprKind::kCompare:
      return eval_compare(expr, scope);
    case ExprKind::kCondition:
      if (truthy(eval(*expr.children[0], scope))) return eval(*expr.children[1], scope);
      if (expr.children[2]) return eval(*expr.children[2], scope);
      return Value::undefined(fmt::format(
          "the inline if-expression on line {} evaluated to false and no else section was defined.",
          expr.line));
    case ExprKind::kNamespaceRef:
      break;
  }
  render_fail("this expression cannot be evaluated");
}

}  // namespace offgen::jinja
