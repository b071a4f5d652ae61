// The syntax tree of a parsed template. Nodes are plain tagged structs (one kind enum, the
// children in a vector) rather than a class per node: the evaluator switches over the kinds, so a
// new kind is a compile error there until it is handled.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/jinja/jinja_value.h"

namespace offgen::jinja {

enum class ExprKind {
  kConstant,      // constant
  kName,          // name
  kList,          // children: items
  kTuple,         // children: items
  kDict,          // children: key, value, key, value, ...
  kAttribute,     // children[0].name
  kItem,          // children[0][children[1]]
  kSlice,         // children[0][children[1]:children[2]:children[3]], each bound may be null
  kCall,          // children[0](children[1..], keywords)
  kFilter,        // children[0] | name(children[1..], keywords); children[0] null in a filter block
  kTest,          // children[0] is name(children[1..], keywords)
  kNot,           // not children[0]
  kNegate,        // -children[0]
  kPlus,          // +children[0]
  kBinary,        // children[0] op children[1]
  kAnd,           // children[0] and children[1]
  kOr,            // children[0] or children[1]
  kConcat,        // children[0] ~ children[1] ~ ...
  kCompare,       // children[0] ops[0] children[1] ops[1] children[2] ...
  kCondition,     // children[1] if children[0] else children[2] (null: undefined)
  kNamespaceRef,  // name.attribute as an assignment target
};

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CompareOp { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::kConstant;
  int line = 0;
  Value constant;
  std::string name;       // kName, kAttribute, kFilter, kTest, kNamespaceRef
  std::string attribute;  // kNamespaceRef
  BinaryOp op = BinaryOp::kAdd;
  std::vector<CompareOp> compare_ops;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
};

enum class StmtKind {
  kText,      // text
  kPrint,     // {{ exprs[0] }}
  kIf,        // if exprs[i]: bodies[i]; bodies[exprs.size()] (when present) is the else
  kFor,       // for exprs[0] in exprs[1] [if exprs[2]]: bodies[0]; else bodies[1]
  kSet,       // set exprs[0] = exprs[1]
  kSetBlock,  // set exprs[0] [| filter chain exprs[1]]: bodies[0] rendered
  kMacro,     // macro name(params = defaults): bodies[0]
  kBreak,
  kContinue,
  kWith,         // with exprs[0] = exprs[1], exprs[2] = exprs[3], ...: bodies[0]
  kFilterBlock,  // filter exprs[0] (a chain whose innermost operand is null): bodies[0]
  kGeneration,   // transformers' {% generation %}: bodies[0], rendered as is
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  StmtKind kind = StmtKind::kText;
  int line = 0;
  std::string text;
  std::vector<ExprPtr> exprs;
  std::vector<Body> bodies;
  // kMacro
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // one per param; null where it has none
};

}  // namespace offgen::jinja
