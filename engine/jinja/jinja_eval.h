// Renders a parsed template: statements write to an output string, expressions evaluate to
// Values. Scoping is jinja2's as seen from a template: a for loop's body (each iteration afresh),
// a macro call, a with block and the body of a set / filter block get their own scope; if blocks
// do not; `set` always assigns in the innermost scope, which is why templates carry state out of
// a loop in a namespace().
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/jinja/jinja_ast.h"
#include "engine/jinja/jinja_value.h"

namespace offgen::jinja {

class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent) : parent_(std::move(parent)) {}

  // The innermost binding of `name`, or nullptr.
  const Value* find(std::string_view name) const;
  void set(const std::string& name, Value value);
  void clear() { vars_.clear(); }

 private:
  std::shared_ptr<Scope> parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};

using ScopePtr = std::shared_ptr<Scope>;

// One render of one template; not shared between threads. Errors leave as offgen::Error naming
// the template and the line: "chat template <name>, line <n>: <what>".
class Renderer {
 public:
  Renderer(std::string_view template_name, std::chrono::system_clock::time_point now);
  // Breaks the reference cycles a render can make (a macro lives in the scope it captures; a
  // namespace can hold itself), which shared ownership alone would leak.
  ~Renderer();
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  // `context`: a dict of the template's variables (messages, add_generation_prompt, ...).
  std::string render(const Body& body, const Value& context);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec_body(const Body& body, const ScopePtr& scope, std::string& out);
  Flow exec(const Stmt& stmt, const ScopePtr& scope, std::string& out);
  Flow exec_statement(const Stmt& stmt, const ScopePtr& scope, std::string& out);
  Flow exec_for(const Stmt& stmt, const ScopePtr& scope, std::string& out);
  // Renders `body` in a child scope of `scope` (set / filter blocks, generation).
  std::string capture(const Body& body, const ScopePtr& scope);
  void assign(const Expr& target, const Value& value, Scope& scope);
  Value define_macro(const Stmt& macro, const ScopePtr& scope);
  Value call_macro(const Stmt& macro, const ScopePtr& closure, CallArgs& args);

  Value eval(const Expr& expr, const ScopePtr& scope);
  Value eval_expression(const Expr& expr, const ScopePtr& scope);
  CallArgs eval_arguments(const Expr& call, std::size_t first, const ScopePtr& scope);
  // A filter chain; a null innermost operand (filter / set blocks) is `block_input`.
  Value eval_filter(const Expr& filter, const ScopePtr& scope, const Value* block_input);
  Value eval_call(const Expr& call, const ScopePtr& scope);
  Value eval_compare(const Expr& compare, const ScopePtr& scope);

  [[noreturn]] void rethrow_located(int line) const;

  std::string name_;
  std::chrono::system_clock::time_point now_;
  int macro_depth_ = 0;
  std::vector<ScopePtr> macro_scopes_;  // scopes a macro was defined in
  std::vector<Value> objects_;          // every namespace and loop object made
};

}  // namespace offgen::jinja
