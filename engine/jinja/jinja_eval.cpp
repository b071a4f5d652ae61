// See jinja_eval.h: scopes, statements and macros. Expressions are in jinja_expr.cpp.
#include "engine/jinja/jinja_eval.h"

#include <optional>

#include "engine/core/error.h"
#include "engine/jinja/jinja_error.h"
#include "engine/jinja/jinja_globals.h"
#include "engine/jinja/jinja_operators.h"

namespace offgen::jinja {

namespace {

// Deeper macro recursion than this is a runaway template (Python stops near 1000 frames, which
// jinja2 reaches at a few hundred nested calls).
constexpr int kMaxMacroDepth = 200;

void set_attribute(Object& object, const char* name, Value value) {
  object.attributes.set(Value::string(name), std::move(value));
}

}  // namespace

const Value* Scope::find(std::string_view name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent_.get()) {
    for (const auto& [key, value] : s->vars_) {
      if (key == name) return &value;
    }
  }
  return nullptr;
}

void Scope::set(const std::string& name, Value value) {
  for (auto& [key, existing] : vars_) {
    if (key == name) {
      existing = std::move(value);
      return;
    }
  }
  vars_.emplace_back(name, std::move(value));
}

Renderer::Renderer(std::string_view template_name, std::chrono::system_clock::time_point now)
    : name_(template_name), now_(now) {}

Renderer::~Renderer() {
  for (const ScopePtr& scope : macro_scopes_) scope->clear();
  for (const Value& object : objects_) object.as_object().attributes.entries.clear();
}

std::string Renderer::render(const Body& body, const Value& context) {
  // Globals, then the caller's variables (which may shadow them), then the template's own.
  auto globals = std::make_shared<Scope>(nullptr);
  for (const auto& [key, value] : make_globals(now_, &objects_).entries) {
    globals->set(key.as_string(), value);
  }
  auto variables = std::make_shared<Scope>(globals);
  for (const auto& [key, value] : context.as_dict().entries) variables->set(key.as_string(), value);
  auto top = std::make_shared<Scope>(variables);
  std::string out;
  exec_body(body, top, out);
  return out;
}

void Renderer::rethrow_located(int line) const {
  try {
    throw;
  } catch (const TemplateRaised& e) {
    throw Error(fmt::format("chat template {}, line {}: the template raised an error: {}", name_,
                            line, e.what()));
  } catch (const RenderError& e) {
    throw Error(fmt::format("chat template {}, line {}: {}", name_, line, e.what()));
  }
}

