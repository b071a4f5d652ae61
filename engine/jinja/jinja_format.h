// Python's string formatting as templates use it: `'%s' % x` (printf style) and
// `'{}'.format(x)`. Only plain conversions are implemented (%s %r %d %i %%, {} {0} {name} with
// !s / !r); a width, precision or format spec is a RenderError, not a guess.
#pragma once

#include <string>
#include <string_view>

#include "engine/jinja/jinja_value.h"

namespace offgen::jinja {

// format % args: a tuple gives the positional arguments, anything else is the one argument.
std::string percent_format(std::string_view format, const Value& args);

// format.format(*args, **kwargs).
std::string brace_format(std::string_view format, const CallArgs& args);

}  // namespace offgen::jinja
