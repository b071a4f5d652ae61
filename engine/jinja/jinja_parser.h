// Parses a chat template into its syntax tree (jinja_ast.h), with jinja2's grammar and operator
// precedence. Tags offgen does not interpret (include, extends, call blocks, recursive loops,
// ...) are refused here, when the template is loaded. A filter or test offgen lacks is refused
// when a render reaches it instead: templates keep such things in branches (tools, images) that
// most renders never take, and jinja2 itself defers an unknown filter inside an if block to the
// render that reaches it.
#pragma once

#include <string_view>

#include "engine/jinja/jinja_ast.h"

namespace offgen::jinja {

// Throws offgen::Error "chat template <name>, line <n>: <what>" for a syntax error or an
// unsupported construct.
Body parse_template(std::string_view source, std::string_view name);

}  // namespace offgen::jinja
