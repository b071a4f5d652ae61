// The global functions a chat template can call: jinja2's range, dict and namespace, and the two
// transformers adds, raise_exception(message) and strftime_now(format).
#pragma once

#include <chrono>
#include <vector>

#include "engine/jinja/jinja_value.h"

namespace offgen::jinja {

// name -> function. strftime_now formats `now` in local time, as Python's datetime.now() does.
// Every namespace() made is also appended to `created`, which must outlive the functions (the
// renderer breaks reference cycles through them when a render ends).
Dict make_globals(std::chrono::system_clock::time_point now, std::vector<Value>* created);

}  // namespace offgen::jinja