Renderer::Flow Renderer::exec_body(const Body& body, const ScopePtr& scope, std::string& out) {
  for (const StmtPtr& stmt : body) {
    const Flow flow = exec(*stmt, scope, out);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::exec(const Stmt& stmt, const ScopePtr& scope, std::string& out) {
  try {
    return exec_statement(stmt, scope, out);
  } catch (const RenderError&) {
    rethrow_located(stmt.line);
  }
}

std::string Renderer::capture(const Body& body, const ScopePtr& scope) {
  std::string out;
  exec_body(body, std::make_shared<Scope>(scope), out);
  return out;
}

Renderer::Flow Renderer::exec_statement(const Stmt& stmt, const ScopePtr& scope, std::string& out) {
  switch (stmt.kind) {
    case StmtKind::kText:
      out += stmt.text;
      return Flow::kNormal;
    case StmtKind::kPrint:
      out += to_str(eval(*stmt.exprs[0], scope));
      return Flow::kNormal;
    case StmtKind::kIf:
      for (std::size_t i = 0; i < stmt.exprs.size(); ++i) {
        if (truthy(eval(*stmt.exprs[i], scope))) return exec_body(stmt.bodies[i], scope, out);
      }
      if (stmt.bodies.size() > stmt.exprs.size()) return exec_body(stmt.bodies.back(), scope, out);
      return Flow::kNormal;
    case StmtKind::kFor:
      return exec_for(stmt, scope, out);
    case StmtKind::kSet:
      assign(*stmt.exprs[0], eval(*stmt.exprs[1], scope), *scope);
      return Flow::kNormal;
    case StmtKind::kSetBlock: {
      Value value = Value::string(capture(stmt.bodies[0], scope));
      if (stmt.exprs[1]) value = eval_filter(*stmt.exprs[1], scope, &value);
      assign(*stmt.exprs[0], value, *scope);
      return Flow::kNormal;
    }
    case StmtKind::kMacro:
      scope->set(stmt.name, define_macro(stmt, scope));
      return Flow::kNormal;
    case StmtKind::kBreak:
      return Flow::kBreak;
    case StmtKind::kContinue:
      return Flow::kContinue;
    case StmtKind::kWith: {
      // The values are evaluated in the enclosing scope, then bound in the new one.
      auto inner = std::make_shared<Scope>(scope);
      for (std::size_t i = 0; i + 1 < stmt.exprs.size(); i += 2) {
        assign(*stmt.exprs[i], eval(*stmt.exprs[i + 1], scope), *inner);
      }
      return exec_body(stmt.bodies[0], inner, out);
    }
    case StmtKind::kFilterBlock: {
      const Value body = Value::string(capture(stmt.bodies[0], scope));
      out += to_str(eval_filter(*stmt.exprs[0], scope, &body));
      return Flow::kNormal;
    }
    case StmtKind::kGeneration:
      out += capture(stmt.bodies[0], scope);
      return Flow::kNormal;
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::exec_for(const Stmt& stmt, const ScopePtr& scope, std::string& out) {
  const Expr& target = *stmt.exprs[0];
  std::vector<Value> items = iterate(eval(*stmt.exprs[1], scope));
  if (const Expr* test = stmt.exprs[2].get()) {
    // `for x in xs if cond`: filtered before the loop, so loop.length counts what is kept.
    std::vector<Value> kept;
    for (Value& item : items) {
      auto probe = std::make_shared<Scope>(scope);
      assign(target, item, *probe);
      if (truthy(eval(*test, probe))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec_body(stmt.bodies[1], std::make_shared<Scope>(scope), out);

  // One loop object for the whole loop, updated per iteration, as jinja2's LoopContext.
  const auto n = static_cast<std::int64_t>(items.size());
  const Value loop = Value::object(ObjectKind::kLoop, {});
  objects_.push_back(loop);
  Object& state = loop.as_object();
  auto index0 = std::make_shared<std::int64_t>(0);
  set_attribute(
      state, "cycle", Value::function("loop.cycle", [index0](CallArgs& args) {
        if (!args.keyword.empty()) render_fail("loop.cycle() takes no keyword arguments");
        if (args.positional.empty()) render_fail("no items for cycling given");
        return args.positional[static_cast<std::size_t>(*index0) % args.positional.size()];
      }));
  auto last_changed = std::make_shared<std::optional<std::vector<Value>>>();
  set_attribute(state, "changed", Value::function("loop.changed", [last_changed](CallArgs& args) {
                  if (!args.keyword.empty()) {
                    render_fail("loop.changed() takes no keyword arguments");
                  }
                  const Value now = Value::tuple(args.positional);
                  if (*last_changed && equal(Value::tuple(**last_changed), now)) {
                    return Value::boolean(false);
                  }
                  *last_changed = args.positional;
                  return Value::boolean(true);
                }));
  set_attribute(state, "length", Value::integer(n));
  set_attribute(state, "depth", Value::integer(1));
  set_attribute(state, "depth0", Value::integer(0));
  for (std::int64_t i = 0; i < n; ++i) {
    const auto at = static_cast<std::size_t>(i);
    *index0 = i;
    set_attribute(state, "index0", Value::integer(i));
    set_attribute(state, "index", Value::integer(i + 1));
    set_attribute(state, "revindex", Value::integer(n - i));
    set_attribute(state, "revindex0", Value::integer(n - i - 1));
    set_attribute(state, "first", Value::boolean(i == 0));
    set_attribute(state, "last", Value::boolean(i == n - 1));
    set_attribute(state, "previtem",
                  i > 0 ? items[at - 1] : Value::undefined("there is no previous item"));
    set_attribute(state, "nextitem",
                  i + 1 < n ? items[at + 1] : Value::undefined("there is no next item"));
    auto iteration = std::make_shared<Scope>(scope);
    iteration->set("loop", loop);
    assign(target, items[at], *iteration);
    if (exec_body(stmt.bodies[0], iteration, out) == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

void Renderer::assign(const Expr& target, const Value& value, Scope& scope) {
  switch (target.kind) {
    case ExprKind::kName:
      scope.set(target.name, value);
      return;
    case ExprKind::kTuple: {
      const std::vector<Value> parts = iterate(value);
      if (parts.size() != target.children.size()) {
        if (parts.size() > target.children.size()) {
          render_fail("too many values to unpack (expected {})", target.children.size());
        }
        render_fail("not enough values to unpack (expected {}, got {})", target.children.size(),
                    parts.size());
      }
      for (std::size_t i = 0; i < parts.size(); ++i) assign(*target.children[i], parts[i], scope);
      return;
    }
    case ExprKind::kNamespaceRef: {
      const Value* ns = scope.find(target.name);
      if (ns == nullptr || ns->kind() != Value::Kind::kObject ||
          ns->as_object().kind != ObjectKind::kNamespace) {
        render_fail("cannot assign attribute on non-namespace object ('{}')", target.name);
      }
      ns->as_object().attributes.set(Value::string(target.attribute), value);
      return;
    }
    case ExprKind::kConstant:
    case ExprKind::kList:
    case ExprKind::kDict:
    case ExprKind::kAttribute:
    case ExprKind::kItem:
    case ExprKind::kSlice:
    case ExprKind::kCall:
    case ExprKind::kFilter:
    case ExprKind::kTest:
    case ExprKind::kNot:
    case ExprKind::kNegate:
    case ExprKind::kPlus:
    case ExprKind::kBinary:
    case ExprKind::kAnd:
    case ExprKind::kOr:
    case ExprKind::kConcat:
    case ExprKind::kCompare:
    case ExprKind::kCondition:
      break;
  }
  render_fail("cannot assign to this expression");
}

Value Renderer::define_macro(const Stmt& macro, const ScopePtr& scope) {
  macro_scopes_.push_back(scope);
  // The macro sees the scope it was defined in, as it is when called (jinja2 resolves names at
  // call time), and the Renderer outlives every call: macros cannot leave a render.
  return Value::function(
      macro.name, [this, &macro, scope](CallArgs& args) { return call_macro(macro, scope, args); });
}

Value Renderer::call_macro(const Stmt& macro, const ScopePtr& closure, CallArgs& args) {
  if (args.positional.size() > macro.params.size()) {
    render_fail("macro '{}' takes not more than {} argument(s)", macro.name, macro.params.size());
  }
  if (macro_depth_ >= kMaxMacroDepth) render_fail("macro '{}' recursed too deeply", macro.name);
  auto frame = std::make_shared<Scope>(closure);
  std::vector<bool> given(macro.params.size(), false);
  for (std::size_t i = 0; i < args.positional.size(); ++i) {
    frame->set(macro.params[i], args.positional[i]);
    given[i] = true;
  }
  for (const auto& [key, value] : args.keyword) {
    std::size_t i = 0;
    while (i < macro.params.size() && macro.params[i] != key) ++i;
    if (i == macro.params.size()) {
      render_fail("macro '{}' takes no keyword argument '{}'", macro.name, key);
    }
    if (given[i]) render_fail("macro '{}' got multiple values for argument '{}'", macro.name, key);
    frame->set(key, value);
    given[i] = true;
  }
  for (std::size_t i = 0; i < macro.params.size(); ++i) {
    if (given[i]) continue;
    // Defaults are evaluated at call time, seeing the parameters bound before them.
    frame->set(macro.params[i], macro.defaults[i] ? eval(*macro.defaults[i], frame)
                                                  : Value::undefined(fmt::format(
                                                        "'{}' is undefined", macro.params[i])));
  }
  ++macro_depth_;
  std::string out;
  try {
    exec_body(macro.bodies[0], frame, out);
  } catch (...) {
    --macro_depth_;
    throw;
  }
  --macro_depth_;
  return Value::string(std::move(out));
}

}  // namespace offgen::jinja
